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
Sensors that select elements by name: several publishers on one JointState topic.

Real DDS: two publishers (an arm's broadcaster and a gripper driver, each its
own node) on one topic, with different names, lengths and orders; the sensor
hub of a real node configured from parameters with ``joints: [...]``.
"""

from __future__ import annotations

from collections.abc import Callable
import uuid

from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.records import Snapshot
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.node.config import load_config, NODE_OPTIONS
from node_helpers import wait_until
import pytest
import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState

JOINTS = ['shoulder', 'elbow', 'wrist', 'finger']


def overrides(topic: str, **extra) -> list[Parameter]:
    values = {
        'store_path': ':memory:',
        'sensors.joints.topic': topic,
        'sensors.joints.type': 'sensor_msgs/msg/JointState',
        'sensors.joints.fields': ['position'],
        'sensors.joints.joints': JOINTS,
        'sensors.joints.tolerance': 0.01,
        'sensors.joints.max_age': 30.0,
        **extra,
    }
    return [Parameter(name, value=value) for name, value in values.items()]


@pytest.fixture
def world():
    context = rclpy.Context()
    rclpy.init(context=context)
    topic = f'/t{uuid.uuid4().hex[:8]}/joint_states'
    nodes: list[Node] = []
    hubs: list[SensorHub] = []

    def make_cache(**extra) -> tuple[SensorHub, ToleranceCheck, list[str]]:
        node = Node(f'cache_{uuid.uuid4().hex[:8]}', context=context,
                    parameter_overrides=overrides(topic, **extra), **NODE_OPTIONS)
        nodes.append(node)
        config = load_config(node)
        errors: list[str] = []
        hub = SensorHub(node=node, sensors=config.sensors, on_error=errors.append)
        hubs.append(hub)
        return hub, ToleranceCheck(sensors=[s.spec for s in config.sensors]), errors

    def make_publisher(name: str):
        node = Node(name, context=context)
        nodes.append(node)
        return node.create_publisher(JointState, topic, 10)

    try:
        yield make_cache, make_publisher
    finally:
        for hub in hubs:
            hub.close()
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=context)


def joint_state(names: list[str], positions: list[float], velocities=()) -> JointState:
    return JointState(name=names, position=positions, velocity=list(velocities))


def publish_until(publisher, message: JointState, done: Callable[[], bool]) -> bool:
    """Publish ``message`` until ``done()`` (discovery may drop the first ones)."""
    return wait_until(lambda: (publisher.publish(message), done())[1], timeout=20.0)


def features(hub: SensorHub):
    return hub.capture().features.get('joints')


def merged(hub: SensorHub, message: JointState) -> Callable[[], bool]:
    """Return a predicate: ``message`` is the last one the hub has read."""
    def done() -> bool:
        raw = hub.latest_raw('joints')
        return raw is not None and deserialize_message(raw, JointState) == message
    return done


def test_two_publishers_give_one_vector_in_the_configured_order(world):
    make_cache, make_publisher = world
    hub, check, _errors = make_cache()
    arm = make_publisher('arm_broadcaster')
    gripper = make_publisher('gripper_driver')
    recorded = Snapshot(features={'joints': (0.1, 0.2, 0.3, 0.04)}, stamps={'joints': 0.0})

    # The arm alone: its order is not the configured one, and 'finger' has not been seen.
    first = joint_state(['wrist', 'shoulder', 'elbow'], [0.3, 0.1, 0.2])
    assert publish_until(arm, first, merged(hub, first))
    snapshot = hub.capture()
    assert 'joints' not in snapshot.features
    result = check.evaluate(recorded, snapshot, now_time=hub.now())
    assert not result.passed
    assert [(f.sensor, f.reason) for f in result.failures] == [('joints', 'missing')]

    # The gripper (other names, other length, no velocities) completes the vector.
    assert publish_until(gripper, joint_state(['finger'], [0.04]),
                         lambda: features(hub) is not None)
    assert features(hub) == (0.1, 0.2, 0.3, 0.04)
    assert check.evaluate(recorded, hub.capture(), now_time=hub.now()).passed

    # Many arm messages in yet another order after the gripper's last one: the
    # newest messages carry no 'finger', its latest value is kept.
    moved = joint_state(['elbow', 'wrist', 'shoulder'], [0.25, 0.35, 0.15], [1.0, 1.0, 1.0])
    for _ in range(50):
        arm.publish(moved)
    assert wait_until(lambda: features(hub) == (0.15, 0.25, 0.35, 0.04), timeout=20.0), \
        features(hub)
    result = check.evaluate(recorded, hub.capture(), now_time=hub.now())
    assert not result.passed
    assert result.failures[0].sensor == 'joints'


def test_the_gripper_first_then_the_arm_with_velocities(world):
    make_cache, make_publisher = world
    hub, _check, _errors = make_cache(**{'sensors.joints.fields': ['position', 'velocity'],
                                         'sensors.joints.tolerance': [0.01] * 8})
    gripper = make_publisher('gripper_driver')
    arm = make_publisher('arm_broadcaster')
    grip = joint_state(['finger'], [0.02], [0.5])
    assert publish_until(gripper, grip, merged(hub, grip))
    assert features(hub) is None
    # Arm positions without velocities: the velocities of the arm's names are still unseen.
    still = joint_state(['shoulder', 'elbow', 'wrist'], [1.0, 2.0, 3.0])
    assert publish_until(arm, still, merged(hub, still))
    assert features(hub) is None
    moving = joint_state(['shoulder', 'elbow', 'wrist'], [1.0, 2.0, 3.0], [0.1, 0.2, 0.3])
    assert publish_until(arm, moving, lambda: features(hub) is not None)
    # Positions of the configured names in order, then their velocities.
    assert features(hub) == (1.0, 2.0, 3.0, 0.02, 0.1, 0.2, 0.3, 0.5)


def test_a_name_never_published_fails_every_check_and_is_reported(world):
    make_cache, make_publisher = world
    hub, check, errors = make_cache(**{'sensors.joints.max_age': 0.05})
    arm = make_publisher('arm_broadcaster')
    everything = joint_state(['shoulder', 'elbow', 'wrist', 'fingers'], [0.1, 0.2, 0.3, 0.0])
    assert publish_until(arm, everything, lambda: (hub.capture(), bool(errors))[1])
    assert 'sensors.joints.joints: finger not received' in errors[0]
    recorded = Snapshot(features={'joints': (0.1, 0.2, 0.3, 0.0)}, stamps={'joints': 0.0})
    result = check.evaluate(recorded, hub.capture(), now_time=hub.now())
    assert not result.passed and result.failures[0].reason == 'missing'


@pytest.mark.parametrize('extra, parameter, words', [
    ({'sensors.joints.type': 'sensor_msgs/msg/LaserScan', 'sensors.joints.fields': ['ranges']},
     'sensors.joints.joints', "no 'name' array"),
    ({'sensors.joints.fields': ['header.stamp']}, 'sensors.joints.fields', 'arrays of numbers'),
    ({'sensors.joints.joints': ['a', 'a']}, 'sensors.joints.joints', 'unique'),
    ({'sensors.joints.tolerance': [0.1, 0.1]}, 'sensors.joints.tolerance', 'give 4 elements'),
])
def test_bad_by_name_configuration_is_named(world, extra, parameter, words):
    make_cache, _ = world
    with pytest.raises(ConfigError) as info:
        make_cache(**extra)
    assert str(info.value).startswith(f'{parameter}:'), str(info.value)
    assert words in str(info.value)
