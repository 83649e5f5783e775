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
A camera over the harness's table: frames drawn from the fake robot's world, with noise.

Not a mock of anything the node reads: a real publisher of real ``sensor_msgs`` frames at
a real rate. The scene is a textured grey table seen from above (1 m of table over 400
pixels, the view centred on the object's home) and the object as a 6 cm red square where
the robot says it is; every frame gets fresh Gaussian noise. ``brightness`` scales the whole
frame (the room's light), ``size`` changes the resolution (a camera reconfigured), and
``corrupt_every`` sends only every n-th CompressedImage frame whole, the others cut short
(corrupt JPEGs), and
``intruder`` puts a dark box in view (a hand, a box dropped on the table).
"""

from __future__ import annotations

import io
import threading
from typing import Any

from node_helpers import FakeRobot, Harness, OBJECT_HOME, wait_until
import numpy as np
from PIL import Image as PilImage
from rclpy.node import Node
from sensor_msgs.msg import CompressedImage, Image

PIXELS_PER_METRE = 400.0


class SyntheticCamera(Node):
    """Publish frames of ``robot``'s table on ``topic`` at ``rate`` Hz (rgb8, or JPEG)."""

    def __init__(self, *, robot: FakeRobot, context: Any, topic: str, name: str,
                 rate: float = 20.0, width: int = 320, height: int = 240, noise: float = 4.0,
                 compressed: bool = False, seed: int = 0) -> None:
        super().__init__(name, context=context)
        self._robot = robot
        self._compressed = compressed
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self.size = (width, height)
        self.noise = noise
        self.brightness = 1.0
        self.corrupt_every = 0
        self.intruder: tuple[int, int] | None = None
        """Centre (column, row) of a dark box in view that the robot's world lacks."""
        self.published = 0
        kind = CompressedImage if compressed else Image
        self._pub = self.create_publisher(kind, topic, 5)
        self.create_timer(1.0 / rate, self._publish)

    def _draw(self) -> np.ndarray:
        width, height = self.size
        yy, xx = np.mgrid[0:height, 0:width]
        table = 0.45 + 0.06 * np.sin(xx / 17.0) * np.cos(yy / 29.0)
        image = np.stack([table * 0.9, table * 0.8, table * 0.7], axis=2)
        x, y = self._robot.object[0], self._robot.object[1]
        scale = PIXELS_PER_METRE * width / 320.0
        column = width / 2 + (y - OBJECT_HOME[1]) * scale
        row = height / 2 + (x - OBJECT_HOME[0]) * scale
        half = 0.03 * scale
        inside = (abs(xx - column) < half) & (abs(yy - row) < half)
        image[inside] = (0.85, 0.12, 0.1)
        intruder = self.intruder  # read once: a test sets it while the timer draws
        if intruder is not None:
            box = (abs(xx - intruder[0]) < 24) & (abs(yy - intruder[1]) < 24)
            image[box] = (0.1, 0.1, 0.12)
        image = image * self.brightness * 255.0 + self._rng.normal(0.0, self.noise, image.shape)
        return np.clip(np.rint(image), 0, 255).astype(np.uint8)

    def _publish(self) -> None:
        with self._lock:
            pixels = self._draw()
            self.published += 1
            corrupt = bool(self.corrupt_every) and self.published % self.corrupt_every != 0
        stamp = self.get_clock().now().to_msg()
        if self._compressed:
            out = io.BytesIO()
            PilImage.fromarray(pixels).save(out, format='JPEG', quality=90)
            data = out.getvalue()
            msg: Any = CompressedImage(format='jpeg', data=data[:len(data) // 3] if corrupt
                                       else data)
        else:
            height, width = pixels.shape[:2]
            msg = Image(height=height, width=width, encoding='rgb8', is_bigendian=0,
                        step=width * 3, data=pixels.tobytes())
        msg.header.stamp = stamp
        msg.header.frame_id = 'camera'
        self._pub.publish(msg)

    def resize(self, width: int, height: int) -> None:
        """Send frames of another size from now on."""
        with self._lock:
            self.size = (width, height)


RAW = {'type': 'sensor_msgs/msg/Image', 'encoding': 'rgb8', 'width': 320, 'height': 240,
       'cell': 16, 'tolerance': 0.1, 'max_age': 0.5}
"""The raw camera's sensor settings (its topic added by :func:`camera_harness`)."""
JPEG = {'type': 'sensor_msgs/msg/CompressedImage', 'width': 320, 'height': 240,
        'cell': 16, 'tolerance': 0.1, 'max_age': 0.5}
"""The JPEG camera's."""


def camera_harness(tmp: Any) -> Harness:
    """
    Return the arm harness with two cameras over its table and no object sensor, cache up.

    ``h.cameras`` holds them by sensor name: ``camera`` (rgb8) and ``jpeg`` (JPEG).
    """
    h = Harness(tmp=tmp)
    topics = {'camera': f'/{h.names.prefix}/camera/image_raw',
              'jpeg': f'/{h.names.prefix}/camera/image_raw/compressed'}
    cameras = {}
    for name, topic in topics.items():
        camera = SyntheticCamera(robot=h.robot, context=h.context, topic=topic,
                                 name=f'{h.names.prefix}_{name}', compressed=name == 'jpeg',
                                 seed=len(cameras))
        h.executor.add_node(camera)
        h.extra_nodes.append(camera)
        cameras[name] = camera
    h.cameras = cameras  # type: ignore[attr-defined]
    h.start_cache(**{'sensors.object': None,
                     'sensors.camera': dict(RAW, topic=topics['camera']),
                     'sensors.jpeg': dict(JPEG, topic=topics['jpeg'])})
    return h


def fresh(h: Harness) -> None:
    """Return once each camera published a few frames of the world as it is now."""
    counts = {n: c.published for n, c in h.cameras.items()}
    assert wait_until(lambda: all(c.published >= counts[n] + 3
                                  for n, c in h.cameras.items()), 10.0), (
        counts, {n: c.published for n, c in h.cameras.items()}, h.spin_error)
