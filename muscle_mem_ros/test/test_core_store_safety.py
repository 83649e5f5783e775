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
A store file never runs code: no unpickling, safe migration of old pickled files, opt-in pickle.

Old-format files are built here the way the schema-2 code wrote them:
``pickle.dumps(Snapshot(...), protocol=5)`` in ``pre``/``post`` and
``pickle.dumps(CallSpec(...), protocol=4)`` as a Python call's payload.
"""

from __future__ import annotations

from dataclasses import dataclass
import json
from pathlib import Path
import pickle
import sqlite3
import time

from muscle_mem_ros import (
    Check,
    Engine,
    Snapshot,
    SqliteStore,
    Step,
    StoreError,
    StorePickleError,
    ToolKind,
)
from muscle_mem_ros.engine.arguments import Arg, CallSpec
from muscle_mem_ros.store import open_store, schema
from muscle_mem_ros.store.values import Blobs, write_container
import numpy as np
import pytest


class Evil:
    """A pickle payload: loading it creates ``marker`` (stands for any code)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, 'w'))


@dataclass(frozen=True)
class Screen:
    """A user capture of the user's own class (needs pickle)."""

    text: str


def evil_snapshot(marker: Path) -> bytes:
    """Return an old-format ``pre`` column whose user capture runs code when unpickled."""
    return pickle.dumps(Snapshot(features={'q': (0.0,)}, user=Evil(marker)), protocol=5)


def old_snapshot(x: float, user=None) -> bytes:
    return pickle.dumps(Snapshot(features={'q': (x, 1.0)}, stamps={'q': 5.0}, taken_at=5.5,
                                 user=user), protocol=5)


def old_store(path: Path, rows: list[dict], trajectories: list[list[int]],
              recordings: list[list[dict]] = ()) -> None:
    """Write a schema-2 file: nodes (each a dict of columns), trajectories by node ids."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute('PRAGMA journal_mode = WAL')
    schema.migrate(conn, current=0, target=2)
    for i, row in enumerate(rows, start=1):
        full = {'task': 't', 'variant': '', 'parent': None, 'depth': 0, 'tool': f'a{i}',
                'kind': 'action', 'type_name': 'pkg/action/A', 'payload': b'goal%d' % i,
                'payload_json': '{}', 'pre': None, 'post': None, 'status': 'succeeded',
                'duration': 0.5, 'sig': None, 'success_count': 1, 'last_used': 1.0,
                'terminal': 0, **row}
        conn.execute(f'INSERT INTO nodes (id, {", ".join(full)}) VALUES (?{", ?" * len(full)})',
                     (i, *full.values()))
    for ids in trajectories:
        conn.execute('UPDATE nodes SET terminal = 1 WHERE id = ?', (ids[-1],))
        conn.execute('INSERT INTO trajectories (task, variant, params_json, leaf, node_ids,'
                     " created, last_used, replay_count) SELECT task, '', '{}', id, ?, 1, 1, 0"
                     ' FROM nodes WHERE id = ?', (json.dumps(ids), ids[-1]))
    for steps in recordings:
        rec = conn.execute('INSERT INTO recordings (task, variant, params_json, parent, started)'
                           " VALUES ('t', '', '{}', NULL, ?)", (time.time(),)).lastrowid
        for seq, st in enumerate(steps):
            conn.execute('INSERT INTO recording_steps (recording, seq, tool, kind, type_name,'
                         ' payload, payload_json, pre, post, status, duration) VALUES'
                         " (?, ?, 'r', 'action', 'pkg/action/A', X'00', '{}', ?, NULL,"
                         " 'succeeded', 0.0)", (rec, seq, st['pre']))
    conn.execute('PRAGMA wal_checkpoint(TRUNCATE)')
    conn.close()


def load_everything(store) -> list[Exception]:
    """Read every node and recorded step the way the node's warm-up and walks do."""
    errors: list[Exception] = []
    try:
        store.preload()
    except StoreError as err:
        errors.append(err)
    keys = {(t.task, t.variant) for t in store.trajectories()} | {('t', '')}
    for task, variant in keys:
        frontier = [None]
        while frontier:
            parent = frontier.pop()
            try:
                kids = store.children(task=task, variant=variant, parent=parent)
            except StoreError as err:
                errors.append(err)
                continue
            frontier.extend(k.id for k in kids)
    for rec in store.incomplete_recordings():
        try:
            store.recording_steps(rec.id)
        except StoreError as err:
            errors.append(err)
    return errors


def test_the_payload_would_run_code(tmp_path):
    marker = tmp_path / 'proof'
    pickle.loads(evil_snapshot(marker))  # the plain unpickler runs it: the test means something
    assert marker.exists()


def test_crafted_old_store_runs_no_code_in_the_node_path(tmp_path):
    marker = tmp_path / 'pwned'
    path = tmp_path / 'cache.db'
    old_store(path, [{'pre': old_snapshot(0.0)},
                     {'parent': 1, 'depth': 1, 'pre': evil_snapshot(marker)},
                     {'pre': old_snapshot(3.0)}],
              [[1, 2], [3]], recordings=[[{'pre': evil_snapshot(marker)}]])
    store = open_store(str(path))  # what the node does at startup
    try:
        assert load_everything(store) == []
        assert not marker.exists()
        # The poisoned node, the trajectory through it and the recording are gone; the rest stays.
        assert [[n.step.tool for n in store.path(t.id)] for t in store.trajectories()] == [['a3']]
        assert store.incomplete_recordings() == []
        dropped = store.migration_dropped
        assert dropped.nodes == [2, 1] and dropped.recordings == [1]
        assert any('io.open' in r or 'builtins.open' in r for r in dropped.reasons)
        assert store.backup == tmp_path / 'cache.db.v2.bak'
    finally:
        store.close()
    assert not marker.exists()
    backup = sqlite3.connect(tmp_path / 'cache.db.v2.bak')
    assert backup.execute('PRAGMA user_version').fetchone()[0] == 2
    assert backup.execute('SELECT count(*) FROM nodes').fetchone()[0] == 3  # nothing lost
    backup.close()


def _poison_current(path: Path, marker: Path, *, as_tagged: bool, task: str = 't') -> None:
    """Put a code-running pickle into a current-schema store, raw or as a pickled capture."""
    with SqliteStore(path=path) as s:
        s.add_trajectory(task=task, variant='', params_json='{}', steps=[
            Step(tool='a', kind=ToolKind.ACTION, type_name='pkg/action/A', payload=b'g',
                 pre=Snapshot(features={'q': (0.0,)}))])
    if as_tagged:
        blobs = Blobs()
        header = {'t': 0.0, 'f': [], 's': [], 'u': {'p': blobs.add(pickle.dumps(Evil(marker)))}}
        data = write_container(b'MMS1', header, blobs)
    else:
        data = evil_snapshot(marker)
    conn = sqlite3.connect(path)
    conn.execute('UPDATE nodes SET pre = ?', (data,))
    conn.commit()
    conn.close()


@pytest.mark.parametrize('as_tagged', [False, True])
def test_crafted_current_store_runs_no_code_and_says_why(tmp_path, as_tagged):
    marker = tmp_path / 'pwned'
    path = tmp_path / 'cache.db'
    _poison_current(path, marker, as_tagged=as_tagged)
    store = open_store(str(path))
    try:
        errors = load_everything(store)
    finally:
        store.close()
    assert not marker.exists()
    assert errors
    for err in errors:
        assert 'node 1:' in str(err)
        if as_tagged:
            assert isinstance(err, StorePickleError)
            assert 'allow_pickle' in str(err) and 'not unpickled' in str(err)
        else:
            assert 'not in the safe format' in str(err)


def _engine(store, state, **kwargs) -> Engine:
    engine = Engine(store=store, **kwargs)

    @engine.function(pre_check=Check(lambda: state['w'], lambda a, b: a == b))
    def act():
        state['x'] += 1

    engine.set_agent(act)
    return engine


@pytest.mark.parametrize('version', [2, 3])
def test_crafted_store_runs_no_code_in_the_default_python_api(tmp_path, version):
    marker = tmp_path / 'pwned'
    path = tmp_path / 'cache.db'
    if version == 2:
        old_store(path, [{'pre': evil_snapshot(marker), 'kind': 'function', 'task': '[]'}],
                  [[1]], recordings=[[{'pre': evil_snapshot(marker)}]])
    else:
        _poison_current(path, marker, as_tagged=True, task='[]')
    state = {'x': 0, 'w': 0}
    engine = _engine(str(path), state)
    if version == 2:
        assert not engine() and engine()  # the poisoned node is gone: learn, then replay
    else:
        with pytest.raises(StorePickleError):
            engine()
    engine.store.close()
    assert not marker.exists()


def test_old_store_migrates_keeps_trajectories_and_leaves_a_backup(tmp_path):
    path = tmp_path / 'cache.db'
    state = {'x': 0, 'w': 0}
    engine = _engine(None, state)  # only to learn the tool's stored name and code hash
    tool = next(iter(engine._registry._tools.values()))
    call = pickle.dumps(CallSpec(args=(Arg(value=(1, 'b')),), kwargs=(('k', Arg(param='p')),)),
                        protocol=4)
    old_store(path, [
        {'pre': old_snapshot(0.0), 'post': old_snapshot(0.5)},
        {'parent': 1, 'depth': 1, 'pre': old_snapshot(1.0)},
        {'pre': old_snapshot(2.0, user={'screen': [1, 2], 'arr': np.arange(3.0)})},
        {'task': '[]', 'kind': 'function', 'tool': tool.name, 'type_name': tool.type_name,
         'payload': pickle.dumps(CallSpec(args=(), kwargs=()), protocol=4),
         'pre': old_snapshot(0.0, user=0)},
        {'kind': 'function', 'tool': 'mod.f', 'type_name': 'py:0', 'payload': call},
    ], [[1, 2], [3], [5], [4]], recordings=[[{'pre': old_snapshot(9.0)}, {'pre': None}]])
    with SqliteStore(path=path) as s:
        assert s.backup == tmp_path / 'cache.db.v2.bak' and s.backup.exists()
        assert s.migration_dropped.nodes == []
        trajs = s.trajectories(task='t')
        assert [t.node_ids for t in trajs] == [(1, 2), (3,), (5,)]
        first = s.node(1).step
        assert first.pre.features == {'q': (0.0, 1.0)} and first.pre.stamps == {'q': 5.0}
        assert first.pre.taken_at == 5.5 and first.post.features == {'q': (0.5, 1.0)}
        assert first.payload == b'goal1'
        user = s.node(3).step.pre.user
        assert user['screen'] == [1, 2] and np.array_equal(user['arr'], [0.0, 1.0, 2.0])
        spec = CallSpec.decode(s.node(5).step.payload)
        assert spec == CallSpec(args=(Arg(value=(1, 'b')),), kwargs=(('k', Arg(param='p')),))
        (rec,) = s.incomplete_recordings()
        assert [st.pre for st in s.recording_steps(rec.id)][1] is None
        assert s.recording_steps(rec.id)[0].pre.features == {'q': (9.0, 1.0)}
        # Dedupe still works on migrated rows: recording the same step again adds nothing.
        again = s.add_trajectory(task='t', variant='', params_json='{}', steps=[s.node(3).step])
        assert again.id == trajs[1].id
    conn = sqlite3.connect(path)
    assert conn.execute('PRAGMA user_version').fetchone()[0] == schema.SCHEMA_VERSION
    for (pre,) in conn.execute('SELECT pre FROM nodes WHERE pre IS NOT NULL'):
        assert bytes(pre[:4]) == b'MMS1'
    conn.close()
    backup = sqlite3.connect(tmp_path / 'cache.db.v2.bak')
    assert backup.execute('PRAGMA user_version').fetchone()[0] == 2
    backup.close()
    # The Python API replays the migrated Python call.
    replay = _engine(str(path), state)
    assert replay() and state['x'] == 1
    replay.store.close()


def test_migration_drops_foreign_classes_unless_pickle_is_allowed(tmp_path):
    path = tmp_path / 'cache.db'
    old_store(path, [{'pre': old_snapshot(0.0, user=Screen('login'))},
                     {'pre': old_snapshot(1.0)}], [[1], [2]])
    copy = tmp_path / 'trusted.db'
    copy.write_bytes(path.read_bytes())
    with SqliteStore(path=path) as s:
        assert [t.node_ids for t in s.trajectories()] == [(2,)]
        assert 'Screen' in s.migration_dropped.reasons[0]
    with SqliteStore(path=copy, allow_pickle=True) as s:
        assert [t.node_ids for t in s.trajectories()] == [(1,), (2,)]
        assert s.node(1).step.pre.user == Screen('login')
    with SqliteStore(path=copy) as s, pytest.raises(StorePickleError):
        s.node(1)


def test_json_and_numpy_captures_round_trip_without_pickle(tmp_path):
    path = tmp_path / 'cache.db'
    value = {'joints': np.arange(6, dtype=np.float32).reshape(2, 3), 1: (True, None, 'x'),
             'n': np.int64(7), 'f': float('inf'), 'raw': b'\x00\x01', 'list': [1.5, [2]]}
    with SqliteStore(path=path) as s:
        s.add_trajectory(task='t', variant='', params_json='{}', steps=[
            Step(tool='a', kind=ToolKind.FUNCTION, type_name='h', payload=b'',
                 pre=Snapshot(user=value))])
    with SqliteStore(path=path) as s:
        back = s.children(task='t', variant='', parent=None)[0].step.pre.user
    assert list(back) == list(value) and back[1] == (True, None, 'x')
    assert back['joints'].dtype == np.float32 and np.array_equal(back['joints'], value['joints'])
    assert type(back['n']) is np.int64 and back['n'] == 7
    assert back['f'] == float('inf') and back['raw'] == b'\x00\x01' and back['list'] == [1.5, [2]]


def test_python_api_needs_allow_pickle_for_arbitrary_objects(tmp_path):
    path = tmp_path / 'cache.db'
    world = {'screen': Screen('login')}

    def build(**kwargs) -> tuple[Engine, list]:
        engine = Engine(store=str(path), **kwargs)
        seen = []

        @engine.function(pre_check=Check(lambda s: world['screen'], lambda a, b: a == b))
        def type_into(screen):
            seen.append(screen)

        engine.set_agent(lambda: type_into(Screen('form')))
        return engine, seen

    engine, _ = build()
    assert not engine() and not engine()  # never learned: the capture is not JSON or NumPy
    assert engine.stats.record_errors == 2 and engine.store.trajectories() == []
    engine.store.close()
    engine, seen = build(allow_pickle=True)
    assert not engine() and engine()
    assert seen == [Screen('form'), Screen('form')]
    engine.store.close()
    with SqliteStore(path=path) as s:  # the default reader refuses, never unpickles
        with pytest.raises(StorePickleError, match='allow_pickle'):
            s.children(task='[]', variant='', parent=None)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'allow_pickle'").fetchone() == ('1',)
    conn.close()
    with pytest.raises(ValueError, match='allow_pickle'):
        Engine(store=SqliteStore(path=tmp_path / 'other.db'), allow_pickle=True)


def test_damaged_values_are_store_errors_never_anything_else():
    from muscle_mem_ros.store.codec import decode_snapshot, encode_snapshot
    good = encode_snapshot(Snapshot(
        features={'q': (1.0, 2.0)}, stamps={'q': 3.0}, taken_at=4.0,
        user={'a': np.arange(4).reshape(2, 2), 'b': (1, [2.5, None]), 3: b'xy'}))
    rng = np.random.default_rng(3)
    variants = [good[:n] for n in range(len(good))]
    for _ in range(2000):
        data = bytearray(good)
        for i in rng.integers(0, len(data), size=rng.integers(1, 4)):
            data[i] = int(rng.integers(0, 256))
        variants.append(bytes(data))
    header = good[8:8 + int.from_bytes(good[4:8], 'little')].decode()
    for old, new in (('"<i8"', '"|O"'), ('"<i8"', '"<M8"'), ('[2,2]', '[1,1]'),
                     ('[2,2]', '[' + ','.join(['1'] * 70) + ',4]'), ('"d"', '"p"'),
                     ('"t"', '"z"'), ('"b":2', '"b":99')):
        assert old in header
        text = header.replace(old, new, 1).encode()
        variants.append(good[:4] + len(text).to_bytes(4, 'little') + text +
                        good[8 + len(header):])
    outcomes = set()
    for data in variants:
        try:
            decode_snapshot(data)
            outcomes.add('decoded')
        except StoreError as err:
            outcomes.add(type(err).__name__)
    assert outcomes <= {'decoded', 'StoreCorruptError', 'StorePickleError'}
    assert 'StoreCorruptError' in outcomes
