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
A step's trace in a behavior tree document: written for a person, read back, and imported.

``muscle-mem run-bt`` has no store: what it watches a running goal against (the
recording's tube, :mod:`muscle_mem_ros.checks.tube`) travels in the document, under the
step's ``trace``::

    trace:
      rate: 40                  Hz the sensors were sampled at
      sensors:
        object:                 one row per sample: seconds since the goal was accepted,
        - [0.012, 0.5, 0.1, 0.02]   then the sensor's elements
      feedback_leaves: [actual.positions[0], ...]
      feedback:                 the action's numeric feedback leaves, one row per message
      - [0.031, 0.1, ...]

Times are written to the millisecond and values to 6 significant digits: a sensor's
tolerance is far coarser, and a 40 Hz row stays one short line. The same mapping, as
compact JSON, is the ``trace`` port of BT.CPP's ``MuscleMemWatch`` (:mod:`.btcpp`).

An import (:func:`imported_trace`) files what the document runs as in its recorded world
(:func:`~.document.as_run`). A step its edits leave as recorded keeps its whole trace.
One they move keeps only the sensors they leave where the recording had them: a sensor
the edits move (or an element the step moved that follows no field, on a step whose goal
changed) would be watched against a motion nobody recorded; a changed goal's feedback
(the distance still to go) is not the recording's either. What is left out is not watched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import math
from typing import Any

from .document import AsRun, BtStep
from ..bindings.rules import split_element
from ..records import Series, Snapshot, Trace

__all__ = ['imported_trace', 'load_trace', 'trace_data']

_MOVED = 1e-9
"""An as-run element this far from its recording is moved."""


def trace_data(trace: Trace) -> dict[str, Any]:
    """Return ``trace`` as the document's readable mapping (times in ms, 6 digits)."""
    out: dict[str, Any] = {'rate': _number(trace.rate),
                           'sensors': {name: _rows(series)
                                       for name, series in trace.sensors.items()}}
    if trace.feedback is not None:
        out['feedback_leaves'] = list(trace.feedback_leaves)
        out['feedback'] = _rows(trace.feedback)
    return out


def load_trace(value: Any) -> Trace:
    """
    Rebuild a trace from the document's mapping.

    :raises ValueError: a field missing or of the wrong shape (the message names it).
    """
    if not isinstance(value, dict):
        raise ValueError('not a map')
    rate = float(value.get('rate', math.nan))
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError('rate: missing or not a positive number')
    sensors = value.get('sensors') or {}
    if not isinstance(sensors, dict):
        raise ValueError('sensors: not a map of sensor name to rows')
    series = {str(name): _series(rows, f'sensors.{name}') for name, rows in sensors.items()}
    feedback = None
    leaves: tuple[str, ...] = ()
    if value.get('feedback') is not None:
        feedback = _series(value['feedback'], 'feedback')
        leaves = tuple(str(leaf) for leaf in value.get('feedback_leaves') or ())
        if feedback.values and len(leaves) != len(feedback.values[0]):
            raise ValueError(f'feedback_leaves: {len(leaves)} names for '
                             f'{len(feedback.values[0])} values a row')
    return Trace(rate=rate, sensors=series, feedback=feedback, feedback_leaves=leaves)


def imported_trace(step: BtStep, run: AsRun) -> Trace | None:
    """Return what an import of ``step`` (run as ``run``) keeps of its trace (see above)."""
    trace = step.trace
    if trace is None:
        return None
    goal_changed = bool(run.values) or bool(step.edits())
    moved = _moved(step.pre, run.pre) | _moved(step.post, run.post)
    if goal_changed:
        moved |= {split_element(e)[0] for e in step.unpredictable}
    if not goal_changed and not moved:
        return trace
    sensors = {name: s for name, s in trace.sensors.items() if name not in moved}
    feedback = None if goal_changed else trace.feedback
    if not sensors and feedback is None:
        return None
    return Trace(rate=trace.rate, sensors=sensors, feedback=feedback,
                 feedback_leaves=trace.feedback_leaves if feedback is not None else ())


def _moved(recorded: Mapping[str, Sequence[float]] | None, run: Snapshot | None) -> set[str]:
    """Return the names of the sensors whose as-run vector is not the recorded one."""
    if recorded is None or run is None:
        return set()
    out = set()
    for name, vector in recorded.items():
        now = run.features.get(name)
        if now is None or len(now) != len(vector) or any(
                not abs(a - b) <= _MOVED for a, b in zip(now, vector)):
            out.add(name)
    return out


def _rows(series: Series) -> list[list[float]]:
    return [[round(float(t), 3), *(_number(v) for v in values)]
            for t, values in zip(series.times, series.values)]


def _number(value: float) -> float | int:
    """Return ``value`` to 6 significant digits (an integral one as an int: 40, not 40.0)."""
    short = float(f'{float(value):.6g}')
    return int(short) if short.is_integer() and abs(short) < 1e15 else short


def _series(rows: Any, where: str) -> Series:
    if not isinstance(rows, list):
        raise ValueError(f'{where}: not a list of rows')
    times: list[float] = []
    values: list[tuple[float, ...]] = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) < 2:
            raise ValueError(f'{where}[{i}]: not a row [time, value, ...]')
        numbers = [float(v) for v in row]
        if not math.isfinite(numbers[0]) or (times and numbers[0] < times[-1]):
            raise ValueError(f'{where}[{i}]: time {row[0]!r} is not after the one before')
        if values and len(numbers) - 1 != len(values[0]):
            raise ValueError(f'{where}[{i}]: {len(numbers) - 1} values, the first row '
                             f'{len(values[0])}')
        times.append(numbers[0])
        values.append(tuple(numbers[1:]))
    return Series(tuple(times), tuple(values))
