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
A running node's decisions as plain data: ``~/events`` read for the operator's page.

``muscle-mem serve STORE --attach NODE`` shows what the cache decides as it happens. The
page (:mod:`muscle_mem_ros.web`) knows no ROS; this module does the ROS half: a node of its
own, in a context of its own, spun on a thread of its own (:func:`~..rclfix.shutdown.spun_node`),
subscribes to the node's ``CacheEvent`` topic and hands each event, turned into a mapping
(:func:`event_data`), to a callback (the page's ``EventHub.publish``). Leaving
:func:`attached` stops the spinning and shuts its context down; the node watched never
knows a page was there, beyond one more subscriber matched on a topic it publishes anyway.

An event keeps what the page needs to link it: its trajectory (for a trip during a step,
the trajectory the replay was on: the node says it in the event), the step, and the
moment: ``mark``, the seconds into the step the watch tripped (``time_into_step``), which
the trajectory page marks on the step's recorded plots. The stamp (``at``) is the node's,
in Unix seconds: the node stamps on the system clock unless it runs on simulated time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
import math
from typing import Any

from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.ros.execution.events import EVENTS_QOS
from muscle_mem_ros.ros.rclfix.shutdown import spun_node
from rclpy.qos import QoSProfile

__all__ = ['attached', 'event_data', 'events_topic', 'KINDS']

KINDS = {
    CacheEvent.HIT: 'replay',
    CacheEvent.MISS: 'miss',
    CacheEvent.STEP_OK: 'step_ok',
    CacheEvent.CHECK_FAILED: 'check_failed',
    CacheEvent.HANDOFF: 'hand_back',
    CacheEvent.BRANCH_LEARNED: 'branch_learned',
    CacheEvent.ERROR: 'error',
    CacheEvent.RECORDING_STARTED: 'recording_started',
    CacheEvent.RECORDING_STOPPED: 'recording_stopped',
    CacheEvent.SHADOW_STEP: 'shadow_step',
    CacheEvent.STEPPED_BACK: 'stepped_back',
    CacheEvent.STOPPED: 'stop',
}
"""The page's name for each CacheEvent type (a STOPPED that says the robot is at rest:
``at_rest``)."""

_QOS = QoSProfile(depth=100, reliability=EVENTS_QOS.reliability,
                  durability=EVENTS_QOS.durability)
"""Reliable and transient local as the node publishes: matched late, or attached to a node
that has run a while, the page still gets the node's last 50 events; 100 queued."""


def events_topic(node: str) -> str:
    """Return the events topic of a cache node: ``muscle_mem`` -> ``/muscle_mem/events``."""
    name = node.strip().rstrip('/')
    if not name:
        raise ValueError('a node name is needed (muscle_mem, or /robot1/muscle_mem)')
    return (name if name.startswith('/') else '/' + name) + '/events'


def event_data(msg: Any) -> dict[str, Any]:
    """
    Return one CacheEvent as the page's event: kind, text (the reason), where it links.

    ``task``; ``step`` (absent for the whole task); ``trajectory`` (absent: none);
    ``mark`` (a check failed during a step: the seconds into the step); ``at`` (the node's
    stamp, Unix seconds); and for a failed check ``sensor``, ``deviation``, ``tolerance``.
    """
    kind = KINDS.get(msg.type, f'event_{msg.type}')
    if msg.type == CacheEvent.STOPPED and msg.detail.startswith('at rest'):
        kind = 'at_rest'
    data: dict[str, Any] = {
        'kind': kind, 'text': _text(msg), 'task': msg.task, 'depth': int(msg.depth),
        'at': msg.stamp.sec + msg.stamp.nanosec * 1e-9,
    }
    if msg.step >= 0:
        data['step'] = int(msg.step)
    if msg.trajectory_id > 0:
        data['trajectory'] = int(msg.trajectory_id)
    if msg.type == CacheEvent.CHECK_FAILED:
        data.update(sensor=msg.sensor, deviation=_number(msg.deviation),
                    tolerance=_number(msg.tolerance))
        if msg.time_into_step >= 0 and math.isfinite(msg.time_into_step):
            data['mark'] = round(float(msg.time_into_step), 4)
    return data


def _text(msg: Any) -> str:
    where = f'{msg.task}' + (f' step {msg.step}' if msg.step >= 0 else '')
    return f'{where}: {msg.detail}' if msg.detail else where


def _number(x: float) -> float | None:
    """Return a JSON number (None for a missing reading's infinite deviation)."""
    return float(x) if math.isfinite(x) else None


@contextmanager
def attached(node: str, on_event: Callable[[dict[str, Any]], None], *,
             name: str = 'muscle_mem_page') -> Iterator[str]:
    """
    Feed ``on_event`` each event of cache node ``node`` while inside; yield the topic.

    The subscription lives on a node ``name`` (anonymous in the graph beyond it) in a context
    of its own, spun on its own thread; ``on_event`` runs on that thread and must not
    block for long (``EventHub.publish`` does not). Reliable and transient local, as the node
    publishes: the node's last 50 events come first.

    :raises ValueError: no node name.
    """
    topic = events_topic(node)
    with spun_node(name) as ros_node:
        def received(msg: Any) -> None:
            try:
                on_event(event_data(msg))
            except Exception as err:  # noqa: BLE001 - one bad event never ends the feed
                ros_node.get_logger().error(f'event on {topic} not shown: {err!r}')

        ros_node.create_subscription(CacheEvent, topic, received, _QOS)
        yield topic
