"""Sensor capture: the latest message per topic, features extracted on demand.

Subscriptions are raw (serialized CDR bytes): the callback stores a reference
to the bytes and a receive time, nothing else, so a 1 kHz topic costs one
small callback per message and no deserialization. Features are extracted when
a snapshot is taken (before and after each step), and cached per message so
two snapshots of the same message deserialize it once.

All times are ``time.monotonic()`` seconds, the clock of ``Snapshot.stamps``
and of the staleness test (``max_age``). A sensor that never sent anything is
absent from the snapshot, so a check on it fails as 'missing'. The first
message of each sensor is decoded on arrival, to check its length against the
configured tolerance as early as possible.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import threading
import time
from typing import Any

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node as RosNode
from rclpy.qos import qos_profile_sensor_data
from rclpy.serialization import deserialize_message

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
        node: Node that owns the subscriptions.
        sensors: Sensors to subscribe to.
        callback_group: Group for the subscription callbacks.
        on_error: Called with a message when a sensor's data cannot be used
            (tolerance length mismatch, extraction failure); reported once per sensor.
    """

    def __init__(
        self,
        *,
        node: RosNode,
        sensors: Sequence[SensorConfig],
        callback_group: CallbackGroup | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self._cond = threading.Condition()
        self._waiters = 0
        self._latest = {s.name: _Latest(s) for s in sensors}
        self._on_error = on_error or (lambda _m: None)
        self._subscriptions = [
            node.create_subscription(
                s.msg_type, s.topic, self._make_callback(self._latest[s.name]),
                qos_profile_sensor_data, callback_group=callback_group, raw=True,
            )
            for s in sensors
        ]

    @property
    def names(self) -> tuple[str, ...]:
        """Configured sensor names."""
        return tuple(self._latest)

    @staticmethod
    def now() -> float:
        """The capture clock (monotonic seconds)."""
        return time.monotonic()

    def _make_callback(self, latest: _Latest) -> Callable[[bytes], None]:
        cond = self._cond

        def on_message(raw: bytes) -> None:
            stamp = time.monotonic()
            with cond:
                latest.raw = raw
                latest.stamp = stamp
                if self._waiters:
                    cond.notify_all()
            if not latest.seen:
                latest.seen = True
                self._features(latest, raw)  # check the tolerance length once, early
        return on_message

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
        with self._cond:
            return [n for n, latest in self._latest.items() if latest.stamp <= since]

    def wait_newer(self, since: float, timeout: float) -> bool:
        """Block until every sensor has a message received after ``since``.

        Returns:
            True when all have; False on timeout (see :meth:`lagging`).
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            self._waiters += 1
            try:
                while any(latest.stamp <= since for latest in self._latest.values()):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not self._cond.wait(remaining):
                        return not any(x.stamp <= since for x in self._latest.values())
                return True
            finally:
                self._waiters -= 1

    def latest_raw(self, name: str) -> Any:
        """The latest raw message of sensor ``name`` (None if none yet); for tests and tools."""
        with self._cond:
            return self._latest[name].raw
