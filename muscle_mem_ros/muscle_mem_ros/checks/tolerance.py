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
Checks: whether the world is now close enough to the world a step was recorded in.

Two kinds:

* :class:`Check` is the muscle-mem shape: a user ``capture`` callback reads the
  environment, a user ``compare`` callback judges a recorded capture against the
  current one. The engine calls them; this module only holds them.
* :class:`ToleranceCheck` is built in: snapshots hold named float vectors and each
  :class:`~muscle_mem_ros.records.SensorSpec` says how far each may move. Scores
  are normalized so 0 means identical and 1 means exactly at the tolerance.

The numeric kernels here work on a matrix of recorded vectors at once; the
matcher reuses them so that one candidate and a hundred thousand candidates are
scored by the same code, with the same rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
import math
from typing import Any, Generic, TypeVar

import numpy as np

from .images import deviations as image_deviations
from .poses import pose_deviations, POSE_SIZE
from ..records import CheckFailure, CheckResult, CompareMode, SensorSpec, Snapshot
from ..resume import FailureKind

__all__ = ['Check', 'CompiledSensor', 'ToleranceCheck']

T = TypeVar('T')

Current = list[tuple[np.ndarray | None, str | None]]
"""Per sensor of a check: (current vector, None), or (None, why it cannot be used)."""

_TWO_PI = 2.0 * math.pi


class Check(Generic[T]):
    """
    A user check: ``capture`` reads the world, ``compare`` judges it.

    Same shape as the original muscle-mem ``Check``. ``capture`` is called with
    the tool's arguments (for a method tool, the context object first) and
    returns any value; a persistent engine stores it as JSON data or NumPy
    arrays (anything else only with ``allow_pickle=True``).
    ``compare(current, candidate)`` returns a bool, or a float
    similarity up to 1.0: a truthy value passes (a float > 0), and among passing
    candidates a higher float ranks better (``True`` counts as 1.0, and so does
    a larger number).

    :param capture: Reads the relevant features from the environment.
    :param compare: Pure function of (current capture, recorded capture).
    """

    def __init__(
        self,
        capture: Callable[..., T],
        compare: Callable[[T, T], bool | float],
    ) -> None:
        if not callable(capture):
            raise TypeError(f'Check capture must be callable, got {type(capture).__name__}')
        if not callable(compare):
            raise TypeError(f'Check compare must be callable, got {type(compare).__name__}')
        self.capture = capture
        self.compare = compare

    def __repr__(self) -> str:
        return f'Check(capture={self.capture!r}, compare={self.compare!r})'


@dataclass(frozen=True, eq=False)
class CompiledSensor:
    """A validated SensorSpec with its tolerance as arrays (:attr:`ToleranceCheck.compiled`)."""

    spec: SensorSpec
    tol: np.ndarray
    safe_tol: np.ndarray
    zero_tol: np.ndarray | None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def mode(self) -> CompareMode:
        return self.spec.mode

    def tol_for(self, k: int) -> str | None:
        """Return why the tolerance cannot apply to a k-vector, or None if it can."""
        if self.spec.mode is CompareMode.POSE:
            return None if k == POSE_SIZE else f'a pose has {POSE_SIZE} elements, feature has {k}'
        if self.tol.size in (1, k):
            return None
        return f'tolerance has {self.tol.size} elements, feature has {k}'

    def normalized(self, rec: np.ndarray) -> np.ndarray:
        """Return recorded vectors in tolerance units, as the ABS/NORM/RMS kernels want."""
        if self.spec.mode is CompareMode.POSE:  # (metres, radians): its kernel reads rows raw
            return np.asarray(rec)
        return np.asarray(rec / self.safe_tol)

    def scores(
        self, rec: np.ndarray, x: np.ndarray, rec_n: np.ndarray | None = None,
    ) -> np.ndarray:
        """
        Score every row of ``rec`` (n, k) against the current vector ``x`` (k,).

        :param rec: Recorded vectors, raw units.
        :param x: Current vector, raw units.
        :param rec_n: ``self.normalized(rec)`` if the caller cached it.
        :return: (n,) scores: 0 identical, 1 at the tolerance, inf for EXACT mismatches.
        """
        mode = self.spec.mode
        if mode is CompareMode.EXACT:
            return np.asarray(np.where(np.any(rec != x, axis=1), np.inf, 0.0))
        if mode is CompareMode.IMAGE:
            return _largest(self.image_deviations(rec, x) / self.safe_tol[0])
        if mode is CompareMode.POSE:
            return np.asarray(self._pose_ratios(rec, x).max(axis=1))
        if mode is CompareMode.ANGLE:
            dev = np.abs(_wrap(x - rec)) / self.safe_tol
        else:
            if rec_n is None:
                rec_n = self.normalized(rec)
            dev = np.abs(x / self.safe_tol - rec_n)
        if self.zero_tol is not None:
            dev = np.where(self.zero_tol & (dev > 0.0), np.inf, dev)
        if mode is CompareMode.NORM:
            return np.asarray(np.sqrt(np.einsum('ij,ij->i', dev, dev)))
        if mode is CompareMode.RMS:
            return np.asarray(np.sqrt(np.einsum('ij,ij->i', dev, dev) / max(dev.shape[1], 1)))
        return np.asarray(dev.max(axis=1, initial=0.0))

    def _pose_ratios(self, rec: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Return (n, 2): each row's distance and angle over their tolerances (a 0 one: inf)."""
        dev = np.nan_to_num(pose_deviations(rec, x), nan=np.inf)
        ratios = dev / self.safe_tol
        if self.zero_tol is not None:
            ratios = np.where(self.zero_tol & (dev > 0.0), np.inf, ratios)
        return np.asarray(ratios)

    def pose_worst(self, rec: np.ndarray, x: np.ndarray) -> tuple[float, float, str]:
        """Return a pose's deviation and tolerance that score worst, and say both, for people."""
        dev = pose_deviations(rec, x)[0]
        ratios = self._pose_ratios(rec, x)[0]
        i = int(np.argmax(ratios))
        text = (f'moved {dev[0]:.4g} m and turned {math.degrees(dev[1]):.3g} deg (tolerance '
                f'{self.tol[0]:.4g} m, {math.degrees(self.tol[1]):.3g} deg)')
        return float(dev[i]), float(self.tol[i]), text

    def image_deviations(self, rec: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Return |deviation| per cell of an image sensor's rows, light removed (NaN: none)."""
        assert self.spec.image is not None  # _compile requires it for IMAGE
        return np.asarray(np.abs(image_deviations(rec, x, channels=self.spec.image.channels)))

    def deviations(self, rec: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Return the raw deviation of each row in sensor units (for reports only)."""
        if self.spec.mode is CompareMode.IMAGE:
            return _largest(self.image_deviations(rec, x))
        if self.spec.mode is CompareMode.POSE:  # the part that scores worst, in its unit
            dev = pose_deviations(rec, x)
            worst = np.argmax(self._pose_ratios(rec, x), axis=1)
            return np.asarray(dev[np.arange(len(dev)), worst])
        diff = x - rec
        if self.spec.mode is CompareMode.ANGLE:
            diff = _wrap(diff)
        if self.spec.mode is CompareMode.NORM:
            return np.asarray(np.sqrt(np.einsum('ij,ij->i', diff, diff)))
        if self.spec.mode is CompareMode.RMS:
            return np.asarray(np.sqrt(np.einsum('ij,ij->i', diff, diff) / max(diff.shape[1], 1)))
        return np.asarray(np.abs(diff).max(axis=1, initial=0.0))


def _largest(dev: np.ndarray) -> np.ndarray:
    """Return each row's largest finite value; inf for a row with none (nothing compared)."""
    worst = np.where(np.isfinite(dev), dev, -1.0).max(axis=1, initial=-1.0)
    return np.asarray(np.where(worst < 0.0, np.inf, worst))


def _wrap(diff: np.ndarray) -> np.ndarray:
    """Wrap angle differences into [-pi, pi)."""
    return np.mod(diff + math.pi, _TWO_PI) - math.pi


def _compile(spec: SensorSpec) -> CompiledSensor:
    if not isinstance(spec, SensorSpec):
        raise TypeError(f'sensors must be SensorSpec, got {type(spec).__name__}')
    if not spec.name:
        raise ValueError('sensor name must not be empty')
    raw = spec.tolerance
    if isinstance(raw, (int, float)):
        raw = (float(raw),)
    try:
        tol = np.asarray(raw, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as err:
        raise ValueError(f'sensor {spec.name!r}: tolerance must be numbers, got {raw!r}') from err
    if tol.size == 0:
        raise ValueError(f'sensor {spec.name!r}: tolerance must have at least one element')
    if np.any(np.isnan(tol)) or np.any(tol < 0.0):
        raise ValueError(f'sensor {spec.name!r}: tolerance must be >= 0, got {raw!r}')
    if not isinstance(spec.mode, CompareMode):
        raise ValueError(f'sensor {spec.name!r}: mode must be a CompareMode, got {spec.mode!r}')
    if spec.max_age is not None and not spec.max_age > 0.0:
        raise ValueError(f'sensor {spec.name!r}: max_age must be > 0 or None, got {spec.max_age}')
    if spec.mode is CompareMode.IMAGE and (spec.image is None or tol.size != 1):
        raise ValueError(f'sensor {spec.name!r}: mode image needs the image layout and one '
                         'tolerance')
    if spec.mode is CompareMode.POSE and tol.size != 2:
        raise ValueError(f'sensor {spec.name!r}: mode pose needs two tolerances (metres, '
                         f'radians), got {raw!r}')
    zero = tol == 0.0
    safe = np.where(zero, 1.0, tol)
    return CompiledSensor(spec=spec, tol=tol, safe_tol=safe, zero_tol=zero if zero.any() else None)


class _Why(str):
    """Why a current reading is unusable: the text, with its kind."""

    kind: FailureKind

    def __new__(cls, text: str, kind: FailureKind) -> _Why:
        why = super().__new__(cls, text)
        why.kind = kind
        return why


class ToleranceCheck:
    """
    Built-in numeric check over named feature vectors.

    A sensor recorded in the old snapshot must be present and fresh now and
    within tolerance; a sensor absent from the recording is ignored (it was
    recorded without it). A recording with none of the configured sensors
    fails ('nothing to compare'): a built-in check never passes blindly.

    :param sensors: One spec per feature name; names must be unique.
    :raises ValueError: Empty sensor list, duplicate names, negative or NaN
        tolerance, non-positive max_age.
    """

    def __init__(self, *, sensors: Sequence[SensorSpec]) -> None:
        compiled = tuple(_compile(spec) for spec in sensors)
        if not compiled:
            raise ValueError('ToleranceCheck needs at least one sensor')
        names = [s.name for s in compiled]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f'duplicate sensor names: {", ".join(dupes)}')
        self.sensors: tuple[SensorSpec, ...] = tuple(s.spec for s in compiled)
        self._compiled = compiled

    def __repr__(self) -> str:
        return f'ToleranceCheck(sensors={list(self.sensors)!r})'

    @property
    def compiled(self) -> tuple[CompiledSensor, ...]:
        """
        Return the compiled sensors, in order: what the matcher's index is built from.

        Each holds its spec, its tolerance vector, the tolerance with zeros
        replaced by 1.0 (``safe_tol``) and the mask of zero tolerances, and
        scores and deviations of recorded rows against a current vector.
        """
        return self._compiled

    def current(self, now: Snapshot, *, now_time: float | None = None) -> Current:
        """
        Read the current vector of every sensor, or why it cannot be used.

        :return: Per sensor, in order: (vector, None) when usable, else (None, reason)
            with reason 'missing', 'stale (X s old)' or 'not finite ...'.
        """
        clock = now.taken_at if now_time is None else now_time
        out: Current = []
        for sensor in self._compiled:
            value = now.features.get(sensor.name)
            if value is None:
                out.append((None, 'missing'))
                continue
            max_age = sensor.spec.max_age
            if max_age is not None:
                stamp = now.stamps.get(sensor.name)
                if stamp is None:
                    out.append((None, _Why('stale (no receive time)', FailureKind.STALE)))
                    continue
                age = clock - stamp
                if age > max_age:
                    out.append((None, _Why(f'stale ({age:.3g} s old)', FailureKind.STALE)))
                    continue
            vector = np.asarray(value, dtype=np.float64).reshape(-1)
            if sensor.mode is CompareMode.IMAGE:  # NaN cells are masked or without depth
                if not np.any(np.isfinite(vector)):
                    out.append((None, 'no cell to compare (all masked or invalid now)'))
                    continue
            elif not np.all(np.isfinite(vector)):
                out.append((None, 'not finite (NaN or inf now)'))
                continue
            out.append((vector, None))
        return out

    def evaluate(
        self, recorded: Snapshot, now: Snapshot, *, now_time: float | None = None,
    ) -> CheckResult:
        """
        Compare one recorded snapshot with the current one.

        :param recorded: Snapshot stored with the step.
        :param now: Fresh snapshot.
        :param now_time: Clock for the staleness test (same clock as the stamps);
            None uses ``now.taken_at``.
        :return: The result; ``score`` is the worst sensor's score.
        """
        return self.evaluate_current(recorded, self.current(now, now_time=now_time))

    def evaluate_current(
        self, recorded: Snapshot, current: Current,
    ) -> CheckResult:
        """Like :meth:`evaluate`, with the current vectors already read by :meth:`current`."""
        failures: list[CheckFailure] = []
        worst = 0.0
        compared = 0
        for sensor, (x, why) in zip(self._compiled, current, strict=True):
            rec_value = recorded.features.get(sensor.name)
            if rec_value is None:
                continue
            compared += 1
            tol_max = float(sensor.tol.max())
            if x is None:
                failures.append(CheckFailure(sensor.name, math.inf, tol_max, math.inf, str(why),
                                             getattr(why, 'kind', FailureKind.MISSING)))
                worst = math.inf
                continue
            rec = np.asarray(rec_value, dtype=np.float64).reshape(1, -1)
            failure = _shape_failure(sensor, rec.shape[1], x.shape[0])
            if failure is not None:
                failures.append(failure)
                worst = math.inf
                continue
            score = float(sensor.scores(rec, x)[0])
            worst = max(worst, score)
            if not score <= 1.0 and sensor.mode is CompareMode.POSE:
                deviation, limit, text = sensor.pose_worst(rec, x)
                failures.append(CheckFailure(sensor.name, deviation, limit, score,
                                             f'out of tolerance: {text}',
                                             FailureKind.OUT_OF_TOLERANCE))
            elif not score <= 1.0:
                deviation = float(sensor.deviations(rec, x)[0])
                failures.append(CheckFailure(
                    sensor.name, deviation, tol_max, score, _out_of_tolerance(sensor, rec, x),
                    FailureKind.OUT_OF_TOLERANCE))
        if compared == 0:
            return CheckResult(False, math.inf, (CheckFailure(
                '', math.inf, 0.0, math.inf, 'nothing to compare'),))
        failures.sort(key=lambda f: -f.score)
        return CheckResult(not failures, worst, tuple(failures))


def _out_of_tolerance(sensor: CompiledSensor, rec: np.ndarray, x: np.ndarray) -> str:
    """Say a failure; for an image, where in the view (its worst cell) and by how much."""
    layout = sensor.spec.image
    if sensor.mode is not CompareMode.IMAGE or layout is None:
        return 'out of tolerance'
    dev = sensor.image_deviations(rec, x)[0]
    worst = int(np.argmax(np.where(np.isfinite(dev), dev, -1.0)))
    over = int(np.sum(np.isfinite(dev) & (dev > float(sensor.tol[0]))))
    return (f'out of tolerance at the {layout.where(worst)}, off by {dev[worst]:.3g}; '
            f'{over} of {int(np.sum(np.isfinite(dev)))} cells over')


def _shape_failure(sensor: CompiledSensor, k_rec: int, k_now: int) -> CheckFailure | None:
    """Return a failure if the vectors cannot be compared, else None."""
    tol_max = float(sensor.tol.max())
    if k_rec != k_now:
        return CheckFailure(sensor.name, math.inf, tol_max, math.inf,
                            f'shape changed ({k_rec} recorded, {k_now} now)')
    bad_tol = sensor.tol_for(k_now)
    if bad_tol is not None:
        return CheckFailure(sensor.name, math.inf, tol_max, math.inf, bad_tol)
    return None


def user_similarity(value: Any) -> float:
    """
    Turn a user compare's return value into a similarity (higher is better).

    ``True`` is 1.0 and ``False`` 0.0; a number is itself up to 1.0, the most a
    compare can say (a larger number counts as 1.0: nothing beats a match, so the
    Engine stops looking at the first one); anything else is judged by truthiness
    like the original muscle-mem.
    """
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float, np.integer, np.floating)):
        f = float(value)
        return 0.0 if math.isnan(f) else min(f, 1.0)
    return 1.0 if value else 0.0
