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


"""A call ``muscle-mem run-bt`` has in flight: a goal, a request or the agent's task."""

from __future__ import annotations

import threading
from typing import Any

from muscle_mem_ros.records import CheckFailure, Node as Learned, Snapshot
from muscle_mem_ros.ros.capture.stopping import Stopper, StopReport
from muscle_mem_ros.ros.execution.watch import StepWatch
from py_trees.common import Status

__all__ = ['PendingCall']


class PendingCall:
    """
    A call in flight: RUNNING until a callback ends it; its goal handle and watch.

    While its goal runs watched it is the sampler's listener (and the goal's feedback
    callback): the moment its watch trips it stops the goal, from the thread that saw
    the reading, not at the next tick. Stopping is the node's (:mod:`...ros.capture.stopping`):
    in a thread of its own, over only once the goal ended and the robot rests; nobody is
    sent anything before :meth:`settle` says how it went. A stop that raised did not stop
    the robot: :meth:`settle` says so, as of any stop that failed.

    :param node: The learned step it runs, or None (the agent's task).
    :param stopper: Stops its goal (None: a service or the agent: a cancel is all there is).
    :param rest: The sensors its stop judges the rest on, unless its watch names them.
    """

    def __init__(self, node: Learned | None = None, stopper: Stopper | None = None,
                 rest: frozenset[str] = frozenset()) -> None:
        self.node = node
        self._stopper = stopper
        self._rest = rest
        self._result: Any = None
        self._stopping: threading.Thread | None = None
        self._report: StopReport | None = None
        self._answered = threading.Event()
        """Set once the server answered the goal (accepted, or ended before), or it failed."""
        self.status = Status.RUNNING
        self.reason = ''
        self.watch: StepWatch | None = None
        self._lock = threading.Lock()
        self._handle: Any = None
        self._canceled = False
        self._closed = False
        self._verdict: CheckFailure | None = None

    @property
    def names(self) -> frozenset[str]:
        """Return the sensors its watch reads."""
        return self.watch.names if self.watch is not None else frozenset()

    def sample(self, snapshot: Snapshot) -> None:
        """Judge one poll of the sensors (the sampler's thread)."""
        if self.watch is not None and not self._closed:
            self.watch.sample(snapshot)
            self._cancel_if_tripped()

    def feedback(self, message: Any) -> None:
        """Judge one feedback message of the goal."""
        if self.watch is not None and not self._closed:
            self.watch.feedback(message.feedback)
            self._cancel_if_tripped()

    def _cancel_if_tripped(self) -> None:
        if self.watch is not None and self.watch.failure is not None:
            self.cancel()

    def accepted(self, handle: Any, result: Any = None) -> None:
        """Keep the goal's handle and result future (a stop asked before it came starts now)."""
        with self._lock:
            self._handle, self._result = handle, result
            if self._canceled:
                self._start_stop()
        self._answered.set()

    def cancel(self) -> bool:
        """Stop the goal (once; when it is accepted, if it is not yet); True the first time."""
        with self._lock:
            if self._canceled:
                return False
            self._canceled = True
            if self._handle is not None:
                self._start_stop()
        return True

    def _start_stop(self) -> None:
        """Start stopping the goal (holding the lock: whoever reads the stop sees it started)."""
        handle, result, stopper = self._handle, self._result, self._stopper
        if stopper is None or result is None:
            handle.cancel_goal_async()
            return
        rest = self.watch.names if self.watch is not None else self._rest

        def work() -> None:
            try:
                self._report = stopper.stop(handle, result, sensors=rest)
            except Exception as err:  # noqa: BLE001 - an error is no stop: it did not stop
                self._report = StopReport(False, (), reason=f'stopping the goal failed ({err!r}): '
                                          'the robot did not stop')

        thread = threading.Thread(target=work, name='run-bt stop', daemon=True)
        thread.start()
        self._stopping = thread

    def settle(self) -> tuple[str, str]:
        """
        Wait until a stop it began is over.

        A goal stopped before its server answered it is waited for first, up to
        ``stop_timeout``: it may yet be accepted and move.

        :return: (what happened, '' or why the robot did not stop); ('', '') without a stop.
        """
        stopper = self._stopper
        if self._canceled and stopper is not None and \
                not self._answered.wait(stopper.timeout):
            return '', (f'the goal sent was not answered within {stopper.timeout:g} s of its '
                        'cancel: it may be moving, the robot did not stop (the agent was not '
                        'asked)')
        with self._lock:
            thread = self._stopping
        if thread is not None:
            thread.join()
        report = self._report
        if report is None:
            return '', ''
        not_stopped = f'{report.reason} (the agent was not asked)' if report.reason else ''
        return report.describe(), not_stopped

    def close(self) -> CheckFailure | None:
        """Stop judging; return what the watch saw leave the tube before (None: nothing)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._verdict = self.watch.failure if self.watch is not None else None
            return self._verdict

    def tripped(self) -> CheckFailure | None:
        """Return what the watch saw leave the tube (fixed once the call is closed)."""
        with self._lock:
            if self._closed:
                return self._verdict
        return self.watch.failure if self.watch is not None else None

    def end(self, ok: bool, why: str) -> None:
        self.status = Status.SUCCESS if ok else Status.FAILURE
        self.reason = '' if ok else why
        self._answered.set()

    def fail(self, why: str) -> None:
        self.end(False, why)
