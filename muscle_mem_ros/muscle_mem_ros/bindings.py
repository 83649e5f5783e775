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

Where bindings come from (:func:`learn`):

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
from dataclasses import dataclass, field as dc_field
import json
import math
import re
from typing import Any, TypeGuard

from .records import Node, SensorSpec, Snapshot, Step

__all__ = [
    'advance', 'BOUND', 'Binding', 'Bound', 'bound_params', 'bound_variant', 'DECLARED',
    'Declared', 'DEFAULT_MAX_SHIFT', 'element_tolerances', 'explains', 'goal_leaves', 'INFERRED',
    'learn', 'leaves', 'match_variant', 'moved_sensors', 'param_leaves', 'parse_path', 'Plan',
    'resolve', 'sensor_elements', 'Shift', 'Substitution',
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
        step that uses the source checks it again.
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
        name, index = _split_element(key)
        tolerance = by_name.get(name)
        if tolerance is None:
            return None
        return float(tolerance[index] if len(tolerance) > 1 and index < len(tolerance)
                     else tolerance[0])
    return tol


def _split_element(key: str) -> tuple[str, int]:
    """Split 'sensor:object[1]' into ('object', 1)."""
    body = key[len('sensor:'):] if key.startswith('sensor:') else key
    name, _, rest = body.rpartition('[')
    return name, int(rest.rstrip(']')) if rest.rstrip(']').isdigit() else 0


def _number(value: object) -> TypeGuard[float]:
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
        return _number(value) or isinstance(value, str)
    if isinstance(pattern, dict):
        return (isinstance(value, dict) and pattern.keys() == value.keys()
                and all(_fits(pattern[k], value[k]) for k in pattern))
    if isinstance(pattern, list):
        return (isinstance(value, list) and len(pattern) == len(value)
                and all(_fits(p, v) for p, v in zip(pattern, value)))
    return pattern == value and type(pattern) is type(value)


# -- Learning ----------------------------------------------------------------------------------


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


@dataclass
class _Obs:
    node: Node
    goal: dict[str, Any]
    pre: dict[str, float]
    post: dict[str, float]
    params: dict[str, Any] = dc_field(default_factory=dict)


def learn(
    paths: Sequence[tuple[Sequence[Node], Mapping[str, Any]]],
    *,
    declared: Sequence[Declared] = (),
    infer: bool = True,
    max_shift: float | None = DEFAULT_MAX_SHIFT,
    tolerance: Callable[[str], float | None] = lambda key: None,
    memo: dict[int, Any] | None = None,
    elements: Callable[[Snapshot | None], dict[str, float]] | None = None,
) -> dict[int, Plan]:
    """
    Find the bindings of every step of a tree's trajectories.

    :param paths: Each trajectory's nodes (first step first) with the parameters it
        was recorded with.
    :param declared: Bindings from the params file.
    :param infer: Also infer bindings (parameters from one recording, sensors from two).
    :param max_shift: ``max_shift`` of inferred numeric bindings.
    :param tolerance: Tolerance of a sensor element (:func:`element_tolerances`).
    :param memo: Kept between calls by the caller: each step's goal and snapshots are
        read once (a tree that grows is learned again without re-reading it).
    :param elements: Reads a snapshot's sources (default :func:`sensor_elements`; the
        Python ``Engine`` reads the leaves of a user capture).
    :return: Node id -> its plan, for nodes with at least one binding.
    """
    memo = {} if memo is None else memo
    elements = sensor_elements if elements is None else elements
    obs: dict[int, _Obs] = {}
    for nodes, params in paths:
        for node in nodes:
            if node.id in obs:
                continue
            seen = memo.get(node.id)
            if seen is None or seen.node.step.payload != node.step.payload:  # an id used again
                seen = memo[node.id] = _Obs(node, goal_leaves(node.step),
                                            elements(node.step.pre),
                                            elements(node.step.post))
            obs[node.id] = _Obs(node, seen.goal, seen.pre, seen.post, param_leaves(params))
    found: dict[int, dict[str, Binding]] = {i: {} for i in obs}
    if infer:
        for i, o in obs.items():
            found[i].update(_param_bindings(o))
    for i, o in obs.items():
        for decl in declared:
            if decl.tool == o.node.step.tool:
                for binding in _fit_declared(decl, o):
                    found[i].setdefault(binding.field, binding)
    if infer:
        for group in _same_steps(paths, obs):
            if len(group) < 2:
                continue
            for binding in _sensor_bindings([obs[n.id] for n in group], max_shift, tolerance):
                for node in group:
                    found[node.id].setdefault(binding.field, binding)
    ahead: dict[int, dict[str, float | None]] = {i: {} for i in obs}
    for nodes, _ in paths:
        later: dict[str, float | None] = {}
        for node in reversed(nodes):
            for source, limit in later.items():
                ahead[node.id].setdefault(source, limit)
            for b in found[node.id].values():
                if not b.is_param:
                    later.setdefault(b.source, b.max_shift)
    plans = {}
    for i, by_field in found.items():
        if by_field or ahead[i]:
            bindings = tuple(by_field[f] for f in sorted(by_field))
            own = {b.source for b in bindings}
            plans[i] = Plan(bindings, _follows(obs[i], bindings, tolerance),
                            tuple(sorted((s, m) for s, m in ahead[i].items() if s not in own)))
    return plans


def _param_bindings(o: _Obs) -> dict[str, Binding]:
    out = {}
    for path, value in o.goal.items():
        if (_number(value) and value == 0) or value == '':
            continue
        for source, param in o.params.items():  # the last equal parameter wins, as in muscle-mem
            if type(param) is type(value) or (_number(param) and _number(value)):
                if param == value:  # the caller names the value: no range of its own
                    out[path] = Binding(path, source, 0.0, None, INFERRED)
    return out


def _fit_declared(decl: Declared, o: _Obs) -> list[Binding]:
    fields = [p for p in o.goal if p == decl.field or p.startswith(decl.field + '.')
              or p.startswith(decl.field + '[')]
    pool = o.params if decl.source.startswith('param:') else o.pre
    if decl.source in pool:
        sources = [decl.source]
    else:
        sources = sorted((k for k in pool if k.startswith(decl.source + '[')),
                         key=lambda k: _split_element(k)[1])
    out = []
    sensed = decl.source.startswith('sensor:')
    for path, source in zip(fields, sources):
        value, origin = o.goal[path], pool[source]
        offset = float(value - origin) if _number(value) and _number(origin) else 0.0
        if sensed and decl.max_shift is not None and abs(offset) > decl.max_shift:
            continue  # a goal far from the thing sensed is not relative to it
        out.append(Binding(path, source, offset if sensed else 0.0, decl.max_shift, DECLARED))
    return out


def _shape(o: _Obs) -> tuple[Any, ...]:
    return (o.node.step.tool, o.node.step.type_name,
            tuple(sorted((p, type(v).__name__) for p, v in o.goal.items())))


def _same_steps(paths: Sequence[tuple[Sequence[Node], Any]],
                obs: Mapping[int, _Obs]) -> list[list[Node]]:
    """Group the steps at the same depth of trajectories with the same shape."""
    shapes: dict[tuple[Any, ...], list[Sequence[Node]]] = {}
    for nodes, _ in paths:
        shapes.setdefault(tuple(_shape(obs[n.id]) for n in nodes), []).append(nodes)
    groups = []
    for members in shapes.values():
        for depth in range(len(members[0])):
            unique = {m[depth].id: m[depth] for m in members}
            groups.append(list(unique.values()))
    return groups


def _sensor_bindings(group: Sequence[_Obs], max_shift: float | None,
                     tolerance: Callable[[str], float | None]) -> list[Binding]:
    out = []
    shared = set.intersection(*(set(o.pre) for o in group))
    for path in sorted(group[0].goal):
        found = [o.goal.get(path) for o in group]
        values = [float(v) for v in found if _number(v)]
        if len(values) < len(found) or _spread(values) <= 1e-9:
            continue
        fits: list[tuple[float, str, float]] = []
        for source in sorted(shared):
            tol = tolerance(source)
            origins = [o.pre[source] for o in group]
            if tol is None or tol <= 0 or _spread(origins) <= tol:
                continue
            diffs = [v - s for v, s in zip(values, origins)]
            spread = _spread(diffs)
            if spread <= tol:
                fits.append((spread / tol, source, sum(diffs) / len(diffs)))
        fits.sort()
        # Two sources that explain the field about as well (the cube moved as much in x as
        # in y between the recordings) leave it ambiguous: it is not bound until a further
        # recording tells them apart (the runner-up's spread must exceed a quarter of its
        # tolerance and four times the best's).
        # Runner-ups that equal the best source in every recording (the tool that the
        # previous step put above the cube, and the cube) are the same value seen twice,
        # not a rival explanation: they do not make the field ambiguous.
        best = fits[0][1] if fits else ''
        rivals = [f for f in fits[1:] if not _same_values(group, best, f[1], tolerance)]
        if fits and (not rivals or rivals[0][0] > max(4 * fits[0][0], 0.25)):
            out.append(Binding(path, fits[0][1], fits[0][2], max_shift, INFERRED))
    return out


def _same_values(group: Sequence[_Obs], a: str, b: str,
                 tolerance: Callable[[str], float | None]) -> bool:
    """Return True when sources ``a`` and ``b`` agree within tolerance in every recording."""
    tol = min(tolerance(a) or 0.0, tolerance(b) or 0.0)
    return tol > 0 and all(abs(o.pre[a] - o.pre[b]) <= tol for o in group)


def _spread(values: Sequence[float]) -> float:
    return max(values) - min(values)


def _follows(o: _Obs, bindings: Sequence[Binding],
             tolerance: Callable[[str], float | None]) -> tuple[tuple[str, str], ...]:
    """
    Pair each post element the step moved with the bound field it equalled at recording.

    Only elements of a sensor the step moved (:func:`moved_sensors`) can follow a
    field: the tool after a move (its x too when only its height changed), the cube
    carried in the gripper; a value that merely happens to be near a field (closed
    jaws during an arm move, a cube resting on the table) does not.
    A field named by an axis or an index (``position.y``, ``positions[2]``) pairs only
    with the element of the same axis (``sensor:ee[1]``, ``sensor:joints[2]``), so a
    tool height is never taken for a cube's y.
    """
    out = []
    numeric = [b.field for b in bindings if _number(o.goal.get(b.field))]
    moved = moved_sensors(o.pre, o.post, tolerance)
    for key, value in sorted(o.post.items()):
        tol = tolerance(key)
        if tol is None or tol <= 0 or (key in o.pre and _split_element(key)[0] not in moved):
            continue  # (an element only the post snapshot has may have moved: the Engine's)
        index = _split_element(key)[1]
        near = min(((abs(value - o.goal[f]), f) for f in numeric
                    if _axis(f) in (None, index)), default=None)
        if near is not None and near[0] <= tol:
            out.append((key, near[1]))
    return tuple(out)


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
            deltas.setdefault(_split_element(key)[0], []).append((value - pre[key], tol))
    return {name for name, items in deltas.items()
            if any(abs(d) > t for d, t in items)
            or math.sqrt(sum(d * d for d, _ in items)) > min(t for _, t in items)}


def _axis(path: str) -> int | None:
    """Return the axis a leaf path names (x, y, z -> 0, 1, 2; ``[k]`` -> k), or None."""
    last = parse_path(path)[-1] if path else None
    if isinstance(last, int):
        return last
    return {'x': 0, 'y': 1, 'z': 2}.get(str(last))


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
            elements: Callable[[Snapshot | None], dict[str, float]] | None = None) -> Bound:
    """
    Compute the values of a step's bound fields in the current world.

    :param plan: The step's plan.
    :param step: Its index in the walk (for the report).
    :param node: The learned step.
    :param params: The run's parameters.
    :param now: The current snapshot.
    :param elements: Reads a snapshot's sources (default :func:`sensor_elements`).
    :return: The values, or why the world is outside what the bindings explain.
    """
    elements = sensor_elements if elements is None else elements
    goal = goal_leaves(node.step)
    recorded_sources = elements(node.step.pre)
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
        value = source_now + b.offset if _number(source_now) and not b.is_param else source_now
        if _number(recorded) != _number(value):
            return Bound({}, (), {}, {}, problem=f'{b.source} is not a {type(recorded).__name__}',
                         source=b.source, excess=math.inf)
        if _number(recorded):
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
        if key not in followed and _split_element(key)[0] in moved:
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


def bound_params(steps: Sequence[Step], params: Mapping[str, Any], *,
                 declared: Sequence[Declared] = (), infer: bool = True) -> set[str]:
    """
    Return the parameter leaves a new recording's goals are bound to (``param:<path>``).

    A tree recorded with them is filed under :func:`bound_variant`, so runs with
    other values of those parameters find it.
    """
    sources = param_leaves(params)
    out: set[str] = set()
    for step in steps:
        o = _Obs(Node(0, None, 0, step), goal_leaves(step), {}, {}, sources)
        if infer:
            out.update(b.source for b in _param_bindings(o).values())
        for decl in declared:
            if decl.tool == step.tool and decl.source.startswith('param:'):
                out.update(b.source for b in _fit_declared(decl, o) if b.source in sources)
    return out


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
        if _number(value):
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
