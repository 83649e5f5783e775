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

"""SqliteStore guarantees: WAL, versioning, refusing foreign files, crashes, concurrent readers."""

from __future__ import annotations

import os
from pathlib import Path
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

from core_helpers import subprocess_env
from muscle_mem_ros import (
    Snapshot,
    SqliteStore,
    Step,
    StoreCorruptError,
    StoreError,
    StoreVersionError,
    ToolKind,
)
from muscle_mem_ros.store import schema
import pytest


def step(name: str, x: float = 0.0) -> Step:
    return Step(tool=name, kind=ToolKind.ACTION, type_name='pkg/action/A',
                payload=name.encode(), payload_json='{}',
                pre=Snapshot(features={'q': (x, 1.0)}, stamps={'q': 5.0}, taken_at=5.5))


def make_store(path: Path, n: int = 3) -> None:
    with SqliteStore(path=path) as s:
        for i in range(n):
            s.add_trajectory(task='t', variant='', params_json='{}',
                             steps=[step(f'a{i}', i), step('b', i)])


def test_wal_header_and_meta(tmp_path):
    path = tmp_path / 's.db'
    make_store(path)
    conn = sqlite3.connect(path)
    assert conn.execute('PRAGMA journal_mode').fetchone()[0] == 'wal'
    assert conn.execute('PRAGMA application_id').fetchone()[0] == schema.APP_ID
    assert conn.execute('PRAGMA user_version').fetchone()[0] == schema.SCHEMA_VERSION
    assert conn.execute("SELECT value FROM meta WHERE key = 'app'").fetchone()[0] == schema.MAGIC
    conn.close()


def test_reopen_keeps_everything(tmp_path):
    path = tmp_path / 's.db'
    make_store(path)
    with SqliteStore(path=path) as s:
        assert len(s.trajectories()) == 3
        first = s.children(task='t', variant='', parent=None)[0]
        assert first.step.pre.features == {'q': (0.0, 1.0)}
        assert first.step.pre.stamps == {'q': 5.0} and first.step.pre.taken_at == 5.5
        assert first.step.payload == b'a0'
        traj = s.trajectories()[0]
        assert [n.step.tool for n in s.path(traj.id)] == ['a0', 'b']


def _foreign_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute('CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)')
    conn.execute("INSERT INTO customers (name) VALUES ('ada')")
    conn.commit()
    conn.close()


def _newer(path: Path) -> None:
    make_store(path)
    conn = sqlite3.connect(path)
    conn.execute(f'PRAGMA user_version = {schema.SCHEMA_VERSION + 1}')
    conn.commit()
    conn.close()


def _truncated(path: Path) -> None:
    make_store(path, n=200)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def _wrong_meta(path: Path) -> None:
    make_store(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = 'someone else' WHERE key = 'app'")
    conn.commit()
    conn.close()


def _garbage_pages(path: Path) -> None:
    make_store(path, n=50)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], 'big')
    for offset in range(page, len(data), 7):
        data[offset] = 0xA5
    path.write_bytes(bytes(data))


@pytest.mark.parametrize('make, error, match', [
    (lambda p: p.write_bytes(os.urandom(4096)), StoreCorruptError, 'not an SQLite file'),
    (lambda p: p.write_text('name,value\nq,1\n'), StoreCorruptError, 'not an SQLite file'),
    (_foreign_sqlite, StoreCorruptError, 'not a muscle_mem_ros store'),
    (_newer, StoreVersionError, 'newer than this muscle_mem_ros understands'),
    (_truncated, StoreCorruptError, 'truncated'),
    (_wrong_meta, StoreCorruptError, 'meta table'),
    (_garbage_pages, StoreCorruptError, 'corrupt'),
])
def test_bad_files_are_refused_and_untouched(tmp_path, make, error, match):
    path = tmp_path / 'bad.db'
    make(path)
    before = path.read_bytes()
    with pytest.raises(error, match=match):
        SqliteStore(path=path)
    assert path.read_bytes() == before
    assert not (tmp_path / 'bad.db-wal').exists() or (tmp_path / 'bad.db-wal').stat().st_size == 0


def test_migration_from_version_1_keeps_data(tmp_path):
    path = tmp_path / 'old.db'
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute('PRAGMA journal_mode = WAL')
    schema.migrate(conn, current=0, target=1)
    conn.execute(
        'INSERT INTO nodes (task, variant, parent, depth, tool, kind, type_name, payload,'
        ' payload_json, pre, post, status, duration, sig, success_count, last_used, terminal)'
        " VALUES ('t', '', NULL, 0, 'a', 'action', 'x', X'00', '{}', NULL, NULL, 'succeeded',"
        ' 0.0, NULL, 1, 0.0, 1)')
    conn.execute('INSERT INTO trajectories (task, variant, params_json, leaf, node_ids, created,'
                 " last_used, replay_count) VALUES ('t', '', '{}', 1, '[1]', 0.0, 0.0, 0)")
    conn.execute('PRAGMA wal_checkpoint(TRUNCATE)')
    assert conn.execute('PRAGMA user_version').fetchone()[0] == 1
    conn.close()
    with SqliteStore(path=path) as s:
        assert [t.node_ids for t in s.trajectories()] == [(1,)]
        s.note_outcome(task='t', hit=True)  # needs the version 2 table
        assert s.tasks()[0].hits == 1
        assert s.tally(task='t', variant='') == (1, 1)  # version 4 counted the old rows
    conn = sqlite3.connect(path)
    assert conn.execute('PRAGMA user_version').fetchone()[0] == schema.SCHEMA_VERSION
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {'nodes_sig', 'trajectories_tree'} <= names
    conn.close()


def test_migration_from_version_5_keeps_approvals_covering_what_existed_then(tmp_path):
    """An approval from before coverage: its trajectory, or those created by then; no binding."""
    from muscle_mem_ros.bindings.rules import Binding, DECLARED, Plan
    from muscle_mem_ros.replay.gates import Gate, trusted
    path = tmp_path / 'old.db'
    conn = sqlite3.connect(path, isolation_level=None)
    schema.migrate(conn, current=0, target=5)
    for node, (task, created) in enumerate((('t', 100.0), ('t', 300.0), ('t', 500.0)), 1):
        conn.execute(
            'INSERT INTO nodes (task, variant, parent, depth, tool, kind, type_name, payload,'
            ' payload_json, pre, post, status, duration, sig, success_count, last_used,'
            " terminal) VALUES (?, '', NULL, 0, ?, 'action', 'x', X'00', '{}', NULL, NULL,"
            " 'succeeded', 0.0, NULL, 1, 0.0, 1)", (task, f'tool{node}'))
        conn.execute('INSERT INTO trajectories (task, variant, params_json, leaf, node_ids,'
                     " created, last_used, replay_count) VALUES (?, '', '{}', ?, ?, ?, 0.0, 0)",
                     (task, node, f'[{node}]', created))
    conn.execute("INSERT INTO approvals VALUES ('t', 0, 'carol', 200.0)")  # the whole task
    conn.execute("INSERT INTO approvals VALUES ('t', 3, 'dave', 600.0)")  # trajectory 3
    conn.close()
    with SqliteStore(path=path) as s:
        assert s.backup == tmp_path / 'old.db.v5.bak' and s.backup.exists()
        whole, third = s.approvals(task='t')
        assert (whole.who, whole.covers, whole.bindings) == ('carol', None, ())
        first, second, last = s.trajectories(task='t')
        assert whole.covers_trajectory(first) and not whole.covers_trajectory(second)
        assert third.covers_trajectory(last) and not third.covers_trajectory(first)
        bound = {1: Plan((Binding('x', 'param:x'),))}  # inferred: who saw it, nobody knows
        trust = trusted(Gate.parse('approval'), s.trajectories(task='t'), plans=bound,
                        agreement=({}, {}), approvals=s.approvals(task='t'))
        assert trust.nodes == frozenset({3})
        assert trust.reasons[2].startswith("trajectory 2 was learned after carol's approval")
        assert trust.reasons[1].startswith(
            "the inferred binding x <- param:x of trajectory 1 is not covered by carol's")
        assert 'predates approvals listing their bindings; approve it again' in trust.reasons[1]
        # nor did they record the declared bindings they saw (schema 10): they saw none
        assert whole.declared is None and third.declared is None
        declared = {3: Plan((Binding('y', 'sensor:q[0]', 0.0, 0.1, DECLARED),))}
        trust = trusted(Gate.parse('approval'), [last], plans=declared, agreement=({}, {}),
                        approvals=s.approvals(task='t'))
        assert trust.reasons[3].startswith('the declared binding y <- sensor:q[0] (max_shift '
                                           '0.1) on learned step 3 of trajectory 3 is not '
                                           "covered by dave's approval")
        assert 'predates approvals listing declared bindings' in trust.reasons[3]
        renewed = s.approve(task='t', who='carol', covers=[1, 2], bindings=[(1, 'x', 'param:x')])
        assert s.approvals(task='t')[-1] == renewed and renewed.declared == ()
    conn = sqlite3.connect(path)
    assert conn.execute('PRAGMA user_version').fetchone()[0] == schema.SCHEMA_VERSION == 14
    conn.close()


def test_unpicklable_capture_is_a_clear_error(tmp_path):
    with SqliteStore(path=tmp_path / 's.db') as s:
        rec = s.begin(task='t', variant='', params_json='{}')
        bad = Step(tool='a', kind=ToolKind.FUNCTION, type_name='h', payload=b'',
                   pre=Snapshot(user=lambda: 1))
        with pytest.raises(StoreError, match='not picklable'):
            rec.append(bad)
        rec.append(step('ok'))
        assert rec.commit().node_ids


WRITER = textwrap.dedent("""
    import sys, time
    from muscle_mem_ros import SqliteStore, Snapshot, Step, ToolKind
    def step(name, x=0.0):
        return Step(tool=name, kind=ToolKind.ACTION, type_name='pkg/action/A',
                    payload=name.encode(), pre=Snapshot(features={'q': (x, 1.0)}))
    s = SqliteStore(path=sys.argv[1])
    for i in range(2):
        rec = s.begin(task='t', variant='', params_json='{}')
        rec.append(step('done%d' % i, i))
        rec.append(step('end', i))
        rec.commit()
    rec = s.begin(task='t', variant='', params_json='{}')
    for j in range(3):
        rec.append(step('half%d' % j, 9.0))
    print('READY', flush=True)
    time.sleep(60)
""")


def test_killed_writer_loses_nothing_committed_and_replays_no_half_recording(tmp_path):
    path = tmp_path / 's.db'
    proc = subprocess.Popen([sys.executable, '-c', WRITER, str(path)], stdout=subprocess.PIPE,
                            text=True, env=subprocess_env())
    try:
        assert proc.stdout.readline().strip() == 'READY'
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    with SqliteStore(path=path) as s:
        trajs = s.trajectories()
        assert len(trajs) == 2
        assert [[n.step.tool for n in s.path(t.id)] for t in trajs] == [
            ['done0', 'end'], ['done1', 'end']]
        roots = s.children(task='t', variant='', parent=None)
        assert [n.step.tool for n in roots] == ['done0', 'done1']
        (half,) = s.incomplete_recordings()
        assert half.step_count == 3 and half.task == 't'
        assert [st.tool for st in s.recording_steps(half.id)] == ['half0', 'half1', 'half2']


READER = textwrap.dedent("""
    import sys, time
    from muscle_mem_ros import SqliteStore
    s = SqliteStore(path=sys.argv[1])
    seen = [(len(s.trajectories()), len(s.children(task='t', variant='', parent=None)))]
    print('GO', flush=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        n = len(s.trajectories())
        kids = len(s.children(task='t', variant='', parent=None))
        seen.append((n, kids))
        if n >= 40:
            break
        time.sleep(0.005)
    counts = [c for c, _ in seen]
    assert counts == sorted(counts), counts
    assert all(k >= c for c, k in seen), seen  # children read after the count
    assert seen[-1] == (40, 40), seen
    print(len(set(counts)), counts[-1], flush=True)
""")


def test_second_process_reads_while_first_writes(tmp_path):
    path = tmp_path / 's.db'
    with SqliteStore(path=path) as s:
        reader = subprocess.Popen([sys.executable, '-c', READER, str(path)], env=subprocess_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert reader.stdout.readline().strip() == 'GO'
            for i in range(40):
                rec = s.begin(task='t', variant='', params_json='{}')
                rec.append(step(f'w{i}', i))
                rec.commit()
                time.sleep(0.01)
            out, err = reader.communicate(timeout=60)
        finally:
            if reader.poll() is None:
                reader.kill()
    assert reader.returncode == 0, err
    distinct, last = map(int, out.split()[-2:])
    assert last == 40
    assert distinct > 2  # the reader saw the store grow, not just the final state


def test_a_failing_merge_leaves_nothing_behind(tmp_path):
    path = tmp_path / 's.db'
    bad = Step(tool='b', kind=ToolKind.FUNCTION, type_name='h', payload=b'',
               pre=Snapshot(user=lambda: 1))
    with SqliteStore(path=path) as s:
        s.add_trajectory(task='t', variant='', params_json='{}', steps=[step('keep')])
        with pytest.raises(StoreError, match='not picklable'):
            s.add_trajectory(task='t', variant='', params_json='{}',
                             steps=[step('a'), step('b'), bad])
        with pytest.raises(StoreError), s.batch():
            s.add_trajectory(task='t', variant='', params_json='{}', steps=[step('c')])
            s.add_trajectory(task='t', variant='', params_json='{}', steps=[bad])
        assert [n.step.tool for n in s.children(task='t', variant='', parent=None)] == ['keep']
    with SqliteStore(path=path) as s:
        assert len(s.trajectories()) == 1
        assert [n.step.tool for n in s.children(task='t', variant='', parent=None)] == ['keep']


def test_preload_reads_first_steps_ahead(tmp_path):
    path = tmp_path / 's.db'
    make_store(path, n=4)
    with SqliteStore(path=path) as s:
        s.add_trajectory(task='other', variant='v', params_json='{}', steps=[step('z')])
        assert s.preload(task='t') == 4
        assert s.preload() == 5
        assert len(s.children(task='t', variant='', parent=None)) == 4
