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
Where a trajectory was learned from, in SQL: a recording (``muscle-mem learn``).

One table serves SQLite (schema 12) and PostgreSQL (schema 11), :data:`SOURCES`:
``trajectory_sources`` holds, for a trajectory learned from a bag rather than live, what
it was learned from (the bag's path and the task's range in it) and when. A trajectory
learned live has no row. Rows are read joined with ``trajectories``, so a forgotten
trajectory's row is never shown (ids are not reused). It says where, never that a
trajectory may replay: trust is only the gates' (shadow runs, approvals).

:class:`SqlSources` is the :class:`~.base.Store`'s source methods written once over these
statements, as :class:`~.bodysql.SqlBodies` is for bodies.
"""

from __future__ import annotations

import abc
import time
from typing import Any, ContextManager

from .base import Store

__all__ = ['PG_SOURCES', 'SOURCES', 'SqlSources']

SOURCES = ('CREATE TABLE IF NOT EXISTS trajectory_sources (trajectory_id INTEGER PRIMARY KEY,'
           ' source TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)',)
"""SQLite's statements: the table of where trajectories were learned from."""

PG_SOURCES = ('CREATE TABLE IF NOT EXISTS trajectory_sources (trajectory_id BIGINT PRIMARY KEY,'
              ' source TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)',)
"""PostgreSQL's."""


class SqlSources(Store):
    """A store's trajectory sources in SQL, for a store that lends its connection."""

    @abc.abstractmethod
    def _reading(self) -> ContextManager[Any]:
        """Yield a connection to read from."""

    @abc.abstractmethod
    def _writing(self) -> ContextManager[Any]:
        """Yield a connection inside a write transaction (or the current batch's)."""

    def note_source(self, *, trajectory_id: int, source: str) -> None:
        """Record what trajectory ``trajectory_id`` was learned from (the first one kept)."""
        with self._writing() as conn:
            conn.execute('INSERT INTO trajectory_sources (trajectory_id, source, at)'
                         ' VALUES (?, ?, ?) ON CONFLICT (trajectory_id) DO NOTHING',
                         (trajectory_id, source, time.time()))

    def sources(self, *, task: str) -> dict[int, str]:
        """Return what each trajectory of ``task`` learned from a recording was learned from."""
        with self._reading() as conn:
            rows = conn.execute('SELECT s.trajectory_id, s.source FROM trajectory_sources s'
                                ' JOIN trajectories t ON t.id = s.trajectory_id'
                                ' WHERE t.task = ?', (task,)).fetchall()
        return {int(i): str(s) for i, s in rows}
