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

"""A step's trace is kept by every store: memory, an SQLite file across a restart, a migration."""

from __future__ import annotations

import json
import math
import sqlite3
import struct
import zlib

from muscle_mem_ros import MemoryStore, Snapshot, SqliteStore, Step, ToolKind
from muscle_mem_ros.errors import StoreCorruptError, StoreError
from muscle_mem_ros.records import Series, Trace
from muscle_mem_ros.store import schema
from muscle_mem_ros.store.codec import decode_trace, encode_trace
import pytest


def traced() -> Trace:
    """Two sensors of different widths, feedback with leaves, a sample before acceptance."""
    times = (-0.012, 0.013, 0.038, 0.063)
    return Trace(
        rate=40.0,
        sensors={'arm': Series(times, ((0.1, -2.5, 3.0), (0.11, -2.4, 3.0),
                                       (0.125, -2.3, 2.9), (0.14, -2.2, math.inf))),
                 'gripper': Series(times[1:], ((0.0, 1.0), (0.5, 1.0), (1e-300, -0.0)))},
        feedback=Series(times[2:], ((1.0, 7.0), (2.0, 7.5))),
        feedback_leaves=('sequence[0]', 'partial.x'))


def same(got: Trace | None, want: Trace | None) -> bool:
    """Return True when two traces hold the same numbers (Series compare by identity)."""
    if got is None or want is None:
        return got is want

    def rows(s: Series | None) -> object:
        return None if s is None else (s.times, s.values)

    return (got.rate == want.rate and got.feedback_leaves == want.feedback_leaves
            and list(got.sensors) == list(want.sensors)
            and all(rows(got.sensors[k]) == rows(want.sensors[k]) for k in want.sensors)
            and rows(got.feedback) == rows(want.feedback))


def step(name: str, trace: Trace | None = None) -> Step:
    return Step(tool=name, kind=ToolKind.ACTION, type_name='pkg/action/A',
                payload=name.encode(), payload_json='{}',
                pre=Snapshot(features={'q': (1.0, 2.0)}), duration=0.1, trace=trace)


def traces(store, trajectory_id: int) -> list[Trace | None]:
    return [n.step.trace for n in store.path(trajectory_id)]


def test_encoding_is_zlib_of_a_json_header_and_little_endian_doubles():
    data = encode_trace(traced())
    raw = zlib.decompress(data)
    (size,) = struct.unpack_from('<I', raw)
    header = json.loads(raw[4:4 + size])
    assert header == {'v': 1, 'r': 40.0, 's': [['arm', 4, 3], ['gripper', 3, 2]],
                      'f': [2, 2], 'l': ['sequence[0]', 'partial.x']}
    floats = struct.unpack(f'<{(len(raw) - 4 - size) // 8}d', raw[4 + size:])
    assert len(floats) == 4 * 4 + 3 * 3 + 2 * 3
    assert floats[:7] == (-0.012, 0.013, 0.038, 0.063, 0.1, -2.5, 3.0)  # times, then rows
    assert floats[-6:] == (0.038, 0.063, 1.0, 7.0, 2.0, 7.5)
    assert same(decode_trace(data), traced())
    assert encode_trace(None) is None and decode_trace(None) is None
    empty = decode_trace(encode_trace(Trace(rate=10.0, sensors={'s': Series((), ())})))
    assert empty is not None and empty.sensors['s'].times == () and empty.feedback is None


def test_memory_store_keeps_the_trace_as_recorded():
    store = MemoryStore()
    trace = traced()
    rec = store.begin(task='t', variant='', params_json='{}')
    rec.append(step('a', trace))
    rec.append(step('b'))
    info = rec.commit()
    assert [t is trace for t in traces(store, info.id)] == [True, False]
    assert traces(store, info.id)[1] is None
    more = store.add_trajectory(task='t', variant='', params_json='{}',
                                steps=[step('c', trace)])
    assert traces(store, more.id)[0] is trace


def test_sqlite_store_keeps_the_trace_across_a_restart(tmp_path):
    path = tmp_path / 's.db'
    with SqliteStore(path=path) as s:
        rec = s.begin(task='t', variant='', params_json='{}')
        rec.append(step('a', traced()))
        rec.append(step('b'))
        recorded = rec.commit()
        added = s.add_trajectory(task='t', variant='x', params_json='{}',
                                 steps=[step('c'), step('d', traced())])
        cut = s.begin(task='t', variant='', params_json='{}')  # never committed
        cut.append(step('e', traced()))
        assert same(s.children(task='t', variant='', parent=None)[0].step.trace, traced())
    with SqliteStore(path=path) as s:
        a, b = traces(s, recorded.id)
        c, d = traces(s, added.id)
        assert same(a, traced()) and same(d, traced()) and b is None and c is None
        (kept,) = s.recording_steps(cut.id)
        assert same(kept.trace, traced())


def test_a_schema_6_file_is_migrated_with_a_backup_and_keeps_its_steps(tmp_path):
    path = tmp_path / 'old.db'
    conn = sqlite3.connect(path, isolation_level=None)
    schema.migrate(conn, current=0, target=6)
    conn.execute(
        'INSERT INTO nodes (task, variant, parent, depth, tool, kind, type_name, payload,'
        ' payload_json, pre, post, status, duration, sig, success_count, last_used, terminal)'
        " VALUES ('t', '', NULL, 0, 'old', 'action', 'x', X'00', '{}', NULL, NULL, 'succeeded',"
        ' 0.5, NULL, 1, 0.0, 1)')
    conn.execute('INSERT INTO trajectories (task, variant, params_json, leaf, node_ids, created,'
                 " last_used, replay_count) VALUES ('t', '', '{}', 1, '[1]', 0.0, 0.0, 0)")
    conn.close()
    with SqliteStore(path=path) as s:
        assert s.backup == tmp_path / 'old.db.v6.bak' and s.backup.exists()
        (old,) = s.trajectories()
        (node,) = s.path(old.id)
        assert (node.step.tool, node.step.duration, node.step.trace) == ('old', 0.5, None)
        new = s.add_trajectory(task='t', variant='', params_json='{}',
                               steps=[step('new', traced())])
    with SqliteStore(path=path) as s:
        assert traces(s, old.id) == [None] and same(traces(s, new.id)[0], traced())
    backup = sqlite3.connect(tmp_path / 'old.db.v6.bak')
    assert backup.execute('PRAGMA user_version').fetchone()[0] == 6
    assert 'trace' not in {r[1] for r in backup.execute('PRAGMA table_info(nodes)')}
    backup.close()
    conn = sqlite3.connect(path)
    assert conn.execute('PRAGMA user_version').fetchone()[0] == schema.SCHEMA_VERSION == 14
    conn.close()


def _zlib_of(header: object, tail: bytes = b'') -> bytes:
    text = json.dumps(header).encode()
    return zlib.compress(struct.pack('<I', len(text)) + text + tail)


@pytest.mark.parametrize('blob, message', [
    (b'\x80\x04K\x01.', 'not zlib data'),  # a pickle is refused before anything is read
    (zlib.compress(b'\x01'), 'no readable header'),
    (_zlib_of({'v': 99, 'r': 40.0, 's': [], 'f': None, 'l': []}), 'format version 99'),
    (_zlib_of({'r': 40.0, 's': [], 'f': None, 'l': []}), 'format version None'),
    (_zlib_of({'v': 1, 'r': 40.0, 's': [['a', 2, 1]], 'f': None, 'l': []}, b'\0' * 24),
     'malformed'),  # 4 doubles needed
    (_zlib_of({'v': 1, 'r': 40.0, 's': [['a', -1, 1]], 'f': None, 'l': []}, b'\0' * 16),
     'malformed'),
    (_zlib_of({'v': 1, 'r': 40.0, 's': [], 'f': None, 'l': []}, b'\0' * 8), 'accounts for'),
    (_zlib_of({'v': 1, 's': [], 'f': None, 'l': []}), 'malformed'),
])
def test_a_corrupt_trace_is_a_clear_store_error(blob, message):
    with pytest.raises(StoreCorruptError, match=message):
        decode_trace(blob)


def test_a_corrupt_trace_in_a_file_names_the_node(tmp_path):
    path = tmp_path / 's.db'
    with SqliteStore(path=path) as s:
        info = s.add_trajectory(task='t', variant='', params_json='{}',
                                steps=[step('a', traced())])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE nodes SET trace = X'789c0102' WHERE id = ?", (info.node_ids[0],))
    conn.commit()
    conn.close()
    with SqliteStore(path=path) as s:
        with pytest.raises(StoreCorruptError, match=f'node {info.node_ids[0]}: stored trace'):
            s.children(task='t', variant='', parent=None)


def test_a_ragged_trace_is_refused_when_stored(tmp_path):
    ragged = Trace(rate=40.0, sensors={'arm': Series((0.0, 0.1), ((1.0, 2.0), (1.0,)))})
    short = Trace(rate=40.0, feedback=Series((0.0, 0.1), ((1.0,),)), feedback_leaves=('x',))
    with SqliteStore(path=tmp_path / 's.db') as s:
        rec = s.begin(task='t', variant='', params_json='{}')
        with pytest.raises(StoreError, match="sensor 'arm' has 2 times and 2 rows"):
            rec.append(step('a', ragged))
        with pytest.raises(StoreError, match='the feedback has 2 times and 1 rows'):
            rec.append(step('a', short))
        rec.append(step('a', traced()))
        assert same(traces(s, rec.commit().id)[0], traced())
