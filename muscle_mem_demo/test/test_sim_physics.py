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

"""The ROS-free MuJoCo simulation of the Panda: kinematics, tracking, grasping, moves, reset."""

from __future__ import annotations

import math

import mujoco
from muscle_mem_demo import arms, kinematics
from muscle_mem_demo.kinematics import GraspPoint
from muscle_mem_demo.motion import Motion, MotionOutcome
from muscle_mem_demo.physics import ArmSim, OBJECT_START
from muscle_mem_demo.trajectory import JointPath
import numpy as np
import pytest

N = len(kinematics.ARM_JOINTS)


def run_until_done(sim: ArmSim, motion: Motion, limit: float = 10.0) -> None:
    elapsed = 0.0
    while not motion.done and elapsed < limit:
        sim.advance(0.01)
        elapsed += 0.01
    assert motion.done, f'motion not finished after {limit} simulated seconds'


def move_to(sim: ArmSim, point: GraspPoint, duration: float = 1.0) -> Motion:
    joints = kinematics.inverse(point)
    path = JointPath(times=[duration], positions=[joints], velocities=[[0.0] * N])
    motion = sim.follow(names=kinematics.ARM_JOINTS, path=path, tolerance=0.005)
    run_until_done(sim, motion)
    return motion


@pytest.fixture
def sim() -> ArmSim:
    return ArmSim()


def test_starts_at_home_with_the_object_at_its_start(sim):
    state = sim.state()
    assert state.joint_names == kinematics.ARM_JOINTS + kinematics.GRIPPER_JOINTS
    np.testing.assert_allclose(state.positions[:N], kinematics.HOME, atol=1e-9)
    np.testing.assert_allclose(state.object_position, OBJECT_START, atol=1e-3)
    assert not state.holding and not state.gripper_closed


@pytest.mark.parametrize('joints', [
    kinematics.HOME,
    (0.3, -0.3, 0.2, -2.0, 0.1, 0.8, 0.4),
    (-1.0, 0.2, -0.3, -1.8, 0.2, 0.5, -0.6),
])
def test_forward_kinematics_matches_the_mujoco_model(sim, joints):
    path = JointPath(times=[0.5], positions=[joints])
    run_until_done(sim, sim.follow(names=kinematics.ARM_JOINTS, path=path, tolerance=0.002))
    actual = sim.state().positions[:N]
    expected = kinematics.forward(actual)
    # the site is computed at the start of the last step, the joints at its end
    np.testing.assert_allclose(sim.grasp_point(), (expected.x, expected.y, expected.z),
                               atol=1e-4)


def test_inverse_kinematics_round_trips_and_keeps_the_gripper_down():
    model = arms.build_arm('panda')
    data = mujoco.MjData(model)
    site = model.site('grasp').id
    limits = kinematics.for_arm().limits
    for target in (GraspPoint(x=0.5, y=0.2, z=0.02), GraspPoint(x=0.4, y=-0.3, z=0.15),
                   GraspPoint(x=0.55, y=0.0, z=0.1), GraspPoint(x=0.39, y=0.09, z=0.02)):
        joints = kinematics.inverse(target)
        reached = kinematics.forward(joints)
        assert math.dist((reached.x, reached.y, reached.z),
                         (target.x, target.y, target.z)) < kinematics.POSITION_TOLERANCE
        data.qpos[:N] = joints
        mujoco.mj_kinematics(model, data)
        frame = data.site_xmat[site].reshape(3, 3)
        # the tool's z axis points down and its fingers close along the world's y axis
        np.testing.assert_allclose(frame[:, 2], (0.0, 0.0, -1.0), atol=2e-3)
        np.testing.assert_allclose(abs(frame[1, 1]), 1.0, atol=2e-3)
        for value, (low, high) in zip(joints, limits, strict=True):
            assert low <= value <= high
    # deterministic: the same point always gives the same joints
    assert kinematics.inverse(GraspPoint(x=0.5, y=0.2, z=0.15)) == kinematics.inverse(
        GraspPoint(x=0.5, y=0.2, z=0.15))


def test_inverse_kinematics_rejects_unreachable_points():
    with pytest.raises(kinematics.UnreachableError, match='out of reach'):
        kinematics.inverse(GraspPoint(x=1.5, y=0.0, z=0.0))
    with pytest.raises(kinematics.UnreachableError, match='at its limit: .*panda_joint'):
        kinematics.inverse(GraspPoint(x=0.9, y=0.0, z=0.4))
    with pytest.raises(kinematics.UnreachableError, match='not finite'):
        kinematics.inverse(GraspPoint(x=math.nan, y=0.0, z=0.1))


def test_trajectory_tracking_reaches_the_goal(sim):
    target = GraspPoint(x=0.45, y=-0.1, z=0.1)
    motion = move_to(sim, target)
    assert motion.outcome is MotionOutcome.SUCCEEDED, motion.message
    np.testing.assert_allclose(sim.state().positions[:N], kinematics.inverse(target),
                               atol=0.005)
    np.testing.assert_allclose(sim.grasp_point(), (0.45, -0.1, 0.1), atol=0.005)


def test_multi_waypoint_path_passes_through_its_waypoints(sim):
    first = kinematics.inverse(GraspPoint(x=0.4, y=0.2, z=0.15))
    second = kinematics.inverse(GraspPoint(x=0.4, y=-0.2, z=0.15))
    path = JointPath(times=[1.0, 2.0], positions=[first, second])
    motion = sim.follow(names=kinematics.ARM_JOINTS, path=path, tolerance=0.005)
    sim.advance(1.05)
    np.testing.assert_allclose(sim.state().positions[:N], first, atol=0.05)
    run_until_done(sim, motion)
    assert motion.outcome is MotionOutcome.SUCCEEDED
    np.testing.assert_allclose(sim.state().positions[:N], second, atol=0.005)


@pytest.mark.parametrize('lift, outcome', [
    (1e-12, MotionOutcome.TOLERANCE_VIOLATED),  # the lift carries the arm: never this close
    (-1.0, MotionOutcome.SUCCEEDED),  # control_msgs' -1: any final position
    (0.0, MotionOutcome.SUCCEEDED),  # 0: the default tolerance
])
def test_tolerances_per_joint(sim, lift, outcome):
    target = kinematics.inverse(GraspPoint(x=0.45, y=-0.1, z=0.1))
    path = JointPath(times=[0.5], positions=[target])
    motion = sim.follow(names=kinematics.ARM_JOINTS, path=path,
                        tolerance=[0.0, lift] + [0.0] * (N - 2), settle_time=0.3)
    run_until_done(sim, motion)
    assert motion.outcome is outcome, motion.message
    if outcome is MotionOutcome.TOLERANCE_VIOLATED:
        assert motion.message.startswith('panda_joint2 error'), motion.message


def test_tolerances_of_the_wrong_length_are_refused(sim):
    path = JointPath(times=[0.5], positions=[[0.1, 0.2]])
    with pytest.raises(ValueError, match='3 tolerances for 2 joints'):
        sim.follow(names=['panda_joint1', 'panda_joint4'], path=path,
                   tolerance=[0.1, 0.1, 0.1])


def test_subset_of_joints_moves_only_those(sim):
    path = JointPath(times=[0.5], positions=[[0.7]])
    run_until_done(sim, sim.follow(names=['panda_joint1'], path=path))
    positions = sim.state().positions
    assert positions[0] == pytest.approx(0.7, abs=0.01)
    np.testing.assert_allclose(positions[1:N], kinematics.HOME[1:], atol=0.01)


@pytest.mark.parametrize('names', [['panda_joint4', 'bogus'], [], ['panda_joint4', 'panda_joint4'],
                                   ['panda_finger_joint1']])
def test_bad_joint_names_are_refused(sim, names):
    path = JointPath(times=[1.0], positions=[[0.0] * max(1, len(names))])
    with pytest.raises(ValueError, match='joint names'):
        sim.follow(names=names, path=path)


@pytest.mark.parametrize('kwargs, match', [
    ({'times': [], 'positions': []}, 'at least one waypoint'),
    ({'times': [1.0, 0.5], 'positions': [[0.0], [0.0]]}, 'strictly increasing'),
    ({'times': [1.0], 'positions': [[math.nan]]}, 'finite'),
    ({'times': [1.0], 'positions': [[0.0, 1.0]], 'velocities': [[0.0]]}, 'velocities'),
])
def test_bad_paths_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        JointPath(**kwargs)


def test_a_new_goal_preempts_the_running_one(sim):
    first = sim.follow(names=['panda_joint1'],
                       path=JointPath(times=[2.0], positions=[[1.0]]))
    sim.advance(0.2)
    second = sim.follow(names=['panda_joint1'],
                        path=JointPath(times=[0.5], positions=[[-0.5]]))
    assert first.done and first.outcome is MotionOutcome.PREEMPTED
    run_until_done(sim, second)
    assert second.outcome is MotionOutcome.SUCCEEDED


def test_closing_near_the_object_attaches_it_and_opening_drops_it(sim):
    move_to(sim, GraspPoint(x=OBJECT_START[0], y=OBJECT_START[1], z=0.15))
    move_to(sim, GraspPoint(x=OBJECT_START[0], y=OBJECT_START[1], z=OBJECT_START[2]), 0.5)
    close = sim.set_gripper(closed=True)
    run_until_done(sim, close)
    # the jaws stall against the 4 cm cube: a grasp, not the commanded position
    assert close.message.startswith('stalled on the object'), close.message
    assert close.gripper.stalled and not close.gripper.reached_goal
    assert close.gripper.position == pytest.approx(0.02, abs=1e-3)
    assert close.gripper.effort > 0.0
    assert sim.state().holding
    move_to(sim, GraspPoint(x=0.4, y=-0.3, z=0.15))
    np.testing.assert_allclose(sim.state().object_position, (0.4, -0.3, 0.15), atol=0.01)
    opened = sim.set_gripper(closed=False)
    run_until_done(sim, opened)
    assert opened.gripper.reached_goal and not opened.gripper.stalled
    sim.advance(0.5)
    state = sim.state()
    assert not state.holding
    np.testing.assert_allclose(state.object_position, (0.4, -0.3, 0.02), atol=0.01)


def test_closing_far_from_the_object_grasps_nothing(sim):
    close = sim.set_gripper(closed=True)
    run_until_done(sim, close)
    assert close.message.endswith('nothing grasped'), close.message
    assert close.gripper.reached_goal and not close.gripper.stalled
    assert close.gripper.position == pytest.approx(kinematics.GRIPPER_CLOSED, abs=1e-3)
    move_to(sim, GraspPoint(x=0.4, y=-0.3, z=0.15))
    np.testing.assert_allclose(sim.state().object_position, OBJECT_START, atol=1e-3)


def test_move_object_now(sim):
    sim.move_object(position=(0.35, -0.1, 0.02))
    sim.advance(0.2)
    np.testing.assert_allclose(sim.state().object_position, (0.35, -0.1, 0.02), atol=1e-3)


def test_move_object_after_goals_happens_when_that_goal_ends(sim):
    sim.move_object(position=(0.3, 0.0, 0.02), after_goals=2)
    first = sim.follow(names=['panda_joint1'], path=JointPath(times=[0.3], positions=[[0.2]]))
    run_until_done(sim, first)
    np.testing.assert_allclose(sim.state().object_position, OBJECT_START, atol=1e-3)
    second = sim.follow(names=['panda_joint1'], path=JointPath(times=[0.3], positions=[[0.0]]))
    sim.advance(0.2)
    np.testing.assert_allclose(sim.state().object_position, OBJECT_START, atol=1e-3)
    run_until_done(sim, second)
    # moved by the time the motion reports its end, before any further step
    np.testing.assert_allclose(sim.state().object_position, (0.3, 0.0, 0.02), atol=1e-3)
    assert sim.finished_goals == 2


@pytest.mark.parametrize('kwargs, match', [
    ({'position': (math.nan, 0.0, 0.0)}, 'finite'),
    ({'position': (0.3, 0.0, 0.02), 'orientation': (0.0, 0.0, 0.0, 0.0)}, 'quaternion'),
    ({'position': (0.3, 0.0, 0.02), 'after_goals': -1}, 'after_goals'),
])
def test_move_object_refuses_bad_input_and_leaves_the_object(sim, kwargs, match):
    with pytest.raises(ValueError, match=match):
        sim.move_object(**kwargs)
    np.testing.assert_allclose(sim.state().object_position, OBJECT_START, atol=1e-3)


def test_reset_restores_home_object_and_drops_pending_moves(sim):
    move_to(sim, GraspPoint(x=0.4, y=-0.2, z=0.1))
    run_until_done(sim, sim.set_gripper(closed=True))
    sim.move_object(position=(0.2, 0.3, 0.02))
    sim.move_object(position=(0.25, 0.3, 0.02), after_goals=1)
    sim.reset()
    state = sim.state()
    np.testing.assert_allclose(state.positions[:N], kinematics.HOME, atol=1e-9)
    np.testing.assert_allclose(state.object_position, OBJECT_START, atol=1e-6)
    assert not state.gripper_closed and not state.holding
    run_until_done(sim, sim.follow(names=['panda_joint1'],
                                   path=JointPath(times=[0.2], positions=[[0.0]])))
    np.testing.assert_allclose(sim.state().object_position, OBJECT_START, atol=1e-3)


def test_the_physics_thread_runs_faster_than_real_time_when_asked():
    sim = ArmSim(rtf=20.0)
    sim.start()
    try:
        motion = sim.follow(names=['panda_joint1'],
                            path=JointPath(times=[2.0], positions=[[0.5]]))
        assert motion.wait(30.0), 'motion did not finish in the thread'
        assert motion.outcome is MotionOutcome.SUCCEEDED
        assert sim.state().sim_time >= 2.0
    finally:
        sim.stop()


def test_bad_rtf_is_refused():
    with pytest.raises(ValueError, match='rtf'):
        ArmSim(rtf=0.0)


def test_a_joint_leaving_its_path_tolerance_aborts_and_the_arm_holds_there(sim):
    target = kinematics.inverse(GraspPoint(x=0.5, y=0.2, z=0.15))
    path = JointPath(times=[0.4], positions=[target])
    joint = int(np.argmax(np.abs(np.array(target) - kinematics.HOME)))
    limits = [0.0] * N
    limits[joint] = 0.001
    # a fast move: the servos lag the path by more than 1 mrad on the joint that moves most
    motion = sim.follow(names=kinematics.ARM_JOINTS, path=path, path_tolerance=limits)
    run_until_done(sim, motion)
    assert motion.outcome is MotionOutcome.PATH_TOLERANCE_VIOLATED, motion.message
    assert motion.message.startswith(f'{kinematics.ARM_JOINTS[joint]} path error'), \
        motion.message
    stopped = sim.state().positions[joint]
    sim.advance(0.5)
    assert sim.state().positions[joint] == pytest.approx(stopped, abs=0.01)
    assert abs(stopped - target[joint]) > 0.1


def test_a_path_tolerance_the_arm_keeps_lets_the_goal_succeed(sim):
    target = kinematics.inverse(GraspPoint(x=0.5, y=0.2, z=0.15))
    path = JointPath(times=[1.0], positions=[target], velocities=[[0.0] * N])
    motion = sim.follow(names=kinematics.ARM_JOINTS, path=path, tolerance=0.005,
                        path_tolerance=[0.3] * N)
    run_until_done(sim, motion)
    assert motion.outcome is MotionOutcome.SUCCEEDED, motion.message


def test_a_gripper_position_out_of_range_is_refused(sim):
    with pytest.raises(ValueError, match='outside'):
        sim.set_gripper(position=0.05)


def test_the_fetch_arm_from_the_same_wheel_builds_solves_and_moves():
    """The second arm (for tests of bodies): its scene, kinematics and description."""
    sim = ArmSim(arm='fetch')
    kin = kinematics.for_arm('fetch')
    assert sim.joint_names == arms.ARMS['fetch'].arm_joints + arms.ARMS['fetch'].gripper_joints
    target = GraspPoint(x=0.5, y=0.2, z=0.15)
    joints = kin.inverse(target)
    path = JointPath(times=[1.0], positions=[joints], velocities=[[0.0] * len(joints)])
    motion = sim.follow(names=kin.joint_names, path=path, tolerance=0.005)
    run_until_done(sim, motion)
    assert motion.outcome is MotionOutcome.SUCCEEDED, motion.message
    np.testing.assert_allclose(sim.grasp_point(), (0.5, 0.2, 0.15), atol=0.005)
    text = arms.description('fetch')
    assert text.startswith('<mujoco model="fetch">') and 'shoulder_pan_joint' in text
    assert text != arms.description('panda')
