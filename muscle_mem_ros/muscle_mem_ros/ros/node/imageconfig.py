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
An image sensor in the params file: what camera frames are, and how they are compared.

::

    sensors:
      camera:
        topic: /camera/image_raw
        type: sensor_msgs/msg/Image          # or sensor_msgs/msg/CompressedImage
        encoding: rgb8                       # Image: required; CompressedImage: rgb8 | mono8
        width: 640                           # the frames' size, pixels: required
        height: 480
        cell: 32                             # pixels per cell side (default: height / 15)
        roi: [0, 120, 640, 360]              # x, y, width, height (default: the whole view)
        masks: [0, 0, 96, 96, 500, 0, 140, 60]   # x, y, width, height of each, flat
        tolerance: 0.1                       # of full intensity; depth: metres
        max_age: 1.0

A frame becomes the mean of each cell (:mod:`muscle_mem_ros.checks.images`); the check
(``mode: image``, the only mode an image sensor takes) removes the scene's overall change
of brightness per channel, then fails when any cell is off by more than the tolerance,
saying which cell. The defaults hold a camera's noise far under the tolerance and catch an
object that moved by a fraction of a cell (docs/cameras.md says why). ROS parameters hold
no list of lists, so ``masks`` is one flat list, four numbers per mask. An image cell is
never a goal field: such a sensor is never a binding's source (``bind`` is ``never``).
"""

from __future__ import annotations

from typing import Any

from muscle_mem_ros.checks.images import COLOUR_ENCODINGS, DEPTH_ENCODINGS, Grid, Region
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.records import CompareMode
from muscle_mem_ros.ros.capture.frames import COMPRESSED, FrameReader, RAW
from muscle_mem_ros.ros.messages.introspection import FieldExtractor
from muscle_mem_ros.ros.node.nodeconfig import SensorConfig
from muscle_mem_ros.settings import Kind, read_mode, read_watch, SettingsReader

__all__ = ['DEFAULT_DEPTH_TOLERANCE', 'DEFAULT_TOLERANCE', 'image_sensor', 'IMAGE_TYPES']

IMAGE_TYPES = (RAW, COMPRESSED)
"""The message types read as camera frames."""
DEFAULT_TOLERANCE = 0.1
"""A cell's deviation (of full intensity) after the light's change is removed: 25 grey
levels, where a 16-pixel cell's mean moves by under one for a camera noise of 5."""
DEFAULT_DEPTH_TOLERANCE = 0.02
"""A depth cell's deviation, metres."""


def _region(prefix: str, name: str, values: Any, count: int | None) -> list[Region]:
    if not isinstance(values, (list, tuple)) or not values or \
            any(isinstance(v, bool) or not isinstance(v, int) for v in values) or \
            len(values) % 4 or (count is not None and len(values) != 4 * count):
        what = 'four integers: x, y, width, height' if count == 1 else \
            'integers, four per mask: x, y, width, height'
        raise ConfigError(f'{prefix}.{name}: {what}, got {values!r}')
    try:
        return [Region(*values[i:i + 4]) for i in range(0, len(values), 4)]
    except ValueError as err:
        raise ConfigError(f'{prefix}.{name}: {err}') from err


def _channels(prefix: str, encoding: str, compressed: bool) -> int:
    if compressed:
        if encoding not in ('rgb8', 'mono8'):
            raise ConfigError(f'{prefix}.encoding: {encoding!r}: a CompressedImage sensor is '
                              'rgb8 (colour) or mono8 (grey)')
        return 3 if encoding == 'rgb8' else 1
    if encoding in DEPTH_ENCODINGS:
        return 0
    if encoding in COLOUR_ENCODINGS:
        return len(COLOUR_ENCODINGS[encoding][2])
    known = ', '.join([*COLOUR_ENCODINGS, *DEPTH_ENCODINGS])
    raise ConfigError(f'{prefix}.encoding: {encoding!r} is not a camera encoding read here '
                      f'(known: {known})')


def image_sensor(reader: SettingsReader, name: str, *, topic: str, type_name: str,
                 msg_type: Any) -> SensorConfig:
    """
    Read ``sensors.<name>`` of an image type (see the module docstring).

    :raises ConfigError: a missing or bad setting, naming it.
    """
    prefix = f'sensors.{name}'
    compressed = type_name == COMPRESSED
    if reader.given(f'{prefix}.fields'):
        raise ConfigError(f'{prefix}.fields: an image sensor reads the whole frame; leave '
                          'fields out')
    encoding = reader.string(f'{prefix}.encoding', 'rgb8' if compressed else None)
    channels = _channels(prefix, encoding, compressed)
    width = reader.integer(f'{prefix}.width', 0, minimum=1) if reader.given(
        f'{prefix}.width') else None
    height = reader.integer(f'{prefix}.height', 0, minimum=1) if reader.given(
        f'{prefix}.height') else None
    if width is None or height is None:
        raise ConfigError(f'{prefix}.width and .height: required for an image sensor (the '
                          "frames' size in pixels; muscle-mem init writes them)")
    cell = reader.integer(f'{prefix}.cell', max(4, min(width, height) // 15), minimum=1)
    roi = reader.optional(f'{prefix}.roi')
    masks = reader.optional(f'{prefix}.masks')
    try:
        grid = Grid(width, height, cell,
                    _region(prefix, 'roi', roi, 1)[0] if roi is not None else None,
                    tuple(_region(prefix, 'masks', masks, None)) if masks is not None else ())
    except ValueError as err:
        raise ConfigError(f'{prefix}: {err}') from err
    mode = read_mode(reader, prefix) if reader.given(f'{prefix}.mode') else CompareMode.IMAGE
    if mode is not CompareMode.IMAGE:
        raise ConfigError(f'{prefix}.mode: an image sensor is compared as image, not '
                          f'{mode.value}')
    default = DEFAULT_DEPTH_TOLERANCE if channels == 0 else DEFAULT_TOLERANCE
    value = reader.raw(f'{prefix}.tolerance', default)
    values = value if isinstance(value, (list, tuple)) else [value]
    if len(values) != 1 or isinstance(values[0], bool) or \
            not isinstance(values[0], (int, float)) or not values[0] > 0:
        raise ConfigError(f'{prefix}.tolerance: one number > 0 (of full intensity; depth: '
                          f'metres), got {value!r}')
    reader.describe(f'{prefix}.tolerance', [float(values[0])], Kind.DOUBLE_ARRAY, minimum=0.0)
    layout = grid.layout(channels)
    frames = FrameReader(sensor=name, encoding=encoding, compressed=compressed, grid=grid)
    return SensorConfig(
        name=name, topic=topic, type_name=type_name, msg_type=msg_type,
        extractors=(FieldExtractor(path='<frame>', size=layout.size, extract=frames),),
        tolerance=(float(values[0]),), mode=CompareMode.IMAGE,
        max_age=reader.number(f'{prefix}.max_age', 1.0), bind='never',
        watch=read_watch(reader, prefix), image=layout)
