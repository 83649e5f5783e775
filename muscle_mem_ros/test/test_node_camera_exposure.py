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
A camera frame is stamped when it was exposed, not when it arrived (issue 44).

Real DDS: a real node configured from parameters, its SensorHub, and a real publisher of
``sensor_msgs/Image`` frames whose header stamps say they were exposed a while before they
were sent (a camera's latency). Data "newer than a step's end" must have been exposed after
it: a frame that arrives after the end but was exposed before shows the world before it.
"""

from __future__ import annotations

import time
import uuid

from muscle_mem_ros.ros.capture.exposure import exposed_at, exposure, MAX_LATENCY
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.node.config import load_config, NODE_OPTIONS
import pytest
import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from rclpy.serialization import serialize_message
from rclpy.time import Time
from sensor_msgs.msg import CompressedImage, Image

LATENCY = 0.3
"""Seconds the test camera's frames are exposed before they are sent."""


def _frame(stamp_ns: int) -> Image:
    msg = Image(height=32, width=32, encoding='mono8', step=32, data=bytes(range(32)) * 32)
    msg.header.stamp = Time(nanoseconds=stamp_ns).to_msg()
    return msg


def test_the_stamp_is_read_from_the_frame_without_decoding_it():
    for kind in (_frame(1_700_000_000_250_000_000),
                 CompressedImage(format='jpeg', data=b'\xff\xd8')):
        kind.header.stamp.sec, kind.header.stamp.nanosec = 1_700_000_000, 250_000_000
        assert exposure(bytes(serialize_message(kind))) == pytest.approx(1_700_000_000.25)
    assert exposure(bytes(serialize_message(_frame(0)))) is None  # no stamp: the arrival
    assert exposure(b'\x01\x00') is None


def test_a_plausible_stamp_moves_the_frame_back_and_another_clock_does_not():
    raw = bytes(serialize_message(_frame(100 * 10**9)))
    assert exposed_at(raw, 50.0, 50.01, 100.2) == (pytest.approx(49.81), 100.0)
    assert exposed_at(raw, 50.0, 50.01, 99.0) == (50.0, None)  # stamped in the future
    assert exposed_at(raw, 50.0, 50.01, 100.0 + MAX_LATENCY + 1) == (50.0, None)  # too old


@pytest.fixture
def camera():
    context = rclpy.Context()
    rclpy.init(context=context)
    topic = f'/c{uuid.uuid4().hex[:8]}/image_raw'
    values = {'store_path': ':memory:', 'sensors.camera.topic': topic,
              'sensors.camera.type': 'sensor_msgs/msg/Image', 'sensors.camera.encoding': 'mono8',
              'sensors.camera.width': 32, 'sensors.camera.height': 32,
              'sensors.camera.cell': 8, 'sensors.camera.tolerance': 0.1,
              'sensors.camera.max_age': 30.0}
    node = Node(f'cache_{uuid.uuid4().hex[:8]}', context=context, **NODE_OPTIONS,
                parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])
    hub = SensorHub(node=node, sensors=load_config(node).sensors)
    sender = Node(f'cam_{uuid.uuid4().hex[:8]}', context=context)
    publisher = sender.create_publisher(Image, topic, qos_profile_sensor_data)

    def send() -> float:
        """Send a frame exposed LATENCY s ago; return when it was sent (monotonic)."""
        now = sender.get_clock().now().nanoseconds
        publisher.publish(_frame(now - int(LATENCY * 1e9)))
        return time.monotonic()

    try:
        yield hub, send
    finally:
        hub.close()
        node.destroy_node()
        sender.destroy_node()
        rclpy.try_shutdown(context=context)


def test_a_frame_counts_as_newer_than_a_moment_only_once_exposed_after_it(camera):
    hub, send = camera
    deadline = time.monotonic() + 10.0
    while hub.silent() and time.monotonic() < deadline:  # discovery
        send()
        time.sleep(0.05)
    assert not hub.silent()
    end = time.monotonic()  # a step ends
    sent = send()  # a frame arrives after it, exposed LATENCY s before it was sent
    assert not hub.wait_newer(end, 0.5), 'a frame exposed before the end counted as after it'
    stamp = hub.capture().stamps['camera']
    assert sent - LATENCY - 0.1 < stamp < sent - LATENCY + 0.1
    time.sleep(LATENCY + 0.05)
    send()  # exposed after the end
    assert hub.wait_newer(end, 5.0)
