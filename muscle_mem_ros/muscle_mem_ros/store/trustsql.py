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

SQLite schema 8 and PostgreSQL schema 6 (:data:`BOOKS`) add ``replay_books``: per
trajectory, how its replays ended and whether it stepped back (:mod:`..replay.booking`
holds the rule; :func:`book_replay` reads, applies and writes one row in the caller's
write transaction, the row locked first, so a fleet's robots book into it one at a time).

SQLite schema 6 and PostgreSQL schema 4 (:data:`COVERAGE`) add what an approval
covers: ``covers``, the trajectory ids as a JSON list, and ``bindings``, the
inferred bindings as a JSON list of ``[learned step id, field, source]``. Rows from
before have both NULL: :class:`~muscle_mem_ros.records.Approval` says what they cover.
SQLite schema 10 and PostgreSQL schema 9 (:data:`DECLARED`) add ``declared``: the
declared bindings (the params file's) the approval saw on what it covers, a JSON list
of ``[learned step id, field, source, max_shift]``; NULL in older rows (they saw none).

:class:`SqlTrust` is the :class:`~.base.Store`'s trust methods written once over these
statements: the SQLite and PostgreSQL stores differ only in how they give a connection.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
import json
import time
from typing import Any, ContextManager

from .base import declarations, Store
from ..records import Agreement, Approval, Declaration, ReplayBook

__all__ = ['agreement', 'approvals', 'approve', 'book_replay', 'BOOKS', 'Booker', 'COVERAGE',
           'DECLARED', 'note_shadow', 'replay_books', 'revoke', 'SqlTrust', 'TABLES']

Booker = Callable[[ReplayBook, int], ReplayBook]
"""Books one replay: ``booker(book so far, agreeing shadow runs now)`` returns the new book."""

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

DECLARED = (
    'ALTER TABLE approvals ADD COLUMN declared TEXT',
)
"""The statements of the migration that records the declared bindings an approval saw (NULL:
not recorded); PostgreSQL's adds the column IF NOT EXISTS (:mod:`.postgres.schema`)."""

BOOKS = (
    'CREATE TABLE IF NOT EXISTS replay_books (trajectory BIGINT PRIMARY KEY, task TEXT NOT NULL,'
    ' completed BIGINT NOT NULL, false_hits BIGINT NOT NULL, canceled BIGINT NOT NULL,'
    ' handed_back BIGINT NOT NULL, recent TEXT NOT NULL,'
    ' stepped_back DOUBLE PRECISION NOT NULL, agreed_then BIGINT NOT NULL, why TEXT NOT NULL)',
    'CREATE INDEX IF NOT EXISTS replay_books_task ON replay_books (task)',
)
"""The statements of the migration that books how replays end (:mod:`..replay.booking`); IF NOT
EXISTS: a PostgreSQL database whose version rows were set back runs it again harmlessly."""

_BOOK_COLS = ('trajectory, task, completed, false_hits, canceled, handed_back, recent,'
              ' stepped_back, agreed_then, why')


def _book(row: Sequence[Any]) -> ReplayBook:
    return ReplayBook(int(row[0]), str(row[1]), int(row[2]), int(row[3]), int(row[4]),
                      int(row[5]), str(row[6]), float(row[7]), int(row[8]), str(row[9]))


def book_replay(conn: Any, task: str, trajectory_id: int, booker: Booker) -> ReplayBook:
    """Book one replay of a trajectory: its row read, ``booker`` applied, written back."""
    conn.execute(f'INSERT INTO replay_books ({_BOOK_COLS}) VALUES (?, ?, 0, 0, 0, 0, ?, 0, 0, ?)'
                 ' ON CONFLICT (trajectory) DO NOTHING', (trajectory_id, task, '', ''))
    # Lock the row before reading it (PostgreSQL: until commit; SQLite holds its write lock).
    conn.execute('UPDATE replay_books SET completed = completed WHERE trajectory = ?',
                 (trajectory_id,))
    row = conn.execute(f'SELECT {_BOOK_COLS} FROM replay_books WHERE trajectory = ?',
                       (trajectory_id,)).fetchone()
    shadow = conn.execute('SELECT agreed FROM shadow_trajectories WHERE trajectory = ?',
                          (trajectory_id,)).fetchone()
    new = booker(_book(row), int(shadow[0]) if shadow is not None else 0)
    conn.execute('UPDATE replay_books SET completed = ?, false_hits = ?, canceled = ?,'
                 ' handed_back = ?, recent = ?, stepped_back = ?, agreed_then = ?, why = ?'
                 ' WHERE trajectory = ?',
                 (new.completed, new.false_hits, new.canceled, new.handed_back, new.recent,
                  new.stepped_back, new.agreed_then, new.why, trajectory_id))
    return new


def replay_books(conn: Any, task: str | None) -> dict[int, ReplayBook]:
    """Return the books of a task's trajectories (None: of every task), by trajectory."""
    sql = f'SELECT {_BOOK_COLS} FROM replay_books'
    rows = (conn.execute(sql + ' WHERE task = ?', (task,)) if task is not None
            else conn.execute(sql)).fetchall()
    return {int(row[0]): _book(row) for row in rows}


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
            covers: Sequence[int], bindings: Sequence[tuple[int, str, str]],
            declared: Sequence[Declaration] = ()) -> Approval:
    """Record (or renew) an approval of what it covers (:class:`~..records.Approval`)."""
    ids = tuple(sorted({int(i) for i in (*covers, trajectory_id) if i}))
    bound = tuple(sorted({(int(n), str(f), str(s)) for n, f, s in bindings}))
    seen = declarations(declared)
    conn.execute(
        'INSERT INTO approvals (task, trajectory, who, at, covers, bindings, declared)'
        ' VALUES (?, ?, ?, ?, ?, ?, ?)'
        ' ON CONFLICT (task, trajectory) DO UPDATE SET who = excluded.who, at = excluded.at,'
        ' covers = excluded.covers, bindings = excluded.bindings, declared = excluded.declared',
        (task, trajectory_id, who, at, json.dumps(ids), json.dumps(bound), json.dumps(seen)))
    return Approval(task, trajectory_id, who, at, ids, bound, seen)


def revoke(conn: Any, task: str, trajectory_id: int) -> bool:
    """Remove an approval; False when there was none."""
    cursor = conn.execute('DELETE FROM approvals WHERE task = ? AND trajectory = ?',
                          (task, trajectory_id))
    return bool(cursor.rowcount)


def approvals(conn: Any, task: str | None) -> list[Approval]:
    """Return the approvals of a task (None: every task), oldest first."""
    sql = 'SELECT task, trajectory, who, at, covers, bindings, declared FROM approvals'
    rows = (conn.execute(sql + ' WHERE task = ? ORDER BY at', (task,)) if task is not None
            else conn.execute(sql + ' ORDER BY at')).fetchall()
    return [_approval(*row) for row in rows]


def _approval(task: Any, trajectory: Any, who: Any, at: Any, covers: Any,
              bindings: Any, declared: Any) -> Approval:
    """Return one row as an Approval (NULL coverage: one recorded before coverage was)."""
    ids = None if covers is None else tuple(int(i) for i in json.loads(covers))
    bound = () if bindings is None else tuple(
        (int(n), str(f), str(s)) for n, f, s in json.loads(bindings))
    seen = None if declared is None else declarations(json.loads(declared))
    return Approval(str(task), int(trajectory), str(who), float(at), ids, bound, seen)


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
                bindings: Sequence[tuple[int, str, str]] = (),
                declared: Sequence[Declaration] = ()) -> Approval:
        """Approve a task or one of its trajectories."""
        if trajectory_id:
            self.trajectory(trajectory_id)  # raises when unknown
        with self._writing() as conn:
            return approve(conn, task, trajectory_id, who, time.time(), covers, bindings,
                           declared)

    def revoke(self, *, task: str, trajectory_id: int = 0) -> bool:
        """Withdraw an approval."""
        with self._writing() as conn:
            return revoke(conn, task, trajectory_id)

    def approvals(self, *, task: str | None = None) -> list[Approval]:
        """Return approvals, oldest first."""
        with self._reading() as conn:
            return approvals(conn, task)

    def book_replay(self, *, task: str, trajectory_id: int, booker: Booker) -> ReplayBook:
        """Book one replay of a trajectory (:func:`book_replay`)."""
        with self._writing() as conn:
            return book_replay(conn, task, trajectory_id, booker)

    def replay_books(self, *, task: str | None = None) -> dict[int, ReplayBook]:
        """Return how the replays of a task's trajectories (None: every task's) ended."""
        with self._reading() as conn:
            return replay_books(conn, task)
