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
A learned task as a behavior tree document: what a person reads, edits and runs.

Why a data file and not generated Python: a reviewer reads goals, checks and
bindings, and a diff of YAML shows exactly which goal changed; loading it runs
no code, so a tree from a colleague or another robot is safe to open. The
tree's shape is fixed by the loader (:mod:`.tree`): each learned step a
sequence of its pre-check, its call and its post-check, the branches after a
step a selector in the order the walk ranks them, and the agent as the last
fallback everywhere.

Layout (``format: muscle_mem_bt/1``)::

    task, params        the task and the parameters it runs with (edit to retarget)
    variant             the learned tree it came from: which parameter leaves it binds
                        (any value runs it) and which it holds literal (a run with
                        another value of one is not this tree's: the agent is asked)
    sensors             per sensor: tolerance and mode (the checks), from the params file
    steps               the first steps, each with
      id                the learned step (its node in the store)
      tool, kind, type  the action or service, ``action`` or ``service``, its type (or the
                        subtask called, ``subtask``, ``muscle_mem_interfaces/action/ExecuteTask``)
      goal              the goal or request, field by field (edit to change it)
      learned           its bindable fields as recorded: edits are measured against it
      bindings          field <- source (+ offset), max_shift: computed at tick time
      ahead             sources later steps bind, range-checked here
      follows           post elements that moved with a goal field at recording: they
                        are expected moved as the field is (by a binding or an edit)
      unpredictable     post elements the step moved that follow no field: where an
                        edited goal leaves them is not known (checked as recorded)
      pre, post         the recorded sensor snapshots the checks compare with
      trace             an action step's recorded trace: what the watched sensors and its
                        feedback did while it ran (:mod:`.traces`); a replay of the step is
                        watched against it and canceled the moment the world leaves it
      then              the steps that follow it (branches, best first)
      end               true when a learned trajectory ends here
      subtree           a subtask step (kind ``subtask``, goal ``{params, task}``): the
                        tree it calls, by its name under ``subtrees``
    subtrees            the trees the subtask steps call, by name (:mod:`.subtrees`), each
                        with its own task, params, variant and steps

The document is this module's (its steps, their plans and edits, building it from the
store, :func:`as_run`); its YAML text is :mod:`.yamlfile`'s, where each step carries a
comment naming its trajectories, its success count and bindings.

An edit of an unbound numeric goal field by ``d`` is carried as a binding's shift is
(:attr:`~muscle_mem_ros.bindings.rules.Plan.edits`): the post elements that followed the field
are expected moved by ``d`` at that step's post-check and at the later checks the shift
reaches, in ``muscle-mem run-bt`` and in an import (:func:`as_run` writes the imported
snapshots so moved). A bound field is computed at run time: an edit of it is refused
when the document is read, naming the field and its binding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
import difflib
import json
import re
from typing import Any

from ..bindings.judge import BindingJudge, changes, PlanSource
from ..bindings.learning import followers
from ..bindings.rules import (
    bindable_leaves, Binding, element_tolerances, goal_leaves, is_number, leaves, moved_sensors,
    Plan, sensor_elements, split_element,
)
from ..bindings.variants import BOUND, canonical, served
from ..checks.tolerance import ToleranceCheck
from ..errors import ConfigError
from ..records import (
    CompareMode, Node, SensorSpec, Snapshot, Step, StepStatus, ToolKind, Trace, TrajectoryInfo,
)
from ..replay.ranking import rank_key
from ..replay.shadow import SnapshotSenses
from ..store.base import Store

__all__ = ['as_run', 'AsRun', 'bound_leaves', 'BtDocument', 'BtStep', 'build', 'unknown_fields']

Tolerance = Callable[[str], float | None]


@dataclass
class BtStep:
    """One learned step of the document (see the module docstring for the fields)."""

    id: int  # noqa: A003 (the store's name)
    tool: str
    kind: ToolKind
    type_name: str
    goal: Any
    pre: dict[str, list[float]] | None
    post: dict[str, list[float]] | None
    bindings: tuple[Binding, ...] = ()
    ahead: tuple[tuple[str, float | None], ...] = ()
    follows: tuple[tuple[str, str], ...] = ()
    trajectories: tuple[int, ...] = ()
    successes: int = 0
    end: bool = False
    then: list[BtStep] = field(default_factory=list)
    learned: dict[str, Any] | None = None
    """The goal's bindable leaves as recorded (None: the goal is as recorded)."""
    unpredictable: tuple[str, ...] = ()
    trace: Trace | None = None
    """What the watched sensors and the feedback did while it was recorded (None: unwatched)."""
    subtree: str = ''
    """A subtask step: the name of the tree it calls in the top document's ``subtrees``."""

    def node(self, depth: int, parent: int | None) -> Node:
        """Return the step as the judge sees it (a store node; the payload is not needed)."""
        goal = json.dumps(self.goal)
        step = Step(tool=self.tool, kind=self.kind, type_name=self.type_name,
                    payload=goal.encode(), payload_json=goal,
                    pre=_snapshot(self.pre), post=_snapshot(self.post),
                    status=StepStatus.SUCCEEDED, trace=self.trace)
        return Node(self.id, parent, depth, step, success_count=self.successes,
                    terminal=self.end)

    def edits(self) -> dict[str, float]:
        """Return field -> how far it was moved, for the numeric fields edited since learning."""
        if self.learned is None:
            return {}
        now = bindable_leaves(self.node(0, None).step)
        return {f: float(now[f] - was) for f, was in self.learned.items()
                if is_number(was) and is_number(now.get(f)) and changes(was, now[f])}

    def refused_edit(self) -> str:
        """
        Return why an edit of this step cannot run as edited ('' when none).

        First a misspelt goal field (:func:`unknown_fields`), named with the learned
        field it is nearest to: it is reported as unknown, not as a bound field deleted.
        Then an edit of a bound field, which is computed at run time.
        """
        now = bindable_leaves(self.node(0, None).step) if self.learned is not None else {}
        unknown = '' if self.kind is ToolKind.SUBTASK else unknown_fields(now, self.learned or {})
        if unknown:  # a subtask's goal is its call's params: free to have keys of its own
            return unknown
        for b in self.bindings:
            if b.is_param and b.offset:
                return (f'the binding of {b.field} to {b.source} has offset {b.offset:g}, but a '
                        "parameter binding sends the parameter's value; edit params")
            if self.learned is None or b.field not in self.learned:
                continue
            if b.field not in now or changes(self.learned[b.field], now[b.field]):
                advice = 'edit params' if b.is_param else "edit the binding's offset"
                return (f'{b.field} is bound to {b.source}; {advice}, not the goal '
                        f'(learned {self.learned[b.field]!r}, edited '
                        f'{now.get(b.field, "deleted")!r})')
        return ''

    @property
    def plan(self) -> Plan | None:
        """Return the bindings, ahead checks and edits of the step (None: it has none)."""
        edits = self.edits()
        if not self.bindings and not self.ahead and not edits:
            return None
        carried = {b.field for b in self.bindings} | edits.keys()
        return Plan(self.bindings, tuple((e, f) for e, f in self.follows if f in carried),
                    self.ahead, tuple(sorted(edits.items())))


@dataclass
class BtDocument:
    """A learned task as a behavior tree (see the module docstring)."""

    task: str
    params: dict[str, Any]
    variant: str
    sensors: dict[str, dict[str, Any]]
    steps: list[BtStep]
    subtrees: dict[str, BtDocument] = field(default_factory=dict)
    """The trees its subtask steps call, by name (:mod:`.subtrees`); a subtree's own
    subtask steps name trees here too (its own ``subtrees`` is empty)."""
    body: str = ''
    """The key of the body its trajectories were learned on ('': the file records none);
    an export of a tree that mixes bodies holds the one chosen (:mod:`..body`)."""

    def walk(self) -> Iterator[tuple[int, BtStep, BtStep | None]]:
        """Yield (depth, step, parent) of every step, depth first in rank order."""
        todo: list[tuple[int, BtStep, BtStep | None]] = [(0, s, None) for s in
                                                         reversed(self.steps)]
        while todo:
            depth, step, parent = todo.pop()
            yield depth, step, parent
            todo.extend((depth + 1, child, step) for child in reversed(step.then))

    def paths(self) -> list[list[BtStep]]:
        """Return every root-to-end path (each a trajectory the document holds)."""
        out: list[list[BtStep]] = []

        def visit(step: BtStep, path: list[BtStep]) -> None:
            here = [*path, step]
            if step.end or not step.then:
                out.append(here)
            for child in step.then:
                visit(child, here)
        for root in self.steps:
            visit(root, [])
        return out

    def nodes(self) -> dict[int, Node]:
        """Return every step as a store node, by id."""
        return {s.id: s.node(depth, parent.id if parent else None)
                for depth, s, parent in self.walk()}

    def plans(self) -> PlanSource:
        """Return the steps' plans in the form the binding judge reads."""
        return _FilePlans({s.id: s for _, s, _ in self.walk()})

    def tolerance(self) -> Tolerance:
        """Return the sensor element tolerances of the document's ``sensors``."""
        return element_tolerances([
            SensorSpec(name, tuple(float(t) for t in _listed(spec.get('tolerance'))),
                       CompareMode(spec.get('mode', 'abs')))
            for name, spec in self.sensors.items()])

    def misfit(self) -> str:
        """
        Return why the cache would not run this tree with ``params`` ('' when it would).

        A tree serves the parameters of its variant: its bound leaves, and those its
        declared bindings follow, take any value; the others only the recorded one (one
        recording is not evidence that a goal follows a parameter, a declaration is:
        :func:`muscle_mem_ros.bindings.variants.served`, the node's rule too).
        """
        if not self.variant or self.variant == canonical(self.params):
            return ''
        variant = served(self.variant, [p for _, s, _ in self.walk() if (p := s.plan)])
        if variant.fits(self.params):
            return ''
        if variant.pattern is None:
            return f"params do not fit the tree's variant {self.variant!r}"
        theirs = leaves(variant.pattern)
        mine = leaves(dict(self.params))
        bound = set(bound_leaves(variant.pattern))
        for key in sorted(theirs.keys() | mine.keys() | bound):
            if key in bound and key in mine:
                continue
            if key not in mine or key not in theirs or theirs[key] != mine[key]:
                return (f'params do not fit the tree: {key} is '
                        f'{theirs.get(key, "absent")!r} in its variant (held literal: no '
                        f'second recording showed goals following it), '
                        f'{mine.get(key, "absent")!r} in params')
        return f"params do not fit the tree's variant {self.variant}"


def unknown_fields(goal: Mapping[str, Any], learned: Mapping[str, Any]) -> str:
    """
    Return a misspelt field of ``goal``, named ('' when none).

    A field is misspelt when the goal lacks a field it had as learned and has one the
    learned goal does not know, compared without list indices (``points[3].positions[0]``
    is a ``points[].positions[]``: a list may be edited longer or shorter). A field only
    added is left to the goal's type, which names it when the goal is built.
    """
    if all(f in goal for f in learned):
        return ''
    known = {_INDEX.sub('[]', f) for f in learned}
    for name in goal:
        if _INDEX.sub('[]', name) not in known:
            near = difflib.get_close_matches(name, [f for f in learned if f not in goal], n=1)
            hint = f' (did you mean {near[0]}?)' if near else ''
            return f'unknown field {name} in its goal: the goal as learned has no such field{hint}'
    return ''


_INDEX = re.compile(r'\[\d+\]')


class _FilePlans(Mapping[int, Plan]):
    """A document's plans as :class:`~..bindings.learning.Plans` (node id -> plan, and leaves)."""

    def __init__(self, steps: Mapping[int, BtStep]) -> None:
        self._plans = {i: p for i, s in steps.items() if (p := s.plan) is not None}
        self._steps = steps
        self._leaves: dict[int, tuple[Mapping[str, Any], Mapping[str, float]]] = {}

    def __getitem__(self, node_id: int) -> Plan:
        return self._plans[node_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self._plans)

    def __len__(self) -> int:
        return len(self._plans)

    def leaves(self, node_id: int) -> tuple[Mapping[str, Any], Mapping[str, float]] | None:
        """Return a step's goal leaves and pre sources (read once: every tick's checks ask)."""
        if node_id not in self._leaves:
            step = self._steps.get(node_id)
            if step is None:
                return None
            recorded = step.node(0, None).step
            self._leaves[node_id] = (goal_leaves(recorded), sensor_elements(recorded.pre))
        return self._leaves[node_id]


def build(store: Store, *, task: str, variant: str, plans: Mapping[int, Plan],
          sensors: Mapping[str, dict[str, Any]] | None = None,
          params: Mapping[str, Any] | None = None,
          tolerance: Tolerance = lambda key: None, body: str | None = None) -> BtDocument:
    """
    Return one learned tree of ``task`` as a document.

    :param store: The cache.
    :param task: The task.
    :param variant: The tree (see :meth:`~..store.base.Store.trees`).
    :param plans: Its plans (:meth:`~..replay.treeview.Trees.plans`).
    :param sensors: Sensor name -> tolerance and mode, for the checks (from the params file).
    :param params: The parameters the tree runs with (default: its first recording's).
    :param tolerance: Sensor element tolerances (which post elements follow a goal field).
    :param body: Only the trajectories learned on this body (its key), recorded in the
        document; None: every trajectory, and the document records no body.
    """
    listing = [t for t in store.trajectories(task=task, variant=variant)
               if body is None or t.body == body]
    if not listing:
        raise ConfigError(f'task {task!r} has no trajectories in tree {variant!r}')
    through: dict[int, list[int]] = {}
    ends = {t.node_ids[-1] for t in listing if t.node_ids}
    for info in listing:
        for node_id in info.node_ids:
            through.setdefault(node_id, []).append(info.id)

    def steps_under(parent: int | None) -> list[BtStep]:
        nodes = sorted(store.children(task=task, variant=variant, parent=parent),
                       key=lambda n: rank_key(n, 0.0))
        return [_bt_step(n, plans.get(n.id), through.get(n.id, []), n.id in ends,
                         steps_under(n.id), tolerance) for n in nodes if n.id in through]
    first = _recorded_params(listing[0])
    return BtDocument(task=task, params=dict(params if params is not None else first),
                      variant=variant, sensors=dict(sensors or {}), steps=steps_under(None),
                      body=body or '')


def bound_leaves(pattern: Any, prefix: str = '') -> list[str]:
    """Return the paths of a variant pattern's bound parameter leaves (``place[0]``)."""
    if pattern == BOUND:
        return [prefix]
    if isinstance(pattern, dict):
        return [p for k, v in pattern.items()
                for p in bound_leaves(v, f'{prefix}.{k}' if prefix else str(k))]
    if isinstance(pattern, list):
        return [p for i, v in enumerate(pattern) for p in bound_leaves(v, f'{prefix}[{i}]')]
    return []


@dataclass(frozen=True)
class AsRun:
    """
    One step as ``muscle-mem run-bt`` would run it in the recorded world.

    :ivar values: Bound field -> the value sent (the fields whose value changes).
    :ivar pre: The pre snapshot its pre-check expects (moved by the edits before it).
    :ivar post: The post snapshot its post-check expects (moved by its edits and bindings).
    """

    values: dict[str, Any]
    pre: Snapshot | None
    post: Snapshot | None


def as_run(doc: BtDocument) -> dict[int, AsRun]:
    """
    Return every step as the document runs in the world it was recorded in, by id.

    Only the document moves it: its params (bound fields take their values), its
    bindings' offsets and its edited goals (the elements that followed an edited field
    are moved by the edit, at that step and the later steps the shift reaches). What
    :func:`muscle_mem_ros.cli.bt.import_bt` stores, so the imported tree is what was
    reviewed and the cache's replays of it expect what the edits do.

    A document whose params do not fit its variant (:meth:`BtDocument.misfit`) does not
    run: run-bt asks the agent from step 0, as the cache does for params no tree of its
    serves, and an import refuses it, so the cache never replays what run-bt would not
    run (one rule for a params edit, wherever the document goes).

    :raises ConfigError: params that do not fit the variant, or a step whose bindings
        refuse that world (naming the step).
    """
    misfit = doc.misfit()
    if misfit:
        raise ConfigError(f'task {doc.task!r}: {misfit}; run-bt asks the agent for this '
                          'document from step 0, and an import would make the cache replay '
                          'it: edit the goal the leaf should change, or let the agent record '
                          'the task with these params')
    named = {n for _, s, _ in doc.walk() for n in (s.pre or {})}
    specs = [SensorSpec(n, (1e-9,)) for n in sorted(named)]  # the world is the expected one
    senses = SnapshotSenses(ToleranceCheck(sensors=specs) if specs else None,
                            doc.tolerance(), doc.params)
    plans = doc.plans()
    nodes = doc.nodes()
    out: dict[int, AsRun] = {}
    for path in doc.paths():
        judge = BindingJudge(plans=plans, params=doc.params, senses=senses)
        for depth, step in enumerate(path):
            node = nodes[step.id]
            pre = judge.shift.expected(node.step.pre)
            senses.look(pre)
            passing, failures = judge.pick([node], depth)
            if not passing:
                why = failures[0][1].reason if failures else 'its pre-check fails'
                raise ConfigError(f'step {depth} (learned step {step.id}): {why}')
            bound = judge.sending(node)
            judge.ran(node)
            out.setdefault(step.id, AsRun(dict(bound.values) if bound else {}, pre,
                                          judge.expected_post(node)))
    return out


def _listed(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _recorded_params(info: TrajectoryInfo) -> dict[str, Any]:
    try:
        value = json.loads(info.params_json or '{}')
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _bt_step(node: Node, plan: Plan | None, trajectories: Sequence[int], end: bool,
             then: list[BtStep], tolerance: Tolerance) -> BtStep:
    try:
        goal = json.loads(node.step.payload_json) if node.step.payload_json else {}
    except ValueError:
        goal = node.step.payload_json
    learned = bindable_leaves(node.step)
    bound = {b.field for b in plan.bindings} if plan else set()
    follows = list(plan.follows if plan else ())  # the cache's: bound fields first
    taken = {e for e, _ in follows}
    unbound = [f for f, v in learned.items() if f not in bound and is_number(v)]
    follows += [(e, f) for e, f in followers(node, unbound, tolerance) if e not in taken]
    pre, post = sensor_elements(node.step.pre), sensor_elements(node.step.post)
    moved = moved_sensors(pre, post, tolerance)
    followed = {e for e, _ in follows}
    unpredictable = tuple(sorted(k for k in post
                                 if split_element(k)[0] in moved and k not in followed))
    return BtStep(
        id=node.id, tool=node.step.tool, kind=node.step.kind, type_name=node.step.type_name,
        goal=goal, pre=_vectors(node.step.pre), post=_vectors(node.step.post),
        bindings=plan.bindings if plan else (), ahead=plan.ahead if plan else (),
        follows=tuple(follows), trajectories=tuple(trajectories),
        successes=node.success_count, end=end, then=then, learned=learned,
        unpredictable=unpredictable, trace=node.step.trace)


def _vectors(snapshot: Snapshot | None) -> dict[str, list[float]] | None:
    if snapshot is None:
        return None
    return {name: [float(v) for v in vector] for name, vector in snapshot.features.items()}


def _snapshot(vectors: Mapping[str, Sequence[float]] | None) -> Snapshot | None:
    if vectors is None:
        return None
    return Snapshot(features={k: tuple(float(v) for v in vec) for k, vec in vectors.items()})
