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
The sim robot's frames on ROS: ``tf`` and ``tf_static`` (tf2_msgs/msg/TFMessage).

What :mod:`.tf_frames` computes, published as tf2_ros' broadcasters publish it, so that a
real tf2 listener reads it: the static links once on ``tf_static`` (one message holding them
all, reliable and transient local with depth 1, as StaticTransformBroadcaster publishes: a
late subscriber gets it), the moving links on ``tf`` (reliable, depth 100, as
TransformBroadcaster). The arm's links go out with each joint state, with its stamp (as
robot_state_publisher answers each ``/joint_states``); the cube with each object pose, with
its stamp. Topic names are relative, so a namespace applies (``/ns/tf``), as tf2_ros nodes
are remapped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from geometry_msgs.msg import TransformStamped
from muscle_mem_demo.tf_frames import ArmFrames, CameraFrames, Link
import numpy as np
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from tf2_msgs.msg import TFMessage

__all__ = ['TfFeed', 'transform_stamped']

_DYNAMIC_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
_STATIC_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)


def transform_stamped(link: Link, stamp: object) -> TransformStamped:
    """Return ``link`` as a TransformStamped at ``stamp`` (a builtin_interfaces/Time)."""
    msg = TransformStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = link.parent
    msg.child_frame_id = link.child
    t = msg.transform.translation
    t.x, t.y, t.z = link.translation
    r = msg.transform.rotation
    r.x, r.y, r.z, r.w = link.rotation
    return msg


class TfFeed:
    """
    Publish the arm's links, the camera and the detected cube (module docstring).

    :param node: The sim robot node (its clock stamps the static links).
    :param arm: The arm's frames.
    :param camera: The camera's frames and the cube's detection.
    :param rng: Draws the cube's detection noise.
    :param noise: Standard deviation of the cube's position, per axis, metres.
    :param yaw_noise: Standard deviation of the cube's yaw, radians.
    """

    def __init__(self, *, node: Node, arm: ArmFrames, camera: CameraFrames,
                 rng: np.random.Generator, noise: float, yaw_noise: float) -> None:
        self._arm = arm
        self._camera = camera
        self._rng = rng
        self._noise = noise
        self._yaw_noise = yaw_noise
        self._pub = node.create_publisher(TFMessage, 'tf', _DYNAMIC_QOS)
        self._static_pub = node.create_publisher(TFMessage, 'tf_static', _STATIC_QOS)
        stamp = node.get_clock().now().to_msg()
        self._static_pub.publish(self._message(
            arm.static_links() + camera.static_links(), stamp))

    @staticmethod
    def _message(links: Iterable[Link], stamp: object) -> TFMessage:
        return TFMessage(transforms=[transform_stamped(link, stamp) for link in links])

    def publish_links(self, positions: Sequence[float], stamp: object) -> None:
        """Publish the arm's moving links at joint ``positions`` (arm, then fingers)."""
        self._pub.publish(self._message(self._arm.links(positions), stamp))

    def publish_cube(self, position: Sequence[float], orientation: Sequence[float],
                     stamp: object) -> None:
        """Publish the cube at its world pose (orientation w, x, y, z), as detected."""
        link = self._camera.cube(position, orientation, rng=self._rng, noise=self._noise,
                                 yaw_noise=self._yaw_noise)
        self._pub.publish(self._message((link,), stamp))
