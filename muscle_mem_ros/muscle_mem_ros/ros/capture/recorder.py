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
The recording in progress: which proxied calls become steps of which task.

One recording is active at a time (the node runs one task at a time): either
the agent's part of an ExecuteTask (started at a handoff, under the last replayed
node) or a manual one (StartRecording / StopRecording, teach by teleop). A subtask
the agent calls while its task is recorded (:mod:`..execution.subtasks`) is recorded
on top of it (``start(nested=True)``): its own steps go to its own recording until it
ends, then the parent's is active again and records the call as one step. While one
is active every successful call through any proxy is appended to it, durably, as it
finishes. Calls still in flight when it ends
are not recorded. Calls made concurrently (an arm goal and a gripper request
at once) are recorded in the order they finish and replayed one after another.

Calls seen through introspection events (:mod:`.tap`) reach the node after the
agent's own answer: a recording that is saved first waits for them, through the
settle hooks each tap registers (:meth:`Recorder.add_settle`).

A recording may have an observer (``Recorder.start(observer=...)``), called with the
steps so far each time one is appended, in the appending thread and before the call
is answered: a shadow run says each step's verdict from there, while the agent works.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
import threading
import time

from muscle_mem_ros.body import Body
from muscle_mem_ros.errors import MuscleMemError, RecordingBusyError, StoreError
from muscle_mem_ros.records import Step, TrajectoryInfo
from muscle_mem_ros.store import Recording, Store

__all__ = ['Filer', 'Observer', 'Recorder', 'Session']

Filer = Callable[..., tuple[str, int | None, list[Step]]]
"""Files a finished recording (see :meth:`Recorder.finish`)."""
Observer = Callable[[Sequence[Step]], None]
"""Called with a recording's steps each time one is appended (see :class:`Session`)."""


@dataclass(eq=False)
class Session:
    """
    One active recording.

    :ivar task: Task name.
    :ivar params_json: Canonical parameters JSON (also the tree variant).
    :ivar manual: True for StartRecording, False for an ExecuteTask handoff.
    :ivar parent: Node the new steps go under (None = from the root).
    :ivar recording: The store's recording.
    :ivar steps: Steps appended so far.
    :ivar lost: Why a step could not be stored ('' if none was lost): such a
        recording lacks a step and is never committed.
    :ivar opened: When it started (``time.monotonic``); a call sent earlier is not
        part of it, even if the node learns of it later (:mod:`.tap`).
    :ivar observer: Called with the steps so far after each append, under the
        session's lock (so in the steps' order); it must not raise. None: nobody.
    :ivar settled: The settle hooks ran (:meth:`Recorder.settle`).
    """

    task: str
    params_json: str
    manual: bool
    parent: int | None
    recording: Recording
    steps: int = 0
    closed: bool = False
    lost: str = ''
    lock: threading.Lock = field(default_factory=threading.Lock)
    opened: float = field(default_factory=time.monotonic)
    observer: Observer | None = None
    settled: bool = False

    def append(self, step: Step) -> bool:
        """Append ``step`` unless the session has ended; True if appended."""
        with self.lock:
            if self.closed:
                return False
            try:
                self.recording.append(step)
            except MuscleMemError as err:
                self.lost = self.lost or str(err)
                raise
            self.steps += 1
            if self.observer is not None:
                self.observer(self.recording.steps)
            return True


class Recorder:
    """Start, hold and end the active recording (and those of the tasks it called)."""

    def __init__(self, *, store: Store, body: Body | None = None) -> None:
        self._store = store
        self.body = body
        """The body recordings are learned on (None: unknown, :mod:`muscle_mem_ros.body`)."""
        self._lock = threading.Lock()
        self._sessions: list[Session] = []
        """The open recordings, outermost first; the last one is active."""
        self._settles: list[Callable[[Session], None]] = []

    def _key(self) -> str:
        """Return the key recordings are filed under now (a node's body may change)."""
        return '' if self.body is None else self.body.key

    def add_settle(self, settle: Callable[[Session], None]) -> None:
        """
        Register a wait that :meth:`finish` runs before saving a session.

        :param settle: Called with the session about to be saved; returns once the
            calls it still records for that session are appended (bounded by itself).
        """
        self._settles.append(settle)

    def remove_settle(self, settle: Callable[[Session], None]) -> None:
        """Unregister a wait added with :meth:`add_settle` (nothing if absent)."""
        if settle in self._settles:
            self._settles.remove(settle)

    @property
    def active(self) -> Session | None:
        """Return the active session (the innermost), or None."""
        sessions = self._sessions
        return sessions[-1] if sessions else None

    def start(
        self, *, task: str, params_json: str, parent: int | None, manual: bool,
        variant: str | None = None, observer: Observer | None = None, nested: bool = False,
    ) -> Session:
        """
        Begin recording ``task`` under node ``parent`` (None = from the root).

        :param variant: The tree (default ``params_json``: the tree of exactly these params).
        :param observer: Called with the steps so far after each append (see :class:`Session`).
        :param nested: A subtask's recording, on top of its caller's (which resumes when
            this one ends); otherwise no recording may be active.
        :raises RecordingBusyError: Another recording is active (and this one is not nested).
        """
        with self._lock:
            if self._sessions and not nested:
                raise RecordingBusyError(
                    f"a recording of task '{self._sessions[-1].task}' is already active"
                )
            recording = self._store.begin(
                task=task, variant=variant or params_json, params_json=params_json,
                parent=parent, body=self._key(),
            )
            session = Session(
                task=task, params_json=params_json, manual=manual, parent=parent,
                recording=recording, observer=observer,
            )
            self._sessions.append(session)
            return session

    def settle(self) -> Session | None:
        """
        Wait (bounded) until the calls the active recording still records are appended.

        :meth:`finish` does it before it saves, unless it was done already; a caller
        that wants the recording's last steps before that (a shadow run) calls it first.

        :return: The active session, or None.
        """
        session = self.active
        if session is not None:
            for settle in list(self._settles):
                settle(session)
            session.settled = True
        return session

    def unwind(self, to: Session | None) -> int:
        """
        Discard the recordings opened on top of ``to`` and left open (a subtask that failed).

        :param to: The recording that was active when the subtask started (None: none was).
        :return: How many were discarded.
        """
        count = 0
        while self._sessions and self._sessions[-1] is not to and to in [None, *self._sessions]:
            try:
                self.finish(save=False)
            except MuscleMemError:  # left incomplete in the store: never replayed
                pass
            count += 1
        return count

    def finish(
        self, *, save: bool, filer: Filer | None = None,
    ) -> tuple[Session | None, TrajectoryInfo | None]:
        """
        End the active recording: commit it (``save``) or discard it.

        The recording under it (a subtask's caller), if any, is active again.

        ``filer(task=, variant=, params_json=, parent=, steps=)`` may file the steps
        elsewhere: under a tree with bound parameters, or further down an existing
        branch that its bindings already explain. It returns (variant, parent, the
        steps still to add); then those are added at once and the recording dropped
        (added first: a crash in between leaves an abandoned recording, never a gap).

        Committing zero steps under a parent marks that parent terminal; with
        zero steps from the root there is nothing to store and it is discarded.
        A session that lost a step is discarded, never committed with a gap.

        :return: The ended session (None if none was active) and the committed
            trajectory (None when discarded).
        :raises StoreError: The store could not write, or a step was lost (``save``).
        """
        active = self.active
        if save and active is not None and not active.settled:
            self.settle()
        with self._lock:
            session = self._sessions.pop() if self._sessions else None
        if session is None:
            return None, None
        with session.lock:
            session.closed = True
        if save and session.lost:
            try:
                session.recording.discard()
            except MuscleMemError:  # left incomplete in the store: never replayed
                pass
            raise StoreError(f'a step could not be stored ({session.lost}); '
                             'the recording was discarded')
        if save and (session.steps or session.parent is not None):
            recording = session.recording
            if filer is not None:
                variant, parent, rest = filer(
                    task=session.task, variant=recording.variant,
                    params_json=session.params_json, parent=session.parent,
                    steps=list(recording.steps))
                if (variant, parent) != (recording.variant, session.parent):
                    info = self._store.add_trajectory(
                        task=session.task, variant=variant, params_json=session.params_json,
                        steps=rest, parent=parent, body=self._key())
                    recording.discard()
                    return session, info
            return session, recording.commit()
        session.recording.discard()
        return session, None
