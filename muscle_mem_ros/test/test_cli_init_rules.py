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

"""The rules ``muscle-mem init`` writes by: fields, tolerances, max_age, keys (no ROS)."""

from __future__ import annotations

from muscle_mem_ros.cli.initrules import (
    choose_key, float_fields, kind_of, max_age, Sampled, sensor_from,
)
from muscle_mem_ros.records import CompareMode
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


def test_tolerance_is_the_noise_with_a_margin_floored_and_rounded_up():
    joints = kind_of('sensor_msgs/msg/JointState', {}, nested)
    assert not isinstance(joints, str)
    still = Sampled('/js', 'sensor_msgs/msg/JointState', joints, (0.0, 0.1, 0.2),
                    ((1.0, 2.0), (1.0, 2.0), (1.0, 2.0)), ('a', 'b'))
    noisy = Sampled('/js', 'sensor_msgs/msg/JointState', joints, (0.0, 0.1, 0.2),
                    ((1.0, 2.0), (1.0, 2.03), (1.0, 2.0)), ('a', 'b'))
    entry, shaky = sensor_from(still), sensor_from(noisy)
    assert not isinstance(entry, str) and not isinstance(shaky, str)
    assert entry.tolerance == (0.02, 0.02)  # no noise: the joint floor
    # b: max(4 std = 0.0566, peak to peak 0.03) * 1.5 = 0.0849 -> 0.085
    assert shaky.tolerance == (0.02, 0.085) and entry.max_age == 0.5
    one = Sampled('/js', 'sensor_msgs/msg/JointState', joints, (0.0,), ((1.0, 2.0),))
    assert 'no rate' in str(sensor_from(one))


def test_keys_are_the_shortest_unique_tail():
    taken: set[str] = set()
    assert choose_key('/arm/follow_joint_trajectory', taken) == 'follow_joint_trajectory'
    assert choose_key('/left/gripper/set', taken) == 'set'
    assert choose_key('/right/gripper/set', taken) == 'gripper_set'
    assert choose_key('/9lives', taken) == 'k9lives'
