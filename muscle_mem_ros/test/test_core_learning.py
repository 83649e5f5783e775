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
Incremental learning against the rule learned over the whole tree at once.

``reference`` below is the learning rule written the obvious way (every trajectory
read, every group recomputed); the :class:`~muscle_mem_ros.bindings.learning.Learner` must
give the same plans whether the trajectories come at once or one by one with plans
read in between (its caches), on random trees with shared prefixes, several
shapes, parameters and declared bindings.
"""

from __future__ import annotations

import json
import math
import random

from muscle_mem_ros.bindings.learning import follow, learn, Learner
from muscle_mem_ros.bindings.rules import (
    Binding, DECLARED, Declared, element_tolerances, goal_leaves, INFERRED, is_number,
    moved_sensors, param_leaves, Plan, sensor_elements, split_element,
)
from muscle_mem_ros.records import CompareMode, Node, SensorSpec, Snapshot, Step, ToolKind
from muscle_mem_ros.store import SqliteStore
import pytest

SENSORS = [SensorSpec('object', (0.02,), CompareMode.NORM),
           SensorSpec('ee', (0.02,), CompareMode.NORM),
           SensorSpec('joints', (0.05, 0.05, 0.05), CompareMode.ABS)]
TOL = element_tolerances(SENSORS)
MAX_SHIFT = 0.1


# -- the reference: the rule over the whole tree ------------------------------------------------


def reference(paths, declared=(), max_shift=MAX_SHIFT):
    obs = {}
    for nodes, params in paths:
        for n in nodes:
            obs.setdefault(n.id, (n, goal_leaves(n.step), sensor_elements(n.step.pre),
                                  sensor_elements(n.step.post), param_leaves(params)))
    found = {i: {} for i in obs}
    for i, (n, goal, pre, _post, params) in obs.items():
        for path, value in goal.items():
            if (is_number(value) and value == 0) or value == '':
                continue
            for source, param in params.items():
                kind = is_number(param) if isinstance(value, float) else \
                    type(param) is type(value)
                if kind and param == value:
                    found[i][path] = Binding(path, source, 0.0, None, INFERRED)
        for d in declared:
            if d.tool != n.step.tool:
                continue
            fields = [p for p in goal if p == d.field or p.startswith(d.field + '.')]
            pool = params if d.source.startswith('param:') else pre
            sources = [d.source] if d.source in pool else sorted(
                (k for k in pool if k.startswith(d.source + '[')),
                key=lambda k: split_element(k)[1])
            for path, source in zip(fields, sources):
                offset = float(goal[path] - pool[source])
                if d.source.startswith('sensor:') and abs(offset) > d.max_shift:
                    continue
                if d.source.startswith('param:') and offset != 0:
                    continue
                found[i].setdefault(path, Binding(
                    path, source, offset if d.source.startswith('sensor:') else 0.0,
                    d.max_shift, DECLARED))
    grouped = {i: [] for i in obs}  # every group binding of a step, shadowed or not
    shapes = {}
    for nodes, _ in paths:
        key = tuple((n.step.tool, n.step.type_name, tuple(sorted(
            (p, type(v).__name__) for p, v in obs[n.id][1].items()))) for n in nodes)
        shapes.setdefault(key, []).append(nodes)
    for members in shapes.values():
        for depth in range(len(members[0])):
            group = list({m[depth].id: obs[m[depth].id] for m in members}.values())
            if len(group) < 2:
                continue
            for b in _sensor_bindings(group, max_shift):
                for member in group:
                    found[member[0].id].setdefault(b.field, b)
                    grouped[member[0].id].append(b)
    ahead = {i: {} for i in obs}
    for nodes, _ in paths:
        for k, n in enumerate(nodes):
            for later in nodes[k + 1:]:
                for b in [*found[later.id].values(), *grouped[later.id]]:
                    if b.is_param:
                        continue
                    old = ahead[n.id].get(b.source, math.nan)
                    if isinstance(old, float) and math.isnan(old) or (
                            b.max_shift is not None and (old is None or b.max_shift < old)):
                        ahead[n.id][b.source] = b.max_shift
    plans = {}
    for i, by_field in found.items():
        own = {b.source for b in by_field.values()}
        later = tuple(sorted((s, m) for s, m in ahead[i].items() if s not in own))
        if by_field or later:
            bindings = tuple(by_field[f] for f in sorted(by_field))
            plans[i] = Plan(bindings, _follows(obs[i], bindings), later)
    return plans


def _sensor_bindings(group, max_shift):
    out = []
    shared = set.intersection(*(set(o[2]) for o in group))
    tried = [s for s in sorted(shared) if TOL(s) and TOL(s) > 0 and
             max(o[2][s] for o in group) - min(o[2][s] for o in group) > TOL(s)]
    for path in sorted(group[0][1]):
        found = [o[1].get(path) for o in group]
        values = [v for v in found if isinstance(v, float)]
        if len(values) < len(found) or max(values) - min(values) <= 1e-9:
            continue
        fits = []
        for source in tried:
            diffs = [v - o[2][source] for v, o in zip(values, group)]
            spread = max(diffs) - min(diffs)
            if spread <= TOL(source):
                fits.append((spread / TOL(source), source, sum(diffs) / len(diffs), spread))
        fits.sort()
        # better than chance: n - 1 steps of the field, each matched within the spread
        step = (max(values) - min(values)) / (len(group) - 1)
        floor = 1e-9 * max(1.0, *(abs(v) for v in values))
        likely = [f for f in fits if len(tried) * min(
            1.0, 2 * max(f[3], floor) / step) ** (len(group) - 1) < 1e-3]
        if not likely:
            continue
        best = likely[0][1]
        rivals = [f for f in likely[1:] if not all(
            abs(o[2][best] - o[2][f[1]]) <= min(TOL(best), TOL(f[1])) for o in group)]
        if not rivals:
            out.append(Binding(path, best, likely[0][2], max_shift, INFERRED))
    return out


def _follows(o, bindings):
    _n, goal, pre, post, _params = o
    numeric = [b.field for b in bindings if is_number(goal.get(b.field))]
    moved = moved_sensors(pre, post, TOL)
    out = []
    for key, value in sorted(post.items()):
        if key in pre and split_element(key)[0] not in moved:
            continue
        index = split_element(key)[1]
        axis = {f: ({'x': 0, 'y': 1, 'z': 2}.get(f.rsplit('.', 1)[-1])) for f in numeric}
        near = min(((abs(value - goal[f]), f) for f in numeric if axis[f] in (None, index)),
                   default=None)
        if near is not None and near[0] <= TOL(key):
            out.append((key, near[1]))
    return tuple(out)


# -- random trees --------------------------------------------------------------------------------


TOOLS = ('/arm/move', '/arm/grip')


def random_tree(rng: random.Random, count: int):
    """Return ``count`` trajectories (nodes, params) that share prefixes, in commit order."""
    next_id = [1]
    paths = []
    for _ in range(count):
        cube = (rng.uniform(0.3, 0.5), rng.uniform(-0.2, 0.2), 0.02)
        offset = rng.choice((0.0, 0.01))
        length = rng.choice((2, 3, 3, 4))
        params = rng.choice(({}, {'place': [0.3, -0.3]}, {'place': [round(cube[0], 3), 0.1]}))
        nodes: list[Node] = []
        if paths and rng.random() < 0.4:  # continue an earlier trajectory's prefix
            earlier = rng.choice(paths)[0]
            nodes = list(earlier[:rng.randrange(1, len(earlier))])
        ee = (0.0, 0.0, 0.5)
        for depth in range(len(nodes), length):
            tool = TOOLS[depth % 2] if rng.random() < 0.8 else TOOLS[(depth + 1) % 2]
            noise = rng.choice((0.0, 0.0, rng.uniform(-0.05, 0.05)))
            x, y = cube[0] + offset + noise, cube[1] + offset
            goal = {'target': {'pose': {'position': {'x': x, 'y': y, 'z': 0.1}}}}
            if tool == '/arm/grip':
                goal = {'width': rng.choice((0.0, 0.04, 0.3)), 'speed': 1}
            joints = tuple(rng.uniform(-1, 1) for _ in range(3))
            pre = Snapshot(features={'object': cube, 'ee': ee, 'joints': joints}, taken_at=1.0)
            after = (x, y, 0.1) if tool == '/arm/move' else ee
            post = Snapshot(features={'object': cube, 'ee': after, 'joints': joints},
                            taken_at=2.0)
            step = Step(tool=tool, kind=ToolKind.ACTION, type_name='demo/action/X',
                        payload=json.dumps(goal).encode(), payload_json=json.dumps(goal),
                        pre=pre, post=post)
            parent = nodes[-1].id if nodes else None
            nodes.append(Node(next_id[0], parent, depth, step))
            next_id[0] += 1
            ee = after
        paths.append((nodes, params))
    return paths


DECLARED_MOVE = Declared('/arm/move', 'target.pose.position', 'sensor:object', MAX_SHIFT)


@pytest.mark.parametrize('seed', range(40))
def test_learned_at_once_is_the_rule(seed):
    rng = random.Random(seed)
    paths = random_tree(rng, rng.randrange(2, 14))
    declared = [DECLARED_MOVE] if seed % 3 == 0 else []
    learned = learn(paths, declared=declared, max_shift=MAX_SHIFT, tolerance=TOL)
    assert learned == reference(paths, declared)


def test_the_random_trees_bind_every_way():
    """The comparisons above mean something: the trees bind by every rule."""
    seen = set()
    for seed in range(40):
        rng = random.Random(seed)
        paths = random_tree(rng, rng.randrange(2, 14))
        for plan in reference(paths, [DECLARED_MOVE] if seed % 3 == 0 else []).values():
            seen.update((b.origin, b.source.split(':')[0]) for b in plan.bindings)
            seen.update(('ahead', 'sensor') for _ in plan.ahead)
            seen.update(('follows', 'sensor') for _ in plan.follows)
    assert seen >= {(INFERRED, 'sensor'), (INFERRED, 'param'), (DECLARED, 'sensor'),
                    ('ahead', 'sensor'), ('follows', 'sensor')}


@pytest.mark.parametrize('seed', range(40))
def test_learned_one_by_one_with_plans_read_between_is_the_same(seed):
    rng = random.Random(1000 + seed)
    paths = random_tree(rng, rng.randrange(2, 14))
    declared = [DECLARED_MOVE] if seed % 2 else []
    learner = Learner(declared=declared, max_shift=MAX_SHIFT, tolerance=TOL)
    for k, (nodes, params) in enumerate(paths):
        learner.add(nodes, params)
        assert dict(learner.plans) == reference(paths[:k + 1], declared)
        for node in rng.sample(nodes, k=min(2, len(nodes))):
            assert (node.id in learner.plans) == (learner.plan(node.id) is not None)
        assert bool(learner.plans) == bool(dict(learner.plans))


class Watched:
    """A real store whose tree reads are counted; its trajectories ``hidden`` are not there yet."""

    def __init__(self, store):
        self.store, self.listed, self.read, self.hidden = store, [], [], set()

    def tally(self, *, task, variant):
        found = self.store.trajectories(task=task, variant=variant)
        shown = [t.id for t in found if t.id not in self.hidden]
        assert self.hidden or self.store.tally(task=task, variant=variant) == (
            len(shown), sum(shown))
        return len(shown), sum(shown)

    def trajectories(self, *, task, variant, after=0, limit=None):
        self.listed.append(after)
        found = [t for t in self.store.trajectories(task=task, variant=variant, after=after)
                 if t.id not in self.hidden]
        return found[:limit]

    def nodes(self, node_ids):
        self.read.extend(node_ids)
        return self.store.nodes(node_ids)


def test_follow_reads_only_new_trajectories_and_starts_again_when_they_do_not_add_up(tmp_path):
    store = SqliteStore(path=tmp_path / 'cache.db')
    recorded = random_tree(random.Random(7), 14)
    ids = [store.add_trajectory(task='t', variant='', params_json=json.dumps(params),
                                steps=[n.step for n in nodes]).id for nodes, params in recorded]
    assert len(set(ids)) == len(ids)
    watched = Watched(store)
    watched.hidden = set(ids[10:])
    made: list[Learner] = []

    def new():
        made.append(Learner(max_shift=MAX_SHIFT, tolerance=TOL))
        return made[-1]

    def follow_now(learner):
        return follow(learner, watched, task='t', variant='', new=new,
                      params=lambda info: json.loads(info.params_json))

    def rule(shown):
        return reference([(store.path(i), recorded[ids.index(i)][1]) for i in shown])

    def steps(shown):
        return [n for i in shown for n in store.trajectory(i).node_ids]

    learner = follow_now(None)
    assert watched.read == steps(ids[:10]) and len(made) == 1
    assert dict(learner.plans) == rule(ids[:10])
    watched.read.clear(), watched.listed.clear()
    assert follow_now(learner) is learner
    assert watched.read == [] and watched.listed == []  # nothing new: no listing at all
    watched.hidden.discard(ids[10])  # one commit: one trajectory read
    assert follow_now(learner) is learner
    assert watched.read == steps([ids[10]]) and watched.listed == [ids[9]]
    assert dict(learner.plans) == rule(ids[:11])
    watched.read.clear()
    watched.hidden.discard(ids[12])
    follow_now(learner)
    watched.hidden.discard(ids[11])  # committed late by another robot, with a smaller id
    watched.read.clear()
    again = follow_now(learner)
    assert again is not learner and len(made) == 2 and watched.read == steps(ids[:13])
    assert dict(again.plans) == rule(ids[:13])
    watched.read.clear()
    store.forget(task='t', trajectory_id=ids[4])
    kept = ids[:4] + ids[5:13]
    third = follow_now(again)
    assert third is not again and len(made) == 3 and watched.read == steps(kept)
    assert dict(third.plans) == rule(kept)
    store.close()
