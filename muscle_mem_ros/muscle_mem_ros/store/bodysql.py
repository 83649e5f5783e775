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
Bodies in SQL: the body of each trajectory and the pairs declared compatible.

The same statements serve SQLite (schema 11) and PostgreSQL (schema 10), :data:`BODIES`:
``trajectories.body``, the key of the body a trajectory was learned on
(:attr:`muscle_mem_ros.body.Body.key`; '' in rows from before, an unknown body, which
replays on any body as before), and ``compatible_bodies``, the pairs an owner declared
one body for the cache (who and when), so a fleet shares them. A pair is kept once,
its two keys in sorted order; declaring it again records the latest who and when.
Revoking a declaration deletes the pair and records it in ``revoked_bodies`` with who
revoked it and when, and who had declared it (SQLite schema 13, PostgreSQL 12,
:data:`REVOKED`).

:class:`SqlBodies` is the :class:`~.base.Store`'s body methods written once over these
statements, as :class:`~.trustsql.SqlTrust` is for trust.
"""

from __future__ import annotations

import abc
import time
from typing import Any, ContextManager

from .base import Store
from ..body import Compatibility, shown

__all__ = ['BODIES', 'PG_BODIES', 'REVOKED', 'SqlBodies']

_PAIRS = ('CREATE TABLE IF NOT EXISTS compatible_bodies (a TEXT NOT NULL, b TEXT NOT NULL,'
          ' who TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, PRIMARY KEY (a, b))')

REVOKED = ('CREATE TABLE IF NOT EXISTS revoked_bodies (a TEXT NOT NULL, b TEXT NOT NULL,'
           ' who TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, declared_by TEXT NOT NULL,'
           ' declared_at DOUBLE PRECISION NOT NULL)',)
"""Both stores' statements (SQLite 13, PostgreSQL 12): declarations revoked, by whom, when."""

BODIES = ("ALTER TABLE trajectories ADD COLUMN body TEXT NOT NULL DEFAULT ''", _PAIRS)
"""SQLite's statements: a trajectory's body, the declared compatible pairs."""

PG_BODIES = ("ALTER TABLE trajectories ADD COLUMN IF NOT EXISTS body TEXT NOT NULL DEFAULT ''",
             _PAIRS)
"""PostgreSQL's (IF NOT EXISTS: a database whose version rows were set back runs them again)."""


class SqlBodies(Store):
    """A store's bodies in SQL, for a store that lends its connection (as SqlTrust)."""

    @abc.abstractmethod
    def _reading(self) -> ContextManager[Any]:
        """Yield a connection to read from."""

    @abc.abstractmethod
    def _writing(self) -> ContextManager[Any]:
        """Yield a connection inside a write transaction (or the current batch's)."""

    def declare_compatible(self, *, a: str, b: str, who: str) -> Compatibility:
        """Declare bodies ``a`` and ``b`` (keys) one for the cache."""
        first, second = sorted((a, b))
        now = time.time()
        with self._writing() as conn:
            conn.execute('INSERT INTO compatible_bodies (a, b, who, at) VALUES (?, ?, ?, ?)'
                         ' ON CONFLICT (a, b) DO UPDATE SET who = excluded.who,'
                         ' at = excluded.at', (first, second, who, now))
        return Compatibility(first, second, who, now)

    def revoke_compatible(self, *, a: str, b: str, who: str) -> Compatibility:
        """Revoke the declaration that ``a`` and ``b`` are one body; ``who`` is recorded."""
        first, second = sorted((a, b))
        now = time.time()
        with self._writing() as conn:
            row = conn.execute('SELECT who, at FROM compatible_bodies WHERE a = ? AND b = ?',
                               (first, second)).fetchone()
            if row is None:
                raise ValueError(f'{shown(first)} and {shown(second)} are not declared '
                                 'compatible')
            conn.execute('DELETE FROM compatible_bodies WHERE a = ? AND b = ?', (first, second))
            conn.execute('INSERT INTO revoked_bodies (a, b, who, at, declared_by, declared_at)'
                         ' VALUES (?, ?, ?, ?, ?, ?)',
                         (first, second, who, now, str(row[0]), float(row[1])))
        return Compatibility(first, second, who, now)

    def revoked_bodies(self) -> list[Compatibility]:
        """Return the declarations revoked (who revoked each, when), oldest first."""
        with self._reading() as conn:
            rows = conn.execute('SELECT a, b, who, at FROM revoked_bodies'
                                ' ORDER BY at, a, b').fetchall()
        return [Compatibility(str(a), str(b), str(w), float(t)) for a, b, w, t in rows]

    def compatible_bodies(self) -> list[Compatibility]:
        """Return the pairs declared compatible, oldest first."""
        with self._reading() as conn:
            rows = conn.execute('SELECT a, b, who, at FROM compatible_bodies'
                                ' ORDER BY at, a, b').fetchall()
        return [Compatibility(str(a), str(b), str(w), float(t)) for a, b, w, t in rows]

    def bodies(self) -> dict[str, int]:
        """Return how many trajectories each body learned ('': learned before bodies)."""
        with self._reading() as conn:
            rows = conn.execute('SELECT body, count(*) FROM trajectories'
                                ' GROUP BY body').fetchall()
        return {str(body): int(count) for body, count in rows}
