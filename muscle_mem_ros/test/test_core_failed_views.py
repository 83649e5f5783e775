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
What a camera saw when a check failed, kept by every store: bounded, read, forgotten, migrated.

The memory store, an SQLite file and a real PostgreSQL server (skipped where ``initdb`` is
missing) keep the latest failed view per learned step, sensor and phase.
"""

from __future__ import annotations

import sqlite3

from muscle_mem_ros.records import FailedView, Snapshot, Step, ToolKind, ViewPhase
from muscle_mem_ros.store import MemoryStore, PostgresStore, SqliteStore
from muscle_mem_ros.store import schema
from muscle_mem_ros.store.postgres import schema as pgschema
from pg_server import pg_server  # noqa: F401 (a fixture)
import pytest


@pytest.fixture(params=['memory', 'sqlite', 'postgres'])
def store(request, tmp_path):
    if request.param == 'memory':
        s = MemoryStore()
    elif request.param == 'sqlite':
        s = SqliteStore(path=tmp_path / 's.db')
    else:
        s = PostgresStore(url=request.getfixturevalue('pg_server').new_url())
    yield s
    s.close()


def step(name: str) -> Step:
    return Step(tool=name, kind=ToolKind.ACTION, type_name='pkg/action/A',
                payload=name.encode(), payload_json='{}',
                pre=Snapshot(features={'q': (1.0,)}), post=Snapshot(features={'q': (2.0,)}))


def learn(store, tools, task='t'):
    rec = store.begin(task=task, variant='', params_json='{}')
    for tool in tools:
        rec.append(step(tool))
    return rec.commit()


def view(node_id: int, *, task='t', sensor='camera', phase=ViewPhase.PRE, at=1.0,
         png=b'\x89PNG one') -> FailedView:
    return FailedView(task=task, node_id=node_id, sensor=sensor, phase=phase, at=at,
                      reason=f'seen at {at}', png=png)


def shown(views):
    return [(v.task, v.node_id, v.sensor, v.phase, v.at, v.reason, v.png) for v in views]


def rows(store) -> int | None:
    """Return how many rows an SQL store's table holds (None for the memory store)."""
    if isinstance(store, SqliteStore):
        conn = sqlite3.connect(store.file)
        try:
            return conn.execute('SELECT count(*) FROM failed_views').fetchone()[0]
        finally:
            conn.close()
    if isinstance(store, PostgresStore):
        with store._reading() as conn:
            return conn.execute('SELECT count(*) FROM failed_views').fetchone()[0]
    return None


def test_the_latest_view_per_step_sensor_and_phase_is_kept_and_read(store):
    a = learn(store, ['a', 'b'])
    first, second = a.node_ids
    for n in range(50):  # a robot missing the same step again and again keeps one picture
        assert store.keep_failed_view(view(first, at=float(n), png=b'frame %d' % n))
    assert store.keep_failed_view(view(first, phase=ViewPhase.DURING, at=60.0))
    assert store.keep_failed_view(view(first, sensor='jpeg', at=70.0))
    assert store.keep_failed_view(view(second, phase=ViewPhase.POST, at=80.0))
    assert shown(store.failed_views(task='t')) == [
        ('t', first, 'camera', ViewPhase.PRE, 49.0, 'seen at 49.0', b'frame 49'),
        ('t', first, 'jpeg', ViewPhase.PRE, 70.0, 'seen at 70.0', b'\x89PNG one'),
        ('t', first, 'camera', ViewPhase.DURING, 60.0, 'seen at 60.0', b'\x89PNG one'),
        ('t', second, 'camera', ViewPhase.POST, 80.0, 'seen at 80.0', b'\x89PNG one'),
    ]
    assert [v.at for v in store.failed_views(task='t', node_id=second)] == [80.0]
    assert store.failed_views(task='other') == []
    assert rows(store) in (None, 4)  # bounded in the file too, not only in what is read


def test_a_view_of_a_step_not_stored_for_its_task_is_not_kept(store):
    a = learn(store, ['a'])
    learn(store, ['z'], task='u')
    assert not store.keep_failed_view(view(a.node_ids[0] + 1000))
    assert not store.keep_failed_view(view(a.node_ids[0], task='u'))
    assert store.failed_views(task='t') == [] and store.failed_views(task='u') == []


def test_forgetting_a_trajectory_takes_its_own_steps_views_and_a_task_all_of_them(store):
    a = learn(store, ['a', 'b'])
    b = learn(store, ['a', 'c'])  # shares step 'a'
    shared, only_a = a.node_ids
    only_b = b.node_ids[1]
    for node in (shared, only_a, only_b):
        assert store.keep_failed_view(view(node))
    learn(store, ['x'], task='u')
    assert store.keep_failed_view(view(store.trajectories(task='u')[0].node_ids[0], task='u'))
    store.forget(task='t', trajectory_id=a.id)
    assert [v.node_id for v in store.failed_views(task='t')] == [shared, only_b]
    assert rows(store) in (None, 3)  # the forgotten step's row is gone, not only hidden
    store.forget(task='t')
    assert store.failed_views(task='t') == []
    assert len(store.failed_views(task='u')) == 1
    again = learn(store, ['a', 'b'])  # learned anew: no old view comes back
    assert store.failed_views(task='t', node_id=again.node_ids[0]) == []
    assert rows(store) in (None, 1)


def test_a_version_12_sqlite_store_migrates_keeping_its_rows_and_then_keeps_views(tmp_path):
    path = tmp_path / 'old.db'
    with SqliteStore(path=path) as s:
        kept = learn(s, ['a', 'b'])
        s.note_source(trajectory_id=kept.id, source='run.mcap 0-3 s')
    conn = sqlite3.connect(path)  # as schema 12 left it
    conn.execute('DROP TABLE failed_views')
    conn.execute('DROP TABLE revoked_bodies')
    conn.execute('PRAGMA user_version = 12')
    conn.close()
    with SqliteStore(path=path) as s:
        assert s.backup is not None and s.backup.name == 'old.db.v12.bak'
        assert [n.step.tool for n in s.path(kept.id)] == ['a', 'b']
        assert s.sources(task='t') == {kept.id: 'run.mcap 0-3 s'}
        assert s.failed_views(task='t') == []
        assert s.keep_failed_view(view(kept.node_ids[1], phase=ViewPhase.POST))
    with SqliteStore(path=path, read_only=True) as s:
        assert [v.node_id for v in s.failed_views(task='t')] == [kept.node_ids[1]]
    conn = sqlite3.connect(path)
    assert conn.execute('PRAGMA user_version').fetchone()[0] == schema.SCHEMA_VERSION == 14
    conn.close()


def test_a_version_12_postgres_store_migrates_and_a_fleet_shares_its_views(
        pg_server):  # noqa: F811
    import psycopg
    url = pg_server.new_url()
    with PostgresStore(url=url) as s:
        kept = learn(s, ['a', 'b'])
    ns = pgschema.NAMESPACE
    with psycopg.connect(url, autocommit=True) as conn:  # as schema 12 left it
        conn.execute(f'DROP TABLE {ns}.failed_views')
        conn.execute(f'DELETE FROM {ns}.schema_version WHERE version > 12')
    with PostgresStore(url=url, robot_id='A') as a, PostgresStore(url=url, robot_id='B') as b:
        assert [n.step.tool for n in a.path(kept.id)] == ['a', 'b']
        assert a.keep_failed_view(view(kept.node_ids[0], png=b'\x00\xffbytes'))
        assert shown(b.failed_views(task='t')) == [
            ('t', kept.node_ids[0], 'camera', ViewPhase.PRE, 1.0, 'seen at 1.0', b'\x00\xffbytes')]
    with psycopg.connect(url, autocommit=True) as conn:
        versions = conn.execute(f'SELECT version FROM {ns}.schema_version ORDER BY version')
        assert [v[0] for v in versions.fetchall()] == [*range(1, pgschema.SCHEMA_VERSION + 1)]
    assert pgschema.SCHEMA_VERSION == 13
