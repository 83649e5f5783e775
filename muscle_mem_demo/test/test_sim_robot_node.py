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

"""The sim robot node (a Panda) over real DDS: topics, the arm and gripper actions, moves."""

from __future__ import annotations

import math

from action_msgs.msg import GoalStatus
from muscle_mem_demo import kinematics
from muscle_mem_demo.kinematics import GraspPoint
from muscle_mem_demo.physics import OBJECT_START
from muscle_mem_demo_interfaces.action import FollowJointTrajectory, MoveToPose
from muscle_mem_demo_interfaces.msg import JointTolerance
import numpy as np
import pytest
import rclpy
from sim_helpers import assert_bad_parameter, NodeProcess, SimClient, unique_namespace
from std_srvs.srv import SetBool
from trajectory_msgs.msg import JointTrajectoryPoint

ALL_JOINTS = list(kinematics.ARM_JOINTS + kinematics.GRIPPER_JOINTS)
N = len(kinematics.ARM_JOINTS)


@pytest.fixture(scope='module')
def ros():
    rclpy.init()
    yield
    rclpy.try_shutdown()


@pytest.fixture(scope='module')
def robot(ros, tmp_path_factory):
    namespace = unique_namespace()
    process = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                          params={'rtf': 4}, log_dir=tmp_path_factory.mktemp('logs'))  # int ok
    client = SimClient(namespace)
    client.process = process  # its log says why a goal was rejected
    try:
        client.wait_robot()
        yield client
    finally:
        process.stop()  # first: no message may arrive while the client is destroyed
        client.close()
        print(process.log())


@pytest.fixture
def sim(robot):
    robot.reset()
    return robot


def test_publishes_joint_states_and_object_pose(sim):
    joints, obj = sim.wait_fresh()
    assert list(joints.name) == ALL_JOINTS
    np.testing.assert_allclose(joints.position[:N], kinematics.HOME, atol=1e-3)
    assert len(joints.velocity) == len(ALL_JOINTS)
    assert obj.header.frame_id == 'world'
    p = obj.pose.position
    np.testing.assert_allclose((p.x, p.y, p.z), OBJECT_START, atol=1e-3)
    # rates: 120 Hz joint states vs 30 Hz object poses. Compared as the median spacing of the
    # robot's own stamps, which a loaded machine's dropped or late messages barely move.
    mark = sim.now_ns()
    sim.wait_for(lambda: sum(_ns(m) > mark for m in list(sim.object_msgs)) >= 40,
                 what='40 object poses')
    with sim.lock:
        objects = [_ns(m) for m in sim.object_msgs if _ns(m) > mark][:40]
        joints = [_ns(m) for m in sim.joint_msgs if objects[0] <= _ns(m) <= objects[-1]]
    assert joints == sorted(joints)
    ratio = np.median(np.diff(objects)) / np.median(np.diff(joints))
    assert 2.5 < ratio < 6.0


def test_ee_pose_is_the_grasp_point_of_each_joint_state(sim):
    status, _ = sim.send_move_to_pose((0.45, -0.1, 0.12), duration=0.5)
    assert status == GoalStatus.STATUS_SUCCEEDED
    mark = sim.now_ns()
    sim.wait_for(lambda: sum(_ns(m) > mark for m in list(sim.ee_msgs)) >= 20, what='20 ee poses')
    with sim.lock:
        joints = {_ns(m): m for m in sim.joint_msgs if _ns(m) > mark}
        ee = [m for m in sim.ee_msgs if _ns(m) > mark and _ns(m) in joints]
    assert len(ee) >= 10  # one per joint state, with its stamp
    for msg in ee:
        assert msg.header.frame_id == 'world'
        point = kinematics.forward(joints[_ns(msg)].position[:N])
        p, q = msg.pose.position, msg.pose.orientation
        assert (p.x, p.y, p.z) == pytest.approx((point.x, point.y, point.z), abs=1e-9)
        # the hand's turn from gripper down, of the same joints: none asked, none made
        turn = kinematics.for_arm().orientation(joints[_ns(msg)].position[:N])
        assert (q.x, q.y, q.z, q.w) == pytest.approx(turn, abs=1e-9)
        assert abs(q.z) < 1e-3 and q.w > 0.999
    p = ee[-1].pose.position
    assert (p.x, p.y, p.z) == pytest.approx((0.45, -0.1, 0.12), abs=0.01)


def _ns(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def test_trajectory_goal_reaches_its_target_with_feedback(sim):
    target = kinematics.inverse(GraspPoint(x=0.45, y=-0.1, z=0.12))
    feedback: list = []
    status, result = sim.send_trajectory(kinematics.ARM_JOINTS, [target], [1.0],
                                         feedback=feedback)
    assert status == GoalStatus.STATUS_SUCCEEDED
    assert result.error_code == FollowJointTrajectory.Result.SUCCESSFUL, result.error_string
    joints, _ = sim.wait_fresh()
    np.testing.assert_allclose(joints.position[:N], target, atol=0.011)
    feedback = sim.wait_feedback(feedback, bool, 'feedback of the trajectory goal')
    assert list(feedback[-1].joint_names) == list(kinematics.ARM_JOINTS)
    last = feedback[-1]
    assert len(last.desired.positions) == N and len(last.actual.positions) == N
    np.testing.assert_allclose(
        last.error.positions, np.subtract(last.desired.positions, last.actual.positions))


def test_goal_tolerance_is_per_joint_and_names_the_joint_that_violates_it(sim):
    target = kinematics.inverse(GraspPoint(x=0.45, y=-0.1, z=0.12))
    goal = FollowJointTrajectory.Goal()
    # a position servo never gets within 1e-12 rad
    goal.goal_tolerance = [JointTolerance(name='panda_joint2', position=1e-12)]
    goal.goal_time_tolerance.nanosec = 100_000_000
    status, result = sim.send_trajectory(kinematics.ARM_JOINTS, [target], [0.5], goal=goal)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == FollowJointTrajectory.Result.GOAL_TOLERANCE_VIOLATED
    assert result.error_string.startswith('panda_joint2 error'), result.error_string
    goal = FollowJointTrajectory.Goal()
    goal.goal_tolerance = [JointTolerance(name='panda_joint2', position=-1.0)]
    status, result = sim.send_trajectory(kinematics.ARM_JOINTS, [kinematics.HOME], [0.5],
                                         goal=goal)
    assert result.error_code == FollowJointTrajectory.Result.SUCCESSFUL, result.error_string


@pytest.mark.parametrize('field, words', [
    ('goal_tolerance', "goal_tolerance names 'panda_joint7'"),
    ('multi_dof_trajectory', 'multi_dof_trajectory'),
])
def test_goal_fields_the_arm_cannot_honour_are_invalid_goals(sim, field, words):
    goal = FollowJointTrajectory.Goal()
    if field == 'goal_tolerance':
        goal.goal_tolerance = [JointTolerance(name='panda_joint7', position=0.01)]
    else:
        goal.multi_dof_trajectory.joint_names = ['base']
    status, result = sim.send_trajectory(['panda_joint1'], [[0.3]], [0.5], goal=goal)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == FollowJointTrajectory.Result.INVALID_GOAL
    assert words in result.error_string
    joints, _ = sim.wait_fresh()
    np.testing.assert_allclose(joints.position[:N], kinematics.HOME, atol=1e-3)


def test_cancel_stops_the_arm_where_it_is(sim):
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = ['panda_joint1']
    point = JointTrajectoryPoint(positions=[1.5])
    point.time_from_start.sec = 8
    goal.trajectory.points = [point]
    feedback: list = []
    handle = sim.result_of(sim.arm.send_goal_async(
        goal, feedback_callback=lambda fb: feedback.append(fb.feedback)))
    assert handle.accepted
    sim.wait_for(lambda: len(feedback) >= 3 and feedback[-1].actual.positions[0] > 0.05,
                 what='the arm to start moving')
    sim.result_of(handle.cancel_goal_async())
    response = sim.result_of(handle.get_result_async())
    # CANCELED, not SUCCEEDED: the cancel ended the motion. How far the arm got first is
    # not asked: it is the time the cancel took to arrive (the test seeing the feedback,
    # the request, the robot's executor) times rtf 4, and a busy machine once made that
    # 1.6 s, ending the arm at 1.42 rad. Where it stopped, it stays.
    assert response.status == GoalStatus.STATUS_CANCELED
    stopped = sim.wait_fresh()[0].position[0]
    assert 0.05 < stopped <= 1.5 + 0.011
    sim.wait_fresh(sim.now_ns() + 200_000_000)
    assert sim.wait_fresh()[0].position[0] == pytest.approx(stopped, abs=0.02)


def test_joint_names_in_any_order_and_subsets(sim):
    status, result = sim.send_trajectory(['panda_joint4', 'panda_joint1'], [[-1.8, 0.4]], [0.5])
    assert result.error_code == FollowJointTrajectory.Result.SUCCESSFUL, result.error_string
    joints, _ = sim.wait_fresh()
    assert joints.position[0] == pytest.approx(0.4, abs=0.011)
    assert joints.position[3] == pytest.approx(-1.8, abs=0.011)
    assert joints.position[1] == pytest.approx(kinematics.HOME[1], abs=0.011)


def _goal(names, positions, times, velocities=None):
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(names)
    for k, (row, t) in enumerate(zip(positions, times, strict=True)):
        point = JointTrajectoryPoint(positions=[float(v) for v in row])
        point.time_from_start.sec, point.time_from_start.nanosec = int(t), int(t % 1 * 1e9)
        if velocities is not None:
            point.velocities = [float(v) for v in velocities[k]]
        goal.trajectory.points.append(point)
    return goal


@pytest.mark.parametrize('goal, words', [
    (_goal([], [], []), 'Empty joint names'),  # ROS 1's hold
    (_goal(['panda_joint1'], [], []), 'Empty trajectory'),
    (_goal(['panda_joint1', 'nonexistent'], [[0.3, 0.3]], [0.5]), 'nonexistent'),
    (_goal(['panda_finger_joint1'], [[0.01]], [0.5]), 'panda_finger_joint1'),
    (_goal(['panda_joint1', 'panda_joint2'], [[0.3]], [0.5]), 'Mismatch'),
    (_goal(['panda_joint1'], [[0.1], [0.2]], [1.0, 0.5]), 'strictly increasing'),
    (_goal(['panda_joint1'], [[0.3]], [0.5], velocities=[[0.2]]), 'Velocity of last'),
], ids=['empty', 'no points', 'unknown joint', 'not an arm joint', 'wrong size',
        'times not increasing', 'moving at the end'])
def test_what_joint_trajectory_controller_rejects_is_rejected_and_nothing_moves(
        sim, goal, words):
    """Issue 43 item 6: the mirror rejects what the real controller rejects (controller_rules)."""
    handle = sim.result_of(sim.arm.send_goal_async(goal))
    assert not handle.accepted
    joints, _ = sim.wait_fresh()
    np.testing.assert_allclose(joints.position[:N], kinematics.HOME, atol=1e-3)
    sim.wait_for(lambda: words in sim.process.log(), 10.0, f'the rejection {words!r} logged')


def test_a_joint_named_twice_is_accepted_then_aborted_and_nothing_moves(sim):
    names = ['panda_joint4', 'panda_joint4']
    status, result = sim.send_trajectory(names, [[0.3] * len(names)], [0.5])
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == FollowJointTrajectory.Result.INVALID_JOINTS
    assert 'joint names' in result.error_string
    joints, _ = sim.wait_fresh()
    np.testing.assert_allclose(joints.position[:N], kinematics.HOME, atol=1e-3)


def test_move_to_pose_puts_the_grasp_point_there_with_feedback(sim):
    feedback: list = []
    status, result = sim.send_move_to_pose((0.45, -0.1, 0.12), duration=0.8, feedback=feedback)
    assert status == GoalStatus.STATUS_SUCCEEDED
    assert result.error_code == MoveToPose.Result.SUCCESSFUL, result.error_string
    joints, _ = sim.wait_fresh()
    reached = kinematics.forward(joints.position[:N])
    assert (reached.x, reached.y, reached.z) == pytest.approx((0.45, -0.1, 0.12), abs=0.01)
    last = sim.wait_feedback(feedback, bool, 'feedback of the move')[-1]
    assert last.current.header.frame_id == 'world'
    assert last.current.pose.position.x > 0.0


@pytest.mark.parametrize('kwargs, code, words', [
    ({'position': (1.5, 0.0, 0.0)}, MoveToPose.Result.UNREACHABLE, 'out of reach'),
    ({'position': (0.4, 0.0, 0.1), 'frame_id': 'base_link'}, MoveToPose.Result.INVALID_GOAL,
     'target.header.frame_id'),
    ({'position': (0.4, 0.0, 0.1), 'orientation': (1.0, 0.0, 0.0, 0.0)},
     MoveToPose.Result.INVALID_GOAL, 'target.pose.orientation'),
    ({'position': (math.nan, 0.0, 0.1)}, MoveToPose.Result.INVALID_GOAL, 'not finite'),
])
def test_move_to_pose_refuses_what_the_arm_cannot_do(sim, kwargs, code, words):
    status, result = sim.send_move_to_pose(**kwargs)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == code
    assert words in result.error_string
    joints, _ = sim.wait_fresh()
    np.testing.assert_allclose(joints.position[:N], kinematics.HOME, atol=1e-3)


def test_gripper_service_closes_and_opens_the_jaws(sim):
    response = sim.call(sim.gripper, SetBool.Request(data=True))
    assert response.success and response.message.endswith('nothing grasped'), response.message
    joints, _ = sim.wait_fresh()
    assert joints.position[N] == pytest.approx(kinematics.GRIPPER_CLOSED, abs=0.002)
    response = sim.call(sim.gripper, SetBool.Request(data=False))
    assert response.success and response.message.startswith('reached'), response.message


def test_move_object_now_and_bad_requests(sim):
    response = sim.move_object((0.35, -0.05, 0.02))
    assert response.success, response.message
    assert sim.object_position() == pytest.approx((0.35, -0.05, 0.02), abs=2e-3)
    refused = sim.move_object((0.2, 0.2, 0.02), orientation=(0.0, 0.0, 0.0, 0.0))
    assert not refused.success and 'quaternion' in refused.message
    refused = sim.move_object((math.inf, 0.2, 0.02))
    assert not refused.success and 'finite' in refused.message
    assert sim.object_position() == pytest.approx((0.35, -0.05, 0.02), abs=2e-3)


def test_after_goals_bumps_the_object_when_that_goal_ends(sim):
    assert sim.move_object((0.3, 0.1, 0.02), after_goals=1).success
    assert sim.object_position() == pytest.approx(OBJECT_START, abs=2e-3)
    status, result = sim.send_trajectory(['panda_joint1'], [[0.3]], [0.5])
    assert result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
    # the first object pose stamped after the result already shows the bump
    assert sim.object_position() == pytest.approx((0.3, 0.1, 0.02), abs=2e-3)
    sim.send_trajectory(['panda_joint1'], [[0.0]], [0.5])
    assert sim.object_position() == pytest.approx((0.3, 0.1, 0.02), abs=2e-3)


def test_reset_puts_arm_home_and_object_back(sim):
    sim.send_trajectory(['panda_joint1'], [[0.8]], [0.3])
    sim.move_object((0.25, 0.25, 0.02))
    sim.move_object((0.3, 0.3, 0.02), after_goals=1)
    sim.reset()
    joints, obj = sim.wait_fresh()
    np.testing.assert_allclose(joints.position[:N], kinematics.HOME, atol=1e-3)
    p = obj.pose.position
    np.testing.assert_allclose((p.x, p.y, p.z), OBJECT_START, atol=1e-3)
    sim.send_trajectory(['panda_joint1'], [[0.0]], [0.3])  # the pending bump was dropped
    assert sim.object_position() == pytest.approx(OBJECT_START, abs=2e-3)


@pytest.mark.parametrize('param, value', [('rtf', '0.0'), ('joint_noise', '-1.0'),
                                          ('joint_state_rate', 'nan'), ('noise_seed', '1.5'),
                                          ('frame_id', '3')])
def test_bad_parameters_stop_the_node_naming_the_parameter(param, value):
    assert_bad_parameter('muscle_mem_demo.robot_node', param, value)


def test_sensor_noise_is_added_when_asked(ros, tmp_path):
    namespace = unique_namespace()
    process = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                          params={'object_noise': 0.005, 'joint_noise': 0.01},
                          log_dir=tmp_path)
    client = SimClient(namespace)
    try:
        client.wait_for(lambda: len(client.object_msgs) >= 10 and len(client.joint_msgs) >= 10,
                        what='noisy sensor data')
        with client.lock:
            xs = [m.pose.position.x for m in client.object_msgs[:10]]
            pans = [m.position[0] for m in client.joint_msgs[:10]]
        assert len(set(xs)) == 10 and len(set(pans)) == 10
        assert abs(np.mean(xs) - OBJECT_START[0]) < 0.01
        assert max(abs(p) for p in pans) < 0.1
    finally:
        process.stop()
        client.close()
