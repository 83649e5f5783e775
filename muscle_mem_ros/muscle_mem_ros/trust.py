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
Gates: what a learned trajectory must have earned before the cache replays it.

``replay_requires`` says which:

* ``none`` (the default): every learned trajectory replays when its checks pass.
* ``shadow:N``: a trajectory replays after N shadow runs whose predictions
  agreed with the agent all the way along it, and each inferred binding on it
  after N agreeing predictions of its own (a binding learned after the
  trajectory agreed has not been seen at work yet). Until then the task runs in
  shadow: the agent moves the robot and the cache's guesses are counted.
* ``approval``: a trajectory replays once an operator approved it, or approved
  the whole task (``muscle-mem approve``, the ``~/approve`` service).

What a gate guarantees: nothing the gate has not let through is sent to a
robot by the cache. What it does not: N agreeing runs are evidence in the
situations those runs saw, not in others (a binding that agreed for cubes
within 3 cm may still be wrong at 9 cm, within its ``max_shift``); an approval
is as good as the review behind it. Checks and ``max_shift`` still apply to
every trusted replay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from .bindings import INFERRED
from .errors import ConfigError
from .learning import Plans
from .records import Agreement, Approval, TrajectoryInfo

__all__ = ['Gate', 'GateKind', 'Trusted', 'trusted']


class GateKind(Enum):
    """What ``replay_requires`` asks for."""

    NONE = 'none'
    SHADOW = 'shadow'
    APPROVAL = 'approval'


@dataclass(frozen=True)
class Gate:
    """
    A parsed ``replay_requires``.

    :ivar kind: The kind of gate.
    :ivar runs: Agreeing shadow runs a trajectory (and binding) needs (``shadow:N``).
    """

    kind: GateKind = GateKind.NONE
    runs: int = 0

    @classmethod
    def parse(cls, text: str, *, parameter: str = 'replay_requires') -> Gate:
        """
        Parse ``none``, ``shadow:N`` (N >= 1) or ``approval``.

        :raises ConfigError: anything else, naming ``parameter``.
        """
        value = str(text).strip().lower()
        if value in ('', 'none'):
            return cls()
        if value == 'approval':
            return cls(GateKind.APPROVAL)
        kind, _, count = value.partition(':')
        if kind == 'shadow' and count.strip().isdigit() and int(count) >= 1:
            return cls(GateKind.SHADOW, int(count))
        raise ConfigError(f'{parameter}: {text!r} is not none, shadow:N (N >= 1) or approval')

    @property
    def required(self) -> bool:
        """Return True unless the gate is ``none``: something must be earned first."""
        return self.kind is not GateKind.NONE

    def __str__(self) -> str:
        return f'shadow:{self.runs}' if self.kind is GateKind.SHADOW else self.kind.value


@dataclass(frozen=True)
class Trusted:
    """
    What a gate lets replay in one tree.

    :ivar nodes: The learned steps on trusted trajectories (None: every one).
    :ivar reasons: Why each other trajectory is held back, by id.
    """

    nodes: frozenset[int] | None
    reasons: Mapping[int, str]

    def reason(self) -> str:
        """Return the held-back trajectories' reasons in one line (the first three)."""
        items = sorted(self.reasons.items())
        text = '; '.join(why for _, why in items[:3])
        return text + (f' (+{len(items) - 3} more)' if len(items) > 3 else '')


def trusted(gate: Gate, trajectories: Sequence[TrajectoryInfo], *, plans: Plans,
            agreement: tuple[Mapping[int, Agreement], Mapping[tuple[int, str], Agreement]],
            approvals: Sequence[Approval]) -> Trusted:
    """
    Return what ``gate`` lets replay among a tree's trajectories.

    :param gate: The gate.
    :param trajectories: The tree's trajectories.
    :param plans: Their plans (the inferred bindings a ``shadow:N`` gate counts).
    :param agreement: The task's shadow counts (:meth:`~.store.base.Store.agreement`).
    :param approvals: The task's approvals.
    """
    if not gate.required:
        return Trusted(None, {})
    nodes: set[int] = set()
    reasons: dict[int, str] = {}
    whole = any(a.trajectory_id == 0 for a in approvals)
    approved = {a.trajectory_id for a in approvals}
    by_trajectory, by_binding = agreement
    for info in trajectories:
        if gate.kind is GateKind.APPROVAL:
            why = '' if whole or info.id in approved else \
                f'trajectory {info.id} is not approved (replay_requires: approval)'
        else:
            why = _shadow_reason(gate.runs, info, plans, by_trajectory, by_binding)
        if why:
            reasons[info.id] = why
        else:
            nodes.update(info.node_ids)
    return Trusted(frozenset(nodes), reasons)


def _shadow_reason(runs: int, info: TrajectoryInfo, plans: Plans,
                   by_trajectory: Mapping[int, Agreement],
                   by_binding: Mapping[tuple[int, str], Agreement]) -> str:
    agreed = by_trajectory.get(info.id, Agreement()).agreed
    if agreed < runs:
        more = runs - agreed
        return (f'trajectory {info.id} needs {more} more agreeing shadow '
                f'run{"s" if more > 1 else ""}')
    for node_id in info.node_ids:
        plan = plans.get(node_id)
        for b in plan.bindings if plan is not None else ():
            got = by_binding.get((node_id, b.field), Agreement()).agreed
            if b.origin == INFERRED and got < runs:
                more = runs - got
                return (f'the inferred binding {b.field} <- {b.source} of trajectory {info.id} '
                        f'needs {more} more agreeing shadow run{"s" if more > 1 else ""}')
    return ''
