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

import time

from muscle_mem_ros.ros.execution.events import ClockTrail
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
import pytest
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock

STEP = 0.02
"""Real seconds between /clock messages."""


class Simulation:
    """
    Publishes /clock in lockstep with the node: each time is sent once the node reads the last.

    A simulation publishing on its own thread runs ahead of the node's clock: rclpy's time
    source takes /clock best effort, and here (Fast DDS) a message reaches it tens of
    milliseconds after it is sent, now and then a second or more, so what the node's clock
    said when is a guess. In lockstep the simulated time at any monotonic instant is the
    last one the node read.
    """

    def __init__(self, publisher_node, reader_node, start: float) -> None:
        self._pub = publisher_node.create_publisher(Clock, '/clock', 10)
        self._reader = reader_node
        self.sim = start
        self._send()

    def _send(self) -> None:
        msg = Clock()
        msg.clock.sec = int(self.sim)
        msg.clock.nanosec = int(round((self.sim - int(self.sim)) * 1e9))
        deadline = time.monotonic() + 10.0
        wanted = msg.clock.sec * 10**9 + msg.clock.nanosec
        while self._reader.get_clock().now().nanoseconds < wanted:
            assert time.monotonic() < deadline, 'the node never read /clock'
            self._pub.publish(msg)
            time.sleep(0.002)

    def run(self, span: float, factor: float) -> None:
        """Run ``span`` simulated seconds at (at most) ``factor`` x real time."""
        end = self.sim + span
        while self.sim < end - 1e-9:
            time.sleep(STEP)
            self.sim = min(end, self.sim + factor * STEP)
            self._send()


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


def test_a_happening_is_stamped_where_the_simulation_was_then(nodes):
    node, clock = nodes
    sim = Simulation(clock, node, 100.0)
    trail = ClockTrail(node)
    assert trail.simulated
    paused = time.monotonic()  # the simulation is paused at 100 s
    time.sleep(0.5)
    sim.run(2.0, 4.0)  # then runs, four times faster than real time
    running, then = time.monotonic(), sim.sim  # what the node's clock reads now
    sim.run(2.0, 4.0)
    assert _seconds(trail.stamp(paused)) == pytest.approx(100.0, abs=0.1)
    assert _seconds(trail.stamp(running)) == pytest.approx(then, abs=0.25)
    assert _seconds(trail.stamp(None)) == pytest.approx(sim.sim, abs=0.01)


def test_early_in_a_simulation_a_stamp_is_not_before_its_start(nodes):
    node, clock = nodes
    Simulation(clock, node, 0.5)
    trail = ClockTrail(node)
    stamp = trail.stamp(time.monotonic() - 2.0)  # before the trail's first note
    assert _seconds(stamp) == pytest.approx(0.5, abs=0.05)
