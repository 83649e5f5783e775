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
Approving from the page: the CLI's gate, covering exactly what the page showed.

An approval covers what its approver could see (:func:`..replay.gates.approve`). On the
page that is what the page rendered: the trajectories, the inferred bindings on them and
the declared bindings it saw, as :func:`prospect` computes them the way ``approve()``
will. The form carries their fingerprint; when the form comes back :func:`approve_shown`
computes them again and refuses when they differ (a trajectory learned, a binding
inferred, one forgotten since the page was drawn), so nobody approves what they did not
see. Only then is :func:`..replay.gates.approve` called, with the same plans as
``muscle-mem approve`` (:func:`..cli.inventory.cli_trees` under the node's params file
when ``serve`` was given it), and a name is required.

What stays open: between the comparison and the store's write a learner may commit in
the same instant (milliseconds); ``approve()`` then covers that trajectory too, as the
CLI would. The answer names what was covered, and the page shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
import hashlib
import json

from ..cli.inventory import cli_trees
from ..cli.paramsfile import BindingSettings
from ..errors import MuscleMemError, UnknownTrajectoryError
from ..records import Approval, Declaration
from ..replay.gates import approve, covered, declared_bindings, inferred_bindings
from ..store import Store

__all__ = ['approve_shown', 'Prospect', 'prospect', 'revoke_shown', 'StaleApprovalError']


class StaleApprovalError(MuscleMemError):
    """The store changed since the page was shown: an approval would cover what nobody saw."""


@dataclass(frozen=True)
class Prospect:
    """
    What an approval made now would cover: what the page shows beside its button.

    :ivar task: The task.
    :ivar trajectory_id: The trajectory (0: the whole task).
    :ivar covers: The trajectory ids.
    :ivar bindings: The inferred bindings: (learned step, field, source).
    :ivar declared: The declared bindings seen: (learned step, field, source, max_shift).
    """

    task: str
    trajectory_id: int
    covers: tuple[int, ...]
    bindings: tuple[tuple[int, str, str], ...]
    declared: tuple[Declaration, ...]

    @property
    def fingerprint(self) -> str:
        """Return a digest of what it covers: the page sends it back with the form."""
        data = [self.task, self.trajectory_id, list(self.covers),
                [list(b) for b in self.bindings], [list(d) for d in self.declared]]
        return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:32]

    def text(self) -> str:
        """Return "covers trajectories 1, 2 and no inferred binding" (the CLI's words)."""
        return covered(Approval(task=self.task, trajectory_id=self.trajectory_id, who='',
                                at=0.0, covers=self.covers, bindings=self.bindings,
                                declared=self.declared))


def prospect(store: Store, settings: BindingSettings, task: str,
             trajectory_id: int = 0) -> Prospect:
    """
    Return what ``approve()`` would cover now for ``task`` (or one of its trajectories).

    :raises UnknownTrajectoryError: the task has no such trajectory (or none at all).
    """
    found = store.trajectories(task=task)
    if trajectory_id:
        found = [t for t in found if t.id == trajectory_id]
    if not found:
        raise UnknownTrajectoryError(f'task {task!r} has no trajectory {trajectory_id}'
                                     if trajectory_id else f'unknown task {task!r}')
    plans = partial(cli_trees(store, settings).plans, task)
    return Prospect(task=task, trajectory_id=trajectory_id,
                    covers=tuple(t.id for t in found),
                    bindings=tuple(inferred_bindings(found, plans)),
                    declared=tuple(declared_bindings(found, plans)))


def approve_shown(store: Store, settings: BindingSettings, *, task: str, trajectory_id: int,
                  who: str, shown: str) -> Approval:
    """
    Approve what the page showed, through the CLI's gate, or refuse.

    :param store: The store, open for writing.
    :param settings: The node's binding settings (``serve --params``), as the CLI's.
    :param task: The task.
    :param trajectory_id: The trajectory (0: the whole task).
    :param who: Who approves (a person's name; required).
    :param shown: The fingerprint of the :class:`Prospect` the page showed.
    :raises ValueError: no name.
    :raises StaleApprovalError: the store changed since the page was shown.
    :raises UnknownTrajectoryError: no such task or trajectory (any more).
    """
    name = ' '.join(who.split())
    if not name:
        raise ValueError('an approval needs the name of the person who approves: fill in '
                         '"your name"; nothing was approved')
    now = prospect(store, settings, task, trajectory_id)
    if now.fingerprint != shown:
        raise StaleApprovalError(
            f'the store changed since this page was shown (now it would cover: {now.text()}); '
            'nothing was approved: reload the page, review it, and approve again')
    return approve(store, task=task, trajectory_id=trajectory_id, who=name,
                   plans=partial(cli_trees(store, settings).plans, task))


def revoke_shown(store: Store, *, task: str, trajectory_id: int) -> str:
    """
    Withdraw an approval as ``muscle-mem revoke`` does; return what was revoked, in words.

    :raises MuscleMemError: there was no such approval.
    """
    what = f'trajectory {trajectory_id} of task {task!r}' if trajectory_id else f'task {task!r}'
    if not store.revoke(task=task, trajectory_id=trajectory_id):
        raise MuscleMemError(f'{what} was not approved')
    return f'revoked the approval of {what}'
