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
How a walk is told to people: CacheEvents, ExecuteTask feedback, a trajectory's bindings.

A shadow run is told the same way (:class:`ShadowReporter`): each step's verdict as
soon as the step is recorded.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
import math
import threading
import time
from typing import Any, Protocol

from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.bindings.rules import Plan, Substitution
from muscle_mem_ros.records import CheckFailure, Step, TrajectoryInfo
from muscle_mem_ros.replay.shadow import followed, ShadowRun, ShadowStep, verdict_text
from muscle_mem_ros.replay.treeview import TreeView
from muscle_mem_ros.replay.walk import StepEvent
from muscle_mem_ros.ros.capture.stopping import StopReport
from muscle_mem_ros.ros.messages.convert import substitution_msg
from rclpy.duration import Duration
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.time import Time

__all__ = ['cache_event', 'ClockTrail', 'describe_bindings', 'EventReporter', 'EventSink',
           'EVENTS_QOS', 'ShadowReporter', 'stamp_at', 'TRAIL_PERIOD']

EVENTS_QOS = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.TRANSIENT_LOCAL)
"""``~/events``: reliable, and transient local with the last 50 kept, so a subscriber
matched late (``serve --attach`` started after the node, or discovery still settling when
the first decision is published) gets them; a volatile subscriber gets only new ones."""

_EVENTS = {
    StepEvent.STEP_OK: CacheEvent.STEP_OK,
    StepEvent.CHECK_FAILED: CacheEvent.CHECK_FAILED,
    StepEvent.STEP_FAILED: CacheEvent.ERROR,
}


class EventSink(Protocol):
    """Publishes one CacheEvent (the node's ``publish_event``)."""

    def __call__(
        self, *, kind: int, task: str, step: int, trajectory_id: int = 0, detail: str = '',
        failure: CheckFailure | None = None, substituted: Sequence[Any] = (),
        watched: Watched = ((), ()), at: float | None = None,
    ) -> None:
        """Publish a ``kind`` event about ``step`` of ``task`` (``at``: monotonic, None: now)."""


Watched = tuple[Sequence[str], Sequence[str]]
"""The elements a step was watched on while it ran, and those traced but not watched."""


def stamp_at(now: Time, at: float | None) -> Any:
    """
    Return the stamp of something that happened at monotonic time ``at`` (None: ``now``).

    Right only where the node's clock runs as the monotonic one does (the system clock);
    under ``use_sim_time`` :class:`ClockTrail` says it.

    :param now: The node clock's time now.
    """
    if at is not None and math.isfinite(at):
        now = now - Duration(nanoseconds=int(max(0.0, time.monotonic() - at) * 1e9))
    return now.to_msg()


TRAIL_PERIOD = 0.05
"""Seconds (on the node's clock) between two notes of a :class:`ClockTrail` under sim time."""
_TRAIL_KEPT = 1200
"""Notes a trail keeps (a minute of simulated time at :data:`TRAIL_PERIOD`)."""


class ClockTrail:
    """
    Stamps on the node's clock for what happened at a monotonic time, under simulated time too.

    A walk notes when things happened on the monotonic clock (a check that failed, a stop's
    steps). Under ``use_sim_time`` the node's clock follows ``/clock``: a simulation at four
    times real time, or a paused one, is not "now minus the monotonic seconds since", and
    early in a simulation that difference goes below zero. So the trail notes which node
    time went with which monotonic time (a timer on the node's clock: it fires as simulated
    time passes), and a happening is stamped by interpolating between the notes around it
    (before the oldest note: that note's time). On the system clock it is :func:`stamp_at`.

    :param node: The node whose clock stamps (its ``use_sim_time`` decides).
    """

    def __init__(self, node: Any) -> None:
        self._clock = node.get_clock()
        self._notes: deque[tuple[float, int]] = deque(maxlen=_TRAIL_KEPT)
        self._lock = threading.Lock()
        self.simulated = bool(node.get_parameter('use_sim_time').value)
        if self.simulated:
            self.note()
            node.create_timer(TRAIL_PERIOD, self.note)

    def note(self) -> None:
        """Note the node's time now against the monotonic clock."""
        pair = (time.monotonic(), self._clock.now().nanoseconds)
        with self._lock:
            if not self._notes or pair[1] >= self._notes[-1][1]:
                self._notes.append(pair)
            else:  # the simulation was reset: what came before is another timeline
                self._notes.clear()
                self._notes.append(pair)

    def stamp(self, at: float | None) -> Any:
        """Return the stamp of something that happened at monotonic time ``at`` (None: now)."""
        now = self._clock.now()
        if not self.simulated:
            return stamp_at(now, at)
        if at is None or not math.isfinite(at):
            return now.to_msg()
        with self._lock:
            notes = [*self._notes, (time.monotonic(), now.nanoseconds)]
        before = [n for n in notes if n[0] <= at]
        if not before:
            return Time(nanoseconds=notes[0][1], clock_type=now.clock_type).to_msg()
        (m0, n0) = before[-1]
        (m1, n1) = notes[len(before)] if len(before) < len(notes) else before[-1]
        share = (at - m0) / (m1 - m0) if m1 > m0 else 0.0
        return Time(nanoseconds=int(n0 + share * (n1 - n0)), clock_type=now.clock_type).to_msg()


def cache_event(*, stamp: Any, kind: int, task: str, step: int, trajectory_id: int = 0,
                detail: str = '', failure: CheckFailure | None = None,
                substituted: Sequence[Any] = (), watched: Watched = ((), ()),
                depth: int = 0) -> CacheEvent:
    """
    Return one CacheEvent, with the sensor failure behind it when there is one.

    :param stamp: When (a ``builtin_interfaces/Time``).
    :param kind: The event's type (``CacheEvent.HIT``, ...).
    :param substituted: The step's substitutions, as messages.
    :param watched: What the step was watched on while it ran, and what not.
    :param depth: How deep ``task`` runs (0: the task sent; 1: a subtask it called).
    """
    msg = CacheEvent(stamp=stamp, type=kind, task=task, depth=depth, step=step,
                     trajectory_id=trajectory_id,
                     detail=detail, substituted=list(substituted), element=-1,
                     time_into_step=-1.0, watched=list(watched[0]),
                     unwatched=list(watched[1]))
    if failure is not None:
        msg.sensor = failure.sensor
        msg.deviation = float(failure.deviation)
        msg.tolerance = float(failure.tolerance)
        if not math.isnan(failure.at):
            msg.element = failure.element
            msg.value = float(failure.value)
            msg.expected = float(failure.expected)
            msg.time_into_step = float(failure.at)
    return msg


class EventReporter:
    """
    Publish a walk's events for one task as CacheEvents, and its progress as feedback.

    :param task: The task the events are about.
    :param sink: ``sink(kind=, task=, step=, trajectory_id=, detail=, failure=)``.
    :param feedback: Called with (step, total, detail) for progress, or None.
    """

    def __init__(self, *, task: str, sink: EventSink,
                 feedback: Callable[..., None] | None = None) -> None:
        self._task = task
        self._sink = sink
        self._feedback = feedback
        self._total = -1
        self._pending: dict[int, tuple[list[Substitution], list[Any]]] = {}
        self._watched: dict[int, Watched] = {}
        self._stops: dict[int, tuple[float, StopReport | None]] = {}
        self.substitutions: list[Substitution] = []
        """Every substitution of the walk, in order (the ExecuteTask result lists them)."""
        self.messages: list[Any] = []
        """The same as ``Substitution`` messages (converted once, sent three times)."""

    def event(
        self, *, kind: StepEvent, step: int, trajectory_id: int = 0, detail: str = '',
        failure: CheckFailure | None = None,
    ) -> None:
        """Publish one CacheEvent; a bound step's STEP_OK carries its substitutions."""
        subs, msgs = self._pending.pop(step, ([], [])) if kind is StepEvent.STEP_OK else ([], [])
        if subs:
            detail += ' (' + ', '.join(s.describe() for s in subs) + ')'
        watched = self._watched.pop(step, ((), ()))
        failed_at, stop = self._stops.pop(step, (math.nan, None)) \
            if kind is not StepEvent.STEP_OK else (math.nan, None)
        self._sink(kind=_EVENTS[kind], task=self._task, step=step,
                   trajectory_id=trajectory_id, detail=detail, failure=failure,
                   substituted=msgs, watched=watched,
                   at=failed_at if math.isfinite(failed_at) else None)
        self._said_stop(step, stop, trajectory_id)

    def stopping(self, step: int, text: str) -> None:
        """Say at once what happens while a step's goal is stopped (feedback)."""
        if self._feedback is not None:
            self._feedback(step, self._total, f'step {step}: {text}')

    def stopped(self, step: int, failed_at: float, stop: StopReport | None) -> None:
        """
        Note when a step failed and how its goal was stopped.

        Its CHECK_FAILED (or ERROR) is stamped when it failed, and a ``STOPPED`` event per
        happening of the stop follows it, each stamped when it happened.
        """
        self._stops[step] = (failed_at, stop)

    def flush(self) -> None:
        """Say the stops no event was published for (a walk the caller canceled)."""
        for step in sorted(self._stops):
            self._said_stop(step, self._stops.pop(step)[1], 0)

    def _said_stop(self, step: int, stop: StopReport | None, trajectory_id: int) -> None:
        if stop is None:
            return
        for happened in stop.happened:
            self._sink(kind=CacheEvent.STOPPED, task=self._task, step=step,
                       trajectory_id=trajectory_id, detail=happened.text, at=happened.at)

    def progress(self, *, step: int, total: int, detail: str) -> None:
        """Publish feedback, when there is a channel for it."""
        self._total = total
        if self._feedback is not None:
            self._feedback(step, total, detail)

    def watched(self, step: int, watched: Sequence[str], unwatched: Sequence[str]) -> None:
        """Note what a step is watched on while it runs (its STEP_OK or CHECK_FAILED says)."""
        self._watched[step] = (tuple(watched), tuple(unwatched))

    def substituted(self, step: int, subs: Sequence[Substitution]) -> None:
        """Note a bound step's substitutions; feedback says them before the goal is sent."""
        msgs = [substitution_msg(s) for s in subs]
        self._pending[step] = (list(subs), msgs)
        self.substitutions.extend(subs)
        self.messages.extend(msgs)
        if self._feedback is not None:
            self._feedback(step, self._total, f'step {step}: ' + ', '.join(
                s.describe() for s in subs), msgs)


class ShadowReporter:
    """
    Say a shadow run's verdicts while the agent works: one per step, as it is recorded.

    :meth:`observe` is the recording's observer (:class:`~..capture.recorder.Session`): it runs
    in the thread that appended the step, before the agent's call is answered, adds the
    new steps to the comparison (:class:`~muscle_mem_ros.replay.shadow.ShadowRun`) and publishes
    each verdict: a ``SHADOW_STEP`` event (its trajectory: the one the cache is on at
    that step) and a ``MODE_SHADOW`` feedback. :meth:`finish` says what is left (a step
    whose comparison failed is tried again there) and returns every verdict; nothing is
    said after it.

    :param run: The comparison.
    :param view: The tree it predicts from.
    :param sink: ``sink(kind=, task=, step=, trajectory_id=, detail=)`` publishes an event.
    :param feedback: ``feedback(step, detail)`` publishes a feedback message.
    :param logger: The node's logger.
    """

    def __init__(self, *, run: ShadowRun, view: TreeView, sink: EventSink,
                 feedback: Callable[[int, str], None], logger: RcutilsLogger) -> None:
        self._run = run
        self._view = view
        self._sink = sink
        self._feedback = feedback
        self._log = logger
        self._lock = threading.Lock()
        self._finished = False

    def observe(self, steps: Sequence[Step]) -> None:
        """Compare and say the steps not said yet; log a failure (the step stays recorded)."""
        try:
            self._catch_up(steps)
        except Exception as err:  # noqa: BLE001 - a verdict never costs the agent its step
            self._log.error(f"task '{self._view.task}': shadow comparison of step "
                            f'{len(self._run.steps)} failed (tried again at the end): {err!r}')

    def finish(self, steps: Sequence[Step]) -> list[ShadowStep]:
        """
        Compare and say what is left of ``steps``; return every verdict.

        :raises MuscleMemError: A comparison could not read the store.
        """
        found = self._catch_up(steps)
        with self._lock:
            self._finished = True
        return found

    def _catch_up(self, steps: Sequence[Step]) -> list[ShadowStep]:
        with self._lock:
            if self._finished:
                return list(self._run.steps)
            while len(self._run.steps) < len(steps):
                entry = self._run.add(steps[len(self._run.steps)])
                trajectory_id, _ = followed(self._run.steps, self._view.trajectories)
                detail = verdict_text(entry)
                self._sink(kind=CacheEvent.SHADOW_STEP, task=self._view.task, step=entry.step,
                           trajectory_id=trajectory_id, detail=detail)
                self._feedback(entry.step, detail)
            return list(self._run.steps)


def describe_bindings(info: TrajectoryInfo, plans: Mapping[int, Plan]) -> str:
    """Return '; bound: <step>:<field> <- <source> (<origin>), ...' for a trajectory, or ''."""
    bound = [f'{depth}:{b.field} <- {b.source} ({b.origin})'
             for depth, node_id in enumerate(info.node_ids)
             for b in plans.get(node_id, Plan()).bindings]
    return '; bound: ' + ', '.join(bound) if bound else ''
