#!/usr/bin/env python3
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
A camera for bench/eyes: rgb8 frames of a table and a cube at a steady rate, with real noise.

The frames are made once (16 of them, each with fresh noise of 5 grey levels) and sent in
turn, stamped when sent, on sensor-data QoS, so the publisher's own cost stays small beside
the cache it is there to load. Usage: _camera.py TOPIC WIDTH HEIGHT RATE
"""

from __future__ import annotations

import sys

import numpy as np
import rclpy
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image

FRAMES = 16
NOISE = 5.0


def frames(width: int, height: int) -> list[bytes]:
    """Return the frames' pixels: a brown table, a red cube a tenth of the view wide."""
    rng = np.random.default_rng(7)
    table = np.empty((height, width, 3))
    table[:] = (150.0, 110.0, 80.0)
    table *= np.linspace(0.9, 1.1, width)[np.newaxis, :, np.newaxis]
    side = width // 10
    top, left = height // 2 - side // 2, width // 3
    table[top:top + side, left:left + side] = (200.0, 30.0, 30.0)
    return [np.clip(np.rint(table + rng.normal(0.0, NOISE, table.shape)), 0, 255)
            .astype(np.uint8).tobytes() for _ in range(FRAMES)]


def main() -> None:
    topic, width, height, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(
        sys.argv[4])
    rclpy.init()
    node = rclpy.create_node('bench_camera')
    publisher = node.create_publisher(Image, topic, qos_profile_sensor_data)
    messages = []
    for data in frames(width, height):
        msg = Image(height=height, width=width, encoding='rgb8', step=width * 3)
        msg.header.frame_id = 'bench_camera'
        msg.data = data
        messages.append(msg)
    sent = [0]

    def tick() -> None:
        msg = messages[sent[0] % FRAMES]
        msg.header.stamp = node.get_clock().now().to_msg()
        publisher.publish(msg)
        sent[0] += 1

    node.create_timer(1.0 / rate, tick)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass


if __name__ == '__main__':
    main()
