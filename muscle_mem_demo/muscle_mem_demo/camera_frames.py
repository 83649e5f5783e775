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
The camera frames of a run's first seconds, kept by the demo's driver to show what the cache saw.

The cache keeps a camera's cells, not its frames; to show a person the scene that made a miss,
or the frame a watched motion tripped on beside the recorded one, the driver subscribes to
the same ``/camera/image_raw`` and keeps the frames of each run's first :data:`WINDOW`
seconds (at 10 Hz, 320 x 240 rgb8: 60 frames, 14 MB; dropped with the run's outcome).
:func:`frame_at` picks a frame by its stamp.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
import threading
from typing import Any

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import Image

__all__ = ['FrameLog', 'frame_at', 'WINDOW']

WINDOW = 6.0
"""Seconds of frames kept from the moment a run's task is sent."""
_MOST = 200
"""Frames kept at most per run, whatever the camera's rate."""


class FrameLog:
    """
    Keep the rgb8 frames a camera sends during the first :data:`WINDOW` s of each run.

    :param node: Subscribes on it.
    :param topic: The camera's image topic.
    """

    def __init__(self, node: Node, topic: str, *, callback_group: Any = None) -> None:
        self._lock = threading.Lock()
        self._since = math.inf
        self._frames: list[tuple[float, np.ndarray]] = []
        node.create_subscription(Image, topic, self._on_frame, 5,
                                 callback_group=callback_group)

    def start(self, stamp: float) -> None:
        """Forget the last run's frames; keep those stamped from ``stamp`` (ROS time, s) on."""
        with self._lock:
            self._frames = []
            self._since = stamp

    def take(self) -> list[tuple[float, np.ndarray]]:
        """Return the frames kept since :meth:`start`, (stamp, (height, width, 3) uint8)."""
        with self._lock:
            frames, self._frames, self._since = self._frames, [], math.inf
        return frames

    def _on_frame(self, msg: Image) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        with self._lock:
            keep = self._since <= stamp <= self._since + WINDOW and len(self._frames) < _MOST
        if not keep or msg.encoding != 'rgb8':
            return
        rows = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)
        pixels = rows[:, :msg.width * 3].reshape(msg.height, msg.width, 3).copy()
        with self._lock:
            self._frames.append((stamp, pixels))


def frame_at(frames: Sequence[tuple[float, np.ndarray]], stamp: float) -> np.ndarray | None:
    """Return the newest frame stamped at or before ``stamp``, else the first; None if none."""
    before = [pixels for at, pixels in frames if at <= stamp]
    if before:
        return before[-1]
    return frames[0][1] if frames else None
