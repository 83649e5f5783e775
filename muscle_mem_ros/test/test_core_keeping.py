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
A restart reads what was learned and indexed instead of doing it again (issue 30, item 5).

Kept plans (:mod:`muscle_mem_ros.bindings.keeping`) and kept first-step columns
(:mod:`muscle_mem_ros.store.columns`) on SQLite and PostgreSQL: after a restart a
tree's plans and its first steps' matching answer exactly as they did before it,
and anything that changed the tree since (a commit, a removal, other settings, a
damaged copy) means the copy is not used.
"""

from __future__ import annotations

from dataclasses import replace
import json
import time

from muscle_mem_ros.bindings.keeping import KeptPlans, plan_from_text, plan_text
from muscle_mem_ros.bindings.rules import element_tolerances
from muscle_mem_ros.checks.banding import band_tolerances
from muscle_mem_ros.checks.matcher import Matcher
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.records import SensorSpec, Snapshot, Step, ToolKind
from muscle_mem_ros.replay.treeview import Trees
from muscle_mem_ros.store import MemoryStore, open_store, SqliteStore
from muscle_mem_ros.store.columns import Columns, decode, encode, KEEP_FROM, open_columns, Vectors
import numpy as np
from pg_server import pg_private, pg_server  # noqa: F401 (fixtures)
import pytest

TASK = 'pick'
SENSORS = [SensorSpec('joints', (0.05,)), SensorSpec('object', (0.01,))]
N = KEEP_FROM + 40


def _step(rng: np.random.Generator, k: int, cube: np.ndarray, tool: str = '') -> Step:
    q = rng.uniform(-3, 3, 6)
    goal = {'target': {'x': float(cube[0]) + 0.02, 'y': float(cube[1])}, 'speed': 1.0}
    features = {'joints': tuple(q.tolist()), 'object': tuple(cube.tolist())}
    return Step(tool=tool or ('/arm/move' if k == 0 else '/arm/place'), kind=ToolKind.ACTION,
                type_name='demo/action/Move', payload=q.tobytes() + bytes([k]),
                payload_json=json.dumps(goal),
                pre=Snapshot(features=features, stamps={'joints': 0.0, 'object': 0.0}),
                post=Snapshot(features=features, stamps={'joints': 0.5, 'object': 0.5}),
                duration=0.5)


def _fill(store, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    with store.batch():
        for _ in range(n):
            cube = np.array([rng.uniform(0.3, 0.5), rng.uniform(-0.2, 0.2), 0.02])
            store.add_trajectory(task=TASK, variant='', params_json='{}',
                                 steps=[_step(rng, 0, cube), _step(rng, 1, cube)])


def _trees(store, max_shift: float = 0.1) -> Trees:
    return Trees(store, max_shift=max_shift, tolerance=element_tolerances(SENSORS),
                 learned_with=repr(tuple(SENSORS)))


def _learned(trees: Trees) -> dict:
    """Wait (bounded) for the background learner; return its plans."""
    deadline = time.monotonic() + 120
    while isinstance(trees.plans(TASK, ''), KeptPlans):
        assert time.monotonic() < deadline, 'the background learner never caught up'
        time.sleep(0.05)
    return dict(trees.plans(TASK, ''))


def _stores(tmp_path, pg_server):  # noqa: F811
    url = pg_server.new_url()
    return [('sqlite', lambda: SqliteStore(path=tmp_path / 'cache.db')),
            ('postgres', lambda: open_store(url))]


def test_a_plan_reads_back_as_it_was_written():
    store = MemoryStore()
    _fill(store, 6)
    trees = Trees(store, max_shift=0.1, tolerance=element_tolerances(SENSORS))
    plans = dict(trees.plans(TASK, ''))
    assert plans, 'the workload binds the target to the object'
    for plan in plans.values():
        assert plan_from_text(plan_text(plan)) == plan


def test_a_restart_reads_the_kept_plans_then_learns_them_again_in_the_background(
        tmp_path, pg_server):  # noqa: F811
    for name, opened in _stores(tmp_path, pg_server):
        store = opened()
        _fill(store, 12)
        before = _trees(store)
        learned = dict(before.plans(TASK, ''))
        assert before.keep() == 1 and before.keep() == 0, name  # kept once: nothing changed
        store.close()

        store = opened()
        trees = _trees(store)
        kept = trees.plans(TASK, '')
        assert isinstance(kept, KeptPlans), name
        first = next(iter(learned))
        assert kept.get(first) == learned[first] and first in kept, name
        assert len(kept) == len(learned) and dict(kept) == learned, name
        assert kept.leaves(first) is not None
        assert _learned(trees) == learned, name  # the learner, caught up, says the same
        trees.close()
        store.close()


def test_kept_plans_serve_only_the_tree_and_settings_they_were_learned_for(
        tmp_path, pg_server):  # noqa: F811
    for name, opened in _stores(tmp_path, pg_server):
        store = opened()
        _fill(store, 10)
        _trees(store).plans(TASK, '')
        trees = _trees(store)
        trees.plans(TASK, '')
        trees.keep()
        store.close()

        store = opened()
        assert not isinstance(_trees(store, max_shift=0.2).plans(TASK, ''), KeptPlans), name
        _fill(store, 1, seed=99)  # the tally moved: learned again, the new one too
        trees = _trees(store)
        plans = trees.plans(TASK, '')
        assert not isinstance(plans, KeptPlans), name
        newest = store.trajectories(task=TASK, variant='')[-1]
        assert newest.node_ids[0] in plans, name
        trees.close()
        store.forget(task=TASK)
        assert store.kept_plans(task=TASK, variant='') is None, name
        store.close()


def test_a_store_in_memory_keeps_nothing():
    store = MemoryStore()
    _fill(store, 4)
    trees = _trees(store)
    trees.plans(TASK, '')
    assert trees.keep() == 0 and store.kept_plans(task=TASK, variant='') is None


def _now(store, node_id: int, shift: float = 0.01) -> Snapshot:
    pre = store.node(node_id).step.pre
    return Snapshot(features={'joints': tuple(np.array(pre.features['joints']) + shift),
                              'object': pre.features['object']})


def _same(a, b) -> None:
    assert (a.node is None) == (b.node is None)
    if a.node is not None:
        assert a.node.id == b.node.id and a.result == b.result
    assert [(n.id, r) for n, r in a.rejected] == [(n.id, r) for n, r in b.rejected]


@pytest.mark.parametrize('ordered', [False, True], ids=['row-order', 'sorted'])
def test_a_restart_matches_first_steps_from_their_kept_columns(
        tmp_path, pg_server, monkeypatch, ordered):  # noqa: F811
    """
    Match first steps after a restart exactly as from their rows.

    Sorted: the store was told the check's tolerances (as the node tells it), so the
    first lookup of each fresh matcher reads a band of the vectors (:mod:`.banding`).
    """
    from muscle_mem_ros.store.postgres import store as pgstore
    monkeypatch.setattr(pgstore, 'TREE_LIMIT', 100)  # a tree it reads level by level
    for name, opened in _stores(tmp_path / str(ordered), pg_server):
        store = opened()
        if ordered:
            store.order_first_steps(band_tolerances(SENSORS))
        _fill(store, N)
        assert store.preload() == N  # read from the rows, and kept
        ids = [t.node_ids[0] for t in store.trajectories(task=TASK, variant='')]
        store.close()

        store = opened()
        reads = _count_reads(store, monkeypatch)
        kids = store.children(task=TASK, variant='', parent=None)
        assert kids.columns is not None and kids.columns.n == N, name
        assert (kids.columns.key is not None) == ordered, name
        vectors = N * (6 + 3) * 8
        assert sum(reads) < vectors / 2, name  # opening reads the small arrays only
        matcher = Matcher(check=ToleranceCheck(sensors=SENSORS))
        plain = Matcher(check=ToleranceCheck(sensors=SENSORS))
        for node_id in (ids[0], ids[N // 2], ids[-1]):
            fresh = Matcher(check=ToleranceCheck(sensors=SENSORS))
            reads.clear()
            first = fresh.select(kids, _now(store, node_id))
            if ordered:  # a band: a few rows' vectors (and the value's head, to check it)
                assert 0 < sum(reads) < vectors / 4, (name, sum(reads), vectors)
            chosen = matcher.select(kids, _now(store, node_id))
            assert chosen.node is not None and chosen.node.id == node_id, name
            expected = plain.select(list(store.nodes(ids)), _now(store, node_id))
            _same(first, expected)
            _same(chosen, expected)
            tools = fresh.select(kids, _now(store, node_id), tools={'/arm/place'})
            assert tools.node is None, name  # (no first step calls it)
        far = Snapshot(features={'joints': (9.0,) * 6, 'object': (0.4, 0.0, 0.02)})
        _same(matcher.select(kids, far), plain.select(list(store.nodes(ids)), far))
        near = _now(store, ids[7], shift=0.2)  # within the band of one element, not all
        _same(Matcher(check=ToleranceCheck(sensors=SENSORS)).select(kids, near),
              plain.select(list(store.nodes(ids)), near))
        assert kids.tool_kinds() == {('/arm/move', ToolKind.ACTION)}, name
        assert [n.id for n in kids] == ids, name  # iterating reads every node

        _fill(store, 1, seed=5)  # one more first step: kept columns and the row after them
        grown = store.children(task=TASK, variant='', parent=None)
        newest = store.trajectories(task=TASK, variant='')[-1].node_ids[0]
        assert len(grown) == N + 1 and grown.columns is not None, name
        chosen = matcher.select(grown, _now(store, newest))
        assert chosen.node is not None and chosen.node.id == newest, name
        tail = Matcher(check=ToleranceCheck(sensors=SENSORS)).select(grown, _now(store, newest))
        assert tail.node is not None and tail.node.id == newest, name  # (a band and the tail)
        store.close()  # keeps the grown list

        store = opened()
        again = store.children(task=TASK, variant='', parent=None)
        assert again.columns is not None and again.columns.n == N + 1, name
        store.forget(task=TASK, trajectory_id=store.trajectories(task=TASK, variant='')[3].id)
        store.close()

        store = opened()
        after = store.children(task=TASK, variant='', parent=None)
        assert after.columns is None and len(after) == N, name  # one went: the rows are read
        store.close()


def _count_reads(store, monkeypatch) -> list[int]:
    """Record how many bytes of kept first steps ``store`` reads (its own reads, counted)."""
    reads: list[int] = []
    real = type(store)._kept_ranges

    def counted(conn, task, variant, ranges):
        reads.append(sum(n for _, n in ranges))
        return real(conn, task, variant, ranges)
    monkeypatch.setattr(store, '_kept_ranges', counted)
    return reads


def test_kept_first_steps_rewritten_after_they_were_opened_are_not_mixed_up(
        tmp_path, caplog):
    """Another process keeps them again, sorted otherwise: the rows are read instead."""
    path = tmp_path / 'cache.db'
    store = SqliteStore(path=path)
    store.order_first_steps(band_tolerances(SENSORS))
    _fill(store, N)
    store.preload()
    ids = [t.node_ids[0] for t in store.trajectories(task=TASK, variant='')]
    store.close()
    store = SqliteStore(path=path)
    kids = store.children(task=TASK, variant='', parent=None)
    assert kids.columns is not None and kids.columns.key is not None
    import sqlite3
    with sqlite3.connect(path) as conn:
        (data,) = conn.execute('SELECT data FROM kept_columns').fetchone()
        other = encode(decode(data), {'object': np.array([0.01])})
        assert decode(other).ids.tolist() == ids
        conn.execute('UPDATE kept_columns SET data = ?', (other,))
    for node_id in (ids[5], ids[-5]):
        chosen = Matcher(check=ToleranceCheck(sensors=SENSORS)).select(kids, _now(store, node_id))
        assert chosen.node is not None and chosen.node.id == node_id
    assert 'kept first steps could not be read' in caplog.text
    store.close()


def test_a_band_holds_every_first_step_within_the_tolerance(
        tmp_path, pg_server, monkeypatch):  # noqa: F811
    """
    Read the band's edges where the tolerance says, on either side.

    The only candidate a lookup may take lies 0.049 from now (tolerance 0.05), and many
    rows lie nearer.
    """
    sensors = [SensorSpec('x', (0.05,))]
    n = 1000
    for name, opened in _stores(tmp_path, pg_server):
        store = opened()
        store.order_first_steps(band_tolerances(sensors))
        with store.batch():
            for i in range(n):
                pre = Snapshot(features={'x': (i * 0.002,)}, stamps={'x': 0.0})
                store.add_trajectory(task=TASK, variant='', params_json='{}', steps=[Step(
                    tool='/b' if i in (300, 700) else '/a', kind=ToolKind.ACTION,
                    type_name='demo/action/Move', payload=i.to_bytes(4, 'little'),
                    payload_json='{}', pre=pre, post=pre, duration=0.1)])
        store.preload()
        ids = [t.node_ids[0] for t in store.trajectories(task=TASK, variant='')]
        store.close()
        store = opened()
        reads = _count_reads(store, monkeypatch)
        kids = store.children(task=TASK, variant='', parent=None)
        assert kids.columns is not None and kids.columns.key == ('x', 0), name
        for row, shift in ((300, 0.049), (700, -0.049), (300, -0.049), (700, 0.049)):
            reads.clear()
            now = Snapshot(features={'x': (row * 0.002 + shift,)})
            chosen = Matcher(check=ToleranceCheck(sensors=sensors)).select(
                kids, now, tools={'/b'})
            assert chosen.node is not None and chosen.node.id == ids[row], (name, row, shift)
            assert 0 < sum(reads) < n * 8 / 4, (name, row, shift, sum(reads))  # a band
        store.close()


def test_first_steps_kept_unsorted_are_sorted_by_a_store_told_the_tolerances(tmp_path):
    path = tmp_path / 'cache.db'
    store = SqliteStore(path=path)
    _fill(store, N)
    store.preload()
    store.close()
    for told in (False, True):
        store = SqliteStore(path=path)
        if told:
            store.order_first_steps(band_tolerances(SENSORS))
        assert store.children(task=TASK, variant='', parent=None).columns.key is None, told
        store.close()  # (a store not told them leaves them as they are)
    store = SqliteStore(path=path)
    kids = store.children(task=TASK, variant='', parent=None)
    assert kids.columns is not None and kids.columns.key is not None
    assert kids.columns.key[0] == 'joints'  # the element of 0.05 in 6: fewest rows near
    ids = [t.node_ids[0] for t in store.trajectories(task=TASK, variant='')]
    chosen = Matcher(check=ToleranceCheck(sensors=SENSORS)).select(kids, _now(store, ids[9]))
    assert chosen.node is not None and chosen.node.id == ids[9]
    store.close()


def test_sorted_columns_read_back_whole_and_in_bands():
    """Every row whose key is within a band is in it; the rest of a band's rows cost little."""
    rng = np.random.default_rng(4)
    n = 1000
    joints = rng.uniform(-3, 3, (n, 6))
    joints[rng.choice(n, 20, replace=False), 2] = np.nan  # a key that sorts nowhere
    has = np.ones(n, bool)
    has[::97] = False  # rows without the sensor
    joints[~has] = 0.0
    columns = Columns(np.arange(5, 5 + n, dtype=np.int64), ('/a', '/b'),
                      rng.integers(0, 2, n).astype(np.int32), np.zeros(n, np.int8),
                      np.zeros(n, bool),
                      {'joints': Vectors(6, has, joints, np.zeros(n, bool))})
    plain = decode(encode(columns))
    assert plain.key is None and np.array_equal(plain.sensors['joints'].rec, joints,
                                                equal_nan=True)
    data = encode(columns, {'joints': np.array([0.05])})
    view = memoryview(data)
    opened = open_columns(lambda ranges: [view[a:a + m] for a, m in ranges])
    assert opened.key is not None and opened.key[0] == 'joints'
    e = opened.key[1]
    assert np.array_equal(opened.full().sensors['joints'].rec, joints, equal_nan=True)
    assert np.array_equal(opened.full().tool_of, columns.tool_of)
    for at in (-3.5, -1.0, 0.0, 2.99, 3.5):
        band = opened.band(at - 0.05, at + 0.05)
        assert band is not None
        rows, part = band
        key = joints[:, e]
        inside = has & (np.abs(key - at) <= 0.05)
        assert set(np.flatnonzero(inside)) <= set(rows.tolist()), at
        assert set(np.flatnonzero(~has | np.isnan(key))) <= set(rows.tolist()), at
        assert rows.size < n / 4, at
        assert np.array_equal(part.sensors['joints'].rec, joints[rows], equal_nan=True)
        assert np.array_equal(part.ids, columns.ids[rows])
        assert np.array_equal(part.sensors['joints'].has, has[rows])
    assert opened.band(-10.0, 10.0) is None  # every row: not worth reading apart
    odd_ids = replace(columns, ids=rng.permutation(np.arange(n, dtype=np.int64) * 3 + 2**40),
                      tools=tuple(f'/t{i}' for i in range(300)),
                      tool_of=rng.integers(0, 300, n).astype(np.int32))
    back = decode(encode(odd_ids, {'joints': np.array([0.05])}))
    assert np.array_equal(back.ids, odd_ids.ids) and np.array_equal(back.tool_of, odd_ids.tool_of)


def test_damaged_kept_columns_are_not_used(tmp_path, caplog):
    store = SqliteStore(path=tmp_path / 'cache.db')
    _fill(store, N)
    store.preload()
    store.close()
    import sqlite3
    with sqlite3.connect(tmp_path / 'cache.db') as conn:
        conn.execute("UPDATE kept_columns SET data = x'4d4d433100'")
    store = SqliteStore(path=tmp_path / 'cache.db')
    kids = store.children(task=TASK, variant='', parent=None)
    assert kids.columns is None and len(kids) == N
    assert 'kept first steps' in caplog.text
    store.close()


def test_a_tool_not_configured_is_seen_without_reading_the_kept_nodes(tmp_path):
    store = SqliteStore(path=tmp_path / 'cache.db')
    _fill(store, N)
    rng = np.random.default_rng(3)
    cube = np.array([0.4, 0.0, 0.02])
    store.add_trajectory(task=TASK, variant='', params_json='{}',
                         steps=[_step(rng, 0, cube, tool='/gripper/close')])
    store.preload()
    store.close()
    store = SqliteStore(path=tmp_path / 'cache.db')
    kids = store.children(task=TASK, variant='', parent=None)
    assert kids.columns is not None
    assert kids.tool_kinds() == {('/arm/move', ToolKind.ACTION),
                                 ('/gripper/close', ToolKind.ACTION)}
    store.close()


def test_a_fleet_store_away_learns_from_what_it_loaded(pg_private):  # noqa: F811
    url = pg_private.new_url()
    store = open_store(url)
    _fill(store, 6)
    before = _trees(store)
    learned = dict(before.plans(TASK, ''))
    before.keep()
    store.close()
    store = open_store(url)
    store.trajectories(task=TASK, variant='')  # read once: known while the server is away
    store.children(task=TASK, variant='', parent=None)  # a small tree: loaded whole
    pg_private.stop('immediate')
    try:
        trees = _trees(store)
        plans = trees.plans(TASK, '')  # the kept plans cannot be read: learned from memory
        assert not isinstance(plans, KeptPlans) and dict(plans) == learned
        trees.close()
    finally:
        pg_private.start()
        store.close()
