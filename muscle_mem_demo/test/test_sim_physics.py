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

"""The ROS-free MuJoCo simulation: kinematics, trajectory tracking, grasping, moves, reset."""

from __future__ import annotations

import math

from muscle_mem_demo import kinematics
from muscle_mem_demo.kinematics import GraspPoint
from muscle_mem_demo.motion import Motion, MotionOutcome
from muscle_mem_demo.physics import ArmSim, OBJECT_START
from muscle_mem_demo.trajectory import JointPath
import numpy as np
import pytest


def run_until_done(sim: ArmSim, motion: Motion, limit: float = 10.0) -> None:
    elapsed = 0.0
    while not motion.done and elapsed < limit:
        sim.advance(0.01)
        elapsed += 0.01
    assert motion.done, f'motion not finished after {limit} simulated seconds'


def move_to(sim: ArmSim, point: GraspPoint, duration: float = 1.0) -> Motion:
    joints = kinematics.inverse(point)
    path = JointPath(times=[duration], positions=[joints], velocities=[[0.0] * 4])
    motion = sim.follow(names=kinematics.ARM_JOINTS, path=path, tolerance=0.005)
    run_until_done(sim, motion)
    return motion


@pytest.fixture
def sim() -> ArmSim:
    return ArmSim()


def test_starts_at_home_with_the_object_at_its_start(sim):
    state = sim.state()
    assert state.joint_names == kinematics.ARM_JOINTS + kinematics.GRIPPER_JOINTS
    np.testing.assert_allclose(state.positions[:4], kinematics.HOME, atol=1e-9)
    np.testing.assert_allclose(state.object_position, OBJECT_START, atol=1e-3)
    assert not state.holding and not state.gripper_closed


@pytest.mark.parametrize('joints', [
    kinematics.HOME,
    (0.3, 0.9, -1.4, -1.1),
    (-1.2, 0.4, -0.8, -0.5),
])
def test_forward_kinematics_matches_the_mujoco_model(sim, joints):
    path = JointPath(times=[0.5], positions=[joints])
    run_until_done(sim, sim.follow(names=kinematics.ARM_JOINTS, path=path, tolerance=0.002))
    actual = sim.state().positions[:4]
    expected = kinematics.forward(actual)
    # the site is computed at the start of the last step, the joints at its end
    np.testing.assert_allclose(sim.grasp_point(), (expected.x, expected.y, expected.z),
                               atol=1e-4)


def test_inverse_kinematics_round_trips_and_keeps_the_gripper_down():
    for target in (GraspPoint(x=0.4, y=0.2, z=0.02), GraspPoint(x=0.3, y=-0.3, z=0.15),
                   GraspPoint(x=0.5, y=0.0, z=0.1)):
        joints = kinematics.inverse(target)
        reached = kinematics.forward(joints)
        assert math.dist((reached.x, reached.y, reached.z),
                         (target.x, target.y, target.z)) < 1e-9
        assert joints[1] + joints[2] + joints[3] == pytest.approx(-math.pi / 2)


def test_inverse_kinematics_rejects_unreachable_points():
    with pytest.raises(kinematics.UnreachableError, match='out of reach'):
        kinematics.inverse(GraspPoint(x=1.5, y=0.0, z=0.0))
    with pytest.raises(kinematics.UnreachableError, match='pan axis'):
        kinematics.inverse(GraspPoint(x=0.0, y=0.0, z=0.1))


def test_trajectory_tracking_reaches_the_goal(sim):
    target = GraspPoint(x=0.45, y=-0.1, z=0.1)
    motion = move_to(sim, target)
    assert motion.outcome is MotionOutcome.SUCCEEDED, motion.message
    np.testing.assert_allclose(sim.state().positions[:4], kinematics.inverse(target),
                               atol=0.005)
    np.testing.assert_allclose(sim.grasp_point(), (0.45, -0.1, 0.1), atol=0.005)


def test_multi_waypoint_path_passes_through_its_waypoints(sim):
    first = kinematics.inverse(GraspPoint(x=0.4, y=0.2, z=0.15))
    second = kinematics.inverse(GraspPoint(x=0.4, y=-0.2, z=0.15))
    path = JointPath(times=[1.0, 2.0], positions=[first, second])
    motion = sim.follow(names=kinematics.ARM_JOINTS, path=path, tolerance=0.005)
    sim.advance(1.05)
    np.testing.assert_allclose(sim.state().positions[:4], first, atol=0.05)
    run_until_done(sim, motion)
    assert motion.outcome is MotionOutcome.SUCCEEDED
    np.testing.assert_allclose(sim.state().positions[:4], second, atol=0.005)


@pytest.mark.parametrize('lift, outcome', [
    (1e-12, MotionOutcome.TOLERANCE_VIOLATED),  # the lift carries the arm: never this close
    (-1.0, MotionOutcome.SUCCEEDED),  # control_msgs' -1: any final position
    (0.0, MotionOutcome.SUCCEEDED),  # 0: the default tolerance
])
def test_tolerances_per_joint(sim, lift, outcome):
    target = kinematics.inverse(GraspPoint(x=0.45, y=-0.1, z=0.1))
    path = JointPath(times=[0.5], positions=[target])
    motion = sim.follow(names=kinematics.ARM_JOINTS, path=path,
                        tolerance=[0.0, lift, 0.0, 0.0], settle_time=0.3)
    run_until_done(sim, motion)
    assert motion.outcome is outcome, motion.message
    if outcome is MotionOutcome.TOLERANCE_VIOLATED:
        assert motion.message.startswith('shoulder_lift error'), motion.message


def test_tolerances_of_the_wrong_length_are_refused(sim):
    path = JointPath(times=[0.5], positions=[[0.1, 0.2]])
    with pytest.raises(ValueError, match='3 tolerances for 2 joints'):
        sim.follow(names=['shoulder_pan', 'elbow'], path=path, tolerance=[0.1, 0.1, 0.1])


def test_subset_of_joints_moves_only_those(sim):
    path = JointPath(times=[0.5], positions=[[0.7]])
    run_until_done(sim, sim.follow(names=['shoulder_pan'], path=path))
    positions = sim.state().positions
    assert positions[0] == pytest.approx(0.7, abs=0.01)
    np.testing.assert_allclose(positions[1:4], kinematics.HOME[1:], atol=0.01)


@pytest.mark.parametrize('names', [['elbow', 'bogus'], [], ['elbow', 'elbow'], ['finger_left']])
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
    first = sim.follow(names=['shoulder_pan'],
                       path=JointPath(times=[2.0], positions=[[1.0]]))
    sim.advance(0.2)
    second = sim.follow(names=['shoulder_pan'],
                        path=JointPath(times=[0.5], positions=[[-0.5]]))
    assert first.done and first.outcome is MotionOutcome.PREEMPTED
    run_until_done(sim, second)
    assert second.outcome is MotionOutcome.SUCCEEDED


def test_closing_near_the_object_attaches_it_and_opening_drops_it(sim):
    move_to(sim, GraspPoint(x=OBJECT_START[0], y=OBJECT_START[1], z=0.15))
    move_to(sim, GraspPoint(x=OBJECT_START[0], y=OBJECT_START[1], z=OBJECT_START[2]), 0.5)
    close = sim.set_gripper(closed=True)
    run_until_done(sim, close)
    assert close.message == 'closed, holding the object'
    assert sim.state().holding
    move_to(sim, GraspPoint(x=0.3, y=-0.3, z=0.15))
    np.testing.assert_allclose(sim.state().object_position, (0.3, -0.3, 0.15), atol=0.01)
    run_until_done(sim, sim.set_gripper(closed=False))
    sim.advance(0.5)
    state = sim.state()
    assert not state.holding
    np.testing.assert_allclose(state.object_position, (0.3, -0.3, 0.02), atol=0.01)


def test_closing_far_from_the_object_grasps_nothing(sim):
    close = sim.set_gripper(closed=True)
    run_until_done(sim, close)
    assert close.message == 'closed, nothing grasped'
    move_to(sim, GraspPoint(x=0.3, y=-0.3, z=0.15))
    np.testing.assert_allclose(sim.state().object_position, OBJECT_START, atol=1e-3)


def test_move_object_now(sim):
    sim.move_object(position=(0.35, -0.1, 0.02))
    sim.advance(0.2)
    np.testing.assert_allclose(sim.state().object_position, (0.35, -0.1, 0.02), atol=1e-3)


def test_move_object_after_goals_happens_when_that_goal_ends(sim):
    sim.move_object(position=(0.3, 0.0, 0.02), after_goals=2)
    first = sim.follow(names=['shoulder_pan'], path=JointPath(times=[0.3], positions=[[0.2]]))
    run_until_done(sim, first)
    np.testing.assert_allclose(sim.state().object_position, OBJECT_START, atol=1e-3)
    second = sim.follow(names=['shoulder_pan'], path=JointPath(times=[0.3], positions=[[0.0]]))
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
    np.testing.assert_allclose(state.positions[:4], kinematics.HOME, atol=1e-9)
    np.testing.assert_allclose(state.object_position, OBJECT_START, atol=1e-6)
    assert not state.gripper_closed and not state.holding
    run_until_done(sim, sim.follow(names=['shoulder_pan'],
                                   path=JointPath(times=[0.2], positions=[[0.0]])))
    np.testing.assert_allclose(sim.state().object_position, OBJECT_START, atol=1e-3)


def test_the_physics_thread_runs_faster_than_real_time_when_asked():
    sim = ArmSim(rtf=20.0)
    sim.start()
    try:
        motion = sim.follow(names=['shoulder_pan'],
                            path=JointPath(times=[2.0], positions=[[0.5]]))
        assert motion.wait(30.0), 'motion did not finish in the thread'
        assert motion.outcome is MotionOutcome.SUCCEEDED
        assert sim.state().sim_time >= 2.0
    finally:
        sim.stop()


def test_bad_rtf_is_refused():
    with pytest.raises(ValueError, match='rtf'):
        ArmSim(rtf=0.0)
