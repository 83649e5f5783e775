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
The parameter names the node knows: their layout, descriptions and spelling help.

Every given parameter name is checked against the layout (:func:`layout`) before
anything is read, so a misspelt one is an error naming the nearest known name
instead of a setting silently ignored; every parameter is declared with its
description (:func:`describe`, what ``ros2 param describe`` shows).

Two modules, two concepts: this one is *which* parameters the cache node has (its
vocabulary, read by :mod:`.config` and checked against docs/parameters.md);
:mod:`.parameters` is *how* any parameter is read, validated and declared, the one
reader that the demo's sim robot and agent use too (``muscle_mem_demo.params``), for
parameters of their own that are not in this layout.
"""

from __future__ import annotations

import difflib
from typing import Any

from muscle_mem_ros.errors import ConfigError

__all__ = ['describe', 'layout', 'name_list']

_TOP_KEYS = (
    'store_path', 'agent_action', 'cache_mode', 'step_timeout', 'post_check_timeout',
    'agent_timeout', 'allow_unchecked_replay', 'abandoned_recording_retention',
    'sensor_startup_timeout', 'autostart', 'infer_bindings', 'binding_max_shift', 'robot_id',
    'replay_requires', 'step_back', 'watch', 'watch_rate', 'watch_tolerance_scale',
    'stop_timeout', 'rest_window', 'robot_description_file', 'robot_description_timeout',
    'body_name',
)
_SENSOR_KEYS = ('topic', 'type', 'fields', 'joints', 'tolerance', 'mode', 'max_age', 'bind',
                'watch', 'encoding', 'width', 'height', 'cell', 'roi', 'masks', 'frame',
                'relative_to')
_TOOL_KEYS = ('server', 'type', 'proxy', 'record_from', 'success_field', 'success_when',
              'agreement')
_BINDING_KEYS = ('tool', 'field', 'source', 'max_shift', 'max_offset', 'max_angle')
_ACTION_KEYS = _TOOL_KEYS + ('stop_goal', 'stop_service', 'stop_service_type')
_GROUP_KEYS = {'sensors': _SENSOR_KEYS, 'actions': _ACTION_KEYS, 'services': _TOOL_KEYS,
               'bindings': _BINDING_KEYS}
_ROS_PARAMETERS = ('use_sim_time', 'start_type_description_service')
"""Parameters rclpy declares on every node; a params file may set them."""
_ROS_PREFIXES = ('qos_overrides.',)
"""Prefixes of parameters rclpy reads when a publisher or subscription allows QoS overrides."""


def describe(name: str) -> str:
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
    'sensors.*.frame': 'A TF sensor: the frame whose pose is read from /tf and /tf_static.',
    'sensors.*.relative_to': 'A TF sensor: the frame its pose is read in (world, map).',
    'sensors.*.type': 'Message type, e.g. sensor_msgs/msg/JointState.',
    'sensors.*.fields': 'Field paths concatenated into the feature vector.',
    'sensors.*.bind': ('auto | never: may inferred bindings read this sensor (default: '
                       'auto up to 16 elements, never for more, e.g. a scan).'),
    'sensors.*.watch': ('auto | never: is it traced while an action step is recorded and '
                        'watched while one is replayed (auto: up to 16 elements).'),
    'watch': ('Watch replayed action goals while they run against their recorded trace; '
              'cancel one the moment the world leaves it (false: neither traced nor watched).'),
    'watch_rate': 'Hz at which sensors are sampled while an action step runs (0 < rate <= 1000).',
    'watch_tolerance_scale': 'Factor on every sensor tolerance while a step is watched (> 0).',
    'stop_timeout': ('Seconds a goal the cache stops gets to end after its cancel (and again '
                     "after the tool's stop), then the robot to come to rest (> 0)."),
    'rest_window': ('Seconds the watched sensors must stay within tolerance for a stopped '
                    'robot to be at rest (> 0).'),
    'sensors.*.joints': 'Element names read from the message name array, in order.',
    'sensors.*.tolerance': 'One tolerance, or one per feature element (>= 0).',
    'sensors.*.mode': 'How deviations compare: abs | norm | rms | exact | angle | image.',
    'sensors.*.encoding': ('An image sensor: the encoding of its frames (rgb8, bgr8, rgba8, '
                           'bgra8, mono8, mono16, 16UC1, 32FC1; CompressedImage: rgb8 or '
                           'mono8).'),
    'sensors.*.width': 'An image sensor: the width of its frames, pixels.',
    'sensors.*.height': 'An image sensor: the height of its frames, pixels.',
    'sensors.*.cell': 'An image sensor: the side of a cell, pixels (default: height / 15).',
    'sensors.*.roi': 'An image sensor: the region compared, [x, y, width, height] pixels.',
    'sensors.*.masks': ('An image sensor: regions left out, four integers each (x, y, width, '
                        'height), flat.'),
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
    'actions.*.stop_goal': ("A goal of the action's type as JSON, sent to its server when a "
                            'cancel is refused or does not end the goal; empty: none (a '
                            'FollowJointTrajectory: the hold, its joints where they are).'),
    'actions.*.stop_service': ('A service called with an empty request when a cancel is '
                               'refused or does not end the goal (e.g. /emergency_stop).'),
    'actions.*.stop_service_type': 'Type of stop_service (default std_srvs/srv/Trigger).',
    'actions.*.agreement': 'Shadow runs: goal numbers this close to the prediction agree.',
    'services.*.agreement': 'Shadow runs: goal numbers this close to the prediction agree.',
    'replay_requires': 'none | shadow:N | approval: what a trajectory needs before it replays.',
    'step_back': ('R%/N | K/N | off: a trajectory whose failed replays reach R% (or K) of its '
                  'last N is held (default 30%/10).'),
    'robot_description_file': ('A file holding the robot description (URDF, MJCF, SDF) that '
                               'defines the body branches are learned on; empty: read the '
                               'robot_description topic (transient local).'),
    'robot_description_timeout': ('Seconds configure waits for the robot_description topic '
                                  '(>= 0; 0: do not read it, the body is the joints and '
                                  'tools); none by then: no body yet, no branch of a known '
                                  'body replays until one arrives (a change is logged).'),
    'body_name': ("Readable name of this robot's body (default: the description's robot "
                  "name, else the node's name); the body's identity is its fingerprint."),
    'infer_bindings': 'Bind goal fields to parameters and sensors found in the recordings.',
    'binding_max_shift': 'How far an inferred binding may move a field from its recording.',
    'bindings.*.tool': 'The action or service (its key under actions/services) it binds.',
    'bindings.*.field': 'Goal field path, e.g. target.pose.position.x (a message: each leaf).',
    'bindings.*.source': 'param:<key>[i] or sensor:<sensor>[i] (no index: the whole vector).',
    'bindings.*.max_shift': 'Largest distance from the recorded value a replay may send (> 0).',
    'bindings.*.max_offset': ('Which goals a sensor binding binds: recorded |goal - source| '
                              'within it (> 0; default max_shift).'),
    'bindings.*.max_angle': ('An orientation binding: field is a quaternion that follows the '
                             'TF sensor source; how far (radians) the frame may turn.'),
}


def name_list(name: str, value: Any, what: str) -> list[str]:
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


def layout(given: list[str]) -> dict[str, list[str]]:
    """
    Check every given parameter name against the known layout.

    :param given: the names of the node's declared parameters, in declaration order.
    :return: the item names of each group (``sensors`` -> ``['joints', 'object']``, in
        order of first appearance).
    :raises ConfigError: a name nothing reads, naming it and the nearest known name; a
        group given a value (the list form ``sensors: [a, b]``, no longer read).
    """
    items: dict[str, list[str]] = {group: [] for group in _GROUP_KEYS}
    for name in given:
        if name in _ROS_PARAMETERS or name.startswith(_ROS_PREFIXES):
            continue
        parts = name.split('.')
        head = parts[0]
        if head in _GROUP_KEYS:
            keys = _GROUP_KEYS[head]
            if len(parts) == 1:
                raise ConfigError(
                    f'{head}: must be a map from each name to its keys, {head}: {{<name>: '
                    f'{{{keys[0]}: ...}}}} (or flat, {head}.<name>.{keys[0]}); the list form '
                    f'({head}: [a, b]) is no longer read'
                )
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
    return items
