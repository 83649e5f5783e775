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
Filing a finished recording: the same step again, or in a moved world, is not a new branch.

When the agent, handed a task the cache could not replay, does a step that a
learned step explains (the same tool and goal, numbers within the tool's
``agreement``, the bound fields what the bindings compute from this recording's own
snapshot and parameters, and its pre snapshot passing that step's check), the
recording follows that step instead of starting a sibling of it; only what is
really new becomes a branch. A run that repeats a branch with the sensor noise of
a real robot (goals a millimetre apart) folds into it: the branch counts one more
success, and the tree grows with the situations the robot meets, not with its runs.
A new tree whose goals use parameters is filed under a variant with those parameters
bound (:mod:`.variants`), so runs with other values find it: once a second value showed
the goals following the parameter (:func:`witnessed`), or at once when the binding is
declared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .judge import advance, Bound, resolve, SensorSenses, Shift
from .learning import bound_params, follows_param, param_fields
from .rules import bindable_leaves, Declared, goal_leaves, is_number, param_leaves, Plan
from .turns import AXES, quaternion_of
from .variants import Variant
from ..checks.poses import relative_turns
from ..records import Node, Snapshot, Step

__all__ = ['explains', 'file_steps', 'Others', 'witnessed']

Others = Callable[[], Iterable[tuple[Mapping[str, Any], Sequence[Step]]]]
"""The task's other literal trees: each one's parameters and one recording's steps."""


def explains(plan: Plan, node: Node, step: Step, params: Mapping[str, Any], check: Any,
             tolerance: Callable[[str], float | None], shift: Shift | None = None,
             agreement: float = 0.0) -> Bound | None:
    """
    Return how ``step`` is ``node`` under its bindings (the same branch), or None.

    Same tool and type; every unbound goal leaf equal (a number within ``agreement``,
    the tool's: what a shadow run calls the same goal); every bound leaf what the
    binding computes from the step's own pre snapshot and parameters (within the
    source's tolerance); and the pre snapshot passes ``node``'s check, recorded
    values moved by ``shift`` (the earlier steps of the same filing) and bound
    sources set to the step's (``check`` is a ToleranceCheck, or None: no sensors).
    """
    if (step.tool, step.kind, step.type_name) != (node.step.tool, node.step.kind,
                                                  node.step.type_name):
        return None
    goal, recorded = goal_leaves(step), goal_leaves(node.step)
    bound = {b.field for b in plan.bindings} | {
        f'{b.field}.{axis}' for b in plan.bindings if b.turn is not None for axis in AXES}
    if goal.keys() != recorded.keys() or any(
            not _agrees(goal[k], recorded[k], agreement) for k in goal if k not in bound):
        return None
    if not goal and step.payload != node.step.payload:
        return None
    resolved = resolve(plan, 0, node, params, step.pre if step.pre is not None else Snapshot())
    if resolved.problem:
        return None
    for b in plan.bindings:
        if b.turn is not None:  # the goal's rotation as the binding turns it, within tolerance
            sent = quaternion_of(goal, b.field)
            want = quaternion_of({**recorded, **resolved.values}, b.field)
            limit = 2.0 * (tolerance(f'{b.source}[3]') or 0.0)  # (an element's is half)
            if sent is None or want is None or not float(
                    relative_turns(np.asarray(sent), np.asarray(want))) <= limit + 1e-9:
                return None
            continue
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
                 resolved.worst, turns=resolved.turns)


def _agrees(value: Any, recorded: Any, agreement: float) -> bool:
    """Return True for equal leaves, or numbers of the same kind within ``agreement``."""
    if value == recorded:
        return True
    return (agreement > 0 and is_number(value) and is_number(recorded)
            and isinstance(value, int) == isinstance(recorded, int)
            and abs(value - recorded) <= agreement)


def witnessed(steps: Sequence[Step], params: Mapping[str, Any], others: Others) -> set[str]:
    """
    Return the parameter leaves inference may bind ``steps`` to: those a second value showed.

    One equality is not evidence: a goal's 1.0 equals a parameter ``bin: 1`` by chance
    as often as by design, and binding it would replay bin 1's goals for bin 2. A goal
    field equal to a parameter binds it (the tree is filed with that leaf bound, and
    runs with other values share it) only when another tree of the task, recorded with
    the same other parameters and a different value of that one, has a step of the
    same tool whose field equalled its value too: the field followed the parameter.

    :param steps: A new recording.
    :param params: Its parameters.
    :param others: The task's literal trees (their parameters, one recording's steps),
        read lazily: the search stops at the first witness of each leaf.
    """
    fields = param_fields(steps, params)
    if not fields:
        return set()
    mine = param_leaves(params)
    found: set[str] = set()
    for their_params, their_steps in others():
        theirs = param_leaves(their_params)
        read = [(step.tool, bindable_leaves(step)) for step in their_steps]
        for source in fields.keys() - found:
            value = theirs.get(source)
            if value is None or value == mine[source] or \
                    not Variant.bound(params, {source}).fits(their_params):
                continue
            if any(follows_param(tool, leaves, f, value) for f in fields[source]
                   for tool, leaves in read):
                found.add(source)
        if found == fields.keys():
            break
    return found


def file_steps(
    *, variant: str, parent: int | None, steps: Sequence[Step], params: Mapping[str, Any],
    plans: Callable[[str], Mapping[int, Plan]],
    children: Callable[[str, int | None], Sequence[Node]],
    check: Any, tolerance: Callable[[str], float | None], declared: Sequence[Declared] = (),
    infer: bool = True, others: Others = lambda: (),
    agreement: Callable[[str], float] = lambda tool: 0.0,
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
    :param others: The task's other literal trees, one recording each (:func:`witnessed`).
    :param agreement: A tool's agreement: how far its goal numbers may differ and still be
        the learned step's (0: only equal ones).
    """
    if parent is None and (infer or declared) and not Variant.parse(variant).has_bound:
        by_param = bound_params(steps, params, declared=declared, infer=False)
        if infer:
            by_param |= witnessed(steps, params, others)
        if by_param:
            variant = Variant.bound(params, by_param).text
    tree = plans(variant)
    senses = SensorSenses(tolerance)
    at, i, shift = parent, 0, Shift()
    while i < len(steps):
        found = None
        for child in children(variant, at):
            plan = tree.get(child.id, Plan())
            bound = explains(plan, child, steps[i], params, check, tolerance, shift,
                             agreement(steps[i].tool))
            if bound is not None:
                found = child
                advance(shift, child, plan=plan, bound=bound, senses=senses)
                break
        if found is None:
            break
        at, i = found.id, i + 1
    return variant, at, list(steps[i:])
