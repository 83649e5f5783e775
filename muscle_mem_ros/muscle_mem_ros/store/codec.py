# Copyright 2026 muscle_mem_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""
Rows of the SQLite store <-> records.

Nothing here unpickles unless the store was opened with ``allow_pickle``.
A snapshot is a container of the safe format (:mod:`.values`) with magic
``MMS1`` and the header::

    {"t": taken_at, "f": [[name, dtype, shape, blob], ...], "s": [[name, stamp], ...],
     "u": user capture (tagged value, absent when None),
     "i": [[camera sensor, blob], ...] (thumbnails, PNG; absent when none), "n": [blob lengths]}

The thumbnails (``Snapshot.images``) ride in the same container, so no column or schema
version was added for them: a snapshot without any is byte for byte what it was before
(``"i"`` is left out), a reader that predates them skips the unknown key, and the
PostgreSQL store, which keeps the same bytes, needs nothing either.

Each feature is its raw little-endian bytes (``<f8``, shape ``[n]``), read back
with :func:`struct.unpack` into a tuple of floats. Goals and requests are
stored as the CDR bytes they are (plus type name and JSON); a Python call's
arguments as :meth:`~muscle_mem_ros.engine.arguments.CallSpec.encode` writes them.

A step's trace (:class:`~muscle_mem_ros.records.Trace`, what the watched sensors did
while it ran: a few seconds at 40 Hz, thousands of floats) is one zlib-compressed
buffer, so a tree's rows stay small and the format stays readable without Python::

    <u4 header length> {"v": 1, "r": rate, "s": [[name, samples, width], ...],
                        "f": [samples, width] or null, "l": [feedback leaf, ...]}
    then per series (sensors in header order, then the feedback): its times, then its
    values row-major, all little-endian float64.

An unknown version or a buffer that does not add up raises
:class:`~muscle_mem_ros.errors.StoreCorruptError`; never pickle.
"""

from __future__ import annotations

import json
import struct
from typing import Any
import zlib

import numpy as np

from .values import Blobs, pack, read_container, unpack, write_container
from ..errors import StoreCorruptError, StoreError, UnsafeValueError
from ..records import Node, Series, Snapshot, Step, StepStatus, ToolKind, Trace, TrajectoryInfo

__all__ = ['decode_snapshot', 'decode_trace', 'encode_snapshot', 'encode_trace', 'NODE_COLS',
           'node_from_row', 'SNAPSHOT_MAGIC', 'STEP_COLS', 'step_row', 'TRACE_VERSION',
           'TRAJ_COLS', 'trajectory_from_row']

NODE_COLS = ('id, parent, depth, tool, kind, type_name, payload, payload_json, pre, post,'
             ' status, duration, success_count, last_used, terminal, task, variant, trace')
STEP_COLS = 'tool, kind, type_name, payload, payload_json, pre, post, status, duration, trace'
"""The columns of :func:`step_row`, in its order (``nodes`` and ``recording_steps``)."""
TRAJ_COLS = ('id, task, variant, params_json, node_ids, created, last_used, replay_count,'
             ' body')


SNAPSHOT_MAGIC = b'MMS1'
"""First bytes of a stored snapshot."""


def encode_snapshot(snapshot: Snapshot | None, *, allow_pickle: bool = False) -> bytes | None:
    """
    Serialize a snapshot in the safe format (see the module docstring).

    :param snapshot: The snapshot, or None.
    :param allow_pickle: Pickle a user capture that is not JSON data or NumPy arrays.
    :return: The bytes, or None for no snapshot.
    :raises StoreError: the user capture cannot be stored.
    """
    if snapshot is None:
        return None
    blobs = Blobs()
    features = []
    for name, values in snapshot.features.items():
        data = np.asarray(values, dtype='<f8').reshape(-1)
        features.append([str(name), '<f8', [data.size], blobs.add(data.tobytes())])
    header: dict[str, Any] = {
        't': float(snapshot.taken_at), 'f': features,
        's': [[str(name), float(t)] for name, t in snapshot.stamps.items()]}
    if snapshot.user is not None:
        try:
            header['u'] = pack(snapshot.user, blobs, allow_pickle=allow_pickle)
        except UnsafeValueError as err:
            raise StoreError(
                f'cannot store snapshot: the user capture is not storable safely ({err}); only '
                'JSON data and NumPy arrays are stored, arbitrary objects are not picklable '
                'into this store unless it is opened with allow_pickle=True') from err
        except Exception as err:
            raise StoreError(
                f'cannot store snapshot: user capture is not picklable: {err}') from err
    if snapshot.images:
        header['i'] = [[str(name), blobs.add(bytes(png))]
                       for name, png in sorted(snapshot.images.items())]
    return write_container(SNAPSHOT_MAGIC, header, blobs)


def decode_snapshot(data: bytes | None, *, allow_pickle: bool = False) -> Snapshot | None:
    """
    Inverse of :func:`encode_snapshot`; never runs stored code.

    :param data: The stored bytes, or None.
    :param allow_pickle: Unpickle a pickled user capture (trusted files only).
    :return: The snapshot, or None.
    :raises StoreCorruptError: not a snapshot in the safe format.
    :raises StorePickleError: a pickled user capture and ``allow_pickle`` is False.
    """
    if data is None:
        return None
    header, blobs = read_container(SNAPSHOT_MAGIC, data)
    try:
        features = {}
        for name, dtype, shape, index in header['f']:
            raw = blobs[index]
            if dtype == '<f8' and len(shape) == 1 and shape[0] * 8 == len(raw):
                features[name] = struct.unpack(f'<{shape[0]}d', raw)
            else:
                array = unpack({'a': [dtype, shape, index]}, blobs)
                features[name] = tuple(array.astype(np.float64).reshape(-1).tolist())
        stamps = {name: float(t) for name, t in header['s']}
        taken_at = float(header['t'])
        images = _images(header.get('i', ()), blobs)
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise StoreCorruptError(f'stored snapshot is malformed: {err!r}') from err
    user = unpack(header['u'], blobs, allow_pickle=allow_pickle) if 'u' in header else None
    return Snapshot(features=features, stamps=stamps, taken_at=taken_at, user=user,
                    images=images)


def _images(entries: Any, blobs: list[bytes]) -> dict[str, bytes]:
    """Return the thumbnails a snapshot header lists; a bad entry raises ValueError."""
    images = {}
    for name, index in entries:
        if type(name) is not str or type(index) is not int or not 0 <= index < len(blobs):
            raise ValueError(f'thumbnail entry {[name, index]!r}')
        images[name] = bytes(blobs[index])
    return images


TRACE_VERSION = 1
"""Format version of a stored trace (the header's ``v``)."""

_HEADER_LENGTH = struct.Struct('<I')


def _series_bytes(series: Series, what: str) -> tuple[list[int], bytes]:
    """Return [samples, width] and the series' bytes (times, then values row-major)."""
    n = len(series.times)
    width = len(series.values[0]) if series.values else 0
    if len(series.values) != n or any(len(row) != width for row in series.values):
        raise StoreError(f'cannot store trace: {what} has {n} times and {len(series.values)} '
                         f'rows, and every row must have {width} values')
    try:
        times = np.asarray(series.times, dtype='<f8')
        values = np.asarray(series.values, dtype='<f8').reshape(n * width)
    except (TypeError, ValueError) as err:
        raise StoreError(f'cannot store trace: {what} is not numbers: {err}') from err
    return [n, width], times.tobytes() + values.tobytes()


def encode_trace(trace: Trace | None) -> bytes | None:
    """
    Serialize a trace (see the module docstring).

    :param trace: The trace, or None.
    :return: The compressed bytes, or None for no trace.
    :raises StoreError: a series is ragged or not numbers.
    """
    if trace is None:
        return None
    sensors, parts = [], []
    for name, series in trace.sensors.items():
        shape, raw = _series_bytes(series, f'sensor {name!r}')
        sensors.append([str(name), *shape])
        parts.append(raw)
    feedback = None
    if trace.feedback is not None:
        feedback, raw = _series_bytes(trace.feedback, 'the feedback')
        parts.append(raw)
    header = json.dumps({'v': TRACE_VERSION, 'r': float(trace.rate), 's': sensors,
                         'f': feedback, 'l': [str(leaf) for leaf in trace.feedback_leaves]},
                        separators=(',', ':')).encode()
    return zlib.compress(_HEADER_LENGTH.pack(len(header)) + header + b''.join(parts))


def _series_from(data: bytes, at: int, n: int, width: int) -> tuple[Series, int]:
    """Read one series of ``n`` samples of ``width`` at ``at``; return it and where it ends."""
    if n < 0 or width < 0:
        raise ValueError(f'a series of {n} samples of width {width}')
    end = at + 8 * n * (1 + width)
    if end > len(data):
        raise ValueError(f'{len(data)} bytes, a series needs bytes up to {end}')
    times = np.frombuffer(data, dtype='<f8', count=n, offset=at)
    values = np.frombuffer(data, dtype='<f8', count=n * width, offset=at + 8 * n)
    rows = values.reshape(n, width).tolist()
    return Series(times=tuple(times.tolist()), values=tuple(map(tuple, rows))), end


def decode_trace(data: bytes | None) -> Trace | None:
    """
    Inverse of :func:`encode_trace`.

    :param data: The stored bytes, or None.
    :return: The trace, or None.
    :raises StoreCorruptError: not a trace of a known version, or it does not add up.
    """
    if data is None:
        return None
    try:
        raw = zlib.decompress(data)
    except zlib.error as err:
        raise StoreCorruptError(f'stored trace is not zlib data ({err}); corrupt') from err
    try:
        (size,) = _HEADER_LENGTH.unpack_from(raw)
        header = json.loads(raw[4:4 + size])
        version = header.get('v') if type(header) is dict else None
    except (struct.error, ValueError, RecursionError) as err:
        raise StoreCorruptError(f'stored trace has no readable header: {err}') from err
    if version != TRACE_VERSION:
        raise StoreCorruptError(
            f'stored trace is of format version {version!r}, this muscle_mem_ros reads version '
            f'{TRACE_VERSION} (written by a newer muscle_mem_ros, or corrupt)')
    try:
        at, sensors = 4 + size, {}
        for name, n, width in header['s']:
            sensors[str(name)], at = _series_from(raw, at, int(n), int(width))
        feedback = None
        if header['f'] is not None:
            feedback, at = _series_from(raw, at, int(header['f'][0]), int(header['f'][1]))
        if at != len(raw):
            raise ValueError(f'{len(raw)} bytes, the header accounts for {at}')
        return Trace(rate=float(header['r']), sensors=sensors, feedback=feedback,
                     feedback_leaves=tuple(str(leaf) for leaf in header['l']))
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise StoreCorruptError(f'stored trace is malformed: {err!r}') from err


def node_from_row(row: tuple[Any, ...], allow_pickle: bool = False) -> Node:
    """Build a Node from a row selected with NODE_COLS."""
    step = Step(tool=row[3], kind=ToolKind(row[4]), type_name=row[5], payload=bytes(row[6]),
                payload_json=row[7], pre=decode_snapshot(row[8], allow_pickle=allow_pickle),
                post=decode_snapshot(row[9], allow_pickle=allow_pickle),
                status=StepStatus(row[10]), duration=row[11], trace=decode_trace(row[17]))
    return Node(id=row[0], parent=row[1], depth=row[2], step=step, success_count=row[12],
                last_used=row[13], terminal=bool(row[14]))


def trajectory_from_row(row: tuple[Any, ...]) -> TrajectoryInfo:
    """Build a TrajectoryInfo from a row selected with TRAJ_COLS (and ``robot_id`` if any)."""
    return TrajectoryInfo(id=row[0], task=row[1], variant=row[2], params_json=row[3],
                          node_ids=tuple(json.loads(row[4])), created=row[5],
                          last_used=row[6], replay_count=row[7], body=row[8] or '',
                          robot_id=row[9] if len(row) > 9 else '')


def step_row(step: Step, allow_pickle: bool = False) -> tuple[Any, ...]:
    """Return the step columns ``tool`` .. ``duration``, then ``trace`` (:data:`STEP_COLS`)."""
    return (step.tool, step.kind.value, step.type_name, bytes(step.payload), step.payload_json,
            encode_snapshot(step.pre, allow_pickle=allow_pickle),
            encode_snapshot(step.post, allow_pickle=allow_pickle), step.status.value,
            float(step.duration), encode_trace(step.trace))
