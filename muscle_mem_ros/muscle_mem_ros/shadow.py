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

The judge is :class:`~.retarget.BindingJudge`, the same one a replay uses;
only its senses differ (:class:`SnapshotSenses`: a recorded snapshot instead of
a live capture).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .bindings import goal_leaves, INFERRED, is_number, param_leaves, Plan
from .records import Node, Snapshot, Step
from .retarget import (
    BindingJudge, Bound, checked, Compared, Observation, PlanSource, SensorSenses,
)
from .walk import blamed, choose, Verdict

__all__ = ['Difference', 'path_of', 'shadow', 'ShadowStep', 'SnapshotSenses', 'summary']


@dataclass(frozen=True)
class Difference:
    """One goal field the prediction got wrong (``difference`` None: not a number)."""

    field: str
    predicted: Any
    sent: Any
    difference: float | None = None

    def __str__(self) -> str:
        if self.difference is not None:
            return (f'{self.field} off by {self.difference:.4g} '
                    f'(cache {self.predicted!r}, agent {self.sent!r})')
        return f'{self.field}: cache {self.predicted!r}, agent {self.sent!r}'


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
    The node's senses replayed from a recorded snapshot (:class:`~.retarget.Senses`).

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
    senses = SnapshotSenses(check, tolerance, params)
    judge = BindingJudge(plans=plans, params=params, senses=senses)
    out: list[ShadowStep] = []
    at: int | None = None
    stopped = ''
    for i, step in enumerate(steps):
        if stopped:
            out.append(ShadowStep(i, step.tool, None, False, stopped))
            continue
        senses.look(step.pre)
        candidates = children(at)
        passing, failures = judge.pick(candidates, i)
        node = choose(Verdict(tuple(passing)))
        if node is None:
            worst = blamed(failures)
            why = (describe(worst[1]) if worst is not None else
                   'nothing learned' if not candidates else 'no learned step passes')
            out.append(ShadowStep(i, step.tool, None, False,
                                  f'the cache would have handed off here: {why}'))
            stopped = f'the cache had handed off at step {i}'
            continue
        entry = _compare(i, node, step, judge.sending(node), plans.get(node.id),
                         agreement(step.tool))
        out.append(entry)
        if entry.agreed:
            judge.ran(node)
            at = node.id
        else:
            stopped = f'the cache went its own way at step {i}'
    return out


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


def summary(steps: Sequence[ShadowStep]) -> str:
    """Return a result line: how many steps agreed, and the first that did not."""
    agreed = sum(s.agreed for s in steps)
    text = f'shadow: {agreed} of {len(steps)} steps agreed with the cache'
    first = next((s for s in steps if not s.agreed), None)
    if first is not None:
        text += f'; step {first.step}: {first.reason}'
    return text
