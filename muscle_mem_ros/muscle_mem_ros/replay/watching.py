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
What a replayed step is watched on while it runs, and what it is expected to do there.

One rule for the node and run-bt. A step is watched when it was recorded with a
trace (an action step, see :class:`~muscle_mem_ros.records.Trace`); its elements are:

* every element of every watched sensor in the trace, expected where the
  recording had it, moved by the walk's shift: by the shift before the step at
  its start and by the post-check's shift at its end, anything between in the
  middle (:mod:`muscle_mem_ros.checks.tube`);
* except the elements whose path under the shift cannot be predicted: on a
  retargeted step (a bound or edited field sent changed) those of sensors the step
  moved that follow none of its fields
  (:attr:`~muscle_mem_ros.bindings.judge.During.unpredictable`: a Cartesian move
  sent elsewhere moves its joints by no constant amount); and on any step, every
  element of a sensor the step moved (the one rule for "moved":
  :func:`~muscle_mem_ros.bindings.rules.moved_sensors`) whose start and end the
  shift moves by amounts more than half a tolerance apart (in any element): a
  motion from a moved start to an unmoved end (the carry from a moved cube to a
  fixed place) is not the recorded path moved, its shape changes (a joint-space
  move's arc bulges differently, in x when the start moved in y, measured 2 cm in
  bench/watch), so no offset explains it. The cube the arm goes to, the sensors it
  does not move, stay watched;
* the action's feedback leaves, only on a step sent as recorded into the world as
  recorded (no shift moves its pre or post: a retargeted goal's feedback, or that
  of a goal sent from a moved start, is not the recording's). Feedback has no
  configured tolerance; a leaf's tolerance is in its own units: ``feedback_tolerance``
  (a share) of the range it covered during the recorded step, and never less than
  :data:`FEEDBACK_FLOOR` (a leaf that stayed put, an orientation while driving
  straight, may vary by that much). Never a share of its magnitude: a map x of
  50 m that moved 0.3 m has a tolerance of 7.5 cm at a quarter, not 12.5 m.

Every configured sensor and feedback leaf left out is named, with why, in the
``unwatched`` entries (``'<label>: <why>'``, one per element, or per sensor when
none of it was traced), so the events say what the watch does not see:

* ``scan: 360 elements, over 16``: a sensor of more than
  :data:`~muscle_mem_ros.checks.tube.MAX_WATCHED` elements is never traced;
* ``tag: not in the recorded trace``: a watched sensor the trace lacks (an import
  dropped it, or it was configured after the recording);
* ``joints: watch is off for it``: not among the sensors that may be watched;
* ``object[1]: moved unpredictably by the retarget``;
* ``odom[0]: start and end shifted apart, the path changes shape``;
* ``feedback:<leaf>: the goal or the world moved from the recording`` or
  ``feedback:<leaf>: feedback is not watched``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
import math

import numpy as np

from ..bindings.judge import During
from ..bindings.rules import element_tolerances, moved_sensors, sensor_elements
from ..checks.poses import coordinate_tolerances, pose_coordinates, POSE_SIZE
from ..checks.tube import FEEDBACK, MAX_WATCHED, Watched
from ..records import CompareMode, Node, SensorSpec, Snapshot, Step

__all__ = ['FEEDBACK_FLOOR', 'pose_reference', 'watched_elements']

FEEDBACK_FLOOR = 0.05
"""The least tolerance of a feedback leaf, in the leaf's own units (5 cm of a position,
0.05 rad of an angle): a leaf that barely moved at recording is not held to its noise."""


def watched_elements(node: Node, *, sensors: Sequence[SensorSpec], watch: Collection[str],
                     during: During | None, feedback_tolerance: float | None,
                     ) -> tuple[tuple[Watched, ...], tuple[str, ...]]:
    """
    Return the elements ``node`` is watched on while it runs, and those it is not.

    :param node: The step about to be sent.
    :param sensors: The configured sensors' specs.
    :param watch: The names of the sensors that may be watched (``watch: auto``).
    :param during: What the walk's shift expects of the step (None: as recorded).
    :param feedback_tolerance: Share of a feedback leaf's recorded range it may be off
        by (at least :data:`FEEDBACK_FLOOR`); None: the feedback is not watched.
    :return: (watched elements, what is not watched: ``'<label>: <why>'`` for each
        configured sensor's element and feedback leaf left out, see the module); both
        empty for a step recorded without a trace.
    """
    trace = node.step.trace
    if trace is None:
        return (), ()
    step = node.step
    expected_pre = during.pre if during is not None else step.pre
    expected_post = during.post if during is not None else step.post
    unpredictable = during.unpredictable if during is not None else frozenset()
    moved = moved_sensors(sensor_elements(step.pre), sensor_elements(step.post),
                          element_tolerances(sensors))
    out: list[Watched] = []
    skipped: list[str] = []
    for spec in sensors:
        series = trace.sensors.get(spec.name)
        if spec.name not in watch:
            skipped.append(f'{spec.name}: watch is off for it')
            continue
        if series is None or not series.values:
            skipped.append(f'{spec.name}: {_untraced(spec.name, step)}')
            continue
        if spec.image is not None:  # a camera: its coarse view's cells, as recorded
            out.extend(_view_cells(spec, series.values, skipped))
            continue
        pose = pose_reference(spec, series.values)
        before = _offsets(spec.name, step.pre, expected_pre, pose)
        after = _offsets(spec.name, step.post, expected_post, pose)
        width = 6 if pose is not None else len(series.values[0])
        reshaped = spec.name in moved and any(
            abs(_at(before, i) - _at(after, i)) > _tolerance(spec, i) / 2 for i in range(width))
        for i in range(width):
            label = f'{spec.name}[{i}]'
            low, high = sorted((_at(before, i), _at(after, i)))
            tolerance = _tolerance(spec, i)
            if pose is not None:
                label = f'{spec.name}.{_POSE_LABELS[i]}'
            if any(f'sensor:{spec.name}[{j}]' in unpredictable for j in _elements(pose, i)):
                skipped.append(f'{label}: moved unpredictably by the retarget')
            elif reshaped:
                skipped.append(f'{label}: start and end shifted apart, the path changes shape')
            else:
                out.append(Watched(spec.name, i, tolerance, spec.mode is CompareMode.ANGLE,
                                   low, high, label))
    feedback = trace.feedback
    if feedback is not None and feedback.values:
        labels = [f'feedback:{leaf}' for leaf in trace.feedback_leaves]
        if feedback_tolerance is None:
            skipped.extend(f'{label}: feedback is not watched' for label in labels)
        elif _moved(step.pre, expected_pre) or _moved(step.post, expected_post):
            skipped.extend(f'{label}: the goal or the world moved from the recording'
                           for label in labels)
        else:
            values = np.asarray(feedback.values, dtype=float)
            span = np.ptp(values, axis=0)
            for j, label in enumerate(labels):
                tolerance = max(feedback_tolerance * float(span[j]), FEEDBACK_FLOOR)
                out.append(Watched(FEEDBACK, j, tolerance, name=label))
    return tuple(out), tuple(skipped)


def _view_cells(spec: SensorSpec, values: Sequence[Sequence[float]],
                skipped: list[str]) -> list[Watched]:
    """
    Return a camera's watched cells: every cell of its view the recording saw throughout.

    A camera is never retargeted (it binds nothing), so each cell is expected where the
    recording had it at the same progress: the arm crossing the view as it did passes, a
    hand or a box that the recording did not see does not. A depth camera is not watched:
    its cells come and go as pixels lose their depth, which the tube cannot tell from a
    change. Masked cells (NaN throughout) are left out and said.
    """
    assert spec.image is not None
    if spec.image.channels == 0:
        skipped.append(f'{spec.name}: a depth camera is not watched')
        return []
    rows = np.asarray(values, dtype=np.float64)
    seen = np.all(np.isfinite(rows), axis=0)
    if not seen.all():
        skipped.append(f'{spec.name}: {int((~seen).sum())} of {seen.size} view cells masked')
    tolerance = spec.tolerance[0]
    return [Watched(spec.name, i, tolerance, False, 0.0, 0.0, f'{spec.name}[{i}]')
            for i in np.flatnonzero(seen).tolist()]


def _untraced(name: str, step: Step) -> str:
    """Say why a watched sensor has no series in the step's trace."""
    vector = next((s.features[name] for s in (step.pre, step.post)
                   if s is not None and name in s.features), None)
    if vector is not None and len(vector) > MAX_WATCHED:
        return f'{len(vector)} elements, over {MAX_WATCHED}'
    return 'not in the recorded trace'


_POSE_LABELS = ('x', 'y', 'z', 'turn_x', 'turn_y', 'turn_z')
"""A pose's watched coordinates (:func:`~muscle_mem_ros.checks.poses.pose_coordinates`)."""


def pose_reference(spec: SensorSpec, values: Sequence[Sequence[float]]) -> np.ndarray | None:
    """Return the rotation a pose sensor's trace is watched about (its first), else None."""
    if spec.mode is not CompareMode.POSE or not values or len(values[0]) != POSE_SIZE:
        return None
    return np.asarray(values[0][3:], dtype=np.float64)


def _elements(pose: np.ndarray | None, i: int) -> tuple[int, ...]:
    """Return the sensor elements a watched coordinate reads (a turn: the quaternion's)."""
    return (i,) if pose is None or i < 3 else (3, 4, 5, 6)


def _offsets(name: str, recorded: Snapshot | None, expected: Snapshot | None,
             pose: np.ndarray | None = None) -> tuple[float, ...]:
    """Return how far the shift moves each element (a pose: coordinate) of one sensor."""
    if recorded is None or expected is None or recorded is expected:
        return ()
    was = recorded.features.get(name)
    now = expected.features.get(name)
    if was is None or now is None or len(was) != len(now):
        return ()
    if pose is not None and len(was) == POSE_SIZE:
        was, now = (tuple(pose_coordinates(np.asarray(v), pose)[0]) for v in (was, now))
    return tuple(b - a if math.isfinite(b - a) else 0.0 for a, b in zip(was, now))


def _at(offsets: tuple[float, ...], i: int) -> float:
    return offsets[i] if i < len(offsets) else 0.0


def _tolerance(spec: SensorSpec, i: int) -> float:
    if spec.mode is CompareMode.POSE:  # coordinate i: metres, then radians
        return float(coordinate_tolerances(spec.tolerance)[i])
    return spec.tolerance[i] if len(spec.tolerance) > 1 else spec.tolerance[0]


def _moved(recorded: Snapshot | None, expected: Snapshot | None) -> bool:
    """Return True when the shift moves any element of ``recorded``."""
    if recorded is None or expected is None or recorded is expected:
        return False
    return any(expected.features.get(name, vector) != vector
               for name, vector in recorded.features.items())
