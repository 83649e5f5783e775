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
The sim robot's frames over real DDS (/tf, /tf_static) and its gripper's yaw (MoveToPose).

The frames read here are composed with muscle_mem_ros' :class:`TransformBuffer`, what the
cache looks them up with; rotations are compared as rotations (scipy's ``Rotation``). The
robot publishes its joint states at 60 Hz here (the demo's 120 Hz is the default).
"""

from __future__ import annotations

import math
import threading

from action_msgs.msg import GoalStatus
from muscle_mem_demo import gripper_yaw, kinematics
from muscle_mem_demo_interfaces.action import MoveToPose
from muscle_mem_ros.transforms.buffer import TransformBuffer
from muscle_mem_ros.transforms.transform import Transform
import pytest
import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from scipy.spatial.transform import Rotation
from sim_helpers import NodeProcess, SimClient, unique_namespace
from tf2_msgs.msg import TFMessage

N = len(kinematics.ARM_JOINTS)
ARM_LINKS = [f'panda_link{i}->panda_link{i + 1}' for i in range(7)] + [
    'panda_hand->panda_leftfinger', 'panda_hand->panda_rightfinger']
STATIC_LINKS = ['world->panda_link0', 'panda_link7->panda_hand', 'panda_hand->panda_hand_tcp',
                'world->camera', 'camera->workspace_camera']
DOWN = Rotation.from_euler('x', 180.0, degrees=True)
"""panda_hand_tcp in the world with the gripper down at yaw 0 (franka_description's)."""


class Frames:
    """What a namespaced robot publishes on tf and tf_static, kept for the test."""

    def __init__(self, client: SimClient, namespace: str) -> None:
        self.lock = threading.Lock()
        self.dynamic: list = []
        self.static: list = []
        client.create_subscription(TFMessage, f'{namespace}/tf', self._on_tf,
                                   QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
        client.create_subscription(
            TFMessage, f'{namespace}/tf_static', self._on_static,
            QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL))

    def _on_tf(self, msg: TFMessage) -> None:
        with self.lock:
            self.dynamic.extend(msg.transforms)
            del self.dynamic[:-5000]

    def _on_static(self, msg: TFMessage) -> None:
        with self.lock:
            self.static.extend(msg.transforms)

    def since(self, mark: int) -> list:
        with self.lock:
            return [t for t in self.dynamic if ns(t) > mark]

    def buffer(self, dynamic: list) -> TransformBuffer:
        """Return a buffer fed with the static links and the ``dynamic`` ones."""
        buffer = TransformBuffer()
        with self.lock:
            static = list(self.static)
        for t in static:
            buffer.set(t.header.frame_id, t.child_frame_id, ns(t) * 1e-9, transform(t),
                       static=True)
        for t in dynamic:
            buffer.set(t.header.frame_id, t.child_frame_id, ns(t) * 1e-9, transform(t))
        return buffer


def ns(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def transform(t) -> Transform:
    v, r = t.transform.translation, t.transform.rotation
    return Transform((v.x, v.y, v.z), (r.x, r.y, r.z, r.w))


def yaw_deg(quaternion) -> float:
    return math.degrees(gripper_yaw.yaw_of(quaternion))


def quat(msg) -> tuple[float, float, float, float]:
    return (msg.x, msg.y, msg.z, msg.w)


@pytest.fixture(scope='module')
def ros():
    rclpy.init()
    yield
    rclpy.try_shutdown()


@pytest.fixture(scope='module')
def robot(ros, tmp_path_factory):
    namespace = unique_namespace()
    # joint states (and the links with them) at 60 Hz, not 120: the test process reads four
    # topics in Python, and at 120 Hz it fell behind on a loaded machine and lost messages
    process = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                          params={'rtf': 2.0, 'joint_state_rate': 60.0},
                          log_dir=tmp_path_factory.mktemp('logs'))
    client = SimClient(namespace)
    client.frames = Frames(client, namespace)
    try:
        client.wait_robot()
        client.wait_for(lambda: len(client.frames.static) >= len(STATIC_LINKS),
                        what='the static frames')
        yield client
    finally:
        process.stop()
        client.close()
        print(process.log())


@pytest.fixture
def sim(robot):
    robot.reset()
    return robot


def test_tf_carries_the_links_and_the_cube_tf_static_the_camera(sim):
    with sim.frames.lock:
        static = {f'{t.header.frame_id}->{t.child_frame_id}' for t in sim.frames.static}
    assert static == set(STATIC_LINKS)
    mark = sim.now_ns()
    sim.wait_for(lambda: sum(t.child_frame_id == 'cube' for t in sim.frames.since(mark)) >= 30,
                 what='30 detections of the cube')
    seen = sim.frames.since(mark)
    links = {f'{t.header.frame_id}->{t.child_frame_id}' for t in seen}
    assert links == set(ARM_LINKS) | {'workspace_camera->cube'}
    # the links with each joint state (its stamp), the cube with each object pose (its stamp)
    with sim.lock:
        joint_stamps = sorted({ns(m) for m in sim.joint_msgs})
        object_stamps = sorted({ns(m) for m in sim.object_msgs})
    arm = sorted(ns(t) for t in seen if t.child_frame_id == 'panda_link1')
    cube = sorted(ns(t) for t in seen if t.child_frame_id == 'cube')
    assert_stamped_with(arm, joint_stamps)
    assert_stamped_with(cube, object_stamps)
    between = [t for t in arm if cube[0] <= t < cube[-1]]
    assert 1.4 < len(between) / (len(cube) - 1) < 3.0  # 60 Hz links, 30 Hz cube


def assert_stamped_with(links: list[int], stamps: list[int]) -> None:
    """
    Assert the links carry the stamps of the topic they go out with.

    Each topic comes on its own, and a test client that falls behind loses messages of
    either: only the links within the stamps received are compared, and most must match.
    A link stamped on its own (a second ``now()``) would match none.
    """
    inside = [t for t in links if stamps[0] <= t <= stamps[-1]]
    matched = set(inside) & set(stamps)
    assert len(inside) > 15 and len(matched) > 0.5 * len(inside), (len(matched), len(inside))


def test_the_cube_on_tf_is_where_the_sim_has_it_with_the_detectors_noise(sim):
    spot = (0.45, 0.1, 0.02)
    turn = gripper_yaw.from_yaw(math.radians(30.0))
    assert sim.move_object(spot, orientation=turn).success
    mark = sim.now_ns()
    sim.wait_for(lambda: sum(t.child_frame_id == 'cube' for t in sim.frames.since(mark)) >= 40,
                 what='40 detections of the turned cube')
    seen = sim.frames.since(mark)
    buffer = sim.frames.buffer(seen)
    cube = [t for t in seen if t.child_frame_id == 'cube']
    found = [buffer.lookup('world', 'cube', ns(t) * 1e-9) for t in cube]
    assert found[0].links == ('workspace_camera->cube', 'camera->workspace_camera',
                              'world->camera')
    offsets = [math.dist(f.transform.translation, spot) for f in found]
    yaws = [yaw_deg(f.transform.rotation) for f in found]
    assert max(offsets) < 0.006 and 0.0003 < sum(offsets) / len(offsets) < 0.003
    assert max(abs(y - 30.0) for y in yaws) < 3.0 and len({round(y, 6) for y in yaws}) > 30


def test_the_chain_to_the_hand_is_the_grasp_pose_the_sim_reports(sim):
    feedback: list = []
    status, result = sim.send_move_to_pose(
        (0.45, -0.1, 0.12), orientation=gripper_yaw.from_yaw(math.radians(30.0)),
        duration=0.8, feedback=feedback)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    mark = sim.now_ns()

    def posed() -> list:
        """Return the poses after the mark whose links (the same stamp) the client has."""
        linked = {ns(t) for t in sim.frames.since(mark) if t.child_frame_id == 'panda_link7'}
        with sim.lock:
            return [m for m in sim.ee_msgs if ns(m) > mark and ns(m) in linked]

    # (a client that falls behind loses messages of either topic: the poses compared are
    # those whose links it has)
    sim.wait_for(lambda: len(posed()) >= 20, what='ee poses and their links')
    poses = posed()[:20]
    buffer = sim.frames.buffer(sim.frames.since(mark))
    for pose in poses:
        tcp = buffer.lookup('world', 'panda_hand_tcp', ns(pose) * 1e-9)
        assert tcp.links[-1] == 'world->panda_link0'
        p = pose.pose.position
        assert math.dist(tcp.transform.translation, (p.x, p.y, p.z)) < 0.001
        # the hand turned 30 degrees: on tf and in ee_pose, the same turn (within the 0.09
        # deg by which the model's home pose, ee_pose's "gripper down", leans off vertical)
        turned = Rotation.from_quat(tcp.transform.rotation) * DOWN.inv()
        reported = Rotation.from_quat(quat(pose.pose.orientation))
        assert math.degrees((turned * reported.inv()).magnitude()) < 0.2
        assert yaw_deg(quat(pose.pose.orientation)) == pytest.approx(30.0, abs=1.0)
        assert math.degrees(gripper_yaw.tilt(quat(pose.pose.orientation))) < 1.0
    hand = buffer.lookup('world', 'panda_hand', ns(poses[-1]) * 1e-9).transform
    assert hand.translation[2] == pytest.approx(poses[-1].pose.position.z + 0.0746, abs=0.001)
    # the feedback carries the hand's turn as it goes: from 0 to (nearly, the last one comes
    # before the end) 30 degrees
    turns = [yaw_deg(quat(f.current.pose.orientation))
             for f in sim.wait_feedback(feedback, lambda f: len(f) >= 3, 'feedback of the move')]
    assert min(turns) < 10.0 and 20.0 < max(turns) < 30.5, turns


def test_a_tilted_orientation_is_an_invalid_goal_saying_the_tilt(sim):
    tilted = tuple(Rotation.from_euler('xz', [5.0, 30.0], degrees=True).as_quat())
    status, result = sim.send_move_to_pose((0.45, -0.1, 0.12), orientation=tilted)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == MoveToPose.Result.INVALID_GOAL
    assert 'tilted 5.0 deg from gripper down' in result.error_string, result.error_string


def test_a_turned_cube_is_picked_turned_and_placed_at_yaw_0(sim):
    assert sim.move_object((0.5, 0.2, 0.02),
                           orientation=gripper_yaw.from_yaw(math.radians(30.0))).success
    grasp = gripper_yaw.from_yaw(math.radians(30.0))
    for position, orientation in (((0.5, 0.2, 0.15), grasp), ((0.5, 0.2, 0.02), grasp)):
        status, result = sim.send_move_to_pose(position, orientation=orientation, duration=0.8)
        assert result.error_code == MoveToPose.Result.SUCCESSFUL, result.error_string
    status, result = sim.send_gripper(kinematics.GRIPPER_CLOSED)
    assert status == GoalStatus.STATUS_SUCCEEDED and result.stalled
    for position in ((0.5, 0.2, 0.15), (0.4, -0.3, 0.15), (0.4, -0.3, 0.025)):
        orientation = grasp if position == (0.5, 0.2, 0.15) else (0.0, 0.0, 0.0, 1.0)
        status, result = sim.send_move_to_pose(position, orientation=orientation, duration=0.8)
        assert result.error_code == MoveToPose.Result.SUCCESSFUL, result.error_string
    status, result = sim.send_gripper(kinematics.GRIPPER_OPEN)
    assert status == GoalStatus.STATUS_SUCCEEDED
    status, result = sim.send_move_to_pose((0.4, -0.3, 0.15), duration=0.5)
    assert result.error_code == MoveToPose.Result.SUCCESSFUL, result.error_string
    _, obj = sim.wait_fresh()
    p = obj.pose.position
    assert math.dist((p.x, p.y, p.z), (0.4, -0.3, 0.02)) < 0.005
    assert yaw_deg(quat(obj.pose.orientation)) == pytest.approx(0.0, abs=3.0)
