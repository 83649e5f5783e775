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
Build each call into the step the node would have recorded live.

The bag's clock (receive times, in seconds) stands in for the node's monotonic clock:

* a sensor's reading at a time is its last message received by then, its features
  extracted by the sensor's own compiled field paths (:class:`..node.nodeconfig.SensorConfig`,
  the node's :mod:`..capture.sensors`); a sensor read by name (``joints``) holds the latest
  value of every configured name over its last messages (at most
  :data:`~..capture.sensors.BY_NAME_DEPTH`), stamped with the oldest of them;
* the pre snapshot is every sensor's reading when the request was sent;
* the post snapshot is taken once every sensor has sent a message after the result (at
  most ``post_check_timeout`` later, as live), each sensor's reading then;
* an action's trace (``watch`` on) is sampled from acceptance to the result at
  ``watch_rate`` by the node's own :class:`..capture.tracing.TraceTaker`, with the action's
  feedback from the bag, and ends with the post snapshot.

Freshness: a sensor missing, or older than its ``max_age``, in a step's pre or post
snapshot is stale there (:meth:`Sensors.stale`); the node would have learned a step it
cannot check, so the learner skips that task and says which sensor and step.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Sequence
from typing import Any

from muscle_mem_ros.records import Snapshot, Step
from muscle_mem_ros.ros.bags.calls import Call, feedback_between
from muscle_mem_ros.ros.bags.reader import Bag, BagError, Topic
from muscle_mem_ros.ros.capture.sensors import BY_NAME_DEPTH
from muscle_mem_ros.ros.capture.tracing import TraceTaker
from muscle_mem_ros.ros.messages.cdr import canonical_cdr
from muscle_mem_ros.ros.messages.introspection import message_to_json
from muscle_mem_ros.ros.node.nodeconfig import NodeConfig, SensorConfig
from rclpy.serialization import deserialize_message, serialize_message

__all__ = ['Sensors', 'build_step']

_NS = 1e-9


class _Track:
    """One sensor's messages in the bag, features decoded on demand and kept."""

    def __init__(self, config: SensorConfig, topic: Topic | None) -> None:
        self.config = config
        self.times = topic.times if topic is not None else []
        self._data = topic.data if topic is not None else []
        self._topic = topic
        self._cache: dict[int, tuple[tuple[float, ...], int] | None] = {}
        if topic is not None and topic.type_name and topic.type_name != config.type_name:
            raise BagError(f'{topic.name}: recorded as {topic.type_name}, but sensors.'
                           f'{config.name}.type is {config.type_name}')

    def at(self, when: int) -> tuple[tuple[float, ...], int] | None:
        """Return (features, receive time ns) of the reading at ``when``; None: none yet."""
        index = bisect_right(self.times, when) - 1
        if index < 0:
            return None
        if index not in self._cache:
            self._cache[index] = self._read(index)
        return self._cache[index]

    def first_after(self, when: int) -> int | None:
        """Return the receive time of the first message after ``when`` (None: none)."""
        index = bisect_right(self.times, when)
        return self.times[index] if index < len(self.times) else None

    def _decode(self, index: int) -> Any:
        try:
            return deserialize_message(self._data[index], self.config.msg_type)
        except Exception as err:  # rclpy raises plain errors for bad CDR
            raise BagError(f'{self.config.topic}: a message at {self.times[index]} ns does '
                           f'not decode as {self.config.type_name}: {err}') from err

    def _read(self, index: int) -> tuple[tuple[float, ...], int] | None:
        config = self.config
        if config.by_name is not None:
            return self._by_name(index)
        msg = self._decode(index)
        values: list[float] = []
        try:
            for extractor in config.extractors:
                values.extend(extractor.extract(msg))
        except Exception as err:  # the node reports it and ignores the sensor
            raise BagError(f'sensors.{config.name}: cannot read {config.topic}: {err}') from err
        self._length(len(values))
        return tuple(values), self.times[index]

    def _by_name(self, index: int) -> tuple[tuple[float, ...], int] | None:
        config = self.config
        assert config.by_name is not None
        slots = {name: i for i, name in enumerate(config.joints)}
        width = len(config.joints)
        values: list[float | None] = [None] * (width * len(config.by_name.paths))
        oldest = self.times[index]
        for back in range(index, max(-1, index - BY_NAME_DEPTH), -1):
            names, columns = config.by_name.read(self._decode(back))
            for column_index, column in enumerate(columns):
                if column is None:
                    continue
                for name, value in zip(names, column):
                    slot = slots.get(name)
                    if slot is not None and values[column_index * width + slot] is None:
                        values[column_index * width + slot] = value
                        oldest = self.times[back]
            if all(v is not None for v in values):
                self._length(len(values))
                return tuple(float(v) for v in values if v is not None), oldest
        return None

    def _length(self, size: int) -> None:
        if len(self.config.tolerance) not in (1, size):
            raise BagError(f'sensors.{self.config.name}.tolerance: {len(self.config.tolerance)} '
                           f'values, but {self.config.topic} gives {size} elements')


class Sensors:
    """The configured sensors' messages in a bag: snapshots at any time of its clock."""

    def __init__(self, bag: Bag, sensors: Sequence[SensorConfig]) -> None:
        self._tracks = {s.name: _Track(s, bag.topic(s.topic)) for s in sensors}

    def snapshot(self, when: int, names: Collection[str] | None = None) -> Snapshot:
        """Return the snapshot the node would have taken at ``when`` (ns on the bag's clock)."""
        features: dict[str, tuple[float, ...]] = {}
        stamps: dict[str, float] = {}
        for name, track in self._tracks.items():
            if names is not None and name not in names:
                continue
            reading = track.at(when)
            if reading is not None:
                features[name] = reading[0]
                stamps[name] = reading[1] * _NS
        return Snapshot(features=features, stamps=stamps, taken_at=when * _NS)

    def post_time(self, ended: int, timeout: float) -> int:
        """Return when the post snapshot is taken: all sensors newer than ``ended``, or timeout."""
        limit = ended + int(timeout * 1e9)
        firsts = [track.first_after(ended) for track in self._tracks.values()]
        if not firsts:
            return ended
        if any(first is None or first > limit for first in firsts):
            return limit
        return max(first for first in firsts if first is not None)

    def stale(self, snapshot: Snapshot) -> list[str]:
        """Return the sensors missing from ``snapshot`` or older than their ``max_age``, why."""
        out = []
        for name, track in self._tracks.items():
            stamp = snapshot.stamps.get(name)
            if stamp is None:
                out.append(f'{name} (nothing received on {track.config.topic} yet)')
            elif snapshot.taken_at - stamp > track.config.max_age:
                out.append(f'{name} ({snapshot.taken_at - stamp:.3f} s old, max_age '
                           f'{track.config.max_age:g} s)')
        return out


def build_step(bag: Bag, call: Call, sensors: Sensors, config: NodeConfig,
               ) -> tuple[Step, list[str]]:
    """
    Return the step the node would have recorded for ``call``, and its stale sensors.

    :param bag: The bag (for the action's feedback).
    :param call: A call that succeeded.
    :param sensors: The bag's sensors.
    :param config: The node's configuration (timeouts, watch).
    :return: The step, and why a snapshot of it is stale (empty: none is).
    """
    pre = sensors.snapshot(call.started)
    post = sensors.snapshot(sensors.post_time(call.ended, config.post_check_timeout))
    trace = None
    watched = config.watched
    if watched and call.tool.kind.value == 'action':
        taker = TraceTaker(sensors=watched, rate=config.watch_rate, started=call.started * _NS,
                           pre=pre)
        taker.accepted(call.accepted * _NS)
        period = int(1e9 / config.watch_rate)
        feedback = feedback_between(bag, call)
        next_feedback = 0
        tick = call.accepted
        while tick < call.ended:
            while next_feedback < len(feedback) and feedback[next_feedback][0] <= tick:
                when, message = feedback[next_feedback]
                taker.feedback(message, at=when * _NS)
                next_feedback += 1
            taker.sample(sensors.snapshot(tick, watched))
            tick += period
        for when, message in feedback[next_feedback:]:
            taker.feedback(message, at=when * _NS)
        trace = taker.trace(post)
    step = Step(
        tool=call.tool.server,
        kind=call.tool.kind,
        type_name=call.tool.type_name,
        payload=canonical_cdr(bytes(serialize_message(call.message)), type(call.message)),
        payload_json=message_to_json(call.message),
        pre=pre if pre.features else None,
        post=post if post.features else None,
        status=call.status,
        duration=(call.ended - call.started) * _NS,
        trace=trace,
    )
    stale = [f'pre: {s}' for s in sensors.stale(pre)] + \
        [f'post: {s}' for s in sensors.stale(post)]
    return step, stale
