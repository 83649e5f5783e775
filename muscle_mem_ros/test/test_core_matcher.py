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

"""Candidate selection: ranking, fail-closed rules, and the vectorized paths agreeing."""

from __future__ import annotations

from muscle_mem_ros import (
    CompareMode,
    Matcher,
    MemoryStore,
    Node,
    SensorSpec,
    Snapshot,
    Step,
    ToleranceCheck,
    ToolKind,
)
import numpy as np
import pytest


def node(nid: int, q=None, *, success: int = 1, used: float = 0.0, **features) -> Node:
    if q is not None:
        features['q'] = q
    pre = Snapshot(features={k: tuple(v) for k, v in features.items()}) if features else None
    step = Step(tool='t', kind=ToolKind.ACTION, type_name='x', payload=bytes([nid % 256]),
                pre=pre)
    return Node(id=nid, parent=None, depth=0, step=step, success_count=success, last_used=used)


def now(**features) -> Snapshot:
    return Snapshot(features={k: tuple(v) for k, v in features.items()})


CHECK = ToleranceCheck(sensors=[SensorSpec('q', (1.0,))])


def test_empty_candidates():
    sel = Matcher(check=CHECK).select([], now(q=(0.0,)))
    assert sel.node is None and sel.result is None and sel.rejected == ()


def test_lowest_score_wins():
    cands = [node(1, (0.8,)), node(2, (0.1,)), node(3, (-0.5,))]
    sel = Matcher(check=CHECK).select(cands, now(q=(0.0,)))
    assert sel.node.id == 2
    assert sel.result.passed and sel.result.score == pytest.approx(0.1)


def test_ties_broken_by_success_count_then_recency_then_id():
    m = Matcher(check=CHECK)
    cands = [node(1, (0.5,), success=1, used=9.0), node(2, (0.5,), success=3, used=1.0),
             node(3, (-0.5,), success=3, used=2.0)]
    assert m.select(cands, now(q=(0.0,))).node.id == 3
    cands = [node(4, (0.5,), success=3, used=2.0), node(5, (0.5,), success=3, used=2.0)]
    assert m.select(cands, now(q=(0.0,))).node.id == 4


def test_no_pre_snapshot_fails_closed():
    cands = [node(1), node(2, (5.0,))]
    sel = Matcher(check=CHECK).select(cands, now(q=(0.0,)))
    assert sel.node is None
    reasons = {n.id: r.failures[0].reason for n, r in sel.rejected}
    assert reasons == {1: 'no pre-check', 2: 'out of tolerance'}
    assert [n.id for n, _ in sel.rejected] == [2, 1]  # best (lowest score) first


def test_rejected_is_capped_and_sorted():
    cands = [node(i, (float(i),)) for i in range(2, 40)]
    sel = Matcher(check=CHECK, max_rejected=5).select(cands, now(q=(0.0,)))
    assert sel.node is None
    assert [n.id for n, _ in sel.rejected] == [2, 3, 4, 5, 6]
    assert all(not r.passed for _, r in sel.rejected)


def test_missing_or_stale_sensor_rejects_every_candidate():
    check = ToleranceCheck(sensors=[SensorSpec('q', (1.0,), max_age=0.5)])
    cands = [node(1, (0.0,)), node(2, (0.1,))]
    stale = Snapshot(features={'q': (0.0,)}, stamps={'q': 0.0}, taken_at=10.0)
    sel = Matcher(check=check).select(cands, stale)
    assert sel.node is None
    assert all(r.failures[0].reason.startswith('stale') for _, r in sel.rejected)
    sel = Matcher(check=check).select(cands, Snapshot(features={}, taken_at=10.0))
    assert all(r.failures[0].reason == 'missing' for _, r in sel.rejected)


def test_unusual_vector_lengths_are_scored_individually():
    cands = [node(1, (0.0, 0.0)), node(2, (0.0, 0.0)), node(3, (0.2,))]
    sel = Matcher(check=CHECK).select(cands, now(q=(0.1,)))
    assert sel.node.id == 3
    sel = Matcher(check=CHECK).select(cands, now(q=(0.1, 0.0)))
    assert sel.node.id in (1, 2)


def test_rejected_only_on_a_miss_by_default():
    cands = [node(1, (0.0,)), node(2, (5.0,))]
    assert Matcher(check=CHECK).select(cands, now(q=(0.0,))).rejected == ()
    sel = Matcher(check=CHECK, rejected_on_hit=True).select(cands, now(q=(0.0,)))
    assert [n.id for n, _ in sel.rejected] == [2]


def test_result_matches_evaluate():
    cands = [node(i, (i * 0.3, -i * 0.1)) for i in range(5)]
    sel = Matcher(check=CHECK).select(cands, now(q=(0.35, -0.1)))
    assert sel.result == CHECK.evaluate(sel.node.step.pre, now(q=(0.35, -0.1)))


def _random_nodes(rng, n, dims):
    return [node(i + 1, tuple(rng.uniform(-1, 1, dims[0])), p=tuple(rng.uniform(-1, 1, dims[1])))
            for i in range(n)]


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_kdtree_and_dense_paths_agree(seed):
    rng = np.random.default_rng(seed)
    check = ToleranceCheck(sensors=[SensorSpec('q', (0.3, 0.2, 0.4)), SensorSpec('p', (0.25,))])
    cands = _random_nodes(rng, 600, (3, 2))
    tree = Matcher(check=check, kdtree_min=64, rejected_on_hit=True)
    dense = Matcher(check=check, kdtree_min=10**9, rejected_on_hit=True)
    assert tree._block(cands).tree is not None
    assert dense._block(cands).tree is None
    hits = 0
    for _ in range(60):
        target = cands[int(rng.integers(len(cands)))].step.pre.features
        jitter = {k: tuple(np.asarray(v) + rng.normal(0, 0.1, len(v))) for k, v in target.items()}
        snapshot = Snapshot(features=jitter)
        a, b = tree.select(cands, snapshot), dense.select(cands, snapshot)
        assert (a.node and a.node.id) == (b.node and b.node.id)
        assert a.result == b.result
        assert [n.id for n, _ in a.rejected] == [n.id for n, _ in b.rejected]
        hits += a.node is not None
        assert a.rejected  # explained on hits too (rejected_on_hit)
    assert 0 < hits < 60


def test_non_abs_modes_use_dense_path_and_match_evaluate():
    rng = np.random.default_rng(5)
    check = ToleranceCheck(sensors=[SensorSpec('q', (0.5,), CompareMode.NORM),
                                    SensorSpec('p', (0.3,), CompareMode.ANGLE)])
    cands = _random_nodes(rng, 200, (3, 2))
    m = Matcher(check=check, kdtree_min=8)
    assert m._block(cands).tree is None
    snapshot = Snapshot(features={'q': (0.1, 0.2, 0.0), 'p': (0.5, -0.5)})
    sel = m.select(cands, snapshot)
    scored = [(check.evaluate(c.step.pre, snapshot).score, c.id) for c in cands]
    passing = sorted(s for s in scored if s[0] <= 1.0)
    assert (sel.node.id if sel.node else None) == (passing[0][1] if passing else None)


def test_cache_follows_store_membership():
    store = MemoryStore()
    m = Matcher(check=CHECK)

    def add(x):
        store.add_trajectory(task='t', variant='', params_json='{}', steps=[
            Step(tool='t', kind=ToolKind.ACTION, type_name='x', payload=repr(x).encode(),
                 pre=Snapshot(features={'q': (x,)}))])

    add(5.0)
    assert m.select(store.children(task='t', variant='', parent=None), now(q=(0.0,))).node is None
    add(0.2)
    sel = m.select(store.children(task='t', variant='', parent=None), now(q=(0.0,)))
    assert sel.node is not None and sel.node.step.pre.features['q'] == (0.2,)


def test_matcher_rejects_user_checks():
    with pytest.raises(TypeError, match='ToleranceCheck'):
        Matcher(check=object())  # type: ignore[arg-type]


@pytest.mark.parametrize('kind', ['memory', 'sqlite'])
def test_growing_set_is_extended_and_matches_a_fresh_build(kind, tmp_path):
    from muscle_mem_ros import SqliteStore

    store = MemoryStore() if kind == 'memory' else SqliteStore(path=tmp_path / 's.db')
    rng = np.random.default_rng(3)
    check = ToleranceCheck(sensors=[SensorSpec('q', (0.2, 0.2, 0.2))])
    xs = []

    def learn(count):
        for _ in range(count):
            x = tuple(rng.uniform(-3, 3, 3))
            xs.append(x)
            store.add_trajectory(task='t', variant='', params_json='{}', steps=[
                Step(tool='t', kind=ToolKind.ACTION, type_name='x', payload=repr(x).encode(),
                     pre=Snapshot(features={'q': x}))])

    def kids():
        return store.children(task='t', variant='', parent=None)

    m = Matcher(check=check, kdtree_min=64)
    learn(300)
    first = m._block(kids())
    assert first.tree is not None
    learn(10)
    grown = m._block(kids())
    assert grown.tree is first.tree and grown.n == 310  # reused, new rows scored densely
    learn(5)
    again = m._block(kids())
    assert np.shares_memory(again.columns[0].rec, grown.columns[0].rec)  # grown in place
    assert np.array_equal(again.columns[0].rec[:310], grown.columns[0].rec)
    for x in xs[-12:]:
        snap = Snapshot(features={'q': x})
        fresh = Matcher(check=check, kdtree_min=64).select(kids(), snap)
        assert m.select(kids(), snap).node.id == fresh.node.id
    learn(295)
    assert m._block(kids()).tree is not first.tree  # tail too large: index rebuilt
    traj = store.trajectories()[5]
    store.forget(task='t', trajectory_id=traj.id)
    after = m._block(kids())
    assert after.n == 609 and traj.node_ids[0] not in after.ids  # removal: full rebuild
    for x in xs[:3] + xs[6:9]:
        snap = Snapshot(features={'q': x})
        assert m.select(kids(), snap).node.id == Matcher(check=check).select(kids(), snap).node.id
    store.close()


@pytest.mark.parametrize('kdtree_min', [8, 10**9])
def test_tools_filter_excludes_candidates(kdtree_min):
    def on(tool, nid, x):
        base = node(nid, (x,))
        return Node(id=nid, parent=None, depth=0,
                    step=Step(tool=tool, kind=ToolKind.ACTION, type_name='x', payload=b'',
                              pre=base.step.pre))

    cands = [on('/arm', i, 0.5 + i) for i in range(1, 20)]
    cands += [on('/gripper', 100, 0.0), on('/arm', 101, 0.3)]
    m = Matcher(check=CHECK, kdtree_min=kdtree_min)
    assert m.select(cands, now(q=(0.0,))).node.id == 100
    assert m.select(cands, now(q=(0.0,)), tools={'/arm'}).node.id == 101
    sel = m.select(cands, now(q=(-5.0,)), tools=['/gripper'])
    assert sel.node is None and [n.id for n, _ in sel.rejected] == [100]
    assert m.select(cands, now(q=(0.0,)), tools=()).node is None


@pytest.mark.parametrize('kdtree_min', [8, 10**9])
def test_non_finite_values_fail_safe(kdtree_min):
    rng = np.random.default_rng(4)
    cands = [node(i, tuple(rng.uniform(-1, 1, 3))) for i in range(1, 100)]
    cands.append(node(100, (float('nan'), 0.0, 0.0)))
    m = Matcher(check=ToleranceCheck(sensors=[SensorSpec('q', (0.5,))]), kdtree_min=kdtree_min)
    target = cands[4].step.pre.features['q']
    assert m.select(cands, now(q=target)).node.id == 5
    for bad in (float('nan'), float('inf')):
        sel = m.select(cands, now(q=(target[0], bad, target[2])))
        assert sel.node is None
        assert sel.rejected[0][1].failures[0].reason.startswith('not finite')
    sel = m.select(cands, now(q=(float('nan'), 0.0, 0.0)))
    assert sel.node is None  # a recorded NaN never matches, not even NaN


def test_warm_builds_the_index_ahead():
    cands = [node(i, (float(i),)) for i in range(1, 100)]
    m = Matcher(check=CHECK)
    m.warm(cands)
    block = m._block(cands)
    m.warm(cands)
    assert m._block(cands) is block and block.tree is not None
    assert m.select(cands, now(q=(3.1,))).node.id == 3


def test_two_extensions_of_one_index_never_share_rows():
    from muscle_mem_ros.checks.candidates import IndexBuilder

    builder = IndexBuilder(sensors=CHECK._compiled, kdtree_min=10**9)
    base = [node(i, (float(i),)) for i in range(1, 11)]
    old = builder.extend(builder.build(base[:5]), base[:6])  # now has spare rows
    a = builder.extend(old, base[:6] + [node(50, (50.0,))])
    b = builder.extend(old, base[:6] + [node(60, (60.0,))])
    assert a.columns[0].rec[6, 0] == 50.0 and b.columns[0].rec[6, 0] == 60.0
    assert np.shares_memory(a.columns[0].rec, old.columns[0].rec)
    assert not np.shares_memory(b.columns[0].rec, old.columns[0].rec)
