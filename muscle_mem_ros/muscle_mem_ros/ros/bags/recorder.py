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
Record topics to an MCAP file, as ``ros2 bag record`` does, where it is not installed.

The PyPI-wheel ROS 2 here has no ``ros2 bag``; the demo's ``--record-bag`` and the tests
still need bags recorded live from running robots to learn from. :class:`BagRecorder` is
raw subscriptions (on a node and executor of its own) writing every message they receive
to an MCAP file through the ``mcap`` writer (profile ``ros2``, CDR), the middleware's
reception time as the log time, schemas carrying the type's name and, where installed
interface files give it, its definition (an introspection event type is generated, with
no file: its schema is empty), which is what ``muscle-mem learn`` reads.
:func:`tool_topics` names the topics a tool's calls are learned from. :func:`write_bag`
writes messages with given times (tests of bad bags, the bench).
"""

from __future__ import annotations

from collections.abc import Iterable
import itertools
import os
from pathlib import Path
import threading
import time
from typing import Any, BinaryIO

from mcap.well_known import MessageEncoding, SchemaEncoding
from mcap.writer import CompressionType, Writer
from muscle_mem_ros.errors import TypeResolutionError
from muscle_mem_ros.ros.bags.frames import TF_TOPICS
from muscle_mem_ros.ros.messages.introspection import resolve_type
from muscle_mem_ros.ros.messages.msgdefs import message_schema
from muscle_mem_ros.ros.node.frameconfig import TF_TYPE
from muscle_mem_ros.ros.node.nodeconfig import SensorConfig
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.subscription import MessageInfo

__all__ = ['BagRecorder', 'sensor_topics', 'Topics', 'tool_topics', 'write_bag']

Topics = dict[str, tuple[str, Any]]
"""Topic -> (type name, message class)."""


def _definition(type_name: str) -> bytes:
    try:
        return message_schema(type_name).encode()
    except TypeResolutionError:  # an introspection event type: generated, no file
        return b''


class _File:
    """An open MCAP file: schemas and channels registered on first use."""

    def __init__(self, path: str | Path, library: str) -> None:
        self._stream: BinaryIO = open(path, 'wb')
        self.writer = Writer(self._stream, compression=CompressionType.ZSTD)
        self.writer.start(profile='ros2', library=library)
        self._channels: dict[str, int] = {}
        self._schemas: dict[str, int] = {}
        self._sequence = 0

    def add(self, topic: str, type_name: str, data: bytes, when_ns: int) -> None:
        if topic not in self._channels:
            if type_name not in self._schemas:
                self._schemas[type_name] = self.writer.register_schema(
                    type_name, SchemaEncoding.ROS2, _definition(type_name))
            self._channels[topic] = self.writer.register_channel(
                topic, MessageEncoding.CDR, self._schemas[type_name])
        self.writer.add_message(self._channels[topic], log_time=when_ns, data=data,
                                publish_time=when_ns, sequence=self._sequence)
        self._sequence += 1

    def close(self) -> None:
        self.writer.finish()  # type: ignore[no-untyped-call]  # mcap leaves it unannotated
        self._stream.close()


def write_bag(path: str | Path, messages: Iterable[tuple[str, str, bytes, int]],
              metadata: dict[str, dict[str, str]] | None = None) -> None:
    """Write (topic, type name, CDR bytes, log time ns) messages to an MCAP file."""
    out = _File(path, 'muscle_mem_ros write_bag')
    for topic, type_name, data, when in messages:
        out.add(topic, type_name, data, when)
    for name, values in (metadata or {}).items():
        out.writer.add_metadata(name, values)
    out.close()


def tool_topics(server: str, type_name: str) -> Topics:
    """
    Return the topics a tool's calls are learned from (:mod:`.calls`), with their types.

    An action (``pkg/action/X``): its send_goal and get_result introspection events, its
    status and its feedback; a service (``pkg/srv/X``): its introspection events.

    :raises TypeResolutionError: the type is not installed.
    """
    base = '/' + server.strip('/')
    if '/action/' in type_name:
        impl = resolve_type(type_name, kind='action').Impl
        return {
            f'{base}/_action/send_goal/_service_event': (
                f'{type_name}_SendGoal_Event', impl.SendGoalService.Event),
            f'{base}/_action/get_result/_service_event': (
                f'{type_name}_GetResult_Event', impl.GetResultService.Event),
            f'{base}/_action/status': ('action_msgs/msg/GoalStatusArray',
                                       resolve_type('action_msgs/msg/GoalStatusArray',
                                                    kind='msg')),
            f'{base}/_action/feedback': (f'{type_name}_FeedbackMessage',
                                         impl.FeedbackMessage)}
    return {f'{base}/_service_event': (f'{type_name}_Event',
                                       resolve_type(type_name, kind='srv').Event)}


def sensor_topics(sensors: Iterable[SensorConfig]) -> Topics:
    """
    Return the topics the sensors are learned from, with their types.

    A topic sensor's own topic; for TF sensors, ``/tf`` and ``/tf_static``
    (``tf2_msgs/msg/TFMessage``; record ``/tf_static`` latched, :class:`BagRecorder`'s default).
    """
    topics: Topics = {}
    for s in sensors:
        if s.frames is None:
            topics[s.topic] = (s.type_name, s.msg_type)
            continue
        tf = resolve_type(TF_TYPE, kind='msg')
        topics.update({name: (TF_TYPE, tf) for name in TF_TOPICS})
    return topics


class BagRecorder:
    """
    Record topics of a running system to an MCAP file, on a node and an executor of its own.

    rclpy hands each message to Python through its executor, at a cost per callback: on a
    node that other work shares (a demo's driver, a multi-threaded executor), the
    callbacks of a few 120 Hz topics fell seconds behind on a busy machine, and a reader's
    queue that overflows drops messages (a bag with holes in its sensors). So the recorder
    spins a single-threaded executor of its own, its queues hold a minute of a fast topic,
    and :meth:`close` first takes what was received before it was called.

    :param path: The MCAP file.
    :param topics: What to record.
    :param latched: Topics published once and kept (transient local, as
        ``/robot_description`` and ``/tf_static``): subscribed so, to get what was sent
        before the recording.
    :param context: The rclpy context (None: the default one).
    """

    def __init__(self, path: str | Path, topics: Topics, *,
                 latched: Iterable[str] = ('/robot_description', '/tf_static'),
                 context: Context | None = None) -> None:
        self._file: _File | None = _File(path, 'muscle_mem_ros BagRecorder')
        self._lock = threading.Lock()
        self._node = Node(f'bag_recorder_{os.getpid()}_{next(_NUMBERS)}', context=context,
                          start_parameter_services=False)
        self.counts: dict[str, int] = dict.fromkeys(topics, 0)
        self._last = 0
        qos = QoSProfile(depth=_QUEUE, reliability=ReliabilityPolicy.RELIABLE)
        kept = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL)
        latched = set(latched)
        self._subs = [
            self._node.create_subscription(cls, topic, self._callback(topic, type_name),
                                           kept if topic in latched else qos, raw=True)
            for topic, (type_name, cls) in topics.items()]
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(self._node)
        self._spinner = Spinner(executor)

    def _callback(self, topic: str, type_name: str) -> Any:
        def on_message(raw: bytes, info: MessageInfo) -> None:
            # The middleware's reception time, as rosbag2 records it, not the callback's:
            # an executor that falls behind takes a backlog of sensor messages after a
            # result that arrived later, and stamping them when taken would put a reading
            # from before the result after it (a post snapshot of an arm still moving).
            when = int(info.get('received_timestamp') or 0) or time.time_ns()
            with self._lock:
                if self._file is not None:
                    self._file.add(topic, type_name, bytes(raw), when)
                    self.counts[topic] += 1
                    self._last = max(self._last, when)
        return on_message

    @property
    def node(self) -> Node:
        """Return the recorder's own node."""
        return self._node

    def close(self, drain: float = 10.0) -> None:
        """
        Stop recording and finish the file.

        :param drain: Seconds to wait at most for the callbacks to take what the middleware
            received before the call (the executor may be behind).
        """
        asked = time.time_ns()
        deadline = time.monotonic() + drain
        quiet_since = time.monotonic()
        seen = -1
        while time.monotonic() < deadline:
            with self._lock:
                last, count = self._last, sum(self.counts.values())
            if last >= asked:
                break
            if count != seen:
                seen, quiet_since = count, time.monotonic()
            elif time.monotonic() - quiet_since > _QUIET:
                break  # nothing more is coming: every topic went quiet before the call
            time.sleep(0.01)
        self._spinner.stop(2.0)
        for sub in self._subs:
            self._node.destroy_subscription(sub)
        self._node.destroy_node()
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


_QUEUE = 10000
"""Messages a topic's queue holds while the executor is behind (over a minute at 120 Hz)."""

_QUIET = 0.5
"""Seconds without a new message after which :meth:`BagRecorder.close` takes none is coming."""

_NUMBERS = itertools.count(1)
