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

from ..errors import ConfigError
from ..records import CompareMode

__all__ = ['SensorSetting', 'read_sensor_settings']


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
