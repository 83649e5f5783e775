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
One walk that follows the world: bound goal fields recomputed, checks moved by the shift.

The :class:`~muscle_mem_ros.ros.replay.Replayer` judges literally (the matcher's
index, fast for large fan-outs) while neither the candidates have bindings nor
the world has moved. Otherwise this session judges each candidate one by one
under its bindings (:mod:`muscle_mem_ros.bindings`): resolve the bound fields
from the run's parameters and the current sensors, refuse a source that is
missing or moved beyond ``max_shift``, compare every other sensor element
literally against the recording moved by the walk's shift, and send the goal
with the bound fields set. What was substituted is reported with the step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import math
from typing import Any, TYPE_CHECKING

from muscle_mem_ros.bindings import (
    advance, Bound, param_leaves, Plan, resolve, sensor_elements, Shift, Substitution,
)
from muscle_mem_ros.records import CheckFailure, Node
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.walk import Miss, Reporter, Verdict

if TYPE_CHECKING:
    from muscle_mem_ros.ros.proxy import CallOutcome
    from muscle_mem_ros.ros.replay import Replayer
    from muscle_mem_ros.ros.sync import CancelToken

__all__ = ['BoundWalk']


class BoundWalk:
    """
    The Judge and Executor of one walk with bindings (one per walk: it keeps the shift).

    :param replayer: The node's replayer (sensors, tools, literal judging).
    :param plans: Node id -> plan of the tree walked.
    :param params: The run's task parameters.
    :param tolerance: Tolerance of a sensor element.
    :param on_substituted: Called with a step's substitutions before it is sent.
    """

    def __init__(self, *, replayer: Replayer, plans: Mapping[int, Plan],
                 params: Mapping[str, Any], tolerance: Callable[[str], float | None],
                 on_substituted: Callable[[int, Sequence[Substitution]], None]) -> None:
        self._replayer = replayer
        self._plans = plans
        self._params = dict(params)
        self._tolerance = tolerance
        self._on_substituted = on_substituted
        self.shift = Shift()
        self._bound: dict[int, Bound] = {}

    def prepare(self, reporter: Reporter) -> None:
        """Wait for fresh sensor data, as a literal walk does."""
        self._replayer.prepare(reporter)

    def pick(self, candidates: Sequence[Node], step: int) -> Verdict:
        """Judge literally while nothing is bound or moved, else each candidate under its plan."""
        self._bound = {}
        usable = self._replayer.usable(candidates)
        if not self.shift.by_element and (
                not self._plans or not any(c.id in self._plans for c in usable)):
            return self._replayer.pick(candidates, step)
        early = self._replayer.unusable(candidates, usable, step)
        if early is not None:
            return early
        hub = self._replayer.hub
        now, now_time = hub.capture(), hub.now()
        check = self._replayer.check
        passing: list[tuple[Node, float]] = []
        failures: list[CheckFailure] = []
        current = {**param_leaves(self._params), **sensor_elements(now)}
        leaves = getattr(self._plans, 'leaves', lambda node_id: None)
        for node in usable:
            plan = self._plans.get(node.id)
            bound = resolve(plan, step, node, self._params, now, learned=leaves(node.id),
                            current=current) if plan is not None else None
            if bound is not None and bound.problem:
                failures.append(_refused(bound))
                continue
            recorded = node.step.pre
            if recorded is None or not recorded.features or check is None:
                if self._replayer.allow_unchecked:
                    passing.append((node, 0.0))
                    self._keep(node, bound)
                continue
            expected = self.shift.expected(recorded, bound.sources if bound else None)
            assert expected is not None  # recorded is not None
            result = check.evaluate(expected, now, now_time=now_time)
            if result.passed:
                passing.append((node, max(result.score, bound.worst if bound else 0.0)))
                self._keep(node, bound)
            elif result.failures:
                failures.append(result.failures[0])
        if passing:
            return Verdict(tuple(passing))
        failure = min(failures, key=lambda f: f.score, default=None)
        if failure is None:
            return Verdict((), Miss(FailureKind.NO_CANDIDATE, f'nothing learned for step {step}'))
        return Verdict((), Miss(FailureKind.PRE_CHECK,
                                f'pre-check failed at step {step}: {_describe(failure)}',
                                failure))

    def _keep(self, node: Node, bound: Bound | None) -> None:
        if bound is not None:
            self._bound[node.id] = bound

    def execute(self, node: Node, step: int, cancel: CancelToken) -> CallOutcome:
        """Send the step with its bound fields set; then move the shift by what it did."""
        bound = self._bound.get(node.id)
        if bound is not None and bound.substitutions:
            self._on_substituted(step, bound.substitutions)
        values = bound.values if bound is not None else None
        out = self._replayer.send(node, cancel, values)
        if out.status.value == 'succeeded':
            advance(self.shift, node, self._tolerance, self._plans.get(node.id), bound)
        return out

    def post_check(self, node: Node, step: int, ended: float) -> Miss | None:
        """Judge the post-check against the recording moved by the shift."""
        return self._replayer.post_check(node, step, ended,
                                         expected=self.shift.expected(node.step.post))


def _refused(bound: Bound) -> CheckFailure:
    """Return the check failure of a candidate whose bindings cannot explain the world."""
    if math.isinf(bound.excess) or not bound.limit:
        return CheckFailure(bound.source, math.inf, 0.0, math.inf, bound.problem,
                            FailureKind.MISSING)
    return CheckFailure(bound.source, bound.excess, bound.limit, bound.excess / bound.limit,
                        bound.problem, FailureKind.OUT_OF_TOLERANCE)


def _describe(failure: CheckFailure) -> str:
    """Render a failure: a binding's own reason, else as the literal checks do."""
    if failure.sensor.startswith(('param:', 'sensor:')):
        return failure.reason
    from muscle_mem_ros.ros.replay import describe_failure  # replay imports this module
    return describe_failure(failure)
