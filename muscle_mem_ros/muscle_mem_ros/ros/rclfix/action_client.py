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
An rclpy ``ActionClient`` whose goals are never lost and that does not slow down with each one.

rclpy 9.1.2 (the Kilted release on PyPI) has two faults in ``send_goal_async``
(ros2/rclpy#1532, fixed upstream in October 2025, after this release). It sends
the goal request and registers a first future under the request's sequence
number while it holds the client's lock, then, after releasing it, registers a
second future under the same number and returns that one:

* the first future is never completed and stays in the client's future list
  for good; the executor walks that list every time the client has data, so a
  client that sent N goals pays O(N) per message (in the node benchmark the
  single largest cost of the proxy thread after a few thousand goals), and it
  leaks memory;
* worse, a goal response that arrives between the two registrations (a fast
  server, a loaded machine) completes the first future, and the returned one
  never completes: the caller waits for its whole timeout. The demo story saw
  this as a replayed step that hung for its 30 s step timeout and went to the
  agent (1 in about 20 runs of the demo suite under load).

:meth:`ActionClient.send_goal_async` does what rclpy does with one future,
registered (and the feedback callback with it) in the same locked section that
sends the request. The executor takes a goal response under that lock, so it
cannot handle a response before the future that waits for it is in place.

A third fault of the same release: ``ActionClient.__init__`` registers the
client with its node (``add_waitable``) before it creates ``self._lock``. A
node already spinning in another thread wakes up, calls the new client's
``add_to_wait_set``, and dies with ``AttributeError: ... no attribute
'_lock'``: that executor thread is gone and every later answer to the node
times out. :class:`ActionClient` makes its lock before registering and keeps
that one lock, so a client can be created while its node spins.

A goal response can also be lost on its way: Fast DDS drops a server's response to a
client whose reply reader the server has not matched yet (a server started moments before
the goal; one restarted under the name of one that was killed), and nothing sends it
again. The server has the goal and runs it, while the client waits for an answer until
its caller's time limit. The server's status topic (transient local, so it reaches the
client once matched) lists every goal it accepted: :meth:`ActionClient.execute` takes a
goal whose id is listed while its request is still pending as accepted then (the goal
handle rclpy would have made from the response, with the status's stamp), and drops the
response should it come after all. :class:`..watch.ResultAgain` then gets its result.

In a reentrant callback group under a ``MultiThreadedExecutor`` (the cache node's agent
client; the tests' agents) rclpy hands the client's next data to another worker while the
last is still being executed, so a status and the response of the same goal can be
executed at once. Which of them makes the goal handle is decided under the client's lock:
a response claims its request before rclpy registers the handle, and the status skips a
claimed request. Without that, a status that made the handle between a response's look
and rclpy's registration of it made rclpy raise 'Two goals were accepted with the same
ID' in the executor, which ended the executor's spinning (a fresh-clone run's test
process lost every server it hosted that way).

The fixes use rclpy's own (private) bookkeeping of pending goal requests, as 9.1.2 lays
it out; an rclpy without it gets rclpy's ``send_goal_async`` and ``execute``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
import threading
from typing import Any
import weakref

from action_msgs.msg import GoalStatus
from rclpy.action.client import ActionClient as _RclpyActionClient, ClientGoalHandle
from rclpy.task import Future

__all__ = ['ActionClient']

_REMEMBERED = 32
"""Goals a client remembers, the newest: a stop reads the goal it stops (:meth:`goal_of`)."""


class ActionClient(_RclpyActionClient[Any, Any, Any]):
    """``rclpy.action.ActionClient`` without the goal registration faults of rclpy 9.1.2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._early_lock = threading.Lock()
        self._sent: OrderedDict[bytes, Any] = OrderedDict()
        self._answered_by_status: set[int] = set()
        """Goal requests whose handle was made from the status topic: their late response
        is dropped."""
        self._responding: set[int] = set()
        """Goal requests whose response is being executed: the status leaves them alone."""
        super().__init__(*args, **kwargs)

    def goal_of(self, goal_id: Any) -> Any:
        """
        Return the goal this client sent under ``goal_id`` (a UUID message); None if unknown.

        rclpy's goal handle does not keep its goal; whoever stops a goal may need it (the
        hold of a joint trajectory holds the goal's joints: :mod:`..capture.stopping`).
        The newest :data:`_REMEMBERED` goals are kept, far more than a client has in flight.
        """
        with self._early_lock:
            return self._sent.get(bytes(goal_id.uuid))

    @property
    def _lock(self) -> threading.Lock:
        """Return the client's lock, made before the client was registered with its node."""
        return self._early_lock

    @_lock.setter
    def _lock(self, value: threading.Lock) -> None:
        """Keep the early lock: rclpy assigns a new one after registering the client."""

    def send_goal_async(
        self, goal: Any, feedback_callback: Callable[[Any], None] | None = None,
        goal_uuid: Any = None,
    ) -> Future[ClientGoalHandle[Any, Any, Any]]:
        """
        Send ``goal``; return the future of its goal handle (see the module doc).

        :param goal: The goal request (the action's ``Goal``).
        :param feedback_callback: Called with each feedback message of the goal.
        :param goal_uuid: The goal's id (a random one when None).
        :return: A future completed when the server accepted or rejected the goal.
        :raises TypeError: ``goal`` is not this action's ``Goal``.
        """
        if not all(hasattr(self, name) for name in _BOOKKEEPING):
            return super().send_goal_async(goal, feedback_callback, goal_uuid)
        if not isinstance(goal, self._action_type.Goal):
            raise TypeError(f'Expected goal type ({type(self._action_type.Goal)}) but '
                            f'received ({type(goal)})')
        request = self._action_type.Impl.SendGoalService.Request()
        request.goal_id = (self._generate_random_uuid()  # type: ignore[no-untyped-call]
                           if goal_uuid is None else goal_uuid)
        request.goal = goal
        future: Future[ClientGoalHandle[Any, Any, Any]] = Future()
        with self._lock:
            self._sent[bytes(request.goal_id.uuid)] = goal
            while len(self._sent) > _REMEMBERED:
                self._sent.popitem(last=False)
            if feedback_callback is not None:
                self._feedback_callbacks[bytes(request.goal_id.uuid)] = feedback_callback
            sequence_number = self._client_handle.send_goal_request(request)
            if sequence_number in self._pending_goal_requests:
                raise RuntimeError(
                    f'Sequence ({sequence_number}) conflicts with pending goal request')
            self._pending_goal_requests[sequence_number] = future
            self._goal_sequence_number_to_goal_id[sequence_number] = request.goal_id
            future.add_done_callback(self._remove_pending_goal_request)
            self.add_future(future)
        return future

    async def execute(self, taken_data: Any) -> None:
        """Take a pending goal listed on the status topic as accepted, then do rclpy's work."""
        if not all(hasattr(self, name) for name in _BOOKKEEPING + ('_goal_handles',)):
            await super().execute(taken_data)
            return
        responding = self._claim_response(taken_data)
        try:
            self._accept_listed(taken_data)
            await super().execute(taken_data)
        finally:
            if responding is not None:
                with self._lock:
                    self._responding.discard(responding)

    def _claim_response(self, taken_data: Any) -> int | None:
        """
        Claim the goal request whose response is in ``taken_data``; return its number.

        A response to a request whose handle the status made is dropped instead (None).
        """
        goal = taken_data.get('goal')
        if goal is None:
            return None
        number = int(goal[0])
        with self._lock:
            if number in self._answered_by_status:
                self._answered_by_status.discard(number)
                del taken_data['goal']  # its goal handle was made from the status
                return None
            self._responding.add(number)
        return number

    def _accept_listed(self, taken_data: Any) -> None:
        status = taken_data.get('status')
        if status is None:
            return
        listed = {bytes(s.goal_info.goal_id.uuid): s for s in status.status_list
                  if s.status != GoalStatus.STATUS_UNKNOWN}
        made = []
        with self._lock:
            pending = [(number, bytes(goal_id.uuid)) for number, goal_id
                       in self._goal_sequence_number_to_goal_id.items()
                       if bytes(goal_id.uuid) in listed and number not in self._responding]
            for number, uuid in pending:
                future = self._pending_goal_requests.get(number)
                if future is None or future.done() or uuid in self._goal_handles:
                    continue
                entry = listed[uuid]
                response = self._action_type.Impl.SendGoalService.Response(
                    accepted=True, stamp=entry.goal_info.stamp)
                handle = ClientGoalHandle(self, entry.goal_info.goal_id, response)
                self._goal_handles[uuid] = weakref.ref(handle)
                self._answered_by_status.add(number)
                made.append((future, handle))
        for future, handle in made:  # its done callbacks take the lock
            future.set_result(handle)


_BOOKKEEPING = ('_client_handle', '_pending_goal_requests', '_goal_sequence_number_to_goal_id',
                '_feedback_callbacks', '_remove_pending_goal_request', '_generate_random_uuid')
"""rclpy 9.1.2's private state of pending goal requests, which send_goal_async fills in."""
