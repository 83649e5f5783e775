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

"""Candidates in rank order, kept as the tree changes; the Engine runs only the checks it needs."""

from __future__ import annotations

import random

from muscle_mem_ros import Check, Engine, MemoryStore, Snapshot, SqliteStore, Step, ToolKind
from muscle_mem_ros.checks.tolerance import user_similarity
from muscle_mem_ros.replay.ranking import rank_key, RankOrder
from muscle_mem_ros.store import PostgresStore
from pg_server import pg_server  # noqa: F401 (a fixture)
import pytest


@pytest.fixture(params=['memory', 'sqlite', 'postgres'])
def store(request, tmp_path):
    if request.param == 'memory':
        s = MemoryStore()
    elif request.param == 'sqlite':
        s = SqliteStore(path=tmp_path / 's.db')
    else:
        s = PostgresStore(url=request.getfixturevalue('pg_server').new_url(), robot_id='r1')
    yield s
    s.close()


def one_step(store, name: str):
    step = Step(tool='t', kind=ToolKind.ACTION, type_name='pkg/action/A', payload=name.encode(),
                payload_json='{}', pre=Snapshot(features={'q': (1.0,)}))
    return store.add_trajectory(task='t', variant='', params_json='{}', steps=[step])


def ranked(kids):
    return [n.id for n in sorted(kids, key=lambda n: rank_key(n, 0.0))]


def test_the_order_is_the_walks_as_children_come_and_are_replayed(store):
    rng = random.Random(7)
    order = RankOrder(smallest=1)
    made = [one_step(store, f'n{i}') for i in range(30)]
    kids = store.children(task='t', variant='', parent=None)
    assert [n.id for n in order(kids)] == ranked(kids)
    for i in range(120):
        what = rng.random()
        if what < 0.2:
            made.append(one_step(store, f'm{i}'))
        elif what < 0.25 and len(made) > 5:
            store.forget(task='t', trajectory_id=made.pop(rng.randrange(len(made))).id)
        else:
            store.note_replay(trajectory_id=rng.choice(made).id)
        kids = store.children(task='t', variant='', parent=None)
        assert [n.id for n in order(kids)] == ranked(kids), (i, what)


def test_another_writers_replays_are_seen(tmp_path):
    path = tmp_path / 's.db'
    with SqliteStore(path=path) as mine, SqliteStore(path=path) as theirs:
        made = [one_step(mine, f'n{i}') for i in range(40)]
        order = RankOrder(smallest=1)
        kids = mine.children(task='t', variant='', parent=None)
        first = [n.id for n in order(kids)]
        for tid in (made[5].id, made[30].id, made[30].id):
            theirs.note_replay(trajectory_id=tid)
        kids = mine.children(task='t', variant='', parent=None)
        now = [n.id for n in order(kids)]
        assert now == ranked(kids)
        assert now[:2] == [made[30].node_ids[0], made[5].node_ids[0]] and now != first


def test_a_log_started_over_is_read_whole():
    store = MemoryStore()
    made = [one_step(store, f'n{i}') for i in range(3)]
    order = RankOrder(smallest=1)
    logs = set()
    rng = random.Random(3)
    for _ in range(700):
        store.note_replay(trajectory_id=rng.choice(made).id)
        kids = store.children(task='t', variant='', parent=None)
        logs.add(id(kids.changes))
        assert [n.id for n in order(kids)] == ranked(kids)
    assert len(logs) > 1  # the log outgrew three children and started over


def test_the_engine_chooses_as_if_it_judged_every_candidate_and_stops_at_a_match():
    """
    The Engine's choice equals the rule over all candidates; its compares are what it needed.

    A compare of 1.0 (or True) ends the search at the first candidate in rank order,
    so a hit runs the checks of the candidates ranked before it and its own; with
    only lesser similarities every candidate is judged.
    """
    rng = random.Random(11)
    world = {'x': 0.0}
    compares = []
    picked = []

    def similarity(now, then):
        compares.append(then)
        d = abs(now - then)
        return True if d < 0.01 else max(0.0, 0.5 - d)

    engine = Engine()

    @engine.function(pre_check=Check(lambda name: world['x'], similarity))
    def pick(name):
        picked.append(name)

    engine.set_agent(lambda: pick(f'{world["x"]:.6f}'))
    store = engine.store
    hits = stopped = 0
    for i in range(300):
        world['x'] = rng.choice([rng.uniform(0, 80), float(rng.randrange(0, 20))])
        kids = store.children(task='[]', variant='', parent=None)
        order = sorted(kids, key=lambda n: rank_key(n, 0.0))
        sims = [user_similarity(similarity(world['x'], n.step.pre.user)) for n in order]
        compares.clear()
        passing = [(n, -s) for n, s in zip(order, sims) if s > 0]
        hit = engine()
        if not passing:
            assert not hit and picked[-1] == f'{world["x"]:.6f}', i
            continue
        best, distance = min(passing, key=lambda item: rank_key(*item))
        assert hit and picked[-1] == f'{best.step.pre.user:.6f}', i
        hits += 1
        if distance == -1.0:
            assert len(compares) == order.index(best) + 1, i
            stopped += 1
        else:
            assert len(compares) == len(order), i
    assert hits > 100 and stopped > 50 and len(kids) > 40
