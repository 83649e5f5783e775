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
A TF sensor's settings: ``sensors.<name>.frame`` and ``.relative_to``.

A sensor with a ``frame`` reads no topic of its own: it is the transform from ``relative_to``
to ``frame`` (tf2's ``lookup_transform(relative_to, frame)``: the frame's pose in
``relative_to``), looked up in the cache's transform buffer, which ``/tf`` and ``/tf_static``
fill (:mod:`~muscle_mem_ros.ros.capture.framesensors`). Its reading is a pose (seven numbers,
:mod:`~muscle_mem_ros.checks.poses`) and its tolerance two: metres, then radians.

::

    sensors:
      cube:
        frame: cube             # what a tag detector or perception node publishes
        relative_to: world      # the frame the goals are given in
        tolerance: [0.005, 0.05]
        max_age: 0.5            # the chain's stalest moving link may be this old
"""

from __future__ import annotations

import math

from muscle_mem_ros.checks.poses import POSE_SIZE
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.records import CompareMode
from muscle_mem_ros.ros.node.nodeconfig import SensorConfig
from muscle_mem_ros.settings import Kind, read_bind, read_mode, read_watch, SettingsReader

__all__ = ['frame_sensor', 'TF_TYPE']

TF_TYPE = 'tf2_msgs/msg/TFMessage'
"""The type of ``/tf`` and ``/tf_static``, as robot_state_publisher and tf2_ros send it."""

_NOT_WITH_FRAME = ('topic', 'type', 'fields', 'joints', 'encoding', 'width', 'height', 'cell',
                   'roi', 'masks')


def frame_sensor(reader: SettingsReader, name: str) -> SensorConfig:
    """
    Read ``sensors.<name>`` that names a ``frame`` (see the module docstring).

    :raises ConfigError: a missing or bad setting, naming it.
    """
    prefix = f'sensors.{name}'
    for key in _NOT_WITH_FRAME:
        if reader.given(f'{prefix}.{key}'):
            raise ConfigError(f'{prefix}.{key}: a TF sensor (it has a frame) reads /tf and '
                              f'/tf_static; leave {key} out')
    frame = _frame_name(reader.string(f'{prefix}.frame'), f'{prefix}.frame')
    reference = _frame_name(reader.string(f'{prefix}.relative_to', ''), f'{prefix}.relative_to')
    if frame == reference:
        raise ConfigError(f'{prefix}.relative_to: {reference!r} is the frame itself; name the '
                          'frame its pose is read in (world, map, base_link)')
    mode = read_mode(reader, prefix) if reader.given(f'{prefix}.mode') else CompareMode.POSE
    if mode is not CompareMode.POSE:
        raise ConfigError(f'{prefix}.mode: a TF sensor is compared as a pose, not {mode.value}')
    value = reader.raw(f'{prefix}.tolerance', None)
    if not isinstance(value, (list, tuple)) or len(value) != 2 or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
            or v < 0 for v in value):
        raise ConfigError(f'{prefix}.tolerance: required, two numbers >= 0: metres, then '
                          f'radians (e.g. [0.005, 0.05]), got {value!r}')
    tolerance = (float(value[0]), float(value[1]))
    reader.describe(f'{prefix}.tolerance', list(tolerance), Kind.DOUBLE_ARRAY, minimum=0.0)
    return SensorConfig(
        name=name, topic='/tf', type_name=TF_TYPE, msg_type=None, extractors=(),
        tolerance=tolerance, mode=CompareMode.POSE,
        max_age=reader.number(f'{prefix}.max_age', 1.0), bind=read_bind(reader, prefix),
        watch=read_watch(reader, prefix), frames=(reference, frame))


def _frame_name(value: str | None, setting: str) -> str:
    """Return a frame name as tf2 keeps it (no leading '/'), or ConfigError naming ``setting``."""
    name = (value or '').strip().lstrip('/')
    if not name:
        raise ConfigError(f'{setting}: required, a TF frame name')
    if any(c.isspace() for c in name):
        raise ConfigError(f'{setting}: {value!r} is not a frame name (it has spaces)')
    return name


assert POSE_SIZE == 7  # the vector SensorConfig.size says for a TF sensor
