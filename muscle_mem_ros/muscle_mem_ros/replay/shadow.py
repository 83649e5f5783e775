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
Shadow runs: what the cache would have sent, beside what the agent sent.

A robot owner who cannot yet trust the cache lets the agent do every task and
watches the cache guess. For each step the agent did, :func:`shadow` asks the
walk's own question on that step's snapshot (the one the cache took when the
agent's goal came through the proxy): which learned step passes its pre-check
under its bindings, ranked as the walk ranks them, and what goal would it send?
That prediction is compared with the agent's goal field by field, numbers
within the tool's agreement tolerance. While the predictions agree the walk
follows them (the shift of bindings included); after the first disagreement
the cache would have handed off, so later steps are not predicted.
:class:`ShadowRun` asks the same one step at a time, so that a node can say each
step's verdict as soon as the step is recorded, while the agent still works.

The judge is :class:`~..bindings.judge.BindingJudge`, the same one a replay uses;
only its senses differ (:class:`SnapshotSenses`: a recorded snapshot instead of
a live capture).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .walk import blamed, choose, Verdict
from ..bindings.judge import (
    BindingJudge, Bound, checked, Compared, Observation, PlanSource, SensorSenses,
)
from ..bindings.rules import goal_leaves, INFERRED, is_number, param_leaves, Plan
from ..records import Node, Snapshot, Step, TrajectoryInfo

__all__ = ['Difference', 'followed', 'path_of', 'shadow', 'ShadowRun', 'ShadowStep',
           'SnapshotSenses', 'summary', 'verdict_text']


@dataclass(frozen=True)
class Difference:
    """One goal field the prediction got wrong (``difference`` None: not a number)."""

    field: str
    predicted: Any
    sent: Any
    difference: float | None = None

    def __str__(self) -> str:
        cache, agent = _shown(self.predicted), _shown(self.sent)
        if self.difference is not None:
            return f'{self.field} off by {self.difference:.4g} (cache {cache}, agent {agent})'
        return f'{self.field}: cache {cache}, agent {agent}'


def _shown(value: Any) -> str:
    """Return a goal value as a person reads it: a float to 4 significant digits."""
    return f'{value:.4g}' if isinstance(value, float) else repr(value)


@dataclass(frozen=True)
class ShadowStep:
    """
    The cache's guess for one step the agent did.

    :ivar step: Index in the agent's run.
    :ivar tool: The tool the agent called.
    :ivar node_id: The learned step the cache would have sent (None: it would have
        handed off here, or had already).
    :ivar agreed: The prediction matched the agent's goal.
    :ivar reason: Why not, in words ('' when it agreed).
    :ivar differences: The fields that differed.
    :ivar bindings: (field, agreed) of each inferred binding the prediction used.
    """

    step: int
    tool: str
    node_id: int | None
    agreed: bool
    reason: str = ''
    differences: tuple[Difference, ...] = ()
    bindings: tuple[tuple[str, bool], ...] = ()

    @property
    def predicted(self) -> bool:
        """Return True when the cache would have sent something at this step."""
        return self.node_id is not None


class SnapshotSenses(SensorSenses):
    """
    The node's senses replayed from a recorded snapshot (:class:`~..bindings.judge.Senses`).

    :param check: The sensors' ToleranceCheck, or None (nothing checked).
    :param tolerance: Tolerance of a sensor element.
    :param params: The run's parameters.
    """

    def __init__(self, check: Any, tolerance: Callable[[str], float | None],
                 params: Mapping[str, Any]) -> None:
        super().__init__(tolerance)
        self._check = check
        self._params = param_leaves(params)
        self._seen: Observation | None = None

    def look(self, now: Snapshot | None) -> None:
        """Judge the next candidates against ``now``."""
        now = now if now is not None else Snapshot()
        self._seen = Observation(now, {**self._params, **self.elements(now)})

    def observe(self, node: Node) -> Observation | None:
        """Return the snapshot of :meth:`look`."""
        return self._seen

    def compare(self, node: Node, expected: Snapshot | None, seen: Observation,
                bound: Bound | None) -> Compared:
        """Check ``expected`` against the snapshot, as the node's senses do."""
        return checked(self._check, expected, seen.now, now_time=seen.now.taken_at,
                       bound=bound, unchecked=expected is None or not expected.features)


class ShadowRun:
    """
    A shadow comparison in progress: the agent's steps are added one at a time.

    :meth:`add` predicts and compares the next step the agent did, as the walk would
    have on that step's snapshot, so a step's verdict is known as soon as the step is
    recorded; :func:`shadow` adds a whole run at once. The attributes and parameters
    are those of :func:`shadow`.

    :ivar steps: The verdicts so far, one per step added.
    """

    def __init__(
        self, *, params: Mapping[str, Any], plans: PlanSource,
        children: Callable[[int | None], Sequence[Node]], check: Any,
        tolerance: Callable[[str], float | None], agreement: Callable[[str], float],
        describe: Callable[[Any], str] = str,
    ) -> None:
        self._plans = plans
        self._children = children
        self._agreement = agreement
        self._describe = describe
        self._senses = SnapshotSenses(check, tolerance, params)
        self._judge = BindingJudge(plans=plans, params=params, senses=self._senses)
        self._at: int | None = None
        self._stopped = ''
        self.steps: list[ShadowStep] = []

    def add(self, step: Step) -> ShadowStep:
        """
        Predict and compare the agent's next step; return (and keep) its verdict.

        An error (the store could not be read) leaves the run as it was: the same step
        can be added again.
        """
        entry = self._predict(len(self.steps), step)
        self.steps.append(entry)
        return entry

    def _predict(self, i: int, step: Step) -> ShadowStep:
        if self._stopped:
            return ShadowStep(i, step.tool, None, False, self._stopped)
        self._senses.look(step.pre)
        candidates = self._children(self._at)
        passing, failures = self._judge.pick(candidates, i)
        node = choose(Verdict(tuple(passing)))
        if node is None:
            worst = blamed(failures)
            why = (self._describe(worst[1]) if worst is not None else
                   'nothing learned' if not candidates else 'no learned step passes')
            self._stopped = f'the cache had handed off at step {i}'
            return ShadowStep(i, step.tool, None, False,
                              f'the cache would have handed off here: {why}')
        entry = _compare(i, node, step, self._judge.sending(node), self._plans.get(node.id),
                         self._agreement(step.tool))
        if entry.agreed:
            self._judge.ran(node)
            self._at = node.id
        else:
            self._stopped = f'the cache went its own way at step {i}'
        return entry


def shadow(
    steps: Sequence[Step], *, params: Mapping[str, Any], plans: PlanSource,
    children: Callable[[int | None], Sequence[Node]], check: Any,
    tolerance: Callable[[str], float | None], agreement: Callable[[str], float],
    describe: Callable[[Any], str] = str,
) -> list[ShadowStep]:
    """
    Predict each of the agent's steps as the walk would have, and compare.

    :param steps: What the agent did (each with the snapshot taken before it).
    :param params: The run's parameters.
    :param plans: The tree's plans.
    :param children: The learned children of a node (None: the first steps).
    :param check: The sensors' ToleranceCheck, or None.
    :param tolerance: Tolerance of a sensor element.
    :param agreement: A tool's agreement tolerance (numbers closer than it agree).
    :param describe: Words for a refused candidate's CheckFailure.
    :return: One entry per step.
    """
    run = ShadowRun(params=params, plans=plans, children=children, check=check,
                    tolerance=tolerance, agreement=agreement, describe=describe)
    for step in steps:
        run.add(step)
    return run.steps


def _compare(i: int, node: Node, step: Step, bound: Bound | None, plan: Plan | None,
             tolerance: float) -> ShadowStep:
    if node.step.tool != step.tool or node.step.type_name != step.type_name:
        return ShadowStep(i, step.tool, node.id, False,
                          f'the cache would have called {node.step.tool}')
    predicted = dict(goal_leaves(node.step))
    if bound is not None:
        predicted.update(bound.values)
    sent = goal_leaves(step)
    differences = []
    for field in sorted(predicted.keys() | sent.keys()):
        a, b = predicted.get(field), sent.get(field)
        if is_number(a) and is_number(b):
            if not abs(a - b) <= tolerance:
                differences.append(Difference(field, a, b, float(abs(a - b))))
        elif a != b:
            differences.append(Difference(field, a, b))
    if not predicted and not sent and node.step.payload != step.payload:
        differences.append(Difference('(goal)', 'recorded bytes', 'other bytes'))
    wrong = {d.field for d in differences}
    used = tuple((b.field, b.field not in wrong) for b in (plan.bindings if plan else ())
                 if b.origin == INFERRED)
    reason = '; '.join(str(d) for d in differences[:3])
    if len(differences) > 3:
        reason += f' (+{len(differences) - 3} more)'
    return ShadowStep(i, step.tool, node.id, not differences, reason, tuple(differences), used)


def path_of(steps: Sequence[ShadowStep]) -> tuple[int, ...]:
    """Return the learned steps the cache followed while it agreed."""
    out = []
    for s in steps:
        if not s.agreed or s.node_id is None:
            break
        out.append(s.node_id)
    return tuple(out)


def followed(steps: Sequence[ShadowStep],
             trajectories: Sequence[TrajectoryInfo]) -> tuple[int, bool]:
    """
    Return the learned trajectory the cache would have followed, and whether it agreed all along.

    The trajectory is the one through the learned steps the predictions went (those that
    agreed, then the first that did not); it agreed when the run's every step agreed and
    it is exactly the steps followed. For the steps of a run so far: the trajectory the
    cache is on. (0, False) when the cache would have handed off at the first step.
    """
    path = path_of(steps)
    wrong = next((s.node_id for s in steps[len(path):len(path) + 1] if s.predicted), None)
    tried = path + ((wrong,) if wrong is not None else ())
    if not tried:
        return 0, False
    whole = next((t for t in trajectories if tuple(t.node_ids) == path), None)
    agreed = whole is not None and len(path) == len(steps)
    on = whole if agreed else next((t for t in trajectories
                                    if tuple(t.node_ids[:len(tried)]) == tried), None)
    return (on.id if on is not None else 0), agreed


def verdict_text(entry: ShadowStep) -> str:
    """Return one step's verdict in words, for its event and feedback."""
    if entry.agreed:
        return f'step {entry.step}: {entry.tool} agreed with learned step {entry.node_id}'
    return f'step {entry.step}: {entry.tool}: {entry.reason}'


def summary(steps: Sequence[ShadowStep]) -> str:
    """
    Return a result line that says every step's verdict.

    ``shadow: 2 of 4 steps agreed with the cache (as learned steps 7, 8); step 2: <why
    not>; step 3: not predicted``: the steps that agreed are the first ones (with the
    learned step each agreed with), the first that did not says why, and no step after
    it is predicted (the cache would have handed off, or gone its own way).
    """
    path = path_of(steps)
    text = f'shadow: {len(path)} of {len(steps)} steps agreed with the cache'
    if path:
        text += ' (as learned steps ' + ', '.join(str(n) for n in path) + ')'
    if len(path) < len(steps):
        first = steps[len(path)]
        text += f'; step {first.step}: {first.reason}'
        rest = steps[len(path) + 1:]
        if len(rest) == 1:
            text += f'; step {rest[0].step}: not predicted'
        elif rest:
            text += f'; steps {rest[0].step}-{rest[-1].step}: not predicted'
    return text
