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
A front camera on the mobile base (:mod:`mobile_base_helpers`): the corridor as it sees it.

A robot unlike the demo arm for the camera checks: a pinhole camera 0.3 m above the floor
on the base, looking along +x, 160x120 at ``rate`` Hz with fresh Gaussian noise in every
frame. It draws what the base's world holds, from where the base is now: the floor and
the far wall, the tag (a 0.2 m green square at camera height), and what a test puts in
the corridor: an ``obstacle`` (a 0.3 m brown box on the floor) or a ``person`` (0.4 m wide,
1.7 m tall, dark). Things are drawn far to near, each at its distance's scale.
"""

from __future__ import annotations

import threading
from typing import Any

from mobile_base_helpers import MobileBase
import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import Image

WIDTH, HEIGHT = 160, 120
FOCAL = 120.0
"""Pixels per unit of lateral offset over distance (a 67 degree horizontal view)."""
EYE = 0.3
"""The camera's height over the floor, metres."""
WALL_X = 3.5
"""Where the far wall stands."""


class FrontCamera(Node):
    """Publish the base's front view on ``topic`` (rgb8)."""

    def __init__(self, *, robot: MobileBase, context: Any, topic: str, name: str,
                 rate: float = 20.0, noise: float = 4.0, seed: int = 0) -> None:
        super().__init__(name, context=context)
        self._robot = robot
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self.noise = noise
        self.obstacle: tuple[float, float] | None = None
        self.person: tuple[float, float] | None = None
        self.published = 0
        self._pub = self.create_publisher(Image, topic, 5)
        self.create_timer(1.0 / rate, self._publish)
        yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
        self._xx, self._yy = xx, yy

    def _box(self, image: np.ndarray, base: tuple[float, float], at: tuple[float, float],
             width: float, bottom: float, top: float, colour: tuple[float, float, float]) -> None:
        distance = at[0] - base[0]
        if distance < 0.15:
            return  # behind the camera, or too near to see whole
        column = WIDTH / 2 - FOCAL * (at[1] - base[1]) / distance
        half = FOCAL * width / 2 / distance
        upper = HEIGHT / 2 - FOCAL * (top - EYE) / distance
        lower = HEIGHT / 2 - FOCAL * (bottom - EYE) / distance
        inside = (abs(self._xx - column) < half) & (self._yy >= upper) & (self._yy < lower)
        image[inside] = colour

    def _draw(self) -> np.ndarray:
        base = self._robot.where()
        tag = tuple(self._robot.tag)
        image = np.empty((HEIGHT, WIDTH, 3))
        horizon = HEIGHT / 2 + FOCAL * EYE / max(WALL_X - base[0], 0.5)
        image[:] = (0.75, 0.72, 0.62)  # the wall
        image[self._yy >= horizon] = (0.35, 0.35, 0.38)  # the floor
        things = [(tag, 0.2, EYE - 0.1, EYE + 0.1, (0.15, 0.65, 0.2))]
        obstacle, person = self.obstacle, self.person  # once: a test sets them meanwhile
        if obstacle is not None:
            things.append((obstacle, 0.3, 0.0, 0.3, (0.45, 0.3, 0.15)))
        if person is not None:
            things.append((person, 0.4, 0.0, 1.7, (0.12, 0.12, 0.3)))
        for at, width, bottom, top, colour in sorted(things, key=lambda t: -t[0][0]):
            self._box(image, base, at, width, bottom, top, colour)
        image = image * 255.0 + self._rng.normal(0.0, self.noise, image.shape)
        return np.clip(np.rint(image), 0, 255).astype(np.uint8)

    def _publish(self) -> None:
        with self._lock:
            pixels = self._draw()
            self.published += 1
        msg = Image(height=HEIGHT, width=WIDTH, encoding='rgb8', is_bigendian=0,
                    step=WIDTH * 3, data=pixels.tobytes())
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = 'front_camera'
        self._pub.publish(msg)
