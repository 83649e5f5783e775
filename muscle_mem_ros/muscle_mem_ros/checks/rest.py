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
At rest: whether the robot the cache stopped has stopped moving, judged by its sensors.

A server that says a goal is CANCELED has stopped commanding it; it has not said the
arm is still (a trajectory controller decelerates, a base coasts, a server may report
at once and brake after). So a step the cache stops is over when the server reported
the goal terminal AND the sensors show rest:

* over the last ``window`` seconds (``rest_window``), no element of any rest sensor
  moved by more than its tolerance (the largest minus the smallest reading in the
  window, the reading that held at the window's start included; angles as angles);
* nor drifted: the slope of a straight line fitted to each element's readings in the
  window (least squares, on their receive stamps) is at most :data:`DRIFT_RATE`
  tolerances per second. The range alone lets a creep of one tolerance per window
  pass (8 cm/s at a 2 cm tolerance over 0.25 s), and a base that creeps is moving;
* every rest sensor was heard over the whole window since the goal ended: it has a
  reading received at or before the window's start (and after the goal ended) and
  one no older than its ``max_age`` now. A sensor that says nothing is never at
  rest: the cache cannot see the robot stop, so it has not.

A sensor of more than :data:`~muscle_mem_ros.checks.tube.MAX_WATCHED` elements (a
scan, an image's features) is judged on a summary instead of element by element: the
root mean square, over its finite elements, of each element's range and of its drift,
each in its tolerances. One beam of a scan that flickers, or reads out of range (inf,
nan), is not the robot moving; the robot moving shifts most of them.

The rest sensors are those the step was watched on (or, for a step not watched, the
sensors a step's trace keeps) and, always, the robot's own state (the stopper's
``own`` sensors: :mod:`muscle_mem_ros.ros.capture.stopping`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math

import numpy as np

from .poses import coordinate_tolerances, pose_coordinates, POSE_SIZE
from .tube import MAX_WATCHED
from ..records import CompareMode, SensorSpec, Snapshot

__all__ = ['DEFAULT_REST_WINDOW', 'DRIFT_RATE', 'Rest']

DEFAULT_REST_WINDOW = 0.25
"""Seconds without motion beyond tolerance that make a stopped robot at rest: ten readings
of a 40 Hz joint state, two and a half of a 10 Hz odometry."""
DRIFT_RATE = 1.0
"""Tolerances per second an element at rest may drift (the fitted slope over the window).
A quarter of what the range alone lets pass at the default window (2 cm/s at a 2 cm
tolerance, not 8), and no stricter: noise of a quarter of a tolerance (a tolerance
calibrated at a few times the noise) spreads the slope fitted to ten readings over 0.25 s
by about one tolerance per second, and a still robot must be seen at rest."""


@dataclass(frozen=True)
class _Reading:
    stamp: float
    values: np.ndarray


class Rest:
    """
    Judge whether the rest sensors show the robot at rest (module docstring).

    Fed one snapshot at a time (:meth:`add`); only readings received after ``since`` (the
    goal ended) count.

    :param sensors: The rest sensors' specs (tolerance, mode, max_age).
    :param since: Monotonic time the goal was reported terminal.
    :param window: Seconds of stillness asked for.
    """

    def __init__(self, *, sensors: Sequence[SensorSpec], since: float,
                 window: float = DEFAULT_REST_WINDOW) -> None:
        if window <= 0:
            raise ValueError(f'window must be > 0, got {window}')
        self._specs = {s.name: s for s in sensors}
        self._since = since
        self._window = window
        self._readings: dict[str, list[_Reading]] = {name: [] for name in self._specs}
        self.why = 'no reading yet'
        """Why the last :meth:`at_rest` said no, for people ('' once at rest)."""

    @property
    def sensors(self) -> frozenset[str]:
        """Return the names of the rest sensors."""
        return frozenset(self._specs)

    def add(self, snapshot: Snapshot) -> None:
        """Keep the new readings of the rest sensors in ``snapshot``."""
        for name, kept in self._readings.items():
            stamp = snapshot.stamps.get(name)
            values = snapshot.features.get(name)
            if stamp is None or values is None or stamp <= self._since:
                continue
            if kept and stamp <= kept[-1].stamp:
                continue
            kept.append(_Reading(stamp, np.asarray(values, dtype=float)))

    def at_rest(self, now: float) -> bool:
        """Return True when every rest sensor was still over the window ending ``now``."""
        start = now - self._window
        for name, spec in self._specs.items():
            why = self._still(spec, self._readings[name], start, now)
            if why:
                self.why = why
                return False
        self.why = ''
        return True

    def _still(self, spec: SensorSpec, kept: list[_Reading], start: float, now: float) -> str:
        """Return '' when ``spec``'s sensor was heard and still over [start, now], else why."""
        if not kept:
            return f'{spec.name} sent nothing since the goal ended'
        if spec.max_age is not None and now - kept[-1].stamp > spec.max_age:
            return (f'{spec.name} sent nothing for {now - kept[-1].stamp:.2f} s '
                    f'(max_age {spec.max_age:g} s)')
        first = next((i for i in range(len(kept) - 1, -1, -1) if kept[i].stamp <= start), None)
        if first is None:
            return f'{spec.name} not heard for {self._window:g} s since the goal ended yet'
        del kept[:first]  # what held at the window's start, and after
        values = np.stack([r.values for r in kept])
        if spec.mode is CompareMode.ANGLE:
            values = values[0] + np.remainder(values - values[0] + math.pi, 2 * math.pi) - math.pi
        pose = spec.mode is CompareMode.POSE and values.shape[1] == POSE_SIZE
        if pose:  # metres and radians, the rotation as a rotation (.poses)
            values = pose_coordinates(values)
        tolerance = np.maximum(coordinate_tolerances(spec.tolerance) if pose
                               else _tolerances(spec, values.shape[1]), 1e-12)
        moved = (values.max(axis=0) - values.min(axis=0)) / tolerance
        drift = np.abs(_slopes(np.array([r.stamp for r in kept]), values)) / tolerance
        if values.shape[1] > MAX_WATCHED:
            return self._still_summary(spec, values.shape[1], moved, drift)
        i = int(np.argmax(np.where(moved > 1.0, moved, -1.0)))
        if moved[i] > 1.0:
            return (f'{spec.name}[{i}] still moved {moved[i] * tolerance[i]:.4g} in the last '
                    f'{self._window:g} s (tolerance {tolerance[i]:.4g})')
        i = int(np.argmax(drift))
        if drift[i] > DRIFT_RATE:
            return (f'{spec.name}[{i}] still creeps {drift[i] * tolerance[i]:.4g}/s over the '
                    f'last {self._window:g} s (tolerance {tolerance[i]:.4g}: at most '
                    f'{DRIFT_RATE:g} tolerance/s at rest)')
        return ''

    def _still_summary(self, spec: SensorSpec, width: int, moved: np.ndarray,
                       drift: np.ndarray) -> str:
        """Judge a large sensor on the rms of its finite elements' range and drift (module)."""
        finite = np.isfinite(moved) & np.isfinite(drift)
        if not finite.any():
            return ''  # nothing in range: no element says the robot moved
        moved_rms = float(np.sqrt(np.mean(moved[finite] ** 2)))
        drift_rms = float(np.sqrt(np.mean(drift[finite] ** 2)))
        if moved_rms > 1.0:
            return (f'{spec.name} ({width} elements) still moved {moved_rms:.3g} tolerances '
                    f'(rms) in the last {self._window:g} s')
        if drift_rms > DRIFT_RATE:
            return (f'{spec.name} ({width} elements) still creeps {drift_rms:.3g} tolerances/s '
                    f'(rms) over the last {self._window:g} s')
        return ''


def _slopes(stamps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Return each column's least-squares slope against ``stamps`` (0 for one reading)."""
    centered = stamps - stamps.mean()
    spread = float(np.sum(centered ** 2))
    if spread <= 0.0:
        return np.zeros(values.shape[1])
    with np.errstate(invalid='ignore'):
        slopes: np.ndarray = (centered @ (values - values.mean(axis=0))) / spread
    return slopes


def _tolerances(spec: SensorSpec, width: int) -> np.ndarray:
    """Return one tolerance per element (a single value serves all)."""
    if len(spec.tolerance) == width:
        return np.asarray(spec.tolerance, dtype=float)
    return np.full(width, spec.tolerance[0] if spec.tolerance else 0.0)
