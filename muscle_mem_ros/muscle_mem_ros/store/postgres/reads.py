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
Reads that answer while the fleet's server is away: as the trajectories were last read.

A robot whose PostgreSQL server goes away keeps replaying the trees it already loaded
(:mod:`..childcache`). What it says about its trajectories (``muscle-mem show``, the
reporters, a replay's booking) must keep working too, so every trajectory row read is
remembered, and while the server is away a read of one trajectory, of a task's, or of a
tree's tally answers from those. A read that needs what was never read re-raises the
:class:`~muscle_mem_ros.errors.StoreUnavailableError`: the store does not guess.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
import threading
from typing import Any, ContextManager, TypeVar

from .link import PgConn
from .. import sqlwrites
from ..base import Store, tree_tallies
from ..codec import TRAJ_COLS, trajectory_from_row
from ...errors import StoreUnavailableError, UnknownTrajectoryError
from ...records import TaskStats, TrajectoryInfo

__all__ = ['LastKnownReads']

_T = TypeVar('_T')


class LastKnownReads(Store):
    """The fleet store's trajectory reads, falling back on the last known (module docstring)."""

    _lock: threading.RLock
    _known: dict[int, TrajectoryInfo]

    @abc.abstractmethod
    def _db(self) -> ContextManager[PgConn]:
        """Yield a connection, or raise StoreUnavailableError at once."""

    def _seen(self, rows: Sequence[tuple[Any, ...]]) -> list[TrajectoryInfo]:
        """Decode trajectory rows and remember them for while the server is away."""
        infos = [trajectory_from_row(r) for r in rows]
        with self._lock:
            for info in infos:
                self._known[info.id] = info
        return infos

    def _last_known(self, err: StoreUnavailableError,
                    pick: Callable[[list[TrajectoryInfo]], _T | None]) -> _T:
        """Answer from trajectories read before the server went away, or re-raise ``err``."""
        with self._lock:
            found = pick(list(self._known.values()))
        if found is None:
            raise err
        return found

    def trajectory(self, trajectory_id: int) -> TrajectoryInfo:
        """Return one trajectory; while the server is away, as it was last read."""
        try:
            with self._db() as conn:
                row = conn.execute(f'SELECT {TRAJ_COLS}, robot_id FROM trajectories'
                                   ' WHERE id = ?', (trajectory_id,)).fetchone()
        except StoreUnavailableError as err:
            return self._last_known(err, lambda known: next(
                (t for t in known if t.id == trajectory_id), None))
        if row is None:
            raise UnknownTrajectoryError(f'no trajectory with id {trajectory_id}')
        return self._seen([row])[0]

    def trajectories(self, *, task: str | None = None, variant: str | None = None,
                     after: int = 0, limit: int | None = None) -> list[TrajectoryInfo]:
        """
        Return every trajectory (of one task, of one tree, newer than ``after``).

        While the server is away, those of a task as they were last read.
        """
        try:
            with self._db() as conn:
                rows = sqlwrites.trajectory_rows(conn, f'{TRAJ_COLS}, robot_id', task, variant,
                                                 after, limit)
        except StoreUnavailableError as err:
            if task is None:
                raise
            return self._last_known(err, lambda known: sorted(
                (t for t in known if t.task == task and variant in (None, t.variant)
                 and t.id > after), key=lambda t: t.id)[:limit])
        return self._seen(rows)

    def tally(self, *, task: str, variant: str) -> tuple[int, int]:
        """Return (count, sum of ids) of a tree's trajectories; as last read while away."""
        try:
            with self._db() as conn:
                return sqlwrites.tally(conn, task, variant)
        except StoreUnavailableError as err:
            return self._last_known(err, lambda known: (
                sum(1 for t in known if (t.task, t.variant) == (task, variant)),
                sum(t.id for t in known if (t.task, t.variant) == (task, variant))))

    def trees(self, *, task: str) -> dict[str, tuple[int, int]]:
        """Return a task's trees: variant -> (count, sum of ids); as last read while away."""
        try:
            with self._db() as conn:
                return sqlwrites.trees(conn, task)
        except StoreUnavailableError as err:
            return self._last_known(err, lambda known: tree_tallies(
                t for t in known if t.task == task))

    def trajectory_ending_at(self, node_id: int) -> TrajectoryInfo | None:
        """Return the trajectory whose last node is ``node_id``, if any."""
        try:
            with self._db() as conn:
                row = conn.execute(f'SELECT {TRAJ_COLS}, robot_id FROM trajectories'
                                   ' WHERE leaf = ?', (node_id,)).fetchone()
        except StoreUnavailableError as err:
            return self._last_known(err, lambda known: next(
                (t for t in known if t.node_ids[-1] == node_id), None))
        return None if row is None else self._seen([row])[0]

    def tasks(self) -> list[TaskStats]:
        """Return per-task counters, sorted by name."""
        with self._db() as conn:
            return sqlwrites.task_stats(conn)
