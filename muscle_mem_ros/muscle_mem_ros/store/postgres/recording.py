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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import logging
import threading
import time
from typing import Any, TYPE_CHECKING

from ..base import check_step, Recording
from ..codec import step_row
from ...errors import StoreError, StoreUnavailableError, UnknownTrajectoryError
from ...records import Step, TrajectoryInfo

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ['Offline', 'Pending', 'PgRecording']

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


class PgRecording(Recording):
    """A recording of the PostgreSQL store: its steps written as they come."""

    def __init__(self, store: PostgresStore, *, remote: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._store = store
        self._remote = remote

    def append(self, step: Step) -> None:
        self._ensure_open()
        row = step_row(check_step(step), self._store.allow_pickle)
        if self._remote:
            try:
                with self._store._db() as conn:
                    conn.execute(
                        'INSERT INTO recording_steps (recording, seq, tool, kind, type_name,'
                        ' payload, payload_json, pre, post, status, duration)'
                        ' VALUES (?,?,?,?,?,?,?,?,?,?,?)', (self.id, len(self.steps), *row))
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
            info = store._merge(self.task, self.variant, self.params_json, self.parent,
                                self.steps, recording=self.id if self.id > 0 else None)
        except StoreUnavailableError as err:
            self._closed = True
            store.offline.keep(self, store._cached_steps(self.parent))
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
                self._store._delete_recording(self.id)
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
                recording=recording.id if recording.id > 0 else None))

    def flush(self) -> None:
        """Commit recordings kept while the server was away (oldest first)."""
        while self.pending:
            item = self.pending[0]
            try:
                try:
                    info = self._merge(item.task, item.variant, item.params_json, item.parent,
                                       item.steps, recording=item.recording)
                except UnknownTrajectoryError:
                    if item.prefix is None:
                        raise
                    info = self._merge(item.task, item.variant, item.params_json, None,
                                       item.prefix + item.steps, recording=item.recording)
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
