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
ROS parameters -> a typed, validated node configuration.

Sensors, actions and services are maps from a name to that item's keys::

    muscle_mem:
      ros__parameters:
        sensors:
          joints: {topic: /joint_states, type: sensor_msgs/msg/JointState, ...}
          object: {topic: /object_pose, ...}
        actions:
          arm: {server: /arm/follow_joint_trajectory, type: ...}

(``sensors.joints.topic: /joint_states`` is the same parameter written flat.)
The names are the keys, in file order; order carries no meaning (snapshots and
checks go by name). Every declared parameter is a leaf that no other declared
name uses as a prefix, so ``ros2 param dump`` writes a params file that starts
the same node again.

The older nav2-style list (``sensors: [joints, object]`` beside the per-name
keys) is still accepted with a deprecation warning: it then selects which names
exist (keys of a name not in it are an error), and it is undeclared once read,
because a parameter that is both a value and a prefix cannot be dumped.

The node must be created with :data:`NODE_OPTIONS`
(``automatically_declare_parameters_from_overrides``), so every parameter given
in a params file or on the command line is declared and visible through rclpy's
public ``list_parameters``. A given name that nothing reads is an error, at
every level (``agent_acton``, ``sensors.joints.tolerence``), with the nearest
known name suggested. Parameters that rclpy itself declares or reads
(``use_sim_time``, ``start_type_description_service``, ``qos_overrides.*``)
are left alone.

Every parameter is read through :class:`.parameters.ParameterReader` (the one
validator, shared with the sim nodes), which declares it again with a
descriptor: description, type, a range for timeouts, tolerances' ``max_age``
and retention, and ``read_only`` for all but ``cache_mode``. ``autostart``
(read-only, default true) is read when the node is created (see :mod:`.node`).

Every value is checked at configure; a bad one raises :class:`ConfigError` whose
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

Selection by name: a sensor with ``joints: [shoulder, elbow]`` reads, from a
message with a ``name`` array and value arrays parallel to it (a
``sensor_msgs/msg/JointState``), the values of those names only, in that
order, field after field (all positions, then all velocities). Values are kept
per name across messages, so several publishers on one topic (an arm's
broadcaster and a gripper driver) make one feature vector; its size is
``len(fields) * len(joints)``, known at startup. See :mod:`.sensors`.
"""

from __future__ import annotations

from dataclasses import dataclass
import difflib
from enum import Enum
import os
import socket
from typing import Any

from muscle_mem_ros.bindings import Declared, DEFAULT_MAX_SHIFT
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.records import CompareMode, SensorSpec, ToolKind
from muscle_mem_ros.ros.messages.introspection import (
    canonical_type_name,
    check_name_array,
    compile_field_path,
    compile_named_fields,
    FieldExtractor,
    NamedFields,
    resolve_type,
    TypeResolutionError,
)
from muscle_mem_ros.ros.messages.success import parse_success, SuccessRule
from muscle_mem_ros.ros.parameters import ParameterReader
from muscle_mem_ros.settings import (
    read_bind, read_binding, read_binding_options, read_mode, read_tolerance,
)
from muscle_mem_ros.store import DEFAULT_ABANDONED_RETENTION
from muscle_mem_ros.trust import Gate
from rcl_interfaces.srv import ListParameters
from rclpy.node import Node as RosNode

__all__ = [
    'CacheMode',
    'NodeConfig',
    'RecordFrom',
    'SensorConfig',
    'ToolConfig',
    'DEFAULT_STORE_PATH',
    'NODE_OPTIONS',
    'load_config',
    'parse_cache_mode',
    'parse_record_from',
    'read_autostart',
]

DEFAULT_STORE_PATH = '~/.ros/muscle_mem/cache.db'
DEFAULT_AGREEMENT = 0.005
"""Shadow agreement tolerance of a tool's goal numbers (5 mm, or 0.005 rad)."""
"""Where the cache lives unless ``store_path`` says otherwise."""

NODE_OPTIONS: dict[str, Any] = {'automatically_declare_parameters_from_overrides': True}
"""Keyword arguments of ``rclpy.node.Node`` that :func:`load_config` needs: every
given parameter is declared, so the public ``list_parameters`` sees it."""


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
    SHADOW = 'shadow'
    """The agent does every task (learned as in ``learn``); the cache only predicts each
    step and counts how often it agreed (:mod:`muscle_mem_ros.shadow`)."""


class RecordFrom(Enum):
    """Where a tool's calls are recorded from (``actions.<name>.record_from``)."""

    PROXY = 'proxy'
    """The node serves the tool under a proxy name the agent calls; the proxy records."""
    INTROSPECTION = 'introspection'
    """The agent calls the real server; the node records from its introspection events."""


@dataclass(frozen=True)
class SensorConfig:
    """
    One sensor topic and how its feature is compared.

    :ivar name: Sensor name; also the feature name in snapshots and events.
    :ivar topic: Topic to subscribe to.
    :ivar type_name: Message type name as configured.
    :ivar msg_type: The resolved message class.
    :ivar extractors: Compiled field paths, concatenated in order.
    :ivar tolerance: One value, or one per element of the flattened feature.
    :ivar mode: How deviations are reduced to a score.
    :ivar max_age: Seconds after which a reading counts as stale.
    :ivar joints: Element names selected from the message's ``name`` array, in
        feature order; empty for positional reading.
    :ivar by_name: Reads the ``name`` array and the value arrays parallel to it
        (set when ``joints`` is).
    :ivar bind: ``auto`` or ``never``: may inferred bindings read it; None: by its size
        (:func:`~muscle_mem_ros.bindings.sensor_sources`).
    """

    name: str
    topic: str
    type_name: str
    msg_type: Any
    extractors: tuple[FieldExtractor, ...]
    tolerance: tuple[float, ...]
    mode: CompareMode
    max_age: float
    joints: tuple[str, ...] = ()
    by_name: NamedFields | None = None
    bind: str | None = None

    @property
    def size(self) -> int | None:
        """Length of the feature vector when fixed by the type or the names, else None."""
        if self.joints:
            return len(self.extractors) * len(self.joints)
        sizes = [e.size for e in self.extractors]
        known = [s for s in sizes if s is not None]
        return None if len(known) < len(sizes) else sum(known)

    @property
    def spec(self) -> SensorSpec:
        """Return the core's view of this sensor's tolerance."""
        return SensorSpec(
            name=self.name, tolerance=self.tolerance, mode=self.mode, max_age=self.max_age,
            bind=self.bind,
        )


@dataclass(frozen=True)
class ToolConfig:
    """
    One proxied action or service.

    :ivar name: Tool name in the configuration.
    :ivar kind: Action or service.
    :ivar server: The real server's name (replay sends here).
    :ivar proxy: The name the node serves (point the agent here); '' when
        ``record_from`` is introspection (nothing is served).
    :ivar type_name: Interface type name as configured.
    :ivar interface: The resolved action or service class.
    :ivar record_from: Where its calls are recorded from (see :mod:`.tap`).
    :ivar success: When an answer counts as success beyond its status
        (:mod:`.messages.success`); None: the default rule.
    """

    name: str
    kind: ToolKind
    server: str
    proxy: str
    type_name: str
    interface: Any
    record_from: RecordFrom = RecordFrom.PROXY
    success: SuccessRule | None = None
    agreement: float = DEFAULT_AGREEMENT
    """Shadow runs: goal numbers closer than this to the cache's prediction agree."""


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
    abandoned_recording_retention: float = DEFAULT_ABANDONED_RETENTION
    """Seconds; recordings abandoned by a stopped process are purged at start once this old."""
    bindings: tuple[Declared, ...] = ()
    """Declared goal-field bindings (:mod:`muscle_mem_ros.bindings`), tools by server name."""
    infer_bindings: bool = True
    """Infer bindings from the recordings (parameters from one, sensors from two)."""
    binding_max_shift: float = DEFAULT_MAX_SHIFT
    """``max_shift`` of inferred numeric bindings, in the source's units."""
    robot_id: str = ''
    """Who this node records for in a shared (PostgreSQL) store."""
    replay_requires: Gate = Gate()
    """What a trajectory must have earned before it replays (:mod:`muscle_mem_ros.trust`)."""

    @property
    def tools(self) -> tuple[ToolConfig, ...]:
        """Actions then services."""
        return self.actions + self.services


_TOP_KEYS = (
    'store_path', 'agent_action', 'cache_mode', 'step_timeout', 'post_check_timeout',
    'agent_timeout', 'allow_unchecked_replay', 'abandoned_recording_retention',
    'sensor_startup_timeout', 'autostart', 'infer_bindings', 'binding_max_shift', 'robot_id',
    'replay_requires',
)
_SENSOR_KEYS = ('topic', 'type', 'fields', 'joints', 'tolerance', 'mode', 'max_age', 'bind')
_TOOL_KEYS = ('server', 'type', 'proxy', 'record_from', 'success_field', 'success_when',
              'agreement')
_BINDING_KEYS = ('tool', 'field', 'source', 'max_shift', 'max_offset')
_GROUP_KEYS = {'sensors': _SENSOR_KEYS, 'actions': _TOOL_KEYS, 'services': _TOOL_KEYS,
               'bindings': _BINDING_KEYS}
_ROS_PARAMETERS = ('use_sim_time', 'start_type_description_service')
"""Parameters rclpy declares on every node; a params file may set them."""
_ROS_PREFIXES = ('qos_overrides.',)
"""Prefixes of parameters rclpy reads when a publisher or subscription allows QoS overrides."""


def parse_cache_mode(value: Any, *, parameter: str = 'cache_mode') -> CacheMode:
    """Parse a cache mode name; raise ConfigError naming ``parameter``."""
    try:
        return CacheMode(str(value).strip().lower())
    except ValueError as err:
        names = '|'.join(m.value for m in CacheMode)
        raise ConfigError(f'{parameter}: {value!r} is not one of {names}') from err


def read_autostart(node: RosNode) -> bool:
    """
    Read ``autostart`` (read-only, default true): configure and activate at startup.

    :param node: The lifecycle node.
    :return: Its value.
    :raises ConfigError: not true or false.
    """
    return ParameterReader(node=node, describe=_describe).boolean('autostart', True)


def _describe(name: str) -> str:
    """Return the description of parameter ``name`` (by its last part for sensors and tools)."""
    parts = name.split('.')
    if len(parts) == 3:
        return _DESCRIPTIONS[f'{parts[0]}.*.{parts[2]}']
    return _DESCRIPTIONS[name]


_DESCRIPTIONS = {
    'autostart': 'Configure and activate at startup (false: wait for ros2 lifecycle set).',
    'store_path': ("SQLite file of the cache ('~' expanded; ':memory:' for none), or a "
                   'postgresql://user@host:port/db URL shared by a fleet (password from '
                   'PGPASSWORD or ~/.pgpass, not here: parameters are readable).'),
    'robot_id': ('Who this node records for, stored with its recordings in a shared store '
                 "(empty, the default: this node's fully-qualified name @ host name)."),
    'agent_action': 'ExecuteTask action of the planning agent a miss is handed to (empty: none).',
    'cache_mode': 'learn | replay_only | record_only | off | shadow; may change at run time.',
    'step_timeout': 'Seconds a replayed step may take before it fails (> 0).',
    'post_check_timeout': 'Seconds to wait for sensor data newer than a step (> 0).',
    'agent_timeout': 'Seconds the agent may take for one handed-off task (> 0).',
    'sensor_startup_timeout': 'Seconds the first task waits for every sensor (> 0).',
    'allow_unchecked_replay': 'Replay steps recorded without sensor checks.',
    'abandoned_recording_retention': 'Seconds before abandoned recordings are purged (>= 0).',
    'sensors.*.topic': 'Topic of this sensor.',
    'sensors.*.type': 'Message type, e.g. sensor_msgs/msg/JointState.',
    'sensors.*.fields': 'Field paths concatenated into the feature vector.',
    'sensors.*.bind': ('auto | never: may inferred bindings read this sensor (default: '
                       'auto up to 16 elements, never for more, e.g. a scan).'),
    'sensors.*.joints': 'Element names read from the message name array, in order.',
    'sensors.*.tolerance': 'One tolerance, or one per feature element (>= 0).',
    'sensors.*.mode': 'How deviations compare: abs | norm | rms | exact | angle.',
    'sensors.*.max_age': 'Seconds (node clock) after which a reading is stale (> 0).',
    'actions.*.server': 'The real action server (replay sends goals here).',
    'actions.*.type': 'Action type, e.g. control_msgs/action/FollowJointTrajectory.',
    'actions.*.proxy': 'Name the cache serves for the agent (default ~/<server>).',
    'actions.*.record_from': "proxy | introspection (learn from the server's event topics).",
    'services.*.server': 'The real service (replay calls it).',
    'services.*.type': 'Service type, e.g. std_srvs/srv/SetBool.',
    'services.*.proxy': 'Name the cache serves for the agent (default ~/<server>).',
    'services.*.record_from': 'proxy | introspection (learn from the service event topic).',
    'actions.*.success_field': 'Result field that says success, e.g. error_code (optional).',
    'actions.*.success_when': 'nonempty | empty | true | false | a number it must equal.',
    'services.*.success_field': 'Response field that says success, e.g. plan.poses (optional).',
    'services.*.success_when': 'nonempty | empty | true | false | a number it must equal.',
    'actions.*.agreement': 'Shadow runs: goal numbers this close to the prediction agree.',
    'services.*.agreement': 'Shadow runs: goal numbers this close to the prediction agree.',
    'replay_requires': 'none | shadow:N | approval: what a trajectory needs before it replays.',
    'infer_bindings': 'Bind goal fields to parameters and sensors found in the recordings.',
    'binding_max_shift': 'How far an inferred binding may move a field from its recording.',
    'bindings.*.tool': 'The action or service (its key under actions/services) it binds.',
    'bindings.*.field': 'Goal field path, e.g. target.pose.position.x (a message: each leaf).',
    'bindings.*.source': 'param:<key>[i] or sensor:<sensor>[i] (no index: the whole vector).',
    'bindings.*.max_shift': 'Largest distance from the recorded value a replay may send (> 0).',
    'bindings.*.max_offset': ('Which goals a sensor binding binds: recorded |goal - source| '
                              'within it (> 0; default max_shift).'),
}


def _names(name: str, value: Any, what: str) -> list[str]:
    """
    Validate a list of unique names (a string is a list of one).

    :param name: the parameter, for the error message.
    :param value: its value.
    :param what: what the names name, for the error message (``a name``, ``a joint``).
    :return: the names.
    :raises ConfigError: not a list of unique, non-empty strings.
    """
    if isinstance(value, str):
        value = [value] if value else []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f'{name}: must be a list of names, got {value!r}')
    for item in value:
        if not item.strip():
            raise ConfigError(f'{name}: {item!r} is not {what}')
    if len(set(value)) != len(value):
        raise ConfigError(f'{name}: names must be unique, got {list(value)!r}')
    return list(value)


def _unknown(name: str, word: str, known: tuple[str, ...]) -> ConfigError:
    """Return the error for an unknown parameter, suggesting the nearest known word."""
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    hint = f'did you mean {close[0]}?' if close else f'known: {", ".join(known)}'
    return ConfigError(f'{name}: unknown parameter, {hint}')


def _layout(given: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """
    Check every given parameter name against the known layout.

    :param given: the names of the node's declared parameters, in declaration order.
    :return: the item names of each group (``sensors`` -> ``['joints', 'object']``, in
        order of first appearance), and the groups given in the deprecated list form.
    :raises ConfigError: a name nothing reads, naming it and the nearest known name.
    """
    items: dict[str, list[str]] = {group: [] for group in _GROUP_KEYS}
    legacy: list[str] = []
    for name in given:
        if name in _ROS_PARAMETERS or name.startswith(_ROS_PREFIXES):
            continue
        parts = name.split('.')
        head = parts[0]
        if head in _GROUP_KEYS:
            keys = _GROUP_KEYS[head]
            if len(parts) == 1:
                legacy.append(head)
                continue
            if len(parts) == 2:
                raise ConfigError(
                    f'{name}: must be a map of keys ({", ".join(keys)}), not a value'
                )
            if parts[2] not in keys:
                raise _unknown(name, parts[2], keys)
            if len(parts) > 3:
                raise ConfigError(
                    f"{name}: unknown parameter ('{'.'.join(parts[:3])}' is a value, not a map)"
                )
            if parts[1] not in items[head]:
                items[head].append(parts[1])
        elif head in _TOP_KEYS:
            if len(parts) > 1:
                raise ConfigError(f"{name}: unknown parameter ('{head}' is a value, not a map)")
        else:
            raise _unknown(name, head, _TOP_KEYS + tuple(_GROUP_KEYS))
    return items, legacy


def _legacy_names(node: RosNode, group: str, found: list[str], given: list[str]) -> list[str]:
    """
    Read a deprecated ``sensors: [a, b]`` list, check it against the keys, undeclare it.

    The list is undeclared once read: a parameter that is both a value and a
    prefix of others cannot be written by ``ros2 param dump``.

    :param node: the node.
    :param group: ``sensors``, ``actions`` or ``services``.
    :param found: the item names found in the keys.
    :param given: every given parameter name (for the error message).
    :return: the listed names.
    :raises ConfigError: not a list of names, or keys of a name not in the list.
    """
    value = node.get_parameter(group).value
    listed = _names(group, [] if value is None else value, 'a name')
    for item in listed:
        if '.' in item or '/' in item:
            raise ConfigError(f"{group}: '{item}' is not a valid name (no dots or slashes)")
    for item in found:
        if item not in listed:
            key = next(n for n in given if n.startswith(f'{group}.{item}.'))
            raise ConfigError(f"{key}: '{item}' is not listed in the '{group}' parameter")
    node.undeclare_parameter(group)
    node.get_logger().warning(
        f'{group}: a list of names is deprecated (ros2 param dump cannot write it); '
        f'the names are the keys of {group}.<name>.*: remove the list'
    )
    return listed


def _sensor(reader: ParameterReader, name: str) -> SensorConfig:
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
    joints: tuple[str, ...] = ()
    by_name: NamedFields | None = None
    value = reader.optional(f'{prefix}.joints')
    if value is not None:
        joints = tuple(_names(f'{prefix}.joints', value, 'a name'))
        if not joints:
            raise ConfigError(f'{prefix}.joints: must name at least one element')
        try:
            check_name_array(msg_type)
        except TypeResolutionError as err:
            raise ConfigError(f'{prefix}.joints: {err}') from err
        try:
            by_name = compile_named_fields(msg_type, fields)
        except TypeResolutionError as err:
            raise ConfigError(f'{prefix}.fields: {err}') from err
    mode = read_mode(reader, prefix)
    if joints:
        size: int | None = len(extractors) * len(joints)
    else:
        sizes = [e.size for e in extractors]
        known = [s for s in sizes if s is not None]
        size = None if len(known) < len(sizes) else sum(known)
    tolerance = read_tolerance(reader, prefix, mode, size)
    max_age = reader.number(f'{prefix}.max_age', 1.0)
    return SensorConfig(
        name=name, topic=topic, type_name=canonical_type_name(type_name, kind='msg'),
        msg_type=msg_type,
        extractors=tuple(extractors), tolerance=tolerance, mode=mode, max_age=max_age,
        joints=joints, by_name=by_name, bind=read_bind(reader, prefix),
    )


def _tool(
    reader: ParameterReader, node: RosNode, group: str, name: str, kind: ToolKind,
) -> ToolConfig:
    prefix = f'{group}.{name}'
    server = reader.string(f'{prefix}.server')
    if not server:
        raise ConfigError(f'{prefix}.server: required')
    type_name = reader.string(f'{prefix}.type')
    try:
        interface = resolve_type(type_name, kind='action' if kind is ToolKind.ACTION else 'srv')
    except TypeResolutionError as err:
        raise ConfigError(f'{prefix}.type: {err}') from err
    record_from = parse_record_from(
        reader.string(f'{prefix}.record_from', RecordFrom.PROXY.value),
        parameter=f'{prefix}.record_from')
    default_proxy = '~/' + server.lstrip('/~')
    if record_from is RecordFrom.INTROSPECTION:
        given = node.get_parameter(f'{prefix}.proxy').value \
            if node.has_parameter(f'{prefix}.proxy') else None
        if given not in (None, default_proxy):  # a default left by an earlier configure is fine
            raise ConfigError(
                f'{prefix}.proxy: nothing is served with record_from introspection (the agent '
                f'calls {prefix}.server itself): remove it, or set record_from to proxy')
        proxy = ''
    else:
        proxy = reader.string(f'{prefix}.proxy', default_proxy)
    try:
        server_full = node.resolve_service_name(server)
        proxy_full = node.resolve_service_name(proxy) if proxy else ''
    except Exception as err:  # rclpy raises several types for invalid names
        raise ConfigError(f'{prefix}: invalid name ({err})') from err
    if server_full == proxy_full:
        raise ConfigError(f'{prefix}.proxy: must differ from the server name {server_full!r}')
    kind_name = 'action' if kind is ToolKind.ACTION else 'srv'
    success = None
    field = reader.string(f'{prefix}.success_field', '')
    when = reader.get(f'{prefix}.success_when', '')
    if field or str(when).strip():
        answer = interface.Result if kind is ToolKind.ACTION else interface.Response
        success = parse_success(field, when, answer, parameter=prefix)
    return ToolConfig(
        name=name, kind=kind, server=server_full, proxy=proxy_full,
        type_name=canonical_type_name(type_name, kind=kind_name), interface=interface,
        record_from=record_from, success=success,
        agreement=reader.number(f'{prefix}.agreement', DEFAULT_AGREEMENT, minimum=0.0,
                                exclusive=False),
    )


def parse_record_from(value: Any, *, parameter: str) -> RecordFrom:
    """
    Parse a ``record_from`` value.

    :param value: the given value (``proxy`` or ``introspection``, any case).
    :param parameter: the parameter's full name, for the error message.
    :return: the parsed value.
    :raises ConfigError: any other value, naming ``parameter``.
    """
    try:
        return RecordFrom(str(value).strip().lower())
    except ValueError as err:
        names = '|'.join(m.value for m in RecordFrom)
        raise ConfigError(f'{parameter}: {value!r} is not one of {names}') from err


def load_config(node: RosNode) -> NodeConfig:
    """
    Read and validate the node's parameters, declaring those not given.

    The node must have been created with :data:`NODE_OPTIONS`, so that every
    given parameter is declared and listed by ``list_parameters``.

    :param node: the node whose parameters are read.
    :return: the validated configuration.
    :raises ConfigError: the first bad or unknown parameter; the message starts with its name.
    """
    given = list(node.list_parameters([], ListParameters.Request.DEPTH_RECURSIVE).names)
    items, legacy = _layout(given)
    for group in legacy:
        items[group] = _legacy_names(node, group, items[group], given)
    reader = ParameterReader(node=node, describe=_describe)
    store_path = reader.string('store_path', DEFAULT_STORE_PATH)
    if not store_path:
        raise ConfigError('store_path: must not be empty')
    if store_path != ':memory:' and not store_path.startswith(('postgresql:', 'postgres:')):
        store_path = os.path.expanduser(store_path)
    # Declared with '' and resolved here, so a parameter dump holds the default (''), not
    # this node's name: a node started from the dump under another name records as itself.
    robot_id = reader.string('robot_id', '') or \
        f'{node.get_fully_qualified_name()}@{socket.gethostname()}'
    mode = parse_cache_mode(reader.string('cache_mode', CacheMode.LEARN.value, read_only=False))
    sensors = tuple(_sensor(reader, n) for n in items['sensors'])
    actions = tuple(
        _tool(reader, node, 'actions', n, ToolKind.ACTION) for n in items['actions']
    )
    services = tuple(
        _tool(reader, node, 'services', n, ToolKind.SERVICE) for n in items['services']
    )
    proxies: dict[str, str] = {}
    for tool in actions + services:
        group = 'actions' if tool.kind is ToolKind.ACTION else 'services'
        if not tool.proxy:
            continue  # record_from introspection: nothing served
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
    options = read_binding_options(reader)
    return NodeConfig(
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
        abandoned_recording_retention=_retention(reader),
        bindings=tuple(read_binding(reader, n, [(t.name, t.server) for t in actions + services],
                                    [s.name for s in sensors]) for n in items['bindings']),
        infer_bindings=options.infer,
        binding_max_shift=options.max_shift,
        robot_id=robot_id,
        replay_requires=Gate.parse(reader.string('replay_requires', 'none')),
    )


def _retention(reader: ParameterReader) -> float:
    """Read ``abandoned_recording_retention`` (seconds, >= 0; 0 purges every abandoned one)."""
    return reader.number(
        'abandoned_recording_retention', DEFAULT_ABANDONED_RETENTION, minimum=0.0,
        exclusive=False)
