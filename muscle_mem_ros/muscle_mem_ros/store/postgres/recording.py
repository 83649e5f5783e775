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
The PostgreSQL store's recordings, and those it keeps while the server is away.

A recording's steps are written to ``recording_steps`` as they come (another
process can see an interrupted recording and purge it). When the server goes
away, a recording goes on in memory; its commit is then kept (:class:`Offline`)
and committed when the server is back, oldest first; what cannot be committed
(its parent was forgotten meanwhile and it has no copy of its prefix, or the store
closes first) is logged and listed as lost.

A recording writes through its store's :class:`StoreSide` (connections, merge, what the
cache knows), handed in by the store: this module does not import the store. The SQL of
the ``recordings`` rows is here too (:func:`insert`, :func:`delete`, :func:`incomplete`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import logging
import os
import threading
import time
from typing import Any, ContextManager

from .link import PgConn
from ..base import check_step, Recording, RecordingInfo
from ..codec import STEP_COLS, step_row
from ..owners import HOST
from ...errors import StoreError, StoreUnavailableError, UnknownTrajectoryError
from ...records import Step, TrajectoryInfo

__all__ = ['delete', 'incomplete', 'insert', 'Offline', 'Pending', 'PgRecording', 'StoreSide']

_log = logging.getLogger('muscle_mem_ros.store.postgres.store')


@dataclass
class Pending:
    """A recording committed while the server was away, to be committed when it is back."""

    task: str
    variant: str
    params_json: str
    parent: int | None
    steps: list[Step]
    prefix: list[Step] | None
    since: float
    recording: int | None = None
    body: str = ''


@dataclass(frozen=True)
class StoreSide:
    """
    What a recording uses of its store.

    :param db: Holds the store's lock and yields a live connection.
    :param write: Yields a connection in one write transaction (or the current batch's).
    :param merge: Commits steps: ``merge(task, variant, params_json, parent, steps,
        recording=, body=)``.
    :param cached_steps: The steps from the root to a node when all are cached, else None.
    :param offline: Keeps the commits that failed while the server was away.
    :param allow_pickle: Whether the store pickles what is not JSON or NumPy.
    """

    db: Callable[[], ContextManager[PgConn]]
    write: Callable[[], ContextManager[PgConn]]
    merge: Callable[..., TrajectoryInfo]
    cached_steps: Callable[[int | None], list[Step] | None]
    offline: Offline
    allow_pickle: bool = False


class PgRecording(Recording):
    """
    A recording of the PostgreSQL store: its steps written as they come.

    :param store: Its store's side.
    :param remote: False when the server was away at its start: kept in memory.
    """

    def __init__(self, store: StoreSide, *, remote: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._store = store
        self._remote = remote

    def append(self, step: Step) -> None:
        self._ensure_open()
        row = step_row(check_step(step), self._store.allow_pickle)
        if self._remote:
            try:
                with self._store.db() as conn:
                    conn.execute(
                        f'INSERT INTO recording_steps (recording, seq, {STEP_COLS})'
                        ' VALUES (?,?,?,?,?,?,?,?,?,?,?,?)', (self.id, len(self.steps), *row))
            except StoreUnavailableError:
                self._remote = False
                _log.warning('recording %d of task %r: database unreachable, its steps are '
                             'kept in memory from step %d on', self.id, self.task,
                             len(self.steps))
        self.steps.append(step)

    def commit(self) -> TrajectoryInfo:
        self._ensure_open()
        store = self._store
        try:
            info = store.merge(self.task, self.variant, self.params_json, self.parent,
                               self.steps, recording=self.id if self.id > 0 else None,
                               body=self.body)
        except StoreUnavailableError as err:
            self._closed = True
            store.offline.keep(self, store.cached_steps(self.parent))
            raise StoreUnavailableError(
                f'{err}; the recording ({len(self.steps)} step(s) of task {self.task!r}) is '
                'kept in memory and will be committed when the database is back') from err
        self._closed = True
        return info

    def discard(self) -> None:
        self._ensure_open()
        self._closed = True
        if self._remote:
            try:
                with self._store.write() as conn:
                    delete(conn, self.id)
            except StoreUnavailableError:
                pass  # its row stays, abandoned, until purged


class Offline:
    """
    The recordings committed while the server was away, until they are committed.

    :param url: The store's URL as shown in logs.
    :param merge: Commits steps: ``merge(task, variant, params_json, parent, steps,
        recording=)``.
    :param lock: The store's lock.
    """

    def __init__(self, *, url: str, merge: Callable[..., TrajectoryInfo],
                 lock: threading.RLock) -> None:
        self.url = url
        self._merge = merge
        self._lock = lock
        self.pending: list[Pending] = []
        """Kept, to be committed when the server is back (oldest first)."""
        self.lost: list[Pending] = []
        """Kept, and could not be committed (logged as LOST)."""

    def keep(self, recording: PgRecording, prefix: list[Step] | None) -> None:
        """Keep a recording whose commit failed; ``prefix``: its parent's steps, if known."""
        with self._lock:
            self.pending.append(Pending(
                task=recording.task, variant=recording.variant,
                params_json=recording.params_json, parent=recording.parent,
                steps=list(recording.steps), prefix=prefix, since=time.time(),
                recording=recording.id if recording.id > 0 else None, body=recording.body))

    def flush(self) -> None:
        """Commit recordings kept while the server was away (oldest first)."""
        while self.pending:
            item = self.pending[0]
            try:
                try:
                    info = self._merge(item.task, item.variant, item.params_json, item.parent,
                                       item.steps, recording=item.recording, body=item.body)
                except UnknownTrajectoryError:
                    if item.prefix is None:
                        raise
                    info = self._merge(item.task, item.variant, item.params_json, None,
                                       item.prefix + item.steps, recording=item.recording,
                                       body=item.body)
            except StoreUnavailableError:
                return
            except StoreError as err:
                _log.error('%s: a recording of task %r kept while the database was away cannot '
                           'be committed and is LOST: %s', self.url, item.task, err)
                self.lost.append(item)
            else:
                _log.info('%s: committed a recording of task %r kept while the database was '
                          'away: trajectory %d', self.url, item.task, info.id)
            with self._lock:
                self.pending.pop(0)

    def close(self, up: bool) -> None:
        """Commit what can be (the server is ``up``); the rest is lost."""
        if up:
            self.flush()
        for item in self.pending:
            _log.error('%s: LOST a recording of task %r (%d step(s), kept in memory since %s): '
                       'the database was unreachable until the store closed', self.url,
                       item.task, len(item.steps), time.ctime(item.since))
        self.lost.extend(self.pending)
        self.pending.clear()


def insert(conn: PgConn, task: str, variant: str, params_json: str, parent: int | None, *,
           owner: str, robot_id: str) -> int:
    """Insert a recording's row, naming its owner (this process, ``robot_id``); its id."""
    return int(conn.execute(
        'INSERT INTO recordings (task, variant, params_json, parent, started, owner,'
        ' owner_pid, owner_host, robot_id) VALUES (?,?,?,?,?,?,?,?,?) RETURNING id',
        (task, variant, params_json, parent, time.time(), owner, os.getpid(), HOST,
         robot_id)).fetchone()[0])


def delete(conn: PgConn, recording_id: int) -> None:
    """Delete a recording and the steps it wrote."""
    conn.execute('DELETE FROM recording_steps WHERE recording = ?', (recording_id,))
    conn.execute('DELETE FROM recordings WHERE id = ?', (recording_id,))


def incomplete(conn: PgConn) -> list[RecordingInfo]:
    """Return recordings never committed; ``live`` while their store is still connected."""
    rows = conn.execute(
        'SELECT r.id, r.task, r.variant, r.parent, r.started,'
        ' (SELECT count(*) FROM recording_steps s WHERE s.recording = r.id),'
        ' r.owner, r.owner_pid, r.owner_host, r.robot_id,'
        ' r.owner IN (SELECT substr(application_name, 16) FROM pg_stat_activity'
        " WHERE application_name LIKE 'muscle_mem_ros:%%')"
        ' FROM recordings r ORDER BY r.id').fetchall()
    return [RecordingInfo(id=r[0], task=r[1], variant=r[2], parent=r[3], started=r[4],
                          step_count=r[5], live=bool(r[10]),
                          owner=f'robot {r[9]!r}, pid {r[7]} on host {r[8]}') for r in rows]
