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
The check during a replayed action goal: judge the world while it runs, cancel when it leaves.

A :class:`StepWatch` is made for one replayed goal whose step was recorded with a
trace (:func:`make_watch`). The sampler (:mod:`..capture.tracing`) hands it each
poll of the sensors; each new reading of a watched sensor is judged against the
recording's tube (:class:`~muscle_mem_ros.checks.tube.Tube`) at its receive time
into the step, and each feedback message as it arrives. The first reading outside
the tube trips the watch: its cancel token fires, which cancels the goal at the
server (the proxy's wait ends at once), and the failure says which sensor element,
its value, what the tube allowed and when.

A watched sensor that goes quiet for longer than its ``max_age`` while the step
runs trips the watch too (kind STALE): the cache cannot see the world the robot
moves in, and finishing the motion blind to look at the post-check afterwards is
what the watch exists to avoid. It fails closed: a poll that comes late (the cache's
own process starved by a loaded machine) judges silence as any other, because a
reading's age is counted from when it reached the process (its receive stamp), not
from when the cache took it; a cache too starved to hear its sensors within their
``max_age`` cannot judge, and may not go on. An error while judging (a reading of
another shape, a bug) stops the step too, with the error as its reason: a watch that
cannot judge never lets the motion go on unwatched.

Services are not watched: a request cannot be canceled once sent, so a service
step is judged when it returns (its post-check), as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import math
import threading
import time
from typing import Any

from muscle_mem_ros.bindings.judge import During
from muscle_mem_ros.checks.imageview import moving_cells, watch_view
from muscle_mem_ros.checks.tube import FEEDBACK, Tube
from muscle_mem_ros.records import (
    CheckFailure, ImageLayout, Node, SensorSpec, Snapshot, Step, ToolKind)
from muscle_mem_ros.replay.watching import pose_reference, watched_elements
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.ros.capture.tracing import feedback_leaves
from muscle_mem_ros.ros.rclfix.sync import CancelToken

__all__ = ['FEEDBACK_TOLERANCE', 'make_watch', 'StepWatch']

FEEDBACK_TOLERANCE = 0.25
"""A feedback leaf's tolerance, as a share of its recorded range (floored), before
``watch_tolerance_scale``. Feedback has no configured tolerance, and runs of a simulated
arm at 4x real time gave feedback paths 14% of their range apart (bench/watch): a quarter
catches a motion pushed off its path without canceling one that runs as recorded."""


class StepWatch:
    """
    Judge one replayed goal against its recording while it runs.

    :param tube: The recording's tube.
    :param max_age: Sensor name -> seconds after which its reading is stale.
    :param cancel: The walk's cancel; :attr:`token` fires with it too.
    :param leaves: The feedback leaves the tube watches, in order.
    :param unwatched: Labels of traced elements left out (said in the events).
    :param views: Camera sensors' layouts: a reading is judged as its coarse view, as the
        trace keeps it (:func:`~muscle_mem_ros.checks.imageview.watch_view`).
    """

    def __init__(self, *, tube: Tube, max_age: Mapping[str, float | None], cancel: CancelToken,
                 leaves: Sequence[str] = (), unwatched: Sequence[str] = (),
                 views: Mapping[str, ImageLayout] | None = None) -> None:
        self.tube = tube
        self._views = dict(views or {})
        self.token = CancelToken(parent=cancel)
        """Cancels the goal: when the walk is canceled, or the world leaves the tube."""
        self.failure: CheckFailure | None = None
        self.tripped_at = math.nan
        """Monotonic time the watch tripped (the goal's cancel was requested), or nan."""
        self.labels = tuple(w.label for w in tube.watched)
        self.unwatched = tuple(unwatched)
        self._max_age = dict(max_age)
        self._leaves = tuple(leaves)
        self._sensors = tuple(s for s in tube.series if s != FEEDBACK)
        self.names = frozenset(self._sensors)
        """The sensors it reads (what the sampler captures for it)."""
        self._zero = math.nan
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()
        self.why: Callable[[str], str] | None = None
        """Says why a sensor is missing from a poll ('' when it cannot say): a TF sensor's
        lookup names the link (the capture's problems); set by the node's replayer."""
        self.on_judged: Callable[[str, float, CheckFailure | None], None] | None = None
        """Told each judged reading: (series, seconds into the step, its failure or None),
        after a failure tripped the watch; the node's ``~/watch`` publishes from it. It must
        not raise (an error here stops the step, as any error while judging)."""

    def begin(self, sent: float) -> None:
        """Start judging: the goal was sent at ``sent`` (the zero until it is accepted)."""
        self._zero = sent

    def accepted(self, at: float) -> None:
        """Note when the goal was accepted: times into the step count from there."""
        self._zero = at

    def sample(self, snapshot: Snapshot) -> None:
        """Judge the new readings of the watched sensors in one poll (an error trips it)."""
        try:
            self._sample(snapshot)
        except Exception as err:  # noqa: BLE001 - fails closed: the step stops, saying why
            self.trip(CheckFailure('watch', math.inf, 0.0, math.inf,
                                   f'could not judge a reading ({err!r}); the step was stopped',
                                   FailureKind.MISSING, at=snapshot.taken_at - self._zero))

    def _sample(self, snapshot: Snapshot) -> None:
        zero = self._zero
        if math.isnan(zero) or self.failure is not None:
            return
        now = snapshot.taken_at
        for name in self._sensors:
            stamp = snapshot.stamps.get(name)
            limit = self._max_age.get(name)
            if stamp is None or (limit is not None and now - stamp > limit):
                age = 'sent nothing' if stamp is None else f'sent nothing for {now - stamp:.2f} s'
                why = self.why(name) if self.why is not None and stamp is None else ''
                if why:  # a TF sensor's lookup names the link that is missing or stale
                    age = f'could not be read ({why})'
                self.trip(CheckFailure(name, math.inf, 0.0, math.inf,
                                       f'{age} while the step ran (max_age {limit:g} s)'
                                       if limit is not None else f'{age} while the step ran',
                                       FailureKind.STALE, at=now - zero))
                return
            if stamp <= self._last.get(name, -math.inf):
                continue
            self._last[name] = stamp
            values = snapshot.features[name]
            layout = self._views.get(name)
            if layout is not None and len(values) == layout.size:
                values = watch_view(values, layout)  # as the trace keeps a camera
            failure = self._judge(name, stamp - zero, values)
            if failure is not None:
                self.trip(failure)
                return

    def feedback(self, message: Any) -> None:
        """Judge one feedback message (the action's ``Feedback``) as it arrives."""
        zero = self._zero
        if not self._leaves or math.isnan(zero) or self.failure is not None:
            return
        at = time.monotonic() - zero
        try:
            leaves = feedback_leaves(message) or {}
            values = [float(leaves.get(name, math.nan)) for name in self._leaves]
            failure = self._judge(FEEDBACK, at, values)
        except Exception as err:  # noqa: BLE001 - fails closed, as sample
            failure = CheckFailure('watch', math.inf, 0.0, math.inf,
                                   f'could not judge a feedback message ({err!r}); the step '
                                   'was stopped', FailureKind.MISSING, at=at)
        if failure is not None:
            self.trip(failure)

    def _judge(self, series: str, at: float, values: Sequence[float]) -> CheckFailure | None:
        """Judge one reading on the tube; trip on a failure, then tell :attr:`on_judged`."""
        failure = self.tube.judge(series, at, values)
        if failure is not None:
            self.trip(failure)
        if self.on_judged is not None:
            self.on_judged(series, at, failure)
        return failure

    def trip(self, failure: CheckFailure) -> None:
        """Note the first failure and cancel the goal."""
        with self._lock:
            if self.failure is not None:
                return
            self.failure = failure
            self.tripped_at = time.monotonic()
        self.token.cancel()


def make_watch(node: Node, *, sensors: Sequence[SensorSpec], watch: frozenset[str],
               during: During | None, scale: float, cancel: CancelToken,
               period: float = 0.025, own: frozenset[str] = frozenset()) -> StepWatch | None:
    """
    Return the watch of one replayed step, or None when it is not watched.

    Not watched: a service, a step recorded without a trace (before traces, or with
    ``watch`` off), one recorded shorter than one sampling period (its replay would be
    polled once at most, after it ended: its post-check judges it, and a replay of 25 ms
    steps does not pay a watch per step), or one whose trace holds none of the watched
    sensors.

    :param node: The step about to be sent.
    :param sensors: The configured sensors' specs.
    :param watch: Names of the sensors that may be watched.
    :param during: What the walk's shift expects of the step (None: as recorded).
    :param scale: Factor on every tolerance (``watch_tolerance_scale``).
    :param own: Names of the sensors of the robot's own state (what a trip blames last).
    :param cancel: The walk's cancel.
    :param period: The sampler's period (seconds).
    """
    step = node.step
    if step.kind is not ToolKind.ACTION or step.trace is None or _recorded(step) < period:
        return None
    elements, unwatched = watched_elements(
        node, sensors=sensors, watch=watch, during=during,
        feedback_tolerance=FEEDBACK_TOLERANCE)
    if not elements:
        return None
    loose = {s.name: moving_cells(step.trace.sensors[s.name].values, s.image, s.tolerance[0])
             for s in sensors if s.image is not None and s.name in step.trace.sensors}
    poses = {s.name: reference for s in sensors if s.name in step.trace.sensors
             for reference in [pose_reference(s, step.trace.sensors[s.name].values)]
             if reference is not None}
    tube = Tube(step.trace, elements, scale=scale, loose=loose, poses=poses, own=own)
    leaves = step.trace.feedback_leaves if FEEDBACK in tube.series else ()
    return StepWatch(tube=tube, max_age={s.name: s.max_age for s in sensors}, cancel=cancel,
                     leaves=leaves, unwatched=unwatched,
                     views={s.name: s.image for s in sensors if s.image is not None})


def _recorded(step: Step) -> float:
    """Return how long the step took at recording (a document's step: its trace's span)."""
    if step.duration > 0 or step.trace is None:
        return step.duration
    return max((series.times[-1] for series in step.trace.sensors.values() if series.times),
               default=0.0)
