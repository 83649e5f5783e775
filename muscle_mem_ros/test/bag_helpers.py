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
Bags for the learn tests: recorded live from a running robot, or written by hand.

:class:`BagRecorder` is a recorder as ``ros2 bag record`` is one: a node subscribed (raw)
to the given topics, writing every message it receives to an MCAP file through the
``mcap`` writer, with the receive time as the log time; schemas carry the type's name and,
where installed interface files give it, its definition. :func:`write_bag` writes
messages with given times (unit tests of bad bags, and the bench).
"""

from __future__ import annotations

from collections.abc import Iterable
import threading
import time
from typing import Any

from mcap.well_known import MessageEncoding, SchemaEncoding
from mcap.writer import CompressionType, Writer
from muscle_mem_ros.cli.msgdefs import message_schema
from muscle_mem_ros.errors import TypeResolutionError
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

__all__ = ['BagRecorder', 'write_bag']


def _definition(type_name: str) -> bytes:
    try:
        return message_schema(type_name).encode()
    except TypeResolutionError:  # an introspection event type: generated, no file
        return b''


class _File:
    """An open MCAP file: schemas and channels registered on first use."""

    def __init__(self, path: Any) -> None:
        self._stream = open(path, 'wb')
        self._writer = Writer(self._stream, compression=CompressionType.ZSTD)
        self._writer.start(profile='ros2', library='muscle_mem_ros tests')
        self._channels: dict[str, int] = {}
        self._schemas: dict[str, int] = {}
        self._sequence = 0

    def add(self, topic: str, type_name: str, data: bytes, when_ns: int) -> None:
        if topic not in self._channels:
            if type_name not in self._schemas:
                self._schemas[type_name] = self._writer.register_schema(
                    type_name, SchemaEncoding.ROS2, _definition(type_name))
            self._channels[topic] = self._writer.register_channel(
                topic, MessageEncoding.CDR, self._schemas[type_name])
        self._writer.add_message(self._channels[topic], log_time=when_ns, data=data,
                                 publish_time=when_ns, sequence=self._sequence)
        self._sequence += 1

    def close(self) -> None:
        self._writer.finish()
        self._stream.close()


def write_bag(path: Any, messages: Iterable[tuple[str, str, bytes, int]],
              metadata: dict[str, dict[str, str]] | None = None) -> None:
    """Write (topic, type name, CDR bytes, log time ns) messages to an MCAP file."""
    out = _File(path)
    for topic, type_name, data, when in messages:
        out.add(topic, type_name, data, when)
    for name, values in (metadata or {}).items():
        out._writer.add_metadata(name, values)
    out.close()


class BagRecorder:
    """
    Record topics of a running system to an MCAP file (subscribes on ``node``).

    :param node: A node spun by the test's executor.
    :param path: The MCAP file.
    :param topics: Topic -> (type name, message class).
    """

    def __init__(self, node: Node, path: Any, topics: dict[str, tuple[str, Any]]) -> None:
        self._file = _File(path)
        self._lock = threading.Lock()
        self._node = node
        self.counts: dict[str, int] = dict.fromkeys(topics, 0)
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self._subs = [
            node.create_subscription(cls, topic, self._callback(topic, type_name), qos,
                                     raw=True)
            for topic, (type_name, cls) in topics.items()]

    def _callback(self, topic: str, type_name: str) -> Any:
        def on_message(raw: bytes) -> None:
            with self._lock:
                now = time.time_ns()
                if self._file is not None:
                    self._file.add(topic, type_name, bytes(raw), now)
                    self.counts[topic] += 1
        return on_message

    def close(self) -> None:
        """Stop recording and finish the file."""
        for sub in self._subs:
            self._node.destroy_subscription(sub)
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None  # type: ignore[assignment]
