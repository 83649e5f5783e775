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
Persistent store: one SQLite file in WAL mode.

Guarantees:

* A finished trajectory is merged in one transaction: after a crash it is
  either fully there or not at all.
* A recording in progress is written step by step to ``recording_steps``
  (each ``append`` is its own committed transaction) and lives outside the
  tree until ``commit``: a crash keeps what was recorded for inspection
  (:meth:`SqliteStore.incomplete_recordings`) and never replays half a
  demonstration.
* A file that is not a muscle_mem_ros store, is corrupt, or was written by a
  newer schema raises :class:`~muscle_mem_ros.errors.StoreCorruptError` /
  :class:`~muscle_mem_ros.errors.StoreVersionError` and is never written to.
* WAL mode lets other processes read while this one writes; changes made by
  other connections are noticed (``PRAGMA data_version``) and the caches
  reloaded.

Nothing in the file is ever unpickled unless the store is opened with
``allow_pickle=True``: snapshots, goals and Python calls are stored in the
safe format (:mod:`.codec`, :mod:`.values`), so opening a file from anywhere
runs no code from it. A file of schema version 2 or older (pickled rows) is
converted on open without trusting it (:mod:`.legacy`), after a backup copy.

Files: a store this class creates gets its missing directories with mode 0700
and the database with 0600 (SQLite gives ``-wal`` and ``-shm`` the database's
mode). A file or directory it cannot read or write raises
:class:`~muscle_mem_ros.errors.StoreAccessError` naming the cause.

Recordings cut short: each recording names its owner (:mod:`.owners`), so a
recording another live process is making is told apart from one whose process
died. Abandoned ones are purged on open once older than ``abandoned_retention``
and on demand by :meth:`SqliteStore.purge_abandoned`.

Read-only (``read_only=True``, for inspection tools): the file is opened with
SQLite's ``mode=ro``, so its bytes are never written: no migration (a file of an
older schema is refused), no purge, no lock files, and every write raises
:class:`~muscle_mem_ros.errors.StoreAccessError`. SQLite may still create the
``-wal`` and ``-shm`` files next to a WAL database, as it does for any reader.

Loading is lazy: opening reads only the header and meta table; the children
of a tree node are read on first use and then cached (and kept up to date by
this store's own writes).

Opening the file (creating it, access rights, PRAGMAs, migration) is :mod:`.sqlfile`;
this module holds the store's queries on the opened file.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
import itertools
import logging
import os
from pathlib import Path
import sqlite3
import threading
import time
from typing import Any

from . import sqlwrites
from .base import Batching, check_step, NodeList, Recording, RecordingInfo
from .bodysql import SqlBodies
from .childcache import ChildCache, Key
from .codec import (NODE_COLS, node_from_row, STEP_COLS, step_row, TRAJ_COLS,
                    trajectory_from_row)
from .failedsql import SqlFailedViews
from .gcpause import gc_paused
from .keptsql import sqlite_ranges, SqlKept
from .legacy import Dropped
from .owners import HOST, Owner
from .sourcesql import SqlSources
from .sqlfile import open_file, transaction
from .trustsql import SqlTrust
from ..errors import StoreAccessError, StoreCorruptError, StoreError, UnknownTrajectoryError
from ..records import Node, Step, TaskStats, TrajectoryInfo

__all__ = ['DEFAULT_ABANDONED_RETENTION', 'SqliteStore']

DEFAULT_ABANDONED_RETENTION = 7 * 24 * 3600.0
"""Seconds after which an abandoned incomplete recording is purged on open (7 days)."""

_log = logging.getLogger(__name__)
_store_ids = itertools.count(1)


class _SqliteRecording(Recording):

    def __init__(self, store: SqliteStore, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._store = store

    def append(self, step: Step) -> None:
        self._ensure_open()
        check_step(step)
        store = self._store
        with store._lock, store._write():
            store._conn.execute(
                f'INSERT INTO recording_steps (recording, seq, {STEP_COLS})'
                ' VALUES (?,?,?,?,?,?,?,?,?,?,?,?)',
                (self.id, len(self.steps), *step_row(step, store.allow_pickle)))
        self.steps.append(step)

    def commit(self) -> TrajectoryInfo:
        self._ensure_open()
        store = self._store
        with store._lock:
            with store._write():
                info, touched = sqlwrites.merge(
                    store._conn, self.task, self.variant, self.params_json, self.parent,
                    self.steps, allow_pickle=store.allow_pickle, body=self.body)
                store._delete_recording(self.id)
            store._refresh(touched)
        self._closed = True
        return info

    def discard(self) -> None:
        self._ensure_open()
        store = self._store
        with store._lock, store._write():
            store._delete_recording(self.id)
        self._closed = True


class SqliteStore(Batching, SqlTrust, SqlKept, SqlBodies, SqlSources, SqlFailedViews):
    """
    Trajectory trees in an SQLite file (WAL), safe for several threads and processes.

    :param path: Store file (kept as ``file``); missing directories are created (0700),
        a new file is 0600; ``~`` is expanded.
    :param synchronous: SQLite ``synchronous`` level. ``NORMAL`` (default) survives a
        process crash; ``FULL`` also survives power loss, slower.
    :param timeout: Seconds to wait for another process's write lock.
    :param allow_pickle: Store user captures and call arguments that are not JSON data or
        NumPy arrays by pickling them, and unpickle such values when reading. Only for
        files you trust as you would any pickle (Python API); the ROS node never sets it.
        Recorded in the file's meta table.
    :param abandoned_retention: Seconds; on open, incomplete recordings whose process is
        gone and that started longer ago than this are deleted. None keeps them.
    :param read_only: Open without ever writing the file (see the module docstring): a
        missing file, or one of an older schema, raises instead of being created or migrated.
    :ivar backup: Path of the copy made before a schema migration on open, or None.
    :ivar migration_dropped: What that migration could not convert (None if none ran).
    :ivar purged: Abandoned recordings deleted on open.
    :raises StoreAccessError: The file or its directory cannot be read or written
        (permission denied, read-only); the message names which.
    :raises StoreCorruptError: Not a store, unreadable, or corrupt (file untouched).
    :raises StoreVersionError: Written by a newer schema (file untouched).
    """

    _kept_ranges = staticmethod(sqlite_ranges)

    def __init__(
        self,
        *,
        path: str | os.PathLike[str],
        synchronous: str = 'NORMAL',
        timeout: float = 30.0,
        allow_pickle: bool = False,
        abandoned_retention: float | None = DEFAULT_ABANDONED_RETENTION,
        read_only: bool = False,
    ) -> None:
        if synchronous.upper() not in ('OFF', 'NORMAL', 'FULL', 'EXTRA'):
            raise ValueError(
                f'synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}')
        self.file = Path(path).expanduser()
        self._lock = threading.RLock()
        self._uid = next(_store_ids)
        self._cache = ChildCache(uid=self._uid)
        self._batch_depth = 0
        self._allow_pickle = bool(allow_pickle)
        self._owner = Owner(self.file)
        self._read_only = bool(read_only)
        self.purged = 0
        opened = open_file(self.file, synchronous=synchronous.upper(), timeout=timeout,
                           allow_pickle=self._allow_pickle, read_only=self._read_only)
        self._conn = opened.conn
        self.backup: Path | None = opened.backup
        self.migration_dropped: Dropped | None = opened.migration_dropped
        self._data_version = self._conn.execute('PRAGMA data_version').fetchone()[0]
        if abandoned_retention is not None and not self._read_only:
            try:
                self.purged = self.purge_abandoned(older_than=abandoned_retention)
                if not self.purged:
                    self._sweep_owners()
            except StoreError as err:
                _log.warning('%s: could not purge abandoned recordings: %s', self.file, err)

    def _sweep_owners(self) -> None:
        """Delete lock files of stopped processes that no recording names (see :mod:`.owners`)."""
        with self._reading() as conn:
            names = {r[0] for r in conn.execute('SELECT DISTINCT owner FROM recordings')}
        self._owner.sweep({n for n in names if n is not None})

    @property
    def allow_pickle(self) -> bool:
        """Return True if this store pickles (and unpickles) values that are not JSON or NumPy."""
        return self._allow_pickle

    @property
    def read_only(self) -> bool:
        """Return True if this store was opened read-only (every write raises)."""
        return self._read_only

    @contextmanager
    def _write(self) -> Iterator[None]:
        """Run the body in a write transaction (or inside the current batch)."""
        if self._read_only:
            raise StoreAccessError(f'{self.file}: the store was opened read-only')
        if self._batch_depth:
            yield
            return
        with transaction(self._conn, self.file, self._invalidate):
            yield

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """Yield the connection inside a write transaction (or the current batch)."""
        with self._reading() as conn, self._write():
            yield conn

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """Hold the lock and yield the connection, the caches dropped if another wrote."""
        with self._lock:
            try:
                if not self._batch_depth:
                    version = self._conn.execute('PRAGMA data_version').fetchone()[0]
                    if version != self._data_version:
                        self._data_version = version
                        self._invalidate()
                yield self._conn
            except sqlite3.OperationalError as err:
                raise StoreError(f'{self.file}: store operation failed: {err}') from err
            except sqlite3.DatabaseError as err:
                raise StoreCorruptError(f'{self.file}: store is corrupt: {err}') from err

    def _invalidate(self) -> None:
        self._cache.clear()

    def children(self, *, task: str, variant: str, parent: int | None) -> NodeList:
        """Return the children of ``parent``, oldest first (loaded once, then cached)."""
        with self._reading():
            return self._cache.view(self._load_kids(task, variant, parent))

    def _node(self, row: tuple[Any, ...]) -> Node:
        """Decode one node row; a row that cannot be read safely names itself in the error."""
        try:
            return node_from_row(row, self._allow_pickle)
        except StoreError as err:
            raise type(err)(f'{self.file}: node {row[0]}: {err}') from err

    def _load_kids(self, task: str, variant: str, parent: int | None) -> Key:
        key = (task, variant, parent)
        if not self._cache.has(key):
            kept = self._kept(self._conn, task, variant) if parent is None else None
            if kept is not None:  # a large tree's first steps, kept: read a node when asked
                self._cache.put_kept(key, kept[0], [self._node(r) for r in kept[1]],
                                     partial(self._fill, kept[0].ids))
                return key
            rows = sqlwrites.children_rows(self._conn, task, variant, parent)
            with gc_paused():
                self._cache.put(key, [self._node(r) for r in rows])
        return key

    def preload(self, *, task: str | None = None) -> int:
        """
        Load the first steps of every (task, variant) tree, or of one task's trees.

        Large trees' first steps are kept as columns for the next open (:mod:`.columns`).
        """
        with self._reading() as conn:
            if task is None:
                keys = conn.execute('SELECT DISTINCT task, variant FROM trajectories').fetchall()
            else:
                keys = conn.execute('SELECT DISTINCT task, variant FROM trajectories'
                                    ' WHERE task = ?', (task,)).fetchall()
            count = sum(self._cache.size(self._load_kids(t, v, None)) for t, v in keys)
        self._keep_first_steps()
        return count

    def node(self, node_id: int) -> Node:
        """Return one node."""
        with self._reading() as conn:
            cached = self._cache.node(node_id)
            if cached is not None:
                return cached
            row = conn.execute(f'SELECT {NODE_COLS} FROM nodes WHERE id = ?',
                               (node_id,)).fetchone()
            if row is None:
                raise UnknownTrajectoryError(f'no node with id {node_id}')
            return self._node(row)

    def begin(
        self, *, task: str, variant: str, params_json: str, parent: int | None = None,
        body: str = '',
    ) -> Recording:
        """Start a recording under ``parent``; its steps are durable as they come."""
        if self._read_only:
            raise StoreAccessError(f'{self.file}: the store was opened read-only')
        with self._reading() as conn:
            sqlwrites.check_parent(self._conn, task, variant, parent)
            try:
                self._owner.hold()
            except OSError as err:
                raise StoreError(f'{self.file}: cannot take the recording lock in '
                                 f'{self._owner.dir}: {err}') from err
            with self._write():
                cur = conn.execute(
                    'INSERT INTO recordings (task, variant, params_json, parent, started, owner,'
                    ' owner_pid, owner_host) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
                    (task, variant, params_json, parent, time.time(), self._owner.token,
                     self._owner.pid, HOST))
            return _SqliteRecording(self, id=cur.lastrowid, task=task, variant=variant,
                                    params_json=params_json, parent=parent, body=body)

    def add_trajectory(
        self,
        *,
        task: str,
        variant: str,
        params_json: str,
        steps: Sequence[Step],
        parent: int | None = None,
        body: str = '',
    ) -> TrajectoryInfo:
        """Merge a complete list of steps in one transaction."""
        steps = [check_step(s) for s in steps]
        with self._reading():
            sqlwrites.check_parent(self._conn, task, variant, parent)
            with self._write():
                info, touched = sqlwrites.merge(self._conn, task, variant, params_json, parent,
                                                steps, allow_pickle=self._allow_pickle,
                                                body=body)
            self._refresh(touched)
            return info

    def _refresh(self, node_ids: Sequence[int]) -> None:
        """Bring cached child lists up to date with nodes this store just wrote."""
        if not node_ids or not self._cache:
            return
        marks = ','.join('?' * len(node_ids))
        self._cache.place(self._conn.execute(
            f'SELECT {NODE_COLS} FROM nodes WHERE id IN ({marks}) ORDER BY id',
            list(node_ids)).fetchall(), self._node)

    def _delete_recording(self, recording_id: int) -> None:
        self._conn.execute('DELETE FROM recording_steps WHERE recording = ?', (recording_id,))
        self._conn.execute('DELETE FROM recordings WHERE id = ?', (recording_id,))

    def trajectory(self, trajectory_id: int) -> TrajectoryInfo:
        """Return one trajectory."""
        with self._reading() as conn:
            row = conn.execute(f'SELECT {TRAJ_COLS} FROM trajectories WHERE id = ?',
                               (trajectory_id,)).fetchone()
            if row is None:
                raise UnknownTrajectoryError(f'no trajectory with id {trajectory_id}')
            return trajectory_from_row(row)

    def trajectories(self, *, task: str | None = None, variant: str | None = None,
                     after: int = 0, limit: int | None = None) -> list[TrajectoryInfo]:
        """Return every trajectory (of one task, of one tree, newer than ``after``)."""
        with self._reading() as conn:
            return [trajectory_from_row(r) for r in sqlwrites.trajectory_rows(
                conn, TRAJ_COLS, task, variant, after, limit)]

    def tally(self, *, task: str, variant: str) -> tuple[int, int]:
        """Return (count, sum of ids) of a tree's trajectories."""
        with self._reading() as conn:
            return sqlwrites.tally(conn, task, variant)

    def trees(self, *, task: str) -> dict[str, tuple[int, int]]:
        """Return a task's trees: variant -> (count, sum of ids)."""
        with self._reading() as conn:
            return sqlwrites.trees(conn, task)

    def trajectory_ending_at(self, node_id: int) -> TrajectoryInfo | None:
        """Return the trajectory whose last node is ``node_id``, if any."""
        with self._reading() as conn:
            row = conn.execute(f'SELECT {TRAJ_COLS} FROM trajectories WHERE leaf = ?',
                               (node_id,)).fetchone()
            return None if row is None else trajectory_from_row(row)

    def tasks(self) -> list[TaskStats]:
        """Return per-task counters, sorted by name."""
        with self._reading() as conn:
            return sqlwrites.task_stats(conn)

    def forget(self, *, task: str, trajectory_id: int | None = None) -> int:
        """Remove one trajectory or all of a task."""
        with self._reading() as conn:
            with self._write():
                n = sqlwrites.forget(conn, task, trajectory_id)
            self._invalidate()
            return n

    def note_replay(self, *, trajectory_id: int) -> None:
        """Bump counters and recency along a replayed trajectory."""
        info = self.trajectory(trajectory_id)
        now = time.time()
        with self._reading() as conn:
            with self._write():
                sqlwrites.count_replay(conn, info, now)
            self._refresh(info.node_ids)

    def note_outcome(self, *, task: str, hit: bool) -> None:
        """Count a hit or a miss."""
        column = 'hits' if hit else 'misses'
        with self._writing() as conn:
            conn.execute(
                f'INSERT INTO task_stats (task, {column}, last_used) VALUES (?, 1, ?)'
                f' ON CONFLICT(task) DO UPDATE SET {column} = {column} + 1,'
                ' last_used = excluded.last_used', (task, time.time()))

    def incomplete_recordings(self) -> list[RecordingInfo]:
        """
        Return recordings started and never committed or discarded (by any process).

        ``live`` tells one whose store is still open in a running process (this
        one or another: its owner lock is held, see :mod:`.owners`) from one
        abandoned by a process that stopped.
        """
        return [info for info, _ in self._recordings()]

    def _recordings(self) -> list[tuple[RecordingInfo, str | None]]:
        with self._reading() as conn:
            rows = conn.execute(
                'SELECT r.id, r.task, r.variant, r.parent, r.started,'
                ' (SELECT count(*) FROM recording_steps s WHERE s.recording = r.id),'
                ' r.owner, r.owner_pid, r.owner_host FROM recordings r ORDER BY r.id').fetchall()
        out = []
        for row in rows:
            token, pid, host = row[6:9]
            owner = f'pid {pid} on host {host}' if pid is not None else 'unknown (older schema)'
            live = self._owner.alive(token, pid, host)
            out.append((RecordingInfo(id=row[0], task=row[1], variant=row[2], parent=row[3],
                                      started=row[4], step_count=row[5], live=live,
                                      owner=owner), token))
        return out

    def purge_abandoned(self, *, older_than: float = 0.0) -> int:
        """
        Delete incomplete recordings whose process is gone, started over ``older_than`` s ago.

        A recording another running process is making (its owner lock is held)
        is never deleted. Nothing of an incomplete recording was ever in the
        tree, so no trajectory changes.

        :param older_than: Seconds; 0 deletes every abandoned recording.
        :return: How many were deleted.
        :raises StoreError: the deletion failed (for example a read-only file).
        """
        cutoff = time.time() - max(0.0, float(older_than))
        doomed = [(info.id, token) for info, token in self._recordings()
                  if not info.live and info.started <= cutoff]
        if not doomed:
            return 0
        with self._lock, self._write():
            for rec_id, _ in doomed:
                self._delete_recording(rec_id)
        self._sweep_owners()
        _log.info('%s: purged %d abandoned incomplete recording(s)', self.file, len(doomed))
        return len(doomed)

    def recording_steps(self, recording_id: int) -> list[Step]:
        """Return the steps an (incomplete) recording wrote, for inspection."""
        with self._reading() as conn:
            return sqlwrites.recording_steps(conn, recording_id, self._allow_pickle)

    def close(self) -> None:
        """Close the connection (checkpointing the WAL); keep large trees' first steps."""
        with self._lock:
            self._keep_first_steps()
            self._invalidate()
            try:
                self._conn.close()
            except sqlite3.Error as err:
                _log.warning('%s: error closing store: %s', self.file, err)
            self._owner.release()
