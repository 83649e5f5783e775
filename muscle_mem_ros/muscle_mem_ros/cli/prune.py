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
``muscle-mem prune``: what a robot no longer does leaves the store.

A cache that runs for months keeps every branch it ever learned, including those
of situations that never come back. ``prune STORE [TASK]`` removes trajectories
not used (recorded or replayed to the end) for ``--unused-for DAYS``, or all but
the ``--keep N`` most recently used of each task. It shows what would go and
asks (``--yes``: do not ask; with no terminal to ask on it refuses without
``--yes``); an approved trajectory is never removed without the list and the
question saying so. Removal is the store's ``forget`` of each trajectory, as
``muscle-mem forget`` does: a node with the tree open sees it change (SQLite
through its data version, PostgreSQL through its notifications), and a fleet
store's robots all do. A step shared with a trajectory that stays stays.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .inventory import covering_approval, open_cli_store
from .output import Output, when
from ..errors import MuscleMemError
from ..records import Approval, TrajectoryInfo
from ..store import Store

__all__ = ['add_parser', 'run', 'select']

DAY = 86400.0


def select(store: Store, *, task: str | None, unused_for: float | None = None,
           keep: int | None = None,
           now: float | None = None) -> list[tuple[TrajectoryInfo, Approval | None]]:
    """
    Return the trajectories a prune would remove, each with the approval that covers it.

    :param store: The store.
    :param task: Only this task (None: every task).
    :param unused_for: Days: those last used longer ago.
    :param keep: Keep the most recently used ``keep`` of each task (then the most
        replayed, then the newest), remove the rest.
    :param now: Wall time (default: now).
    :raises MuscleMemError: Neither or both of ``unused_for`` and ``keep``, or a bad value.
    """
    if (unused_for is None) == (keep is None):
        raise MuscleMemError('prune: give --unused-for DAYS or --keep N (one of them)')
    if (unused_for is not None and not unused_for > 0) or (keep is not None and keep < 0):
        raise MuscleMemError('prune: --unused-for must be > 0 days and --keep >= 0')
    now = time.time() if now is None else now
    found = store.trajectories(task=task)
    if task is not None and not found:
        raise MuscleMemError(f'prune: no trajectories of task {task!r}')
    if unused_for is not None:
        gone = [t for t in found if t.last_used < now - unused_for * DAY]
    else:
        gone = []
        for name in sorted({t.task for t in found}):
            mine = sorted((t for t in found if t.task == name),
                          key=lambda t: (t.last_used, t.replay_count, t.id), reverse=True)
            gone += mine[keep:]
    approvals = store.approvals(task=task)
    return [(t, covering_approval(t, [a for a in approvals if a.task == t.task]))
            for t in sorted(gone, key=lambda t: (t.task, t.id))]


def add_parser(cmd: argparse.ArgumentParser) -> None:
    """Add the prune options to its subparser."""
    how = cmd.add_mutually_exclusive_group(required=True)
    how.add_argument('--unused-for', type=float, metavar='DAYS',
                     help='remove trajectories not recorded or replayed for DAYS days')
    how.add_argument('--keep', type=int, metavar='N',
                     help='keep the N most recently used trajectories of each task')
    cmd.add_argument('--yes', action='store_true', help='do not ask for confirmation')
    cmd.set_defaults(run=run)


def run(args: argparse.Namespace, out: Output) -> int:
    """Show what would go, ask, remove; print what went."""
    with open_cli_store(args.store) as store:
        gone = select(store, task=args.task, unused_for=args.unused_for, keep=args.keep)
    approved = [t.id for t, a in gone if a is not None]
    rows: list[dict[str, Any]] = [
        {'task': t.task, 'trajectory': t.id, 'params': t.params_json, 'last_used': t.last_used,
         'replays': t.replay_count, 'approved_by': a.who if a is not None else ''}
        for t, a in gone]
    if not gone:
        if out.json_mode:
            out.json({'removed': 0, 'trajectories': []})
        else:
            out.print('nothing to prune')
        return 0
    if not out.json_mode:
        out.table(('task', 'trajectory', 'params', 'last used', 'replays', 'approved by'),
                  ([r['task'], r['trajectory'], r['params'], when(r['last_used']), r['replays'],
                    r['approved_by'] or '-'] for r in rows),
                  title='would be removed', right=('trajectory', 'replays'))
    what = f'{len(gone)} trajectories' + (
        f", {len(approved)} of them APPROVED ({', '.join(map(str, approved))})"
        if approved else '')
    if not args.yes:
        if not sys.stdin.isatty():
            raise MuscleMemError(f'prune {what}: pass --yes (no terminal to ask on)')
        answer = input(f'remove {what} from {args.store}? [y/N] ')
        if answer.strip().lower() not in ('y', 'yes'):
            out.note('nothing removed')
            return 1
    removed = 0
    with open_cli_store(args.store, write=True) as store:
        for info, _ in gone:
            removed += store.forget(task=info.task, trajectory_id=info.id)
    if out.json_mode:
        out.json({'removed': removed, 'trajectories': rows})
    else:
        out.print(f'removed {what}')
    return 0
