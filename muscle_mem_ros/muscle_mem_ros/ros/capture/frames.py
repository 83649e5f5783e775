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
A camera topic read as a sensor: each frame decoded and reduced to its grid of cell means.

An image sensor (``type: sensor_msgs/msg/Image`` or ``sensor_msgs/msg/CompressedImage``)
has one "field": the frame. :class:`FrameReader` is that field's extractor, so the node's
capture, the watch's samples and learning from a bag read a camera exactly as they read
any other sensor (:mod:`..node.imageconfig` builds it from the params file). A frame is
checked against what the sensor was configured for before it is reduced: another
encoding or another size raises :class:`~muscle_mem_ros.errors.ImageMismatch` (the
sensor is then unusable, and checks say why); a frame that does not decode (a corrupt
JPEG, a cut-off buffer) raises :class:`~muscle_mem_ros.errors.ImageError`, which the
capture counts and drops, keeping the last good frame (:mod:`.sensors`).
"""

from __future__ import annotations

from typing import Any

from muscle_mem_ros.checks.images import decode_compressed, decode_raw, Frame, Grid
from muscle_mem_ros.errors import ImageMismatch

__all__ = ['COMPRESSED', 'FrameReader', 'RAW']

RAW = 'sensor_msgs/msg/Image'
COMPRESSED = 'sensor_msgs/msg/CompressedImage'


class FrameReader:
    """
    Read one camera message into its grid vector.

    :param sensor: The sensor's name (for reasons).
    :param encoding: What the frames must be: an Image encoding (``rgb8``, ``16UC1``, ...);
        for a CompressedImage ``rgb8`` (colour) or ``mono8`` (grey), what it decodes to.
    :param compressed: The topic carries CompressedImage.
    :param grid: The region of interest, masks and cell size, for the configured size.
    """

    def __init__(self, *, sensor: str, encoding: str, compressed: bool, grid: Grid) -> None:
        self.sensor = sensor
        self.encoding = encoding
        self.compressed = compressed
        self.grid = grid

    def frame(self, msg: Any) -> Frame:
        """
        Return the message's frame.

        :raises ImageMismatch: another encoding than the configured one.
        :raises ImageError: a frame that does not decode.
        """
        if self.compressed:
            frame = decode_compressed(data=bytes(msg.data), format=str(msg.format))
            grey = frame.pixels.ndim == 3 and frame.pixels.shape[2] == 1
            if grey != (self.encoding == 'mono8'):
                raise ImageMismatch(
                    f'sensors.{self.sensor}: the camera sends {"grey" if grey else "colour"} '
                    f'{frame.encoding} frames, the sensor is configured for {self.encoding}')
            return frame
        if msg.encoding != self.encoding:
            raise ImageMismatch(f'sensors.{self.sensor}: the camera sends {msg.encoding} frames, '
                                f'the sensor is configured for {self.encoding}')
        return decode_raw(data=bytes(msg.data), width=int(msg.width), height=int(msg.height),
                          step=int(msg.step), encoding=str(msg.encoding),
                          is_bigendian=bool(msg.is_bigendian))

    def __call__(self, msg: Any) -> list[float]:
        """Return the message's grid vector (NaN for masked cells and cells without depth)."""
        frame = self.frame(msg)
        try:
            return list(self.grid.vector(frame).tolist())
        except ImageMismatch as err:
            raise ImageMismatch(f'sensors.{self.sensor}: {err}') from err
