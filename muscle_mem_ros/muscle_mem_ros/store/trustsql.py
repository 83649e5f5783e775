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
Trust in SQL: shadow agreement counts and approvals, the same statements for SQLite and PostgreSQL.

Both connections take ``?`` placeholders (the PostgreSQL store's connection
translates them). Three tables (SQLite schema 5, PostgreSQL schema 3):
``shadow_trajectories`` (per trajectory: shadow runs and agreements),
``shadow_bindings`` (per learned step and inferred field) and ``approvals``
(per task and trajectory, 0 for the whole task: who and when). They live in the
store, so a fleet's approvals and counts travel with its trees.

SQLite schema 6 and PostgreSQL schema 4 (:data:`COVERAGE`) add what an approval
covers: ``covers``, the trajectory ids as a JSON list, and ``bindings``, the
inferred bindings as a JSON list of ``[learned step id, field, source]``. Rows from
before have both NULL: :class:`~muscle_mem_ros.records.Approval` says what they cover.

:class:`SqlTrust` is the :class:`~.base.Store`'s trust methods written once over these
statements: the SQLite and PostgreSQL stores differ only in how they give a connection.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
import json
import time
from typing import Any, ContextManager

from .base import Store
from ..records import Agreement, Approval

__all__ = ['agreement', 'approvals', 'approve', 'COVERAGE', 'note_shadow', 'revoke',
           'SqlTrust', 'TABLES']

TABLES = (
    'CREATE TABLE shadow_trajectories (trajectory BIGINT PRIMARY KEY, task TEXT NOT NULL,'
    ' runs BIGINT NOT NULL, agreed BIGINT NOT NULL)',
    'CREATE INDEX shadow_trajectories_task ON shadow_trajectories (task)',
    'CREATE TABLE shadow_bindings (node BIGINT NOT NULL, field TEXT NOT NULL,'
    ' task TEXT NOT NULL, runs BIGINT NOT NULL, agreed BIGINT NOT NULL,'
    ' PRIMARY KEY (node, field))',
    'CREATE INDEX shadow_bindings_task ON shadow_bindings (task)',
    'CREATE TABLE approvals (task TEXT NOT NULL, trajectory BIGINT NOT NULL, who TEXT NOT NULL,'
    ' at DOUBLE PRECISION NOT NULL, PRIMARY KEY (task, trajectory))',
)
"""The statements of the migration that adds them."""

COVERAGE = (
    'ALTER TABLE approvals ADD COLUMN covers TEXT',
    'ALTER TABLE approvals ADD COLUMN bindings TEXT',
)
"""The statements of the migration that records what an approval covers (NULL: not recorded)."""


def note_shadow(conn: Any, task: str, trajectory_id: int, agreed: bool,
                bindings: Sequence[tuple[int, str, bool]]) -> None:
    """Count one shadow run for a trajectory (0: none) and each inferred binding it used."""
    one = 1 if agreed else 0
    if trajectory_id:
        conn.execute(
            'INSERT INTO shadow_trajectories (trajectory, task, runs, agreed) VALUES (?, ?, 1, ?)'
            ' ON CONFLICT (trajectory) DO UPDATE SET runs = shadow_trajectories.runs + 1,'
            ' agreed = shadow_trajectories.agreed + excluded.agreed',
            (trajectory_id, task, one))
    for node, field, ok in bindings:
        conn.execute(
            'INSERT INTO shadow_bindings (node, field, task, runs, agreed) VALUES (?, ?, ?, 1, ?)'
            ' ON CONFLICT (node, field) DO UPDATE SET runs = shadow_bindings.runs + 1,'
            ' agreed = shadow_bindings.agreed + excluded.agreed',
            (node, field, task, 1 if ok else 0))


def agreement(conn: Any, task: str) -> tuple[dict[int, Agreement],
                                             dict[tuple[int, str], Agreement]]:
    """Return a task's counts: per trajectory, and per (node, field) binding."""
    by_trajectory = {int(t): Agreement(int(r), int(a)) for t, r, a in conn.execute(
        'SELECT trajectory, runs, agreed FROM shadow_trajectories WHERE task = ?',
        (task,)).fetchall()}
    by_binding = {(int(n), str(f)): Agreement(int(r), int(a)) for n, f, r, a in conn.execute(
        'SELECT node, field, runs, agreed FROM shadow_bindings WHERE task = ?',
        (task,)).fetchall()}
    return by_trajectory, by_binding


def approve(conn: Any, task: str, trajectory_id: int, who: str, at: float,
            covers: Sequence[int], bindings: Sequence[tuple[int, str, str]]) -> Approval:
    """Record (or renew) an approval of what it covers (:class:`~..records.Approval`)."""
    ids = tuple(sorted({int(i) for i in (*covers, trajectory_id) if i}))
    bound = tuple(sorted({(int(n), str(f), str(s)) for n, f, s in bindings}))
    conn.execute(
        'INSERT INTO approvals (task, trajectory, who, at, covers, bindings)'
        ' VALUES (?, ?, ?, ?, ?, ?)'
        ' ON CONFLICT (task, trajectory) DO UPDATE SET who = excluded.who, at = excluded.at,'
        ' covers = excluded.covers, bindings = excluded.bindings',
        (task, trajectory_id, who, at, json.dumps(ids), json.dumps(bound)))
    return Approval(task, trajectory_id, who, at, ids, bound)


def revoke(conn: Any, task: str, trajectory_id: int) -> bool:
    """Remove an approval; False when there was none."""
    cursor = conn.execute('DELETE FROM approvals WHERE task = ? AND trajectory = ?',
                          (task, trajectory_id))
    return bool(cursor.rowcount)


def approvals(conn: Any, task: str | None) -> list[Approval]:
    """Return the approvals of a task (None: every task), oldest first."""
    sql = 'SELECT task, trajectory, who, at, covers, bindings FROM approvals'
    rows = (conn.execute(sql + ' WHERE task = ? ORDER BY at', (task,)) if task is not None
            else conn.execute(sql + ' ORDER BY at')).fetchall()
    return [_approval(*row) for row in rows]


def _approval(task: Any, trajectory: Any, who: Any, at: Any, covers: Any,
              bindings: Any) -> Approval:
    """Return one row as an Approval (NULL coverage: one recorded before coverage was)."""
    ids = None if covers is None else tuple(int(i) for i in json.loads(covers))
    bound = () if bindings is None else tuple(
        (int(n), str(f), str(s)) for n, f, s in json.loads(bindings))
    return Approval(str(task), int(trajectory), str(who), float(at), ids, bound)


class SqlTrust(Store):
    """
    A store's shadow counts and approvals in SQL, for a store that lends its connection.

    The store says how: :meth:`_reading` yields a connection to read, :meth:`_writing`
    one inside a write transaction (or the current batch's). What they hold is shared by
    every process (and, in PostgreSQL, every robot) using the store.
    """

    @abc.abstractmethod
    def _reading(self) -> ContextManager[Any]:
        """Yield a connection to read from."""

    @abc.abstractmethod
    def _writing(self) -> ContextManager[Any]:
        """Yield a connection inside a write transaction (or the current batch's)."""

    def note_shadow(self, *, task: str, trajectory_id: int, agreed: bool,
                    bindings: Sequence[tuple[int, str, bool]] = ()) -> None:
        """Count one shadow run (:func:`note_shadow`)."""
        with self._writing() as conn:
            note_shadow(conn, task, trajectory_id, agreed, bindings)

    def agreement(self, *, task: str) -> tuple[dict[int, Agreement],
                                               dict[tuple[int, str], Agreement]]:
        """Return a task's shadow counts."""
        with self._reading() as conn:
            return agreement(conn, task)

    def approve(self, *, task: str, trajectory_id: int = 0, who: str,
                covers: Sequence[int] = (),
                bindings: Sequence[tuple[int, str, str]] = ()) -> Approval:
        """Approve a task or one of its trajectories."""
        if trajectory_id:
            self.trajectory(trajectory_id)  # raises when unknown
        with self._writing() as conn:
            return approve(conn, task, trajectory_id, who, time.time(), covers, bindings)

    def revoke(self, *, task: str, trajectory_id: int = 0) -> bool:
        """Withdraw an approval."""
        with self._writing() as conn:
            return revoke(conn, task, trajectory_id)

    def approvals(self, *, task: str | None = None) -> list[Approval]:
        """Return approvals, oldest first."""
        with self._reading() as conn:
            return approvals(conn, task)
