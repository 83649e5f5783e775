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
Fleet store: trajectory trees in a PostgreSQL database shared by many robots.

Same tree model, dedupe rule and safe row formats as the SQLite store (the
merge is :func:`..sqlwrites.merge`, the rows :mod:`..codec`): nothing read from the
database is ever unpickled, so a robot that writes rows cannot run code on the
others. The tables live in their own namespace (:mod:`.schema`).

Sharing:

* Every merge runs in one transaction holding an advisory lock on its task, and
  a unique index on (task, variant, parent, signature) backs the dedupe rule:
  robots learning the same task at once all keep their branches, an identical
  run is stored once, and no tree node is overwritten.
* Each write announces itself with ``NOTIFY`` (delivered at commit). A
  background thread listens (``LISTEN``) and brings this store's cached children up to
  date (new nodes appended, a forgotten task's cache dropped), so a trajectory
  another robot commits is replayable here within a notification's latency.
* Each trajectory, node and recording names the ``robot_id`` that recorded it.

Faults: when the server goes away, calls that need it raise
:class:`~muscle_mem_ros.errors.StoreUnavailableError` at once (no blocking),
children already cached keep serving (a running replay finishes from what it
loaded), steps of a recording in progress are kept in memory, and a recording
committed meanwhile is kept in memory and committed when the server is back
(:attr:`PostgresStore.pending`); one still pending when the store is closed is
logged as lost, loudly. The background thread reconnects with exponential
backoff (the connections and their state are :mod:`.link`);
:meth:`PostgresStore.diagnostics` reports the state. The password (URL,
``PGPASSWORD`` or ``~/.pgpass``, as libpq reads them) never appears in a message:
URLs are shown through :func:`~.link.redact`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
import itertools
import json
import logging
import threading
import time
from typing import Any, ContextManager
import uuid

from . import recording as recordings
from . import schema as pgschema
from .link import PgConn, PgLink, redact
from .reads import LastKnownReads
from .recording import Offline, Pending, PgRecording, StoreSide
from .. import sqlwrites
from ..base import Batching, check_step, NodeList, Recording, RecordingInfo
from ..bodysql import SqlBodies
from ..childcache import ChildCache, Key
from ..codec import NODE_COLS, node_from_row
from ..failedsql import SqlFailedViews
from ..gcpause import gc_paused
from ..keptsql import pg_ranges, SqlKept
from ..sourcesql import SqlSources
from ..trustsql import SqlTrust
from ...errors import StoreError, StoreUnavailableError, UnknownTrajectoryError
from ...records import Node, Step, TrajectoryInfo

__all__ = ['PostgresStore']

_log = logging.getLogger(__name__)
_store_ids = itertools.count(1)
TREE_LIMIT = 5000
"""A tree of at most this many nodes is loaded whole on its first lookup."""
_NOTIFY_LIMIT = 7000
"""Largest NOTIFY payload sent with node ids (the server's limit is 8000 bytes)."""


class PostgresStore(Batching, LastKnownReads, SqlTrust, SqlKept, SqlBodies,
                    SqlSources, SqlFailedViews):
    """
    Trajectory trees in PostgreSQL, shared by a fleet; thread-safe.

    :param url: libpq URL, ``postgresql://user@host:port/db`` (password from the URL,
        ``PGPASSWORD`` or ``~/.pgpass``).
    :param robot_id: Who this store records for, written with every recording.
    :param connect_timeout: Seconds to wait for the server when (re)connecting.
    :param retry_min: First reconnection delay, seconds (doubled up to ``retry_max``).
    :param retry_max: Longest reconnection delay, seconds.
    :param abandoned_retention: Seconds; on open, incomplete recordings of stores that
        disconnected and that started longer ago than this are deleted. None keeps them.
    :param start_unreachable: When the server cannot be reached at open, start anyway
        (as if it had gone away: nothing loaded, recordings kept in memory) and check the
        schema once it answers; a newer or foreign schema then makes every call raise
        that error (and :meth:`diagnostics` show it). False: raise at open.
    :raises StoreUnavailableError: The server cannot be reached at open (and not
        ``start_unreachable``).
    :raises StoreVersionError: The database holds a newer schema (untouched).
    :raises StoreCorruptError: The namespace holds something that is not a store.
    """

    _kept_ranges = staticmethod(pg_ranges)

    def __init__(
        self,
        *,
        url: str,
        robot_id: str = '',
        connect_timeout: float = 3.0,
        retry_min: float = 0.25,
        retry_max: float = 10.0,
        abandoned_retention: float | None = None,
        start_unreachable: bool = False,
        read_only: bool = False,
    ) -> None:
        try:
            import psycopg
        except ImportError as err:
            raise StoreError('a postgresql:// store needs psycopg 3 (pip install '
                             "'psycopg[binary]', or apt install python3-psycopg)") from err
        self.url = redact(url)
        self.robot_id = robot_id
        self._token = uuid.uuid4().hex
        self._uid = next(_store_ids)
        self._lock = threading.RLock()
        self._cache = ChildCache(uid=self._uid)
        self._big: set[tuple[str, str]] = set()
        self._known: dict[int, TrajectoryInfo] = {}
        self._batch_depth = 0
        self._batch_merges = 0
        self._batch_tasks: set[str] = set()
        self._rec_ids = itertools.count(-1, -1)
        self.offline = Offline(url=self.url, merge=self._merge, lock=self._lock)
        self._side = StoreSide(db=self._db, write=self._write, merge=self._merge,
                               cached_steps=self._cached_steps, offline=self.offline,
                               allow_pickle=self.allow_pickle)
        self.purged = 0
        self.read_only = read_only
        self._link = PgLink(
            pg=psycopg, url=url, token=self._token, timeout=max(1, int(round(connect_timeout))),
            retry=(retry_min, retry_max), read_only=read_only, lock=self._lock,
            on_note=self._on_notify, on_reconnect=self._invalidate, on_idle=self._flush)
        if not self._link.connect(start_unreachable=start_unreachable) or read_only:
            abandoned_retention = None
        if abandoned_retention is not None:
            try:
                self.purged = self.purge_abandoned(older_than=abandoned_retention)
            except StoreError as err:
                _log.warning('%s: could not purge abandoned recordings: %s', self.url, err)

    # -- connection --------------------------------------------------------------------

    @property
    def available(self) -> bool:
        """Return True while the server is reachable (as far as the last call knew)."""
        return self._link.up

    def _task_writing(self, task: str) -> ContextManager[PgConn]:
        """Write with ``task`` locked: its commits (any robot's) wait (:mod:`..keptsql`)."""
        return self._write(task)

    def _db(self) -> ContextManager[PgConn]:
        """Hold the lock and yield a live connection (:meth:`.link.PgLink.db`)."""
        return self._link.db()

    def _reading(self) -> ContextManager[PgConn]:
        """Yield a live connection to read (:class:`~..trustsql.SqlTrust` reads with it)."""
        return self._db()

    def _writing(self) -> ContextManager[PgConn]:
        """Yield a connection in one write transaction (or the current batch's)."""
        return self._write()

    def _flush(self) -> None:
        """Commit the recordings kept while the server was away (the listener calls it)."""
        if self.offline.pending:
            self.offline.flush()

    @contextmanager
    def _write(self, task: str | None = None) -> Iterator[PgConn]:
        """Run the body in one transaction (or the current batch's), locking ``task``."""
        with self._db() as conn:
            if self._batch_depth:
                if task is not None:
                    self._task_lock(conn, task)
                    self._batch_tasks.add(task)
                yield conn
                return
            with conn.raw.transaction():
                if task is not None:
                    self._task_lock(conn, task)
                yield conn

    @staticmethod
    def _task_lock(conn: PgConn, task: str) -> None:
        conn.execute('SELECT pg_advisory_xact_lock(?, hashtext(?))', (pgschema.LOCK_CLASS, task))

    def _notify(self, conn: PgConn, kind: str, task: str, nodes: Sequence[int] = ()) -> None:
        """Announce a change (sent when the transaction commits)."""
        if self._batch_depth:
            return
        payload = json.dumps({'o': self._token, 'k': kind, 't': task, 'n': list(nodes)})
        if len(payload.encode()) > _NOTIFY_LIMIT:
            payload = json.dumps({'o': self._token, 'k': 'task', 't': task, 'n': []})
        conn.execute('SELECT pg_notify(?, ?)', (pgschema.CHANNEL, payload))

    # -- other stores' changes ----------------------------------------------------------

    def _on_notify(self, raw: Any, payload: str) -> None:
        try:
            note = json.loads(payload)
            origin, kind, task, nodes = note['o'], note['k'], note['t'], note['n']
        except (ValueError, KeyError, TypeError):
            _log.warning('%s: ignored a malformed notification', self.url)
            return
        if origin == self._token:
            return
        if kind == 'add' and nodes:
            rows = raw.execute(f'SELECT {NODE_COLS} FROM nodes WHERE id = ANY(%s) ORDER BY id',
                               ([int(n) for n in nodes],)).fetchall()
            with self._lock:
                self._apply(rows)
        else:
            with self._lock:
                self._drop_task(task)

    # -- cache ---------------------------------------------------------------------------

    def _invalidate(self) -> None:
        self._known.clear()
        self._cache.clear()

    def _drop_task(self, task: str) -> None:
        for tid in [i for i, t in self._known.items() if t.task == task]:
            del self._known[tid]
        self._cache.drop(task)

    def _apply(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Put freshly read node rows into the cached child lists (a whole tree stays whole)."""
        self._cache.place(rows, self._node, leaves=lambda key: key[:2] not in self._big)

    def _refresh(self, conn: PgConn, node_ids: Sequence[int]) -> None:
        if node_ids and self._cache:
            self._apply(conn.raw.execute(
                f'SELECT {NODE_COLS} FROM nodes WHERE id = ANY(%s) ORDER BY id',
                (list(node_ids),)).fetchall())

    def _node(self, row: tuple[Any, ...]) -> Node:
        try:
            return node_from_row(row)
        except StoreError as err:
            raise type(err)(f'{self.url}: node {row[0]}: {err}') from err

    def children(self, *, task: str, variant: str, parent: int | None) -> NodeList:
        """
        Return the children of ``parent``, oldest first (cached, kept current by NOTIFY).

        While the server is away, children not loaded before are an empty list.
        """
        key = (task, variant, parent)
        with self._lock:
            if not self._cache.has(key):
                try:
                    with self._db() as conn:
                        self._load(conn, key)
                except StoreUnavailableError:
                    # Nothing loaded here: a miss (the agent is asked, its steps kept
                    # in memory) rather than a failed task. Not cached.
                    return NodeList((), key=self._cache.fresh_key(key))
            return self._cache.view(key)

    def _load(self, conn: PgConn, key: Key) -> Key:
        task, variant, parent = key
        if not self._cache.has(key) and parent is None:
            kept = self._kept(conn, task, variant)
            if kept is not None:  # a large tree's first steps, kept: read a node when asked
                self._cache.put_kept(key, kept[0], [self._node(r) for r in kept[1]],
                                     partial(self._fill, kept[0].ids))
        if not self._cache.has(key) and parent is None and (task, variant) not in self._big:
            self._load_tree(conn, task, variant)
        if not self._cache.has(key):
            rows = sqlwrites.children_rows(conn, task, variant, parent)
            with gc_paused():
                self._cache.put(key, [self._node(r) for r in rows])
        return key

    def _load_tree(self, conn: PgConn, task: str, variant: str) -> None:
        """
        Load a whole tree of up to :data:`TREE_LIMIT` nodes at once; None if it is larger.

        One round trip instead of one per level, and a replay that started can
        finish from memory if the server goes away. A larger tree is loaded level
        by level (and remembered as large).
        """
        size = conn.execute('SELECT count(*) FROM (SELECT 1 FROM nodes WHERE task = ? AND'
                            ' variant = ? LIMIT ?) AS t', (task, variant, TREE_LIMIT + 1)
                            ).fetchone()[0]
        if size > TREE_LIMIT:
            self._big.add((task, variant))
            return
        rows = conn.execute(f'SELECT {NODE_COLS} FROM nodes WHERE task = ? AND variant = ?'
                            ' ORDER BY id', (task, variant)).fetchall()
        with gc_paused():
            nodes = [self._node(r) for r in rows]
        groups: dict[int | None, list[Node]] = {None: []}
        for n in nodes:
            groups.setdefault(n.id, [])
            groups.setdefault(n.parent, []).append(n)
        for parent, members in groups.items():
            self._cache.put((task, variant, parent), members)

    def preload(self, *, task: str | None = None) -> int:
        """
        Load the first steps of every (task, variant) tree, or of one task's trees.

        Large trees' first steps are kept as columns for the next open (:mod:`..columns`).
        """
        with self._db() as conn:
            sql = 'SELECT DISTINCT task, variant FROM trajectories'
            keys = (conn.execute(sql).fetchall() if task is None else
                    conn.execute(sql + ' WHERE task = ?', (task,)).fetchall())
            count = sum(self._cache.size(self._load(conn, (t, v, None))) for t, v in keys)
        self._keep_first_steps()
        return count

    def node(self, node_id: int) -> Node:
        """Return one node, from the cache when its parent's children are loaded."""
        with self._lock:
            cached = self._cache.node(node_id)
            if cached is not None:
                return cached
            with self._db() as conn:
                row = conn.execute(f'SELECT {NODE_COLS} FROM nodes WHERE id = ?',
                                   (node_id,)).fetchone()
            if row is None:
                raise UnknownTrajectoryError(f'no node with id {node_id}')
            return self._node(row)

    def _cached_steps(self, node_id: int | None) -> list[Step] | None:
        """Return the steps from the root to ``node_id`` if all are cached, else None."""
        steps: list[Step] = []
        while node_id is not None:
            node = self._cache.node(node_id)
            if node is None:
                return None
            steps.append(node.step)
            node_id = node.parent
        steps.reverse()
        return steps

    # -- writes ----------------------------------------------------------------------------

    def begin(
        self, *, task: str, variant: str, params_json: str, parent: int | None = None,
        body: str = '',
    ) -> Recording:
        """Start a recording; its steps are written as they come (kept in memory if down)."""
        try:
            with self._write() as conn:
                sqlwrites.check_parent(conn, task, variant, parent)
                rec_id = recordings.insert(conn, task, variant, params_json, parent,
                                           owner=self._token, robot_id=self.robot_id)
            remote = True
        except StoreUnavailableError:
            rec_id, remote = next(self._rec_ids), False
            _log.warning('%s: database unreachable: recording %d of task %r is kept in memory',
                         self.url, rec_id, task)
        return PgRecording(self._side, remote=remote, id=rec_id, task=task, variant=variant,
                           params_json=params_json, parent=parent, body=body)

    def _merge(self, task: str, variant: str, params_json: str, parent: int | None,
               steps: Sequence[Step], *, recording: int | None = None,
               body: str = '') -> TrajectoryInfo:
        with self._write(task) as conn:
            info, touched = sqlwrites.merge(conn, task, variant, params_json, parent, steps,
                                            robot_id=self.robot_id, body=body)
            if recording is not None:
                recordings.delete(conn, recording)
            self._notify(conn, 'add', task, touched)
            if self._batch_depth:
                self._batch_merges += 1
                if self._batch_merges >= 512 and not self._batch_merges & (
                        self._batch_merges - 1):
                    # A bulk load is one transaction: autovacuum never sees its rows, so the
                    # planner would go on thinking the tables empty and scan them for every
                    # dedupe lookup (quadratic). ANALYZE counts this transaction's own rows;
                    # at 512, 1024, 2048, ... merges the estimates stay within 2x.
                    conn.execute('ANALYZE nodes')
                    conn.execute('ANALYZE trajectories')
        with self._lock:
            if self._link.conn is not None:
                try:
                    self._refresh(self._link.conn, touched)
                except self._link.pg.Error:
                    self._drop_task(task)
        return info

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
        return self._merge(task, variant, params_json, parent, [check_step(s) for s in steps],
                           body=body)

    def _batch_done(self, conn: PgConn) -> None:
        """Tell the other stores which tasks the batch touched (they reload them)."""
        tasks, self._batch_tasks = self._batch_tasks, set()
        for task in sorted(tasks):
            self._notify(conn, 'task', task)

    def forget(self, *, task: str, trajectory_id: int | None = None) -> int:
        """Remove one trajectory or all of a task; every robot's cache drops the task."""
        with self._write(task) as conn:
            n = sqlwrites.forget(conn, task, trajectory_id)
            self._notify(conn, 'forget', task)
        with self._lock:
            self._drop_task(task)
        return n

    def note_replay(self, *, trajectory_id: int) -> None:
        """Bump counters and recency along a replayed trajectory."""
        info = self.trajectory(trajectory_id)
        now = time.time()
        with self._write() as conn:
            sqlwrites.count_replay(conn, info, now)
            self._refresh(conn, info.node_ids)

    def note_outcome(self, *, task: str, hit: bool) -> None:
        """Count a hit or a miss."""
        column = 'hits' if hit else 'misses'
        with self._write() as conn:
            conn.execute(
                f'INSERT INTO task_stats (task, {column}, last_used) VALUES (?, 1, ?)'
                f' ON CONFLICT (task) DO UPDATE SET {column} = task_stats.{column} + 1,'
                ' last_used = excluded.last_used', (task, time.time()))

    def incomplete_recordings(self) -> list[RecordingInfo]:
        """Return recordings never committed; ``live`` while their store is still connected."""
        with self._db() as conn:
            return recordings.incomplete(conn)

    def purge_abandoned(self, *, older_than: float = 0.0) -> int:
        """Delete incomplete recordings whose store disconnected, begun ``older_than`` s ago."""
        cutoff = time.time() - max(0.0, float(older_than))
        doomed = [r.id for r in self.incomplete_recordings()
                  if not r.live and r.started <= cutoff]
        if doomed:
            with self._write() as conn:
                for rec_id in doomed:
                    recordings.delete(conn, rec_id)
            _log.info('%s: purged %d abandoned incomplete recording(s)', self.url, len(doomed))
        return len(doomed)

    def recording_steps(self, recording_id: int) -> list[Step]:
        """Return the steps an (incomplete) recording wrote, for inspection."""
        with self._db() as conn:
            return sqlwrites.recording_steps(conn, recording_id)

    def diagnostics(self) -> dict[str, str]:
        """
        Return the connection state for ``/diagnostics`` (never raises, never the password).

        :return: ``store_backend``, ``store_url``, ``robot_id``, ``store_connection``
            (``ok`` or ``unreachable ...``) and ``store_pending_recordings``.
        """
        state = self._link.state()
        return {'store_backend': 'postgresql', 'store_url': self.url, 'robot_id': self.robot_id,
                'store_connection': state,
                'store_pending_recordings': str(len(self.offline.pending))}

    @property
    def pending(self) -> list[Pending]:
        """Return the recordings kept while the server was away, not committed yet."""
        return self.offline.pending

    @property
    def lost(self) -> list[Pending]:
        """Return the kept recordings that could not be committed."""
        return self.offline.lost

    def wait_listening(self, timeout: float) -> bool:
        """Wait until the listener is connected (tests, benchmarks); True if it is."""
        return self._link.listening.wait(timeout)

    def close(self) -> None:
        """Stop listening and close; recordings still kept in memory are reported lost."""
        self._link.stop()
        with self._lock:
            if self._link.up:
                self._keep_first_steps()
            if self.offline.pending:
                self.offline.close(self._link.up)
            self._invalidate()
            self._link.close()
