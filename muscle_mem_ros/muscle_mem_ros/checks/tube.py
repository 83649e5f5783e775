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
The check during a step: a live reading judged against the recorded trace, as a tube.

A step's pre- and post-checks compare two instants. While the motion runs the
world is compared with the path the recording took. Not with what it saw at the
same time into the step: when a replayed motion starts varies by far more than
the motion's own jitter (a planner inside the action server plans for 0.1 s one
time and 2 s the next, a loaded controller starts late, a fake or simulated one
may finish a recorded second at once), so any window in time either cancels
good replays or lets a knocked object through. The tube is aligned by progress:

* the recording of each element is a path of segments between consecutive
  samples; a reading is explained when it lies within the element's tolerance of
  a segment's span (between the two samples' values: a fast motion sampled at
  40 Hz moves between them);
* progress only goes forward: each element keeps the earliest segment its last
  reading matched, and the next reading may match that segment, the one before
  it, or any later one. A replay may lag or lead its recording by any time,
  but not go back along its path (an object knocked back to where it was carried
  from) nor leave it;
* every element is aligned on its own: elements of one sensor can come from
  different messages (a by-name JointState merged from two publishers), so a
  vector need not match one sample as a whole.

What it does not see: a motion that stalls on its path (it is still on the
path); ``step_timeout`` and the controller's own tolerances end those, and the
post-check judges where it ended.

A binding that retargets a step moves the recording: an element is expected moved
by an amount between its shift before the step and its shift after it (``low`` to
``high`` of :class:`Watched`), which contains every intermediate position of a
motion that ends shifted (the tool moving to a cube that moved). Elements whose
path under the shift cannot be predicted are not watched at all
(:mod:`muscle_mem_ros.replay.watching` decides which). Angles (``angle`` mode)
are unwrapped along the recording and a reading is moved by whole turns next to
each segment first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math

import numpy as np

from ..records import CheckFailure, Series, Trace
from ..resume import FailureKind

__all__ = ['FEEDBACK', 'left_tube', 'MAX_WATCHED', 'Tube', 'Watched']

MAX_WATCHED = 16
"""A sensor (or a feedback message) with more elements is neither traced nor watched: a
scan's 360 ranges would make every trace large, and its checks are not element-wise."""

_NEAR = 16
"""Segments ahead of the slowest element tried first: a reading is nearly always there."""

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


class _Path:
    """The recorded path of one series' watched elements: one span per segment, and progress."""

    def __init__(self, series: Series, watched: Sequence[Watched], scale: float) -> None:
        self.watched = tuple(watched)
        self.index = np.array([w.index for w in watched])
        values = np.asarray(series.values, dtype=float).reshape(len(series.times), -1)
        picked = values[:, self.index]
        self.angle = np.array([w.angle for w in watched])
        for j in np.flatnonzero(self.angle):
            picked[:, j] = np.unwrap(picked[:, j])
        ends = picked[1:] if len(picked) > 1 else picked
        starts = picked[:-1] if len(picked) > 1 else picked
        shift_low = np.array([w.low for w in watched])
        shift_high = np.array([w.high for w in watched])
        self.low = np.minimum(starts, ends) + shift_low
        self.high = np.maximum(starts, ends) + shift_high
        self.tolerance = np.array([w.tolerance for w in watched]) * scale
        self.at = np.zeros(len(watched), dtype=int)
        """Per element: the earliest segment its last reading matched."""


class Tube:
    """
    The recording of one step as a path to stay on; judges live readings (one replay).

    :param trace: The step's recorded trace.
    :param watched: The elements to watch (others are ignored).
    :param scale: Factor on every tolerance (``watch_tolerance_scale``).
    """

    def __init__(self, trace: Trace, watched: Sequence[Watched], *, scale: float = 1.0) -> None:
        groups: dict[str, list[Watched]] = {}
        for w in watched:
            groups.setdefault(w.series, []).append(w)
        self._paths: dict[str, _Path] = {}
        for name, items in groups.items():
            series = trace.feedback if name == FEEDBACK else trace.sensors.get(name)
            if series is not None and series.times:
                self._paths[name] = _Path(series, items, scale)
        self.watched = tuple(w for path in self._paths.values() for w in path.watched)

    @property
    def series(self) -> frozenset[str]:
        """Return the names of the watched series."""
        return frozenset(self._paths)

    def judge(self, series: str, at: float, values: Sequence[float]) -> CheckFailure | None:
        """
        Judge one reading of ``series``, taken ``at`` seconds into the step (for the report).

        :return: The element furthest from its path, or None when every watched one is on it.
        """
        path = self._paths.get(series)
        if path is None:
            return None
        live = np.asarray(values, dtype=float)
        if live.size <= int(path.index.max()):
            return CheckFailure(series, math.inf, 0.0, math.inf,
                                f'has {live.size} elements, the recording more',
                                FailureKind.MISSING, at=at)
        live = live[path.index]
        first = max(0, int(path.at.min()) - 1)
        near = self._match(path, live, first, first + _NEAR)
        if near is None and first + _NEAR < len(path.low):
            near = self._match(path, live, first, len(path.low))
        if near is not None:
            path.at = near
            return None
        return self._failure(series, path, live, first, at)

    @staticmethod
    def _match(path: _Path, live: np.ndarray, first: int, last: int) -> np.ndarray | None:
        """Return each element's earliest allowed segment in [first, last) it lies on, or None."""
        low, high, turned = _spans(path, live, first, last)
        on = (np.maximum(low - turned, turned - high) <= path.tolerance) & \
            (np.arange(first, first + len(low))[:, None] >= path.at - 1)
        if not on.any(axis=0).all():
            return None
        earliest: np.ndarray = first + np.argmax(on, axis=0)
        return earliest

    @staticmethod
    def _failure(series: str, path: _Path, live: np.ndarray, first: int,
                 at: float) -> CheckFailure:
        """Return the failure of a reading off the path: its element furthest from it."""
        low, high, turned = _spans(path, live, first, len(path.low))
        outside = np.maximum(np.maximum(low - turned, turned - high), 0.0)
        outside = np.where(np.isfinite(turned), outside, math.inf)
        rows = np.arange(first, first + len(low))[:, None]
        allowed = rows >= path.at - 1  # no way back along the path
        found = ((outside <= path.tolerance) & allowed).any(axis=0)
        near = np.where(allowed, outside, math.inf).argmin(axis=0)
        columns = np.arange(len(live))
        gap = outside[near, columns]
        with np.errstate(divide='ignore', invalid='ignore'):
            scores = np.where(path.tolerance > 0, gap / path.tolerance, math.inf)
        worst = int(np.argmax(np.where(found, -1.0, scores)))
        w = path.watched[worst]
        row = near[worst]
        expected = float(np.clip(turned[row, worst], low[row, worst], high[row, worst]))
        return CheckFailure(
            w.label if series == FEEDBACK else series, float(gap[worst]),
            float(path.tolerance[worst]), float(scores[worst]), 'left the recorded path',
            FailureKind.OUT_OF_TOLERANCE, element=w.index, value=float(live[worst]),
            expected=expected, at=at)


def _spans(path: _Path, live: np.ndarray, first: int,
           last: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """
    Return the segments' spans in [first, last) and the reading beside each.

    An angle is moved by whole turns next to each span's middle; other elements are as read.
    """
    low, high = path.low[first:last], path.high[first:last]
    middle = (low + high) / 2.0
    turned = np.where(path.angle, middle + np.remainder(live - middle + math.pi, 2 * math.pi)
                      - math.pi, live)
    return low, high, turned


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
