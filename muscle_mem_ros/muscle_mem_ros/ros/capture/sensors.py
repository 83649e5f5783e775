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
Sensor capture: the latest message per topic, features extracted on demand.

Subscriptions are raw (serialized CDR bytes) with a history of one message
(KEEP_LAST 1), and messages are NOT taken as they arrive: the middleware keeps
the newest one, and a snapshot takes it (:meth:`SensorHub.capture`), so a 1 kHz
topic costs no Python work between snapshots. Measured on this project's
2-core machines with a 1 kHz JointState and a 40 Hz LaserScan: taking every
message (one wake-up per message) cost the idle node about three times a
process that never takes. The subscriptions live on a hidden helper node
(``_<node>_sensors``, same namespace, same global remappings) that no executor
spins. One thread waits on them only while someone needs fresh data: a
:meth:`SensorHub.wait_newer` call (data newer than a step's end) or a sensor
that has not sent its first message yet; otherwise it sleeps on guard
conditions. Features are extracted when a snapshot is taken (before and after
each step), and cached per message so two snapshots of the same message
deserialize it once.

All times are ``time.monotonic()`` seconds, the clock of ``Snapshot.stamps``
and of the staleness test (``max_age``), except under simulated time: when the
node's clock runs on ``/clock`` (``use_sim_time``), a reading's age is measured
on the node's clock (a paused simulation keeps data fresh, an advanced one
ages it), and the snapshot expresses it on the monotonic clock of the capture
(stamp = capture time - age in simulated seconds). The simulated receive time
is the node's clock when the message is taken, so under simulated time every
message is taken on arrival (the thread stays armed). A message's stamp is when the
middleware received it (its rmw reception time moved onto that clock), not when
it was taken, so "data newer than the step's end" really was sent
after the step ended. A sensor that never sent anything is
absent from the snapshot, so a check on it fails as 'missing'. The first
message of each sensor is decoded on arrival, to check its length against the
configured tolerance as early as possible.

Sensors that select elements by name (``joints: [...]``, see :mod:`..node.config`)
cannot use the newest message alone: several publishers share the topic (an
arm's ``joint_state_broadcaster`` and a gripper driver), each with its own
names, and the newest message may carry none of the configured ones. Their
subscription keeps a deeper history (:data:`BY_NAME_DEPTH` messages), and the
receive thread drains it every :data:`DRAIN_PERIOD` seconds, keeping the newest
raw message of each publisher (by publisher GID) without decoding it. A
snapshot decodes those few messages (one per publisher), in arrival order, into
the latest value per (field, name); a name none has sent yet makes the sensor
absent, so its checks fail as 'missing'. The sensor's stamp is that of its
oldest value, so ``max_age`` and "newer than the step's end" hold for every
configured name. Cost while idle: 1/DRAIN_PERIOD wake-ups per second and one
take per message (no deserialization), only for such sensors; messages are
lost only if more than BY_NAME_DEPTH arrive within one period (4 kHz).

Waiting without taking needs rclpy's private wait-set API, kept in
:mod:`..rclfix.waitset` with a version check. Where it is unavailable (another rclpy,
or ``MUSCLE_MEM_PLAIN_SUBSCRIPTIONS=1``), the helper node's subscriptions get
plain callbacks instead, spun by a single-threaded executor in the same thread:
every message is taken on arrival (stamped then), snapshots are the same.

The receive thread never dies silently: an unexpected error in its loop is
reported through ``on_error`` (``sensors: capture failed: ...; restarted``) and
the loop starts again, so waits for fresh data keep working.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from functools import partial
import threading
import time
from typing import Any

from muscle_mem_ros.errors import ImageError, ImageMismatch
from muscle_mem_ros.records import ImageLayout, Snapshot
from muscle_mem_ros.ros.capture.byname import ByName
from muscle_mem_ros.ros.capture.camerafeed import FRAME_DEPTH, Frames
from muscle_mem_ros.ros.capture.decoding import features_of
from muscle_mem_ros.ros.capture.exposure import exposed
from muscle_mem_ros.ros.capture.framesensors import FrameSensors
from muscle_mem_ros.ros.capture.thumbnails import thumbnail_of
from muscle_mem_ros.ros.node.nodeconfig import SensorConfig
from muscle_mem_ros.ros.node.stops import joint_positions, JOINT_STATE
from muscle_mem_ros.ros.rclfix import waitset
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.guard_condition import GuardCondition
from rclpy.node import Node as RosNode
from rclpy.qos import HistoryPolicy, qos_profile_sensor_data, QoSProfile
from rclpy.serialization import deserialize_message
from rclpy.signals import SignalHandlerGuardCondition
from rclpy.subscription import Subscription

__all__ = ['BY_NAME_DEPTH', 'DRAIN_PERIOD', 'SensorHub']

_RESTART_PAUSE = 0.1
"""Seconds the receive loop pauses before it restarts after an unexpected error."""

BY_NAME_DEPTH = 200
"""History depth of a by-name sensor's subscription: messages kept between two drains."""

DRAIN_PERIOD = 0.05
"""Seconds between two drains of the by-name sensors' subscriptions while nothing waits."""


class _Latest:
    """Latest raw message of one sensor and the features of the last one decoded."""

    __slots__ = ('config', 'raw', 'stamp', 'sim', 'decoded', 'invalid', 'problem', 'seen',
                 'by_name', 'frames')

    def __init__(self, config: SensorConfig) -> None:
        self.config = config
        self.raw: bytes | None = None
        self.stamp = float('-inf')
        self.sim = 0.0
        self.decoded: tuple[bytes | None, tuple[float, ...]] = (None, ())
        self.invalid = False
        self.problem = ''
        self.seen = False
        self.by_name = ByName(config) if config.by_name is not None else None
        self.frames = Frames() if config.image is not None else None
        """A camera's last frames (:mod:`.camerafeed`)."""


class SensorHub:
    """
    Keep the latest message of every configured sensor; take snapshots.

    :param node: The cache node (its context, name and namespace are used).
    :param sensors: Sensors to subscribe to.
    :param on_error: Called with a message when a sensor's data cannot be used
        (tolerance length mismatch, extraction failure); reported once per sensor.
    """

    def __init__(
        self,
        *,
        node: RosNode,
        sensors: Sequence[SensorConfig],
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self._cond = threading.Condition()
        self._take_lock = threading.Lock()
        self._waiters = 0
        self._frames = FrameSensors(node, [s for s in sensors if s.frames is not None],
                                    on_error=on_error, on_data=self._woken)
        sensors = [s for s in sensors if s.frames is None]  # TF sensors: .framesensors
        self._latest = {s.name: _Latest(s) for s in sensors}
        self._on_error = on_error or (lambda _m: None)
        self._node: RosNode | None = None
        self._thread: threading.Thread | None = None
        self._context = node.context
        self._clock = node.get_clock()
        self._stop = GuardCondition(callback=None, callback_group=None, context=node.context)
        self._arm = GuardCondition(callback=None, callback_group=None, context=node.context)
        self._stopping = False
        self._stop_event = threading.Event()
        self._subs: list[tuple[Subscription[Any], _Latest]] = []
        self._drained: list[tuple[Subscription[Any], _Latest]] = []
        self.fault_hook: Callable[[], None] | None = None
        """Called on every wake-up of the receive loop; a test hook to make it fail."""
        self.fallback = waitset.unavailable()
        """Why plain subscriptions are used instead of the wait set, or None."""
        self._executor: SingleThreadedExecutor | None = None
        if not sensors:
            return
        name = f'_{node.get_name()}_sensors'
        self._node = rclpy.create_node(
            name, context=node.context, namespace=node.get_namespace(),
            cli_args=['--ros-args', '-r', f'__node:={name}'], start_parameter_services=False,
        )
        self._subs = [
            (self._node.create_subscription(
                s.msg_type, s.topic, self._callback(self._latest[s.name]),
                _qos(BY_NAME_DEPTH if s.by_name is not None
                     else FRAME_DEPTH if s.image is not None else 1), raw=True),
             self._latest[s.name])
            for s in sensors
        ]
        self._drained = [(sub, x) for sub, x in self._subs if x.by_name is not None]
        if self.fallback is not None:
            self._executor = SingleThreadedExecutor(context=node.context)
            self._executor.add_node(self._node)
        self._thread = threading.Thread(target=self._receive, name=name, daemon=True)
        self._thread.start()

    def _woken(self) -> None:
        """Wake the waiters: new transforms arrived (TF sensors)."""
        with self._cond:
            if self._waiters:
                self._cond.notify_all()

    def _callback(self, latest: _Latest) -> Callable[[bytes], None]:
        """Return the subscription callback; it only runs with plain subscriptions."""
        def on_message(raw: bytes) -> None:
            self._fault()
            with self._take_lock:
                if latest.by_name is not None:
                    latest.by_name.pending[b''] = (raw, time.monotonic(), self._sim_now())
                    self._merge(latest)
                else:
                    self._store(latest, raw, time.monotonic())
        return on_message

    def _fault(self) -> None:
        hook = self.fault_hook
        if hook is not None:
            hook()

    def _sim_now(self) -> float | None:
        """Return the node's clock in seconds when it runs on ``/clock``, else None."""
        clock = self._clock
        if not getattr(clock, 'ros_time_is_active', False):
            return None
        return clock.now().nanoseconds * 1e-9

    def _wanted(self) -> list[Subscription[Any]]:
        """Subscriptions to wait on: all while someone waits, else those never heard from."""
        if self._waiters or self._sim_now() is not None:
            return [sub for sub, _latest in self._subs]
        return [sub for sub, latest in self._subs if not latest.seen]

    def _receive(self) -> None:
        """Run the receive loop until closed; report and restart it after an error."""
        while not self._stopping and self._context.ok():
            try:
                if self._executor is not None:
                    self._spin_plain()
                else:
                    self._wait_loop()
            except Exception as err:
                if self._stopping or not self._context.ok():
                    return  # closing, or the context was shut down under us
                self._on_error(f'sensors: capture failed: {err!r}; restarted')
                self._stop_event.wait(_RESTART_PAUSE)

    def _spin_plain(self) -> None:
        """Fallback: spin the helper node; its subscription callbacks store each message."""
        assert self._executor is not None
        while not self._stopping and self._context.ok():
            self._executor.spin_once(timeout_sec=0.2)

    def _wait_loop(self) -> None:
        """While armed, wait on the subscriptions and take what arrives; else sleep."""
        context = self._context
        sigint = SignalHandlerGuardCondition(context=context)
        period = int(DRAIN_PERIOD * 1e9)
        guards = [self._stop, self._arm, sigint]
        try:
            wait_set = waitset.RawWaitSet(context, subscriptions=len(self._subs), guards=3)
            while not self._stopping and context.ok():
                timeout = period if self._drained or self._sim_now() is not None else -1
                ready = wait_set.wait(self._wanted(), guards, timeout)
                self._fault()
                if ready:
                    self._refresh()
                elif self._drained:
                    with self._take_lock:
                        for sub, latest in self._drained:
                            self._take_by_name(sub, latest)
        finally:
            try:
                sigint.destroy()
            except Exception:  # the context is gone already
                pass

    def _refresh(self) -> None:
        """Take the newest pending message of every sensor (the history holds one)."""
        if self.fallback is not None:
            return  # plain subscriptions: their callbacks stored every message
        with self._take_lock:
            for sub, latest in self._subs:
                if latest.by_name is not None:
                    self._take_by_name(sub, latest)
                    self._merge(latest)
                    continue
                last = None
                while True:
                    taken = waitset.take(sub)
                    if taken is None:
                        break
                    if latest.frames is not None:  # a camera keeps each (.camerafeed)
                        self._store(latest, taken[0], waitset.arrival(taken[1]))
                        continue
                    last = taken
                if last is not None:
                    self._store(latest, last[0], waitset.arrival(last[1]))

    def _take_by_name(self, sub: Subscription[Any], latest: _Latest) -> None:
        """Take every queued message of a by-name sensor; keep each publisher's newest."""
        state = latest.by_name
        assert state is not None
        while True:
            taken = waitset.take(sub)
            if taken is None:
                return
            raw, info = taken
            gid = info.get('publisher_gid') if isinstance(info, dict) else None
            key = gid.get('data') if isinstance(gid, dict) else None
            if key is None:  # no publisher identity from this rmw: decode every message
                state.pending[b''] = (raw, waitset.arrival(info), self._sim_now())
                self._merge(latest)
            else:
                state.pending[key] = (raw, waitset.arrival(info), self._sim_now())

    def _merge(self, latest: _Latest) -> None:
        """Decode each publisher's newest message, oldest first, into the values by name."""
        state = latest.by_name
        assert state is not None
        merged = state.merge(latest.config, partial(self._report, latest))
        if merged is None:
            return
        newest, read = merged
        if read:  # the newest message read: what was wrong before is over
            latest.problem = ''
        complete = all(t != float('-inf') for t in state.stamps)
        with self._cond:
            latest.raw = newest
            state.features = tuple(state.values) if complete else None
            latest.stamp = min(state.stamps) if complete else float('-inf')
            latest.sim = min(state.sims) if complete else 0.0
            latest.seen = True
            if self._waiters:
                self._cond.notify_all()

    def close(self) -> None:
        """Stop the receive thread and destroy the helper node."""
        self._frames.close()
        self._stopping = True
        self._stop_event.set()
        try:
            self._stop.trigger()
        except Exception:  # context already shut down: the thread has ended
            pass
        if self._thread is not None:
            self._thread.join(2.0)
            if self._thread.is_alive():
                return  # a daemon thread; process exit ends it
        if self._executor is not None:
            self._executor.shutdown(timeout_sec=1.0)
            self._executor = None
        if self._node is not None:
            self._node.destroy_node()
        self._thread = self._node = None

    @property
    def names(self) -> tuple[str, ...]:
        """Configure sensor names."""
        return tuple(self._latest) + self._frames.names

    @staticmethod
    def now() -> float:
        """Return the capture clock (monotonic seconds)."""
        return time.monotonic()

    def _store(self, latest: _Latest, raw: bytes, stamp: float) -> None:
        sim = self._sim_now()
        if latest.frames is not None:  # a frame shows the world when exposed (.exposure)
            stamp, sim = exposed(raw, stamp, sim, self._clock)
        with self._cond:
            latest.raw = raw
            latest.stamp = stamp
            latest.sim = sim if sim is not None else 0.0
            if latest.frames is not None:
                latest.frames.push(raw, stamp, latest.sim)
            if self._waiters:
                self._cond.notify_all()
        if not latest.seen:
            latest.seen = True
            self._features(latest, raw)  # check the tolerance length once, early

    def _features(self, latest: _Latest, raw: bytes) -> tuple[float, ...] | None:
        decoded_raw, decoded = latest.decoded
        if raw is decoded_raw:
            return decoded if decoded or latest.config.image is None else None
        config = latest.config
        try:
            features = features_of(config, raw)
        except ImageMismatch as err:  # not the camera configured: checks say why
            self._report(latest, str(err))
            return None
        except ImageError as err:  # a corrupt frame: dropped, counted, the last good one kept
            assert latest.frames is not None
            latest.frames.dropped += 1
            if latest.frames.dropped == 1:
                self._on_error(f'sensors.{config.name}: a frame from {config.topic} dropped '
                               f'({err}); the last good frame stands in while it is fresh')
            latest.decoded = (raw, ())
            return None
        except ValueError as err:  # unreadable, or of another length than its tolerance
            self._report(latest, str(err))
            return None
        latest.decoded = (raw, features)
        latest.problem = ''
        return features

    def _report(self, latest: _Latest, message: str) -> None:
        latest.problem = message
        if not latest.invalid:
            latest.invalid = True
            self._on_error(message)

    @property
    def views(self) -> dict[str, ImageLayout]:
        """Return the camera sensors' layouts (traced and watched as their coarse view)."""
        return {n: x.config.image for n, x in self._latest.items() if x.config.image is not None}

    def last_frames(self, names: Collection[str]) -> dict[str, bytes]:
        """
        Return the message of each named camera's last good frame: what its last check read.

        Only references are taken (no decode, no copy), so a failed check can hold on to
        the frame it judged at once, and make its picture later (:meth:`thumbnail`).
        """
        return {n: x.frames.good[3] for n, x in self._latest.items()  # (good is never unset)
                if n in names and x.frames is not None and x.frames.good is not None}

    def thumbnail(self, name: str, raw: bytes) -> bytes | None:
        """Return a PNG thumbnail of camera ``name``'s frame ``raw`` (:mod:`.thumbnails`)."""
        return thumbnail_of(self._latest[name].config, raw)

    def dropped(self) -> dict[str, int]:
        """Count, per camera sensor, the frames dropped since start (they did not decode)."""
        return {n: x.frames.dropped for n, x in self._latest.items() if x.frames is not None}

    def problems(self) -> dict[str, str]:
        """
        Sensors whose data cannot be used (wrong tolerance length, unreadable), with why.

        While a sensor is listed here, every check fails: leaving it out would
        check the world with fewer sensors than configured.
        """
        return {**{n: x.problem for n, x in self._latest.items() if x.invalid and x.problem},
                **self._frames.problems()}

    def capture(self, names: Collection[str] | None = None, *,
                thumbnails: bool = False) -> Snapshot:
        """
        Take a snapshot of every sensor that has data, with receive stamps.

        :param names: Only these sensors (None: all). The sampler of a watched step reads
            only the watched ones: a 1080-beam scan decoded 40 times a second would take
            the interpreter from the walk for nothing.
        :param thumbnails: Add each camera's thumbnail, made from the message its features
            came from (:mod:`.thumbnails`): a snapshot a recording keeps, not one a check compares.
        """
        self._refresh()
        with self._cond:
            current = [
                (latest, latest.raw, latest.stamp,
                 None if latest.by_name is None else latest.by_name.features)
                for name, latest in self._latest.items() if names is None or name in names
            ]
        features: dict[str, tuple[float, ...]] = {}
        stamps: dict[str, float] = {}
        images: dict[str, bytes] = {}
        taken_at = time.monotonic()
        sim_now = self._sim_now()
        for latest, raw, stamp, by_name in current:
            if raw is None:
                continue
            if latest.by_name is not None:
                if by_name is None:
                    note = latest.by_name.unseen_note(latest.config)
                    if note:
                        self._on_error(note)
                    continue
                values: tuple[float, ...] | None = by_name
            elif latest.frames is None:
                values = self._features(latest, raw)
            sim = latest.sim
            if latest.frames is not None:
                got = latest.frames.reading(partial(self._features, latest),
                                            lambda: bool(latest.problem))
                values, stamp, sim, raw = got if got is not None else (None, stamp, sim, raw)
                png = thumbnail_of(latest.config, raw) if thumbnails and values else None
                if png is not None:
                    images[latest.config.name] = png
            if values is not None:
                features[latest.config.name] = values
                stamps[latest.config.name] = stamp if sim_now is None else \
                    taken_at - max(0.0, sim_now - sim)
        posed, posed_at = self._frames.capture(names, taken_at)
        features.update(posed)
        stamps.update(posed_at)
        return Snapshot(features=features, stamps=stamps, taken_at=taken_at, images=images)

    def lagging(self, since: float) -> list[str]:
        """Names of sensors with no message received after ``since``."""
        self._refresh()
        with self._cond:
            return self._late(since)

    def _late(self, since: float) -> list[str]:
        """Name the sensors with nothing received after ``since`` (the lock held)."""
        return [n for n, x in self._latest.items() if x.stamp <= since] + [
            n for n in self._frames.names if self._frames.arrived(n) <= since]

    def wait_newer(self, since: float, timeout: float) -> bool:
        """
        Block until every sensor has a message received after ``since``.

        :return: True when all have; False on timeout (see :meth:`lagging`).
        """
        return not self._wait(lambda: self._late(since), timeout)

    def joint_positions(self) -> dict[str, float]:
        """
        Return every joint's newest position, by name, over the JointState sensors' messages.

        All the names the messages carry, not only a by-name sensor's ``joints``: a hold
        (:mod:`..node.stops`) holds the joints of the goal it stops, whichever they are.
        """
        self._refresh()
        found: list[tuple[float, bytes, Any]] = []
        with self._take_lock:
            for latest in self._latest.values():
                if latest.config.type_name != JOINT_STATE:
                    continue
                kind = latest.config.msg_type
                if latest.by_name is not None:
                    found += [(at, raw, kind) for raw, at, _ in latest.by_name.newest.values()]
                elif latest.raw is not None:
                    found.append((latest.stamp, latest.raw, kind))
        found.sort(key=lambda item: item[0])
        return joint_positions(deserialize_message(raw, kind) for _, raw, kind in found)

    def latest_raw(self, name: str) -> Any:
        """Return sensor ``name``'s latest raw message (None if none yet); for tests and tools."""
        self._refresh()
        with self._cond:
            return self._latest[name].raw

    def silent(self) -> list[str]:
        """
        Name the sensors that have no usable value yet.

        A sensor is silent until its first message; a sensor selecting joints by
        name stays silent until every configured name has been received.

        :return: Their names, in configuration order.
        """
        self._refresh()
        with self._cond:
            quiet = [n for n, latest in self._latest.items() if _silent(latest)]
        return quiet + self._frames.silent()

    def wait_first(self, timeout: float) -> list[str]:
        """
        Block until every sensor has sent a first message, at most ``timeout`` seconds.

        :param timeout: Seconds to wait at most.
        :return: The sensors still silent ([] when all have spoken).
        """
        return self._wait(lambda: [n for n, x in self._latest.items() if _silent(x)]
                          + self._frames.silent(), timeout)

    def _wait(self, pending: Callable[[], list[str]], timeout: float) -> list[str]:
        """
        Block until ``pending`` (called under the lock) names no sensor, at most ``timeout`` s.

        The first waiter arms the receive thread, which takes messages while anyone waits.

        :param pending: Returns the sensors waited for.
        :param timeout: Seconds to wait at most.
        :return: The sensors still waited for ([] when none is).
        """
        deadline = time.monotonic() + timeout
        self._refresh()
        with self._cond:
            self._waiters += 1
            try:
                if self._waiters == 1:
                    self._arm.trigger()  # the receive thread starts taking
                while True:
                    left = pending()
                    remaining = deadline - time.monotonic()
                    if not left or remaining <= 0:
                        return left
                    self._cond.wait(remaining)
            finally:
                self._waiters -= 1


def _silent(latest: _Latest) -> bool:
    """Return True while ``latest`` has no usable value (see :meth:`SensorHub.silent`)."""
    if latest.by_name is not None:
        return latest.stamp == float('-inf')
    return latest.raw is None


def _qos(depth: int) -> QoSProfile:
    """Return sensor-data QoS (best effort, volatile) keeping the last ``depth`` messages."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=depth,
        reliability=qos_profile_sensor_data.reliability,
        durability=qos_profile_sensor_data.durability,
    )
