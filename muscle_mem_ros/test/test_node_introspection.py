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

"""Type resolution, field paths, message JSON and canonical CDR (no DDS needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from geometry_msgs.msg import PoseStamped
from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_demo_interfaces.msg import JointTolerance
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.errors import TypeResolutionError
from muscle_mem_ros.ros.messages.cdr import canonical_cdr
from muscle_mem_ros.ros.messages.introspection import (
    canonical_type_name,
    compile_field_path,
    encode_string,
    message_to_json,
    resolve_type,
)
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState, LaserScan
from std_srvs.srv import SetBool, Trigger
from test_msgs.action import Fibonacci
from test_msgs.msg import Arrays, BasicTypes, Nested, Strings, UnboundedSequences
from trajectory_msgs.msg import JointTrajectoryPoint


@pytest.mark.parametrize('name, kind, expected', [
    ('sensor_msgs/msg/JointState', 'msg', JointState),
    ('sensor_msgs/JointState', 'msg', JointState),
    ('test_msgs/action/Fibonacci', 'action', Fibonacci),
    ('muscle_mem_demo_interfaces/action/FollowJointTrajectory', 'action', FollowJointTrajectory),
    ('std_srvs/srv/SetBool', 'srv', SetBool),
])
def test_resolve_type(name, kind, expected):
    assert resolve_type(name, kind=kind) is expected


@pytest.mark.parametrize('name, kind, words', [
    ('sensor_msgs/msg/Nope', 'msg', "has no 'Nope'"),
    ('no_such_pkg/msg/X', 'msg', "'no_such_pkg' is not importable"),
    ('std_srvs/srv/SetBool', 'msg', "is a 'srv' type"),
    ('JointState', 'msg', 'not a type name'),
    ('a/b/c/d', 'msg', 'not a type name'),
])
def test_resolve_type_errors(name, kind, words):
    with pytest.raises(TypeResolutionError, match=words):
        resolve_type(name, kind=kind)


@pytest.mark.parametrize('name, kind, words', [
    ('this/msg/X', 'msg', "'this' is a module, not a ROS interface package"),
    ('.evil/msg/X', 'msg', 'not a ROS package name'),
    ('Sensor_msgs/msg/JointState', 'msg', 'not a ROS package name'),
    ('sensor__msgs/msg/JointState', 'msg', 'not a ROS package name'),
    ('std_srvs/srv/__class__', 'srv', 'not an interface name'),
    ('sensor_msgs/msg/jointState', 'msg', 'not an interface name'),
    ('sensor_msgs/msg/Joint.State', 'msg', 'not an interface name'),
    ('rclpy/action/ActionServer', 'action', "'rclpy' is not a ROS interface package"),
    ('json/msg/JSONDecoder', 'msg', "'json' is not a ROS interface package"),
    ('geometry_msgs/srv/Pose', 'srv', "'geometry_msgs' has no srv types"),
    ('sensor_msgs/nope/JointState', 'msg', "'nope' is not one of msg|srv|action"),
])
def test_resolve_type_imports_nothing_that_is_not_an_interface(name, kind, words, capfd):
    before = set(sys.modules)
    with pytest.raises(TypeResolutionError, match=words):
        resolve_type(name, kind=kind)
    assert not {m for m in set(sys.modules) - before if m.split('.')[0] in ('this', 'json')}
    assert 'The Zen of Python' not in capfd.readouterr().out


def test_resolve_type_refuses_a_class_rosidl_did_not_generate(tmp_path, monkeypatch):
    package = tmp_path / 'fake_msgs'
    (package / 'msg').mkdir(parents=True)
    (package / '__init__.py').write_text('')
    (package / 'fake_msgs_s__rosidl_typesupport_c.so').write_bytes(b'')
    (package / 'msg' / '__init__.py').write_text(
        'class Thing:\n    pass\n\n\nNotAClass = 3\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TypeResolutionError, match='not a generated ROS msg type'):
        resolve_type('fake_msgs/msg/Thing', kind='msg')
    with pytest.raises(TypeResolutionError, match='not a class'):
        resolve_type('fake_msgs/msg/NotAClass', kind='msg')
    with pytest.raises(TypeResolutionError, match="has no 'Missing'"):
        resolve_type('fake_msgs/msg/Missing', kind='msg')
    for name in [m for m in sys.modules if m.startswith('fake_msgs')]:
        monkeypatch.delitem(sys.modules, name)


def test_canonical_type_name():
    assert canonical_type_name('test_msgs/Fibonacci', kind='action') == \
        'test_msgs/action/Fibonacci'
    assert canonical_type_name('std_srvs/srv/SetBool', kind='srv') == 'std_srvs/srv/SetBool'


def test_field_paths_flatten_to_floats():
    pose = PoseStamped()
    pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = 1.0, 2.0, 3.0
    pose.pose.orientation.w = 1.0
    position = compile_field_path(PoseStamped, 'pose.position')
    assert position.size == 3
    assert position.extract(pose) == [1.0, 2.0, 3.0]
    whole = compile_field_path(PoseStamped, 'pose')
    assert whole.size == 7
    assert whole.extract(pose) == [1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0]
    js = JointState(name=['a', 'b'], position=[0.5, -0.5])
    joints = compile_field_path(JointState, 'position')
    assert joints.size is None
    assert joints.extract(js) == [0.5, -0.5]
    names = compile_field_path(JointState, 'name').extract(js)
    assert names == [encode_string('a'), encode_string('b')]
    scan = compile_field_path(LaserScan, 'ranges')
    assert scan.extract(LaserScan(ranges=[1.5, 2.5])) == [1.5, 2.5]
    arrays = compile_field_path(Arrays, 'byte_values')
    assert arrays.size == 3 and arrays.extract(Arrays()) == [0.0, 0.0, 0.0]
    assert compile_field_path(Arrays, 'basic_types_values').size == 3 * 13


@pytest.mark.parametrize('path, words', [
    ('pose.nope', "has no field 'nope'"),
    ('header.frame_id.x', 'not a message to descend into'),
    ('', 'not a field path'),
    ('pose..position', 'not a field path'),
])
def test_bad_field_paths(path, words):
    with pytest.raises(TypeResolutionError, match=words):
        compile_field_path(PoseStamped, path)


def test_encode_string_is_stable_and_exact():
    value = encode_string('gripper_open')
    assert value == encode_string('gripper_open')
    assert value != encode_string('gripper_closed')
    assert value == float(int(value)) and value < 2 ** 53
    # Independent of the process and of PYTHONHASHSEED (unlike hash()).
    code = ('from muscle_mem_ros.ros.messages.introspection import encode_string; '
            "print(repr(encode_string('gripper_open')))")
    for seed in ('1', '2'):
        out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                             env={**os.environ, 'PYTHONHASHSEED': seed}, check=True)
        assert float(out.stdout) == value


def test_message_to_json_is_strict_json():
    goal = FollowJointTrajectory.Goal(
        goal_tolerance=[JointTolerance(name='j1', position=float('nan'))])
    goal.trajectory.joint_names = ['j1']
    goal.trajectory.points = [JointTrajectoryPoint(positions=[0.25])]
    data = json.loads(message_to_json(goal))
    assert data['trajectory']['joint_names'] == ['j1']
    assert data['trajectory']['points'][0]['positions'] == [0.25]
    assert data['goal_tolerance'][0]['position'] == 'nan'
    assert json.loads(message_to_json(Arrays()))['byte_values'] == [0, 0, 0]


def sample_messages():
    goal = FollowJointTrajectory.Goal(
        goal_tolerance=[JointTolerance(name=n, position=0.01) for n in ('shoulder', 'elbow')])
    goal.trajectory.joint_names = ['shoulder', 'elbow', 'wrist']
    goal.trajectory.points = [JointTrajectoryPoint(positions=[0.1, 0.2, 0.3])]
    return [
        goal,
        Fibonacci.Goal(order=7),
        SetBool.Request(data=True),
        Trigger.Request(),
        ExecuteTask.Goal(task='pick', params_json='{"bin": 3}', resume_from_step=2),
        BasicTypes(int8_value=-3, float64_value=2.5, bool_value=True),
        Strings(string_value='abc', bounded_string_value='xy'),
        UnboundedSequences(string_values=['a', 'bcd'], float64_values=[1.0, 2.0]),
        Nested(),
        JointState(name=['a'], position=[1.0]),
    ]


@pytest.mark.parametrize('message', sample_messages(), ids=lambda m: type(m).__name__)
def test_canonical_cdr_is_deterministic_and_lossless(message):
    outputs = set()
    for _ in range(20):
        raw = bytes(serialize_message(message))
        canonical = canonical_cdr(raw, type(message))
        assert len(canonical) == len(raw)
        assert deserialize_message(canonical, type(message)) == message
        outputs.add(canonical)
    assert len(outputs) == 1


def test_canonical_cdr_keeps_what_it_cannot_walk():
    raw = b'\x00\x01\x00\x00\x01'
    assert canonical_cdr(raw, Fibonacci.Goal) == raw
    assert canonical_cdr(b'', Fibonacci.Goal) == b''
