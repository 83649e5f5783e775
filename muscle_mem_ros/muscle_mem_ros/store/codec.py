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
     "u": user capture (tagged value, absent when None), "n": [blob lengths]}

Each feature is its raw little-endian bytes (``<f8``, shape ``[n]``), read back
with :func:`struct.unpack` into a tuple of floats. Goals and requests are
stored as the CDR bytes they are (plus type name and JSON); a Python call's
arguments as :meth:`~muscle_mem_ros.engine.arguments.CallSpec.encode` writes them.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from .values import Blobs, pack, read_container, unpack, write_container
from ..errors import StoreCorruptError, StoreError, UnsafeValueError
from ..records import Node, Snapshot, Step, StepStatus, ToolKind, TrajectoryInfo

__all__ = ['decode_snapshot', 'encode_snapshot', 'NODE_COLS', 'node_from_row', 'SNAPSHOT_MAGIC',
           'step_row', 'TRAJ_COLS', 'trajectory_from_row']

NODE_COLS = ('id, parent, depth, tool, kind, type_name, payload, payload_json, pre, post,'
             ' status, duration, success_count, last_used, terminal, task, variant')
TRAJ_COLS = 'id, task, variant, params_json, node_ids, created, last_used, replay_count'


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
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise StoreCorruptError(f'stored snapshot is malformed: {err!r}') from err
    user = unpack(header['u'], blobs, allow_pickle=allow_pickle) if 'u' in header else None
    return Snapshot(features=features, stamps=stamps, taken_at=taken_at, user=user)


def node_from_row(row: tuple[Any, ...], allow_pickle: bool = False) -> Node:
    """Build a Node from a row selected with NODE_COLS."""
    step = Step(tool=row[3], kind=ToolKind(row[4]), type_name=row[5], payload=bytes(row[6]),
                payload_json=row[7], pre=decode_snapshot(row[8], allow_pickle=allow_pickle),
                post=decode_snapshot(row[9], allow_pickle=allow_pickle),
                status=StepStatus(row[10]), duration=row[11])
    return Node(id=row[0], parent=row[1], depth=row[2], step=step, success_count=row[12],
                last_used=row[13], terminal=bool(row[14]))


def trajectory_from_row(row: tuple[Any, ...]) -> TrajectoryInfo:
    """Build a TrajectoryInfo from a row selected with TRAJ_COLS (and ``robot_id`` if any)."""
    return TrajectoryInfo(id=row[0], task=row[1], variant=row[2], params_json=row[3],
                          node_ids=tuple(json.loads(row[4])), created=row[5],
                          last_used=row[6], replay_count=row[7],
                          robot_id=row[8] if len(row) > 8 else '')


def step_row(step: Step, allow_pickle: bool = False) -> tuple[Any, ...]:
    """Return the step columns from ``tool`` to ``duration``, in table order."""
    return (step.tool, step.kind.value, step.type_name, bytes(step.payload), step.payload_json,
            encode_snapshot(step.pre, allow_pickle=allow_pickle),
            encode_snapshot(step.post, allow_pickle=allow_pickle), step.status.value,
            float(step.duration))
