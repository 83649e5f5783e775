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
Two behavior_cache nodes (robots A and B, each with its own agent) on one PostgreSQL store.

Real parts throughout: two cache processes, two fake robots and agents over DDS,
and a PostgreSQL server this module starts (and stops and starts again).
"""

from __future__ import annotations

import os
import threading

from action_msgs.msg import GoalStatus
from diagnostic_msgs.msg import DiagnosticArray
from muscle_mem_interfaces.srv import Forget, ListTasks
from muscle_mem_ros.store import PostgresStore
from muscle_mem_ros.store.postgres import schema as pgschema
from node_helpers import (
    CacheProcess,
    Harness,
    Names,
    params,
    run_cache_to_exit,
    wait_until,
    write_params,
)
from pg_server import _make
import pytest


@pytest.fixture(scope='module')
def fleet(tmp_path_factory):
    server = _make()
    url = server.new_url()
    # Same ROS names on two domains: two robots of a fleet, as on two machines.
    names = Names.unique()
    domain = int(os.environ.get('ROS_DOMAIN_ID', '0'))
    a = Harness(tmp=tmp_path_factory.mktemp('robot_a'), names=names, domain_id=domain)
    b = Harness(tmp=tmp_path_factory.mktemp('robot_b'), names=names,
                domain_id=(domain + 50) % 101)
    try:
        a.start_cache(store_path=url, robot_id='robot_a')
        b.start_cache(store_path=url, robot_id='robot_b')
        yield server, a, b
    finally:
        a.close()
        b.close()
        server.destroy()


@pytest.fixture
def robots(fleet):
    server, a, b = fleet
    for h in (a, b):
        h.robot.reset()
        h.agent.fail_next = False
        h.set_mode('learn')
        assert h.cache is not None and h.cache.alive(), h.cache.output()
    yield server, a, b
    for h in (a, b):
        assert h.cache is not None and h.cache.alive(), h.cache.output()


def listing(h: Harness, task: str):
    response = h.call(ListTasks, 'list_tasks', task=task, with_steps=False)
    assert response.success, response.message
    return response.trajectories


def test_a_learns_and_b_replays_without_calling_its_agent(robots):
    _, a, b = robots
    learned = a.run_task('fleet_pick')
    assert learned.result.success and not learned.result.cache_hit, learned.result.message
    calls = len(b.agent.calls)
    run = b.run_task('fleet_pick')
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.cache_hit and run.result.steps_by_agent == 0, run.result.message
    assert run.result.trajectory_id == learned.result.trajectory_id
    assert len(b.agent.calls) == calls
    assert [t.robot_id for t in listing(b, 'fleet_pick')] == ['robot_a']


def test_b_sees_a_trajectory_learned_after_it_looked_the_task_up(robots):
    _, a, b = robots
    b.set_mode('replay_only')
    miss = b.run_task('fleet_live')  # B's cache now holds the task's (empty) first steps
    assert not miss.result.cache_hit
    learned = a.run_task('fleet_live')
    assert learned.result.success, learned.result.message
    b.set_mode('learn')
    calls = len(b.agent.calls)
    run = b.run_task('fleet_live')
    assert run.result.success and run.result.cache_hit, run.result.message
    assert len(b.agent.calls) == calls


def test_concurrent_learning_on_both_robots_keeps_both_branches(robots):
    _, a, b = robots
    b.robot.move_object((0.1, 0.4, 0.05))  # B's world differs: its agent plans other goals
    b.robot.settle()
    runs = {}

    def run(name, h):
        runs[name] = h.run_task('fleet_both', timeout=120.0)

    threads = [threading.Thread(target=run, args=(n, h)) for n, h in (('a', a), ('b', b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.result.success for r in runs.values()), [r.result.message for r in runs.values()]
    ids = {r.result.trajectory_id for r in runs.values()}
    assert len(ids) == 2
    for h in (a, b):
        found = listing(h, 'fleet_both')
        assert {t.id for t in found} == ids
        assert sorted(t.robot_id for t in found) == ['robot_a', 'robot_b']


def test_forget_on_a_is_seen_by_b(robots):
    _, a, b = robots
    learned = a.run_task('fleet_forget')
    assert learned.result.success, learned.result.message
    assert b.run_task('fleet_forget').result.cache_hit
    done = a.call(Forget, 'forget', task='fleet_forget')
    assert done.success and done.removed == 1, done.message
    gone = b.call(ListTasks, 'list_tasks', task='fleet_forget', with_steps=False)
    assert not gone.success and 'unknown task' in gone.message
    calls = len(b.agent.calls)
    run = b.run_task('fleet_forget')
    assert run.result.success and not run.result.cache_hit, run.result.message
    assert len(b.agent.calls) == calls + 1


def connection_state(diagnostics, node):
    for array in reversed(list(diagnostics)):
        for status in array.status:
            if status.name.startswith(f'{node}:'):
                return {kv.key: kv.value for kv in status.values}.get('store_connection', '')
    return ''


def test_server_stopped_and_started_mid_run(robots):
    server, a, b = robots
    diagnostics: list[DiagnosticArray] = []
    a.client.create_subscription(DiagnosticArray, '/diagnostics', diagnostics.append, 10)
    known = a.run_task('fleet_known')
    assert known.result.success, known.result.message
    a.robot.reset()
    assert a.run_task('fleet_known').result.cache_hit  # loaded before the server goes
    server.stop('immediate')
    a.robot.reset()
    replay = a.run_task('fleet_known')
    assert replay.result.success and replay.result.cache_hit, replay.result.message
    a.robot.reset()
    learned = a.run_task('fleet_offline')  # the agent's steps are kept in memory
    assert learned.result.success, learned.result.message
    assert 'kept in memory' in learned.result.message
    assert wait_until(lambda: connection_state(diagnostics, a.names.node).startswith(
        'unreachable'), 30.0), connection_state(diagnostics, a.names.node)
    server.start()
    assert wait_until(lambda: connection_state(diagnostics, a.names.node) == 'ok', 60.0)
    assert wait_until(lambda: len(b.call(ListTasks, 'list_tasks', task='fleet_offline',
                                         with_steps=False).trajectories) == 1, 60.0)
    calls = len(b.agent.calls)
    run = b.run_task('fleet_offline')
    assert run.result.success and run.result.cache_hit, run.result.message
    assert len(b.agent.calls) == calls
    assert a.cache.alive() and b.cache.alive()


def test_newer_schema_in_the_database_is_a_clear_startup_error(fleet, tmp_path):
    server, _, _ = fleet
    url = server.new_url()
    PostgresStore(url=url).close()
    import psycopg
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'INSERT INTO {pgschema.NAMESPACE}.schema_version (version) VALUES (%s)',
                     (pgschema.SCHEMA_VERSION + 1,))
    names = Names.unique()
    done = run_cache_to_exit(names=names, values=params(names, store=url), tmp=tmp_path)
    assert done.returncode == 1, done.stderr
    assert 'bad configuration: store_path:' in done.stderr
    assert 'newer than this muscle_mem_ros understands' in done.stderr


def test_node_starts_while_the_database_is_away_and_never_prints_the_password(fleet, tmp_path):
    server, _, _ = fleet
    names = Names.unique()
    url = f'postgresql://postgres:pw-s3cret@127.0.0.1:{server.port + 1}/nowhere'
    params_file = write_params(tmp_path / 'away.yaml', names.node, params(names, store=url))
    cache = CacheProcess(names=names, params_file=params_file, log=tmp_path / 'away.log')
    try:
        assert wait_until(lambda: 'behavior cache ready' in cache.output()
                          or not cache.alive(), 60.0), cache.output()
        assert cache.alive(), cache.output()
        assert 'database unreachable' in cache.output()
        assert 'postgres:***@127.0.0.1' in cache.output()
    finally:
        assert cache.stop() == 0
    assert 'pw-s3cret' not in cache.output()
