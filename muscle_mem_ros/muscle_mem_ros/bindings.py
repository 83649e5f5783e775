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
Bindings: goal fields that follow the world and the task instead of repeating a recording.

An agent's goal field is either a constant or derived from data it saw: a task
parameter ("place the cube at [0.3, -0.3]") or a sensor reading (the perceived
cube). A :class:`Binding` says which: ``field = source + offset``. At replay the
field is recomputed from the current source and the rest of the goal is sent as
recorded, so one demonstration serves a family of situations.

Vocabulary (ROS-free, shared by the node and the Python ``Engine``):

* A goal is seen as its **leaves**: ``{path: value}`` of its numeric and string
  fields, e.g. ``target.pose.position.x`` or ``points[0].positions[2]``
  (:func:`leaves`; the node reads them from ``Step.payload_json``).
* A source is ``param:<key>`` / ``param:<key>[i]`` (a task parameter or one
  element of a list parameter) or ``sensor:<feature>[i]`` (element ``i`` of a
  configured sensor's feature vector in the step's pre snapshot).
* Orientation is not bound: a rotation does not shift as a sum; declare or
  infer the position fields only.

Where bindings come from (:mod:`.learning`):

* **declared** in the node's params file (per tool): field, source and
  ``max_shift``; a sensor binding's offset is the recording's ``goal - source``,
  and it binds only the steps where that offset is within ``max_shift`` (a goal
  at or near the thing sensed; the same tool's other goals stay as recorded);
* **inferred** from parameters, from one recording: a leaf equal to a parameter's
  leaf (numbers other than 0, non-empty strings) is bound to it, with no range
  (the caller names the value; post-checks still judge the outcome); this wins
  over a declared sensor binding of the same leaf;
* **inferred** from sensors, from two or more recordings of the same step (the
  steps at the same depth of trajectories of the same shape): a numeric leaf
  that varies, whose difference to a sensor element that also varies is the
  same in every recording within the sensor's tolerance, is bound with the
  mean difference as offset. A leaf that varied inconsistently is never bound.

Checks under bindings (:class:`Shift`): the walk keeps a shift per sensor
element. At a bound step's pre-check the source elements are range-checked
(``|now - recorded| <= max_shift``) instead of literally; every other element is
compared literally against ``recorded + shift``. After the step, each post
element that followed a bound field at recording (equal to it within the
sensor's tolerance) is expected moved by that field's shift. A situation the
bindings cannot explain is a miss or a handoff exactly as without bindings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
import json
import math
import re
from typing import Any, TypeGuard

from .records import Node, SensorSpec, Snapshot, Step

__all__ = [
    'advance', 'BOUND', 'Binding', 'Bound', 'bound_variant', 'DECLARED', 'Declared',
    'DEFAULT_MAX_SHIFT', 'element_tolerances', 'explains', 'goal_leaves', 'INFERRED', 'is_number',
    'leaves', 'match_variant', 'moved_sensors', 'param_leaves', 'parse_path', 'Plan', 'resolve',
    'sensor_elements', 'Shift', 'split_element', 'Substitution',
]

DECLARED = 'declared'
"""Origin of a binding written in the params file."""
INFERRED = 'inferred'
"""Origin of a binding found in the recordings."""

BOUND = {'$bound': True}
"""What a bound parameter leaf becomes in a tree's variant (its params JSON pattern)."""

_PATH = re.compile(r'([^.\[\]]+)|\[(\d+)\]')

DEFAULT_MAX_SHIFT = 0.1
"""How far (the sensor's unit) a binding may move a goal from its recording, unless set."""


@dataclass(frozen=True)
class Binding:
    """
    One goal field computed at replay as ``source + offset``.

    :ivar field: Leaf path in the goal, e.g. ``target.pose.position.x``.
    :ivar source: ``param:<key>[i]`` or ``sensor:<feature>[i]``.
    :ivar offset: Added to a numeric source (0 for parameters).
    :ivar max_shift: Largest allowed ``|value - recorded value|``; None = any.
    :ivar origin: :data:`DECLARED` or :data:`INFERRED`.
    """

    field: str
    source: str
    offset: float = 0.0
    max_shift: float | None = None
    origin: str = INFERRED

    @property
    def is_param(self) -> bool:
        """Return True when the source is a task parameter."""
        return self.source.startswith('param:')

    def to_json(self) -> dict[str, Any]:
        """Return the binding as JSON data (GetTrajectory, events, the CLI)."""
        return {'field': self.field, 'source': self.source, 'offset': round(self.offset, 9),
                'max_shift': self.max_shift, 'origin': self.origin}


@dataclass(frozen=True)
class Substitution:
    """
    One field a replay recomputed: what was recorded, what was sent, and why.

    :ivar step: Step index in the walk.
    :ivar tool: The step's tool.
    :ivar field: Leaf path in the goal.
    :ivar source: The binding's source.
    :ivar origin: The binding's origin.
    :ivar recorded: The recorded value.
    :ivar value: The value sent.
    """

    step: int
    tool: str
    field: str
    source: str
    origin: str
    recorded: Any
    value: Any

    def describe(self) -> str:
        """Render it for messages: 'target.pose.position.x=0.412 (sensor:object[0])'."""
        value = f'{self.value:.4g}' if isinstance(self.value, float) else repr(self.value)
        return f'{self.field}={value} ({self.source})'


@dataclass(frozen=True)
class Plan:
    """
    The bindings of one learned step, and which post elements follow its fields.

    :ivar bindings: One per bound field.
    :ivar follows: (post element key, field) pairs: the element moved with the field
        at recording, so it is expected moved by the field's shift at replay.
    :ivar ahead: (sensor source, max_shift) of bindings of later steps of the branch: the
        world may already differ there (the cube moved before the arm gets to it); the
        step that uses the source checks it again. A group's sensor binding counts here
        even at a step where a declared or parameter binding of the same field wins: the
        recordings say the field went with that source, so a shift beyond its range is a
        world they do not account for.
    """

    bindings: tuple[Binding, ...] = ()
    follows: tuple[tuple[str, str], ...] = ()
    ahead: tuple[tuple[str, float | None], ...] = ()


def parse_path(path: str) -> list[str | int]:
    """Split ``a.b[2].c`` into ``['a', 'b', 2, 'c']``."""
    return [int(index) if index else name for name, index in _PATH.findall(path)]


def leaves(value: Any, prefix: str = '') -> dict[str, Any]:
    """
    Return the numeric and string leaves of JSON data as ``{path: value}``.

    Booleans and nulls are not leaves (they are never bound); dict keys join with
    '.', list items get ``[i]``.
    """
    out: dict[str, Any] = {}
    if isinstance(value, Mapping):
        for key, item in value.items():
            out.update(leaves(item, f'{prefix}.{key}' if prefix else str(key)))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            out.update(leaves(item, f'{prefix}[{i}]'))
    elif isinstance(value, (int, float, str)) and not isinstance(value, bool):
        out[prefix] = value
    return out


def param_leaves(params: Mapping[str, Any]) -> dict[str, Any]:
    """Return a task's parameters as sources: ``{'param:place[0]': 0.3, ...}``."""
    return {f'param:{path}': value for path, value in leaves(dict(params)).items()}


def sensor_elements(snapshot: Snapshot | None) -> dict[str, float]:
    """Return a snapshot's features as sources: ``{'sensor:object[0]': 0.41, ...}``."""
    if snapshot is None:
        return {}
    return {f'sensor:{name}[{i}]': float(v)
            for name, vector in snapshot.features.items() for i, v in enumerate(vector)}


def element_tolerances(sensors: Sequence[SensorSpec]) -> Callable[[str], float | None]:
    """
    Return ``tol(key)``: the tolerance of one sensor element, None for an unknown sensor.

    A single tolerance applies to every element (the only kind ``norm`` and ``rms``
    have); per-element tolerances apply to their element.
    """
    by_name = {spec.name: spec.tolerance for spec in sensors}

    def tol(key: str) -> float | None:
        name, index = split_element(key)
        tolerance = by_name.get(name)
        if tolerance is None:
            return None
        return float(tolerance[index] if len(tolerance) > 1 and index < len(tolerance)
                     else tolerance[0])
    return tol


def split_element(key: str) -> tuple[str, int]:
    """Split 'sensor:object[1]' into ('object', 1)."""
    body = key[len('sensor:'):] if key.startswith('sensor:') else key
    name, _, rest = body.rpartition('[')
    return name, int(rest.rstrip(']')) if rest.rstrip(']').isdigit() else 0


def is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def goal_leaves(step: Step) -> dict[str, Any]:
    """Return a step's goal leaves, read from its readable payload ({} when it has none)."""
    try:
        return leaves(json.loads(step.payload_json)) if step.payload_json else {}
    except ValueError:
        return {}


# -- Variants: parameters bound in a tree ----------------------------------------------------


def bound_variant(params: Mapping[str, Any], bound: Iterable[str]) -> str:
    """
    Return the variant of a tree whose ``bound`` parameter leaves are bound.

    :param params: The run's parameters.
    :param bound: Sources ``param:<path>`` of the bound leaves.
    :return: The canonical params JSON with each bound leaf replaced by :data:`BOUND`.
    """
    pattern = json.loads(json.dumps(dict(params)))
    for source in bound:
        path = parse_path(source[len('param:'):])
        target: Any = pattern
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = dict(BOUND)
    return json.dumps(pattern, sort_keys=True, separators=(',', ':'))


def match_variant(variant: str, params: Mapping[str, Any]) -> bool:
    """Return True when ``params`` fit ``variant`` (bound leaves match any value of a kind)."""
    try:
        pattern = json.loads(variant)
    except ValueError:
        return False
    return _fits(pattern, dict(params))


def _fits(pattern: Any, value: Any) -> bool:
    if pattern == BOUND:
        return is_number(value) or isinstance(value, str)
    if isinstance(pattern, dict):
        return (isinstance(value, dict) and pattern.keys() == value.keys()
                and all(_fits(pattern[k], value[k]) for k in pattern))
    if isinstance(pattern, list):
        return (isinstance(value, list) and len(pattern) == len(value)
                and all(_fits(p, v) for p, v in zip(pattern, value)))
    return pattern == value and type(pattern) is type(value)


# -- Declared bindings and moves -------------------------------------------------------------


@dataclass(frozen=True)
class Declared:
    """
    A binding written in the params file, before its offset is fitted.

    :ivar tool: The tool whose goals it binds (``Step.tool``).
    :ivar field: Leaf path (a message path binds each numeric leaf under it in order).
    :ivar source: ``param:<key>[i]`` or ``sensor:<feature>[i]`` (no index: the whole vector).
    :ivar max_shift: Largest allowed shift.
    """

    tool: str
    field: str
    source: str
    max_shift: float | None


def moved_sensors(pre: Mapping[str, float], post: Mapping[str, float],
                  tolerance: Callable[[str], float | None]) -> set[str]:
    """
    Return the sensors whose vector a step moved beyond their tolerance (pre -> post).

    A sensor moved when one element moved beyond its tolerance or the vector's
    Euclidean change exceeds it (a ``norm`` sensor that moved a little on each axis).
    """
    deltas: dict[str, list[tuple[float, float]]] = {}
    for key, value in post.items():
        tol = tolerance(key)
        if key in pre and tol is not None:
            deltas.setdefault(split_element(key)[0], []).append((value - pre[key], tol))
    return {name for name, items in deltas.items()
            if any(abs(d) > t for d, t in items)
            or math.sqrt(sum(d * d for d, _ in items)) > min(t for _, t in items)}


# -- Replay ------------------------------------------------------------------------------------


class Shift:
    """
    How far the world a walk replays into has moved from the recordings, per sensor element.

    One per walk. Empty, every check is literal (a walk without bindings).
    """

    def __init__(self) -> None:
        self.by_element: dict[str, float] = {}

    def expected(self, recorded: Snapshot | None,
                 replaced: Mapping[str, float] | None = None) -> Snapshot | None:
        """
        Return ``recorded`` moved by the shift, with ``replaced`` elements set outright.

        :param recorded: A recorded pre or post snapshot.
        :param replaced: Source elements already range-checked: set to their current value.
        :return: The snapshot a literal check compares the world with.
        """
        if recorded is None or (not self.by_element and not replaced):
            return recorded
        features = {}
        for name, vector in recorded.features.items():
            values = list(vector)
            for i in range(len(values)):
                key = f'sensor:{name}[{i}]'
                if replaced and key in replaced:
                    values[i] = replaced[key]
                elif key in self.by_element:
                    values[i] = values[i] + self.by_element[key]
            features[name] = tuple(values)
        return Snapshot(features=features, stamps=dict(recorded.stamps),
                        taken_at=recorded.taken_at, user=recorded.user)


@dataclass(frozen=True)
class Bound:
    """
    A candidate's bindings resolved against the current world.

    :ivar values: Field -> value to send.
    :ivar substitutions: What is reported (fields whose value is recomputed).
    :ivar sources: Sensor source element -> its current value (range-checked).
    :ivar shifts: Field -> value minus recorded value (numeric fields).
    :ivar worst: Largest shift over its ``max_shift`` (0..1).
    :ivar problem: Why the bindings cannot explain the world ('' when they can).
    :ivar source: The source behind ``problem``.
    :ivar excess: The shift behind ``problem`` (inf when a source is missing).
    :ivar limit: The ``max_shift`` it exceeded.
    """

    values: dict[str, Any]
    substitutions: tuple[Substitution, ...]
    sources: dict[str, float]
    shifts: dict[str, float]
    worst: float = 0.0
    problem: str = ''
    source: str = ''
    excess: float = 0.0
    limit: float = 0.0


def resolve(plan: Plan, step: int, node: Node, params: Mapping[str, Any],
            now: Snapshot,
            elements: Callable[[Snapshot | None], dict[str, float]] | None = None, *,
            learned: tuple[Mapping[str, Any], Mapping[str, float]] | None = None,
            current: Mapping[str, Any] | None = None) -> Bound:
    """
    Compute the values of a step's bound fields in the current world.

    A walk judges many candidates against one world: ``learned`` and ``current``
    spare it reading each candidate's goal and the current snapshot again.

    :param plan: The step's plan.
    :param step: Its index in the walk (for the report).
    :param node: The learned step.
    :param params: The run's parameters.
    :param now: The current snapshot.
    :param elements: Reads a snapshot's sources (default :func:`sensor_elements`).
    :param learned: The step's goal leaves and pre sources as learning read them
        (:meth:`.learning.Learner.leaves`).
    :param current: ``params``' leaves and ``now``'s sources, read once per walk step.
    :return: The values, or why the world is outside what the bindings explain.
    """
    elements = sensor_elements if elements is None else elements
    goal, recorded_sources = learned if learned is not None else (
        goal_leaves(node.step), elements(node.step.pre))
    if current is None:
        current = {**param_leaves(params), **elements(now)}
    values: dict[str, Any] = {}
    subs = []
    sources: dict[str, float] = {}
    shifts: dict[str, float] = {}
    worst = 0.0
    for b in plan.bindings:
        recorded = goal.get(b.field)
        if b.source not in current:
            what = 'parameter' if b.is_param else 'sensor'
            return Bound({}, (), {}, {}, problem=f'{what} {b.source} missing',
                         source=b.source, excess=math.inf)
        source_now = current[b.source]
        value = source_now + b.offset if is_number(source_now) and not b.is_param else source_now
        if is_number(recorded) != is_number(value):
            return Bound({}, (), {}, {}, problem=f'{b.source} is not a {type(recorded).__name__}',
                         source=b.source, excess=math.inf)
        if is_number(recorded):
            if isinstance(recorded, int) and not isinstance(value, int):
                value = int(round(value))
            shift = float(value - recorded)
            if not b.is_param and b.source in recorded_sources:
                shift = float(source_now - recorded_sources[b.source])
                sources[b.source] = float(source_now)
            if b.max_shift is not None and not abs(shift) <= b.max_shift:
                return Bound({}, (), {}, {}, problem=(
                    f'{b.field} would move {abs(shift):.4g} from the recording '
                    f'(max_shift {b.max_shift:g}, source {b.source})'),
                    source=b.source, excess=abs(shift), limit=b.max_shift)
            shifts[b.field] = float(value - recorded)
            if b.max_shift:
                worst = max(worst, abs(shift) / b.max_shift)
        values[b.field] = value
        if value != recorded:
            subs.append(Substitution(step, node.step.tool, b.field, b.source, b.origin,
                                     recorded, value))
    for source, limit in plan.ahead:
        if source not in current or source not in recorded_sources:
            continue  # checked literally here; the step that uses it refuses a missing one
        shift = float(current[source] - recorded_sources[source])
        if limit is not None and not abs(shift) <= limit:
            return Bound({}, (), {}, {}, problem=(
                f'{source} moved {abs(shift):.4g} from the recording (max_shift {limit:g} '
                'of a later step)'), source=source, excess=abs(shift), limit=limit)
        sources[source] = float(current[source])
        if limit:
            worst = max(worst, abs(shift) / limit)
    return Bound(values, tuple(subs), sources, shifts, worst)


def advance(shift: Shift, node: Node, tolerance: Callable[[str], float | None],
            plan: Plan | None = None, bound: Bound | None = None) -> None:
    """
    Update the walk's shift after a step ran.

    Source elements keep the shift seen at the pre-check; post elements that
    followed a bound field at recording move by that field's shift; every other
    element of a sensor the step moved at recording (its vector moved beyond the
    tolerance: the tool on its way home, even if its x ends near where it was) is
    where the recording left it, so its shift ends. Sensors the step did not move
    keep their shift (the cube on the table while the arm goes home).
    """
    pre = sensor_elements(node.step.pre)
    post = sensor_elements(node.step.post)
    followed = dict(plan.follows) if plan is not None and bound is not None else {}
    moved = moved_sensors(pre, post, tolerance)
    for key in post:
        if key not in followed and split_element(key)[0] in moved:
            shift.by_element.pop(key, None)
    if bound is None:
        return
    for key, value in bound.sources.items():
        if key in pre:
            shift.by_element[key] = value - pre[key]
    for key, path in followed.items():
        if path in bound.shifts:
            shift.by_element[key] = bound.shifts[path]


# -- Filing a recording --------------------------------------------------------------------------


def explains(plan: Plan, node: Node, step: Step, params: Mapping[str, Any], check: Any,
             tolerance: Callable[[str], float | None], shift: Shift | None = None) -> Bound | None:
    """
    Return how ``step`` is ``node`` under its bindings (the same branch), or None.

    Same tool and type; every unbound goal leaf equal; every bound leaf what the
    binding computes from the step's own pre snapshot and parameters (within the
    source's tolerance); and the pre snapshot passes ``node``'s check, recorded
    values moved by ``shift`` (the earlier steps of the same filing) and bound
    sources set to the step's (``check`` is a ToleranceCheck, or None: no sensors).
    """
    if (step.tool, step.kind, step.type_name) != (node.step.tool, node.step.kind,
                                                  node.step.type_name):
        return None
    goal, recorded = goal_leaves(step), goal_leaves(node.step)
    bound = {b.field for b in plan.bindings}
    if goal.keys() != recorded.keys() or any(
            goal[k] != recorded[k] for k in goal if k not in bound):
        return None
    if not goal and step.payload != node.step.payload:
        return None
    resolved = resolve(plan, 0, node, params, step.pre if step.pre is not None else Snapshot())
    if resolved.problem:
        return None
    for b in plan.bindings:
        value, wanted = goal[b.field], resolved.values[b.field]
        if is_number(value):
            tol = 0.0 if b.is_param else (tolerance(b.source) or 0.0)
            if not abs(value - wanted) <= tol + 1e-9:
                return None
        elif value != wanted:
            return None
    if check is None or node.step.pre is None or step.pre is None:
        return resolved if node.step.pre is None and step.pre is None else None
    expected = (shift or Shift()).expected(node.step.pre, resolved.sources)
    if not check.evaluate(expected, step.pre, now_time=step.pre.taken_at).passed:
        return None
    moved = {f: float(goal[f] - recorded[f]) for f in resolved.shifts}  # what the agent sent
    return Bound(resolved.values, resolved.substitutions, resolved.sources, moved,
                 resolved.worst)
