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
Build each call into the step the node would have recorded live, as the bag streams by.

The bag's clock (receive times, in seconds) stands in for the node's monotonic clock, and
the bag is lived in its order, as the node lived it:

* a sensor's reading is its last message received so far, its features extracted by the
  sensor's own compiled field paths (:class:`..node.nodeconfig.SensorConfig`, the node's
  :mod:`..capture.sensors`); a sensor read by name (``joints``) holds the latest value of
  every configured name over its last messages (at most
  :data:`~..capture.sensors.BY_NAME_DEPTH`), stamped with the oldest of them;
* the pre snapshot is every sensor's reading when the request was sent;
* the post snapshot is taken once every sensor has sent a message after the result (a TF
  sensor: its chain's stalest moving link, :meth:`.frames.BagFrames.arrived`; at most
  ``post_check_timeout`` later, as live), each sensor's reading then;
* an action's trace (``watch`` on) is sampled from acceptance to the result at
  ``watch_rate`` by the node's own :class:`..capture.tracing.TraceTaker`, with the action's
  feedback from the bag, and ends with the post snapshot.

Only what a step needs is kept: per sensor its last message (its last
``BY_NAME_DEPTH`` for one read by name), per call in flight its pre snapshot and trace,
and the steps of the calls that succeeded. A sensor's messages are never all held.

Freshness: a sensor missing, or older than its ``max_age``, in a step's pre or post
snapshot is stale there (:meth:`Sensors.stale`); the node would have learned a step it
cannot check, so the learner skips that task and says which sensor and step.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from muscle_mem_ros.errors import ImageError, ImageMismatch
from muscle_mem_ros.records import Snapshot, Step, StepStatus, ToolKind
from muscle_mem_ros.ros.bags.calls import Call, Finder
from muscle_mem_ros.ros.bags.frames import BagFrames, TF_TOPICS
from muscle_mem_ros.ros.bags.reader import BagError, Topic
from muscle_mem_ros.ros.capture.sensors import BY_NAME_DEPTH
from muscle_mem_ros.ros.capture.thumbnails import thumbnail_of
from muscle_mem_ros.ros.capture.tracing import TraceTaker
from muscle_mem_ros.ros.messages.cdr import canonical_cdr
from muscle_mem_ros.ros.messages.introspection import message_to_json
from muscle_mem_ros.ros.node.nodeconfig import NodeConfig, SensorConfig
from rclpy.serialization import deserialize_message, serialize_message

__all__ = ['Built', 'Sensors', 'Steps']

_NS = 1e-9


def _topic_name(name: str) -> str:
    return '/' + name.lstrip('/')


class _Track:
    """One sensor's last messages, the reading of the last decoded once."""

    def __init__(self, config: SensorConfig) -> None:
        self.config = config
        self._recent: deque[tuple[int, bytes]] = deque(
            maxlen=BY_NAME_DEPTH if config.by_name is not None else 1)
        self._reading: tuple[tuple[float, ...], int] | None = None
        self._fresh = False
        self._checked = False
        self.dropped = 0
        """Camera frames that did not decode: dropped, the last good frame standing in."""
        self.raw: bytes | None = None
        """The message the reading came from (a camera's thumbnail is made from it)."""

    def push(self, topic: Topic, when: int, raw: bytes) -> None:
        if not self._checked:
            self._checked = True
            if topic.type_name and topic.type_name != self.config.type_name:
                raise BagError(f'{topic.name}: recorded as {topic.type_name}, but sensors.'
                               f'{self.config.name}.type is {self.config.type_name}')
        self._recent.append((when, raw))
        self._fresh = False

    def reading(self) -> tuple[tuple[float, ...], int] | None:
        """Return (features, receive time ns) of the reading now; None: none yet."""
        if not self._recent:
            return None
        if not self._fresh:
            self._reading = self._by_name() if self.config.by_name is not None \
                else self._read(*self._recent[-1])
            self._fresh = True
        return self._reading

    def _decode(self, when: int, raw: bytes) -> Any:
        try:
            return deserialize_message(raw, self.config.msg_type)
        except Exception as err:  # rclpy raises plain errors for bad CDR
            raise BagError(f'{self.config.topic}: a message at {when} ns does '
                           f'not decode as {self.config.type_name}: {err}') from err

    def _read(self, when: int, raw: bytes) -> tuple[tuple[float, ...], int] | None:
        msg = self._decode(when, raw)
        values: list[float] = []
        try:
            for extractor in self.config.extractors:
                values.extend(extractor.extract(msg))
        except ImageMismatch as err:  # not the camera configured: nothing to learn from
            raise BagError(f'sensors.{self.config.name}: {err}') from err
        except ImageError:  # a corrupt frame, as live: dropped, the last good one stands
            self.dropped += 1
            return self._reading
        except Exception as err:  # the node reports it and ignores the sensor
            raise BagError(f'sensors.{self.config.name}: cannot read {self.config.topic}: '
                           f'{err}') from err
        self._length(len(values))
        self.raw = raw
        return tuple(values), when

    def _by_name(self) -> tuple[tuple[float, ...], int] | None:
        config = self.config
        assert config.by_name is not None
        slots = {name: i for i, name in enumerate(config.joints)}
        width = len(config.joints)
        values: list[float | None] = [None] * (width * len(config.by_name.paths))
        oldest = self._recent[-1][0]
        for when, raw in reversed(self._recent):
            names, columns = config.by_name.read(self._decode(when, raw))
            for column_index, column in enumerate(columns):
                if column is None:
                    continue
                for name, value in zip(names, column):
                    slot = slots.get(name)
                    if slot is not None and values[column_index * width + slot] is None:
                        values[column_index * width + slot] = value
                        oldest = when
            if all(v is not None for v in values):
                self._length(len(values))
                return tuple(float(v) for v in values if v is not None), oldest
        return None

    def _length(self, size: int) -> None:
        if len(self.config.tolerance) not in (1, size):
            raise BagError(f'sensors.{self.config.name}.tolerance: {len(self.config.tolerance)} '
                           f'values, but {self.config.topic} gives {size} elements')


class Sensors:
    """The configured sensors as the bag has them so far: a snapshot of them at any time."""

    def __init__(self, sensors: Sequence[SensorConfig]) -> None:
        self._tracks = {s.name: _Track(s) for s in sensors if s.frames is None}
        self._configs = {s.name: s for s in sensors}
        self.frames = BagFrames(sensors)
        """The TF sensors (:mod:`.frames`), read from /tf and /tf_static."""
        self.by_topic: dict[str, list[_Track]] = {
            name: [] for name in (TF_TOPICS if self.frames.names else ())}
        for track in self._tracks.values():
            self.by_topic.setdefault(_topic_name(track.config.topic), []).append(track)

    @property
    def names(self) -> list[str]:
        """Return the sensors' names."""
        return list(self._tracks) + self.frames.names

    def push(self, topic: Topic, when: int, raw: bytes) -> list[str]:
        """Take a message of a sensor topic; return the sensors it is a reading of."""
        if topic.name in TF_TOPICS and self.frames.names:
            return self.frames.push(topic.name, when, raw)
        tracks = self.by_topic.get(topic.name, [])
        for track in tracks:
            track.push(topic, when, raw)
        return [t.config.name for t in tracks]

    def snapshot(self, when: int, names: Collection[str] | None = None, *,
                 thumbnails: bool = False) -> Snapshot:
        """
        Return the snapshot the node would have taken now, at ``when`` (ns).

        :param thumbnails: Add each camera's thumbnail, as the node's recorded pre and post
            snapshots carry (:mod:`..capture.thumbnails`); not for a trace's samples.
        """
        features: dict[str, tuple[float, ...]] = {}
        stamps: dict[str, float] = {}
        images: dict[str, bytes] = {}
        for name, track in self._tracks.items():
            if names is not None and name not in names:
                continue
            reading = track.reading()
            if reading is not None:
                features[name] = reading[0]
                stamps[name] = reading[1] * _NS
                png = thumbnail_of(track.config, track.raw) if (
                    thumbnails and track.config.image is not None and track.raw) else None
                if png is not None:
                    images[name] = png
        for name, (pose, at) in self.frames.readings(when, names).items():
            features[name] = pose
            stamps[name] = at * _NS
        return Snapshot(features=features, stamps=stamps, taken_at=when * _NS, images=images)

    def dropped(self) -> dict[str, int]:
        """Count, per camera sensor, the frames dropped so far (they did not decode)."""
        return {n: t.dropped for n, t in self._tracks.items() if t.dropped}

    def stale(self, snapshot: Snapshot) -> list[str]:
        """
        Return the sensors missing from ``snapshot`` or older than their ``max_age``, why.

        Ask right after taking ``snapshot``: a TF sensor's reason (the link) is the last
        snapshot's.
        """
        out = []
        for name, config in self._configs.items():
            stamp = snapshot.stamps.get(name)
            if stamp is None:
                out.append(f'{name} ({self.frames.why(name) or "no transform yet"})'
                           if config.frames is not None
                           else f'{name} (nothing received on {config.topic} yet)')
            elif snapshot.taken_at - stamp > config.max_age:
                link = self.frames.stalest(name) if config.frames is not None else ''
                out.append(f'{name} ({f"link {link} is " if link else ""}'
                           f'{snapshot.taken_at - stamp:.3f} s old, max_age '
                           f'{config.max_age:g} s)')
        return out


@dataclass(frozen=True)
class Built:
    """
    A call that succeeded, built into its step.

    :ivar call: The call.
    :ivar step: The step the node would have recorded.
    :ivar stale: Why a snapshot of it is stale (empty: none is).
    """

    call: Call
    step: Step
    stale: list[str]


@dataclass
class _Flight:
    """A call in flight: its pre snapshot, its trace, and once ended when its post is due."""

    pre: Snapshot
    started: int
    stale: list[str] = field(default_factory=list)
    """Why the pre snapshot is stale (asked when it was taken)."""
    taker: TraceTaker | None = None
    tick: int = 0
    call: Call | None = None
    waiting: set[str] = field(default_factory=set)
    post_at: int | None = None
    limit: int = 0


class Steps:
    """
    The listener of every tool's finders (:mod:`.calls`): each call that succeeded, built.

    Fed by :meth:`message` with every message of the bag in its order; :meth:`finish`
    once the bag ends. :attr:`built` holds per finder its calls' steps.
    """

    def __init__(self, config: NodeConfig) -> None:
        self.sensors = Sensors(config.sensors)
        self._config = config
        self._flights: dict[tuple[int, object], _Flight] = {}
        """Calls started, not ended: their pre snapshots."""
        self._ticking: dict[tuple[int, object], _Flight] = {}
        """Calls accepted and traced, not ended."""
        self._posting: dict[tuple[int, object], _Flight] = {}
        """Calls that succeeded, waiting for their post snapshot."""
        self._period = int(1e9 / config.watch_rate) if config.watch_rate > 0 else 0
        self.built: dict[int, list[Built]] = {}

    def advance(self, when: int) -> None:
        """Take every sample and post snapshot due before a message received at ``when``."""
        for flight in self._ticking.values():
            assert flight.taker is not None
            while flight.tick < when:
                flight.taker.sample(self.sensors.snapshot(flight.tick, self._config.watched))
                flight.tick += self._period
        for key, flight in list(self._posting.items()):
            due = flight.post_at if flight.post_at is not None else flight.limit
            if due < when:
                self._build(key, flight, due)

    def sensor(self, topic: Topic, when: int, raw: bytes) -> None:
        """Take a sensor message (after :meth:`advance`)."""
        names = self.sensors.push(topic, when, raw)
        frames = self.sensors.frames
        arrived = {n: frames.arrived(n) for n in names if n in frames.names}
        for flight in self._posting.values():
            assert flight.call is not None
            if flight.post_at is None and when > flight.call.ended:
                ended = flight.call.ended
                flight.waiting.difference_update(
                    n for n in names if arrived.get(n, when) > ended)
                if not flight.waiting and when <= flight.limit:
                    flight.post_at = when

    def finish(self) -> None:
        """Take every post snapshot still due, at its limit: the bag ended."""
        for key, flight in list(self._posting.items()):
            self._build(key, flight, flight.post_at if flight.post_at is not None
                        else flight.limit)
        self._flights.clear()
        self._ticking.clear()

    def started(self, finder: Finder, key: object, when: int) -> None:
        """Take the call's pre snapshot."""
        pre = self.sensors.snapshot(when, thumbnails=True)
        self._flights[(id(finder), key)] = _Flight(
            pre=pre, started=when, stale=[f'pre: {s}' for s in self.sensors.stale(pre)])

    def accepted(self, finder: Finder, key: object, when: int) -> None:
        """Start the call's trace, when the action is watched."""
        flight = self._flights.get((id(finder), key))
        watched = self._config.watched
        if flight is None or not watched or not self._period \
                or finder.tool.kind is not ToolKind.ACTION:
            return
        flight.taker = TraceTaker(sensors=watched, rate=self._config.watch_rate,
                                  started=flight.started * _NS, pre=flight.pre,
                                  views={s.name: s.image for s in self._config.sensors
                                         if s.image is not None})
        flight.taker.accepted(when * _NS)
        flight.tick = when
        self._ticking[(id(finder), key)] = flight

    def feedback(self, finder: Finder, key: object, when: int, message: Any) -> None:
        """Give the call's trace its feedback."""
        flight = self._ticking.get((id(finder), key))
        if flight is not None and flight.taker is not None:
            flight.taker.feedback(message, at=when * _NS)

    def ended(self, finder: Finder, key: object, call: Call) -> None:
        """Wait for the post snapshot of a call that succeeded; forget one that did not."""
        name = (id(finder), key)
        flight = self._flights.pop(name, None)
        self._ticking.pop(name, None)
        if flight is None or call.status is not StepStatus.SUCCEEDED:
            return
        flight.call = call
        flight.limit = call.ended + int(self._config.post_check_timeout * 1e9)
        flight.waiting = set(self.sensors.names)
        if not flight.waiting:
            flight.post_at = call.ended
        self._posting[name] = flight

    def _build(self, key: tuple[int, object], flight: _Flight, at: int) -> None:
        del self._posting[key]
        call = flight.call
        assert call is not None
        post = self.sensors.snapshot(at, thumbnails=True)
        stale = flight.stale + [f'post: {s}' for s in self.sensors.stale(post)]
        trace = flight.taker.trace(post) if flight.taker is not None else None
        pre = flight.pre
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
        self.built.setdefault(key[0], []).append(Built(call, step, stale))
