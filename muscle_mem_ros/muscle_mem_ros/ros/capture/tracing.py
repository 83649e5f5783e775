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
Sensors sampled while an action step runs: the trace a recording keeps, what a watch sees.

One :class:`Sampler` per node polls the sensor hub at ``watch_rate`` (default 40 Hz)
while some step is traced or watched, and hands each snapshot to them; between
steps it sleeps. Polling, not a wake-up per message, bounds the cost: a 1 kHz
JointState costs 40 takes a second, not 1000 (the hub keeps only the newest
message, :mod:`.sensors`), and a reading is judged at its receive time, so the
poll adds at most one period to the reaction, never an error in time.

A recorded step's trace (:class:`TraceTaker`) keeps, per watched sensor, each new
reading the polls saw (so at most ``watch_rate`` samples a second) with its time
since the goal was accepted, and the action's numeric feedback leaves as they
come, thinned to the same rate (:func:`feedback_leaves`: ``builtin_interfaces/Time``
and ``Duration`` fields are left out: they say when, not where). A sensor or a feedback
message with more than :data:`~muscle_mem_ros.checks.tube.MAX_WATCHED` elements is not
traced, except a camera: its coarse grey view is
(:func:`~muscle_mem_ros.checks.imageview.watch_view`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
import threading
import time
from typing import Any, Protocol

from muscle_mem_ros.checks.imageview import watch_view
from muscle_mem_ros.checks.tube import MAX_WATCHED
from muscle_mem_ros.records import ImageLayout, Series, Snapshot, Trace
from muscle_mem_ros.ros.capture.sensors import SensorHub

__all__ = ['feedback_leaves', 'Sampler', 'TraceTaker']


class Listener(Protocol):
    """Something that wants the sensors while a step runs."""

    @property
    def names(self) -> frozenset[str]:
        """Return the sensors it reads."""

    def sample(self, snapshot: Snapshot) -> None:
        """Take one snapshot (called from the sampler's thread)."""


class Sampler:
    """
    Poll the sensor hub at a fixed rate while anyone listens.

    :param hub: The node's sensor capture.
    :param rate: Polls per second.
    :param on_error: Told when a listener raised (it stays registered).
    """

    def __init__(self, hub: SensorHub, rate: float,
                 on_error: Callable[[str], None] | None = None) -> None:
        self.hub = hub
        self.rate = rate
        self._period = 1.0 / rate
        self._on_error = on_error or (lambda _m: None)
        self._cond = threading.Condition()
        self._listeners: list[Listener] = []
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, listener: Listener) -> None:
        """
        Start handing snapshots to ``listener``, the first about one period from now.

        Not at once: the goal is being sent then, and the step's pre snapshot is its
        start already (:class:`TraceTaker` begins with it); a step shorter than a
        period costs no poll at all.
        """
        with self._cond:
            if self._closed:
                return
            self._listeners.append(listener)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name='muscle_mem sampler',
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def remove(self, listener: Listener) -> None:
        """Stop handing snapshots to ``listener``."""
        with self._cond:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def close(self) -> None:
        """Stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(2.0)

    def _run(self) -> None:
        tick = time.monotonic() + self._period
        while True:
            with self._cond:
                self._pause(tick)
                while not self._listeners and not self._closed:
                    self._cond.wait()
                    tick = time.monotonic() + self._period
                    self._pause(tick)
                if self._closed:
                    return
                listeners = list(self._listeners)
            names = frozenset[str]().union(*(listener.names for listener in listeners))
            try:
                snapshot = self.hub.capture(names)
            except Exception as err:  # a closing hub; the next poll tries again
                snapshot = Snapshot(taken_at=time.monotonic())
                self._on_error(f'sampler: capture failed: {err!r}')
            for listener in listeners:
                try:
                    listener.sample(snapshot)
                except Exception as err:  # one listener must not stop the others
                    self._on_error(f'sampler: {type(listener).__name__} failed: {err!r}')
            tick = max(tick + self._period, time.monotonic())  # late: no burst to catch up

    def _pause(self, until: float) -> None:
        """Wait (holding the condition) until ``until``, or until closed."""
        while not self._closed:
            delay = until - time.monotonic()
            if delay <= 0:
                return
            self._cond.wait(delay)


class TraceTaker:
    """
    The trace of one recorded action step.

    :param sensors: Names of the sensors to trace (``watch: auto``).
    :param rate: The sampler's rate (feedback is thinned to it).
    :param started: Monotonic time the goal was sent (the zero until it is accepted).
    :param pre: The step's pre snapshot: where each series starts.
    :param views: Camera sensors' layouts: each is traced as its
        :func:`~muscle_mem_ros.checks.imageview.watch_view`, whatever its size.
    """

    def __init__(self, *, sensors: Collection[str], rate: float, started: float,
                 pre: Snapshot | None = None,
                 views: Mapping[str, ImageLayout] | None = None) -> None:
        self.names = frozenset(sensors)
        self._views = dict(views or {})
        self._rate = rate
        self._zero = started
        self._lock = threading.Lock()
        self._rows: dict[str, list[tuple[float, tuple[float, ...]]]] = {}
        self._feedback: list[tuple[float, tuple[float, ...]]] = []
        self._leaves: tuple[str, ...] | None = None
        self._untraceable = False
        if pre is not None:
            self.sample(pre)

    def accepted(self, at: float) -> None:
        """Note when the goal was accepted: trace times count from there."""
        self._zero = at

    def sample(self, snapshot: Snapshot) -> None:
        """Keep each traced sensor's reading when it is new."""
        with self._lock:
            for name in self.names:
                stamp = snapshot.stamps.get(name)
                values = snapshot.features.get(name)
                layout = self._views.get(name)
                if stamp is None or values is None:
                    continue
                if layout is not None and len(values) == layout.size:
                    values = watch_view(values, layout)  # a camera: its coarse grey view
                elif len(values) > MAX_WATCHED:
                    continue
                rows = self._rows.setdefault(name, [])
                if rows and (stamp <= rows[-1][0] or len(values) != len(rows[-1][1])):
                    continue
                rows.append((stamp, tuple(values)))

    def feedback(self, message: Any, at: float | None = None) -> None:
        """Keep a feedback message's leaves (got ``at``, default now), at most ``rate`` a s."""
        now = time.monotonic() if at is None else at
        with self._lock:
            if self._untraceable or (
                    self._feedback and now - self._feedback[-1][0] < 1.0 / self._rate):
                return
            leaves = feedback_leaves(message)
            if not leaves or (self._leaves is not None and tuple(leaves) != self._leaves):
                self._untraceable = True  # none, too many, or they change shape
                return
            self._leaves = tuple(leaves)
            self._feedback.append((now, tuple(leaves.values())))

    def trace(self, post: Snapshot | None = None) -> Trace | None:
        """
        Return what was traced, times since acceptance; None when nothing was.

        :param post: The step's post snapshot, taken once the sensors reported after its
            end: it ends each series. A step shorter than a poll period (or a motion that
            ends between two polls) would otherwise leave a trace without its end, and a
            replay's reading of where the step ended would be outside it.
        """
        if post is not None:
            self.sample(post)
        zero = self._zero
        with self._lock:
            sensors = {name: Series(tuple(t - zero for t, _ in rows),
                                    tuple(v for _, v in rows))
                       for name, rows in self._rows.items() if rows}
            feedback = None
            if self._feedback and not self._untraceable:
                feedback = Series(tuple(t - zero for t, _ in self._feedback),
                                  tuple(v for _, v in self._feedback))
            if not sensors and feedback is None:
                return None
            return Trace(rate=self._rate, sensors=sensors, feedback=feedback,
                         feedback_leaves=self._leaves or () if feedback is not None else ())


def feedback_leaves(message: Any, limit: int = MAX_WATCHED) -> dict[str, float] | None:
    """
    Return the numeric leaves of a feedback message by path; None beyond ``limit`` of them.

    Booleans count as 0 or 1; strings and ``builtin_interfaces/Time`` and ``Duration``
    fields (a stamp differs on every run, an elapsed time with its timing) are left out.
    """
    out: dict[str, float] = {}
    return out if _walk(message, '', out, limit) else None


_TIMES = ('builtin_interfaces/Time', 'builtin_interfaces/Duration')
"""Field types left out of the feedback: a stamp or an elapsed time says when, not where."""


def _walk(message: Any, prefix: str, out: dict[str, float], limit: int) -> bool:
    for name, kind in message.get_fields_and_field_types().items():
        if kind in _TIMES:
            continue
        if not _leaf(getattr(message, name), f'{prefix}{name}', out, limit):
            return False
    return True


def _leaf(value: Any, path: str, out: dict[str, float], limit: int) -> bool:
    if isinstance(value, (bool, int, float)):
        out[path] = float(value)
        return len(out) <= limit
    if hasattr(value, 'get_fields_and_field_types'):
        return _walk(value, f'{path}.', out, limit)
    if isinstance(value, (str, bytes)):
        return True
    try:
        items = list(value)
    except TypeError:
        return True
    if len(out) + len(items) > limit and items and not isinstance(items[0], (str, bytes)):
        return False
    return all(_leaf(item.item() if hasattr(item, 'item') else item, f'{path}[{i}]', out, limit)
               for i, item in enumerate(items))
