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
The gripper's yaw and the frame tree, ROS-free: goals read, solved, a turned cube carried.

Frames are composed with muscle_mem_ros' :class:`TransformBuffer` (what the cache looks
them up with), rotations compared through scipy's ``Rotation``.
"""

from __future__ import annotations

import math

from muscle_mem_demo import arms, gripper_yaw, kinematics
from muscle_mem_demo.kinematics import GraspPoint
from muscle_mem_demo.motion import MotionOutcome
from muscle_mem_demo.physics import ArmSim
from muscle_mem_demo.tf_frames import ArmFrames, CameraFrames
from muscle_mem_demo.trajectory import JointPath
from muscle_mem_ros.transforms.buffer import TransformBuffer
from muscle_mem_ros.transforms.transform import Transform
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

N = len(kinematics.ARM_JOINTS)
KIN = kinematics.for_arm('panda')


def turn_of(sim: ArmSim) -> float:
    """Return the cube's yaw in the world, degrees, from its quaternion (w, x, y, z)."""
    w, x, y, z = sim.state().object_orientation
    return math.degrees(gripper_yaw.yaw_of((x, y, z, w)))


def move(sim: ArmSim, x: float, y: float, z: float, yaw_deg: float = 0.0,
         duration: float = 1.0) -> None:
    joints = kinematics.inverse(GraspPoint(x=x, y=y, z=z), yaw=math.radians(yaw_deg))
    path = JointPath(times=[duration], positions=[joints], velocities=[[0.0] * N])
    motion = sim.follow(names=kinematics.ARM_JOINTS, path=path, tolerance=0.005)
    run(sim, motion)
    assert motion.outcome is MotionOutcome.SUCCEEDED, motion.message


def run(sim: ArmSim, motion, limit: float = 10.0) -> None:
    elapsed = 0.0
    while not motion.done and elapsed < limit:
        sim.advance(0.01)
        elapsed += 0.01
    assert motion.done


@pytest.mark.parametrize('yaw', [0.0, 30.0, -30.0, 90.0, -135.0, 165.0])
def test_inverse_turns_the_gripper_by_the_yaw_and_keeps_it_down(yaw):
    target = GraspPoint(x=0.5, y=0.2, z=0.05)
    joints = kinematics.inverse(target, yaw=math.radians(yaw))
    reached = kinematics.forward(joints)
    assert math.dist((reached.x, reached.y, reached.z), (0.5, 0.2, 0.05)) < 1e-4
    turn = KIN.orientation(joints)
    assert gripper_yaw.tilt(turn) < math.radians(0.1)
    assert math.degrees(gripper_yaw.yaw_of(turn)) == pytest.approx(yaw, abs=0.1)
    for value, (low, high) in zip(joints, KIN.limits, strict=True):
        assert low <= value <= high


def test_a_yaw_beyond_joint_7_is_reached_180_degrees_apart():
    low, high = KIN.limits[-1]
    target = GraspPoint(x=0.4, y=-0.3, z=0.05)
    joints = kinematics.inverse(target, yaw=math.radians(140.0))
    # 140 deg here needs panda_joint7 past its limit: the same grasp turned -40 deg instead
    assert math.degrees(gripper_yaw.yaw_of(KIN.orientation(joints))) == pytest.approx(
        -40.0, abs=0.1)
    assert low <= joints[-1] <= high
    reached = kinematics.forward(joints)
    assert math.dist((reached.x, reached.y, reached.z), (0.4, -0.3, 0.05)) < 1e-4
    with pytest.raises(kinematics.UnreachableError,
                       match=r'turned 30\.0 deg .*180 deg apart\) is out of reach too'):
        kinematics.inverse(GraspPoint(x=0.9, y=0.0, z=0.4), yaw=math.radians(30.0))


@pytest.mark.parametrize('quaternion, yaw', [
    ((0.0, 0.0, 0.0, 1.0), 0.0),
    ((0.0, 0.0, 0.0, 0.0), 0.0),
    ((0.0, 0.0, 0.0, -1.0), 0.0),
    (gripper_yaw.from_yaw(math.radians(30.0)), 30.0),
    (tuple(-v for v in gripper_yaw.from_yaw(math.radians(-100.0))), -100.0),
    (tuple(Rotation.from_euler('xz', [0.8, 45.0], degrees=True).as_quat()), 45.0),
])
def test_a_goal_orientation_reads_as_its_yaw(quaternion, yaw):
    assert math.degrees(gripper_yaw.yaw_of_goal(quaternion)) == pytest.approx(yaw, abs=1e-6)


@pytest.mark.parametrize('quaternion, words', [
    (tuple(Rotation.from_euler('xz', [1.5, 30.0], degrees=True).as_quat()),
     'tilted 1.5 deg from gripper down'),
    ((1.0, 0.0, 0.0, 0.0), 'tilted 180.0 deg'),
    (tuple(Rotation.from_euler('y', 20.0, degrees=True).as_quat()), 'tilted 20.0 deg'),
    ((0.0, 0.0, 0.0, 2.0), 'not a unit quaternion'),
    ((0.0, 0.0, math.nan, 1.0), 'not a finite quaternion'),
])
def test_a_tilted_or_broken_goal_orientation_is_refused_saying_why(quaternion, words):
    with pytest.raises(ValueError, match=words):
        gripper_yaw.yaw_of_goal(quaternion)


def buffer_at(joints) -> TransformBuffer:
    """Return a buffer holding the arm's and the camera's frames at arm ``joints``."""
    frames = ArmFrames(arm='panda')
    camera = CameraFrames(model=arms.build_scene('panda'))
    buffer = TransformBuffer()
    for link in frames.static_links() + camera.static_links():
        buffer.set(link.parent, link.child, 0.0, Transform(link.translation, link.rotation),
                   static=True)
    for link in frames.links(tuple(joints) + (0.04, 0.04)):
        buffer.set(link.parent, link.child, 1.0, Transform(link.translation, link.rotation))
    return buffer


def test_the_links_compose_to_the_grasp_point_turned_as_the_hand():
    joints = kinematics.inverse(GraspPoint(x=0.45, y=-0.1, z=0.12), yaw=math.radians(30.0))
    buffer = buffer_at(joints)
    tcp = buffer.lookup('world', 'panda_hand_tcp', 1.0)
    assert tcp.links[-1] == 'world->panda_link0' and tcp.links[0] == 'panda_hand->panda_hand_tcp'
    assert math.dist(tcp.transform.translation, (0.45, -0.1, 0.12)) < 1e-6
    # gripper down at yaw 0: the tcp's x along the world's x, z down (franka_description's)
    down = Rotation.from_euler('x', 180.0, degrees=True)
    turned = Rotation.from_quat(tcp.transform.rotation) * down.inv()
    assert math.degrees(gripper_yaw.tilt(turned.as_quat())) < 0.1
    assert math.degrees(gripper_yaw.yaw_of(turned.as_quat())) == pytest.approx(30.0, abs=0.1)
    hand = buffer.lookup('world', 'panda_hand', 1.0).transform
    assert hand.translation[2] == pytest.approx(0.12 + 0.0746, abs=1e-4)
    fingers = buffer.lookup('panda_hand', 'panda_leftfinger', 1.0).transform
    assert fingers.translation[2] == pytest.approx(0.0, abs=1e-9)


def test_the_cube_is_seen_from_the_camera_with_its_noise():
    camera = CameraFrames(model=arms.build_scene('panda'))
    buffer = buffer_at(kinematics.HOME)
    turn = gripper_yaw.from_yaw(math.radians(30.0))
    w_first = (turn[3], turn[0], turn[1], turn[2])
    exact = camera.cube((0.5, 0.2, 0.02), w_first)
    assert (exact.parent, exact.child) == ('workspace_camera', 'cube')
    buffer.set(exact.parent, exact.child, 1.0, Transform(exact.translation, exact.rotation))
    seen = buffer.lookup('world', 'cube', 1.0)
    assert seen.links == ('workspace_camera->cube', 'camera->workspace_camera', 'world->camera')
    assert math.dist(seen.transform.translation, (0.5, 0.2, 0.02)) < 1e-9
    assert math.degrees(gripper_yaw.yaw_of(seen.transform.rotation)) == pytest.approx(30.0)
    rng = np.random.default_rng(7)
    shifts, yaws = [], []
    for k in range(400):
        link = camera.cube((0.5, 0.2, 0.02), w_first, rng=rng, noise=0.001,
                           yaw_noise=math.radians(0.5))
        buffer.set(link.parent, link.child, 2.0 + k, Transform(link.translation, link.rotation))
        noisy = buffer.lookup('world', 'cube', 2.0 + k).transform
        shifts.append(np.subtract(noisy.translation, (0.5, 0.2, 0.02)))
        yaws.append(math.degrees(gripper_yaw.yaw_of(noisy.rotation)) - 30.0)
        assert gripper_yaw.tilt(noisy.rotation) < 1e-9  # noise turns it about z only
    assert np.std(shifts, axis=0) == pytest.approx([0.001] * 3, rel=0.15)
    assert np.std(yaws) == pytest.approx(0.5, rel=0.15)


def test_a_turned_cube_is_grasped_turned_and_placed_at_the_hands_yaw():
    sim = ArmSim()
    turn = gripper_yaw.from_yaw(math.radians(30.0))
    sim.move_object(position=(0.5, 0.2, 0.02), orientation=(turn[3], turn[0], turn[1], turn[2]))
    sim.advance(0.3)
    assert turn_of(sim) == pytest.approx(30.0, abs=0.1)
    move(sim, 0.5, 0.2, 0.15, 30.0)
    move(sim, 0.5, 0.2, 0.02, 30.0, duration=0.5)
    run(sim, sim.set_gripper(closed=True))
    assert sim.state().holding
    move(sim, 0.5, 0.2, 0.15, 30.0, duration=0.5)
    assert sim.state().object_position[2] > 0.1
    assert turn_of(sim) == pytest.approx(30.0, abs=1.0)  # held as it lay
    move(sim, 0.4, -0.3, 0.15, 0.0)
    move(sim, 0.4, -0.3, 0.025, 0.0, duration=0.5)
    run(sim, sim.set_gripper(closed=False))
    move(sim, 0.4, -0.3, 0.15, 0.0, duration=0.5)
    sim.advance(0.5)
    x, y, z = sim.state().object_position
    assert math.dist((x, y), (0.4, -0.3)) < 0.005
    assert z == pytest.approx(0.02, abs=0.002)
    assert turn_of(sim) == pytest.approx(0.0, abs=3.0)  # its turn in the hand: none
