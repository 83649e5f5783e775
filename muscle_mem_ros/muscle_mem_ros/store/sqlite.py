"""Persistent store: one SQLite file in WAL mode.

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

Snapshots are stored with :mod:`pickle`, including Python API user captures
and call arguments (the step payload): open only store files you trust, as
you would any pickle.

Loading is lazy: opening reads only the header and meta table; the children
of a tree node are read on first use and then cached (and kept up to date by
this store's own writes).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
import itertools
import logging
import os
from pathlib import Path
import sqlite3
import threading
import time
from typing import Any

from ..bulk import gc_paused
from ..errors import StoreCorruptError, StoreError, UnknownTrajectoryError
from ..records import Node, Step, TaskStats, TrajectoryInfo
from . import schema, sqltree
from .base import NodeList, Recording, RecordingInfo, Store, check_step
from .codec import NODE_COLS, TRAJ_COLS, node_from_row, step_row, trajectory_from_row

__all__ = ['SqliteStore']

_log = logging.getLogger(__name__)
_store_ids = itertools.count(1)



@dataclass
class _Kids:
    """Cached children of one tree node."""

    nodes: list[Node]
    index: dict[int, int] = field(default_factory=dict)
    gen: int = 0
    view: NodeList | None = None


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
                'INSERT INTO recording_steps (recording, seq, tool, kind, type_name, payload,'
                ' payload_json, pre, post, status, duration) VALUES (?,?,?,?,?,?,?,?,?,?,?)',
                (self.id, len(self.steps), *step_row(step)))
        self.steps.append(step)

    def commit(self) -> TrajectoryInfo:
        self._ensure_open()
        store = self._store
        with store._lock:
            with store._write():
                info, touched = sqltree.merge(store._conn, self.task, self.variant,
                                             self.params_json, self.parent, self.steps)
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


class SqliteStore(Store):
    """Trajectory trees in an SQLite file (WAL), safe for several threads and processes.

    Args:
        path: Store file (kept as ``file``); parent directories are created; ``~`` is
            expanded.
        synchronous: SQLite ``synchronous`` level. ``NORMAL`` (default) survives
            a process crash; ``FULL`` also survives power loss, slower.
        timeout: Seconds to wait for another process's write lock.

    Raises:
        StoreCorruptError: Not a store, unreadable, or corrupt (file untouched).
        StoreVersionError: Written by a newer schema (file untouched).
    """

    def __init__(
        self, *, path: str | os.PathLike[str], synchronous: str = 'NORMAL', timeout: float = 30.0,
    ) -> None:
        if synchronous.upper() not in ('OFF', 'NORMAL', 'FULL', 'EXTRA'):
            raise ValueError(
                f'synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}')
        self.file = Path(path).expanduser()
        self._lock = threading.RLock()
        self._uid = next(_store_ids)
        self._gens = itertools.count(1)
        self._kids: dict[tuple[str, str, int | None], _Kids] = {}
        self._where: dict[int, tuple[str, str, int | None]] = {}
        self._batch_depth = 0
        fresh = schema.inspect_file(self.file)
        if fresh:
            try:
                self.file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise StoreError(f'{self.file}: cannot create directory: {err}') from err
        try:
            self._conn = sqlite3.connect(str(self.file), timeout=timeout, isolation_level=None,
                                         check_same_thread=False)
        except sqlite3.Error as err:
            raise StoreCorruptError(f'{self.file}: cannot open store: {err}') from err
        try:
            self._open(fresh, synchronous.upper())
        except BaseException:
            self._conn.close()
            raise
        self._data_version = self._conn.execute('PRAGMA data_version').fetchone()[0]

    def _open(self, fresh: bool, synchronous: str) -> None:
        conn = self._conn
        version = 0 if fresh else schema.verify(conn, self.file)
        try:
            if conn.execute('PRAGMA journal_mode').fetchone()[0].lower() != 'wal':
                conn.execute('PRAGMA journal_mode = WAL')
            conn.execute(f'PRAGMA synchronous = {synchronous}')
            if version < schema.SCHEMA_VERSION:
                _log.info('%s: migrating store schema %d -> %d', self.file, version,
                          schema.SCHEMA_VERSION)
                schema.migrate(conn, current=version)
                conn.execute('PRAGMA wal_checkpoint(TRUNCATE)')
        except sqlite3.Error as err:
            raise StoreError(f'{self.file}: cannot initialize store: {err}') from err

    @contextmanager
    def _write(self) -> Iterator[None]:
        """Run the body in a write transaction (or inside the current batch)."""
        if self._batch_depth:
            yield
            return
        try:
            self._conn.execute('BEGIN IMMEDIATE')
        except sqlite3.Error as err:
            raise StoreError(f'{self.file}: cannot start a write: {err}') from err
        try:
            yield
            self._conn.execute('COMMIT')
        except sqlite3.Error as err:
            self._rollback()
            raise StoreError(f'{self.file}: write failed: {err}') from err
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        try:
            self._conn.execute('ROLLBACK')
        except sqlite3.Error:
            pass
        self._invalidate()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group many writes (appends, commits, add_trajectory) into one transaction."""
        with self._lock:
            if self._batch_depth:
                self._batch_depth += 1
                try:
                    yield
                finally:
                    self._batch_depth -= 1
                return
            with self._write():
                self._batch_depth = 1
                try:
                    yield
                finally:
                    self._batch_depth = 0

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
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
        self._kids.clear()
        self._where.clear()

    def children(self, *, task: str, variant: str, parent: int | None) -> NodeList:
        """Return the children of ``parent``, oldest first (loaded once, then cached)."""
        with self._reading():
            kids = self._load_kids(task, variant, parent)
            if kids.view is None:
                kids.view = NodeList(kids.nodes, key=(self._uid, task, variant, parent, kids.gen),
                                     family=(self._uid, task, variant, parent))
            return kids.view

    def _load_kids(self, task: str, variant: str, parent: int | None) -> _Kids:
        key = (task, variant, parent)
        kids = self._kids.get(key)
        if kids is None:
            rows = self._conn.execute(
                f'SELECT {NODE_COLS} FROM nodes WHERE task = ? AND variant = ? AND parent IS ?'
                ' ORDER BY id', key).fetchall()
            with gc_paused():
                nodes = [node_from_row(r) for r in rows]
            kids = _Kids(nodes=nodes, index={n.id: i for i, n in enumerate(nodes)},
                         gen=next(self._gens))
            self._kids[key] = kids
            for n in nodes:
                self._where[n.id] = key
        return kids

    def preload(self, *, task: str | None = None) -> int:
        """Load the first steps of every (task, variant) tree, or of one task's trees."""
        with self._reading() as conn:
            if task is None:
                keys = conn.execute('SELECT DISTINCT task, variant FROM trajectories').fetchall()
            else:
                keys = conn.execute('SELECT DISTINCT task, variant FROM trajectories'
                                    ' WHERE task = ?', (task,)).fetchall()
            return sum(len(self._load_kids(t, v, None).nodes) for t, v in keys)

    def node(self, node_id: int) -> Node:
        """Return one node."""
        with self._reading() as conn:
            key = self._where.get(node_id)
            if key is not None:
                kids = self._kids[key]
                return kids.nodes[kids.index[node_id]]
            row = conn.execute(f'SELECT {NODE_COLS} FROM nodes WHERE id = ?',
                               (node_id,)).fetchone()
            if row is None:
                raise UnknownTrajectoryError(f'no node with id {node_id}')
            return node_from_row(row)

    def begin(
        self, *, task: str, variant: str, params_json: str, parent: int | None = None,
    ) -> Recording:
        """Start a recording under ``parent``; its steps are durable as they come."""
        with self._reading() as conn:
            sqltree.check_parent(self._conn, task, variant, parent)
            with self._write():
                cur = conn.execute(
                    'INSERT INTO recordings (task, variant, params_json, parent, started)'
                    ' VALUES (?, ?, ?, ?, ?)', (task, variant, params_json, parent, time.time()))
            return _SqliteRecording(self, id=cur.lastrowid, task=task, variant=variant,
                                    params_json=params_json, parent=parent)

    def add_trajectory(
        self,
        *,
        task: str,
        variant: str,
        params_json: str,
        steps: Sequence[Step],
        parent: int | None = None,
    ) -> TrajectoryInfo:
        """Merge a complete list of steps in one transaction."""
        steps = [check_step(s) for s in steps]
        with self._reading():
            sqltree.check_parent(self._conn, task, variant, parent)
            with self._write():
                info, touched = sqltree.merge(self._conn, task, variant, params_json, parent,
                                              steps)
            self._refresh(touched)
            return info

    def _refresh(self, node_ids: Sequence[int]) -> None:
        """Bring cached child lists up to date with nodes this store just wrote."""
        if not node_ids or not self._kids:
            return
        marks = ','.join('?' * len(node_ids))
        rows = self._conn.execute(f'SELECT {NODE_COLS} FROM nodes WHERE id IN ({marks})',
                                  list(node_ids)).fetchall()
        for row in rows:
            key = (row[15], row[16], row[1])
            kids = self._kids.get(key)
            if kids is None:
                continue
            node = node_from_row(row)
            pos = kids.index.get(node.id)
            if pos is None:
                kids.index[node.id] = len(kids.nodes)
                kids.nodes.append(node)
                kids.gen = next(self._gens)
                self._where[node.id] = key
            else:
                kids.nodes[pos] = node
            kids.view = None

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

    def trajectories(self, *, task: str | None = None) -> list[TrajectoryInfo]:
        """Return every trajectory (of one task), oldest first."""
        with self._reading() as conn:
            if task is None:
                rows = conn.execute(f'SELECT {TRAJ_COLS} FROM trajectories ORDER BY id')
            else:
                rows = conn.execute(f'SELECT {TRAJ_COLS} FROM trajectories WHERE task = ?'
                                    ' ORDER BY id', (task,))
            return [trajectory_from_row(r) for r in rows.fetchall()]

    def trajectory_ending_at(self, node_id: int) -> TrajectoryInfo | None:
        """Return the trajectory whose last node is ``node_id``, if any."""
        with self._reading() as conn:
            row = conn.execute(f'SELECT {TRAJ_COLS} FROM trajectories WHERE leaf = ?',
                               (node_id,)).fetchone()
            return None if row is None else trajectory_from_row(row)

    def tasks(self) -> list[TaskStats]:
        """Return per-task counters, sorted by name."""
        with self._reading() as conn:
            counts = {r[0]: (r[1], r[2]) for r in conn.execute(
                'SELECT task, count(*), max(last_used) FROM trajectories GROUP BY task')}
            stats = {r[0]: (r[1], r[2], r[3]) for r in conn.execute(
                'SELECT task, hits, misses, last_used FROM task_stats')}
            out = []
            for name in sorted(set(counts) | set(stats)):
                n, used = counts.get(name, (0, 0.0))
                hits, misses, used2 = stats.get(name, (0, 0, 0.0))
                out.append(TaskStats(name, n, hits, misses, max(used or 0.0, used2)))
            return out

    def forget(self, *, task: str, trajectory_id: int | None = None) -> int:
        """Remove one trajectory or all of a task."""
        with self._reading() as conn:
            with self._write():
                if trajectory_id is None:
                    n = conn.execute('DELETE FROM trajectories WHERE task = ?',
                                     (task,)).rowcount
                    conn.execute('DELETE FROM nodes WHERE task = ?', (task,))
                    conn.execute('DELETE FROM task_stats WHERE task = ?', (task,))
                else:
                    row = conn.execute('SELECT task, leaf FROM trajectories WHERE id = ?',
                                       (trajectory_id,)).fetchone()
                    if row is None or row[0] != task:
                        raise UnknownTrajectoryError(
                            f'no trajectory with id {trajectory_id} in task {task!r}')
                    conn.execute('DELETE FROM trajectories WHERE id = ?', (trajectory_id,))
                    sqltree.prune(conn, row[1])
                    n = 1
            self._invalidate()
            return n

    def note_replay(self, *, trajectory_id: int) -> None:
        """Bump counters and recency along a replayed trajectory."""
        info = self.trajectory(trajectory_id)
        now = time.time()
        with self._reading() as conn:
            with self._write():
                conn.executemany('UPDATE nodes SET success_count = success_count + 1,'
                                 ' last_used = ? WHERE id = ?',
                                 [(now, nid) for nid in info.node_ids])
                conn.execute('UPDATE trajectories SET replay_count = replay_count + 1,'
                             ' last_used = ? WHERE id = ?', (now, trajectory_id))
            self._refresh(info.node_ids)

    def note_outcome(self, *, task: str, hit: bool) -> None:
        """Count a hit or a miss."""
        column = 'hits' if hit else 'misses'
        with self._reading() as conn, self._write():
            conn.execute(
                f'INSERT INTO task_stats (task, {column}, last_used) VALUES (?, 1, ?)'
                f' ON CONFLICT(task) DO UPDATE SET {column} = {column} + 1,'
                ' last_used = excluded.last_used', (task, time.time()))

    def incomplete_recordings(self) -> list[RecordingInfo]:
        """Return recordings started and never committed or discarded (by any process)."""
        with self._reading() as conn:
            rows = conn.execute(
                'SELECT r.id, r.task, r.variant, r.parent, r.started,'
                ' (SELECT count(*) FROM recording_steps s WHERE s.recording = r.id)'
                ' FROM recordings r ORDER BY r.id').fetchall()
            return [RecordingInfo(*r) for r in rows]

    def recording_steps(self, recording_id: int) -> list[Step]:
        """Return the steps an (incomplete) recording wrote, for inspection."""
        with self._reading() as conn:
            rows = conn.execute(
                'SELECT 0, 0, 0, tool, kind, type_name, payload, payload_json, pre, post,'
                ' status, duration, 0, 0, 0 FROM recording_steps WHERE recording = ?'
                ' ORDER BY seq', (recording_id,)).fetchall()
            return [node_from_row(r).step for r in rows]

    def close(self) -> None:
        """Close the connection (checkpointing the WAL)."""
        with self._lock:
            self._invalidate()
            try:
                self._conn.close()
            except sqlite3.Error as err:
                _log.warning('%s: error closing store: %s', self.file, err)
