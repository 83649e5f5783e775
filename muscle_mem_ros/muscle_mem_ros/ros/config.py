"""ROS parameters -> a typed, validated node configuration.

Parameters follow the nav2 / ros2_control convention: a list of names, then
per-name sub-keys::

    muscle_mem:
      ros__parameters:
        sensors: [joints, object]
        sensors.joints.topic: /joint_states      # or a nested map under sensors.joints:
        ...

The list may be left out when the per-name keys are written as nested maps
(``sensors: {joints: {topic: ...}}``): the names are then taken from the keys,
in file order. With an explicit list, keys of a name not in it are an error.

Every value is checked at startup; a bad one raises :class:`ConfigError` whose
message starts with the parameter's full name (``sensors.joints.tolerance: must
be >= 0``), so the node exits before touching the robot. Types and field paths
are resolved against the installed interface packages here too.

Tolerance length: a sensor's feature vector is the concatenation of its
fields, flattened. When every field has a fixed size (``pose.position``: 3),
a per-element tolerance of the wrong length fails at startup. When a field is
a variable-length sequence (``position``, ``ranges``) the length is checked
against the first message received; a mismatch is then logged as an error
naming the parameter and the sensor is left out of every snapshot, so checks
involving it fail (never pass).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
import math
import os
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node as RosNode

from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.records import CompareMode, SensorSpec, ToolKind
from muscle_mem_ros.ros.introspection import (
    FieldExtractor,
    TypeResolutionError,
    canonical_type_name,
    compile_field_path,
    resolve_type,
)

__all__ = [
    'CacheMode',
    'NodeConfig',
    'SensorConfig',
    'ToolConfig',
    'DEFAULT_STORE_PATH',
    'load_config',
    'parse_cache_mode',
]

DEFAULT_STORE_PATH = '~/.ros/muscle_mem/cache.db'
"""Where the cache lives unless ``store_path`` says otherwise."""


class CacheMode(Enum):
    """What the node does with an ExecuteTask goal (MoveIt trajectory-cache style)."""

    LEARN = 'learn'
    """Replay when the checks pass, otherwise hand off to the agent and learn its steps."""
    REPLAY_ONLY = 'replay_only'
    """Replay or fail: the agent is never called; a miss is a failure with the reason."""
    RECORD_ONLY = 'record_only'
    """Always call the agent from the start and record what it does; never replay."""
    OFF = 'off'
    """Pure pass-through: goals go to the agent, proxies forward, nothing is stored."""


@dataclass(frozen=True)
class SensorConfig:
    """One sensor topic and how its feature is compared.

    Attributes:
        name: Sensor name; also the feature name in snapshots and events.
        topic: Topic to subscribe to.
        type_name: Message type name as configured.
        msg_type: The resolved message class.
        extractors: Compiled field paths, concatenated in order.
        tolerance: One value, or one per element of the flattened feature.
        mode: How deviations are reduced to a score.
        max_age: Seconds after which a reading counts as stale.
    """

    name: str
    topic: str
    type_name: str
    msg_type: type
    extractors: tuple[FieldExtractor, ...]
    tolerance: tuple[float, ...]
    mode: CompareMode
    max_age: float

    @property
    def size(self) -> int | None:
        """Length of the feature vector when fixed by the type, else None."""
        sizes = [e.size for e in self.extractors]
        return None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[misc]

    @property
    def spec(self) -> SensorSpec:
        """The core's view of this sensor's tolerance."""
        return SensorSpec(
            name=self.name, tolerance=self.tolerance, mode=self.mode, max_age=self.max_age
        )


@dataclass(frozen=True)
class ToolConfig:
    """One proxied action or service.

    Attributes:
        name: Tool name in the configuration.
        kind: Action or service.
        server: The real server's name (replay sends here).
        proxy: The name the node serves (point the agent here).
        type_name: Interface type name as configured.
        interface: The resolved action or service class.
    """

    name: str
    kind: ToolKind
    server: str
    proxy: str
    type_name: str
    interface: type


@dataclass(frozen=True)
class NodeConfig:
    """Everything the node reads from its parameters, validated."""

    store_path: str
    agent_action: str
    cache_mode: CacheMode
    step_timeout: float
    post_check_timeout: float
    agent_timeout: float
    sensor_startup_timeout: float
    allow_unchecked_replay: bool
    sensors: tuple[SensorConfig, ...]
    actions: tuple[ToolConfig, ...]
    services: tuple[ToolConfig, ...]

    @property
    def tools(self) -> tuple[ToolConfig, ...]:
        """Actions then services."""
        return self.actions + self.services


_SENSOR_KEYS = ('topic', 'type', 'fields', 'tolerance', 'mode', 'max_age')
_TOOL_KEYS = ('server', 'type', 'proxy')


def parse_cache_mode(value: Any, *, parameter: str = 'cache_mode') -> CacheMode:
    """Parse a cache mode name; raise ConfigError naming ``parameter``."""
    try:
        return CacheMode(str(value).strip().lower())
    except ValueError as err:
        names = '|'.join(m.value for m in CacheMode)
        raise ConfigError(f'{parameter}: {value!r} is not one of {names}') from err


class _Reader:
    """Declare and read parameters with dynamic typing, validating by hand."""

    def __init__(self, *, node: RosNode) -> None:
        self._node = node
        self.declared: set[str] = set()

    def get(self, name: str, default: Any) -> Any:
        if not self._node.has_parameter(name):
            self._node.declare_parameter(
                name, default, ParameterDescriptor(name=name, dynamic_typing=True)
            )
        self.declared.add(name)
        value = self._node.get_parameter(name).value
        return default if value is None else value

    def string(self, name: str, default: str | None = None) -> str:
        value = self.get(name, default)
        if value is None:
            raise ConfigError(f'{name}: required')
        if not isinstance(value, str):
            raise ConfigError(f'{name}: must be a string, got {value!r}')
        return value

    def number(self, name: str, default: float, *, positive: bool = True) -> float:
        value = self.get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f'{name}: must be a number, got {value!r}')
        if not math.isfinite(value) or (positive and value <= 0):
            raise ConfigError(f'{name}: must be a finite number > 0, got {value!r}')
        return float(value)

    def boolean(self, name: str, default: bool) -> bool:
        value = self.get(name, default)
        if not isinstance(value, bool):
            raise ConfigError(f'{name}: must be true or false, got {value!r}')
        return value

    def names(self, name: str) -> list[str]:
        overrides = getattr(self._node, '_parameter_overrides', {})
        if name not in overrides:
            inferred: list[str] = []
            for key in overrides:
                group, _, rest = key.partition('.')
                item = rest.partition('.')[0]
                if group == name and item and item not in inferred:
                    inferred.append(item)
            self.get(name, inferred)
        value = self.get(name, [])
        if isinstance(value, str):
            value = [value] if value else []
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f'{name}: must be a list of names, got {value!r}')
        for item in value:
            if not item or '.' in item or '/' in item:
                raise ConfigError(f"{name}: '{item}' is not a valid name (no dots or slashes)")
        if len(set(value)) != len(value):
            raise ConfigError(f'{name}: names must be unique, got {list(value)!r}')
        return list(value)


def _tolerance(reader: _Reader, prefix: str, mode: CompareMode, size: int | None) -> tuple:
    name = f'{prefix}.tolerance'
    value = reader.get(name, [0.0] if mode is CompareMode.EXACT else None)
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
    return tuple(float(v) for v in values)


def _sensor(reader: _Reader, name: str) -> SensorConfig:
    prefix = f'sensors.{name}'
    topic = reader.string(f'{prefix}.topic')
    if not topic:
        raise ConfigError(f'{prefix}.topic: required')
    type_name = reader.string(f'{prefix}.type')
    try:
        msg_type = resolve_type(type_name, kind='msg')
    except TypeResolutionError as err:
        raise ConfigError(f'{prefix}.type: {err}') from err
    fields = reader.get(f'{prefix}.fields', None)
    if isinstance(fields, str):
        fields = [fields]
    if not fields or not all(isinstance(f, str) for f in fields):
        raise ConfigError(f"{prefix}.fields: required, a list of field paths like 'position'")
    extractors = []
    for path in fields:
        try:
            extractors.append(compile_field_path(msg_type, path))
        except TypeResolutionError as err:
            raise ConfigError(f'{prefix}.fields: {err}') from err
    mode = _compare_mode(reader.string(f'{prefix}.mode', 'abs'), f'{prefix}.mode')
    sizes = [e.size for e in extractors]
    size = None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[misc]
    tolerance = _tolerance(reader, prefix, mode, size)
    max_age = reader.number(f'{prefix}.max_age', 1.0)
    return SensorConfig(
        name=name, topic=topic, type_name=canonical_type_name(type_name, kind='msg'),
        msg_type=msg_type,
        extractors=tuple(extractors), tolerance=tolerance, mode=mode, max_age=max_age,
    )


def _compare_mode(value: str, parameter: str) -> CompareMode:
    """Parse a compare mode name (abs|norm|rms|exact|angle); ConfigError naming the parameter."""
    try:
        return CompareMode(value.strip().lower())
    except ValueError as err:
        names = '|'.join(m.value for m in CompareMode)
        raise ConfigError(f'{parameter}: {value!r} is not one of {names}') from err


def _tool(reader: _Reader, node: RosNode, group: str, name: str, kind: ToolKind) -> ToolConfig:
    prefix = f'{group}.{name}'
    server = reader.string(f'{prefix}.server')
    if not server:
        raise ConfigError(f'{prefix}.server: required')
    type_name = reader.string(f'{prefix}.type')
    try:
        interface = resolve_type(type_name, kind='action' if kind is ToolKind.ACTION else 'srv')
    except TypeResolutionError as err:
        raise ConfigError(f'{prefix}.type: {err}') from err
    proxy = reader.string(f'{prefix}.proxy', '~/' + server.lstrip('/~'))
    try:
        server_full = node.resolve_service_name(server)
        proxy_full = node.resolve_service_name(proxy)
    except Exception as err:  # rclpy raises several types for invalid names
        raise ConfigError(f'{prefix}: invalid name ({err})') from err
    if server_full == proxy_full:
        raise ConfigError(f'{prefix}.proxy: must differ from the server name {server_full!r}')
    kind_name = 'action' if kind is ToolKind.ACTION else 'srv'
    return ToolConfig(
        name=name, kind=kind, server=server_full, proxy=proxy_full,
        type_name=canonical_type_name(type_name, kind=kind_name), interface=interface,
    )


def load_config(node: RosNode) -> NodeConfig:
    """Declare the node's parameters, read and validate them.

    Raises:
        ConfigError: The first bad parameter; the message starts with its name.
    """
    reader = _Reader(node=node)
    store_path = reader.string('store_path', DEFAULT_STORE_PATH)
    if not store_path:
        raise ConfigError('store_path: must not be empty')
    if store_path != ':memory:':
        store_path = os.path.expanduser(store_path)
    mode = parse_cache_mode(reader.string('cache_mode', CacheMode.LEARN.value))
    sensors = tuple(_sensor(reader, n) for n in reader.names('sensors'))
    actions = tuple(
        _tool(reader, node, 'actions', n, ToolKind.ACTION) for n in reader.names('actions')
    )
    services = tuple(
        _tool(reader, node, 'services', n, ToolKind.SERVICE) for n in reader.names('services')
    )
    proxies: dict[str, str] = {}
    for tool in actions + services:
        group = 'actions' if tool.kind is ToolKind.ACTION else 'services'
        if tool.proxy in proxies:
            raise ConfigError(
                f'{group}.{tool.name}.proxy: {tool.proxy!r} is also the proxy of '
                f'{proxies[tool.proxy]}'
            )
        proxies[tool.proxy] = f'{group}.{tool.name}'
    agent_action = reader.string('agent_action', '')
    if agent_action:
        try:
            agent_full = node.resolve_service_name(agent_action)
        except Exception as err:  # rclpy raises several types for invalid names
            raise ConfigError(f'agent_action: invalid name ({err})') from err
        if agent_full == node.resolve_service_name('~/execute_task'):
            raise ConfigError(f"agent_action: {agent_full!r} is this node's own ExecuteTask")
    config = NodeConfig(
        store_path=store_path,
        agent_action=agent_action,
        cache_mode=mode,
        step_timeout=reader.number('step_timeout', 30.0),
        post_check_timeout=reader.number('post_check_timeout', 2.0),
        agent_timeout=reader.number('agent_timeout', 600.0),
        sensor_startup_timeout=reader.number('sensor_startup_timeout', 10.0),
        allow_unchecked_replay=reader.boolean('allow_unchecked_replay', False),
        sensors=sensors,
        actions=actions,
        services=services,
    )
    _reject_unknown(node, reader.declared)
    return config


def _reject_unknown(node: RosNode, declared: set[str]) -> None:
    """Fail on overrides under sensors./actions./services. that nothing reads (typos)."""
    overrides = getattr(node, '_parameter_overrides', {})
    for name in sorted(overrides):
        group, _, rest = name.partition('.')
        if group in ('sensors', 'actions', 'services') and rest and name not in declared:
            item, _, key = rest.partition('.')
            known = _SENSOR_KEYS if group == 'sensors' else _TOOL_KEYS
            if key in known:
                raise ConfigError(f"{name}: '{item}' is not listed in the '{group}' parameter")
            raise ConfigError(
                f'{name}: unknown parameter (known keys: {", ".join(known)})'
            )
