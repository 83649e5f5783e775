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
Replay under bindings: one judge for the node and the Python ``Engine``.

A walk with bindings judges each candidate step under its plan
(:mod:`.learning`): the bound fields are recomputed from the run's parameters and
the world now (:func:`resolve`), a source that is missing or moved beyond its
``max_shift`` refuses the candidate, and every other element is compared with
the recording moved by the walk's :class:`Shift`. After a step ran the shift
moves (:func:`advance`): source elements keep the shift seen at the pre-check,
post elements that followed a bound field at recording move by that field's
shift, and elements the step moved at recording are where the recording left
them. A situation the bindings cannot explain is a miss exactly as without them.

:class:`BindingJudge` applies these rules for both front ends. What differs
between them is how they see the world, their :class:`Senses`:

* the node reads sensor snapshots (``sensor:<feature>[i]`` elements), one shift
  for all its sensors, and judges with the ToleranceCheck; :class:`SensorSenses`
  holds the snapshot half of that, also used when a recording is filed;
* the ``Engine`` reads the leaves of user captures (``capture:<path>``), one
  shift per capture function (two checks may capture different things under one
  name), and judges with the user's ``compare``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field as dc_field
import math
from typing import Any, Protocol

from .learning import followers
from .rules import (
    bindable_leaves, Binding, goal_leaves, is_number, moved_sensors, param_leaves, Plan,
    sensor_elements, Source, SourceKind, split_element, Substitution,
)
from .turns import (
    carried_turns, pose_of, position_fields, rotated_offset, turn_source, TurnCheck, turned_ahead,
)
from ..records import CheckFailure, Node, Snapshot
from ..resume import FailureKind

__all__ = [
    'advance', 'binding_failure', 'BindingJudge', 'Bound', 'changes', 'checked', 'Compared',
    'During', 'Observation', 'PlanSource', 'resolve',
    'SENSORS', 'SensorSenses', 'Senses', 'Shift',
]

SENSORS = 'sensors'
"""The scope of the node's shift: every sensor element of every check."""


@dataclass(frozen=True)
class Observation:
    """
    The world a candidate's pre-check sees now.

    :ivar now: The current snapshot (sensor features, or a user capture).
    :ivar current: The run's parameter leaves and ``now``'s sources, read once.
    """

    now: Snapshot
    current: Mapping[str, Any]


@dataclass(frozen=True)
class Compared:
    """
    A front end's literal judgement of a candidate against what the judge expects.

    :ivar passed: The candidate may replay.
    :ivar distance: Its rank among passing candidates (lower is better).
    :ivar failure: Why it did not pass, when the front end can say.
    """

    passed: bool
    distance: float = 0.0
    failure: CheckFailure | None = None


def checked(check: Any, expected: Snapshot | None, now: Snapshot, *, now_time: float,
            bound: Bound | None, unchecked: bool) -> Compared:
    """
    Judge a recorded snapshot (moved by the shift) against ``now`` with a ToleranceCheck.

    The sensor front ends' :meth:`Senses.compare` (the node's live one, a shadow run's and
    run-bt's): a passing candidate's distance counts its bindings' shift too.

    :param unchecked: The verdict when there is nothing to check (no check, or a recording
        without sensor data).
    """
    if expected is None or not expected.features or check is None:
        return Compared(unchecked, 0.0)
    result = check.evaluate(expected, now, now_time=now_time)
    if result.passed:
        return Compared(True, max(result.score, bound.worst if bound else 0.0))
    return Compared(False, failure=result.failures[0] if result.failures else None)


class PlanSource(Protocol):
    """A tree's plans as the judge reads them (:class:`~.learning.Plans`, or a document's)."""

    def get(self, node_id: int, /) -> Plan | None:
        """Return the plan of ``node_id`` (None: it has none)."""

    def leaves(self, node_id: int) -> tuple[Mapping[str, Any], Mapping[str, float]] | None:
        """Return a learned step's goal leaves and pre sources."""

    def __contains__(self, node_id: object) -> bool:
        """Return True when ``node_id`` has a plan."""


class Senses(Protocol):
    """How a front end sees the world (see the module docstring)."""

    def elements(self, snapshot: Snapshot | None) -> dict[str, float]:
        """Return a snapshot's sources: ``{'sensor:object[0]': 0.41, ...}``."""

    def rewrite(self, recorded: Snapshot, values: Mapping[str, float]) -> Snapshot:
        """
        Return ``recorded`` with the elements in ``values`` set (the recording is not changed).

        :raises KeyError: an element cannot be set (also IndexError, TypeError, ValueError).
        """

    def scope(self, node: Node, post: bool) -> Hashable | None:
        """Return whose shift ``node``'s pre (or post) check reads; None when it has none."""

    def settled(self, node: Node, pre: Mapping[str, float],
                post: Mapping[str, float]) -> Iterable[str]:
        """Return the post elements ``node`` moved at recording: their shift ends after it."""

    def observe(self, node: Node) -> Observation | None:
        """Return the world ``node``'s pre-check sees now; None when it cannot be judged."""

    def compare(self, node: Node, expected: Snapshot | None, seen: Observation,
                bound: Bound | None) -> Compared:
        """Judge ``node`` literally: ``expected`` (the recording, shifted) against ``seen``."""


class SensorSenses:
    """
    The snapshot half of the node's senses: sensor elements, one shift for all.

    :param tolerance: Tolerance of a sensor element
        (:func:`~.rules.element_tolerances`): a step moved a sensor when its
        vector moved beyond it (:func:`~.rules.moved_sensors`).
    """

    def __init__(self, tolerance: Callable[[str], float | None]) -> None:
        self.tolerance = tolerance

    def elements(self, snapshot: Snapshot | None) -> dict[str, float]:
        """Return the snapshot's feature elements."""
        return sensor_elements(snapshot)

    def rewrite(self, recorded: Snapshot, values: Mapping[str, float]) -> Snapshot:
        """Return ``recorded`` with the feature elements in ``values`` set."""
        features = {}
        for name, vector in recorded.features.items():
            items = list(vector)
            for i in range(len(items)):
                value = values.get(f'sensor:{name}[{i}]')
                if value is not None:
                    items[i] = value
            features[name] = tuple(items)
        return Snapshot(features=features, stamps=dict(recorded.stamps),
                        taken_at=recorded.taken_at, user=recorded.user)

    def scope(self, node: Node, post: bool) -> Hashable | None:
        """Return :data:`SENSORS`: every check reads the same sensors."""
        return SENSORS

    def settled(self, node: Node, pre: Mapping[str, float],
                post: Mapping[str, float]) -> Iterable[str]:
        """
        Return every element of a sensor whose vector the step moved at recording.

        The tool on its way home is where the recording left it even if its x ends
        near where it was; sensors the step did not move keep their shift (the cube
        on the table while the arm goes home).
        """
        moved = moved_sensors(pre, post, self.tolerance)
        return [key for key in post if split_element(key)[0] in moved]


class Shift:
    """
    How far the world a walk replays into has moved from the recordings, per element.

    One per walk, kept per scope (:meth:`Senses.scope`). Empty, every check is
    literal (a walk without bindings).
    """

    def __init__(self) -> None:
        self._scopes: dict[Hashable, dict[str, float]] = {}

    @property
    def by_element(self) -> dict[str, float]:
        """Return the shift of the node's sensors (scope :data:`SENSORS`), element -> delta."""
        return self.of(SENSORS)

    def of(self, scope: Hashable) -> dict[str, float]:
        """Return the shift of one scope (a live dict)."""
        return self._scopes.setdefault(scope, {})

    def __bool__(self) -> bool:
        return any(self._scopes.values())

    def copy(self) -> Shift:
        """Return an independent copy, to look ahead without moving this shift."""
        other = Shift()
        other._scopes = {scope: dict(moved) for scope, moved in self._scopes.items()}
        return other

    def expected(self, recorded: Snapshot | None, replaced: Mapping[str, float] | None = None,
                 *, senses: Senses | SensorSenses | None = None,
                 scope: Hashable | None = SENSORS) -> Snapshot | None:
        """
        Return ``recorded`` moved by the shift, with ``replaced`` elements set outright.

        :param recorded: A recorded pre or post snapshot.
        :param replaced: Source elements already range-checked: set to their current value.
        :param senses: Reads and rewrites the snapshot (default: sensor features).
        :param scope: The shift that applies; None: none does.
        :return: The snapshot a literal check compares the world with.
        :raises KeyError: ``senses`` cannot set an element (also IndexError, TypeError).
        """
        moved = self._scopes.get(scope) if scope is not None else None
        if recorded is None or (not moved and not replaced):
            return recorded
        view = senses if senses is not None else _FEATURES
        values = {key: value + moved[key] for key, value in view.elements(recorded).items()
                  if key in moved} if moved else {}
        values.update(replaced or {})
        return view.rewrite(recorded, values)


_FEATURES = SensorSenses(lambda key: None)


@dataclass(frozen=True)
class Bound:
    """
    A candidate's bindings resolved against the current world.

    :ivar values: Field -> value to send, for the fields whose value changes (empty: the
        goal is sent as recorded, byte for byte).
    :ivar substitutions: What is reported (fields whose value is recomputed).
    :ivar sources: Sensor source element -> its current value (range-checked).
    :ivar shifts: Field -> value minus recorded value (numeric fields).
    :ivar worst: Largest shift over its ``max_shift`` (0..1).
    :ivar problem: Why the bindings cannot explain the world ('' when they can).
    :ivar source: The source behind ``problem``.
    :ivar excess: The shift behind ``problem`` (inf when a source is missing).
    :ivar limit: The ``max_shift`` it exceeded.
    :ivar turns: Pose sensor -> how far it turned since the recording, of the step's
        orientation bindings (:mod:`.turns`): what the step carries turns with it.
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
    turns: dict[str, tuple[float, float, float, float]] = dc_field(default_factory=dict)


@dataclass(frozen=True)
class During:
    """
    What a step's recording is expected to look like while it runs under a walk's shift.

    :ivar pre: The recorded pre snapshot moved as the pre-check expected it.
    :ivar post: The recorded post snapshot moved as the post-check will expect it.
    :ivar unpredictable: Element keys whose path under the shift cannot be predicted: on a
        retargeted step, the elements of sensors the step moved at recording that follow
        none of its fields (the joints of a Cartesian move sent elsewhere). An element that
        followed a field sent as recorded keeps its path (the tool's height, and the cube
        it carries, on a lift whose x and y follow the cube): the cube must rise with it.
    :ivar retargeted: The step is sent with a changed field (a binding, an edit).
    """

    pre: Snapshot | None
    post: Snapshot | None
    unpredictable: frozenset[str] = frozenset()
    retargeted: bool = False


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
    turning = [b for b in plan.bindings if b.turn is not None]
    turns = TurnCheck(turning, goal_leaves(node.step), recorded_sources, current) \
        if turning else None
    if turns is not None and turns.problem:
        return Bound({}, (), {}, {}, problem=turns.problem, source=turns.source,
                     excess=turns.excess, limit=turns.limit)
    beside = _beside(turning, plan.bindings)
    for b in plan.bindings:
        if b.turn is not None:
            continue  # sent below, from the TurnCheck
        recorded = goal.get(b.field)
        if b.source not in current:
            what = 'parameter' if b.is_param else 'sensor'
            return Bound({}, (), {}, {}, problem=f'{what} {b.source} missing',
                         source=b.source, excess=math.inf)
        source_now = current[b.source]
        value = source_now + b.offset if is_number(source_now) and not b.is_param else source_now
        around = beside.get((b.field, b.source))
        if around is not None and turns is not None and around[0] in turns.deltas:
            origin = pose_of(recorded_sources, around[0])
            if origin is not None:  # a standoff turns with its object (.turns)
                value = source_now + rotated_offset(b, around[1], turns.deltas[around[0]],
                                                    goal, origin[0], around[2], around[3])
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
        if not changes(recorded, value):
            if b.field in shifts:
                shifts[b.field] = 0.0  # the recorded value stands: nothing moved
            continue  # float noise is not a substitution
        values[b.field] = value
        subs.append(Substitution(step, node.step.tool, b.field, b.source, b.origin,
                                 recorded, value))
    if turns is not None:
        full = goal_leaves(node.step)
        for b in turning:
            for leaf in sorted(k for k in turns.values if k.startswith(b.field + '.')):
                recorded, value = full.get(leaf), turns.values[leaf]
                if not is_number(recorded) or not changes(recorded, value):
                    continue
                values[leaf] = value
                shifts[leaf] = float(value - recorded)
                subs.append(Substitution(step, node.step.tool, leaf, b.source, b.origin,
                                         recorded, value))
        sources.update(turns.sources)
        worst = max(worst, turns.worst)
    for source, limit in plan.ahead:
        if turn_source(source) is not None:  # a later step's orientation binding
            later = turned_ahead(source, limit, recorded_sources, current)
            if later.problem:
                return Bound({}, (), {}, {}, problem=later.problem, source=source,
                             excess=later.excess, limit=later.limit)
            sources.update(later.sources)
            worst = max(worst, later.worst)
            continue
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
    shifts.update(plan.edits)  # a document's edit moves what followed the field
    return Bound(values, tuple(subs), sources, shifts, worst,
                 turns=dict(turns.deltas) if turns is not None else {})


def _beside(turning: Sequence[Binding], bindings: Sequence[Binding],
            ) -> dict[tuple[str, str], tuple[str, int, tuple[str, str, str], dict[str, float]]]:
    """
    Return the position bindings whose offset turns with an orientation binding (.turns).

    (field, source) -> (pose sensor, axis, the position leaves, their fitted offsets): a
    position leaf beside a turned orientation, bound to the same sensor's origin element.
    """
    out = {}
    for t in turning:
        sensor, fields = turn_source(t), position_fields(t.field)
        if sensor is None or fields is None:
            continue
        mine = {b.field: b for b in bindings if b.turn is None and b.field in fields
                and b.source == f'sensor:{sensor}[{fields.index(b.field)}]'}
        offsets = {f: b.offset for f, b in mine.items()}
        for f, b in mine.items():
            out[(f, b.source)] = (sensor, fields.index(f), fields, offsets)
    return out


def changes(recorded: Any, value: Any) -> bool:
    """
    Return True when sending ``value`` instead of ``recorded`` changes the goal.

    Floats that differ by float noise (a relative 1e-9: 0.39999999995 for 0.4, a
    source plus an offset that undoes it) do not: the recorded value is sent.
    """
    if is_number(recorded) and is_number(value):
        if isinstance(recorded, int) and isinstance(value, int):
            return recorded != value
        return not abs(value - recorded) <= 1e-9 * max(1.0, abs(recorded))
    return bool(value != recorded)


def advance(shift: Shift, node: Node, tolerance: Callable[[str], float | None] | None = None,
            plan: Plan | None = None, bound: Bound | None = None, *,
            senses: Senses | SensorSenses | None = None) -> None:
    """
    Update the walk's shift after ``node`` ran.

    Source elements keep the shift seen at the pre-check; post elements that
    followed a bound field at recording move by that field's shift; every other
    element the step moved at recording (:meth:`Senses.settled`) is where the
    recording left it, so its shift ends. The rest keep their shift.

    :param shift: The walk's shift.
    :param node: The step that ran.
    :param tolerance: Sensor element tolerances, when ``senses`` is not given.
    :param plan: Its plan.
    :param bound: How its bindings resolved at the pre-check (None: nothing bound).
    :param senses: The front end's senses (default :class:`SensorSenses` of ``tolerance``).
    """
    view = senses if senses is not None else SensorSenses(tolerance or (lambda key: None))
    pre = view.elements(node.step.pre)
    post = view.elements(node.step.post)
    followed = dict(plan.follows) if plan is not None and bound is not None else {}
    post_scope = view.scope(node, True)
    if post_scope is not None:
        moved = shift.of(post_scope)
        for key in view.settled(node, pre, post):
            if key not in followed:
                moved.pop(key, None)
    if bound is None:
        return
    pre_scope = view.scope(node, False)
    if pre_scope is not None:
        for key, value in bound.sources.items():
            if key in pre:
                shift.of(pre_scope)[key] = value - pre[key]
    if post_scope is not None:
        for key, path in followed.items():
            if path in bound.shifts:
                shift.of(post_scope)[key] = bound.shifts[path]
        if bound.turns and plan is not None:  # what it carried turned with it
            shift.of(post_scope).update(
                carried_turns(plan.follows, plan.bindings, bound.turns, post))


def binding_failure(bound: Bound) -> CheckFailure:
    """
    Return the check failure of a candidate whose bindings cannot explain the world.

    Its ``source`` is the binding's source; its ``sensor`` the sensor that source
    reads ('' for a parameter or a capture).
    """
    source = Source.parse(bound.source)
    sensor = source.name if source.kind is SourceKind.SENSOR else ''
    if math.isinf(bound.excess) or not bound.limit:
        return CheckFailure(sensor, math.inf, 0.0, math.inf, bound.problem,
                            FailureKind.MISSING, bound.source)
    return CheckFailure(sensor, bound.excess, bound.limit, bound.excess / bound.limit,
                        bound.problem, FailureKind.OUT_OF_TOLERANCE, bound.source)


class BindingJudge:
    """
    Judge one walk's candidates under their bindings, and keep the walk's shift.

    One per walk. Both front ends ask it the same questions: which candidates pass
    now (:meth:`pick`), what to send for the chosen one (:meth:`sending`), what its
    post-check should see (:meth:`expected_post`), and that it ran (:meth:`ran`).

    :param plans: The tree's plans (:attr:`.learning.Learner.plans`).
    :param params: The run's task parameters.
    :param senses: How the front end sees the world.
    """

    def __init__(self, *, plans: PlanSource, params: Mapping[str, Any],
                 senses: Senses) -> None:
        self._plans = plans
        self._params = dict(params)
        self._senses = senses
        self._bound: dict[int, Bound] = {}
        self.shift = Shift()

    def literal(self, candidates: Sequence[Node]) -> bool:
        """Return True when nothing is bound among ``candidates`` and the world has not moved."""
        return not self.shift and (not self._plans or
                                   not any(c.id in self._plans for c in candidates))

    def current(self, now: Snapshot) -> dict[str, Any]:
        """Return the run's parameter leaves and ``now``'s sources (``Observation.current``)."""
        return {**param_leaves(self._params), **self._senses.elements(now)}

    def pick(self, candidates: Iterable[Node], step: int, *, enough: float | None = None,
             ) -> tuple[list[tuple[Node, float]], list[tuple[Node, CheckFailure]]]:
        """
        Judge the candidates under their bindings, in the order they come.

        :param enough: Stop at the first candidate that passes at this distance or
            less. A front end that gives candidates in rank order
            (:class:`~..replay.ranking.RankOrder`) and passes the best distance its checks
            can give knows no later candidate would be chosen. None: judge all.
        :return: The passing candidates with their distance, and why others failed
            (a refused binding, or what the front end's compare said), in the order
            the candidates came.
        """
        self._bound = {}
        passing: list[tuple[Node, float]] = []
        failures: list[tuple[Node, CheckFailure]] = []
        senses = self._senses
        for node in candidates:
            seen = senses.observe(node)
            if seen is None:
                continue
            plan = self._plans.get(node.id)
            bound = None
            if plan is not None:
                bound = resolve(plan, step, node, self._params, seen.now, senses.elements,
                                learned=self._plans.leaves(node.id), current=seen.current)
                if bound.problem:
                    failures.append((node, binding_failure(bound)))
                    continue
            try:
                expected = self.shift.expected(node.step.pre, bound.sources if bound else None,
                                               senses=senses, scope=senses.scope(node, False))
            except (KeyError, IndexError, TypeError, ValueError) as err:
                if bound is not None:
                    failures.append((node, CheckFailure(
                        '', math.inf, 0.0, math.inf,
                        f'cannot apply the bindings of node {node.id}: {err!r}',
                        FailureKind.MISSING)))
                continue
            compared = senses.compare(node, expected, seen, bound)
            if compared.passed:
                passing.append((node, compared.distance))
                if bound is not None:
                    self._bound[node.id] = bound
                if enough is not None and compared.distance <= enough:
                    break
            elif compared.failure is not None:
                failures.append((node, compared.failure))
        return passing, failures

    def sending(self, node: Node) -> Bound | None:
        """Return how ``node``'s bindings resolved when it passed (None: nothing bound)."""
        return self._bound.get(node.id)

    def expected_post(self, node: Node) -> Snapshot | None:
        """Return ``node``'s recorded post snapshot moved by the shift."""
        return self.shift.expected(node.step.post, senses=self._senses,
                                   scope=self._senses.scope(node, True))

    def during(self, node: Node) -> During:
        """Return what ``node``'s recording is expected to look like while it runs (it passed)."""
        bound = self._bound.get(node.id)
        plan = self._plans.get(node.id)
        senses = self._senses
        pre = self.shift.expected(node.step.pre, bound.sources if bound else None,
                                  senses=senses, scope=senses.scope(node, False))
        after = self.shift.copy()
        if bound is not None or after:
            advance(after, node, plan=plan, bound=bound, senses=senses)
        post = after.expected(node.step.post, senses=senses, scope=senses.scope(node, True))
        retargeted = bound is not None and (bool(bound.values) or any(bound.shifts.values()))
        if not retargeted or bound is None:
            return During(pre, post)
        followed = {key for key, _ in (plan.follows if plan is not None else ())}
        if isinstance(senses, SensorSenses):  # what followed a field sent as recorded keeps
            sent = set(bound.values) | {f for f, d in bound.shifts.items() if d}  # its path
            kept = [f for f, v in bindable_leaves(node.step).items()
                    if is_number(v) and f not in sent]
            followed.update(key for key, _ in followers(node, kept, senses.tolerance))
        settled = senses.settled(node, senses.elements(node.step.pre),
                                 senses.elements(node.step.post))
        return During(pre, post, frozenset(k for k in settled if k not in followed), True)

    def ran(self, node: Node) -> None:
        """Move the shift by what ``node`` did (it succeeded)."""
        bound = self._bound.get(node.id)
        if bound is None and not self.shift:
            return
        advance(self.shift, node, plan=self._plans.get(node.id), bound=bound,
                senses=self._senses)
