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
``~/watch`` in one process, real rclpy: ticks only while someone listens, never a trip.

The node's own tests (test_node_watch_live) see the ticks of a replay over DDS; here the
publisher is in reach, so what happens without a subscriber can be counted: no message
built, no second placing of the state on the tube, nothing published.
"""

from __future__ import annotations

from collections.abc import Iterator
import threading
import time
from typing import Any
import uuid

from muscle_mem_interfaces.msg import WatchTick
from muscle_mem_ros.checks.tube import Reading, Tube, Watched
from muscle_mem_ros.records import Series, Snapshot, Trace
from muscle_mem_ros.ros.execution.watch import StepWatch
from muscle_mem_ros.ros.execution.watchticks import WatchTicks
from muscle_mem_ros.ros.rclfix.sync import CancelToken
import numpy as np
import pytest
import rclpy
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

TIMES = tuple(float(t) for t in np.arange(0.0, 2.0, 0.025))


class CountedTube(Tube):
    """A tube that counts how often it is placed for a viewer (:meth:`Tube.reading`)."""

    readings = 0

    def reading(self) -> Reading:
        self.readings += 1
        return super().reading()


class CountedPublisher:
    """The real publisher, its publish calls counted."""

    def __init__(self, publisher: Any) -> None:
        self.real = publisher
        self.published = 0

    def get_subscription_count(self) -> int:
        return int(self.real.get_subscription_count())

    def publish(self, msg: Any) -> None:
        self.published += 1
        self.real.publish(msg)


@pytest.fixture
def ros() -> Iterator[tuple[Node, str]]:
    context = rclpy.Context()
    rclpy.init(context=context)
    name = f'watch_ticks_{uuid.uuid4().hex[:8]}'
    node = Node(name, context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    yield node, f'/{name}/watch'
    executor.shutdown()
    node.destroy_node()
    rclpy.shutdown(context=context)
    thread.join(5.0)


def watch() -> StepWatch:
    ramp = tuple((float(v), 0.5) for v in np.linspace(0.0, 0.4, len(TIMES)))
    tube = CountedTube(Trace(40.0, {'ee': Series(TIMES, ramp)}),
                       [Watched('ee', 0, 0.02), Watched('ee', 1, 0.02, name='ee height')])
    w = StepWatch(tube=tube, max_age={'ee': None}, cancel=CancelToken())
    w.begin(0.0)
    return w


def feed(w: StepWatch, count: int, *, off: float = 0.0) -> None:
    """Hand ``w`` ``count`` new readings along the ramp (element 1 ``off`` its path)."""
    for k in range(count):
        at = 0.1 * (k + 1)
        w.sample(Snapshot(features={'ee': (0.2 * at, 0.5 + off)}, stamps={'ee': at},
                          taken_at=at))


def wait_until(predicate: Any, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_without_a_subscriber_nothing_is_placed_built_or_sent(ros):
    node, topic = ros
    publisher = CountedPublisher(node.create_publisher(WatchTick, topic, 10))
    ticks = WatchTicks(publisher=publisher, logger=node.get_logger(),
                       stamp=lambda: node.get_clock().now().to_msg())
    w = watch()
    ticks.attach(w, task='pick', step=2, tool='/arm')
    feed(w, 15)
    assert w.failure is None
    assert (publisher.published, w.tube.readings) == (0, 0)
    assert not ticks.listening()

    got: list[WatchTick] = []
    node.create_subscription(WatchTick, topic, got.append, 50)
    assert wait_until(ticks.listening), 'the subscription never matched'
    feed(w, 5)  # readings 0.1 .. 0.5 s again: already seen, not judged twice
    assert publisher.published == 0
    w2 = watch()
    ticks.attach(w2, task='pick', step=2, tool='/arm')
    feed(w2, 5)
    assert (publisher.published, w2.tube.readings) == (5, 5)
    assert wait_until(lambda: len(got) == 5), len(got)
    tick = got[-1]
    assert (tick.task, tick.step, tick.tool, tick.judged) == ('pick', 2, '/arm', 'ee')
    assert [e.label for e in tick.elements] == ['ee[0]', 'ee height']
    assert tick.limit == 1.0 and not tick.tripped
    assert tick.time_into_step == pytest.approx(0.5)
    assert [t.progress for t in got] == sorted(t.progress for t in got)
    assert all(e.ratio <= 1.0 for t in got for e in t.elements)


def test_a_trip_is_published_and_a_broken_publisher_never_trips_the_watch(ros):
    node, topic = ros
    real = node.create_publisher(  # destroyed mid-spin: no event handler (see node_helpers)
        WatchTick, topic, 10, event_callbacks=PublisherEventCallbacks(use_default_callbacks=False))
    got: list[WatchTick] = []
    node.create_subscription(WatchTick, topic, got.append, 50)
    ticks = WatchTicks(publisher=real, logger=node.get_logger(),
                       stamp=lambda: node.get_clock().now().to_msg())
    assert wait_until(ticks.listening)
    w = watch()
    ticks.attach(w, task='pick', step=0, tool='/arm')
    feed(w, 3, off=0.05)
    assert w.failure is not None and w.failure.element == 1
    assert wait_until(lambda: len(got) == 1)  # tripped on the first: judged no further
    (tick,) = got
    assert tick.tripped and tick.worst > 1.0
    height = tick.elements[1]
    assert height.label == 'ee height' and height.ratio == pytest.approx(w.failure.score)
    assert height.value == pytest.approx(0.55) and height.expected == pytest.approx(0.5)

    node.destroy_publisher(real)  # publishing now raises: said once, the watch goes on
    w2 = watch()
    ticks.attach(w2, task='pick', step=1, tool='/arm')
    feed(w2, 10)
    assert w2.failure is None and not w2.token.cancelled
