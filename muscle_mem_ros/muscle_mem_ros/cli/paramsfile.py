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
Read the sensors' tolerances and compare modes, and the bindings, from a node's params file.

The CLI needs them to put tolerances into exported snapshots, to measure deviations the way
the node compares them and to show what the node's bindings would be. Only plain YAML is
read (no ROS), through the settings schema the node validates its parameters with
(:mod:`muscle_mem_ros.settings`): a value the node refuses is refused here with the same
message, prefixed with the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..bindings.rules import Declared, DEFAULT_MAX_SHIFT
from ..checks.imagenoise import channels_of, default_cell
from ..checks.images import Grid, Region
from ..errors import ConfigError
from ..records import CompareMode, ImageLayout, SensorSpec
from ..settings import (
    FlatSettings, read_bind, read_binding, read_binding_options, read_mode, read_tolerance,
)

__all__ = ['BindingSettings', 'SensorSetting', 'read_binding_settings', 'read_sensor_settings']


@dataclass(frozen=True)
class SensorSetting:
    """
    How one sensor is checked, as a params file says.

    :ivar tolerance: One value, or one per element.
    :ivar mode: Compare mode.
    :ivar bind: ``sensors.<n>.bind`` (None: by size).
    :ivar image: A camera's grid (its channels and size), None for other sensors.
    """

    tolerance: tuple[float, ...]
    mode: CompareMode = CompareMode.ABS
    bind: str | None = None
    image: ImageLayout | None = None


IMAGE_TYPES = {'sensor_msgs/msg/Image': False, 'sensor_msgs/msg/CompressedImage': True}
"""Camera sensor types, and whether they are compressed (their default encoding rgb8)."""
IMAGE_TOLERANCES = (0.1, 0.02)
"""A camera's default tolerance: intensity, depth metres (``ros.node.imageconfig``)."""


def _image(flat: FlatSettings, prefix: str, compressed: bool) -> tuple[ImageLayout, float]:
    """Return a camera's grid layout as the node builds it, and its default tolerance."""
    values = flat.values
    encoding = str(values.get(f'{prefix}.encoding', 'rgb8' if compressed else ''))
    try:
        channels = channels_of(encoding, compressed=compressed)
        width, height = int(values[f'{prefix}.width']), int(values[f'{prefix}.height'])
        cell = int(values.get(f'{prefix}.cell', default_cell(width, height)))
        roi = values.get(f'{prefix}.roi')
        grid = Grid(width, height, cell, Region(*[int(v) for v in roi]) if roi else None)
    except KeyError as err:
        raise ConfigError(f'{prefix}.width and .height: required for an image sensor') from err
    except (TypeError, ValueError) as err:
        raise ConfigError(f'{prefix}: {err}') from err
    return grid.layout(channels), IMAGE_TOLERANCES[channels == 0]


def _sensor_settings(flat: FlatSettings, path: str | Path) -> dict[str, SensorSetting]:
    settings = {}
    for name in flat.names('sensors'):
        prefix = f'sensors.{name}'
        kind = str(flat.values.get(f'{prefix}.type', ''))
        if not flat.given(f'{prefix}.tolerance') and kind not in IMAGE_TYPES:
            continue
        try:
            if kind in IMAGE_TYPES:  # a camera: mode image, one tolerance, its grid
                layout, default = _image(flat, prefix, IMAGE_TYPES[kind])
                mode = read_mode(flat, prefix) if flat.given(f'{prefix}.mode') else \
                    CompareMode.IMAGE
                tolerance = read_tolerance(flat, prefix, mode, None) if flat.given(
                    f'{prefix}.tolerance') else (default,)
                settings[name] = SensorSetting(tolerance, mode, 'never', layout)
                continue
            if flat.given(f'{prefix}.frame'):  # a TF sensor: a pose, (metres, radians)
                tolerance = read_tolerance(flat, prefix, CompareMode.POSE, None)
                if len(tolerance) != 2:
                    raise ConfigError(f'{prefix}.tolerance: a TF sensor takes two: metres, '
                                      f'then radians; got {list(tolerance)}')
                settings[name] = SensorSetting(tolerance, CompareMode.POSE,
                                               read_bind(flat, prefix))
                continue
            mode = read_mode(flat, prefix)
            settings[name] = SensorSetting(read_tolerance(flat, prefix, mode, None), mode,
                                           read_bind(flat, prefix))
        except ConfigError as err:
            raise ConfigError(f'--params {path}: {err}') from err
    return settings


def read_sensor_settings(
    path: str | Path, node_name: str = 'muscle_mem',
) -> dict[str, SensorSetting]:
    """
    Return each configured sensor's tolerance and mode from a params file.

    :param path: The params file.
    :param node_name: Top key of the node's section (``/**`` is used when it is absent).
    :return: Sensor name -> setting (sensors without a tolerance are left out).
    :raises ConfigError: the file cannot be read, has no such node section, or a value the
        node would refuse; the message names the file and the parameter.
    """
    return _sensor_settings(FlatSettings.from_file(path, node_name), path)


@dataclass(frozen=True)
class BindingSettings:
    """
    What a params file says about bindings, as the node reads it.

    :ivar declared: The declared bindings (tool names resolved to their servers).
    :ivar infer: ``infer_bindings``.
    :ivar max_shift: ``binding_max_shift``.
    :ivar sensors: The sensors' tolerances (inferring sensor bindings needs them).
    """

    declared: tuple[Declared, ...] = ()
    infer: bool = True
    max_shift: float = DEFAULT_MAX_SHIFT
    sensors: tuple[SensorSpec, ...] = ()


def read_binding_settings(path: str | Path, node_name: str = 'muscle_mem') -> BindingSettings:
    """
    Return the bindings settings of a params file (declared bindings, inference, tolerances).

    :param path: The params file.
    :param node_name: Top key of the node's section.
    :return: The settings.
    :raises ConfigError: the file cannot be read, or a binding the node would refuse (an
        unknown tool or sensor, a malformed field or source, a bad ``max_shift``).
    """
    flat = FlatSettings.from_file(path, node_name)
    tools = [(name, str(flat.values.get(f'{group}.{name}.server', '')))
             for group in ('actions', 'services') for name in flat.names(group)]
    sensors = _sensor_settings(flat, path)
    try:
        poses = [n for n in flat.names('sensors') if flat.given(f'sensors.{n}.frame')]
        declared = tuple(read_binding(flat, name, tools, flat.names('sensors'), poses=poses)
                         for name in flat.names('bindings'))
        options = read_binding_options(flat)
    except ConfigError as err:
        raise ConfigError(f'--params {path}: {err}') from err
    return BindingSettings(
        declared=declared, infer=options.infer, max_shift=options.max_shift,
        sensors=tuple(SensorSpec(name=n, tolerance=s.tolerance, mode=s.mode, bind=s.bind,
                                 image=s.image) for n, s in sensors.items()))
