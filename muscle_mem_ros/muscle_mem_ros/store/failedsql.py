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
What a camera saw when a check on it failed, in SQL: one table, bounded by the tree.

One table serves SQLite (schema 14) and PostgreSQL (schema 13), :data:`FAILED`:
``failed_views`` holds a :class:`~muscle_mem_ros.records.FailedView` per (learned step,
sensor, phase), the latest: keeping one replaces the one before, so the table never holds
more than three rows per learned step and camera, however often a robot misses. A view is
kept only for a step of its task that exists when it is written (a step forgotten
meanwhile keeps nothing), goes with the task when it is forgotten and with its step when a
forgotten trajectory takes the step (:func:`.sqlwrites.forget`), and is read joined with
``nodes``, so a view of a step that is gone is never shown.

:class:`SqlFailedViews` is the :class:`~.base.Store`'s failed-view methods written once
over these statements, as :class:`~.sourcesql.SqlSources` is for sources.
"""

from __future__ import annotations

import abc
from typing import Any, ContextManager

from .base import Store
from ..records import FailedView, ViewPhase

__all__ = ['FAILED', 'PG_FAILED', 'SqlFailedViews']

FAILED = (
    'CREATE TABLE IF NOT EXISTS failed_views (node INTEGER NOT NULL, sensor TEXT NOT NULL,'
    ' phase TEXT NOT NULL, task TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,'
    ' reason TEXT NOT NULL, png BLOB NOT NULL, PRIMARY KEY (node, sensor, phase))',
    'CREATE INDEX IF NOT EXISTS failed_views_task ON failed_views (task)',
)
"""SQLite's statements: the table of failed views, and its index by task."""

PG_FAILED = (
    'CREATE TABLE IF NOT EXISTS failed_views (node BIGINT NOT NULL, sensor TEXT NOT NULL,'
    ' phase TEXT NOT NULL, task TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,'
    ' reason TEXT NOT NULL, png BYTEA NOT NULL, PRIMARY KEY (node, sensor, phase))',
    'CREATE INDEX IF NOT EXISTS failed_views_task ON failed_views (task)',
)
"""PostgreSQL's."""

_ORDER = {phase: i for i, phase in enumerate(ViewPhase)}


class SqlFailedViews(Store):
    """A store's failed views in SQL, for a store that lends its connection."""

    @abc.abstractmethod
    def _reading(self) -> ContextManager[Any]:
        """Yield a connection to read from."""

    @abc.abstractmethod
    def _writing(self) -> ContextManager[Any]:
        """Yield a connection inside a write transaction (or the current batch's)."""

    def keep_failed_view(self, view: FailedView) -> bool:
        """Keep ``view`` in place of the one before it; False when its step is not stored."""
        with self._writing() as conn:
            cur = conn.execute(
                'INSERT INTO failed_views (node, sensor, phase, task, at, reason, png)'
                ' SELECT ?, ?, ?, ?, ?, ?, ? WHERE EXISTS'
                ' (SELECT 1 FROM nodes WHERE id = ? AND task = ?)'
                ' ON CONFLICT (node, sensor, phase) DO UPDATE SET task = excluded.task,'
                ' at = excluded.at, reason = excluded.reason, png = excluded.png',
                (view.node_id, view.sensor, view.phase.value, view.task, view.at, view.reason,
                 bytes(view.png), view.node_id, view.task))
            return bool(cur.rowcount)

    def failed_views(self, *, task: str, node_id: int | None = None) -> list[FailedView]:
        """Return the failed views of ``task`` (of one of its steps), by step, phase, sensor."""
        sql = ('SELECT f.node, f.sensor, f.phase, f.at, f.reason, f.png FROM failed_views f'
               ' JOIN nodes n ON n.id = f.node WHERE f.task = ?')
        args: tuple[Any, ...] = (task,)
        if node_id is not None:
            sql += ' AND f.node = ?'
            args += (node_id,)
        with self._reading() as conn:
            rows = conn.execute(sql, args).fetchall()
        views = [FailedView(task=task, node_id=int(n), sensor=str(s), phase=ViewPhase(p),
                            at=float(a), reason=str(r), png=bytes(png))
                 for n, s, p, a, r, png in rows]
        return sorted(views, key=lambda v: (v.node_id, _ORDER[v.phase], v.sensor))
