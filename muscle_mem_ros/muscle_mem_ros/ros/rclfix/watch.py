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
Waits on a real server that end when the server leaves the ROS graph or its time runs out.

A forwarded goal (or request) waits for the real server's answer. If that
server's process dies mid-goal the answer never comes: an unbounded wait hangs
the proxied goal for good, and a cancel forwarded to the dead server is
"accepted" by the proxy and changes nothing. Every wait here is therefore
bounded twice:

* the server's presence is polled every :data:`WATCH_PERIOD` seconds while a
  call is in flight (``server_is_ready`` / ``service_is_ready``: every entity
  of the action or service still matched); once it is gone, on every look for
  :data:`LOST_AFTER` seconds and at least :data:`LOST_LOOKS` looks in a row
  (:class:`Absence`), the wait ends with the reason;
* the call's own time limit (the node's ``step_timeout``) ends it as well.

A server that stops cleanly leaves the graph at once. A process that is killed
(SIGKILL, a crash, a lost network) leaves it when its DDS participant's lease
runs out: with Fast DDS's default that is up to 20 s, after which the goal ends
within :data:`LOST_AFTER`. Servers that must be noticed sooner can announce a
shorter lease in their own DDS profile (Fast DDS: ``leaseDuration`` in the
participant profile); ``step_timeout`` bounds the wait in every case.

An action's result can also be lost on its way: Fast DDS drops a response to a
client whose reader the server has not matched yet ("failed to send response
(timeout)": a server started moments before its first goal), and nothing sends
it again, so the wait would last until ``step_timeout``. :class:`ResultAgain`
asks for a finished goal's result again (the request is idempotent).

:class:`CallWatch` serves the proxies' coroutines (nothing blocks a thread);
:func:`wait_watched` the replay's blocking waits.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from enum import Enum
import threading
import time
from typing import Any

from action_msgs.msg import GoalStatus
from muscle_mem_ros.ros.rclfix.sync import CancelToken
from rclpy.action.client import ClientGoalHandle
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node as RosNode
from rclpy.task import Future

__all__ = ['Absence', 'CallWatch', 'LOST_AFTER', 'LOST_LOOKS', 'RESULT_AGAIN', 'ResultAgain',
           'WATCH_PERIOD', 'WaitEnd', 'wait_watched']

WATCH_PERIOD = 0.25
"""Seconds between two looks at the graph while a call is in flight."""
LOST_AFTER = 1.0
"""Seconds a server must read absent on every look before it is lost. ``server_is_ready``
reads the process's graph cache, which says "absent" for a moment while a live server's
entity is re-announced or the cache catches up on a loaded machine; one such look used to
hand a running goal to the agent. A server that left stays absent: a second costs little
against ``step_timeout`` and a killed process's lease (20 s by default)."""
LOST_LOOKS = 3
"""Looks in a row that must read absent (besides :data:`LOST_AFTER`): a wait starved of its
thread for a second has not seen the server absent for a second."""
RESULT_AGAIN = 1.0
"""Seconds a finished goal's result may be missing before it is asked for again."""

_FINISHED = frozenset({GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED,
                       GoalStatus.STATUS_ABORTED})


class ResultAgain:
    """
    Ask for a finished goal's result again while its answer does not come.

    The goal's status is a topic (transient local: it reaches the client once the
    two are matched), so the client learns that the goal ended even when the answer
    to its result request was lost. A result still missing :data:`RESULT_AGAIN` after
    that is asked for again, and the answer completes the first request's future.

    :param goal: The goal's handle.
    :param result: The future of its first result request.
    """

    def __init__(self, goal: ClientGoalHandle[Any, Any, Any], result: Future[Any]) -> None:
        self._goal = goal
        self._result = result
        self._ended: float | None = None
        self.asked = 0
        """How many times the result was asked for again."""

    def look(self, now: float) -> None:
        """Ask again if the goal ended :data:`RESULT_AGAIN` ago and its result is missing."""
        if self._result.done() or self._goal.status not in _FINISHED:
            return
        if self._ended is None:
            self._ended = now
        elif now - self._ended >= RESULT_AGAIN:
            self._ended = now
            self.asked += 1
            self._goal.get_result_async().add_done_callback(self._answered)

    def _answered(self, again: Future[Any]) -> None:
        answer = again.result()
        if answer is not None and not self._result.done():
            self._result.set_result(answer)


class Absence:
    """
    Whether a server is lost: absent on every look over a span (module docstring).

    Lost once absent for :data:`LOST_AFTER` seconds and :data:`LOST_LOOKS` looks in a row;
    one look that finds it present starts over.

    :param present: Returns False while the server is not in the graph.
    """

    def __init__(self, present: Callable[[], bool]) -> None:
        self._present = present
        self._since = 0.0
        self._looks = 0

    def lost(self, now: float) -> bool:
        """Look once (at monotonic ``now``); return True once the server is lost."""
        if self._present():
            self._looks = 0
            return False
        if self._looks == 0:
            self._since = now
        self._looks += 1
        return self._looks >= LOST_LOOKS and now - self._since >= LOST_AFTER


class WaitEnd(Enum):
    """How a watched wait ended."""

    DONE = 'done'
    """The awaited future completed."""
    TIMED_OUT = 'timed_out'
    """The time limit passed first."""
    CANCELED = 'canceled'
    """The caller's cancel token fired."""
    LOST = 'lost'
    """The server left the ROS graph (:class:`Absence`)."""


def wait_watched(
    future: Future[Any], *, timeout: float, cancel: CancelToken, present: Callable[[], bool],
    period: float = WATCH_PERIOD, again: ResultAgain | None = None,
) -> WaitEnd:
    """
    Block until ``future`` is done, the time runs out, ``cancel`` fires or the server is gone.

    :param future: The rclpy future to wait for.
    :param timeout: Seconds to wait at most.
    :param cancel: Wakes the wait when cancelled.
    :param present: Returns False while the server is not in the graph (lost: :class:`Absence`).
    :param period: Seconds between two calls of ``present``.
    :param again: Asks for a result again (``future`` is its first request's).
    :return: Why the wait ended.
    """
    deadline = time.monotonic() + timeout
    event = threading.Event()
    future.add_done_callback(lambda _f: event.set())
    cancel.register(event)
    waited = False  # the caller saw the server just before: look again after a period
    absence = Absence(present)
    try:
        while True:
            if future.done():
                return WaitEnd.DONE
            if cancel.cancelled:
                return WaitEnd.CANCELED
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return WaitEnd.TIMED_OUT
            if waited and absence.lost(time.monotonic()):
                return WaitEnd.DONE if future.done() else WaitEnd.LOST
            if again is not None:
                again.look(time.monotonic())
            event.wait(min(period, remaining))
            waited = True
    finally:
        cancel.unregister(event)


class _Watched:
    """
    One call in flight: awaiting it yields until its future is done or a reason is set.

    The executor resumes a pending coroutine at each of its wake-ups, so this
    costs no future and no executor hand-over of its own: the call's future
    completing, or the watch timer setting :attr:`reason`, wakes it.
    """

    __slots__ = ('again', 'future', 'reason', 'started')

    def __init__(self, *, future: Future[Any], started: float,
                 again: ResultAgain | None) -> None:
        self.future = future
        self.started = started
        self.again = again
        self.reason = ''

    def __await__(self) -> Generator[None, None, None]:
        while not self.future.done() and not self.reason:
            yield


class CallWatch:
    """
    Bound a proxy's awaited calls by the server's presence and a time limit.

    A timer on the proxy node runs only while a call is in flight; every
    :data:`WATCH_PERIOD` it looks at the graph and at the calls' ages. The
    timer and the coroutines run on the proxy node's single executor thread,
    so the calls need no lock.

    :param node: The proxy node (its executor runs the timer and the coroutines).
    :param callback_group: Group of the watch timer.
    :param present: Returns False once the real server has left the graph.
    :param server: The real server's name, for reasons.
    :param timeout: Seconds a call may take, or None for no limit.
    """

    def __init__(
        self, *, node: RosNode, callback_group: CallbackGroup, present: Callable[[], bool],
        server: str, timeout: float | None,
    ) -> None:
        self._present = present
        self._absence = Absence(present)
        self._server = server
        self._timeout = timeout
        self._inflight: set[_Watched] = set()
        self._timer = node.create_timer(
            WATCH_PERIOD, self._look, callback_group=callback_group, autostart=False)

    async def wait(self, future: Future[Any], *, started: float,
                   again: ResultAgain | None = None) -> str:
        """
        Await ``future`` (a coroutine: it holds no thread meanwhile).

        :param future: A future completed on the proxy node's executor.
        :param started: Monotonic time the call was sent (its time limit counts from there).
        :param again: Asks for a result again (``future`` is its first request's).
        :return: '' when ``future`` completed, else why the call was given up.
        """
        if future.done():
            return ''
        watched = _Watched(future=future, started=started, again=again)
        if not self._inflight:
            self._absence = Absence(self._present)  # what an earlier call saw is over
            self._timer.reset()
        self._inflight.add(watched)
        try:
            await watched
            return '' if future.done() else watched.reason
        finally:
            self._inflight.discard(watched)
            if not self._inflight:
                self._timer.cancel()

    def _look(self) -> None:
        if not self._inflight:
            self._timer.cancel()
            return
        now = time.monotonic()
        gone = self._absence.lost(now)
        for watched in list(self._inflight):
            if gone:
                watched.reason = (f'{self._server} left the ROS graph during the call '
                                  '(its process stopped, crashed or lost the network)')
            elif self._timeout is not None and now - watched.started > self._timeout:
                watched.reason = (f'no answer from {self._server} within '
                                  f'{self._timeout:g} s (step_timeout)')
            elif watched.again is not None:
                watched.again.look(now)
