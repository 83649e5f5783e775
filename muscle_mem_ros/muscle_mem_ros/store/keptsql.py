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
What a restart reads instead of relearning, in SQL: the same statements for SQLite and PostgreSQL.

Three tables (SQLite schema 9, PostgreSQL schema 7, :data:`KEPT`): ``kept_trees`` (per
tree: the tally and fingerprint its plans were learned at, how many) and
``kept_plans`` (per tree and learned step: its plan as JSON), what
:mod:`muscle_mem_ros.bindings.keeping` reads; ``kept_columns`` (per tree: its first
steps as columns, :mod:`.columns`, with the count, sum and largest of their ids).
They are a copy of what the trajectories say, never the only record of anything: a
store that loses them (or a tree that changed) costs one learning, or one reading, of
the tree.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
import logging
from typing import Any, ContextManager

import numpy as np

from .base import Store
from .childcache import ChildCache, Key
from .codec import NODE_COLS
from .columns import (Columns, columns_of, encode, Fetch, joined, KEEP_FROM, open_columns,
                      sorted_for)
from .gcpause import gc_paused
from .sqlwrites import node_rows, tally
from ..errors import StoreCorruptError, StoreError, UnknownTrajectoryError
from ..records import Node

__all__ = ['columns_to_keep', 'keep_columns', 'KEPT', 'kept_columns', 'pg_ranges', 'Read',
           'SqlKept', 'sqlite_ranges', 'Tolerance']

Tolerance = Mapping[str, np.ndarray]
"""Sensor name -> its tolerance, for the sensors a box or norm check compares."""

_log = logging.getLogger(__name__)

KEPT = (
    'CREATE TABLE IF NOT EXISTS kept_trees (task TEXT NOT NULL, variant TEXT NOT NULL,'
    ' count BIGINT NOT NULL, id_sum BIGINT NOT NULL, fingerprint TEXT NOT NULL,'
    ' plans BIGINT NOT NULL, PRIMARY KEY (task, variant))',
    'CREATE TABLE IF NOT EXISTS kept_plans (task TEXT NOT NULL, variant TEXT NOT NULL,'
    ' node BIGINT NOT NULL, plan TEXT NOT NULL, PRIMARY KEY (task, variant, node))',
    'CREATE TABLE IF NOT EXISTS kept_columns (task TEXT NOT NULL, variant TEXT NOT NULL,'
    ' count BIGINT NOT NULL, id_sum BIGINT NOT NULL, max_id BIGINT NOT NULL,'
    ' tally_count BIGINT NOT NULL, tally_sum BIGINT NOT NULL,'
    ' data BYTEA NOT NULL, PRIMARY KEY (task, variant))',
)
"""The statements of the migration that keeps learned plans; IF NOT EXISTS: a PostgreSQL
database whose version rows were set back runs it again harmlessly."""


Read = Callable[[Any, str, str, Sequence[tuple[int, int]]], Sequence[bytes | memoryview]]
"""``read(conn, task, variant, ranges)``: byte ranges of a tree's kept value (a store
reads them its own way: SQLite's incremental blob reads, PostgreSQL's ``substring``)."""


def sqlite_ranges(conn: Any, task: str, variant: str,
                  ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    """Read parts of a kept value in SQLite (:data:`Read`): incremental blob reads, only those."""
    row = conn.execute('SELECT rowid FROM kept_columns WHERE task = ? AND variant = ?',
                       (task, variant)).fetchone()
    if row is None:
        raise StoreError(f'kept first steps of {task!r} are gone')
    with conn.blobopen('kept_columns', 'data', row[0], readonly=True) as blob:
        out = []
        for offset, length in ranges:
            blob.seek(min(offset, len(blob)))
            out.append(blob.read(length))
        return out


def pg_ranges(conn: Any, task: str, variant: str,
              ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    """
    Read parts of a kept value in PostgreSQL (:data:`Read`): ``substring``, in binary.

    The value is stored uncompressed (schema 8), so the server reads only those parts.
    """
    parts = ', '.join(['substring(data from %s for %s)'] * len(ranges))
    row = conn.raw.execute(f'SELECT {parts} FROM kept_columns WHERE task = %s AND variant = %s',
                           [*(v for a, n in ranges for v in (a + 1, n)), task, variant],
                           binary=True).fetchone()
    if row is None:
        raise StoreError(f'kept first steps of {task!r} are gone')
    return [bytes(part) for part in row]


def kept_columns(conn: Any, task: str, variant: str, read: Read, later: Fetch,
                 ) -> tuple[Columns, list[tuple[Any, ...]]] | None:
    """
    Return a tree's kept first-step columns and the rows of first steps added after them.

    The columns' small arrays are read now, their vectors when a lookup asks
    (:func:`.columns.open_columns`, with ``later``). None when none are kept, or they no
    longer describe the first steps they were made from (one was removed: their count or
    ids differ), or they cannot be read (logged: the rows are read instead). A tree whose
    tally is the one they were kept at has exactly those first steps (nothing reads them
    to know); else they are counted up to the newest kept, and the newer read.
    """
    row = conn.execute('SELECT count, id_sum, max_id, tally_count, tally_sum FROM kept_columns'
                       ' WHERE task = ? AND variant = ?', (task, variant)).fetchone()
    if row is None:
        return None
    same = tuple(int(v) for v in row[3:5]) == tally(conn, task, variant) != (0, 0)
    if not same:
        have = conn.execute('SELECT count(*), sum(id) FROM nodes WHERE task = ? AND variant = ?'
                            ' AND parent IS NULL AND id <= ?', (task, variant, row[2])).fetchone()
        if (int(have[0]), int(have[1] or 0)) != (int(row[0]), int(row[1])):
            return None
    try:
        columns = open_columns(lambda ranges: read(conn, task, variant, ranges), later)
    except StoreCorruptError as err:
        _log.warning('kept first steps of %r are unreadable (the rows are read): %s', task, err)
        return None
    if columns.n != int(row[0]) or int(columns.ids.sum()) != int(row[1]):
        return None
    if same:
        return columns, []
    tail = conn.execute(f'SELECT {NODE_COLS} FROM nodes WHERE task = ? AND variant = ? AND'
                        ' parent IS NULL AND id > ? ORDER BY id', (task, variant, row[2]))
    return columns, tail.fetchall()


def keep_columns(conn: Any, task: str, variant: str, columns: Columns,
                 whole: bool = True, tolerance: Tolerance | None = None) -> None:
    """
    Replace a tree's kept first-step columns, in the caller's write.

    :param tolerance: What the vectors are sorted by (:func:`.columns.encode`).
    :param whole: The columns are every first step the tree has now (counted in the same
        write, which no commit to the task can come between): its tally is kept with them,
        and a tree at that tally is known to have them without counting. False: they
        are counted when read.
    """
    now = tally(conn, task, variant) if whole else (0, 0)
    conn.execute('DELETE FROM kept_columns WHERE task = ? AND variant = ?', (task, variant))
    conn.execute('INSERT INTO kept_columns (task, variant, count, id_sum, max_id, tally_count,'
                 ' tally_sum, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
                 (task, variant, columns.n, int(columns.ids.sum()), int(columns.ids.max()),
                  now[0], now[1], encode(columns, tolerance)))


def columns_to_keep(cache: ChildCache, key: Key,
                    tolerance: Tolerance | None = None) -> Columns | None:
    """
    Return the columns of cached first steps worth keeping, None when they are not.

    Not: fewer than :data:`.columns.KEEP_FROM`, or exactly the kept ones (and, when the
    store was told ``tolerance``, sorted for it). Read from the nodes when every one is
    read, else the kept columns joined with the rows after them.
    """
    if not cache.has(key) or cache.size(key) < KEEP_FROM:
        return None
    kept = cache.kept(key)
    if kept is not None and kept.n == cache.size(key) and (
            tolerance is None or kept.sorted_for == sorted_for(tolerance)):
        return None
    whole = cache.whole(key)
    if whole is not None:
        return columns_of(whole)
    if kept is None:
        return None
    return joined(kept, columns_of(cache.view(key)[kept.n:]))


class SqlKept(Store):
    """A store's kept plans in SQL, for a store that lends its connection (as SqlTrust)."""

    keeps_plans = True

    @abc.abstractmethod
    def _reading(self) -> ContextManager[Any]:
        """Yield a connection to read from."""

    @abc.abstractmethod
    def _writing(self) -> ContextManager[Any]:
        """Yield a connection inside a write transaction (or the current batch's)."""

    @abc.abstractmethod
    def _node(self, row: tuple[Any, ...]) -> Node:
        """Decode one node row."""

    _cache: ChildCache
    _lock: Any
    _first_step_order: Tolerance | None = None

    @staticmethod
    @abc.abstractmethod
    def _kept_ranges(conn: Any, task: str, variant: str,
                     ranges: Sequence[tuple[int, int]]) -> Sequence[bytes | memoryview]:
        """Read byte ranges of a tree's kept first steps (:data:`Read`)."""

    def _kept(self, conn: Any, task: str, variant: str,
              ) -> tuple[Columns, list[tuple[Any, ...]]] | None:
        """Return a tree's kept first steps (:func:`kept_columns`) read through ``conn``."""
        def later(ranges: Sequence[tuple[int, int]]) -> Sequence[bytes | memoryview]:
            with self._reading() as again:
                return self._kept_ranges(again, task, variant, ranges)
        return kept_columns(conn, task, variant, self._kept_ranges, later)

    def order_first_steps(self, tolerance: Tolerance) -> None:
        """
        Keep first steps sorted for a check of these tolerances (:func:`.columns.encode`).

        A restart's first lookup then reads only the few within the tolerance. Kept
        values written before keep their order until their tree changes.
        """
        self._first_step_order = dict(tolerance) or None

    def _task_writing(self, task: str) -> ContextManager[Any]:
        """Yield a connection inside a write no commit to ``task`` can come between."""
        return self._writing()

    def _fill(self, ids: np.ndarray, nodes: list[Node | None],
              positions: Sequence[int] | None) -> None:
        """Read the unread nodes of a kept list (:meth:`.childcache.ChildCache.fill`)."""
        with self._reading() as conn, gc_paused():
            self._cache.fill(nodes, ids, positions,
                             lambda wanted: [self._node(r) for r in node_rows(conn, wanted)])

    def nodes(self, node_ids: Sequence[int]) -> list[Node]:
        """
        Return nodes by id, in the order asked (the uncached ones in one read).

        Cached ones need no connection (a fleet store's server may be away).
        """
        with self._lock:
            found = {i: n for i in node_ids if (n := self._cache.node(i)) is not None}
        wanted = [i for i in node_ids if i not in found]
        if wanted:
            with self._reading() as conn, gc_paused():
                found.update((n.id, n) for n in map(self._node, node_rows(conn, wanted)))
        missing = [i for i in node_ids if i not in found]
        if missing:
            raise UnknownTrajectoryError(f'no node with id {missing[0]}')
        return [found[i] for i in node_ids]

    def _keep_first_steps(self) -> None:
        """Keep the columns of cached large trees' first steps that changed (a copy)."""
        if getattr(self, 'read_only', False):  # (the CLI's stores: they write nothing)
            return
        try:
            for key in self._cache.keys():
                columns = None if key[2] is not None else columns_to_keep(
                    self._cache, key, self._first_step_order)
                if columns is not None:
                    with self._task_writing(key[0]) as conn:
                        now = conn.execute(
                            'SELECT count(*), sum(id) FROM nodes WHERE task = ? AND variant = ?'
                            ' AND parent IS NULL', key[:2]).fetchone()
                        keep_columns(conn, key[0], key[1], columns, whole=(
                            int(now[0]), int(now[1] or 0)) == (columns.n, int(columns.ids.sum())),
                            tolerance=self._first_step_order)
        except StoreError as err:
            _log.warning('could not keep first steps for the next open: %s', err)

    def keep_plans(self, *, task: str, variant: str, tally: tuple[int, int],
                   fingerprint: str, plans: Sequence[tuple[int, str]]) -> bool:
        """Replace a tree's kept plans, in one transaction."""
        with self._writing() as conn:
            conn.execute('DELETE FROM kept_plans WHERE task = ? AND variant = ?', (task, variant))
            conn.execute('DELETE FROM kept_trees WHERE task = ? AND variant = ?', (task, variant))
            conn.executemany('INSERT INTO kept_plans (task, variant, node, plan)'
                             ' VALUES (?, ?, ?, ?)',
                             [(task, variant, node, text) for node, text in plans])
            conn.execute('INSERT INTO kept_trees (task, variant, count, id_sum, fingerprint,'
                         ' plans) VALUES (?, ?, ?, ?, ?, ?)',
                         (task, variant, int(tally[0]), int(tally[1]), fingerprint, len(plans)))
        return True

    def kept_plans(self, *, task: str, variant: str) -> tuple[tuple[int, int], str, int] | None:
        """Return (tally, fingerprint, how many) of a tree's kept plans, None when none are."""
        with self._reading() as conn:
            row = conn.execute('SELECT count, id_sum, fingerprint, plans FROM kept_trees'
                               ' WHERE task = ? AND variant = ?', (task, variant)).fetchone()
        if row is None:
            return None
        return (int(row[0]), int(row[1])), str(row[2]), int(row[3])

    def kept_plan(self, *, task: str, variant: str, node_id: int) -> str | None:
        """Return one learned step's kept plan (JSON), None when it has none."""
        with self._reading() as conn:
            row = conn.execute('SELECT plan FROM kept_plans WHERE task = ? AND variant = ?'
                               ' AND node = ?', (task, variant, node_id)).fetchone()
        return None if row is None else str(row[0])

    def kept_plan_ids(self, *, task: str, variant: str) -> list[int]:
        """Return the learned steps of a tree that have a kept plan."""
        with self._reading() as conn:
            rows = conn.execute('SELECT node FROM kept_plans WHERE task = ? AND variant = ?'
                                ' ORDER BY node', (task, variant)).fetchall()
        return [int(r[0]) for r in rows]
