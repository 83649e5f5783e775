"""Sensor capture: the latest message per topic, features extracted on demand.

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
and of the staleness test (``max_age``). A message's stamp is when the
middleware received it (its rmw reception time moved onto that clock), not when
it was taken, so "data newer than the step's end" really was sent
after the step ended. A sensor that never sent anything is
absent from the snapshot, so a check on it fails as 'missing'. The first
message of each sensor is decoded on arrival, to check its length against the
configured tolerance as early as possible.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import threading
import time
from typing import Any

import rclpy
from rclpy.guard_condition import GuardCondition
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node as RosNode
from rclpy.qos import HistoryPolicy, QoSProfile, qos_profile_sensor_data
from rclpy.serialization import deserialize_message
from rclpy.signals import SignalHandlerGuardCondition

from muscle_mem_ros.records import Snapshot
from muscle_mem_ros.ros.config import SensorConfig

__all__ = ['SensorHub']


class _Latest:
    """Latest raw message of one sensor and the features of the last one decoded."""

    __slots__ = ('config', 'raw', 'stamp', 'decoded', 'invalid', 'problem', 'seen')

    def __init__(self, config: SensorConfig) -> None:
        self.config = config
        self.raw: bytes | None = None
        self.stamp = float('-inf')
        self.decoded: tuple[bytes | None, tuple[float, ...]] = (None, ())
        self.invalid = False
        self.problem = ''
        self.seen = False


class SensorHub:
    """Keep the latest message of every configured sensor; take snapshots.

    Args:
        node: The cache node (its context, name and namespace are used).
        sensors: Sensors to subscribe to.
        on_error: Called with a message when a sensor's data cannot be used
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
        self._latest = {s.name: _Latest(s) for s in sensors}
        self._on_error = on_error or (lambda _m: None)
        self._node: RosNode | None = None
        self._thread: threading.Thread | None = None
        self._context = node.context
        self._stop = GuardCondition(callback=None, callback_group=None, context=node.context)
        self._arm = GuardCondition(callback=None, callback_group=None, context=node.context)
        self._stopping = False
        self._subs: list[tuple[Any, _Latest]] = []
        if not sensors:
            return
        name = f'_{node.get_name()}_sensors'
        self._node = rclpy.create_node(
            name, context=node.context, namespace=node.get_namespace(),
            cli_args=['--ros-args', '-r', f'__node:={name}'], start_parameter_services=False,
        )
        qos = QoSProfile(
            history=HistoryPolicy.KEEP_LAST, depth=1,
            reliability=qos_profile_sensor_data.reliability,
            durability=qos_profile_sensor_data.durability,
        )
        self._subs = [
            (self._node.create_subscription(
                s.msg_type, s.topic, lambda _raw: None, qos, raw=True),
             self._latest[s.name])
            for s in sensors
        ]
        self._thread = threading.Thread(target=self._receive, name=name, daemon=True)
        self._thread.start()

    def _wanted(self) -> list[Any]:
        """Subscriptions to wait on: all while someone waits, else those never heard from."""
        if self._waiters:
            return [sub for sub, _latest in self._subs]
        return [sub for sub, latest in self._subs if not latest.seen]

    def _receive(self) -> None:
        """While armed, wait on the subscriptions and take what arrives; else sleep."""
        context = self._context
        sigint = SignalHandlerGuardCondition(context=context)
        try:
            wait_set = _rclpy.WaitSet(len(self._subs), 3, 0, 0, 0, 0, context.handle)
            while not self._stopping and context.ok():
                wait_set.clear_entities()
                for sub in self._wanted():
                    wait_set.add_subscription(sub.handle)
                wait_set.add_guard_condition(self._stop.handle)
                wait_set.add_guard_condition(self._arm.handle)
                wait_set.add_guard_condition(sigint.handle)
                wait_set.wait(-1)
                if wait_set.get_ready_entities('subscription'):
                    self._refresh()
        except Exception:  # the context was shut down under us: nothing left to receive
            pass
        finally:
            try:
                sigint.destroy()
            except Exception:
                pass

    def _refresh(self) -> None:
        """Take the newest pending message of every sensor (the history holds one)."""
        with self._take_lock:
            for sub, latest in self._subs:
                last = None
                while True:
                    try:
                        taken = sub.handle.take_message(sub.msg_type, True)
                    except Exception:  # destroyed while closing
                        taken = None
                    if taken is None:
                        break
                    last = taken
                if last is not None:
                    self._store(latest, last[0], _arrival(last[1]))

    def close(self) -> None:
        """Stop the receive thread and destroy the helper node."""
        self._stopping = True
        try:
            self._stop.trigger()
        except Exception:  # context already shut down: the thread has ended
            pass
        if self._thread is not None:
            self._thread.join(2.0)
            if self._thread.is_alive():
                return  # a daemon thread; process exit ends it
        if self._node is not None:
            self._node.destroy_node()
        self._thread = self._node = None

    @property
    def names(self) -> tuple[str, ...]:
        """Configured sensor names."""
        return tuple(self._latest)

    @staticmethod
    def now() -> float:
        """The capture clock (monotonic seconds)."""
        return time.monotonic()

    def _store(self, latest: _Latest, raw: bytes, stamp: float) -> None:
        with self._cond:
            latest.raw = raw
            latest.stamp = stamp
            if self._waiters:
                self._cond.notify_all()
        if not latest.seen:
            latest.seen = True
            self._features(latest, raw)  # check the tolerance length once, early

    def _features(self, latest: _Latest, raw: bytes) -> tuple[float, ...] | None:
        decoded_raw, decoded = latest.decoded
        if raw is decoded_raw:
            return decoded
        config = latest.config
        try:
            msg = deserialize_message(raw, config.msg_type)
            values: list[float] = []
            for extractor in config.extractors:
                values.extend(extractor.extract(msg))
        except Exception as err:  # a malformed message must not stop capture
            self._report(latest, f'sensors.{config.name}: cannot read {config.topic}: {err}')
            return None
        if len(config.tolerance) not in (1, len(values)):
            self._report(
                latest,
                f'sensors.{config.name}.tolerance: {len(config.tolerance)} values, but '
                f'{config.topic} gives {len(values)} elements; sensor ignored (checks fail)',
            )
            return None
        features = tuple(values)
        latest.decoded = (raw, features)
        latest.problem = ''
        return features

    def _report(self, latest: _Latest, message: str) -> None:
        latest.problem = message
        if not latest.invalid:
            latest.invalid = True
            self._on_error(message)

    def problems(self) -> dict[str, str]:
        """Sensors whose data cannot be used (wrong tolerance length, unreadable), with why.

        While a sensor is listed here, every check fails: leaving it out would
        check the world with fewer sensors than configured.
        """
        return {n: x.problem for n, x in self._latest.items() if x.invalid and x.problem}

    def capture(self) -> Snapshot:
        """Take a snapshot of every sensor that has data, with receive stamps."""
        self._refresh()
        with self._cond:
            current = [(latest, latest.raw, latest.stamp) for latest in self._latest.values()]
        features: dict[str, tuple[float, ...]] = {}
        stamps: dict[str, float] = {}
        for latest, raw, stamp in current:
            if raw is None:
                continue
            values = self._features(latest, raw)
            if values is not None:
                features[latest.config.name] = values
                stamps[latest.config.name] = stamp
        return Snapshot(features=features, stamps=stamps, taken_at=time.monotonic())

    def lagging(self, since: float) -> list[str]:
        """Names of sensors with no message received after ``since``."""
        self._refresh()
        with self._cond:
            return [n for n, latest in self._latest.items() if latest.stamp <= since]

    def wait_newer(self, since: float, timeout: float) -> bool:
        """Block until every sensor has a message received after ``since``.

        Returns:
            True when all have; False on timeout (see :meth:`lagging`).
        """
        deadline = time.monotonic() + timeout
        self._refresh()
        with self._cond:
            self._waiters += 1
            try:
                if self._waiters == 1:
                    self._arm.trigger()  # the receive thread starts taking
                while any(latest.stamp <= since for latest in self._latest.values()):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not self._cond.wait(remaining):
                        return not any(x.stamp <= since for x in self._latest.values())
                return True
            finally:
                self._waiters -= 1

    def latest_raw(self, name: str) -> Any:
        """The latest raw message of sensor ``name`` (None if none yet); for tests and tools."""
        self._refresh()
        with self._cond:
            return self._latest[name].raw

    def silent(self) -> list[str]:
        """
        Name the sensors that have not sent a first message yet.

        :return: Their names, in configuration order.
        """
        self._refresh()
        with self._cond:
            return [n for n, latest in self._latest.items() if latest.raw is None]

    def wait_first(self, timeout: float) -> list[str]:
        """
        Block until every sensor has sent a first message, at most ``timeout`` seconds.

        :param timeout: Seconds to wait at most.
        :return: The sensors still silent ([] when all have spoken).
        """
        deadline = time.monotonic() + timeout
        self._refresh()
        with self._cond:
            self._waiters += 1
            try:
                if self._waiters == 1:
                    self._arm.trigger()
                while True:
                    silent = [n for n, x in self._latest.items() if x.raw is None]
                    remaining = deadline - time.monotonic()
                    if not silent or remaining <= 0:
                        return silent
                    self._cond.wait(remaining)
            finally:
                self._waiters -= 1




def _arrival(info: Any) -> float:
    """When the middleware received a message, on the monotonic clock.

    The rmw reception time (system clock) is moved onto the monotonic clock, so
    a message that arrived before a step ended never counts as newer than the
    step because it was taken late. Without a reception time: now.
    """
    now = time.monotonic()
    received = info.get('received_timestamp', 0) if isinstance(info, dict) else 0
    if not received:
        return now
    return min(now, now - (time.time() - received * 1e-9))
