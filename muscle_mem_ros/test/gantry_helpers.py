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
A lab gantry unlike the demo, as ``muscle-mem init`` finds one: what it must list, and not.

The numbers are a liquid-handling gantry's: three axes whose positions are noisy by
:data:`JOINT_NOISE` (0.2 mm) at rest over wells :data:`WELL_PITCH` (9 mm) apart, and a
scale under the plate with :data:`SCALE_NOISE` (0.01 g) of noise, where one aspirate
takes :data:`ASPIRATE` (0.5 g). Its graph holds what a real cell's does beside the robot's
tools:

* ``gantry``: ``/gantry/joint_states`` (``JointState`` x, y, z at 50 Hz), ``/gantry/scale``
  (``std_msgs/msg/Float64``, grams, 20 Hz), the axes'
  ``muscle_mem_demo_interfaces/action/FollowJointTrajectory`` ``/gantry/goto``, the
  pipette's ``std_srvs/srv/SetBool`` ``/gantry/pipette/aspirate`` and ``.../dispense``,
  and two services that are not robot actions: the e-stop ``/gantry/estop`` and
  ``/gantry/reset`` (``std_srvs/srv/Trigger``). :attr:`Gantry.moving` drives x at
  :data:`CREEP` while it is set.
* ``mixer``: a ``test_msgs/action/Fibonacci`` ``/mixer/mix`` (an action no stop is known
  for) and ``/mixer/speed`` (``Float64``, 0 and silent: no noise at rest).
* ``controller_manager``: a service of ros2_control's controller manager.
* ``gantry_driver``: a lifecycle node (its ``change_state`` and the other lifecycle services).
* ``robot_state_publisher``: ``/robot_description``, latched; :meth:`GantryWorld.describe`
  takes it away and brings it back. ``/pipette/robot_description``, the pipette's own, is
  another robot's (in a namespace).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
import numpy as np
import rclpy
from rclpy.action import ActionServer
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.executors import MultiThreadedExecutor
from rclpy.lifecycle import LifecycleNode
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, String
from std_srvs.srv import SetBool, Trigger
from test_msgs.action import Fibonacci

JOINT_NOISE = 0.0002
"""Standard deviation of each axis at rest, metres."""
WELL_PITCH = 0.009
"""Metres between two wells."""
SCALE_NOISE = 0.01
"""Standard deviation of the scale at rest, grams."""
ASPIRATE = 0.5
"""Grams one aspirate takes off the plate."""
PLATE = 86.0
"""What the scale reads, grams (1 % of it is more than an aspirate)."""
CREEP = 0.01
"""Metres per second x moves at while :attr:`Gantry.moving`."""
HOME = (0.1, 0.2, 0.05)
URDF = ('<?xml version="1.0"?><robot name="gantry"><link name="base"/><link name="x_carriage"/>'
        '<joint name="x" type="prismatic"><parent link="base"/><child link="x_carriage"/>'
        '<limit lower="0" upper="0.5" effort="10" velocity="0.2"/></joint></robot>')
_LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


class Gantry(Node):
    """The gantry's axes, scale, pipette, e-stop and reset (module docstring)."""

    def __init__(self, *, context: Any, seed: int = 11) -> None:
        super().__init__('gantry', context=context)
        group = ReentrantCallbackGroup()
        self._rng = np.random.default_rng(seed)
        self.lock = threading.Lock()
        self.moving = False
        self._since = time.monotonic()
        self._x = HOME[0]
        self._joints = self.create_publisher(JointState, '/gantry/joint_states', 10)
        self._scale = self.create_publisher(Float64, '/gantry/scale', 10)
        self.create_timer(0.02, self._publish_joints, callback_group=group)
        self.create_timer(0.05, self._publish_scale, callback_group=group)
        ActionServer(self, FollowJointTrajectory, '/gantry/goto', self._goto,
                     callback_group=group)
        for name in ('aspirate', 'dispense'):
            self.create_service(SetBool, f'/gantry/pipette/{name}', _ok, callback_group=group)
        for name in ('estop', 'reset'):
            self.create_service(Trigger, f'/gantry/{name}', _ok, callback_group=group)

    def move(self, on: bool) -> None:
        """Start (or stop) x creeping at :data:`CREEP`."""
        with self.lock:
            self._x = self._where(time.monotonic())
            self._since = time.monotonic()
            self.moving = on

    def _where(self, now: float) -> float:
        return self._x + (CREEP * (now - self._since) if self.moving else 0.0)

    def _publish_joints(self) -> None:
        with self.lock:
            x = self._where(time.monotonic())
        noise = self._rng.normal(0.0, JOINT_NOISE, 3)
        msg = JointState(name=['x', 'y', 'z'],
                         position=[x + noise[0], HOME[1] + noise[1], HOME[2] + noise[2]])
        msg.header.stamp = self.get_clock().now().to_msg()
        self._joints.publish(msg)

    def _publish_scale(self) -> None:
        self._scale.publish(Float64(data=PLATE + float(self._rng.normal(0.0, SCALE_NOISE))))

    def _goto(self, goal_handle: Any) -> Any:
        goal_handle.succeed()
        return FollowJointTrajectory.Result()


class Mixer(Node):
    """A shaker: ``/mixer/mix`` (no stop known) and its silent ``/mixer/speed``."""

    def __init__(self, *, context: Any) -> None:
        super().__init__('mixer', context=context)
        self._speed = self.create_publisher(Float64, '/mixer/speed', 10)
        self.create_timer(0.05, lambda: self._speed.publish(Float64(data=0.0)))
        ActionServer(self, Fibonacci, '/mixer/mix', self._mix)

    def _mix(self, goal_handle: Any) -> Any:
        goal_handle.succeed()
        return Fibonacci.Result()


def _ok(_request: Any, response: Any) -> Any:
    response.success = True
    return response


class GantryWorld:
    """The gantry's graph on one ROS domain (module docstring), spun in a thread."""

    def __init__(self, *, domain_id: int) -> None:
        self.domain_id = domain_id
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.gantry = Gantry(context=self.context)
        self.mixer = Mixer(context=self.context)
        self.manager = Node('controller_manager', context=self.context)
        self.manager.create_service(Trigger, '/controller_manager/reload_controller_libraries',
                                    _ok)
        self.driver = LifecycleNode('gantry_driver', context=self.context)
        self.publisher = Node('robot_state_publisher', context=self.context)
        self._description: Any = None
        self.describe(True)
        self._pipette = self.publisher.create_publisher(String, '/pipette/robot_description',
                                                        _LATCHED)
        self._pipette.publish(String(data=URDF.replace('gantry', 'pipette')))
        self.nodes = [self.gantry, self.mixer, self.manager, self.driver, self.publisher]
        self.executor = MultiThreadedExecutor(num_threads=4, context=self.context)
        for node in self.nodes:
            self.executor.add_node(node)
        self._spinner = Spinner(self.executor)

    def describe(self, on: bool) -> None:
        """Publish the URDF on ``/robot_description`` (latched), or take the publisher away."""
        if self._description is not None:
            self.publisher.destroy_publisher(self._description)
            self._description = None
        if on:
            self._description = self.publisher.create_publisher(  # destroyed mid-spin:
                String, '/robot_description', _LATCHED,  # no event handler (see node_helpers)
                event_callbacks=PublisherEventCallbacks(use_default_callbacks=False))
            self._description.publish(String(data=URDF))

    def close(self) -> None:
        """Stop spinning; destroy the nodes in order (node_helpers.Harness.close says why)."""
        self._spinner.stop()
        for node in self.nodes:
            for waitable in list(node.waitables):
                waitable.destroy()
            node.destroy_node()
        rclpy.try_shutdown(context=self.context)
