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
A controller's manners on the Panda, and what the behavior cache makes of them.

The sim robot alone: it publishes the arm's description latched; the gripper action stalls on
the cube (stalled, not reached_goal: a result the cache's success rule can judge); a joint
leaving its path tolerance aborts the goal (PATH_TOLERANCE_VIOLATED, naming the joint) and the
arm holds; the empty trajectory is rejected (as ros2_controllers' joint_trajectory_controller
rejects it), and after a refused cancel the hold (the joint where it is, one point) stops and
holds the arm.

With the cache and the agent (the demo's config without the tool sensor, whose trace would trip
the watch before the controller's own check): a replayed move home that a weakened arm cannot
keep within its path tolerance is a failed step (the agent finishes from that step), and a
task canceled during a replayed move home whose server refuses the cancel is stopped by the
arm tool's default stop, the hold (issue 43 item 6), with no two motions at once. And the sim
robot runs the wheel's other arm, the Fetch, for tests of a second body.
"""

from __future__ import annotations

import json
import threading
import time

from action_msgs.msg import GoalStatus
from muscle_mem_demo import kinematics
from muscle_mem_demo.kinematics import GraspPoint
from muscle_mem_demo.physics import OBJECT_START
from muscle_mem_demo.processes import config_path
from muscle_mem_demo_interfaces.action import FollowJointTrajectory, GripperCommand
from muscle_mem_demo_interfaces.msg import JointTolerance
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.ros.messages.success import parse_success, refusal_reason
from muscle_mem_ros.ros.rclfix.matching import AgentSeen
import numpy as np
import pytest
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
import rclpy
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.qos import DurabilityPolicy, QoSProfile
from sim_helpers import (
    FeedbackClient, namespaced_sensors, NodeProcess, SimClient, tf_remaps, unique_namespace,
)
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectoryPoint
import yaml

N = len(kinematics.ARM_JOINTS)
PATH_TOLERANCE = 0.2
"""The agent's path tolerance per joint, rad: the move home lags its path by 0.11 at most."""
WEAK = 0.3
"""servo_scale of the weakened arm: it lags the move home by about 0.37 rad."""


@pytest.fixture(scope='module')
def ros():
    rclpy.init()
    yield
    rclpy.try_shutdown()


@pytest.fixture(scope='module')
def robot(ros, tmp_path_factory):
    namespace = unique_namespace()
    process = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                          params={'rtf': 4.0, 'cancel_manners': 'refuse'},
                          log_dir=tmp_path_factory.mktemp('logs'))
    client = SimClient(namespace)
    try:
        client.wait_robot()
        yield client
    finally:
        process.stop()
        client.close()
        print(process.log())


@pytest.fixture
def sim(robot):
    robot.reset()
    return robot


def test_the_description_is_latched_and_names_the_arm(sim):
    received: list[str] = []
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    # a subscriber that joins long after the robot published still gets it
    # without rclpy's default event handler: destroyed while the executor spins, it can end
    # the executor (muscle_mem_ros' test/node_helpers.py, DESTROYED_WHILE_SPINNING)
    sub = sim.create_subscription(String, f'{sim._ns}/robot_description',
                                  lambda msg: received.append(msg.data), latched,
                                  event_callbacks=SubscriptionEventCallbacks(
                                      use_default_callbacks=False))
    try:
        sim.wait_for(lambda: bool(received), 20.0, 'the robot description')
    finally:
        sim.destroy_subscription(sub)
    text = received[0]
    assert text.startswith('<mujoco model="panda">'), text[:80]
    for name in kinematics.ARM_JOINTS + kinematics.GRIPPER_JOINTS:
        assert f'name="{name}"' in text
    # mesh files relative to the wheel's package: the same text on every machine
    assert 'site-packages' not in text and 'envs/assets/kitchen_franka' in text


def _over_the_cube(sim) -> None:
    for z, duration in ((0.15, 0.8), (OBJECT_START[2], 0.5)):
        status, result = sim.send_move_to_pose((OBJECT_START[0], OBJECT_START[1], z),
                                               duration=duration)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string


def test_jaws_closing_on_the_cube_stall_and_the_success_rule_can_judge_it(sim):
    _over_the_cube(sim)
    feedback: list = []
    status, result = sim.send_gripper(kinematics.GRIPPER_CLOSED, max_effort=20.0,
                                      feedback=feedback)
    # gripper_action_controller with allow_stalling: a stall is a grasp, the goal succeeds
    assert status == GoalStatus.STATUS_SUCCEEDED
    assert result.stalled and not result.reached_goal
    assert result.position == pytest.approx(0.02, abs=1e-3)  # the 4 cm cube's half width
    assert result.effort == pytest.approx(20.0)
    assert sim.wait_feedback(feedback, bool, 'gripper feedback')
    # the cache's success rule (actions.<tool>.success_field / success_when) reads it
    result_type = GripperCommand.Result
    stalled = parse_success('stalled', 'true', result_type, parameter='actions.gripper')
    reached = parse_success('reached_goal', 'true', result_type, parameter='actions.gripper')
    assert refusal_reason(result, stalled) == ''
    assert refusal_reason(result, reached) == 'reached_goal is False'
    with pytest.raises(ConfigError, match='has no field'):
        parse_success('error_code', '0', result_type, parameter='actions.gripper')
    status, result = sim.send_gripper(kinematics.GRIPPER_OPEN)
    assert status == GoalStatus.STATUS_SUCCEEDED
    assert result.reached_goal and not result.stalled
    assert refusal_reason(result, stalled) == 'stalled is False'
    assert refusal_reason(result, reached) == ''


def test_jaws_closing_on_nothing_reach_their_goal(sim):
    status, result = sim.send_gripper(kinematics.GRIPPER_CLOSED)
    assert status == GoalStatus.STATUS_SUCCEEDED
    assert result.reached_goal and not result.stalled and result.effort == 0.0
    assert result.position == pytest.approx(kinematics.GRIPPER_CLOSED, abs=2e-3)


def test_a_gripper_position_out_of_range_is_aborted(sim):
    status, _ = sim.send_gripper(0.05)
    assert status == GoalStatus.STATUS_ABORTED


def test_a_joint_leaving_its_path_tolerance_aborts_naming_it_and_the_arm_holds(sim):
    target = kinematics.inverse(GraspPoint(x=0.5, y=0.2, z=0.15))
    joint = int(np.argmax(np.abs(np.array(target) - kinematics.HOME)))
    name = kinematics.ARM_JOINTS[joint]
    goal = FollowJointTrajectory.Goal()
    goal.path_tolerance = [JointTolerance(name=name, position=0.002)]
    status, result = sim.send_trajectory(kinematics.ARM_JOINTS, [target], [0.5], goal=goal)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED
    assert result.error_string.startswith(f'{name} path error'), result.error_string
    stopped = sim.wait_fresh()[0].position[joint]
    assert abs(stopped - target[joint]) > 0.1
    sim.wait_fresh(sim.now_ns() + 300_000_000)
    assert sim.wait_fresh()[0].position[joint] == pytest.approx(stopped, abs=0.01)
    # the same goal with a tolerance the arm keeps succeeds
    goal.path_tolerance = [JointTolerance(name=name, position=0.5)]
    status, result = sim.send_trajectory(kinematics.ARM_JOINTS, [target], [1.0], goal=goal)
    assert result.error_code == FollowJointTrajectory.Result.SUCCESSFUL, result.error_string


def test_a_refused_cancel_then_the_hold_stops_and_holds_the_arm(sim):
    """
    The stop a real joint_trajectory_controller executes (issue 43 item 6).

    ROS 1's hold, the empty trajectory, is rejected as ros2_controllers rejects it; the hold
    the cache sends, where the joint is now as one point a tenth of a second ahead, preempts
    the goal whose cancel was refused, and the arm stays there.
    """
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = ['panda_joint1']
    point = JointTrajectoryPoint(positions=[1.5])
    # 30 s (7.5 s at rtf 4): still moving when the hold comes after the round trips below,
    # however slow the machine (at 8 s, a loaded run's motion ended first and SUCCEEDED)
    point.time_from_start.sec = 30
    goal.trajectory.points = [point]
    feedback: list = []
    handle = sim.result_of(sim.arm.send_goal_async(
        goal, feedback_callback=lambda fb: feedback.append(fb.feedback)))
    assert handle.accepted
    sim.wait_for(lambda: feedback and feedback[-1].actual.positions[0] > 0.02,
                 what='the arm to start moving')
    answer = sim.result_of(handle.cancel_goal_async())
    assert not answer.goals_canceling  # refused: the motion runs on
    empty = sim.result_of(sim.arm.send_goal_async(FollowJointTrajectory.Goal()))
    assert not empty.accepted  # the empty trajectory: rejected, as the real controller does
    now = sim.wait_fresh()[0].position[0]
    status, result = sim.send_trajectory(['panda_joint1'], [[now]], [0.1])  # the hold
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    response = sim.result_of(handle.get_result_async())
    assert response.status == GoalStatus.STATUS_ABORTED
    assert response.result.error_string == 'preempted by a newer goal'
    stopped = sim.wait_fresh()[0].position[0]
    assert 0.02 < stopped < 1.4
    sim.wait_fresh(sim.now_ns() + 300_000_000)
    assert sim.wait_fresh()[0].position[0] == pytest.approx(stopped, abs=0.01)


# -- with the cache -----------------------------------------------------------------------------


def _cache_params(namespace: str, store: str) -> dict:
    """Return the demo's cache parameters in ``namespace``, without the tool sensor."""
    demo = yaml.safe_load(config_path('sim_demo.yaml').read_text())
    params = dict(demo['muscle_mem']['ros__parameters'])
    params['sensors'] = {k: v for k, v in params['sensors'].items() if k != 'ee'}
    params['store_path'] = store
    params['agent_action'] = f'{namespace}/demo_agent/execute_task'
    namespaced_sensors(params, namespace)
    for tool in params['actions'].values():
        tool['server'] = namespace + tool['server']
        tool['proxy'] = namespace + tool['proxy']
    assert 'stop_goal' not in params['actions']['arm']  # the default: the hold
    return {'/**': {'ros__parameters': params}}


class _World:
    """The three processes' client: the sim, the cache's ExecuteTask, the robot's goals."""

    def __init__(self, client: SimClient, namespace: str) -> None:
        self.sim = client
        proxies = f'{namespace}/muscle_mem'
        self.cache = FeedbackClient(client, ExecuteTask, f'{proxies}/execute_task')
        self.params = client.create_client(SetParameters,
                                           f'{namespace}/sim_robot/set_parameters')
        self.goals: list[dict] = []
        self.lock = threading.Lock()
        self.on_goal = None
        client.create_subscription(String, f'{namespace}/sim_robot/goals', self._on_goal, 50)

    def _on_goal(self, msg: String) -> None:
        record = json.loads(msg.data)
        with self.lock:
            self.goals.append(record)
        if self.on_goal is not None:
            self.on_goal(record)

    def set_servo_scale(self, scale: float) -> None:
        value = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=scale)
        request = SetParameters.Request(parameters=[Parameter(name='servo_scale', value=value)])
        answer = self.sim.call(self.params, request)
        assert answer.results[0].successful, answer.results[0].reason

    def run(self, *, feedback: list | None = None, on_handle=None) -> tuple[int, object, list]:
        """Reset the world, run the task through the cache; return status, result, goals."""
        self.sim.reset()
        with self.lock:
            self.goals.clear()
        goal = ExecuteTask.Goal(task='pick_and_place')
        callback = (lambda fb: feedback.append(fb.feedback)) if feedback is not None else None
        handle = self.sim.result_of(self.cache.send_goal_async(goal, feedback_callback=callback))
        assert handle.accepted
        if on_handle is not None:
            on_handle(handle)
        response = self.sim.result_of(handle.get_result_async(), 120.0)
        time.sleep(0.5)  # the last goal records
        with self.lock:
            return response.status, response.result, list(self.goals)


@pytest.fixture(scope='module')
def world(ros, tmp_path_factory):
    namespace = unique_namespace()
    logs = tmp_path_factory.mktemp('logs')
    params_file = logs / 'cache.yaml'
    params_file.write_text(yaml.safe_dump(_cache_params(namespace, str(logs / 'cache.db'))))
    proxies = f'{namespace}/muscle_mem'
    robot = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                        params={'rtf': 1.0, 'cancel_manners': 'refuse'}, log_dir=logs)
    cache = NodeProcess('muscle_mem_ros.ros.node.main', namespace=namespace, params={},
                        log_dir=logs, ros_args=['--params-file', str(params_file),
                                                *tf_remaps(namespace)])
    agent = NodeProcess('muscle_mem_demo.agent_node', namespace=namespace, params={
        'think_time': 0.3,
        'path_tolerance': PATH_TOLERANCE,
        'arm_action': f'{proxies}/arm/follow_joint_trajectory',
        'pose_action': f'{proxies}/arm/move_to_pose',
        'gripper_action': f'{proxies}/gripper/gripper_cmd',
    }, log_dir=logs)
    client = SimClient(namespace)
    w = _World(client, namespace)
    seen = AgentSeen(client, proxies)
    try:
        client.wait_robot()
        client.wait_agent()
        client.wait_for(w.cache.server_is_ready, 60.0, 'the cache')
        assert seen.wait(60.0), f'the cache did not discover the agent:\n{cache.log()}'
        status, result, _ = w.run()
        assert status == GoalStatus.STATUS_SUCCEEDED and result.success, result.message
        assert result.steps_by_agent == 8, result.message
        yield w
    finally:
        agent.stop()
        cache.stop()
        robot.stop()
        client.close()
        print(cache.log()[-4000:])


def _home_moves(goals: list[dict]) -> list[dict]:
    return [g for g in goals if g['action'] == 'follow_joint_trajectory' and not g['hold']]


def test_a_path_tolerance_abort_is_a_failed_step_and_the_agent_finishes(world):
    feedback: list = []

    def restore(record: dict) -> None:
        if record['action'] == 'follow_joint_trajectory' and record['status'] == 'aborted':
            threading.Thread(target=world.set_servo_scale, args=(1.0,)).start()

    def weaken_before_the_move_home(handle) -> None:
        world.sim.wait_for(lambda: any(f.step == 6 and f.mode == f.MODE_REPLAY
                                       for f in list(feedback)), 60.0, 'replayed step 6')
        world.set_servo_scale(WEAK)

    world.on_goal = restore
    try:
        status, result, goals = world.run(feedback=feedback,
                                          on_handle=weaken_before_the_move_home)
    finally:
        world.on_goal = None
        world.set_servo_scale(1.0)
    moves = _home_moves(goals)
    assert moves and moves[0]['status'] == 'aborted', goals
    assert moves[0]['error_code'] == FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED
    assert moves[0]['error_string'].startswith('panda_joint'), moves[0]
    # the aborted step is the cache's failed step: replayed 7, the agent from step 7
    assert status == GoalStatus.STATUS_SUCCEEDED and result.success, result.message
    assert result.steps_replayed == 7 and result.steps_by_agent == 1, result.message
    assert len(moves) == 2 and moves[1]['status'] == 'succeeded', goals
    assert not any(g['overlaps'] for g in goals), goals


def test_a_refused_cancel_gets_the_hold_as_the_arms_stop(world):
    feedback: list = []

    def cancel_during_the_move_home(handle) -> None:
        world.sim.wait_for(lambda: any(f.step == 7 and f.mode == f.MODE_REPLAY
                                       for f in list(feedback)), 60.0, 'replayed step 7')
        time.sleep(0.3)  # the arm is on its way home
        world.sim.result_of(handle.cancel_goal_async())

    status, result, goals = world.run(feedback=feedback, on_handle=cancel_during_the_move_home)
    assert status == GoalStatus.STATUS_CANCELED, result.message
    moves = _home_moves(goals)
    holds = [g for g in goals if g['hold']]
    assert len(moves) == 1 and moves[0]['cancel'] == 'refused', goals
    assert len(holds) == 1 and holds[0]['action'] == 'follow_joint_trajectory', goals
    assert holds[0]['status'] == 'succeeded'
    # the hold ended the move home where it was, and nothing else moved meanwhile
    assert moves[0]['status'] == 'aborted', moves[0]
    assert moves[0]['error_string'] == 'preempted by a newer goal', moves[0]
    assert moves[0]['ended'] >= holds[0]['started'], goals
    assert not any(g['overlaps'] for g in goals), goals
    joints, _ = world.sim.wait_fresh()
    away = max(abs(a - b) for a, b in zip(joints.position[:N], kinematics.HOME, strict=True))
    assert away > 0.05, 'the arm reached home: the move was not stopped'


def test_the_sim_robot_runs_the_fetch_arm_too(ros, tmp_path):
    """The second arm of the same wheel, for tests of bodies: its own description and joints."""
    namespace = unique_namespace()
    process = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                          params={'rtf': 4.0, 'arm': 'fetch'}, log_dir=tmp_path)
    client = SimClient(namespace)
    received: list[str] = []
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    client.create_subscription(String, f'{namespace}/robot_description',
                               lambda msg: received.append(msg.data), latched)
    try:
        client.wait_robot()
        client.wait_for(lambda: bool(received), 20.0, 'the robot description')
        assert received[0].startswith('<mujoco model="fetch">')
        joints, _ = client.wait_fresh()
        assert list(joints.name)[:2] == ['shoulder_pan_joint', 'shoulder_lift_joint']
        status, result = client.send_move_to_pose((0.5, 0.2, 0.15), duration=1.0)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        client.wait_fresh(client.now_ns())
        client.wait_for(lambda: _stamp(client.ee_msgs[-1]) >= _stamp(client.joint_msgs[-1]),
                        10.0, 'the tool pose of the latest joint state')
        with client.lock:
            ee = client.ee_msgs[-1].pose.position
        assert (ee.x, ee.y, ee.z) == pytest.approx((0.5, 0.2, 0.15), abs=0.01)
    finally:
        process.stop()
        client.close()
        print(process.log())


def _stamp(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
