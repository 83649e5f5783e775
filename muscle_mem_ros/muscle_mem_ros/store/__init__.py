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
Where learned trajectory trees live: in memory, in an SQLite file, or in PostgreSQL.

The interface and the dedupe rule (:mod:`.base`) and the tree merge every store uses
(:mod:`.merge`); the memory store (:mod:`.memory`); the SQLite store: its queries
(:mod:`.sqlite`), opening its file (:mod:`.sqlfile`), its schema and migrations
(:mod:`.schema`, :mod:`.legacy`) and recording owners (:mod:`.owners`); what both SQL
stores share: tree writes (:mod:`.sqlwrites`), trust (:mod:`.trustsql`), rows
(:mod:`.codec`), the child cache (:mod:`.childcache`); the storage format of values
(:mod:`.values`, :func:`.gcpause.gc_paused`); the PostgreSQL store in :mod:`.postgres`.
"""

from __future__ import annotations

import os

from .base import NodeList, Recording, RecordingInfo, step_signature, Store
from .memory import MemoryStore
from .postgres.link import is_postgres_url, redact
from .postgres.store import PostgresStore
from .sqlite import DEFAULT_ABANDONED_RETENTION, SqliteStore

__all__ = [
    'DEFAULT_ABANDONED_RETENTION',
    'MemoryStore',
    'NodeList',
    'PostgresStore',
    'Recording',
    'RecordingInfo',
    'SqliteStore',
    'Store',
    'open_store',
    'redact',
    'step_signature',
]


def open_store(
    spec: str | os.PathLike[str] | None,
    *,
    allow_pickle: bool = False,
    abandoned_retention: float | None = DEFAULT_ABANDONED_RETENTION,
    robot_id: str = '',
    start_unreachable: bool = False,
    read_only: bool = False,
) -> Store:
    """
    Open a store from a path-like spec.

    :param spec: None, '' or ':memory:' for a :class:`MemoryStore`; a libpq URL
        (``postgresql://user@host:port/db``) for a :class:`PostgresStore` shared by a
        fleet; anything else is the path of an SQLite store file (``~`` expanded,
        directories created 0700).
    :param allow_pickle: SQLite only: pickle (and unpickle) values that are not JSON
        data or NumPy arrays. Trusted files only; the ROS node never sets it.
    :param abandoned_retention: SQLite only: seconds after which incomplete recordings
        of stopped processes are purged on open (None keeps them); PostgreSQL too.
    :param robot_id: PostgreSQL only: who records, stored with every recording.
    :param start_unreachable: PostgreSQL only: open even if the server cannot be reached
        yet (it is retried with backoff; see :class:`PostgresStore`).
    :param read_only: Never write: no migration, no purge, nothing created (SQLite opens
        the file ``mode=ro``; a PostgreSQL session is READ ONLY, so the server refuses any
        write); a store that is absent or older is refused.
    :return: The store.
    :raises StoreAccessError: the file or directory cannot be read or written.
    :raises StoreCorruptError: the file exists but is not a usable store.
    :raises StoreVersionError: the file (or database) was written by a newer schema.
    :raises StoreUnavailableError: the PostgreSQL server cannot be reached.
    """
    if spec is None or (isinstance(spec, str) and spec in ('', ':memory:')):
        return MemoryStore()
    if is_postgres_url(spec):
        if allow_pickle:
            raise ValueError('allow_pickle: a shared PostgreSQL store never pickles')
        return PostgresStore(url=str(spec), robot_id=robot_id,
                             abandoned_retention=abandoned_retention,
                             start_unreachable=start_unreachable, read_only=read_only)
    return SqliteStore(path=spec, allow_pickle=allow_pickle,
                       abandoned_retention=None if read_only else abandoned_retention,
                       read_only=read_only)
