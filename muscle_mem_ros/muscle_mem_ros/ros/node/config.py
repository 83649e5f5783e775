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
keys) is refused at startup with an error that shows the map form: a parameter
that is both a value and a prefix cannot be dumped.

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
(read-only, default true) is read when the node is created (see :mod:`.cache_node`).

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
``len(fields) * len(joints)``, known at startup. See :mod:`..capture.sensors`.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

from muscle_mem_ros.checks.rest import DEFAULT_REST_WINDOW
from muscle_mem_ros.errors import ConfigError, TypeResolutionError
from muscle_mem_ros.records import ToolKind
from muscle_mem_ros.replay.booking import StepBack
from muscle_mem_ros.replay.gates import Gate
from muscle_mem_ros.ros.messages.fromdata import message_from_data
from muscle_mem_ros.ros.messages.introspection import (
    canonical_type_name,
    check_name_array,
    compile_field_path,
    compile_named_fields,
    NamedFields,
    resolve_type,
)
from muscle_mem_ros.ros.messages.success import parse_success
from muscle_mem_ros.ros.node.frameconfig import frame_sensor
from muscle_mem_ros.ros.node.imageconfig import image_sensor, IMAGE_TYPES
from muscle_mem_ros.ros.node.nodeconfig import (
    CacheMode,
    DEFAULT_AGREEMENT,
    DEFAULT_DESCRIPTION_TIMEOUT,
    DEFAULT_STOP_TIMEOUT,
    DEFAULT_STORE_PATH,
    NodeConfig,
    parse_cache_mode,
    parse_record_from,
    RecordFrom,
    SensorConfig,
    STOP_SERVICE_TYPE,
    StopConfig,
    ToolConfig,
)
from muscle_mem_ros.ros.node.parameters import ParameterReader
from muscle_mem_ros.ros.node.paramnames import describe, layout, name_list
from muscle_mem_ros.ros.node.stops import default_stop, JOINT_STATE, refused_stop_goal
from muscle_mem_ros.settings import (
    read_bind, read_binding, read_binding_options, read_mode, read_tolerance, read_watch,
)
from muscle_mem_ros.store import DEFAULT_ABANDONED_RETENTION
from rcl_interfaces.srv import ListParameters
from rclpy.node import Node as RosNode

__all__ = ['load_config', 'NODE_OPTIONS', 'read_autostart']

NODE_OPTIONS: dict[str, Any] = {'automatically_declare_parameters_from_overrides': True}
"""Keyword arguments of ``rclpy.node.Node`` that :func:`load_config` needs: every
given parameter is declared, so the public ``list_parameters`` sees it."""


def read_autostart(node: RosNode) -> bool:
    """
    Read ``autostart`` (read-only, default true): configure and activate at startup.

    :param node: The lifecycle node.
    :return: Its value.
    :raises ConfigError: not true or false.
    """
    return ParameterReader(node=node, describe=describe).boolean('autostart', True)


def _sensor(reader: ParameterReader, name: str) -> SensorConfig:
    prefix = f'sensors.{name}'
    if reader.given(f'{prefix}.frame'):
        return frame_sensor(reader, name)
    topic = reader.string(f'{prefix}.topic')
    if not topic:
        raise ConfigError(f'{prefix}.topic: required')
    type_name = reader.string(f'{prefix}.type')
    try:
        msg_type = resolve_type(type_name, kind='msg')
    except TypeResolutionError as err:
        raise ConfigError(f'{prefix}.type: {err}') from err
    canonical = canonical_type_name(type_name, kind='msg')
    if canonical in IMAGE_TYPES:
        return image_sensor(reader, name, topic=topic, type_name=canonical, msg_type=msg_type)
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
        joints = tuple(name_list(f'{prefix}.joints', value, 'a name'))
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
        watch=read_watch(reader, prefix),
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
        stop=_stop(reader, node, prefix, interface) if kind is ToolKind.ACTION else None,
        agreement=reader.number(f'{prefix}.agreement', DEFAULT_AGREEMENT, minimum=0.0,
                                exclusive=False),
    )


def _stop(reader: ParameterReader, node: RosNode, prefix: str,
          interface: Any) -> StopConfig | None:
    """Read an action tool's own stop (``stop_goal`` or ``stop_service``); None: it has none."""
    text = reader.string(f'{prefix}.stop_goal', '').strip()
    service = reader.string(f'{prefix}.stop_service', '').strip()
    service_type = reader.string(f'{prefix}.stop_service_type', STOP_SERVICE_TYPE).strip()
    if text and service:
        raise ConfigError(f'{prefix}.stop_service: give stop_goal or stop_service, not both')
    if text:
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError('must be a JSON object of goal fields')
            goal = message_from_data(interface.Goal, data)
        except ValueError as err:
            raise ConfigError(f'{prefix}.stop_goal: {err}') from err
        refused = refused_stop_goal(interface, goal)
        if refused:
            raise ConfigError(f'{prefix}.stop_goal: {refused}')
        return StopConfig(goal=goal, text=text)
    if service:
        try:
            service_full = node.resolve_service_name(service)
            srv = resolve_type(service_type, kind='srv')
        except TypeResolutionError as err:
            raise ConfigError(f'{prefix}.stop_service_type: {err}') from err
        except Exception as err:  # rclpy raises several types for invalid names
            raise ConfigError(f'{prefix}.stop_service: invalid name ({err})') from err
        return StopConfig(service=service_full, service_type=srv)
    return default_stop(interface)


def _check_holds(actions: tuple[ToolConfig, ...], sensors: tuple[SensorConfig, ...]) -> None:
    """Refuse a tool held where it is (:mod:`.stops`) with no JointState sensor to read."""
    if any(s.type_name == JOINT_STATE for s in sensors):
        return
    for tool in actions:
        if tool.stop is not None and tool.stop.hold:
            raise ConfigError(
                f'actions.{tool.name}: its stop holds the joints where they are (a '
                'joint_trajectory_controller rejects the empty trajectory), read by name from '
                f'a JointState sensor, and none is configured: add a sensor of type '
                f'{JOINT_STATE}, or give actions.{tool.name}.stop_goal or stop_service')


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
    items = layout(given)
    reader = ParameterReader(node=node, describe=describe)
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
    _check_holds(actions, sensors)
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
                                    [s.name for s in sensors],
                                    poses=[s.name for s in sensors if s.frames is not None])
                       for n in items['bindings']),
        infer_bindings=options.infer,
        binding_max_shift=options.max_shift,
        robot_id=robot_id,
        replay_requires=Gate.parse(reader.string('replay_requires', 'none')),
        step_back=StepBack.parse(reader.string('step_back', str(StepBack()))),
        watch=reader.boolean('watch', True),
        watch_rate=reader.number('watch_rate', 40.0, maximum=1000.0),
        watch_tolerance_scale=reader.number('watch_tolerance_scale', 1.0),
        stop_timeout=reader.number('stop_timeout', DEFAULT_STOP_TIMEOUT),
        rest_window=reader.number('rest_window', DEFAULT_REST_WINDOW),
        robot_description_file=os.path.expanduser(reader.string('robot_description_file', '')),
        robot_description_timeout=reader.number(
            'robot_description_timeout', DEFAULT_DESCRIPTION_TIMEOUT, minimum=0.0,
            exclusive=False),
        body_name=reader.string('body_name', ''),
    )


def _retention(reader: ParameterReader) -> float:
    """Read ``abandoned_recording_retention`` (seconds, >= 0; 0 purges every abandoned one)."""
    return reader.number(
        'abandoned_recording_retention', DEFAULT_ABANDONED_RETENTION, minimum=0.0,
        exclusive=False)
