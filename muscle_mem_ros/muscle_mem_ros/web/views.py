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
What each page shows, as plain data, read from the store the way the CLI reads it.

The page reuses the command line's readers (:mod:`..cli.inventory`): the task list is
the store's task counters (one query; no trajectory's steps are read, so the first page
is fast however large the store); a task's page is what ``muscle-mem tree`` and ``trust``
print (the tree, the trust table, the inferred bindings' counts); a trajectory's page is
what ``show`` prints with its trust row, the approvals that cover it and what they
covered, the bindings on its steps with their sources, each step's trace and its camera
thumbnails. What an approval made from the page would cover is :func:`.approving.prospect`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .approving import prospect
from ..body import shown
from ..cli.inventory import (
    binding_trust_rows, cli_trees, covering_approval, goal_summary, task_tree, trust_rows)
from ..cli.paramsfile import BindingSettings
from ..errors import UnknownTrajectoryError
from ..records import Approval, FailedView, Node, TaskStats, TrajectoryInfo
from ..replay.gates import covered
from ..store import Store

__all__ = ['PAGE_SIZE', 'Settings', 'task_list', 'task_view', 'trajectory_view']

PAGE_SIZE = 50
"""Trajectories listed per page of a task's trust table."""


@dataclass(frozen=True)
class Settings:
    """
    What ``serve`` was told about the node: its params file's binding settings.

    :ivar bindings: The params file's settings (None: not given; parameter bindings only,
        no tolerances, so no tube).
    """

    bindings: BindingSettings | None = None

    @property
    def approving(self) -> BindingSettings:
        """Return the settings approvals are computed with (the CLI's default without)."""
        return self.bindings or BindingSettings()


def task_list(store: Store) -> list[TaskStats]:
    """Return the store's tasks with their counters (one read: the first paint's data)."""
    return [t for t in store.tasks() if t.trajectory_count]


def _approval_data(approval: Approval) -> dict[str, Any]:
    return {'who': approval.who, 'at': approval.at, 'trajectory': approval.trajectory_id,
            'covers': covered(approval)}


def task_view(store: Store, settings: Settings, task: str, page: int = 0) -> dict[str, Any]:
    """
    Return a task's page: its trees, one page of its trust table, bindings, approvals.

    :raises UnknownTrajectoryError: unknown task.
    """
    trees = task_tree(store, task, settings.bindings)
    rows = trust_rows(store, task, settings.bindings)
    sources = store.sources(task=task)
    pages = max(1, -(-len(rows) // PAGE_SIZE))
    page = min(max(page, 0), pages - 1)
    return {
        'task': task, 'trees': trees,
        'rows': [{**r, 'source': sources.get(r['trajectory'], '')}
                 for r in rows[page * PAGE_SIZE:(page + 1) * PAGE_SIZE]],
        'page': page, 'pages': pages, 'count': len(rows),
        'bindings': binding_trust_rows(store, task, settings.bindings),
        'approvals': [_approval_data(a) for a in store.approvals(task=task)],
        'prospect': prospect(store, settings.approving, task),
        'approved': any(a.trajectory_id == 0 for a in store.approvals(task=task)),
    }


def _bindings(store: Store, settings: Settings, info: TrajectoryInfo) -> dict[int, list[Any]]:
    """Return the bindings on a trajectory's steps by learned step, as approvals see them."""
    plans = cli_trees(store, settings.approving).plans(info.task, info.variant)
    return {node_id: [b.to_json() for b in plan.bindings]
            for node_id in info.node_ids if (plan := plans.get(node_id)) is not None
            and plan.bindings}


def _step_data(index: int, node: Node, bound: list[Any],
               failed: list[FailedView]) -> dict[str, Any]:
    step = node.step
    images = {phase: dict(sorted(snap.images.items()))
              for phase, snap in (('pre', step.pre), ('post', step.post))
              if snap is not None and snap.images}
    return {'step': index, 'node': node.id, 'tool': step.tool, 'kind': step.kind.value,
            'type': step.type_name, 'status': step.status.value, 'duration': step.duration,
            'goal': goal_summary(node, 200), 'trace': step.trace, 'images': images,
            'failed': failed, 'bindings': bound}


def trajectory_view(store: Store, settings: Settings, trajectory_id: int) -> dict[str, Any]:
    """
    Return a trajectory's page: trust, approvals covering it, bindings, steps with traces.

    :raises UnknownTrajectoryError: no such trajectory.
    """
    info = store.trajectory(trajectory_id)
    row = next((r for r in trust_rows(store, info.task, settings.bindings)
                if r['trajectory'] == info.id), None)
    if row is None:
        raise UnknownTrajectoryError(f'no trajectory {trajectory_id}')
    approvals = store.approvals(task=info.task)
    covering = [a for a in approvals if a.covers_trajectory(info)]
    own = covering_approval(info, approvals)
    failed: dict[int, list[FailedView]] = {}
    for view in store.failed_views(task=info.task):
        failed.setdefault(view.node_id, []).append(view)
    bound = _bindings(store, settings, info)
    nodes = store.nodes(list(info.node_ids))
    return {
        'info': info, 'body': shown(info.body), 'row': row,
        'source': store.sources(task=info.task).get(info.id, ''),
        'covering': [_approval_data(a) for a in covering],
        'own_approval': bool(own and own.trajectory_id == info.id),
        'steps': [_step_data(i, n, bound.get(n.id, []), failed.get(n.id, []))
                  for i, n in enumerate(nodes)],
        'prospect': prospect(store, settings.approving, info.task, info.id),
    }
