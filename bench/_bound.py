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
Lookup right after a commit with bindings on: what a task done N times costs the next one.

Workload: one task, N trajectories of two steps; each step's pre snapshot is the
32 joint angles of bench/lookup plus an object position (3 floats), and its goal is
``{"target": {"x": object_x + 0.02, "y": object_y}, "speed": 1.0}``, so learning
binds ``target.x`` and ``target.y`` to the object in both groups (every step has a
plan). One lookup after a commit is what the node does for a first step:
:func:`muscle_mem_ros.bindings.learning.follow` (the store's tally of the tree, the
trajectories committed since, learning them), the root's children and
``Matcher.select``, and the chosen step's plan. Timed after each of ``commits``
commits of one more trajectory, and once with nothing new.
"""

from __future__ import annotations

import json
import time
from typing import Any

from _common import pct
from muscle_mem_ros import Matcher, SensorSpec, Snapshot, Step, ToleranceCheck, ToolKind
from muscle_mem_ros.bindings.learning import follow, Learner
from muscle_mem_ros.bindings.rules import element_tolerances
import numpy as np

TASK = 'pick_bound'
SENSORS = [SensorSpec('joints', (0.05,)), SensorSpec('object', (0.01,))]
TOLERANCE = element_tolerances(SENSORS)


def bound_step(i: int, k: int, q: np.ndarray, cube: np.ndarray) -> Step:
    goal = {'target': {'x': float(cube[0]) + 0.02, 'y': float(cube[1])}, 'speed': 1.0}
    features = {'joints': tuple(q.tolist()), 'object': tuple(cube.tolist())}
    return Step(tool='/arm/move' if k == 0 else '/arm/place', kind=ToolKind.ACTION,
                type_name='demo/action/Move',
                payload=i.to_bytes(8, 'little') + k.to_bytes(4, 'little') + q.tobytes(),
                payload_json=json.dumps(goal),
                pre=Snapshot(features=features, stamps={'joints': 0.0, 'object': 0.0}),
                post=Snapshot(features=features, stamps={'joints': 0.5, 'object': 0.5}),
                duration=0.5)


def build(store: Any, n: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Add N trajectories in one batch; return the first steps' joints and the seconds."""
    qs = rng.uniform(-np.pi, np.pi, (n, 2, 32))
    cubes = np.column_stack([rng.uniform(0.3, 0.5, n), rng.uniform(-0.2, 0.2, n),
                             np.full(n, 0.02)])
    t0 = time.perf_counter()
    with store.batch():
        for i in range(n):
            store.add_trajectory(task=TASK, variant='', params_json='{}',
                                 steps=[bound_step(i, 0, qs[i, 0], cubes[i]),
                                        bound_step(i, 1, qs[i, 1], cubes[i])])
    return qs[:, 0], time.perf_counter() - t0


def bench_bound(store: Any, n: int, commits: int = 30) -> dict[str, Any]:
    """Return the timings (seconds) of lookups after commits at N trajectories."""
    rng = np.random.default_rng(n)
    firsts, built = build(store, n, rng)
    matcher = Matcher(check=ToleranceCheck(sensors=SENSORS))
    learners: dict[str, Learner] = {}
    target = n // 2
    expect = store.trajectories(task=TASK, variant='')[target].node_ids[0]

    def new() -> Learner:
        return Learner(max_shift=0.1, tolerance=TOLERANCE)

    def lookup() -> tuple[float, float]:
        cube = store.node(expect).step.pre.features['object']
        now = Snapshot(features={'joints': tuple(firsts[target] + 0.01), 'object': cube})
        t0 = time.perf_counter()
        learner = learners[TASK] = follow(learners.get(TASK), store, task=TASK, variant='',
                                          params=lambda info: {}, new=new)
        t1 = time.perf_counter()
        chosen = matcher.select(store.children(task=TASK, variant='', parent=None), now)
        assert chosen.node is not None and chosen.node.id == expect, 'wrong candidate'
        plan = learner.plans.get(chosen.node.id)
        assert plan is not None and {b.field for b in plan.bindings} == {'target.x', 'target.y'}
        return time.perf_counter() - t0, t1 - t0

    cold = lookup()[0]
    after, learning = [], []
    for j in range(commits):
        q = rng.uniform(-np.pi, np.pi, (2, 32))
        cube = np.array([rng.uniform(0.3, 0.5), rng.uniform(-0.2, 0.2), 0.02])
        store.add_trajectory(task=TASK, variant='', params_json='{}',
                             steps=[bound_step(n + j, 0, q[0], cube),
                                    bound_step(n + j, 1, q[1], cube)])
        total, learned = lookup()
        after.append(total)
        learning.append(learned)
    steady = [lookup()[0] for _ in range(commits)]
    return {'build': built, 'cold': cold, 'p50': pct(after, 50), 'p99': pct(after, 99),
            'learn_p50': pct(learning, 50), 'steady_p50': pct(steady, 50),
            'samples': len(after)}


def keep_for_restart(store: Any) -> float:
    """
    Do what a node does before it stops: first steps indexed and kept, plans learned and kept.

    The first steps are kept sorted for the check's tolerances, as the node keeps them.

    Returns the seconds it took (the node's start-up warm and its deactivate, together).
    """
    from muscle_mem_ros.checks.banding import band_tolerances
    from muscle_mem_ros.replay.treeview import Trees
    t0 = time.perf_counter()
    store.order_first_steps(band_tolerances(SENSORS))  # (the node's Replayer tells its store)
    store.preload()
    trees = Trees(store, max_shift=0.1, tolerance=TOLERANCE, learned_with=repr(SENSORS))
    trees.plans(TASK, '')
    trees.keep()
    return time.perf_counter() - t0


def bench_restart(reopen: Any, restarts: int = 5) -> dict[str, Any]:
    """
    Return the timings (seconds) of the first lookups after a restart.

    A restart opens the store and makes the node's Trees (plans kept with the store,
    :mod:`muscle_mem_ros.bindings.keeping`) and Matcher anew; its first lookup is the
    lookup of :func:`bench_bound` (the tree's plans, the root's children from their kept
    columns, ``Matcher.select``, the chosen step's plan) while the tree is learned again
    in the background. The children are opened with the columns' small arrays only, and
    the first lookup reads the vectors within the tolerance of one element
    (:mod:`muscle_mem_ros.checks.banding`); the second reads them all and builds the
    KD-tree; the third is warm. Each restart stops its learner and closes the store after.
    """
    from muscle_mem_ros.replay.treeview import Trees
    info = None
    firsts, seconds, thirds, parts = [], [], [], []
    for _ in range(restarts):
        store, trees = reopen(), None
        try:
            if info is None:
                listing = store.trajectories(task=TASK, variant='')
                info = listing[len(listing) // 2]
            pre = store.node(info.node_ids[0]).step.pre
            now = Snapshot(features={'joints': tuple(np.array(pre.features['joints']) + 0.01),
                                     'object': pre.features['object']})
            store.close()
            t0 = time.perf_counter()
            store = reopen()
            trees = Trees(store, max_shift=0.1, tolerance=TOLERANCE, learned_with=repr(SENSORS))
            matcher = Matcher(check=ToleranceCheck(sensors=SENSORS))

            def lookup() -> tuple[float, ...]:
                t1 = time.perf_counter()
                plans = trees.plans(TASK, '')
                t2 = time.perf_counter()
                kids = store.children(task=TASK, variant='', parent=None)
                t3 = time.perf_counter()
                chosen = matcher.select(kids, now)
                t4 = time.perf_counter()
                assert chosen.node is not None and chosen.node.id == info.node_ids[0]
                plan = plans.get(chosen.node.id)
                assert plan is not None and {b.field for b in plan.bindings} == {
                    'target.x', 'target.y'}
                return (time.perf_counter() - t1, t2 - t1, t3 - t2, t4 - t3)
            opened = time.perf_counter() - t0
            first = lookup()
            firsts.append(opened + first[0])
            parts.append((opened, *first[1:]))
            seconds.append(lookup()[0])
            thirds.append(lookup()[0])
        finally:
            if trees is not None:
                trees.close()  # its background learner stops, as at a node's deactivate
            store.close()
    return {'restart_p50': pct(firsts, 50), 'restart_max': max(firsts),
            'restart_parts': [pct([p[i] for p in parts], 50) for i in range(4)],
            'second_p50': pct(seconds, 50), 'third_p50': pct(thirds, 50),
            'restarts': restarts}


def driver_read(name: str, spec: str, times: int = 5) -> float:
    """
    Return the p50 seconds of the database driver's own read of the kept first steps.

    No muscle_mem_ros code: sqlite3's blob read, psycopg's binary SELECT of the one value
    a restart reads (the floor under "children" in the restart table).
    """
    found = []
    if name == 'sqlite':
        import sqlite3
        conn = sqlite3.connect(spec)
        for _ in range(times):
            t0 = time.perf_counter()
            (rowid,) = conn.execute('SELECT rowid FROM kept_columns WHERE task = ?',
                                    (TASK,)).fetchone()
            with conn.blobopen('kept_columns', 'data', rowid, readonly=True) as blob:
                blob.read()
            found.append(time.perf_counter() - t0)
        conn.close()
    else:
        import psycopg
        from muscle_mem_ros.store.postgres.schema import NAMESPACE
        with psycopg.connect(spec, autocommit=True) as conn:
            for _ in range(times):
                t0 = time.perf_counter()
                conn.execute(f'SELECT data FROM {NAMESPACE}.kept_columns WHERE task = %s',
                             (TASK,), binary=True).fetchone()
                found.append(time.perf_counter() - t0)
    return pct(found, 50)


def bench_engine(path: Any, n: int, calls: int = 20) -> dict[str, Any]:
    """
    Return the timings (seconds) of the Engine's call right after a learned miss.

    The Engine's task holds N one-step trajectories ``move(x, y)`` whose arguments
    are the captured cube plus (0.02, 0): one made by the Engine, the others its
    steps with other joints and cubes (loaded in one batch). Each round moves the
    joints (no recording passes: a miss, the agent runs, the run is learned), then
    moves the cube within ``binding_max_shift`` and times the next call: a hit
    whose arguments are rebound, after learning the trajectory just committed.

    The user's checks are opaque: the Engine cannot index them, only run them. It
    tries candidates in the walk's rank order (most successes, most recent) and
    stops at the first whose compare says True, so a hit runs the checks of the
    candidates ranked before it and its own; a miss runs every candidate's. Beside
    the call: how many compares it ran, the miss before it (the agent's run aside:
    its time is the Engine's judging every candidate and learning), and the user's
    own capture and compare run on every candidate, the least a call that judged
    them all could cost.
    """
    from dataclasses import replace
    from muscle_mem_ros import Check, Engine, SqliteStore
    from muscle_mem_ros.engine.arguments import infer

    rng = np.random.default_rng(n)
    world = {'joints': rng.uniform(-1, 1, 6), 'cube': np.array([0.4, 0.0])}

    def capture(x: float, y: float) -> dict[str, list[float]]:
        return {'joints': world['joints'].tolist(), 'cube': world['cube'].tolist()}

    compares = [0]

    def compare(current: dict[str, list[float]], recorded: dict[str, list[float]]) -> bool:
        compares[0] += 1
        return max(abs(a - b) for a, b in zip(current['joints'], recorded['joints'])) <= 0.05

    engine = Engine(store=str(path))
    moved: list[tuple[float, float]] = []

    @engine.tool(pre_check=Check(capture, compare))
    def move(x: float, y: float) -> None:
        moved.append((x, y))

    def agent() -> None:
        move(float(world['cube'][0]) + 0.02, float(world['cube'][1]))

    engine.set_agent(agent).finalize()
    assert engine() is False
    t0 = time.perf_counter()
    users = []
    with SqliteStore(path=path) as bulk, bulk.batch():
        (template,) = bulk.trajectories()
        (node,) = bulk.path(template.id)
        users.append(node.step.pre.user)
        for _ in range(n - 1):
            cube = np.array([rng.uniform(0.3, 0.5), rng.uniform(-0.2, 0.2)])
            spec = infer((float(cube[0]) + 0.02, float(cube[1])), {}, None)
            user = {'joints': rng.uniform(-1, 1, 6).tolist(), 'cube': cube.tolist()}
            users.append(user)
            step = replace(node.step, payload=spec.encode(allow_pickle=False),
                           payload_json=spec.describe(), pre=Snapshot(user=user))
            bulk.add_trajectory(task=template.task, variant='', params_json=template.params_json,
                                steps=[step])
    built = time.perf_counter() - t0
    after, again, missed, ran = [], [], [], []
    for _ in range(calls):
        world['joints'] = rng.uniform(-1, 1, 6)
        world['cube'] = np.array([rng.uniform(0.3, 0.5), rng.uniform(-0.2, 0.2)])
        t0 = time.perf_counter()
        assert engine() is False  # a miss: the agent's run is learned
        missed.append(time.perf_counter() - t0)
        world['cube'] = world['cube'] + 0.03
        compares[0] = 0
        t0 = time.perf_counter()
        hit = engine()
        after.append(time.perf_counter() - t0)
        ran.append(compares[0])
        assert hit is True and abs(moved[-1][0] - (world['cube'][0] + 0.02)) < 1e-9
        t0 = time.perf_counter()
        assert engine() is True  # the same call with nothing new to learn
        again.append(time.perf_counter() - t0)
    floor = []
    for _ in range(5):
        t0 = time.perf_counter()
        for recorded in users:
            compare(capture(0.0, 0.0), recorded)
        floor.append(time.perf_counter() - t0)
    return {'build': built, 'p50': pct(after, 50), 'p99': pct(after, 99),
            'samples': len(after), 'again_p50': pct(again, 50), 'floor_p50': pct(floor, 50),
            'miss_p50': pct(missed, 50), 'compares_p50': pct(ran, 50)}
