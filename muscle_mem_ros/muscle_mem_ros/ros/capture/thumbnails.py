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
What a camera saw, for people: a small PNG of the frame a recorded snapshot was taken from.

A recorded pre or post snapshot carries one thumbnail per camera sensor
(``Snapshot.images``, longest side :data:`SIDE` px), made from the very message its
features came from (:meth:`.sensors.SensorHub.capture` with ``thumbnails=True``). Only the
snapshots a recording keeps make them: a check, a match or a watch sample never does, so
the cost (one more decode of the frame and a PNG of some 96x72 pixels) is paid twice a
recorded step, not at every judgement. A check that fails on a camera has the frame it
judged made into one too, off the walk's path (:mod:`..execution.failedviews`).
"""

from __future__ import annotations

from muscle_mem_ros.checks.images import thumbnail_png
from muscle_mem_ros.ros.capture.frames import FrameReader
from muscle_mem_ros.ros.node.nodeconfig import SensorConfig
from rclpy.serialization import deserialize_message

__all__ = ['SIDE', 'thumbnail_of']

SIDE = 96
"""Longest side of a stored thumbnail, pixels."""


def thumbnail_of(config: SensorConfig, raw: bytes) -> bytes | None:
    """
    Return the thumbnail of a camera sensor's raw message, or None.

    None for a sensor that is not a camera, and for a frame that does not decode (its
    features did not come from it either: the capture says why, not this).
    """
    if config.image is None or not config.extractors:
        return None
    reader = config.extractors[0].extract
    if not isinstance(reader, FrameReader):
        return None
    try:
        return thumbnail_png(reader.frame(deserialize_message(raw, config.msg_type)), side=SIDE)
    except Exception:  # noqa: BLE001 - a picture for people must never fail a recording
        return None
