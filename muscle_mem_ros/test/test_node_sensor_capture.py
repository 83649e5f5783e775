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
Sensor capture never dies silently, and works without rclpy's private wait-set API.

Real DDS: a real node configured from parameters, its SensorHub, and a real
publisher (and a real ``/clock`` publisher for simulated time). The receive
loop is made to fail through the hub's documented test hook (``fault_hook``);
the fallback to plain subscriptions is forced with
``MUSCLE_MEM_PLAIN_SUBSCRIPTIONS=1`` (:mod:`muscle_mem_ros.ros.rclfix.waitset`).
"""

from __future__ import annotations

import time
import uuid

from builtin_interfaces.msg import Time
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.records import CompareMode, SensorSpec, Snapshot
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.node.config import load_config, NODE_OPTIONS
from muscle_mem_ros.ros.rclfix import waitset
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
from node_helpers import wait_until
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState


@pytest.fixture
def world():
    context = rclpy.Context()
    rclpy.init(context=context)
    topic = f'/t{uuid.uuid4().hex[:8]}/joint_states'
    nodes: list[Node] = []
    hubs: list[SensorHub] = []
    made: list[Node] = []

    def make_hub(**extra) -> tuple[SensorHub, list[str]]:
        values = {'store_path': ':memory:', 'sensors.joints.topic': topic,
                  'sensors.joints.type': 'sensor_msgs/msg/JointState',
                  'sensors.joints.fields': ['position'], 'sensors.joints.tolerance': 0.01,
                  'sensors.joints.max_age': 30.0, **extra}
        node = Node(f'cache_{uuid.uuid4().hex[:8]}', context=context, **NODE_OPTIONS,
                    parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])
        nodes.append(node)
        errors: list[str] = []
        hub = SensorHub(node=node, sensors=load_config(node).sensors, on_error=errors.append)
        hubs.append(hub)
        made.append(node)
        return hub, errors

    publisher_node = Node(f'pub_{uuid.uuid4().hex[:8]}', context=context)
    nodes.append(publisher_node)
    publisher = publisher_node.create_publisher(JointState, topic, 10)
    try:
        yield make_hub, publisher, made, publisher_node
    finally:
        for hub in hubs:
            hub.close()
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=context)


def fail_once(hub: SensorHub) -> list[int]:
    """Make the hub's receive loop raise once; return the list counting the raises."""
    raised: list[int] = []

    def hook() -> None:
        if not raised:
            raised.append(1)
            raise RuntimeError('injected capture fault')
    hub.fault_hook = hook
    return raised


def keeps_capturing(hub: SensorHub, publisher, errors: list[str]) -> None:
    """After one injected fault: reported, then first message, fresh data and snapshots."""
    message = JointState(name=['a', 'b'], position=[0.5, -0.5])
    assert wait_until(lambda: (publisher.publish(message), bool(errors))[1], 20.0)
    assert any('capture failed' in e and 'injected capture fault' in e for e in errors), errors
    assert wait_until(lambda: (publisher.publish(message), not hub.silent())[1], 20.0)
    since = hub.now()
    # wait_newer needs the receive thread: it only returns True if the loop is alive.
    assert wait_until(lambda: (publisher.publish(message), hub.wait_newer(since, 0.2))[1], 20.0)
    assert hub.capture().features['joints'] == (0.5, -0.5)


def test_this_rclpy_passes_the_wait_set_check(monkeypatch):
    monkeypatch.delenv(waitset.FORCE_FALLBACK, raising=False)
    assert waitset.unavailable() is None
    monkeypatch.setenv(waitset.FORCE_FALLBACK, '1')
    assert waitset.FORCE_FALLBACK in (waitset.unavailable() or '')


def test_an_error_in_the_receive_loop_is_logged_and_the_loop_restarts(world, monkeypatch):
    monkeypatch.delenv(waitset.FORCE_FALLBACK, raising=False)
    make_hub, publisher, _made, _publisher_node = world
    hub, errors = make_hub()
    assert hub.fallback is None
    raised = fail_once(hub)
    keeps_capturing(hub, publisher, errors)
    assert raised == [1]


def test_plain_subscriptions_fallback_captures_and_recovers(world, monkeypatch):
    monkeypatch.setenv(waitset.FORCE_FALLBACK, '1')
    make_hub, publisher, _made, _publisher_node = world
    hub, errors = make_hub()
    assert hub.fallback is not None and waitset.FORCE_FALLBACK in hub.fallback
    raised = fail_once(hub)
    keeps_capturing(hub, publisher, errors)
    assert raised == [1]


def test_staleness_follows_the_node_clock_under_simulated_time(world, monkeypatch):
    monkeypatch.delenv(waitset.FORCE_FALLBACK, raising=False)
    make_hub, publisher, made, publisher_node = world
    max_age = 0.5
    hub, _errors = make_hub(**{'use_sim_time': True, 'sensors.joints.max_age': max_age})
    (cache_node,) = made
    executor = SingleThreadedExecutor(context=cache_node.context)
    executor.add_node(cache_node)  # its TimeSource subscribes to /clock
    spinner = Spinner(executor)
    try:
        clock = publisher_node.create_publisher(Clock, '/clock', 10)

        def set_clock(seconds: int) -> bool:
            def reached() -> bool:
                clock.publish(Clock(clock=Time(sec=seconds)))
                return cache_node.get_clock().now().nanoseconds == seconds * 10**9
            return wait_until(reached, 20.0)

        assert set_clock(100)
        message = JointState(name=['a', 'b'], position=[0.5, -0.5])
        assert wait_until(lambda: (publisher.publish(message), not hub.silent())[1], 20.0)
        last = time.monotonic()
        check = ToleranceCheck(sensors=[SensorSpec(
            name='joints', tolerance=(0.01,), mode=CompareMode.ABS, max_age=max_age)])
        recorded = Snapshot(features={'joints': (0.5, -0.5)}, stamps={'joints': 0.0})
        # More than max_age of wall time passes; the simulation is paused: still fresh.
        assert wait_until(lambda: time.monotonic() > last + 3 * max_age, 10.0)
        result = check.evaluate(recorded, hub.capture(), now_time=hub.now())
        assert result.passed, result.failures
        # The simulation moves on past max_age with no new message: stale.
        assert set_clock(101)
        result = check.evaluate(recorded, hub.capture(), now_time=hub.now())
        assert [(f.sensor, f.reason.split()[0]) for f in result.failures] == [('joints', 'stale')]
    finally:
        spinner.stop(2.0)
