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
Event stamps under ``use_sim_time`` (issue 43 item 17), with a real ``/clock`` publisher.

A happening noted on the monotonic clock (a check that failed, a stop's steps) is stamped
on the node's clock: under simulated time that is where the simulation was then, not the
simulation's now minus the wall seconds since (wrong for a paused or a fast simulation,
and below zero early in one). :class:`ClockTrail` is what the cache node stamps with.
"""

from __future__ import annotations

import threading
import time

from muscle_mem_ros.ros.execution.events import ClockTrail
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
import pytest
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock

RATE = 100.0
"""Hz of the /clock messages."""


class Simulation:
    """Publishes /clock: paused at ``start`` until :meth:`run`, then at ``factor`` x real time."""

    def __init__(self, node, start: float) -> None:
        self._pub = node.create_publisher(Clock, '/clock', 10)
        self.sim = start
        self.factor = 0.0
        self.lock = threading.Lock()
        self.history: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._publish, daemon=True)
        self._thread.start()

    def _publish(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(1.0 / RATE):
            now = time.monotonic()
            with self.lock:
                self.sim += self.factor * (now - last)
                self.history.append((now, self.sim))
                sim = self.sim
            last = now
            msg = Clock()
            msg.clock.sec = int(sim)
            msg.clock.nanosec = int((sim - int(sim)) * 1e9)
            self._pub.publish(msg)

    def at(self, monotonic: float) -> float:
        """Return the simulated time published last before ``monotonic``."""
        with self.lock:
            return max(s for m, s in self.history if m <= monotonic)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


@pytest.fixture
def nodes():
    rclpy.init()
    node = rclpy.create_node('stamps', parameter_overrides=[
        Parameter('use_sim_time', Parameter.Type.BOOL, True)])
    clock = rclpy.create_node('sim_clock')
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(node)
    executor.add_node(clock)
    spinner = Spinner(executor)
    try:
        yield node, clock
    finally:
        spinner.stop(2.0)
        node.destroy_node()
        clock.destroy_node()
        rclpy.try_shutdown()


def _wait_sim(node, seconds: float) -> None:
    deadline = time.monotonic() + 10.0
    while node.get_clock().now().nanoseconds < seconds * 1e9:
        assert time.monotonic() < deadline, 'the node never read /clock'
        time.sleep(0.01)


def test_a_happening_is_stamped_where_the_simulation_was_then(nodes):
    node, clock = nodes
    sim = Simulation(clock, 100.0)
    try:
        _wait_sim(node, 100.0)
        trail = ClockTrail(node)
        assert trail.simulated
        paused = time.monotonic()  # the simulation is paused at 100 s
        time.sleep(0.5)
        with sim.lock:
            sim.factor = 4.0  # then runs at four times real time
        time.sleep(0.5)
        running = time.monotonic()
        time.sleep(0.5)
        assert node.get_clock().now().nanoseconds > 103.0e9
        assert _seconds(trail.stamp(paused)) == pytest.approx(100.0, abs=0.1)
        assert _seconds(trail.stamp(running)) == pytest.approx(sim.at(running), abs=0.25)
        assert _seconds(trail.stamp(None)) > 103.0
    finally:
        sim.close()


def test_early_in_a_simulation_a_stamp_is_not_before_its_start(nodes):
    node, clock = nodes
    sim = Simulation(clock, 0.5)
    try:
        _wait_sim(node, 0.5)
        trail = ClockTrail(node)
        stamp = trail.stamp(time.monotonic() - 2.0)  # before the trail's first note
        assert _seconds(stamp) == pytest.approx(0.5, abs=0.05)
    finally:
        sim.close()
