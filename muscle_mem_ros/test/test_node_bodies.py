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
The body a branch was learned on, on two robots of different build sharing one PostgreSQL store.

Two behavior_cache processes (robots A and B: the same ROS names on two ROS domains, as on
two machines), each with its fake arm and agent, and each its own robot description
published on ``robot_description`` (transient local, as robot_state_publisher does; the
harness remaps it under its prefix, so no other test's description reaches it): a
Panda on A, a UR5e on B. Both learn the same task name; each replays its own branch, never
the other's. A recalibrated Panda (one number of its description changed) misses until its
owner declares the two bodies compatible; a store learned before bodies replays as before.
"""

from __future__ import annotations

import os
from pathlib import Path
import re
import sqlite3
import threading

from action_msgs.msg import GoalStatus
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import Replay
from muscle_mem_ros.body import Body
from muscle_mem_ros.cli import main
from muscle_mem_ros.store import PostgresStore
from node_helpers import (
    CacheProcess, Harness, Names, OBJECT_HOME, params, run_cache_to_exit, wait_until,
    write_params,
)
from pg_server import _make
import pytest
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

PANDA = ('<robot name="panda"><link name="base"/>'
         '<joint name="j1" type="revolute"><origin xyz="0 0 0.333"/></joint></robot>')
RECALIBRATED = PANDA.replace('0.333', '0.3335')
UR5E = ('<robot name="ur5e"><link name="base_link"/>'
        '<joint name="shoulder_pan_joint" type="revolute"><origin xyz="0 0 0.1625"/></joint>'
        '</robot>')
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


class Described:
    """A harness whose robot publishes its description on /robot_description."""

    def __init__(self, h: Harness, description: str) -> None:
        self.h = h
        node = Node(f'{h.names.prefix}_rsp', context=h.context)
        h.extra_nodes.append(node)
        h.executor.add_node(node)
        self._pub = node.create_publisher(String, h.names.description, LATCHED)
        self.describe(description)

    def describe(self, description: str) -> None:
        self._pub.publish(String(data=description))

    def body(self) -> str:
        """Return the body key the cache logged at configure (the latest start)."""
        assert self.h.cache is not None
        found = re.findall(r'this robot is \S+ \((\S+)\): description from', self.h.cache.output())
        assert found, self.h.cache.output()
        return str(found[-1])


@pytest.fixture(scope='module')
def fleet(tmp_path_factory):
    server = _make()
    url = server.new_url()
    names = Names.unique()
    domain = int(os.environ.get('ROS_DOMAIN_ID', '0'))
    a = Harness(tmp=tmp_path_factory.mktemp('panda'), names=names, domain_id=domain)
    b = Harness(tmp=tmp_path_factory.mktemp('ur5e'), names=names, domain_id=(domain + 50) % 101)
    try:
        arm_a, arm_b = Described(a, PANDA), Described(b, UR5E)
        a.start_cache(store_path=url, robot_id='robot_a', robot_description_timeout=5.0)
        b.start_cache(store_path=url, robot_id='robot_b', robot_description_timeout=5.0)
        yield url, arm_a, arm_b
    finally:
        a.close()
        b.close()
        server.destroy()


@pytest.fixture
def robots(fleet):
    url, arm_a, arm_b = fleet
    for h in (arm_a.h, arm_b.h):
        h.robot.reset()
        h.agent.fail_next = False
        assert h.cache is not None and h.cache.alive(), h.cache.output()
    yield url, arm_a, arm_b
    for h in (arm_a.h, arm_b.h):
        assert h.cache is not None and h.cache.alive(), h.cache.output()


def run(h: Harness, task: str, *, hit: bool):
    h.robot.reset()
    calls = len(h.agent.calls)
    done = h.run_task(task)
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert done.result.cache_hit is hit, done.result.message
    assert len(h.agent.calls) == calls + (0 if hit else 1)
    h.robot.reset()
    return done.result


def dry_run(h: Harness, task: str):
    h.robot.reset()
    return h.call(Replay, 'replay', task=task, dry_run=True)


def test_two_arms_of_different_build_learn_one_task_and_each_replays_its_own(robots):
    url, panda, ur5e = robots
    a, b = panda.h, ur5e.h
    learned_a = run(a, 'pick_bodies', hit=False).trajectory_id
    learned_b = run(b, 'pick_bodies', hit=False).trajectory_id  # the Panda's is not the UR5e's
    assert learned_b != learned_a
    (miss,) = b.wait_events(CacheEvent.MISS, 'pick_bodies')
    assert f'learned on {Body.parse(panda.body())}, this robot is ' \
        f'{Body.parse(ur5e.body())}' in miss.detail
    for _ in range(2):
        assert run(a, 'pick_bodies', hit=True).trajectory_id == learned_a
        assert run(b, 'pick_bodies', hit=True).trajectory_id == learned_b
    with PostgresStore(url=url) as store:
        bodies = {t.id: t.body for t in store.trajectories(task='pick_bodies')}
    assert bodies == {learned_a: panda.body(), learned_b: ur5e.body()}
    assert main(['tree', url, 'pick_bodies']) == 0  # the body is shown per trajectory


def test_a_shadow_run_on_one_arm_predicts_nothing_from_the_others_branch(robots):
    url, panda, ur5e = robots
    a, b = panda.h, ur5e.h
    learned = run(a, 'shadow_bodies', hit=False).trajectory_id
    assert b.set_mode('shadow').successful
    try:
        b.robot.reset()
        done = b.run_task('shadow_bodies')
        assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
        assert 'shadow: 0 of 4 steps agreed with the cache; step 0: the cache would have ' \
            'handed off here' in done.result.message, done.result.message
    finally:
        assert b.set_mode('learn').successful
    with PostgresStore(url=url) as store:
        agreed, _ = store.agreement(task='shadow_bodies')
        assert learned not in agreed  # the Panda's branch earned nothing on the UR5e
        assert {t.body for t in store.trajectories(task='shadow_bodies')} == {
            panda.body(), ur5e.body()}  # the UR5e learned its own


def test_a_recalibrated_arm_misses_until_its_owner_declares_the_bodies_compatible(robots):
    url, panda, _ = robots
    a = panda.h
    learned = run(a, 'place_bodies', hit=False).trajectory_id
    before = panda.body()
    a.stop_cache()
    panda.describe(RECALIBRATED)
    try:
        a.start_cache(store_path=url, robot_id='robot_a', robot_description_timeout=5.0)
        after = panda.body()
        assert after != before and Body.parse(after).name == 'panda'
        answer = dry_run(a, 'place_bodies')
        assert not answer.success
        assert f'learned on {Body.parse(before)}, this robot is {Body.parse(after)}' in \
            answer.message
        assert not a.call(Replay, 'replay', task='place_bodies').success  # no move either
        assert main(['bodies', url, '--compatible', str(Body.parse(before)), after,
                     '--who', 'carol']) == 0
        answer = dry_run(a, 'place_bodies')  # read with the next run: no restart
        assert answer.success, answer.message
        assert answer.trajectory_id == learned
        assert run(a, 'place_bodies', hit=True).trajectory_id == learned
    finally:
        a.stop_cache()
        panda.describe(PANDA)
        a.start_cache(store_path=url, robot_id='robot_a', robot_description_timeout=5.0)
    assert panda.body() == before


def test_a_store_learned_before_bodies_replays_as_before(robots, tmp_path: Path):
    _, panda, _ = robots
    a = panda.h
    path = tmp_path / 'old.db'
    a.stop_cache()
    try:
        a.start_cache(store_path=str(path), robot_description_timeout=5.0)
        learned = run(a, 'fetch_bodies', hit=False).trajectory_id
        a.stop_cache()
        conn = sqlite3.connect(path)  # as schema 10 left it: no bodies
        conn.execute('DROP TABLE compatible_bodies')
        conn.execute('ALTER TABLE trajectories DROP COLUMN body')
        conn.execute('PRAGMA user_version = 10')
        conn.commit()
        conn.close()
        a.start_cache(store_path=str(path), robot_description_timeout=5.0)
        assert 'store: 1 trajectory learned before trajectories recorded their body: it ' \
            'replays on any body, as before' in a.cache.output()
        assert run(a, 'fetch_bodies', hit=True).trajectory_id == learned
    finally:
        a.stop_cache()
        a.start_cache(store_path=robots[0], robot_id='robot_a',
                      robot_description_timeout=5.0)


def test_a_branch_another_body_adds_mid_walk_is_not_replayed_here(robots):
    """
    Issue 43 item 8: the body is checked at every step of a walk, whatever the gate.

    A trajectory learned before bodies ('' : both arms replay it) is the shared trunk. The
    Panda's walk is held in its first step; meanwhile the UR5e, with the object bumped after
    the gripper, learns its own branch under the trunk's second step, and the store tells
    the Panda's cache of it. The Panda, bumped the same way, then reaches that node: the
    UR5e's branch passes its checks there, but it is another body's, so the Panda misses and
    asks its agent.
    """
    url, panda, ur5e = robots
    a, b = panda.h, ur5e.h
    source = run(a, 'trunk_source_bodies', hit=False).trajectory_id
    bumped = (OBJECT_HOME[0] + 0.2, OBJECT_HOME[1] - 0.1, OBJECT_HOME[2])
    a.stop_cache()  # a step held while the other arm learns: give it time
    a.start_cache(store_path=url, robot_id='robot_a', robot_description_timeout=5.0,
                  step_timeout=60.0)
    entered, release = threading.Event(), threading.Event()
    plain = a.robot._count_call
    try:
        with PostgresStore(url=url) as store:
            info = store.trajectory(source)
            trunk = store.add_trajectory(
                task='trunk_bodies', variant=info.variant, params_json=info.params_json,
                steps=[n.step for n in store.path(source)], body='')
            assert len(store.children(task='trunk_bodies', variant=info.variant,
                                      parent=trunk.node_ids[1])) == 1

            def held() -> None:
                if not entered.is_set():
                    entered.set()
                    assert release.wait(60.0)
                plain()
            a.robot._count_call = held
            a.robot.reset()
            a.robot.bump_after = (2, bumped)
            handle = a.send_task('trunk_bodies')
            assert handle.accepted
            assert entered.wait(30.0)  # the Panda's walk is in its first step
            b.robot.reset()
            b.robot.bump_after = (2, bumped)
            done_b = b.run_task('trunk_bodies')
            assert done_b.result.success and not done_b.result.cache_hit, done_b.result.message
            assert b.agent.calls[-1].resume_from_step == 2  # a branch under the trunk
            assert wait_until(lambda: len(store.children(
                task='trunk_bodies', variant=info.variant, parent=trunk.node_ids[1])) == 2)
            branch = done_b.result.trajectory_id
            release.set()
            calls = len(a.agent.calls)
            done_a = a.result(handle, 60.0)
            assert done_a.status == GoalStatus.STATUS_SUCCEEDED, done_a.result.message
            assert not done_a.result.cache_hit, done_a.result.message
            assert done_a.result.trajectory_id != branch
            assert len(a.agent.calls) == calls + 1
            assert a.agent.calls[-1].resume_from_step == 2
            assert "is not this body's to replay: learned after this run read the tree" in \
                a.agent.calls[-1].resume_reason, a.agent.calls[-1].resume_reason
            assert store.trajectory(branch).body == ur5e.body()
            assert store.trajectory(done_a.result.trajectory_id).body == panda.body()
    finally:
        release.set()
        a.robot._count_call = plain
        a.stop_cache()
        a.start_cache(store_path=url, robot_id='robot_a', robot_description_timeout=5.0)


@pytest.mark.parametrize('text, error', [
    ('panda:\n  joints: 7\n', 'syntax error'),  # YAML, not a description
    (PANDA[:len(PANDA) // 2], 'unclosed token'),  # a URDF cut off halfway
])
def test_a_description_file_that_is_not_a_description_fails_at_start(tmp_path, text, error):
    """Issue 43 item 10: the node exits at start, naming the file and the parse error."""
    path = tmp_path / 'panda.urdf'
    path.write_text(text)
    names = Names.unique()
    values = params(names, store=tmp_path / 'c.db', robot_description_file=str(path))
    done = run_cache_to_exit(names=names, values=values, tmp=tmp_path)
    assert done.returncode == 1, done.stderr
    assert f'bad configuration: robot_description_file: {str(path)!r} is not XML' in \
        done.stderr, done.stderr
    assert error in done.stderr, done.stderr


def test_a_xacro_description_file_is_said_not_expanded_at_start(tmp_path):
    """Issue 43 item 10: a .urdf.xacro is another body than its expansion, and the log says so."""
    path = tmp_path / 'panda.urdf.xacro'
    path.write_text('<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="panda">'
                    '<xacro:property name="z" value="0.333"/><link name="base"/></robot>')
    names = Names.unique()
    values = params(names, store=tmp_path / 'c.db', robot_description_file=str(path))
    cache = CacheProcess(names=names, params_file=write_params(tmp_path / 'p.yaml', names.node,
                                                               values), log=tmp_path / 'c.log')
    try:
        assert wait_until(lambda: 'behavior cache ready' in cache.output()
                          or not cache.alive(), 30.0), cache.output()
        assert cache.alive(), cache.output()
        warned = [line for line in cache.output().splitlines()
                  if 'WARN' in line and 'xacro' in line]
        assert warned and 'not expanded' in warned[0] and str(path) in warned[0], \
            cache.output()
        assert 'a different body from the URDF it expands to' in warned[0], warned[0]
    finally:
        cache.stop()


def test_a_description_that_changes_while_running_changes_the_body_and_says_so(robots):
    """Issue 43 item 10: the running Panda is recalibrated; its body changes at once, logged."""
    url, panda, _ = robots
    a = panda.h
    learned = run(a, 'moved_bodies', hit=False).trajectory_id
    before = Body.parse(panda.body())
    try:
        panda.describe(PANDA.replace('0.333', '0.334'))  # (not the one declared compatible)
        assert wait_until(lambda: 'robot description changed' in a.cache.output(), 10.0), \
            a.cache.output()
        changed = [line for line in a.cache.output().splitlines()
                   if 'robot description changed' in line][-1]
        assert 'WARN' in changed and f'was {before}' in changed, changed
        answer = dry_run(a, 'moved_bodies')
        assert not answer.success and f'learned on {before}, this robot is panda@' in \
            answer.message, answer.message
    finally:
        panda.describe(PANDA)
        assert wait_until(lambda: a.cache.output().count('robot description changed') >= 2)
    assert run(a, 'moved_bodies', hit=True).trajectory_id == learned  # its own body again


def test_a_cache_with_no_description_yet_replays_no_branch_of_a_known_body(tmp_path):
    """
    Issue 43 item 10: a missed description does not merge models that share joint names.

    The cache waited for a description that did not come: until one does, it replays no
    branch learned on a known body, not even one it learned itself meanwhile (another model
    with the same joint names, in the same state, would have learned the same). Once the
    description arrives, it is the described body, and the log says so.
    """
    h = Harness(tmp=tmp_path)
    try:
        arm = Described(h, '')  # a robot_state_publisher that has published nothing useful
        h.start_cache(robot_description_timeout=0.5)
        assert 'no description yet' in h.cache.output(), h.cache.output()
        run(h, 'late_bodies', hit=False)
        h.robot.reset()
        calls = len(h.agent.calls)
        done = h.run_task('late_bodies')
        assert done.result.success and not done.result.cache_hit, done.result.message
        assert len(h.agent.calls) == calls + 1
        arm.describe(PANDA)
        assert wait_until(lambda: 'robot description arrived' in h.cache.output(), 10.0), \
            h.cache.output()
        learned = run(h, 'late_bodies', hit=False).trajectory_id  # learned on the Panda now
        assert run(h, 'late_bodies', hit=True).trajectory_id == learned
    finally:
        h.close()
