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
The body a branch was learned on, on the two real arms of the wheel sharing one PostgreSQL store.

A Panda and a Fetch, each its own sim robot, behavior cache and demo agent (``arm`` parameter)
in a namespace of its own; each cache reads its own robot's description from the sim robot's
latched ``robot_description`` (remapped to it explicitly). Both caches use one PostgreSQL
store (a throw-away server, as muscle_mem_ros/test/pg_server.py starts it: skipped, naming
what is missing, without the PostgreSQL binaries or psycopg). Both learn the same task name
(``pick``: four steps); each then replays its own branch without asking its agent, never the
other's: the Fetch's first run is a miss naming both bodies. A recalibrated Panda (its
description with one joint's damping changed, given to a restarted cache as
``robot_description_file``) is a miss until ``muscle-mem bodies STORE --compatible`` declares
the two bodies compatible; then it replays the Panda's branch.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
import re
import threading
import time
from typing import Any

from action_msgs.msg import GoalStatus
from muscle_mem_demo import arms
from muscle_mem_demo.processes import config_path
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import Replay
from muscle_mem_ros.body import Body
from muscle_mem_ros.cli import main
from muscle_mem_ros.ros.rclfix.matching import AgentSeen, wait_for_action_matched
from muscle_mem_ros.store import PostgresStore
import pytest
import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from sim_helpers import (
    FeedbackClient, namespaced_sensors, NodeProcess, SimClient, tf_remaps, unique_namespace,
)
from std_msgs.msg import String
import yaml

TASK = 'pick'
"""The task both arms learn: approach, descend, close, lift (the shortest the agent knows)."""
STEPS = 4
THINK_TIME = 0.05
"""The agents' think time per step, s: short, this test is about bodies."""
_BODY_LOG = re.compile(r'this robot is \S+ \((\S+)\): description from')


def _pg_server() -> Any:
    """Return muscle_mem_ros's test PostgreSQL helper (muscle_mem_ros/test/pg_server.py)."""
    path = Path(__file__).resolve().parents[2] / 'muscle_mem_ros' / 'test' / 'pg_server.py'
    if not path.is_file():
        pytest.skip(f'{path} is missing: the PostgreSQL test server comes from muscle_mem_ros')
    spec = importlib.util.spec_from_file_location('_mm_pg_server', path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cache_params(namespace: str, store: str, arm: str, **extra: Any) -> dict:
    """Return the demo's cache parameters in ``namespace`` for ``arm``'s jaws, on ``store``."""
    demo = yaml.safe_load(config_path('sim_demo.yaml').read_text())
    params = dict(demo['muscle_mem']['ros__parameters'])
    params.update(store_path=store, agent_action=f'{namespace}/demo_agent/execute_task',
                  robot_id=f'{arm}_robot', robot_description_timeout=10.0, **extra)
    params['sensors']['jaws']['joints'] = list(arms.ARMS[arm].gripper_joints)
    namespaced_sensors(params, namespace)
    for tool in params['actions'].values():
        tool['server'] = namespace + tool['server']
        tool['proxy'] = namespace + tool['proxy']
    return {'/**': {'ros__parameters': params}}


class Arm:
    """One arm's three processes and the test's client of them."""

    def __init__(self, arm: str, store: str, logs: Path) -> None:
        self.arm = arm
        self.store = store
        self.logs = logs
        ns = self.namespace = unique_namespace()
        self.node = f'{ns}/muscle_mem'
        self.robot = NodeProcess('muscle_mem_demo.robot_node', namespace=ns,
                                 params={'rtf': 1.0, 'arm': arm}, log_dir=logs)
        self.agent = NodeProcess('muscle_mem_demo.agent_node', namespace=ns, params={
            'arm': arm,
            'think_time': THINK_TIME,
            'arm_action': f'{self.node}/arm/follow_joint_trajectory',
            'pose_action': f'{self.node}/arm/move_to_pose',
            'gripper_action': f'{self.node}/gripper/gripper_cmd',
        }, log_dir=logs)
        self.cache: NodeProcess | None = None
        self.sim = SimClient(ns)
        group = ReentrantCallbackGroup()
        self.execute = FeedbackClient(self.sim, ExecuteTask, f'{self.node}/execute_task',
                                      callback_group=group)
        self.replay = self.sim.create_client(Replay, f'{self.node}/replay',
                                             callback_group=group)
        self.events: list[CacheEvent] = []
        self.agent_calls: list[dict] = []
        self._lock = threading.Lock()
        self.sim.create_subscription(CacheEvent, f'{self.node}/events', self._on_event, 100,
                                     callback_group=group)
        self.sim.create_subscription(String, f'{ns}/demo_agent/calls', self._on_call, 10,
                                     callback_group=group)
        self._seen: AgentSeen | None = None

    def _on_event(self, msg: CacheEvent) -> None:
        with self._lock:
            self.events.append(msg)

    def _on_call(self, msg: String) -> None:
        with self._lock:
            self.agent_calls.append(json.loads(msg.data))

    def start_cache(self, **extra: Any) -> None:
        """Start (or restart) the cache; wait until it serves and has found the agent."""
        self.launch_cache(**extra)
        self.wait_cache()

    def launch_cache(self, **extra: Any) -> None:
        """Start the cache process (:meth:`wait_cache` waits for it)."""
        params_file = self.logs / f'cache_{self.arm}_{time.monotonic_ns()}.yaml'
        params_file.write_text(yaml.safe_dump(
            _cache_params(self.namespace, self.store, self.arm, **extra)))
        self.cache = NodeProcess(
            'muscle_mem_ros.ros.node.main', namespace=self.namespace, params={},
            log_dir=self.logs, ros_args=[
                '--params-file', str(params_file), *tf_remaps(self.namespace),
                '-r', f'robot_description:={self.namespace}/robot_description'])
        self._seen = AgentSeen(self.sim, self.node)

    def wait_cache(self) -> None:
        """Wait until the cache serves, has found the agent and matched the test's reader."""
        cache, seen = self.cache, self._seen
        assert cache is not None and seen is not None
        # this process's own log: a stopped cache's server may linger in the graph a while
        self.sim.wait_for(lambda: bool(_BODY_LOG.search(cache.log())), 60.0,
                          f'the {self.arm} cache to configure')
        self.sim.wait_for(self.execute.server_is_ready, 60.0, f'the {self.arm} cache')
        assert seen.wait(60.0), f'the cache did not find the agent:\n{cache.log()}'
        assert wait_for_action_matched(self.sim, self.execute, self.node, 30.0)
        self.sim.wait_for(lambda: self.replay.service_is_ready(), 30.0, 'the replay service')

    def stop_cache(self) -> None:
        if self.cache is not None:
            self.cache.stop()

    def body(self) -> str:
        """Return the body key the running cache logged at configure."""
        assert self.cache is not None
        found = _BODY_LOG.findall(self.cache.log())
        assert found, self.cache.log()
        return str(found[-1])

    def asked(self) -> int:
        """Return how many tasks the agent has started."""
        with self._lock:
            return sum(1 for c in self.agent_calls if c['event'] == 'start')

    def run(self, *, hit: bool) -> tuple[Any, list[CacheEvent]]:
        """Reset the world, run the task through the cache; return its result and events."""
        self.sim.reset()
        asked = self.asked()
        with self._lock:
            first = len(self.events)
        handle = self.sim.result_of(self.execute.send_goal_async(ExecuteTask.Goal(task=TASK)))
        assert handle.accepted
        response = self.sim.result_of(handle.get_result_async(), 120.0)
        result = response.result
        assert response.status == GoalStatus.STATUS_SUCCEEDED and result.success, result.message
        assert result.cache_hit is hit, result.message
        if hit:
            assert result.steps_replayed == STEPS and result.steps_by_agent == 0, result.message
        else:
            assert result.steps_by_agent == STEPS, result.message
        assert self.asked() == asked + (0 if hit else 1)
        kind = CacheEvent.HIT if hit else CacheEvent.MISS
        self.sim.wait_for(lambda: any(e.type == kind for e in self.events[first:]), 10.0,
                          f'the {self.arm} cache event')
        with self._lock:
            return result, self.events[first:]

    def dry_run(self) -> Any:
        self.sim.reset()
        return self.sim.call(self.replay, Replay.Request(task=TASK, dry_run=True), 30.0)

    def close(self) -> None:
        self.agent.stop()  # first: no message may arrive while the client is destroyed
        self.stop_cache()
        self.robot.stop()
        self.sim.close()
        for process in (self.robot, self.cache, self.agent):
            if process is not None:
                print(f'--- {self.arm} {process.log_path.name}\n{process.log()[-3000:]}')


@pytest.fixture(scope='module')
def fleet(tmp_path_factory):
    pg = _pg_server()
    server = pg._make()  # skips, naming what is missing
    rclpy.init()
    started: list[Arm] = []
    try:
        url = server.new_url()
        for arm in ('panda', 'fetch'):
            started.append(Arm(arm, url, tmp_path_factory.mktemp(arm)))
        for a in started:
            a.sim.wait_robot(90.0)  # two arms' models load at once, on 2 cores
            a.sim.wait_agent(60.0)
        for a in started:
            a.launch_cache()
        for a in started:
            a.wait_cache()
        yield url, started[0], started[1]
    finally:
        for a in started:
            a.close()
        rclpy.try_shutdown()
        server.destroy()


def test_the_panda_and_the_fetch_learn_one_task_and_each_replays_its_own(fleet):
    url, panda, fetch = fleet
    assert Body.parse(panda.body()).name == 'panda'
    assert Body.parse(fetch.body()).name == 'fetch'
    learned_panda = panda.run(hit=False)[0].trajectory_id
    # the Fetch is asked, though the store has a branch of this task: the Panda's
    result, events = fetch.run(hit=False)
    learned_fetch = result.trajectory_id
    assert learned_fetch != learned_panda
    (miss,) = [e for e in events if e.type == CacheEvent.MISS]
    reason = (f'learned on {Body.parse(panda.body())}, this robot is '
              f'{Body.parse(fetch.body())}')
    assert reason in miss.detail, miss.detail
    for _ in range(2):
        assert panda.run(hit=True)[0].trajectory_id == learned_panda
        assert fetch.run(hit=True)[0].trajectory_id == learned_fetch
    with PostgresStore(url=url) as store:
        bodies = {t.id: t.body for t in store.trajectories(task=TASK)}
    assert bodies == {learned_panda: panda.body(), learned_fetch: fetch.body()}


def test_a_recalibrated_panda_misses_until_its_bodies_are_declared_compatible(fleet, tmp_path):
    url, panda, _ = fleet
    before = panda.body()
    with PostgresStore(url=url) as store:
        (learned,) = [t.id for t in store.trajectories(task=TASK) if t.body == before]
    text = arms.description('panda')
    damping = '<joint name="panda_finger_joint1"'
    assert text.count(damping) == 1, 'the finger joint the calibration changes'
    at = text.index(damping)
    end = text.index('>', at)
    joint = text[at:end]
    assert 'damping="10"' in joint, joint
    recalibrated = tmp_path / 'panda_recalibrated.xml'
    recalibrated.write_text(text[:at] + joint.replace('damping="10"', 'damping="10.5"')
                            + text[end:])
    panda.stop_cache()
    panda.start_cache(robot_description_file=str(recalibrated))
    after = panda.body()
    assert after != before and Body.parse(after).name == 'panda'
    answer = panda.dry_run()
    assert not answer.success
    assert f'learned on {Body.parse(before)}, this robot is {Body.parse(after)}' in \
        answer.message, answer.message
    assert main(['bodies', url, '--compatible', str(Body.parse(before)), after,
                 '--who', 'carol']) == 0
    answer = panda.dry_run()  # read with the next run: no restart
    assert answer.success, answer.message
    assert answer.trajectory_id == learned
    assert panda.run(hit=True)[0].trajectory_id == learned
