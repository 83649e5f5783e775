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
Blocking waits on rclpy futures from executor threads, with cancellation.

The node's long-running callbacks (a task's execute callback, a proxied goal)
run in a ``MultiThreadedExecutor`` and block their own thread while other
threads complete the futures they wait on. Waiting is on ``threading.Event``
objects set by future callbacks: no polling, no busy loop. A
:class:`CancelToken` wakes every wait registered with it, so a task cancel
interrupts whatever step is in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
import threading
from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:
    from rclpy.action.client import ClientGoalHandle
    from rclpy.task import Future

__all__ = ['CancelToken', 'TaskGuard', 'cancel_when_accepted', 'wait_future']


class CancelToken:
    """
    A one-shot cancel flag that wakes the waits registered with it.

    :param parent: A token whose cancel cancels this one too (a step's watch under its
        walk); this one's cancel leaves the parent alone.
    """

    def __init__(self, parent: CancelToken | None = None) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._events: set[threading.Event] = set()
        self._calls: list[Callable[[], None]] = []
        self._parent = parent

    @property
    def cancelled(self) -> bool:
        """Return True once :meth:`cancel` was called (here or on the parent)."""
        return self._cancelled or (self._parent is not None and self._parent.cancelled)

    def cancel(self) -> None:
        """Set the flag, wake every registered wait, and make the calls of :meth:`on_cancel`."""
        with self._lock:
            self._cancelled = True
            events = list(self._events)
            calls, self._calls = self._calls, []
        for event in events:
            event.set()
        for call in calls:
            call()

    def on_cancel(self, call: Callable[[], None]) -> None:
        """
        Call ``call`` once when this token (not its parent) is cancelled, in that thread.

        A step's watch cancels its token the moment it trips: what it judged can be
        held on to then (the frame a camera's watch saw), before the stop moves on.
        At once if it is already cancelled.
        """
        with self._lock:
            if not self._cancelled:
                self._calls.append(call)
                return
        call()

    def register(self, event: threading.Event) -> None:
        """Set ``event`` on cancel (at once if already cancelled)."""
        if self._parent is not None:
            self._parent.register(event)
        with self._lock:
            self._events.add(event)
            cancelled = self._cancelled
        if cancelled:
            event.set()

    def unregister(self, event: threading.Event) -> None:
        """Stop waking ``event``."""
        if self._parent is not None:
            self._parent.unregister(event)
        with self._lock:
            self._events.discard(event)


def wait_future(future: Future[Any], timeout: float | None,
                cancel: CancelToken | None = None) -> bool:
    """
    Block until ``future`` is done, ``timeout`` seconds pass, or ``cancel`` fires.

    :return: True when the future is done.
    """
    if future.done():
        return True
    event = threading.Event()
    future.add_done_callback(lambda _f: event.set())
    if cancel is not None:
        cancel.register(event)
    try:
        if not future.done():
            event.wait(timeout)
    finally:
        if cancel is not None:
            cancel.unregister(event)
    return bool(future.done())


def cancel_when_accepted(send_future: Future[ClientGoalHandle[Any, Any, Any]]) -> None:
    """
    Cancel an action goal as soon as the server accepts it (the caller gave up waiting).

    :param send_future: The future of ``ActionClient.send_goal_async``.
    """
    def on_done(future: Future[ClientGoalHandle[Any, Any, Any]]) -> None:
        handle = future.result()
        if handle is not None and handle.accepted:
            handle.cancel_goal_async()
    send_future.add_done_callback(on_done)


class TaskGuard:
    """
    One activity at a time: a task, a Replay call, a manual recording, a Forget.

    ``claim`` never blocks: a second activity is refused at once with the
    description of the one holding the guard, which callers put in their
    rejection message. :meth:`held` holds it for a ``with`` block.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: str | None = None

    @property
    def holder(self) -> str | None:
        """Return description of the activity holding the guard, or None."""
        return self._holder

    def claim(self, description: str) -> str | None:
        """Take the guard; return None on success, else the current holder's description."""
        with self._lock:
            if self._holder is not None:
                return self._holder
            self._holder = description
            return None

    def release(self) -> None:
        """Give the guard back."""
        with self._lock:
            self._holder = None

    @contextmanager
    def held(self, description: str) -> Iterator[str | None]:
        """
        Hold the guard for a ``with`` block, or say who holds it.

        :param description: What this activity is (a refused one names it as the holder).
        :return: A context yielding None when this activity holds the guard (given back when
            the block ends, however it ends), else the holder's description: nothing was
            taken and the caller answers that it is busy.
        """
        holder = self.claim(description)
        try:
            yield holder
        finally:
            if holder is None:
                self.release()
