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

"""The rules ``muscle-mem init`` writes by: fields, tolerances, motion, tools, stops, keys."""

from __future__ import annotations

import re

from muscle_mem_ros.cli import init, survey
from muscle_mem_ros.cli.initrules import (
    choose_key, float_fields, FLOORS, kind_of, max_age, moving, Sampled, sensor_from,
    SILENT_DEFAULTS, tolerance_note, Tool,
)
from muscle_mem_ros.cli.inittools import description_timeout, sort_servers, stop_of
from muscle_mem_ros.records import CompareMode
import numpy as np
import pytest

VECTOR3 = {'x': 'double', 'y': 'double', 'z': 'double'}
TYPES = {
    'geometry_msgs/Vector3': VECTOR3,
    'std_msgs/Header': {'stamp': 'builtin_interfaces/Time', 'frame_id': 'string'},
    'demo/Mixed': {'gain': 'float', 'mode': 'uint8'},
}


def nested(name: str) -> dict[str, str]:
    return TYPES[name]


def test_floats_are_read_and_integers_strings_headers_sequences_are_not():
    fields = {'header': 'std_msgs/Header', 'linear': 'geometry_msgs/Vector3',
              'mixed': 'demo/Mixed', 'count': 'int32', 'label': 'string',
              'covariance': 'double[4]', 'ranges': 'sequence<float>', 'ok': 'boolean'}
    assert float_fields(fields, nested) == (['linear', 'mixed.gain', 'covariance'], 8)


def test_kinds_joints_positions_big_arrays_and_the_numeric_rule():
    joints = kind_of('sensor_msgs/msg/JointState', {}, nested)
    assert not isinstance(joints, str) and joints.fields == ('position',)
    odom = kind_of('nav_msgs/msg/Odometry', {}, nested)
    assert not isinstance(odom, str) and odom.fields == ('pose.pose.position',)
    assert odom.mode is CompareMode.NORM
    assert 'big array' in str(kind_of('sensor_msgs/msg/LaserScan', {}, nested))
    assert kind_of('x/msg/Gone', None, nested) == 'its type is not installed here'
    assert kind_of('std_msgs/msg/String', {'data': 'string'}, nested) == \
        'no floating-point field to compare'
    wide = kind_of('x/msg/Wide', {'v': 'double[17]'}, nested)
    assert wide == '17 numbers: more than 16 (a big array)'
    twist_fields = {'linear': 'geometry_msgs/Vector3', 'angular': 'geometry_msgs/Vector3'}
    twist = kind_of('geometry_msgs/msg/Twist', twist_fields, nested)
    assert not isinstance(twist, str) and twist.fields == ('linear', 'angular')


@pytest.mark.parametrize('times, age, rate', [
    ([i * 0.02 for i in range(100)], 0.5, 50.0),     # 50 Hz: the 0.5 s floor
    ([i * 0.5 for i in range(10)], 2.5, 2.0),        # 2 Hz: five periods
    ([0.0, 0.1, 0.2, 1.0, 1.1], 1.6, 10.0),          # a 0.8 s gap: twice it
])
def test_max_age_from_the_rate(times, age, rate):
    found_age, found_rate = max_age(times)
    assert found_age == pytest.approx(age) and found_rate == pytest.approx(rate)


def _joints(rows: list[tuple[float, ...]], names: tuple[str, ...] = ('a', 'b')) -> Sampled:
    joints = kind_of('sensor_msgs/msg/JointState', {}, nested)
    assert not isinstance(joints, str)
    return Sampled('/js', 'sensor_msgs/msg/JointState', joints,
                   tuple(i * 0.02 for i in range(len(rows))), tuple(rows), names)


def test_tolerance_is_the_noise_with_a_margin_floored_and_rounded_up():
    still = _joints([(1.0, 2.0), (1.0, 2.0), (1.0, 2.0)])
    noisy = _joints([(1.0, 2.0), (1.0, 2.03), (1.0, 2.0)])
    quiet = _joints([(1.0, 2.0), (1.00001, 2.03), (1.0, 2.0)])
    entry, shaky, hushed = sensor_from(still), sensor_from(noisy), sensor_from(quiet)
    assert not isinstance(entry, str) and not isinstance(shaky, str)
    assert not isinstance(hushed, str)
    # no noise at all (a simulation): the default, which says nothing of the robot
    assert entry.tolerance == (SILENT_DEFAULTS['joints'],) * 2 and entry.max_age == 0.5
    assert tolerance_note(entry) == ('tolerance: the default 0.02 for a sensor that made no '
                                     'noise at rest (a simulation?): calibrate it after two runs')
    # b: max(4 std = 0.0566, peak to peak 0.03) * 1.5 = 0.0849 -> 0.085
    assert shaky.tolerance == (0.02, 0.085)
    assert tolerance_note(shaky) == (
        'tolerance: 6 x the noise at rest (1.5 x max(4 std, peak to peak)); the default 0.02 '
        'for a sensor that made no noise at rest (a simulation?): calibrate it after two runs '
        'for a')
    # a: 10 um peak to peak, quieter than the floor
    assert hushed.tolerance == (FLOORS['joints'], 0.085)
    assert 'the floor 0.001 (quieter than that at rest) for a' in tolerance_note(hushed)
    one = Sampled('/js', 'sensor_msgs/msg/JointState', entry.sampled.kind, (0.0,), ((1.0, 2.0),))
    assert 'no rate' in str(sensor_from(one))


def test_a_lab_gantry_and_its_scale_get_tolerances_from_their_noise():
    rng = np.random.default_rng(3)
    axes = [tuple(v) for v in rng.normal((0.1, 0.2), 0.0002, (150, 2))]
    entry = sensor_from(_joints(axes))
    assert not isinstance(entry, str) and entry.rules == ('noise', 'noise')
    assert all(0.0008 < t < 0.0045 for t in entry.tolerance)  # noise 0.2 mm, wells 9 mm apart
    number = kind_of('std_msgs/msg/Float64', {'data': 'double'}, nested)
    assert not isinstance(number, str)
    grams = Sampled('/scale', 'std_msgs/msg/Float64', number,
                    tuple(i * 0.05 for i in range(60)),
                    tuple((v,) for v in rng.normal(86.0, 0.01, 60)))
    scale = sensor_from(grams)
    assert not isinstance(scale, str)
    assert 0.04 < scale.tolerance[0] < 0.5  # noise 0.01 g, 0.5 g per aspirate (1 %: 0.86)
    assert tolerance_note(scale).startswith('tolerance: 6 x the noise at rest')


def test_a_robot_that_moves_while_sampled_is_told_apart_from_noise():
    rng = np.random.default_rng(4)
    noise = rng.normal(0.0, 0.0002, (150, 2))
    still = [tuple(v) for v in noise + (0.1, 0.2)]
    assert moving(_joints(still)) == ''
    creeping = [(0.1 + 0.0002 * i + n[0], 0.2 + n[1]) for i, n in enumerate(noise)]
    said = moving(_joints(creeping, ('x', 'y')))
    assert re.fullmatch(r'/js: x moved 0\.0[23]\d* in 3\.0 s', said), said  # 0.2 mm a tick
    # a drift under the floor is not the robot moving; an object is not the robot
    assert moving(_joints([(0.1 + 1e-6 * i, 0.2) for i in range(150)])) == ''
    pose = kind_of('geometry_msgs/msg/PoseStamped', {}, nested)
    assert not isinstance(pose, str)
    cube = Sampled('/cube', 'geometry_msgs/msg/PoseStamped', pose, (0.0, 0.1, 0.2),
                   ((0.0, 0, 0), (0.1, 0, 0), (0.2, 0, 0)))
    assert moving(cube) == ''


def test_only_robot_actions_are_tools_and_each_action_says_its_stop():
    servers = [
        Tool('action', '/arm/follow_joint_trajectory',
             'control_msgs/action/FollowJointTrajectory', '/arm'),
        Tool('action', '/base/goto', 'x/action/MoveToPose', '/base'),
        Tool('service', '/base/base_stop', 'std_srvs/srv/Trigger', '/base'),
        Tool('action', '/mixer/mix', 'test_msgs/action/Fibonacci', '/mixer'),
        Tool('service', '/mixer/estop', 'std_srvs/srv/SetBool', '/mixer'),
        Tool('service', '/gripper/set', 'std_srvs/srv/SetBool', '/gripper'),
        Tool('service', '/reset_world', 'std_srvs/srv/Empty', '/sim'),
        Tool('service', '/controller_manager/list_controllers',
             'controller_manager_msgs/srv/ListControllers', '/controller_manager'),
        Tool('service', '/driver/change_state', 'lifecycle_msgs/srv/ChangeState', '/driver'),
        Tool('service', '/arm/get_parameters', 'rcl_interfaces/srv/GetParameters', '/arm'),
        Tool('service', '/arm/set_parameters', 'rcl_interfaces/srv/SetParameters', '/arm'),
    ]
    tools, stops, left = sort_servers(servers)
    assert [t.server for t in tools] == ['/arm/follow_joint_trajectory', '/base/goto',
                                         '/gripper/set', '/mixer/mix']
    assert [s.server for s in stops] == ['/base/base_stop', '/mixer/estop']
    rules = {s.name: s.reason.split(':')[0] for s in left}
    assert rules == {
        '/base/base_stop': 'a stop', '/mixer/estop': 'a stop', '/reset_world': 'a reset',
        '/controller_manager/list_controllers': "the controller manager's",
        '/driver/change_state': 'a lifecycle service',
        'parameter services of /arm': '/arm/get_parameters, /arm/set_parameters'}
    arm, goto, _, mix = (stop_of(t, stops) for t in tools)
    assert not arm.service and 'one-point trajectory' in arm.note
    assert goto.service == '/base/base_stop' and goto.service_type == ''
    # a SetBool e-stop is not called with an empty request (data: false releases it)
    assert not mix.service and mix.note.startswith('stop: none known for /mixer/mix')


def test_the_description_wait_is_a_margin_on_what_init_waited_with_a_floor():
    assert description_timeout(0.05) == 10.0
    assert description_timeout(1.9) == 10.0
    assert description_timeout(3.1) == 16.0
    assert description_timeout(None) == 10.0


def test_the_wait_on_an_empty_graph_that_help_states_is_the_surveys():
    assert init.SETTLE_MORE == survey.MAX_SETTLE
    assert init.EMPTY_WAIT == 12.0 and FLOORS['joints'] < 0.0045


def test_keys_are_the_shortest_unique_tail():
    taken: set[str] = set()
    assert choose_key('/arm/follow_joint_trajectory', taken) == 'follow_joint_trajectory'
    assert choose_key('/left/gripper/set', taken) == 'set'
    assert choose_key('/right/gripper/set', taken) == 'gripper_set'
    assert choose_key('/9lives', taken) == 'k9lives'
