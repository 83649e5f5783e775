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
The parameters page and the commented reference say what the node declares, and no more.

``docs/parameters.md`` is written by hand for people, and the node's parameters change with
the code; this test keeps the two from drifting apart. The names come from the node's own
descriptors (``paramnames``: every parameter the node declares is declared with the
description kept there, per-item keys written ``sensors.*.topic``), and the page's tables must
name exactly those (``sensors.<name>.topic``), each way. The type column must be the type the
node declares (read from the descriptors of a plain rclpy node that reads a params file giving
every key, as ``ros2 param describe`` would show them), and a default written as one literal
must be the value the node declares when the parameter is not given. Every parameter must also
appear in ``config/behavior_cache.yaml``, the commented reference (a top-level one as a key,
set or commented out; a per-item key at least named in its group's comment).
"""

from __future__ import annotations

from pathlib import Path
import re

from muscle_mem_ros.ros.node.paramnames import _DESCRIPTIONS, describe, layout
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / 'docs' / 'parameters.md'
REFERENCE = REPO / 'muscle_mem_ros' / 'config' / 'behavior_cache.yaml'
ROW = re.compile(r'^\|\s*`([^`]+)`\s*\|([^|]*)\|([^|]*)\|')
LITERAL = re.compile(r'^`([^`]*)`$')
GROUP_ITEM = {'sensors': 'joints', 'actions': 'arm', 'services': 'gripper', 'bindings': 'b'}
"""The item name each group has in :data:`FULL` (the names the descriptors are read under)."""

FULL = {
    'autostart': True, 'store_path': ':memory:', 'robot_id': 'r1', 'agent_action': '',
    'cache_mode': 'learn', 'replay_requires': 'none', 'step_back': '30%/10',
    'step_timeout': 30.0, 'post_check_timeout': 2.0, 'sensor_startup_timeout': 10.0,
    'agent_timeout': 600.0, 'allow_unchecked_replay': False,
    'abandoned_recording_retention': 604800.0, 'infer_bindings': True,
    'binding_max_shift': 0.1, 'watch': True, 'watch_rate': 40.0, 'watch_tolerance_scale': 1.0,
    'stop_timeout': 5.0, 'rest_window': 0.25, 'robot_description_file': '/tmp/robot.urdf',
    'robot_description_timeout': 0.0, 'body_name': 'b',
    'sensors': {
        'joints': {'topic': '/joint_states', 'type': 'sensor_msgs/msg/JointState',
                   'fields': ['position'], 'joints': ['a', 'b'], 'tolerance': [0.02],
                   'mode': 'abs', 'max_age': 1.0, 'bind': 'auto', 'watch': 'auto'},
        'object': {'topic': '/object_pose', 'type': 'geometry_msgs/msg/PoseStamped',
                   'fields': ['pose.position'], 'tolerance': [0.01]},
        'camera': {'topic': '/camera/image_raw', 'type': 'sensor_msgs/msg/Image',
                   'encoding': 'rgb8', 'width': 320, 'height': 240, 'cell': 16,
                   'roi': [0, 16, 320, 224], 'masks': [0, 16, 32, 32], 'tolerance': [0.1],
                   'mode': 'image'},
        'tag': {'frame': 'tag', 'relative_to': 'map', 'tolerance': [0.01, 0.05],
                'mode': 'pose'},
    },
    'actions': {
        'arm': {'server': '/arm/follow_joint_trajectory',
                'type': 'muscle_mem_demo_interfaces/action/FollowJointTrajectory',
                'proxy': '/muscle_mem/arm', 'record_from': 'proxy',
                'success_field': 'error_code', 'success_when': 0, 'agreement': 0.005,
                'stop_goal': '{"trajectory": {"joint_names": ["j1"], "points": '
                             '[{"positions": [0.0]}]}}'},
        'stopped': {'server': '/arm2/follow_joint_trajectory',
                    'type': 'muscle_mem_demo_interfaces/action/FollowJointTrajectory',
                    'stop_service': '/emergency_stop',
                    'stop_service_type': 'std_srvs/srv/Trigger'},
    },
    'services': {
        'gripper': {'server': '/gripper/set', 'type': 'std_srvs/srv/SetBool',
                    'proxy': '/muscle_mem/gripper', 'record_from': 'proxy',
                    'success_field': 'success', 'success_when': True, 'agreement': 0.005},
    },
    'bindings': {
        'b': {'tool': 'arm', 'field': 'trajectory.points[0]', 'source': 'sensor:object',
              'max_shift': 0.05, 'max_offset': 0.06},
        'turn': {'tool': 'arm', 'field': 'target.pose.orientation', 'source': 'sensor:tag',
                 'max_angle': 0.5, 'max_offset': 0.3},
    },
}
"""A params file giving every key (``stop_goal`` and ``stop_service`` on two actions)."""

MINIMAL = {
    'sensors': {'joints': {'topic': '/joint_states', 'type': 'sensor_msgs/msg/JointState',
                           'fields': ['position'], 'tolerance': [0.02]}},
    'actions': {'arm': {'server': '/arm/follow_joint_trajectory',
                        'type': 'muscle_mem_demo_interfaces/action/FollowJointTrajectory'}},
    'services': {'gripper': {'server': '/gripper/set', 'type': 'std_srvs/srv/SetBool'}},
    'bindings': {'b': {'tool': 'arm', 'field': 'trajectory.points[0]',
                       'source': 'sensor:joints'}},
}
"""A params file giving only what is required: every other parameter takes its default."""


def documented() -> dict[str, tuple[str, str]]:
    """Return the page's rows: pattern name (``sensors.*.topic``) -> (type, default)."""
    rows: dict[str, tuple[str, str]] = {}
    for line in PAGE.read_text().splitlines():
        found = ROW.match(line)
        if found is None:
            continue
        name = re.sub(r'^(\w+)\.<name>\.', r'\1.*.', found.group(1))
        assert name not in rows, f'{name} has two rows in {PAGE.name}'
        rows[name] = (found.group(2).strip(), found.group(3).strip())
    return rows


def declared() -> set[str]:
    """Return the names the node describes, per-item keys as ``sensors.*.topic``."""
    return set(_DESCRIPTIONS)


CAMERA_KEYS = ('encoding', 'width', 'height', 'cell', 'roi', 'masks')
"""Keys only a camera sensor has: read under ``sensors.camera`` in :data:`FULL`."""


ONLY = {('sensors', 'frame'): 'tag', ('sensors', 'relative_to'): 'tag',
        ('bindings', 'max_angle'): 'turn'}
"""Keys only a TF sensor or an orientation binding has: their items in :data:`FULL`."""


def concrete(pattern: str) -> str:
    """Return the name a pattern has in :data:`FULL` (``sensors.*.topic`` -> ...joints...)."""
    group, _, key = pattern.partition('.*.')
    item = 'camera' if group == 'sensors' and key in CAMERA_KEYS else \
        ONLY.get((group, key), GROUP_ITEM.get(group))
    return f'{group}.{item}.{key}' if key else pattern


def pattern_of(name: str) -> str:
    """Return the pattern of a declared name (``sensors.object.topic`` -> ``sensors.*.topic``)."""
    parts = name.split('.')
    return f'{parts[0]}.*.{parts[2]}' if len(parts) == 3 else name


def test_the_page_names_every_parameter_the_node_declares_and_no_other():
    on_page, known = set(documented()), declared()
    assert on_page, f'no parameter table found in {PAGE}'
    for name in known:
        layout([concrete(name)])  # a name the node accepts, not a stale description
        assert describe(concrete(name))
    assert on_page == known, (f'declared but not on {PAGE.name}: {sorted(known - on_page)}; '
                              f'on {PAGE.name} but not declared: {sorted(on_page - known)}')


def test_every_parameter_is_in_the_commented_reference():
    text = REFERENCE.read_text()
    missing = []
    for name in sorted(declared()):
        if '.*.' in name:
            group, _, key = name.partition('.*.')
            if group not in text or not re.search(rf'\b{re.escape(key)}\b', text):
                missing.append(name)
        elif not re.search(rf'^\s*(#\s*)?{re.escape(name)}:', text, re.MULTILINE):
            missing.append(name)
    assert not missing, f'not in {REFERENCE.name}: {missing}'


def _descriptors(tmp_path: Path, values: dict) -> dict[str, tuple[object, object]]:
    """Read ``values`` as the node does; return each parameter's (descriptor, value)."""
    from muscle_mem_ros.ros.node.config import load_config, NODE_OPTIONS, read_autostart
    import rclpy
    from rclpy.node import Node

    path = tmp_path / 'params.yaml'
    path.write_text(yaml.safe_dump({'muscle_mem': {'ros__parameters': values}}))
    context = rclpy.Context()
    rclpy.init(context=context, args=['--ros-args', '--params-file', str(path)])
    try:
        node = Node('muscle_mem', context=context, **NODE_OPTIONS)
        try:
            read_autostart(node)
            load_config(node)
            names = [n for n in node.list_parameters([], 0).names
                     if n not in ('use_sim_time', 'start_type_description_service')]
            return {n: (node.describe_parameter(n), node.get_parameter(n).value)
                    for n in names}
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def _type_word(descriptor) -> str:
    """Return the page's word for a descriptor's type (``dynamic`` for dynamic typing)."""
    from rcl_interfaces.msg import ParameterType

    if descriptor.dynamic_typing:
        return 'dynamic'
    return {
        ParameterType.PARAMETER_BOOL: 'bool', ParameterType.PARAMETER_INTEGER: 'integer',
        ParameterType.PARAMETER_DOUBLE: 'double', ParameterType.PARAMETER_STRING: 'string',
        ParameterType.PARAMETER_DOUBLE_ARRAY: 'double[]',
        ParameterType.PARAMETER_STRING_ARRAY: 'string[]',
    }.get(descriptor.type, f'type {descriptor.type}')


@pytest.fixture(scope='module')
def node_parameters(tmp_path_factory):
    """Return the descriptors of a node given every key, and the values of one given few."""
    full = _descriptors(tmp_path_factory.mktemp('full'), FULL)
    minimal = _descriptors(tmp_path_factory.mktemp('minimal'), MINIMAL)
    return full, minimal


def test_the_node_declares_every_described_parameter(node_parameters):
    full, _ = node_parameters
    seen = {pattern_of(n) for n in full}
    assert seen == declared(), (sorted(declared() - seen), sorted(seen - declared()))


def test_the_type_column_is_the_declared_type(node_parameters):
    full, _ = node_parameters
    rows = documented()
    wrong = []
    for name in sorted(declared() & set(rows)):
        word = _type_word(full[concrete(name)][0])
        written = rows[name][0]
        if written != word and not (word == 'dynamic' and written.startswith('dynamic (')):
            wrong.append(f'{name}: the page says {written!r}, the node declares {word!r}')
    assert not wrong, '\n'.join(wrong)


def test_a_literal_default_is_the_declared_default(node_parameters):
    _, minimal = node_parameters
    wrong = []
    for name, (_type, default) in sorted(documented().items()):
        literal = LITERAL.match(default)
        if literal is None:
            continue  # a default in words: required, or derived from another value
        expected = yaml.safe_load(literal.group(1))
        got = minimal.get(concrete(name), (None, '(not declared)'))[1]
        if got != expected:
            wrong.append(f'{name}: the page says {default}, the node declares {got!r}')
    assert not wrong, '\n'.join(wrong)
