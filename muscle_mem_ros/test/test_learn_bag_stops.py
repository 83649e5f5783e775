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
The cache's own stops are not task steps (issue 43 item 7).

A bag recorded from a real run: the test arm with joint_trajectory_controller's manners
(:class:`jtc_helpers.JtcRobot`: it refuses every cancel), the cache between the agent and the
arm, and the arm's server publishing its introspection events with contents. The agent moves
the arm, starts a long move and cancels it midway (the cache, refused, sends the arm's stop,
which succeeds), then moves the arm again. ``muscle-mem learn`` of the bag files the agent's
two moves and not the stop. Three stops are tried: the default hold and a ``stop_goal`` the
params file names (their goal id carries the cache's mark:
:func:`muscle_mem_ros.ros.node.stops.stop_goal_id`), and a ``stop_service`` that the params
file also names as a tool (called while the arm's goal ran:
:mod:`muscle_mem_ros.ros.bags.ownstops`).

Before, the stop was a successful call like any other, and the task was filed with three
steps, the stop in the middle.
"""

from __future__ import annotations

import json
import time
from typing import Any

from bag_helpers import BagRecorder
from jtc_helpers import JtcHarness, trajectory, wait_for
from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_ros.cli.app import main
from muscle_mem_ros.store import SqliteStore
from node_helpers import write_params
import pytest
from rclpy.action import ActionServer
from rclpy.qos import qos_profile_system_default
from rclpy.serialization import deserialize_message
from rclpy.service_introspection import ServiceIntrospectionState
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

NAMED_STOP = json.dumps({'trajectory': {
    'joint_names': ['j1', 'j2', 'j3'],
    'points': [{'positions': [0.5, 0.5, 0.5], 'time_from_start': {'nanosec': 100_000_000}}]}})
"""A stop the params file names (the controller accepts it: it names every joint)."""


def _topics(h: JtcHarness) -> dict[str, tuple[str, object]]:
    impl = FollowJointTrajectory.Impl
    kind = 'muscle_mem_demo_interfaces/action/FollowJointTrajectory'
    return {
        h.names.joints: ('sensor_msgs/msg/JointState', JointState),
        f'{h.names.arm}/_action/send_goal/_service_event': (
            f'{kind}_SendGoal_Event', impl.SendGoalService.Event),
        f'{h.names.arm}/_action/get_result/_service_event': (
            f'{kind}_GetResult_Event', impl.GetResultService.Event),
        f'{_halt(h)}/_service_event': ('std_srvs/srv/Trigger_Event', Trigger.Event),
    }


def _halt(h: JtcHarness) -> str:
    return f'/{h.names.prefix}/arm_stop'


def _serve_halt(h: JtcHarness) -> Any:
    """Serve the arm's stop service: it preempts the goal running, as a new goal does."""
    robot = h.robot

    def halt(_request: Any, response: Any) -> Any:
        with robot._lock:
            robot._active = b''
        response.success, response.message = True, 'halted'
        return response
    return robot.create_service(Trigger, _halt(h), halt)


def _record(h: JtcHarness, path) -> None:
    """Record the agent's move, a canceled move the cache stops, and another move."""
    robot = h.robot
    server = next(w for w in robot.waitables if isinstance(w, ActionServer)
                  and w._action_type is FollowJointTrajectory)
    for served in (server, h.halt):
        served.configure_introspection(h.client.get_clock(), qos_profile_system_default,
                                       ServiceIntrospectionState.CONTENTS)
    topics = _topics(h)
    recorder = BagRecorder(path, topics, context=h.client.context)
    wait_for(lambda: all(h.client.count_publishers(t) >= 1 for t in topics), 15.0,
             'the topics to record')
    time.sleep(0.5)
    try:
        assert h.agent.do('arm', [0.2, 0.2, 0.2])
        handle = h.wait(h.agent._arm.send_goal_async(trajectory([1.0, 1.0, 1.0], 3.0)))
        assert handle.accepted
        wait_for(lambda: robot.joints[0] > 0.4, 10.0, 'the long move to start')
        h.wait(handle.cancel_goal_async())
        h.wait(handle.get_result_async(), 30.0)
        assert robot.joints[0] < 0.9, 'the long move was not stopped'
        time.sleep(0.3)
        assert h.agent.do('arm', [0.0, 0.1, 0.0])
        time.sleep(0.3)
    finally:
        recorder.close()


@pytest.mark.parametrize('kind', ['hold', 'stop_goal', 'stop_service'])
def test_learn_leaves_the_caches_stop_out_of_the_task(tmp_path, capsys, kind):
    h = JtcHarness(tmp=tmp_path)
    stop = {'hold': {}, 'stop_goal': {'actions.arm.stop_goal': NAMED_STOP},
            'stop_service': {'actions.arm.stop_service': _halt(h),
                             'services.arm_stop.server': _halt(h),
                             'services.arm_stop.type': 'std_srvs/srv/Trigger'}}[kind]
    try:
        h.halt = _serve_halt(h)
        h.start_cache(stop_timeout=2.0, **stop)
        bag = tmp_path / 'run.mcap'
        _record(h, bag)
        log = h.cache.output()
        said = f'called {_halt(h)}' if kind == 'stop_service' else 'stop goal sent to'
        assert said in log, log[-3000:]
    finally:
        h.close()
    # learn with the arm, its sensor (and the stop service) only: what the bag holds
    values = h.values(**{'actions.fib': None, 'services': None, 'sensors.object': None,
                         **stop})
    params = write_params(tmp_path / 'learn.yaml', 'muscle_mem', values)
    store_path = tmp_path / 'learned.db'
    code = main(['learn', str(bag), '--params-file', str(params), '--task', 'move',
                 '--store', str(store_path), '--json'])
    out = capsys.readouterr()
    assert code == 0, out.err
    report = json.loads(out.out)
    assert [t['steps'] for t in report['tasks']] == [2], report
    with SqliteStore(path=str(store_path), read_only=True) as store:
        (info,) = store.trajectories(task='move')
        steps = store.path(info.id)
    moved = [list(deserialize_message(s.step.payload, FollowJointTrajectory.Goal)
                  .trajectory.points[0].positions) for s in steps]
    assert moved == [pytest.approx([0.2, 0.2, 0.2]), pytest.approx([0.0, 0.1, 0.0])], moved
