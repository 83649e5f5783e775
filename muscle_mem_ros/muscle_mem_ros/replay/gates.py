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
  the whole task (``muscle-mem approve``, the ``~/approve`` service, ``muscle-mem
  import``), and each inferred binding on it was among what that approval covers.
  An approval covers what its approver could see (:func:`approve`): the task's
  trajectories then, or the one named, and their inferred bindings then, as
  (learned step, field, source). A trajectory learned later, or a binding inferred
  later (one that appears on an approved trajectory only once more recordings
  arrived), needs an approval of its own, and the gate's reason names it.
  An approval also records the declared bindings (the params file's) it saw on
  what it covers, as (learned step, field, source, max_shift): a trajectory whose
  declared bindings are no longer those an approval of it saw (one added, removed,
  given another source or ``max_shift`` in the params file) is held until it is
  approved again, and the reason says which binding changed.

:func:`gate_tree` is the one place that decides for a tree: ExecuteTask, the
Replay service and its dry run all ask it. Whatever the gate, a trajectory that stepped
back (its recent replays failed, :mod:`.booking`) is held until it earned trust again,
and a trajectory learned on another body (the view's ``foreign`` ones,
:mod:`.treeview`) is held apart: its steps are never candidates, and a miss that only
they would have served says so, naming both bodies ("learned on panda@3f2c, this robot
is ur5e@91ab"). That is no gate to earn: no shadow run or approval lets another body's
branch replay; only an owner's declaration that the bodies are compatible does.

What a gate guarantees: nothing the gate has not let through is sent to a
robot by the cache. What it does not: N agreeing runs are evidence in the
situations those runs saw, not in others (a binding that agreed for cubes
within 3 cm may still be wrong at 9 cm, within its ``max_shift``); an approval
is as good as the review behind it. Checks and ``max_shift`` still apply to
every trusted replay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
import datetime
from enum import Enum
from typing import TYPE_CHECKING

from .booking import held
from ..bindings.learning import Plans
from ..bindings.rules import Binding, DECLARED, INFERRED, Plan
from ..errors import ConfigError, StoreUnavailableError, UnknownTrajectoryError
from ..records import Agreement, Approval, Declaration, ReplayBook, TrajectoryInfo

if TYPE_CHECKING:  # pragma: no cover (types only)
    from .treeview import TreeView
    from ..store.base import Store

__all__ = ['approve', 'covered', 'declared_bindings', 'Gate', 'gate_tree', 'GateKind',
           'inferred_bindings', 'Trusted', 'trusted', 'unreviewed']


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
    :ivar reasons: Why each other trajectory this body replays is held back, by id.
    :ivar foreign: Why each trajectory of another body is kept apart, by id.
    """

    nodes: frozenset[int] | None
    reasons: Mapping[int, str]
    foreign: Mapping[int, str] = field(default_factory=dict)

    def reason(self) -> str:
        """Return the held-back trajectories' reasons in one line (the first three)."""
        items = sorted(self.reasons.items())
        text = '; '.join(why for _, why in items[:3])
        return text + (f' (+{len(items) - 3} more)' if len(items) > 3 else '')

    def held(self) -> str:
        """Return why the steps not let through do not replay: the gate's, then the bodies'."""
        bodies = '; '.join(sorted(set(self.foreign.values())))
        return '; '.join(t for t in (f'gate: {self.reason()}' if self.reasons else '',
                                     bodies) if t)


def trusted(gate: Gate, trajectories: Sequence[TrajectoryInfo], *, plans: Plans,
            agreement: tuple[Mapping[int, Agreement], Mapping[tuple[int, str], Agreement]],
            approvals: Sequence[Approval],
            books: Mapping[int, ReplayBook] | None = None) -> Trusted:
    """
    Return what ``gate`` lets replay among a tree's trajectories.

    :param gate: The gate.
    :param trajectories: The tree's trajectories.
    :param plans: Their plans (the inferred bindings a ``shadow:N`` gate counts).
    :param agreement: The task's shadow counts (:meth:`~..store.base.Store.agreement`).
    :param approvals: The task's approvals.
    :param books: How their replays ended (:meth:`~..store.base.Store.replay_books`): one
        that stepped back is held whatever the gate (:func:`.booking.held`).
    """
    by_trajectory, by_binding = agreement
    stepped = {info.id: why for info in trajectories if (why := held(
        (books or {}).get(info.id), agreed=by_trajectory.get(info.id, Agreement()).agreed,
        runs=gate.runs, approvals=approvals))}
    if not gate.required and not stepped:
        return Trusted(None, {})
    nodes: set[int] = set()
    reasons: dict[int, str] = {}
    for info in trajectories:
        if info.id in stepped:
            why = stepped[info.id]
        elif gate.kind is GateKind.APPROVAL:
            why = _approval_reason(info, plans, approvals)
        elif gate.kind is GateKind.SHADOW:
            why = _shadow_reason(gate.runs, info, plans, by_trajectory, by_binding)
        else:
            why = ''
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


def _stamp(at: float) -> str:
    """Return a wall time as local 'YYYY-MM-DD HH:MM' (the gate's reasons)."""
    return datetime.datetime.fromtimestamp(at).strftime('%Y-%m-%d %H:%M')


def _whose(approval: Approval) -> str:
    """Return "carol's approval of task fetch (2026-11-26 21:03)"."""
    what = (f'trajectory {approval.trajectory_id} of task {approval.task}'
            if approval.trajectory_id else f'task {approval.task}')
    return f"{approval.who}'s approval of {what} ({_stamp(approval.at)})"


def _approval_reason(info: TrajectoryInfo, plans: Plans, approvals: Sequence[Approval]) -> str:
    """Return why the approval gate holds a trajectory back ('': its approvals cover it all)."""
    covering = [a for a in approvals if a.covers_trajectory(info)]
    if not covering:
        whole = [a for a in approvals if a.trajectory_id == 0 and a.task == info.task]
        if whole:
            return (f'trajectory {info.id} was learned after {_whose(whole[-1])}; '
                    'approve it')
        return f'trajectory {info.id} is not approved (replay_requires: approval)'
    seen = {b for a in covering for b in a.bindings}
    for node_id, plan in _plans_along(info, plans):
        for b in plan.bindings:
            if b.origin == INFERRED and (node_id, b.field, b.source) not in seen:
                latest = covering[-1]
                if latest.covers is None:
                    return (f'the inferred binding {b.field} <- {b.source} of trajectory '
                            f'{info.id} is not covered by {_whose(latest)}, which predates '
                            'approvals listing their bindings; approve it again')
                return (f'the inferred binding {b.field} <- {b.source} of trajectory {info.id} '
                        f'was learned after {_whose(latest)}; approve it')
    return _declared_reason(info, plans, covering)


def _declared_reason(info: TrajectoryInfo, plans: Plans, covering: Sequence[Approval]) -> str:
    """
    Return why a trajectory's declared bindings are not what an approval of it saw ('': one is).

    Its declared bindings now, by (learned step, field), must equal those one covering
    approval saw on its steps. An approval from before approvals recorded them saw none.
    """
    steps = set(info.node_ids)
    now = {(n, b.field): (b.source, b.max_shift) for n, plan in _plans_along(info, plans)
           for b in plan.bindings if b.origin == DECLARED}

    def saw(approval: Approval) -> dict[tuple[int, str], tuple[str, float | None]]:
        return {(n, f): (s, m) for n, f, s, m in approval.declared or () if n in steps}
    if any(saw(a) == now for a in covering):
        return ''
    latest = covering[-1]
    then = saw(latest)
    key = min(k for k in now.keys() | then.keys() if now.get(k) != then.get(k))
    field, where = key[1], f'learned step {key[0]} of trajectory {info.id}'
    if latest.declared is None:
        return (f'the declared binding {field} <- {_shown(now[key])} on {where} is not '
                f'covered by {_whose(latest)}, which predates approvals listing declared '
                'bindings; approve it again')
    if key not in then:  # declared since, or the approval did not see the params file
        return (f'the declared binding {field} <- {_shown(now[key])} on {where} is not among '
                f'those {_whose(latest)} saw; approve it again (muscle-mem approve: with the '
                "node's params file, --params)")
    if key not in now:
        return (f'the declared binding {field} <- {_shown(then[key])} on {where} was removed '
                f'after {_whose(latest)}; approve it again')
    return (f'the declared binding of {field} on {where} changed after {_whose(latest)} '
            f'({_shown(then[key])}, now {_shown(now[key])}); approve it again')


def _shown(binding: tuple[str, float | None]) -> str:
    """Return "sensor:tag[0] (max_shift 0.1)"."""
    source, max_shift = binding
    return f'{source} (max_shift {max_shift:g})' if max_shift is not None else source


def _plans_along(info: TrajectoryInfo, plans: Mapping[int, Plan]) -> list[tuple[int, Plan]]:
    """Return (learned step id, plan) of the steps of a trajectory that have a plan."""
    return [(node_id, plan) for node_id in info.node_ids
            if (plan := plans.get(node_id)) is not None]


def inferred_bindings(trajectories: Sequence[TrajectoryInfo],
                      plans: Callable[[str], Mapping[int, Plan]]) -> list[tuple[int, str, str]]:
    """
    Return the inferred bindings on ``trajectories`` now: (learned step id, field, source).

    :param trajectories: The trajectories (of one task).
    :param plans: A tree's plans by its variant (:meth:`~.treeview.Trees.plans`).
    """
    return sorted({(n, b.field, b.source) for n, b in _bindings_on(trajectories, plans)
                   if b.origin == INFERRED})


def declared_bindings(trajectories: Sequence[TrajectoryInfo],
                      plans: Callable[[str], Mapping[int, Plan]]) -> list[Declaration]:
    """
    Return the declared bindings on ``trajectories`` now: (step id, field, source, max_shift).

    :param trajectories: The trajectories (of one task).
    :param plans: A tree's plans by its variant (:meth:`~.treeview.Trees.plans`).
    """
    return sorted({(n, b.field, b.source, b.max_shift)
                   for n, b in _bindings_on(trajectories, plans) if b.origin == DECLARED},
                  key=lambda d: (d[0], d[1], d[2], -1.0 if d[3] is None else d[3]))


def _bindings_on(trajectories: Sequence[TrajectoryInfo],
                 plans: Callable[[str], Mapping[int, Plan]]) -> Iterator[tuple[int, Binding]]:
    """Yield (learned step id, binding) of every binding on the steps of ``trajectories``."""
    by_variant: dict[str, Mapping[int, Plan]] = {}
    for info in trajectories:
        if info.variant not in by_variant:
            by_variant[info.variant] = plans(info.variant)
        for node_id, plan in _plans_along(info, by_variant[info.variant]):
            for b in plan.bindings:
                yield node_id, b


def approve(store: Store, *, task: str, trajectory_id: int = 0, who: str,
            plans: Callable[[str], Mapping[int, Plan]]) -> Approval:
    """
    Approve what the approver can see now: the one way approvals are made.

    A whole-task approval (``trajectory_id`` 0) covers the task's trajectories now; one
    of a trajectory covers that trajectory; either covers the inferred bindings on them
    now, and records the declared ones it saw on them, as ``plans`` shows them (the
    node's learned plans, the CLI's read with the node's params file, or the plans of an
    imported document). What is learned later is not covered, nor a change to the
    declared bindings (:func:`trusted` holds it back and says so).

    :param store: The store (the approval is stored with what it covers).
    :param task: The task.
    :param trajectory_id: The trajectory; 0: the whole task.
    :param who: Who approves.
    :param plans: A tree's plans by its variant.
    :raises UnknownTrajectoryError: ``trajectory_id`` is not a trajectory of ``task``.
    """
    found = store.trajectories(task=task)
    if trajectory_id:
        found = [t for t in found if t.id == trajectory_id]
        if not found:
            raise UnknownTrajectoryError(f'task {task!r} has no trajectory {trajectory_id}')
    return store.approve(task=task, trajectory_id=trajectory_id, who=who,
                         covers=[t.id for t in found],
                         bindings=inferred_bindings(found, plans),
                         declared=declared_bindings(found, plans))


def gate_tree(gate: Gate, store: Store, view: TreeView) -> Trusted:
    """
    Return what ``gate`` lets replay in ``view``: the one place every replay path asks.

    ExecuteTask's walk, the Replay service and its dry run call this (through
    :meth:`muscle_mem_ros.ros.execution.replay.Replayer.trusted`); with ``none`` it reads only
    the task's replay books (a trajectory that stepped back is held whatever the gate).
    The view's ``foreign`` trajectories (another body's) are kept apart, whatever the gate.
    """
    found = _gated(gate, store, view)
    if not view.foreign or view.kin is None:
        return found
    mine = frozenset(i for t in view.trajectories for i in t.node_ids)
    return Trusted(mine if found.nodes is None else found.nodes & mine, found.reasons,
                   {t.id: view.kin.reason(t.body) for t in view.foreign})


def _gated(gate: Gate, store: Store, view: TreeView) -> Trusted:
    """Return what ``gate`` lets replay among the trajectories this body replays."""
    if not view.trajectories:
        return Trusted(None, {})
    try:
        books = store.replay_books(task=view.task)
    except StoreUnavailableError:  # a fleet store away: what it booked cannot be read; the
        books = {}  # gate is what it was before books existed, until the store is back
    if not gate.required and not any(b.stepped_back for b in books.values()):
        return Trusted(None, {})
    return trusted(gate, view.trajectories, plans=view.plans,
                   agreement=store.agreement(task=view.task),
                   approvals=store.approvals(task=view.task), books=books)


def covered(approval: Approval) -> str:
    """Return what an approval covers, in one line ("covers trajectories 1, 2 and ...")."""
    ids = approval.covers if approval.covers is not None else ()
    shown = ', '.join(map(str, ids[:10])) + (f' (+{len(ids) - 10} more)' if len(ids) > 10 else '')
    what = (f'trajectory {shown}' if len(ids) == 1 else
            f'trajectories {shown}' if ids else 'no trajectory')
    bound = approval.bindings
    declared = len(approval.declared or ())
    seen = (f'; saw {declared} declared binding{"s" if declared > 1 else ""} (a change to '
            'them holds it)' if declared else '')
    if not bound:
        return f'covers {what} and no inferred binding{seen}'
    listed = '; '.join(f'{f} <- {s} (learned step {n})' for n, f, s in bound[:3])
    more = f' (+{len(bound) - 3} more)' if len(bound) > 3 else ''
    return (f'covers {what} and {len(bound)} inferred binding{"s" if len(bound) > 1 else ""}: '
            f'{listed}{more}{seen}')


def unreviewed(gate: Gate, reviewed_by: str) -> str:
    """
    Return why ``run-bt`` may not run a document under ``gate`` ('' when it may).

    run-bt has no store: no approval or shadow count to ask. Under a required gate it
    runs a file only when the operator states who reviewed it (``--reviewed-by``): the
    file as it is, every goal in it, is then what that person let through.
    """
    if not gate.required or reviewed_by.strip():
        return ''
    return (f'replay_requires is {gate} in the params file, and run-bt sends the goals of '
            'the file with no store to hold back what was not let through: review the file, '
            'then run it with --reviewed-by WHO')
