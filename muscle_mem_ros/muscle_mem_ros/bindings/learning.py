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
Learning a tree's bindings one trajectory at a time.

The rules are those of :mod:`.rules` (its module docstring): parameter and
declared bindings are a step's own; a sensor binding belongs to a *group*, the
steps at one depth of the trajectories of one shape (same tools, types and goal
leaves), and needs two or more of them; what a group says is
:mod:`.inference` (:class:`~.inference.Group`).

Why incremental: a task an agent has done a thousand times must not make the
next task start late. A :class:`Learner` keeps each group as running statistics
(per goal field and source: the smallest, largest and summed difference; per
source: its range), so adding a trajectory updates the groups it joins and its
own steps, in time independent of how many trajectories the tree holds. A
step's :class:`~.rules.Plan` is computed when asked for and kept until a
group it reads changes; the walk asks only for the candidates it judges.

What is learned from: a step's goal leaves (:func:`~.rules.bindable_leaves`, from
``Step.payload_json``: numbers and strings, non-finite numbers are strings
there and never bound) and its pre and post sources (``elements``). The first
trajectory that contains a step gives it the parameters it is learned with.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field as dc_field
import functools
import math
import threading
from typing import Any

from .inference import Group, Observed, Sources, Tolerance
from .rules import (
    bindable_leaves, Binding, DECLARED, Declared, DEFAULT_MAX_SHIFT, goal_leaves, INFERRED,
    is_number,
    moved_sensors, param_leaves, parse_path, Plan, sensor_elements, Source, SourceKind,
    split_element,
)
from .turns import fit_turn
from ..records import Node, Snapshot, Step, TrajectoryInfo
from ..store.base import Store

__all__ = ['bound_params', 'follow', 'followers', 'follows_param', 'learn',
           'Learner', 'no_plans', 'param_fields', 'Plans']

Elements = Callable[[Snapshot | None], dict[str, float]]
Field = tuple[str, str]
"""(tool, goal field path)."""


@dataclass
class _Step:
    """A learned step with what its plan reads."""

    obs: Observed
    own: dict[str, Binding]
    groups: list[Group] = dc_field(default_factory=list)
    below_own: dict[str, float | None] = dc_field(default_factory=dict)
    below_groups: list[Group] = dc_field(default_factory=list)
    below_version: int = 0
    plan: tuple[Hashable, Plan | None] | None = None
    checked: int = -1
    """The learner's generation when ``plan`` was last known current."""


class Learner:
    """
    The bindings of one tree, updated trajectory by trajectory.

    :param declared: Bindings from the params file.
    :param infer: Also infer bindings (parameters from one recording, sensors from two).
    :param max_shift: ``max_shift`` of inferred sensor bindings.
    :param tolerance: Tolerance of a sensor element (:func:`~.rules.element_tolerances`).
    :param elements: Reads a snapshot's sources (default
        :func:`~.rules.sensor_elements`; the Python ``Engine`` reads a capture's leaves).
    :param ahead: Check later steps' sources ahead (:attr:`~.rules.Plan.ahead`); the
        ``Engine`` does not: a later step's capture is its own.
    :param sources: Which sensors inference may bind to (:func:`~.rules.sensor_sources`);
        None: every source. Declared bindings are not limited by it.

    Safe to use from several threads (a service lists plans while a walk reads them).
    """

    def __init__(self, *, declared: Sequence[Declared] = (), infer: bool = True,
                 max_shift: float | None = DEFAULT_MAX_SHIFT,
                 tolerance: Tolerance = lambda key: None,
                 elements: Elements | None = None, ahead: bool = True,
                 sources: Sources | None = None) -> None:
        self._lock = threading.RLock()
        self._ahead = ahead
        self._sources = sources
        self._declared = tuple(declared)
        self._infer = infer
        self._max_shift = max_shift
        self._tolerance = functools.lru_cache(maxsize=1 << 12)(tolerance)  # asked per element
        self._elements = sensor_elements if elements is None else elements
        self._steps: dict[int, _Step] = {}
        self._own_bound = 0
        self._shapes: dict[tuple[Any, ...], list[Group]] = {}
        self._generation = 0
        self.tally = (0, 0)
        """How many trajectories were added with an id, and the sum of their ids."""
        self.newest = 0
        """The largest trajectory id added."""
        self.plans = Plans(self)
        """Node id -> plan, for steps with a binding (a live view)."""

    def add(self, nodes: Sequence[Node], params: Mapping[str, Any],
            trajectory_id: int | None = None) -> None:
        """
        Learn from one more trajectory.

        :param nodes: Its steps, first step first.
        :param params: The parameters it was recorded with.
        :param trajectory_id: Its id in the store, counted in :attr:`tally` (see
            :func:`follow`).
        """
        with self._lock:
            self._add(nodes, params, trajectory_id)

    def _add(self, nodes: Sequence[Node], params: Mapping[str, Any],
             trajectory_id: int | None) -> None:
        self._generation += 1
        if trajectory_id is not None:
            self.tally = (self.tally[0] + 1, self.tally[1] + trajectory_id)
            self.newest = max(self.newest, trajectory_id)
        sources = param_leaves(params)
        steps = []
        for node in nodes:
            step = self._steps.get(node.id)
            if step is None:
                o = Observed(node, bindable_leaves(node.step), self._elements(node.step.pre),
                             self._elements(node.step.post), sources)
                step = self._steps[node.id] = _Step(o, self._own(o))
                self._own_bound += bool(step.own)
            steps.append(step)
        shape = tuple(_shape(s.obs) for s in steps)
        groups = self._shapes.get(shape)
        if groups is None:
            order = sum(len(g) for g in self._shapes.values())
            groups = self._shapes[shape] = [
                Group(s.obs, order + depth, self._tolerance, self._max_shift, self._sources)
                for depth, s in enumerate(steps)]
        for step, group in zip(steps, groups):
            if group.add(step.obs):
                step.groups.append(group)
        for i, step in enumerate(steps):
            for later, group in zip(steps[i + 1:], groups[i + 1:]):
                if group not in step.below_groups:
                    step.below_groups.append(group)
                    step.below_version += 1
                for b in later.own.values():
                    if not b.is_param and _stricter(b.max_shift,
                                                    step.below_own.get(b.source, math.nan)):
                        step.below_own[b.source] = b.max_shift
                        step.below_version += 1

    def plan(self, node_id: int) -> Plan | None:
        """Return the plan of a learned step, None when nothing binds it or is checked ahead."""
        with self._lock:
            return self._plan(node_id)

    def _plan(self, node_id: int) -> Plan | None:
        step = self._steps.get(node_id)
        if step is None:
            return None
        if step.plan is not None and step.checked == self._generation:
            return step.plan[1]  # nothing was learned since: no version to compare
        step.checked = self._generation
        key = (tuple(g.version for g in step.groups), step.below_version,
               tuple(g.sources_version for g in step.below_groups))
        if step.plan is not None and step.plan[0] == key:
            return step.plan[1]
        found = dict(step.own)
        for group in sorted(step.groups, key=lambda g: g.order):
            for b in group.bindings():
                found.setdefault(b.field, b)
        bindings = tuple(found[f] for f in sorted(found))
        own = {b.source for b in bindings}
        ahead = dict(step.below_own) if self._ahead else {}
        for group in step.below_groups if self._ahead else ():
            for source, limit in group.bound_sources():
                if _stricter(limit, ahead.get(source, math.nan)):
                    ahead[source] = limit
        checked = tuple(sorted((s, m) for s, m in ahead.items() if s not in own))
        plan = None
        if bindings or checked:
            plan = Plan(bindings, _follows(step.obs, bindings, self._tolerance), checked)
        step.plan = (key, plan)
        return plan

    def has_plan(self, node_id: int) -> bool:
        """Return True when :meth:`plan` is not None (most steps without building it)."""
        with self._lock:
            step = self._steps.get(node_id)
            if step is None:
                return False
            if not (step.own or any(g.bindings() for g in step.groups)) and not (
                    self._ahead and (step.below_own or any(
                        g.bound_sources() for g in step.below_groups))):
                return False
            return self._plan(node_id) is not None

    def any_plan(self) -> bool:
        """Return True when some step has a plan (without looking at every step)."""
        with self._lock:
            return bool(self._own_bound) or any(
                g.bindings() for groups in self._shapes.values() for g in groups)

    def leaves(self, node_id: int) -> tuple[Mapping[str, Any], Mapping[str, float]] | None:
        """Return a learned step's goal leaves and pre sources (read once, when learned)."""
        with self._lock:
            step = self._steps.get(node_id)
            return None if step is None else (step.obs.goal, step.obs.pre)

    def node_ids(self) -> list[int]:
        """Return the ids of the learned steps."""
        with self._lock:
            return list(self._steps)

    def _own(self, o: Observed) -> dict[str, Binding]:
        found = _param_bindings(o) if self._infer else {}
        for decl in self._declared:
            if decl.tool == o.node.step.tool:
                for binding in _fit_declared(decl, o):
                    had = found.setdefault(binding.field, binding)
                    if had.origin != DECLARED and had.source == binding.source:
                        found[binding.field] = binding  # inferred too, but declared: declared
        return found


class Plans(Mapping[int, Plan]):
    """A learner's plans as a read-only mapping (node id -> plan, built when read)."""

    def __init__(self, learner: Learner) -> None:
        self._learner = learner

    def leaves(self, node_id: int) -> tuple[Mapping[str, Any], Mapping[str, float]] | None:
        """Return a learned step's goal leaves and pre sources (:meth:`Learner.leaves`)."""
        return self._learner.leaves(node_id)

    def __getitem__(self, node_id: int) -> Plan:
        plan = self._learner.plan(node_id)
        if plan is None:
            raise KeyError(node_id)
        return plan

    def __contains__(self, node_id: object) -> bool:
        return isinstance(node_id, int) and self._learner.has_plan(node_id)

    def get(self, node_id: int, default: Any = None) -> Any:
        """Return the plan of ``node_id``, else ``default`` (one lookup, no KeyError)."""
        plan = self._learner.plan(node_id)
        return default if plan is None else plan

    def __iter__(self) -> Iterator[int]:
        return (i for i in self._learner.node_ids() if self._learner.plan(i) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return self._learner.any_plan()


def no_plans() -> Plans:
    """Return the plans of a tree whose bindings are switched off (none)."""
    return Learner(infer=False).plans


def learn(
    paths: Sequence[tuple[Sequence[Node], Mapping[str, Any]]],
    *,
    declared: Sequence[Declared] = (),
    infer: bool = True,
    max_shift: float | None = DEFAULT_MAX_SHIFT,
    tolerance: Tolerance = lambda key: None,
    elements: Elements | None = None,
    sources: Sources | None = None,
) -> dict[int, Plan]:
    """
    Find the bindings of every step of a tree's trajectories at once.

    :param paths: Each trajectory's nodes (first step first) with the parameters it
        was recorded with.
    :param declared: Bindings from the params file.
    :param infer: Also infer bindings (parameters from one recording, sensors from two).
    :param max_shift: ``max_shift`` of inferred numeric bindings.
    :param tolerance: Tolerance of a sensor element (:func:`~.rules.element_tolerances`).
    :param elements: Reads a snapshot's sources (default :func:`~.rules.sensor_elements`).
    :param sources: Which sensors inference may bind to (default: all).
    :return: Node id -> its plan, for nodes with at least one binding.
    """
    learner = Learner(declared=declared, infer=infer, max_shift=max_shift,
                      tolerance=tolerance, elements=elements, sources=sources)
    for nodes, params in paths:
        learner.add(nodes, params)
    return dict(learner.plans)


def follow(learner: Learner | None, store: Store, *, task: str, variant: str,
           params: Callable[[TrajectoryInfo], Mapping[str, Any]],
           new: Callable[[], Learner],
           listing: Sequence[TrajectoryInfo] | None = None,
           between: Callable[[], None] = lambda: None) -> Learner:
    """
    Bring a tree's learner up to date with the store, reading only what is new.

    The store's :meth:`~..store.base.Store.tally` of the tree (one index read) says
    whether anything changed; if so, the trajectories committed since the learner's
    newest are listed and learned. When that does not account for the tally (one
    was forgotten or pruned, or another robot committed one late with a smaller id)
    the tree is learned again from scratch with a learner from ``new``. A caller
    that has just listed the tree passes the ``listing``: nothing more is read but
    the new trajectories' steps.

    :param learner: The tree's learner so far, or None.
    :param store: Where the tree is.
    :param task: The tree's task.
    :param variant: The tree's variant.
    :param params: The parameters a trajectory was recorded with.
    :param new: Makes an empty learner.
    :param listing: Every trajectory of the tree, just read; None: ask the store.
    :param between: Called between chunks of trajectories learned (a background
        learner gives the store and the interpreter to others there).
    :return: The learner to keep (``learner`` itself unless it was replaced).
    """
    tally = (store.tally(task=task, variant=variant) if listing is None
             else _added((0, 0), listing))
    if learner is not None and learner.tally == tally:
        return learner
    after = 0 if learner is None else learner.newest
    fresh: Sequence[TrajectoryInfo]
    if listing is None:
        fresh = _listed(store, task, variant, after, between)
    else:
        fresh = [t for t in listing if t.id > after]
    if learner is None or _added(learner.tally, fresh) != tally:
        if learner is not None:
            fresh = _listed(store, task, variant, 0, between) if listing is None else listing
        learner = new()
    for at in range(0, len(fresh), _CHUNK):  # one read per chunk; others use the store between
        chunk = fresh[at:at + _CHUNK]
        nodes = iter(store.nodes([i for info in chunk for i in info.node_ids]))
        for info in chunk:
            learner.add([next(nodes) for _ in info.node_ids], params(info), info.id)
        between()
    return learner


_CHUNK = 64
"""Trajectories whose steps :func:`follow` reads at once."""
_PAGE = 4096
"""Trajectories :func:`follow` lists at once."""


def _listed(store: Store, task: str, variant: str, after: int,
            between: Callable[[], None]) -> list[TrajectoryInfo]:
    """List a tree's trajectories newer than ``after``, a page at a time."""
    found: list[TrajectoryInfo] = []
    while True:
        page = store.trajectories(task=task, variant=variant, after=after, limit=_PAGE)
        found += page
        if len(page) < _PAGE:
            return found
        after = page[-1].id
        between()


def _added(tally: tuple[int, int], infos: Sequence[TrajectoryInfo]) -> tuple[int, int]:
    return tally[0] + len(infos), tally[1] + sum(t.id for t in infos)


def bound_params(steps: Sequence[Step], params: Mapping[str, Any], *,
                 declared: Sequence[Declared] = (), infer: bool = True) -> set[str]:
    """
    Return the parameter leaves a new recording's goals are bound to (``param:<path>``).

    A tree recorded with them is filed under :meth:`~.variants.Variant.bound`, so runs
    with other values of those parameters find it. The filer keeps an inferred one only
    once another recording witnessed it (:func:`param_fields`, :mod:`.filing`).
    """
    out: set[str] = set(param_fields(steps, params)) if infer else set()
    sources = param_leaves(params)
    for step in steps:
        o = Observed(Node(0, None, 0, step), bindable_leaves(step), {}, {}, sources)
        for decl in declared:
            if decl.tool == step.tool and Source.parse(decl.source).kind is SourceKind.PARAM:
                out.update(b.source for b in _fit_declared(decl, o) if b.source in sources)
    return out


def param_fields(steps: Sequence[Step], params: Mapping[str, Any]) -> dict[str, set[Field]]:
    """Return, per parameter leaf, the (tool, goal field) of ``steps`` inferred bound to it."""
    sources = param_leaves(params)
    out: dict[str, set[Field]] = {}
    for step in steps:
        o = Observed(Node(0, None, 0, step), bindable_leaves(step), {}, {}, sources)
        for b in _param_bindings(o).values():
            out.setdefault(b.source, set()).add((step.tool, b.field))
    return out


def follows_param(tool: str, leaves: Mapping[str, Any], field: Field, value: Any) -> bool:
    """
    Return True when a step of ``tool`` has the field, equal to the parameter's ``value``.

    :param leaves: The step's :func:`~.rules.bindable_leaves` (read once per step).
    """
    leaf = leaves.get(field[1]) if tool == field[0] else None
    return leaf is not None and _same_kind(value, leaf) and leaf == value


def _stricter(limit: float | None, than: float | None) -> bool:
    """Return True when ``limit`` is a tighter max_shift than ``than`` (NaN: none yet)."""
    if than is not None and math.isnan(than):
        return True
    return limit is not None and (than is None or limit < than)


def _param_bindings(o: Observed) -> dict[str, Binding]:
    out = {}
    for path, value in o.goal.items():
        if (is_number(value) and value == 0) or value == '':
            continue
        for source, param in o.params.items():  # the last equal parameter wins, as in muscle-mem
            if _same_kind(param, value) and param == value:
                out[path] = Binding(path, source, 0.0, None, INFERRED)  # no range of its own
    return out


def _same_kind(param: Any, value: Any) -> bool:
    """
    Return True when a parameter may name a goal leaf's value.

    A string names a string; an integer leaf (a code, an index, a count) only an integer
    parameter; a floating-point leaf a number (a params file may write 1 for 1.0).
    """
    if isinstance(value, float):
        return is_number(param)
    return type(param) is type(value)


def _fit_declared(decl: Declared, o: Observed) -> list[Binding]:
    if decl.max_angle is not None:  # an orientation: its leaves are not bindable leaves
        found = fit_turn(decl, goal_leaves(o.node.step), o.pre)
        return [found] if found is not None else []
    fields = [p for p in o.goal if p == decl.field or p.startswith(decl.field + '.')
              or p.startswith(decl.field + '[')]
    kind = Source.parse(decl.source).kind
    pool = o.params if kind is SourceKind.PARAM else o.pre
    if decl.source in pool:
        sources = [decl.source]
    else:
        sources = sorted((k for k in pool if k.startswith(decl.source + '[')),
                         key=lambda k: split_element(k)[1])
    out = []
    sensed = kind is SourceKind.SENSOR
    reach = decl.max_offset if decl.max_offset is not None else decl.max_shift
    for path, source in zip(fields, sources):
        value, origin = o.goal[path], pool[source]
        offset = float(value - origin) if is_number(value) and is_number(origin) else 0.0
        if sensed and reach is not None and abs(offset) > reach:
            continue  # a goal farther from the thing sensed than declared is not relative to it
        if not sensed and (offset if is_number(value) and is_number(origin)
                           else value != origin):
            continue  # a parameter binds the goals that were its value, not the tool's others
        out.append(Binding(path, source, offset if sensed else 0.0, decl.max_shift, DECLARED))
    return out


def _shape(o: Observed) -> tuple[Any, ...]:
    return (o.node.step.tool, o.node.step.type_name,
            tuple(sorted((p, type(v).__name__) for p, v in o.goal.items())))


def _follows(o: Observed, bindings: Sequence[Binding],
             tolerance: Tolerance) -> tuple[tuple[str, str], ...]:
    """
    Pair each post element the step moved with the bound field it moved with at recording.

    Only elements of a sensor the step moved (:func:`~.rules.moved_sensors`) can
    follow a field: the tool after a move (its x too when only its height changed), the
    cube carried in the gripper; a value that merely happens to be near a field (closed
    jaws during an arm move, a cube resting on the table) does not.
    A field named by an axis or an index (``position.y``, ``positions[2]``) pairs only
    with the element of the same axis (``sensor:ee[1]``, ``sensor:joints[2]``), so a
    tool height is never taken for a cube's y.

    An element follows a field when it ended the step equal to it (within its
    tolerance), or when it moved during the step, beyond its tolerance, by what an
    element equal to the field moved along the same axis (within its tolerance): what
    the robot carries at an offset (a box 0.4 m ahead of a mobile base that drove to
    the goal's x) moves with the field as the robot does, so moving the field by d
    moves it by d too.
    """
    out: list[tuple[str, str]] = []
    numeric = [b.field for b in bindings if is_number(o.goal.get(b.field))]
    moved = moved_sensors(o.pre, o.post, tolerance)
    carried: list[tuple[str, float, float]] = []  # (element, moved by, its tolerance)
    for key, value in sorted(o.post.items()):
        tol = tolerance(key)
        if tol is None or tol <= 0 or (key in o.pre and split_element(key)[0] not in moved):
            continue  # (an element only the post snapshot has may have moved: the Engine's)
        index = split_element(key)[1]
        near = min(((abs(value - o.goal[f]), f) for f in numeric
                    if _axis(f) in (None, index)), default=None)
        if near is not None and near[0] <= tol:
            out.append((key, near[1]))
        elif key in o.pre and abs(value - o.pre[key]) > tol:
            carried.append((key, value - o.pre[key], tol))
    leaders = [(key, o.post[key] - o.pre[key], f) for key, f in out
               if key in o.pre and abs(o.post[key] - o.pre[key]) > (tolerance(key) or 0.0)]
    for key, by, tol in carried:
        index = split_element(key)[1]
        near = min(((abs(by - lead), f) for leader, lead, f in leaders
                    if split_element(leader)[1] == index), default=None)
        if near is not None and near[0] <= tol:
            out.append((key, near[1]))
    return tuple(sorted(out))


def followers(node: Node, fields: Sequence[str], tolerance: Tolerance,
              ) -> tuple[tuple[str, str], ...]:
    """
    Return (post element, field) for each post element of ``node`` that followed one of ``fields``.

    The rule a plan's ``follows`` is made by (a bound field's), for any numeric goal
    fields: what a behavior tree document shows its editor (:mod:`..bt.document`).
    """
    o = Observed(node, bindable_leaves(node.step), sensor_elements(node.step.pre),
                 sensor_elements(node.step.post))
    return _follows(o, [Binding(f, '') for f in fields], tolerance)


def _axis(path: str) -> int | None:
    """Return the axis a leaf path names (x, y, z -> 0, 1, 2; ``[k]`` -> k), or None."""
    last = parse_path(path)[-1] if path else None
    if isinstance(last, int):
        return last
    return {'x': 0, 'y': 1, 'z': 2}.get(str(last))
