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
Convert rows of schema version 2 and older (pickled) to the safe format, without trusting them.

Up to schema version 2, snapshots (the ``pre``/``post`` columns) were pickled
:class:`~muscle_mem_ros.records.Snapshot` objects and a Python call's payload a
pickled :class:`~muscle_mem_ros.engine.arguments.CallSpec`. A store file may come from
anywhere, so the conversion reads those pickles with :class:`RestrictedUnpickler`:
it resolves only the classes the old code wrote (``Snapshot``, ``CallSpec``,
``Arg``, and NumPy's array, dtype and scalar reconstruction for captures
that held arrays); every other global (``os.system``, ``builtins.open``, ...) is refused
before anything is called, so a crafted ``__reduce__`` never runs. Built-in
containers and numbers (tuple, list, dict, float, str, ...) need no global and
load as usual. A store opened with ``allow_pickle=True`` (the Python API user
vouches for the file) converts with the plain unpickler instead, so captures of
the user's own classes survive as pickled values.

A row that cannot be converted (a refused or broken pickle, a capture that is
not JSON data or NumPy arrays when pickle is not allowed) is dropped, together
with the tree below it and every trajectory through it; an incomplete
recording with such a step is dropped whole. This happens only after the caller
made the backup copy, and inside the migration's one transaction; what was
dropped is logged and returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import io
import json
import logging
import pickle
import sqlite3
from typing import Any

from . import sqlwrites
from .base import step_signature
from .codec import encode_snapshot
from ..errors import StoreCorruptError
from ..records import Snapshot, Step, StepStatus, ToolKind

__all__ = ['convert_rows', 'Dropped', 'RestrictedUnpickler']

_log = logging.getLogger(__name__)
_BATCH = 500


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the classes the old store format wrote."""

    def find_class(self, module: str, name: str) -> Any:
        """
        Return an allowed class; refuse every other global.

        :param module: Module named in the pickle.
        :param name: Attribute named in the pickle.
        :return: The class.
        :raises pickle.UnpicklingError: anything not on the list.
        """
        allowed = _allowed()
        try:
            return allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f'refused to load {module}.{name} from a stored pickle (only the classes '
                'the old store format wrote are allowed)') from None

    def persistent_load(self, pid: Any) -> Any:
        """Refuse persistent ids (the old format never wrote them)."""
        raise pickle.UnpicklingError('refused a persistent id in a stored pickle')


def _allowed() -> dict[tuple[str, str], Any]:
    import numpy as np

    from ..engine.arguments import Arg, CallSpec
    table: dict[tuple[str, str], Any] = {
        ('muscle_mem_ros.records', 'Snapshot'): Snapshot,
        ('muscle_mem_ros.engine.arguments', 'CallSpec'): CallSpec,
        ('muscle_mem_ros.engine.arguments', 'Arg'): Arg,
        ('numpy', 'ndarray'): np.ndarray,
        ('numpy', 'dtype'): np.dtype,
    }
    reconstruct = np.ndarray.__reduce__(np.zeros(1))[0]
    scalar = np.float64(0).__reduce__()[0]
    for module in ('numpy.core.multiarray', 'numpy._core.multiarray'):
        table[(module, '_reconstruct')] = reconstruct
        table[(module, 'scalar')] = scalar
    frombuffer = np.ndarray.__reduce_ex__(np.zeros(1), 5)[0]
    for module in ('numpy.core.numeric', 'numpy._core.numeric'):
        table[(module, '_frombuffer')] = frombuffer
    return table


def _load(data: bytes, trusted: bool) -> Any:
    if trusted:
        return pickle.loads(data)  # noqa: S301 - the store was opened with allow_pickle
    return RestrictedUnpickler(io.BytesIO(data)).load()


def _snapshot(data: bytes | None, trusted: bool) -> tuple[bytes | None, Snapshot | None]:
    if data is None:
        return None, None
    snapshot = _load(bytes(data), trusted)
    if not isinstance(snapshot, Snapshot):
        raise StoreCorruptError(f'stored snapshot is a {type(snapshot).__name__}')
    features = getattr(snapshot, 'features', None)
    stamps = getattr(snapshot, 'stamps', None)
    if not isinstance(features, dict) or not isinstance(stamps, dict):
        raise StoreCorruptError('stored snapshot has no feature or stamp dict')
    clean = Snapshot(features=dict(features), stamps=dict(stamps),
                     taken_at=float(getattr(snapshot, 'taken_at', 0.0)),
                     user=getattr(snapshot, 'user', None))
    return encode_snapshot(clean, allow_pickle=trusted), clean


def _payload(kind: str, data: bytes, trusted: bool) -> bytes:
    if kind != ToolKind.FUNCTION.value or bytes(data[:1]) != b'\x80':
        return bytes(data)
    from ..engine.arguments import CallSpec
    spec = _load(bytes(data), trusted)
    if not isinstance(spec, CallSpec):
        raise StoreCorruptError(f'stored call is a {type(spec).__name__}')
    return spec.encode(allow_pickle=trusted)


@dataclass
class Dropped:
    """What a conversion could not keep (ids as they were in the old file)."""

    nodes: list[int] = field(default_factory=list)
    trajectories: list[int] = field(default_factory=list)
    recordings: list[int] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


def _convert_nodes(conn: sqlite3.Connection, trusted: bool, dropped: Dropped) -> list[int]:
    bad: list[int] = []
    last = -1
    while True:
        rows = conn.execute(
            'SELECT id, tool, kind, type_name, payload, payload_json, pre, post, status,'
            ' duration FROM nodes WHERE id > ? ORDER BY id LIMIT ?', (last, _BATCH)).fetchall()
        if not rows:
            return bad
        updates = []
        for row in rows:
            last = row[0]
            try:
                payload = _payload(row[2], row[4], trusted)
                (pre, snapshot), (post, _) = _snapshot(row[6], trusted), _snapshot(row[7], trusted)
                step = Step(tool=row[1], kind=ToolKind(row[2]), type_name=row[3],
                            payload=payload, payload_json=row[5], pre=snapshot,
                            status=StepStatus(row[8]), duration=row[9])
                updates.append((payload, pre, post, step_signature(step), row[0]))
            except Exception as err:  # noqa: BLE001 - any failure drops the row, reported
                bad.append(row[0])
                dropped.reasons.append(f'node {row[0]}: {err}')
        conn.executemany('UPDATE nodes SET payload = ?, pre = ?, post = ?, sig = ? WHERE id = ?',
                         updates)


def _drop_nodes(conn: sqlite3.Connection, bad: list[int], dropped: Dropped) -> None:
    doomed = set(bad)
    frontier = list(bad)
    while frontier:
        marks = ','.join('?' * len(frontier))
        frontier = [r[0] for r in conn.execute(
            f'SELECT id FROM nodes WHERE parent IN ({marks})', frontier)]
        frontier = [i for i in frontier if i not in doomed]
        doomed.update(frontier)
    for tid, node_ids in conn.execute('SELECT id, node_ids FROM trajectories').fetchall():
        if doomed.intersection(json.loads(node_ids)):
            dropped.trajectories.append(tid)
    conn.executemany('DELETE FROM trajectories WHERE id = ?',
                     [(t,) for t in dropped.trajectories])
    parents = set()
    for nid in sorted(doomed):
        row = conn.execute('SELECT parent FROM nodes WHERE id = ?', (nid,)).fetchone()
        if row is not None and row[0] is not None and row[0] not in doomed:
            parents.add(row[0])
    conn.executemany('DELETE FROM nodes WHERE id = ?', [(n,) for n in sorted(doomed)])
    dropped.nodes.extend(sorted(doomed))
    for cursor in parents:
        dropped.nodes.extend(sqlwrites.prune_unused(conn, cursor))


def _convert_recordings(conn: sqlite3.Connection, trusted: bool, dropped: Dropped) -> None:
    rows = conn.execute('SELECT recording, seq, kind, payload, pre, post FROM recording_steps'
                        ' ORDER BY recording, seq').fetchall()
    bad: set[int] = set()
    updates = []
    for rec, seq, kind, payload, pre, post in rows:
        if rec in bad:
            continue
        try:
            updates.append((_payload(kind, payload, trusted), _snapshot(pre, trusted)[0],
                            _snapshot(post, trusted)[0], rec, seq))
        except Exception as err:  # noqa: BLE001 - any failure drops the recording, reported
            bad.add(rec)
            dropped.reasons.append(f'recording {rec} step {seq}: {err}')
    conn.executemany('UPDATE recording_steps SET payload = ?, pre = ?, post = ?'
                     ' WHERE recording = ? AND seq = ?', [u for u in updates if u[3] not in bad])
    for rec in sorted(bad):
        conn.execute('DELETE FROM recording_steps WHERE recording = ?', (rec,))
        conn.execute('DELETE FROM recordings WHERE id = ?', (rec,))
        dropped.recordings.append(rec)


def convert_rows(conn: sqlite3.Connection, *, trusted: bool) -> Dropped:
    """
    Rewrite every pickled row in the safe format; the caller holds the transaction.

    :param conn: The store, inside the migration's write transaction.
    :param trusted: The store was opened with ``allow_pickle`` (plain unpickling).
    :return: What was dropped, and why.
    """
    dropped = Dropped()
    bad = _convert_nodes(conn, trusted, dropped)
    if bad:
        _drop_nodes(conn, bad, dropped)
    _convert_recordings(conn, trusted, dropped)
    return dropped
