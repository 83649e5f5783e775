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
Filing a finished recording by its bindings: the same step in a moved world is not a new branch.

When the agent, handed a task the cache could not replay, does a step that a
learned step's bindings explain (the same tool and goal, the bound fields what
the bindings compute from this recording's own snapshot and parameters), the
recording follows that step instead of starting a sibling of it; only what is
really new becomes a branch. A new tree whose goals use parameters is filed
under a variant with those parameters bound (:mod:`.variants`), so runs with
other values find it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .bindings import Declared, goal_leaves, is_number, Plan
from .learning import bound_params
from .records import Node, Snapshot, Step
from .retarget import advance, Bound, resolve, SensorSenses, Shift
from .variants import Variant

__all__ = ['explains', 'file_steps']


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
        value, wanted = goal[b.field], resolved.values.get(b.field, recorded[b.field])
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


def file_steps(
    *, variant: str, parent: int | None, steps: Sequence[Step], params: Mapping[str, Any],
    plans: Callable[[str], Mapping[int, Plan]],
    children: Callable[[str, int | None], Sequence[Node]],
    check: Any, tolerance: Callable[[str], float | None], declared: Sequence[Declared] = (),
    infer: bool = True,
) -> tuple[str, int | None, list[Step]]:
    """
    Return where a finished recording goes: (variant, parent node, steps still to store).

    :param variant: The tree the run used.
    :param parent: The node its recording continues (None: a new trajectory).
    :param steps: What the agent did.
    :param params: The run's parameters.
    :param plans: The plans of a tree (by variant).
    :param children: The learned children of a node of a tree (by variant and parent).
    :param check: The sensors' ToleranceCheck, or None.
    :param tolerance: Sensor element tolerances.
    :param declared: Bindings from the params file.
    :param infer: Bindings are inferred.
    """
    if parent is None and (infer or declared) and not Variant.parse(variant).has_bound:
        by_param = bound_params(steps, params, declared=declared, infer=infer)
        if by_param:
            variant = Variant.bound(params, by_param).text
    tree = plans(variant)
    senses = SensorSenses(tolerance)
    at, i, shift = parent, 0, Shift()
    while tree and i < len(steps):
        found = None
        for child in children(variant, at):
            plan = tree.get(child.id, Plan())
            bound = explains(plan, child, steps[i], params, check, tolerance, shift)
            if bound is not None:
                found = child
                advance(shift, child, plan=plan, bound=bound, senses=senses)
                break
        if found is None:
            break
        at, i = found.id, i + 1
    return variant, at, list(steps[i:])
