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
The first task right after the node starts: sensors that have not spoken yet are waited for.

The cache's sensors here are published by :class:`LateSensors` (constant joints
and object pose, on topics of their own), which the test starts and stops: a
restarted cache gets its task at once, and the sensor publishers come up only
a while later, as they do when a launch file starts everything together.
"""

from __future__ import annotations

import time

from geometry_msgs.msg import PoseStamped
from node_helpers import Harness, HOME, JOINT_NAMES, OBJECT_HOME, wait_until
import pytest
from rclpy.node import Node
from sensor_msgs.msg import JointState

POST_CHECK_TIMEOUT = 1.0


class LateSensors:
    """Joint and object publishers (50 Hz, constant values) that can come and go."""

    def __init__(self, h: Harness) -> None:
        self._h = h
        self._node: Node | None = None

    @property
    def joints(self) -> str:
        return f'/{self._h.names.prefix}/late/joint_states'

    @property
    def pose(self) -> str:
        return f'/{self._h.names.prefix}/late/object_pose'

    def start(self) -> None:
        node = Node(f'{self._h.names.prefix}_late_sensors', context=self._h.context)
        joints = node.create_publisher(JointState, self.joints, 10)
        pose = node.create_publisher(PoseStamped, self.pose, 10)

        def publish() -> None:
            stamp = node.get_clock().now().to_msg()
            js = JointState(name=JOINT_NAMES, position=list(HOME))
            js.header.stamp = stamp
            joints.publish(js)
            msg = PoseStamped()
            msg.header.stamp = stamp
            msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = OBJECT_HOME
            msg.pose.orientation.w = 1.0
            pose.publish(msg)

        node.create_timer(0.02, publish)
        self._h.executor.add_node(node)
        self._node = node

    def stop(self) -> None:
        if self._node is not None:
            self._h.executor.remove_node(self._node)
            self._node.destroy_node()
            self._node = None


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp=tmp_path)
    sensors = LateSensors(h)
    yield h, sensors
    sensors.stop()
    h.close()


def test_first_task_after_start_waits_for_sensors_that_have_not_spoken(harness):
    h, sensors = harness
    overrides = {'sensors.joints.topic': sensors.joints, 'sensors.object.topic': sensors.pose,
                 'sensor_startup_timeout': 60.0, 'post_check_timeout': POST_CHECK_TIMEOUT}
    sensors.start()
    h.start_cache(**overrides)
    learned = h.run_task('early')
    assert learned.result.success and not learned.result.cache_hit, learned.result.message
    assert h.stop_cache() == 0
    sensors.stop()
    h.robot.reset()
    calls = len(h.agent.calls)
    h.start_cache(**overrides)
    feedback: list = []
    handle = h.send_task('early', feedback=feedback)
    assert handle.accepted
    # The scenario, not a synchronization: the publishers come up later than the cache
    # waits for data newer than a request (post_check_timeout), well within the startup bound.
    time.sleep(POST_CHECK_TIMEOUT + 1.0)
    sensors.start()
    wrapped = h.wait(handle.get_result_async(), 60.0)
    assert wrapped.result.success and wrapped.result.cache_hit, wrapped.result.message
    assert len(h.agent.calls) == calls
    # Feedback is not ordered with the result: wait for it.
    assert wait_until(lambda: any(fb.detail.startswith('waiting') for fb in feedback), 10.0)
    waiting = [fb.detail for fb in feedback if fb.detail.startswith('waiting for sensors')]
    assert waiting == ['waiting for sensors: joints, object'], [fb.detail for fb in feedback]
