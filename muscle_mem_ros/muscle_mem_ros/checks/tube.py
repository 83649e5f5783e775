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
The check during a step: the robot's state judged against the recorded trace, as a tube.

A step's pre- and post-checks compare two instants. While the motion runs the
world is compared with the path the recording took. Not with what it saw at the
same time into the step: when a replayed motion starts varies by far more than
the motion's own jitter (a planner inside the action server plans for 0.1 s one
time and 2 s the next, a loaded controller starts late, a fake or simulated one
may finish a recorded second at once), so any window in time either cancels
good replays or lets a knocked object through. The tube is aligned by progress:
a position along the recorded step, in seconds of the recording.

The rule, for one replay of one step:

* **One state.** The tube keeps the latest reading of every watched series (each
  sensor, and the action's feedback as the series :data:`FEEDBACK`). On each new
  reading the whole state (the latest reading of every series seen so far; a
  series not read yet constrains nothing) must lie, every watched element within
  its tolerance, in the recording at ONE progress. Things that moved together at
  recording must move together now: a cube that stays on the table while the
  gripper rises is off the tube, and an L-shaped path does not accept the corner
  it never went through.
* **Forward only.** The progress is searched forward from the furthest progress
  reached minus :data:`BACK` seconds, and the earliest progress that fits is
  taken (the furthest reached is the largest taken so far). A replay may lag or
  lead its recording by any time (a controller that starts late, or runs the
  motion at half or twice the speed, is never punished: it just fits later or
  sooner), but it may not walk back along the path by more than that window in all
  (not by some amount per reading). A state fits anywhere within its tolerance and
  the earliest fit is taken, so a walk back shows once it exceeds about twice an
  element's tolerance plus (:data:`BACK` + a sample) of the recorded motion's
  travel: a base pushed back slowly (over 1 s) while it drives at 10 cm/s is
  caught after 3.4 cm with a 1 cm tolerance, after 5.3 cm with a 2 cm one.
* **Sampling skew.** Sensors are read asynchronously: readings of two sensors can
  be up to two polls (50 ms at 40 Hz) or one message period apart, and elements
  of one sensor can come from different messages (a JointState merged by name
  from two publishers). At a progress between two recorded samples of a series,
  that series' elements may lie anywhere within the range of those two samples
  and :data:`SLACK` more samples on either side (its own samples: a 10 Hz sensor
  gets its own, longer, period). Two series may so be about 50 ms apart at 40 Hz
  (at least two samples either way) before their tolerances count, not much more: a
  cube that stays on the table is caught once the gripper has risen 5.5 cm at
  10 cm/s, 7 cm at 20 cm/s (2 cm tolerances).

What it does not see: a motion that stalls on its path (it is still on the
path); ``step_timeout`` and the controller's own tolerances end those, and the
post-check judges where it ended.

A binding that retargets a step moves the recording: an element is expected moved
by an amount between its shift before the step and its shift after it (``low`` to
``high`` of :class:`Watched`), which contains every intermediate position of a
motion that ends shifted (the tool moving to a cube that moved). Elements whose
path under the shift cannot be predicted are not watched at all
(:mod:`muscle_mem_ros.replay.watching` decides which, and names them). Angles
(``angle`` mode) are unwrapped along the recording, and a reading is moved by whole
turns next to each span first.

A state that fits nowhere from the window on fails, naming one element: its value, the
nearest value the tube allowed there, and its tolerance. Where the robot's own state (its
joints, its odometry) still fits the recording, the arm is on its path and the element is
the worst of the rest, where the rest is least off; else, where all but the reading that
broke the fit still fit, that reading's worst element; else the element furthest off
where the state fits best (the smallest worst-element excess over tolerance).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
import math
import threading

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .poses import pose_coordinates, POSE_SIZE
from ..records import CheckFailure, Series, Trace
from ..resume import FailureKind

__all__ = ['BACK', 'FEEDBACK', 'left_tube', 'MAX_WATCHED', 'Reading', 'SLACK', 'Tube',
           'Watched']

MAX_WATCHED = 16
"""A sensor (or a feedback message) with more elements is neither traced nor watched: a
scan's 360 ranges would make every trace large, and its checks are not element-wise."""

BACK = 0.025
"""Seconds of the recording the progress may go back from the furthest reached, in all:
one sampling period at the default 40 Hz. Taking the earliest progress that fits
already leaves a state that stalls, or jitters within its tolerance, where it fits;
the window takes in a reading a sample late beyond :data:`SLACK`, and no more, so a
slow push back along the path is caught (see the module's rule)."""

SLACK = 2
"""Recorded samples of a series, on either side of the two around a progress, whose
range the series' elements may lie in there. With two, two series may be at least two
samples (50 ms at 40 Hz, 67 ms at 30 Hz) either way apart before their tolerances count:
the asynchronous sampling of two sensors at replay (a poll, and one message period,
apart) and at recording (the same again). One sample was too few: a carry at 0.5 m/s
with a 30 Hz cube pose was canceled 3.3 cm off its path in bench/watch, unchanged.
Small enough that a cube that stays on the table is caught once the gripper has risen
5.5 cm at 10 cm/s, 7 cm at 20 cm/s (2 cm tolerances)."""

_NEAR = 16
"""Progress points tried first after the window's start: a state nearly always fits there
(further points are tried in doubling chunks, the earliest fit wins)."""

FEEDBACK = '~feedback'
"""Series name of the action's feedback leaves (no sensor name can be spelt so)."""


@dataclass(frozen=True)
class Watched:
    """
    One element watched while a step runs.

    :ivar series: Sensor name, or :data:`FEEDBACK`.
    :ivar index: Element of the series.
    :ivar tolerance: How far outside the recorded path a reading may be.
    :ivar angle: Compare as angles (whole turns do not count).
    :ivar low: The recording is expected moved by at least this much ...
    :ivar high: ... and at most this much (both 0: as recorded).
    :ivar name: How people read it ('object[1]', 'feedback:current.pose.position.x').
    """

    series: str
    index: int
    tolerance: float
    angle: bool = False
    low: float = 0.0
    high: float = 0.0
    name: str = ''

    @property
    def label(self) -> str:
        """Return the element's name for people."""
        return self.name or f'{self.series}[{self.index}]'


@dataclass(frozen=True, eq=False)
class Reading:
    """
    Where the state of a tube's watched elements sits on it: what someone watching live sees.

    Per element, in the order of :attr:`Tube.watched` (nan where its series sent nothing yet).

    :ivar progress: Where the state fits best: in the first stretch of progress it fits at
        from the window on (the stretch :meth:`Tube.judge` takes the start of), the point
        where its worst element uses least of its tolerance (then all, least in sum); when it
        fits nowhere, the point from the window on where its worst element is least off
        (the failure's). Not the judge's earliest fit: there a moving element sits a
        tolerance off, and a replay on its path would plot at the trip line.
    :ivar fits: The state fits the recording at ``progress``.
    :ivar value: The latest readings.
    :ivar expected: The nearest values the recording allows at ``progress``.
    :ivar low: The recorded path's span there ...
    :ivar high: ... (a value within it is on the path).
    :ivar deviation: How far each value lies outside its span (0 inside).
    :ivar tolerance: The tolerances (scaled).
    :ivar ratio: ``deviation / tolerance``: above 1 the element is off the tube.
    """

    progress: float
    fits: bool
    value: np.ndarray
    expected: np.ndarray
    low: np.ndarray
    high: np.ndarray
    deviation: np.ndarray
    tolerance: np.ndarray
    ratio: np.ndarray


@dataclass(frozen=True, eq=False)
class _Part:
    """Where one watched series' elements sit in a reading and in the tube's state."""

    index: np.ndarray
    """The watched elements of a reading of the series."""
    first: int
    """The state's column of the first of them (the rest follow)."""


class Tube:
    """
    The recording of one step as a path to stay on; judges live readings (one replay).

    :param trace: The step's recorded trace.
    :param watched: The elements to watch (others are ignored).
    :param scale: Factor on every tolerance (``watch_tolerance_scale``).
    :param loose: Per series, which recorded samples' elements say nothing of the path
        around them (a camera's cells where its view moves,
        :func:`~muscle_mem_ros.checks.imageview.moving_cells`): booleans shaped as the
        series' values; the element may be anything at a point between two recorded samples
        either of which is loose.
    :param own: The series of the robot's own state (its joints, its odometry): a failure
        blames the others where these still fit (:meth:`_failure`).
    :param poses: Per pose series (a TF sensor), the rotation its readings are judged about:
        recorded and live readings become six coordinates, the origin and the rotation
        vector about it (:func:`~muscle_mem_ros.checks.poses.pose_coordinates`), and the
        watched indices are those coordinates'. A rotation is so compared as a rotation,
        never by its quaternion's elements.
    """

    def __init__(self, trace: Trace, watched: Sequence[Watched], *, scale: float = 1.0,
                 loose: Mapping[str, np.ndarray] | None = None,
                 poses: Mapping[str, np.ndarray] | None = None,
                 own: frozenset[str] = frozenset()) -> None:
        self._poses = dict(poses or {})
        groups: dict[str, list[Watched]] = {}
        for w in watched:
            groups.setdefault(w.series, []).append(w)
        recorded: list[tuple[str, Series, list[Watched]]] = []
        for name, items in groups.items():
            series = trace.feedback if name == FEEDBACK else trace.sensors.get(name)
            if series is not None and series.values and name in self._poses:
                series = Series(series.times, tuple(map(tuple, pose_coordinates(
                    np.asarray(series.values), self._poses[name]).tolist())))
            if series is not None and series.times and series.values:
                recorded.append((name, series, items))
        self.watched = tuple(w for _, _, items in recorded for w in items)
        grid = np.unique(np.concatenate([np.asarray(s.times, dtype=float)
                                         for _, s, _ in recorded])) if recorded else np.zeros(1)
        self._grid = grid
        """The progress points: every recorded sample's time."""
        self._parts: dict[str, _Part] = {}
        lows, highs = [np.zeros((len(grid), 0))], [np.zeros((len(grid), 0))]
        for name, series, items in recorded:
            self._parts[name] = _Part(np.array([w.index for w in items]),
                                      sum(low.shape[1] for low in lows))
            low, high = _spans(series, items, grid, (loose or {}).get(name))
            lows.append(low)
            highs.append(high)
        self._low = np.hstack(lows)
        self._high = np.hstack(highs)
        self._tolerance = np.array([w.tolerance for w in self.watched], dtype=float) * scale
        self._floor = self._low - self._tolerance
        self._ceiling = self._high + self._tolerance
        self._angle = np.array([w.angle for w in self.watched], dtype=bool)
        self._own_columns = np.flatnonzero([w.series in own for w in self.watched])
        self._state = np.full(len(self.watched), math.nan)
        self._seen = np.zeros(len(self.watched), dtype=bool)
        self._back = np.searchsorted(grid, grid - BACK, side='left')
        """Per progress point: the first point of the window back from it."""
        self._reached = 0
        self._lock = threading.Lock()
        """One judge at a time: the sampler's thread judges sensor readings while the
        feedback callback's thread judges feedback, both on the one state."""

    @property
    def series(self) -> frozenset[str]:
        """Return the names of the watched series."""
        return frozenset(self._parts)

    @property
    def progress(self) -> float:
        """Return the furthest progress reached, in seconds of the recording."""
        return float(self._grid[self._reached])

    @property
    def recorded(self) -> float:
        """Return the last progress point: how long the recorded step took, in seconds."""
        return float(self._grid[-1])

    def reading(self) -> Reading:
        """
        Return where the state the last :meth:`judge` saw sits on the tube (:class:`Reading`).

        Searches the window once more: called only for someone watching (the node's
        ``~/watch`` with a subscriber), never by the judge itself.
        """
        with self._lock:
            start = int(self._back[self._reached])
            seen = np.flatnonzero(self._seen)
            low, high, turned = self._beside(seen, start, len(self._grid))
            _, scores = _outside(low, high, turned, self._tolerance[seen])
            worst = scores.max(axis=1, initial=0.0)
            fitting = worst <= 1.0
            fits = bool(fitting.any())
            if fits:  # the first stretch that fits: not a later pass by the same place
                first = int(np.argmax(fitting))
                stretch = fitting[first:]
                end = first + (int(np.argmin(stretch)) if not stretch.all() else len(stretch))
                least = worst[first:end]  # ties (another element is the worst): least in all
                tied = np.flatnonzero(least <= least.min())
                row = start + first + int(tied[np.argmin(scores[first + tied].sum(axis=1))])
            else:
                row = start + int(np.argmin(worst))
            low, high, turned = self._beside(np.arange(len(self.watched)), row, row + 1)
            outside, ratio = _outside(low[0], high[0], turned[0], self._tolerance)
            unseen = ~self._seen
            return Reading(
                progress=float(self._grid[row]), fits=fits, value=self._state.copy(),
                expected=np.clip(turned[0], low[0], high[0]), low=low[0], high=high[0],
                deviation=np.where(unseen, math.nan, outside), tolerance=self._tolerance,
                ratio=np.where(unseen, math.nan, ratio))

    def judge(self, series: str, at: float, values: Sequence[float]) -> CheckFailure | None:
        """
        Judge a new reading of ``series``, taken ``at`` seconds into the step (for the report).

        The reading replaces the series' last one in the state, and the whole state is
        judged (the module's rule). Safe from several threads: one judges at a time.

        :return: The element to blame (:meth:`_failure`), or None when the state fits the
            recording at one progress.
        """
        part = self._parts.get(series)
        if part is None:
            return None
        live = np.asarray(values, dtype=float).ravel()
        if series in self._poses and live.size == POSE_SIZE:
            live = pose_coordinates(live, self._poses[series])[0]
        if live.size <= int(part.index.max()):
            return CheckFailure(series, math.inf, 0.0, math.inf,
                                f'has {live.size} elements, the recording more',
                                FailureKind.MISSING, at=at)
        columns = slice(part.first, part.first + len(part.index))
        with self._lock:
            self._state[columns] = live[part.index]
            self._seen[columns] = True
            start = int(self._back[self._reached])
            found = self._earliest(start)
            if found is not None:
                self._reached = max(self._reached, found)
                return None
            return self._failure(start, at, series)

    def _earliest(self, start: int) -> int | None:
        """Return the earliest progress point from ``start`` the state fits at, or None."""
        seen = np.flatnonzero(self._seen)
        first, size = start, _NEAR
        while first < len(self._grid):
            last = min(first + size, len(self._grid))
            _, _, turned = self._beside(seen, first, last)
            fits = ((turned >= self._floor[first:last, seen])
                    & (turned <= self._ceiling[first:last, seen])).all(axis=1)
            if fits.any():
                return first + int(np.argmax(fits))
            first, size = last, size * 2
        return None

    def _beside(self, seen: np.ndarray, first: int,
                last: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """
        Return the spans of the ``seen`` columns at points [first, last), and the state beside.

        An angle is moved by whole turns next to each span's middle; other elements are as
        read.
        """
        low = self._low[first:last, seen]
        high = self._high[first:last, seen]
        live = self._state[seen]
        angle = self._angle[seen]
        if not angle.any():
            return low, high, np.broadcast_to(live, low.shape)
        middle = (low + high) / 2.0
        turned = np.where(angle, middle + np.remainder(live - middle + math.pi, 2 * math.pi)
                          - math.pi, live)
        return low, high, turned

    def _failure(self, start: int, at: float, series: str) -> CheckFailure:
        """
        Return the failure of a state off the tube: the element to blame, where it is off.

        Where the robot's own state (the ``own`` series) still fits the recording, the arm
        is on its path and the rest is blamed; else, where the rest of the state fits, the
        reading of ``series``, which broke the fit; else the element furthest off where
        the state fits best. A camera that sees a box dropped while the arm moves on its
        path is so named, not a joint a little off at a later progress where the arm hid
        the box's cell in the recording (ranked by shares of tolerance alone, that joint
        was named 1 time in about 20 in the demo).
        """
        seen = np.flatnonzero(self._seen)
        low, high, turned = self._beside(seen, start, len(self._grid))
        tolerance = self._tolerance[seen]
        outside, scores = _outside(low, high, turned, tolerance)
        part = self._parts[series]
        own = np.isin(seen, self._own_columns)
        read = (seen >= part.first) & (seen < part.first + len(part.index))
        row, column = _blame(scores, own) or _blame(scores, ~read) or _worst(scores)
        element = int(seen[column])
        w = self.watched[element]
        value = float(self._state[element])
        expected = float(np.clip(turned[row, column], low[row, column], high[row, column]))
        return CheckFailure(
            w.label if w.series == FEEDBACK else w.series, float(outside[row, column]),
            float(tolerance[column]), float(scores[row, column]), 'left the recorded path',
            FailureKind.OUT_OF_TOLERANCE, element=w.index, value=value,
            expected=expected, at=at)


def _blame(scores: np.ndarray, kept: np.ndarray) -> tuple[int, int] | None:
    """
    Return where the ``kept`` columns fit and the others are least off, and the worst of those.

    None when no column or every column is kept, or the kept columns fit nowhere.
    """
    if not kept.any() or kept.all():
        return None
    rows = np.flatnonzero(scores[:, kept].max(axis=1) <= 1.0)
    if not rows.size:
        return None
    others = np.flatnonzero(~kept)
    row = int(rows[np.argmin(scores[rows][:, others].max(axis=1))])
    return row, int(others[np.argmax(scores[row, others])])


def _worst(scores: np.ndarray) -> tuple[int, int]:
    """Return where the worst element is least off, and that element."""
    row = int(np.argmin(scores.max(axis=1)))
    return row, int(np.argmax(scores[row]))


def _outside(low: np.ndarray, high: np.ndarray, turned: np.ndarray,
             tolerance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """
    Return how far values lie outside their spans, and that as a share of their tolerance.

    A value that is no number is infinitely far; with a tolerance of 0 any distance is an
    infinite share.
    """
    outside = np.maximum(np.maximum(low - turned, turned - high), 0.0)
    outside = np.where(np.isfinite(turned), outside, math.inf)
    with np.errstate(divide='ignore', invalid='ignore'):
        scores = np.where(tolerance > 0, outside / tolerance,
                          np.where(outside > 0, math.inf, 0.0))
    return outside, scores


def _spans(series: Series, watched: Sequence[Watched], grid: np.ndarray,
           loose: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """
    Return the range one series' watched elements may lie in at each progress point.

    At a point between two samples of the series: the range of those two and of
    :data:`SLACK` samples on either side, moved by each element's shift (``low`` to
    ``high``). Before the first sample and after the last the series is where it starts
    and ends. An element recorded as nan there (no number), or ``loose`` at either of the
    two samples around the point, may be anything.
    """
    times = np.asarray(series.times, dtype=float)
    values = np.asarray(series.values, dtype=float).reshape(len(times), -1)
    picked = values[:, [w.index for w in watched]]
    for j, w in enumerate(watched):
        if w.angle:
            picked[:, j] = np.unwrap(picked[:, j])
    width = 2 * SLACK + 2
    padded = np.pad(picked, ((SLACK + 1, SLACK + 1), (0, 0)), mode='edge')
    windows = sliding_window_view(padded, width, axis=0)
    before = np.searchsorted(times, grid, side='right')
    low = np.fmin.reduce(windows, axis=-1)[before] + np.array([w.low for w in watched])
    high = np.fmax.reduce(windows, axis=-1)[before] + np.array([w.high for w in watched])
    if loose is not None:  # loose at either sample around the point: may be anything
        marks = np.pad(np.asarray(loose, dtype=bool)[:, [w.index for w in watched]],
                       ((1, 1), (0, 0)), mode='edge')
        free = (marks[:-1] | marks[1:])[before]
        low = np.where(free, math.nan, low)
        high = np.where(free, math.nan, high)
    return np.where(np.isnan(low), -math.inf, low), np.where(np.isnan(high), math.inf, high)


def left_tube(failure: CheckFailure) -> str:
    """
    Say what a check during a step saw, for people.

    'sensor object[0] was 0.412 at 0.62 s into the step, 0.05 off the recorded path
    (nearest on it 0.362, tolerance 0.02)'; a quiet sensor: its reason.
    """
    if failure.element < 0:
        return f'sensor {failure.sensor} {failure.reason}'
    name = failure.sensor if failure.sensor.startswith('feedback:') else \
        f'sensor {failure.sensor}[{failure.element}]'
    return (f'{name} was {failure.value:.4g} at {failure.at:.2f} s into the step, '
            f'{failure.deviation:.4g} off the recorded path (nearest on it '
            f'{failure.expected:.4g}, tolerance {failure.tolerance:.4g})')
