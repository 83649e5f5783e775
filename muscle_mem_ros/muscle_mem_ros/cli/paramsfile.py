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
Read the sensors' tolerances and compare modes from a node's params file.

The CLI needs them to put tolerances into exported snapshots and to measure
deviations the way the node compares them. Only plain YAML is read (no ROS):
the node's ``ros__parameters`` map, with sensors nested (``sensors: {joints:
{tolerance: ...}}``) or written flat (``sensors.joints.tolerance: ...``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..bindings import Declared
from ..errors import ConfigError
from ..records import CompareMode, SensorSpec

__all__ = ['BindingSettings', 'SensorSetting', 'read_binding_settings', 'read_sensor_settings']


@dataclass(frozen=True)
class SensorSetting:
    """
    How one sensor is checked, as a params file says.

    :ivar tolerance: One value, or one per element.
    :ivar mode: Compare mode.
    """

    tolerance: tuple[float, ...]
    mode: CompareMode = CompareMode.ABS


def _flatten(prefix: str, value: Any, into: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(f'{prefix}.{key}' if prefix else str(key), item, into)
    else:
        into[prefix] = value


def _section(path: str | Path, node_name: str) -> dict[str, Any]:
    """Return the node's parameters from a params file, flattened to dotted names."""
    try:
        data = yaml.safe_load(Path(path).expanduser().read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f'--params {path}: cannot read: {err}') from err
    if not isinstance(data, dict):
        raise ConfigError(f'--params {path}: not a params file (no top-level map)')
    section = None
    for key in (node_name, f'/{node_name}', '/**'):
        if isinstance(data.get(key), dict) and 'ros__parameters' in data[key]:
            section = data[key]['ros__parameters']
            break
    if not isinstance(section, dict):
        raise ConfigError(f'--params {path}: no {node_name}: ros__parameters: section')
    flat: dict[str, Any] = {}
    _flatten('', section, flat)
    return flat


def read_sensor_settings(
    path: str | Path, node_name: str = 'muscle_mem',
) -> dict[str, SensorSetting]:
    """
    Return each configured sensor's tolerance and mode from a params file.

    :param path: The params file.
    :param node_name: Top key of the node's section (``/**`` is used when it is absent).
    :return: Sensor name -> setting (sensors without a tolerance are left out).
    :raises ConfigError: the file cannot be read or has no such node section; the message
        names the file.
    """
    flat = _section(path, node_name)
    settings = {}
    names = {k.split('.')[1] for k in flat if k.startswith('sensors.') and k.count('.') >= 2}
    for name in sorted(names):
        tolerance = flat.get(f'sensors.{name}.tolerance')
        if tolerance is None:
            continue
        values = tolerance if isinstance(tolerance, list) else [tolerance]
        try:
            mode = CompareMode(str(flat.get(f'sensors.{name}.mode', 'abs')).strip().lower())
            settings[name] = SensorSetting(tuple(float(v) for v in values), mode)
        except (TypeError, ValueError) as err:
            raise ConfigError(f'--params {path}: sensors.{name}: {err}') from err
    return settings


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
    max_shift: float = 0.1
    sensors: tuple[SensorSpec, ...] = ()


def read_binding_settings(path: str | Path, node_name: str = 'muscle_mem') -> BindingSettings:
    """
    Return the bindings settings of a params file (declared bindings, inference, tolerances).

    :param path: The params file.
    :param node_name: Top key of the node's section.
    :return: The settings.
    :raises ConfigError: the file cannot be read, or a binding names no configured tool.
    """
    flat = _section(path, node_name)
    servers = {}
    for key, value in flat.items():
        parts = key.split('.')
        if len(parts) == 3 and parts[0] in ('actions', 'services') and parts[2] == 'server':
            servers[parts[1]] = str(value)
    declared = []
    names = sorted({k.split('.')[1] for k in flat if k.startswith('bindings.')
                    and k.count('.') >= 2})
    for name in names:
        tool = str(flat.get(f'bindings.{name}.tool', ''))
        if tool not in servers and tool not in servers.values():
            raise ConfigError(f'--params {path}: bindings.{name}.tool: {tool!r} is not a '
                              'configured action or service')
        declared.append(Declared(tool=servers.get(tool, tool),
                                 field=str(flat.get(f'bindings.{name}.field', '')),
                                 source=str(flat.get(f'bindings.{name}.source', '')),
                                 max_shift=float(flat.get(f'bindings.{name}.max_shift', 0.1))))
    sensors = tuple(SensorSpec(name=n, tolerance=s.tolerance, mode=s.mode)
                    for n, s in read_sensor_settings(path, node_name).items())
    return BindingSettings(declared=tuple(declared),
                           infer=bool(flat.get('infer_bindings', True)),
                           max_shift=float(flat.get('binding_max_shift', 0.1)),
                           sensors=sensors)
