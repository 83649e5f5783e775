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
The settings schema: how a params file's values are validated, written once, ROS-free.

Two readers share it. The node reads its ROS parameters through
:class:`~muscle_mem_ros.ros.node.parameters.ParameterReader`, which adds declaring each
parameter with its descriptor; the ``muscle-mem`` command reads the same params file as
plain YAML through :class:`FlatSettings`. Both are a :class:`SettingsReader` (typed reads
that raise :class:`~muscle_mem_ros.errors.ConfigError` naming the parameter), and the
parts both need (a sensor's tolerance, a declared binding, the binding options) are
functions of a reader here, so the command accepts and refuses what the node does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
import enum
import math
from pathlib import Path
from typing import Any

import yaml

from .bindings.rules import Declared, DEFAULT_MAX_SHIFT, parse_path, Source, SourceKind
from .errors import ConfigError
from .records import CompareMode

__all__ = ['BindingOptions', 'FlatSettings', 'Kind', 'read_bind', 'read_binding',
           'read_binding_options', 'read_mode', 'read_tolerance', 'read_watch', 'SettingsReader']


class Kind(enum.Enum):
    """The type a setting is declared with (a ROS ``ParameterType`` in the node)."""

    ANY = 'any'
    """Its type varies (one number or a list); the caller validates it."""
    STRING = 'string'
    """A string."""
    DOUBLE = 'double'
    """A finite floating-point number."""
    INTEGER = 'integer'
    """An integer."""
    BOOL = 'bool'
    """True or false."""
    DOUBLE_ARRAY = 'double_array'
    """A list of numbers."""


class SettingsReader:
    """
    Typed, validated reads of settings by dotted name; every error names the setting.

    Subclasses supply the values (:meth:`_raw`) and may record what was read
    (:meth:`_describe`: the node declares a ROS parameter with its descriptor there).
    """

    def _raw(self, name: str, default: Any) -> Any:
        """Return the value of ``name``, or ``default`` when it was not given."""
        raise NotImplementedError

    def _describe(self, name: str, value: Any, kind: Kind, description: str,
                  read_only: bool | None, minimum: float | None = None,
                  maximum: float | None = None) -> None:
        """Record that ``name`` was read as ``value`` of ``kind`` (nothing by default)."""

    def given(self, name: str) -> bool:
        """Return True when the setting has a value of its own."""
        return self._raw(name, None) is not None

    def raw(self, name: str, default: Any) -> Any:
        """Return the value of ``name`` (``default`` when not given), validated by the caller."""
        return self._raw(name, default)

    def describe(self, name: str, value: Any, kind: Kind, *, description: str = '',
                 minimum: float | None = None, read_only: bool | None = None) -> None:
        """Record ``name`` with its validated ``value`` (see :meth:`raw`)."""
        self._describe(name, value, kind, description, read_only, minimum)

    def get(self, name: str, default: Any, *, description: str = '',
            read_only: bool | None = None) -> Any:
        """Return the value of ``name`` (``default`` when not given), of any type."""
        value = self._raw(name, default)
        self._describe(name, value, Kind.ANY, description, read_only)
        return default if value is None else value

    def optional(self, name: str, *, description: str = '',
                 read_only: bool | None = None) -> Any:
        """Return the value of ``name`` if it was given, else None."""
        if not self.given(name):
            return None
        return self.get(name, None, description=description, read_only=read_only)

    def string(self, name: str, default: str | None = None, *, description: str = '',
               read_only: bool | None = None, empty: bool = True) -> str:
        """
        Return a string setting.

        :param name: Setting name.
        :param default: Value when not given; None: required.
        :param description: For the node's descriptor.
        :param read_only: Overrides the reader's default.
        :param empty: False to refuse the empty string.
        :raises ConfigError: missing, not a string, or empty when refused.
        """
        value = self._raw(name, default)
        if value is None:
            raise ConfigError(f'{name}: required')
        if not isinstance(value, str):
            raise ConfigError(f'{name}: must be a string, got {value!r}')
        if not empty and not value:
            raise ConfigError(f'{name}: must be a non-empty string, got {value!r}')
        self._describe(name, value, Kind.STRING, description, read_only)
        return value

    def number(self, name: str, default: float, *, description: str = '',
               minimum: float | None = 0.0, exclusive: bool = True,
               maximum: float | None = None, read_only: bool | None = None) -> float:
        """
        Return a finite floating-point setting (an integer is accepted) within bounds.

        :param name: Setting name.
        :param default: Value when not given.
        :param description: For the node's descriptor.
        :param minimum: Smallest accepted value (None: no bound). Default: > 0.
        :param exclusive: True if ``minimum`` itself is refused.
        :param maximum: Largest accepted value (None: no bound).
        :param read_only: Overrides the reader's default.
        :raises ConfigError: not a finite number in range.
        """
        value = self._raw(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f'{name}: must be a number, got {value!r}')
        number = float(value)
        if not math.isfinite(number):
            raise ConfigError(f'{name}: must be a finite number, got {value!r}')
        if minimum is not None and (number < minimum or (exclusive and number == minimum)):
            bound = f'> {minimum:g}' if exclusive else f'>= {minimum:g}'
            raise ConfigError(f'{name}: must be a finite number {bound}, got {value!r}')
        if maximum is not None and number > maximum:
            raise ConfigError(f'{name}: must be <= {maximum:g}, got {value!r}')
        # the descriptor's range is inclusive (ROS FloatingPointRange): an exclusive minimum
        # is described by the smallest number above it, so the range refuses what this does
        lowest = math.nextafter(minimum, math.inf) if exclusive and minimum is not None \
            else minimum
        self._describe(name, number, Kind.DOUBLE, description, read_only, lowest, maximum)
        return number

    def integer(self, name: str, default: int, *, description: str = '',
                minimum: int | None = None, read_only: bool | None = None) -> int:
        """Return an integer setting; ConfigError naming it when not an integer in range."""
        value = self._raw(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f'{name}: must be an integer, got {value!r}')
        if minimum is not None and value < minimum:
            raise ConfigError(f'{name}: must be >= {minimum}, got {value!r}')
        self._describe(name, value, Kind.INTEGER, description, read_only)
        return value

    def boolean(self, name: str, default: bool, *, description: str = '',
                read_only: bool | None = None) -> bool:
        """Return a boolean setting; ConfigError naming it when not true or false."""
        value = self._raw(name, default)
        if not isinstance(value, bool):
            raise ConfigError(f'{name}: must be true or false, got {value!r}')
        self._describe(name, value, Kind.BOOL, description, read_only)
        return value


class FlatSettings(SettingsReader):
    """
    The node's section of a params file, read as plain YAML (no ROS).

    Nested maps and dotted names are both accepted (``sensors: {joints: {tolerance: ...}}``
    or ``sensors.joints.tolerance: ...``), as ROS reads them.

    :param values: Setting name (dotted) -> value.
    """

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)

    @classmethod
    def from_file(cls, path: str | Path, node_name: str = 'muscle_mem') -> FlatSettings:
        """
        Read the section of ``node_name`` (or ``/**``) from a params file.

        :param path: The params file.
        :param node_name: Top key of the node's section.
        :return: The settings.
        :raises ConfigError: the file cannot be read or has no such section; the message
            names the file.
        """
        try:
            data = yaml.safe_load(Path(path).expanduser().read_text())
        except (OSError, yaml.YAMLError) as err:
            raise ConfigError(f'--params {path}: cannot read: {err}') from err
        if not isinstance(data, dict):
            raise ConfigError(f'--params {path}: not a params file (no top-level map)')
        for key in (node_name, f'/{node_name}', '/**'):
            section = data.get(key)
            if isinstance(section, dict) and isinstance(section.get('ros__parameters'), dict):
                flat: dict[str, Any] = {}
                _flatten('', section['ros__parameters'], flat)
                return cls(flat)
        raise ConfigError(f'--params {path}: no {node_name}: ros__parameters: section')

    def _raw(self, name: str, default: Any) -> Any:
        value = self.values.get(name)
        return default if value is None else value

    def names(self, group: str) -> list[str]:
        """Return the entries of a group (``sensors`` -> the sensor names), sorted."""
        prefix = f'{group}.'
        return sorted({k[len(prefix):].split('.')[0] for k in self.values
                       if k.startswith(prefix) and k.count('.') >= 2})


def _flatten(prefix: str, value: Any, into: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(f'{prefix}.{key}' if prefix else str(key), item, into)
    else:
        into[prefix] = value


def read_tolerance(reader: SettingsReader, prefix: str, mode: CompareMode,
                   size: int | None) -> tuple[float, ...]:
    """
    Read ``<prefix>.tolerance``: one value, or one per element, each >= 0.

    :param reader: The settings.
    :param prefix: The sensor's prefix (``sensors.joints``).
    :param mode: The sensor's compare mode (``exact`` needs none; ``norm`` takes one).
    :param size: Elements the sensor's fields give, when known.
    :return: The tolerance values.
    :raises ConfigError: missing or malformed, naming the setting.
    """
    name = f'{prefix}.tolerance'
    value = reader.raw(name, [0.0] if mode is CompareMode.EXACT else None)
    if value is None:
        raise ConfigError(f'{name}: required (one value, or one per element)')
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        raise ConfigError(f'{name}: must be a number or a list of numbers, got {value!r}')
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise ConfigError(f'{name}: must be >= 0 and finite, got {value!r}')
    if mode is CompareMode.NORM and len(values) != 1:
        raise ConfigError(f'{name}: mode norm takes one tolerance, got {len(values)}')
    if len(values) != 1 and size is not None and len(values) != size:
        raise ConfigError(
            f'{name}: {len(values)} values, but the fields give {size} elements '
            '(use one value, or one per element)'
        )
    tolerance = tuple(float(v) for v in values)
    reader.describe(name, list(tolerance), Kind.DOUBLE_ARRAY, minimum=0.0)
    return tolerance


def read_bind(reader: SettingsReader, prefix: str) -> str | None:
    """
    Read a sensor's ``<prefix>.bind``: ``auto``, ``never``, or '' (the default by size).

    :return: ``'auto'``, ``'never'`` or None (see :func:`~.bindings.sensor_sources`).
    :raises ConfigError: any other value, naming the setting.
    """
    name = f'{prefix}.bind'
    value = reader.string(name, '').strip().lower()
    if value not in ('', 'auto', 'never'):
        raise ConfigError(f'{name}: {value!r} is not auto|never (or empty: by size)')
    return value or None


def read_watch(reader: SettingsReader, prefix: str) -> bool:
    """
    Read a sensor's ``<prefix>.watch``: ``auto`` (the default) or ``never``.

    :return: True for ``auto``: traced and watched during action steps when its vector has
        at most :data:`~muscle_mem_ros.checks.tube.MAX_WATCHED` elements.
    :raises ConfigError: any other value, naming the setting.
    """
    name = f'{prefix}.watch'
    value = reader.string(name, 'auto').strip().lower()
    if value not in ('auto', 'never'):
        raise ConfigError(f'{name}: {value!r} is not auto|never')
    return value == 'auto'


def read_mode(reader: SettingsReader, prefix: str) -> CompareMode:
    """Read ``<prefix>.mode`` (default ``abs``); ConfigError naming it when unknown."""
    name = f'{prefix}.mode'
    value = reader.string(name, CompareMode.ABS.value)
    try:
        return CompareMode(value.strip().lower())
    except ValueError as err:
        known = '|'.join(m.value for m in CompareMode)
        raise ConfigError(f'{name}: {value!r} is not one of {known}') from err


def read_binding(reader: SettingsReader, name: str, tools: Iterable[tuple[str, str]],
                 sensors: Iterable[str], *, poses: Iterable[str] = ()) -> Declared:
    """
    Read one declared binding, ``bindings.<name>``; its tool and sensor must be configured.

    :param reader: The settings.
    :param name: The binding's name.
    :param tools: (name, server) of every configured action and service.
    :param sensors: The configured sensors' names.
    :param poses: Those of them that are TF sensors (an orientation binding's sources).
    :return: The binding, its tool given by server name.
    :raises ConfigError: a missing or unknown tool, field or source, naming the setting.
    """
    prefix = f'bindings.{name}'
    tools = list(tools)
    tool_name = reader.string(f'{prefix}.tool')
    server = next((s for n, s in tools if tool_name in (n, s)), None)
    if server is None:
        known = ', '.join(n for n, _ in tools) or 'none configured'
        raise ConfigError(f'{prefix}.tool: {tool_name!r} is not a configured action or '
                          f'service (known: {known})')
    field = reader.string(f'{prefix}.field')
    if not field or not parse_path(field):
        raise ConfigError(f'{prefix}.field: required, a goal field path like target.pose.x')
    source = reader.string(f'{prefix}.source')
    try:
        parsed = Source.parse(source or '')
    except ValueError:
        parsed = None
    if parsed is None or parsed.kind is SourceKind.CAPTURE:
        raise ConfigError(f'{prefix}.source: {source!r} is not param:<key>[i] or '
                          'sensor:<sensor>[i]')
    if parsed.kind is SourceKind.SENSOR and parsed.name not in set(sensors):
        raise ConfigError(f'{prefix}.source: sensor {parsed.name!r} is not configured')
    if reader.given(f'{prefix}.max_angle'):  # an orientation binding (bindings.turns)
        if parsed.kind is not SourceKind.SENSOR or parsed.index is not None:
            raise ConfigError(f'{prefix}.source: an orientation binding (max_angle) follows a '
                              f'TF sensor, sensor:<name> without an index; got {source!r}')
        if parsed.name not in set(poses):
            raise ConfigError(f'{prefix}.source: sensor {parsed.name!r} is not a TF sensor (it '
                              'has no frame); an orientation binding follows a frame')
        if parse_path(field)[-1] != 'orientation':
            raise ConfigError(f'{prefix}.field: an orientation binding binds a quaternion, a '
                              f'path ending in orientation (target.pose.orientation); got '
                              f'{field!r}')
        max_angle = reader.number(f'{prefix}.max_angle', 0.0)
        if not 0.0 < max_angle <= math.pi:
            raise ConfigError(f'{prefix}.max_angle: radians, > 0 and at most pi, got '
                              f'{max_angle}')
        return Declared(tool=server, field=field, source=source, max_shift=None,
                        max_offset=reader.number(f'{prefix}.max_offset', DEFAULT_MAX_SHIFT),
                        max_angle=max_angle)
    if parsed.kind is SourceKind.PARAM and not reader.given(f'{prefix}.max_shift'):
        # the caller names a parameter's value: no range unless one is set
        return Declared(tool=server, field=field, source=source, max_shift=None)
    max_shift = reader.number(f'{prefix}.max_shift', DEFAULT_MAX_SHIFT)
    max_offset = reader.number(f'{prefix}.max_offset', max_shift)
    return Declared(tool=server, field=field, source=source, max_shift=max_shift,
                    max_offset=max_offset)


@dataclass(frozen=True)
class BindingOptions:
    """
    How bindings are inferred.

    :ivar infer: ``infer_bindings``: infer bindings from the recordings.
    :ivar max_shift: ``binding_max_shift``: how far an inferred sensor binding may move a goal.
    """

    infer: bool = True
    max_shift: float = DEFAULT_MAX_SHIFT


def read_binding_options(reader: SettingsReader,
                         describe: Callable[[str], str] = lambda _n: '') -> BindingOptions:
    """Read ``infer_bindings`` and ``binding_max_shift``; ConfigError naming a bad one."""
    return BindingOptions(
        infer=reader.boolean('infer_bindings', True, description=describe('infer_bindings')),
        max_shift=reader.number('binding_max_shift', DEFAULT_MAX_SHIFT,
                                description=describe('binding_max_shift')))
