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

"""The action proxy, and :func:`make_proxy` for either kind (common part: :mod:`.forwarding`)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace
import threading
import time
from typing import Any, TypeVar

from action_msgs.msg import GoalStatus
from muscle_mem_ros.records import Snapshot, StepStatus, ToolKind
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.ros.capture.forwarding import (
    CallOutcome, ended, lost, SERVER_WAIT, ToolProxy, Watching, with_reason,
)
from muscle_mem_ros.ros.capture.recorder import Session
from muscle_mem_ros.ros.capture.serviceproxy import ServiceProxy
from muscle_mem_ros.ros.capture.stopping import stopper_for, StopReport
from muscle_mem_ros.ros.capture.tracing import TraceTaker
from muscle_mem_ros.ros.messages.success import refusal_reason
from muscle_mem_ros.ros.node.nodeconfig import RecordFrom, ToolConfig
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.action_server import ActionServer
from muscle_mem_ros.ros.rclfix.sync import cancel_when_accepted, CancelToken
from muscle_mem_ros.ros.rclfix.watch import ResultAgain, wait_watched, WaitEnd
from rclpy.action.client import ClientGoalHandle
from rclpy.action.server import CancelResponse, GoalResponse, ServerGoalHandle
from rclpy.task import Future

__all__ = ['ActionProxy', 'make_proxy']

T = TypeVar('T')

_RESULT_KEEP = 1
"""Seconds a proxied goal's result stays available after it finished. Callers
ask for it at once; rclpy's default of 10 s makes every status message carry
hundreds of finished goals when goals come back to back, which every client
then parses."""


class ActionProxy(ToolProxy):
    """Proxy for one action server (any action type)."""

    kind = ToolKind.ACTION

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        tool = self.tool
        self._client = ActionClient(
            self._node, tool.interface, tool.server, callback_group=self._group
        )
        self._handles: dict[bytes, _Running] = {}
        self._handles_lock = threading.Lock()
        self.stopper = stopper_for(
            node=self._node, tool=tool, client=self._client, hub=self._hub,
            rule=self._stop_rule, rate=self.sampler.rate if self.sampler is not None else 40.0)
        """Stops the goals the cache sent to this server (replayed and proxied ones)."""
        self._forwarded: dict[int, _Forward] = {}
        self._server = None if tool.record_from is RecordFrom.INTROSPECTION else ActionServer(
            self._node, tool.interface, tool.proxy, self._serve,
            goal_callback=self._on_goal,
            cancel_callback=self._on_cancel,
            callback_group=self._group,
            result_timeout=_RESULT_KEEP,
        )

    @property
    def payload_type(self) -> Any:
        """Return the action's Goal class."""
        return self.tool.interface.Goal

    def stop_calls(self) -> list[Future[StopReport]]:
        """
        Stop the real goal of every proxied goal in flight, each as a replayed step is stopped.

        :return: Each stop's report, once it is over (its goal ended and the robot rests,
            or it says why not); the stops run in threads of their own.
        """
        with self._handles_lock:
            keys = list(self._handles)
        return [f for f in map(self._begin_stop, keys) if f is not None]

    def end_calls(self, timeout: float) -> None:
        """
        Wait until the results of the proxied goals went out (their stops are over already).

        :param timeout: Seconds to wait at most.
        """
        self.stop_calls()
        if self._server is not None and not self._server.wait_results_sent(timeout):
            self._log.warning(f'{self._label}: a proxied goal did not end within {timeout:g} s')

    def destroy(self) -> None:
        """Destroy the action client and the served proxy action."""
        self._client.destroy()
        if self.stopper.service is not None:
            self._node.destroy_client(self.stopper.service)
        if self._server is not None:
            self._server.destroy()

    def ready(self) -> bool:
        """Return True when the real action server is discovered."""
        return bool(self._client.server_is_ready())

    def _on_cancel(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> CancelResponse:
        # Not forwarded yet: _serve sees is_cancel_requested once the real goal exists.
        self._begin_stop(bytes(goal_handle.goal_id.uuid))
        return CancelResponse.ACCEPT

    def _begin_stop(self, key: bytes) -> Future[StopReport] | None:
        """
        Stop the real goal of proxied goal ``key`` in a thread of its own (once).

        :return: Its stop's report once over (None: no such goal in flight).
        """
        with self._handles_lock:
            running = self._handles.get(key)
            if running is None:
                return None
            if running.stopping is not None:
                return running.stopping
            running.stopping = Future(executor=self._node.executor)
        stopping = running.stopping
        stopping.add_done_callback(lambda _f: None)  # completing it wakes the executor

        def work() -> None:
            report = StopReport(False, (), reason=f'{self.tool.server}: stopping the goal failed')
            try:
                report = self.stopper.stop(running.handle, running.result, sensors=self._traced)
                self._log.info(f'{self._label}: proxied goal stopped: {report.describe()}')
            except Exception as err:  # noqa: BLE001 - an error is no stop: not stopped
                report = StopReport(False, (), reason=f'{self.tool.server}: stopping the goal '
                                    f'failed ({err!r}): the robot did not stop')
                self._log.error(f'{self._label}: stopping a proxied goal failed: {err!r}')
            finally:
                if not report.stopped:
                    self.not_stopped(report.reason)
                stopping.set_result(report)
                running.settled()

        threading.Thread(target=work, name=f'stop {self._label}', daemon=True).start()
        return stopping

    def _on_goal(self, goal: Any) -> GoalResponse:
        """
        Forward ``goal`` at once and accept it here.

        Sending from the goal callback, before the proxy even answers the
        caller, takes the executor's hand-over to the execute callback off the
        goal's path (:meth:`_serve` picks the call up). Without a discovered
        server the goal is still accepted; :meth:`_serve` waits for the server,
        then aborts.
        """
        try:
            if not self.refused() and self._client.server_is_ready():
                self._forwarded[id(goal)] = self._forward(goal)
        except Exception as err:  # _serve tries again and aborts the goal with the reason
            self._log.error(f'{self.tool.proxy}: forwarding failed: {err!r}')
        return GoalResponse.ACCEPT

    def _forward(self, goal: Any) -> _Forward:
        """Take the pre snapshot if recording, then send ``goal`` to the real server."""
        forward = _Forward(goal=goal, session=self._recorder.active)
        forward.pre = self._pre(forward.session)
        forward.started = time.monotonic()
        forward.taker = self.start_trace(forward.session, forward.started, forward.pre)
        forward.sent = self._client.send_goal_async(goal, feedback_callback=forward.feedback)
        _on_accept(forward.sent, forward.taker)
        return forward

    async def _serve(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> Any:
        """Finish one proxied goal (a coroutine: waiting holds no executor thread)."""
        key = bytes(goal_handle.goal_id.uuid)
        empty = self.tool.interface.Result()
        goal = goal_handle.request
        forward = self._forwarded.pop(id(goal), None)
        try:
            if forward is None:  # the server was not there when the goal came, or held
                held = self.refused()
                if held:  # a robot that did not stop is commanded by nobody
                    return self._give_up(goal_handle, held)
                if goal_handle.is_cancel_requested:
                    goal_handle.canceled()
                    return empty
                if not self._client.wait_for_server(timeout_sec=SERVER_WAIT):
                    self._log.warning(f'{self.tool.proxy}: {self.tool.server} not available')
                    goal_handle.abort()
                    return empty
                forward = self._forward(goal)
            forward.attach(goal_handle)
            assert forward.sent is not None  # set by _forward
            lost = await self._watch.wait(forward.sent, started=forward.started)
            if lost:
                cancel_when_accepted(forward.sent)
                return self._give_up(goal_handle, lost)
            handle = forward.sent.result()
            if handle is None or not handle.accepted:
                self._log.warning(f'{self.tool.proxy}: {self.tool.server} rejected the goal')
                goal_handle.abort()
                return empty
            result = handle.get_result_async()
            running = _Running(handle, result, Future(executor=self._node.executor))
            with self._handles_lock:
                self._handles[key] = running
            if goal_handle.is_cancel_requested:
                self._begin_stop(key)
            again = ResultAgain(handle, result)
            lost = await self._watch.wait(running.over, started=forward.started, again=again)
            self._asked_again(again)
            if lost:
                self._begin_stop(key)  # a server that is only slow stops the goal too
            if running.stopping is not None:
                report = await running.stopping
                if report is None or not report.stopped:
                    why = report.reason if report is not None else 'stopping it failed'
                    return self._give_up(goal_handle, f'{lost}; {why}' if lost else why)
            if lost:
                return self._give_up(goal_handle, lost)
            wrapped = _done(result)
            out = CallOutcome(_status(wrapped.status), '', forward.started, time.monotonic(),
                              wrapped.result)
            taker = self.end_trace(forward.taker)
            if out.status is StepStatus.SUCCEEDED:
                # a "no" is not learned
                if not refusal_reason(wrapped.result, self.tool.success):
                    await self._record_aside(forward.session, goal, forward.pre, out, taker)
                goal_handle.succeed()
            elif out.status is StepStatus.CANCELED and goal_handle.is_cancel_requested:
                goal_handle.canceled()
            else:
                goal_handle.abort()
            return wrapped.result
        except Exception as err:  # never let one goal take the node down
            self._log.error(f'{self.tool.proxy}: {err!r}')
            if goal_handle.is_active:
                goal_handle.abort()
            return empty
        finally:
            with self._handles_lock:
                self._handles.pop(key, None)
            if forward is not None:
                self.end_trace(forward.taker)

    def _asked_again(self, again: ResultAgain) -> None:
        if again.asked:
            self._log.warning(f'{self.tool.proxy}: the answer of {self.tool.server} to a result '
                              f'request was lost; asked again ({again.asked}x)')

    def _give_up(self, goal_handle: ServerGoalHandle[Any, Any, Any], reason: str) -> Any:
        """Abort the proxied goal: the real server is gone or did not answer in time."""
        self._log.warning(f'{self.tool.proxy}: goal aborted: {reason}')
        goal_handle.abort()
        return with_reason(self.tool.interface.Result(), reason)

    _server_kind = 'action server'

    def _wait_ready(self, timeout: float) -> bool:
        return bool(self._client.wait_for_server(timeout_sec=timeout))

    def _exchange(
        self, message: Any, *, started: float, timeout: float, cancel: CancelToken,
        feedback: Callable[[Any], None] | None, watch: Watching | None,
        say: Callable[[str], None] | None,
    ) -> CallOutcome:
        sampler = self.sampler
        if watch is None or sampler is None:
            send = self._client.send_goal_async(message, feedback_callback=feedback)
            return self._finish(send, started=started, timeout=timeout, cancel=cancel,
                                rest=self._traced, say=say)

        def judged(msg: Any) -> None:
            watch.feedback(msg.feedback)
            if feedback is not None:
                feedback(msg)

        watch.begin(started)
        sampler.add(watch)
        try:
            send = self._client.send_goal_async(message, feedback_callback=judged)
            _on_accept(send, watch)
            return self._finish(send, started=started, timeout=timeout, cancel=watch.token,
                                rest=watch.names, say=say)
        finally:
            sampler.remove(watch)

    def _finish(self, send: Future[ClientGoalHandle[Any, Any, Any]], *, started: float,
                timeout: float, cancel: CancelToken, rest: Collection[str],
                say: Callable[[str], None] | None) -> CallOutcome:
        """
        Wait for the goal sent (``send``) to be accepted and to end; stop it if told.

        Canceled (the walk's cancel, its watch) or out of time, the goal is stopped
        (:mod:`.stopping`): the outcome comes once it ended and the robot rests on
        ``rest``, or says the robot did not stop (``NOT_STOPPED``).
        """
        server = self.tool.server
        end = wait_watched(send, timeout=timeout, cancel=cancel, present=self.ready)
        if end is WaitEnd.LOST:  # it may have been accepted, and run
            cancel_when_accepted(send)
            return self._lost(started, rest, say)
        why = self._why(end, cancel, timeout, answered=False)
        failed_at = time.monotonic()
        if end is not WaitEnd.DONE and wait_watched(
                send, timeout=self.stopper.timeout, cancel=CancelToken(),
                present=self.ready) is not WaitEnd.DONE:
            cancel_when_accepted(send)
            return replace(ended(
                started, StepStatus.FAILED,
                f'{why}; {server} did not answer the goal within {self.stopper.timeout:g} s '
                'after: it may be moving, the robot did not stop', kind=FailureKind.NOT_STOPPED),
                failed_at=failed_at)
        handle = send.result()
        if handle is None or not handle.accepted:
            if end is not WaitEnd.DONE:
                return self._stopped(started, end, cancel, why, failed_at, None)
            return ended(started, StepStatus.FAILED, f'{server} rejected the goal')
        result = handle.get_result_async()
        if end is WaitEnd.DONE:
            remaining = max(0.0, timeout - (time.monotonic() - started))
            again = ResultAgain(handle, result)
            end = wait_watched(result, timeout=remaining, cancel=cancel, present=self.ready,
                               again=again)
            self._asked_again(again)
            if end is WaitEnd.LOST:  # nobody is left to confirm a cancel
                handle.cancel_goal_async()
                return self._lost(started, rest, say)
            why = self._why(end, cancel, timeout, answered=True)
            failed_at = time.monotonic()
        report = None
        if end is not WaitEnd.DONE:
            report = self.stopper.stop(handle, result, sensors=rest, say=say)
            if not report.stopped:
                return replace(ended(started, StepStatus.FAILED, f'{why}; {report.reason}',
                                     kind=FailureKind.NOT_STOPPED),
                               stop=report, failed_at=failed_at)
            if report.status != GoalStatus.STATUS_SUCCEEDED:
                return self._stopped(started, end, cancel, why, failed_at, report)
            # it succeeded before the cancel arrived: the motion ran to its end
        wrapped = _done(result)
        status = _status(wrapped.status)
        detail = {StepStatus.SUCCEEDED: '', StepStatus.CANCELED: f'{server} canceled the goal',
                  StepStatus.FAILED: f'{server} aborted the goal'}[status]
        why = refusal_reason(wrapped.result, self.tool.success) \
            if status is StepStatus.SUCCEEDED else ''
        if why:
            status, detail = StepStatus.FAILED, f'{server} succeeded, but {why}'
        return replace(ended(started, status, detail, wrapped.result), stop=report)

    def _lost(self, started: float, rest: Collection[str],
              say: Callable[[str], None] | None) -> CallOutcome:
        """
        Settle a goal whose server left the graph (the goal may still run; :mod:`.stopping`).

        :return: ``SERVER_LOST`` once the robot is seen at rest, else ``NOT_STOPPED``.
        """
        failed_at = time.monotonic()
        report = self.stopper.settle(lost(self.tool.server), sensors=rest, say=say)
        out = ended(started, StepStatus.FAILED, lost(self.tool.server),
                    kind=FailureKind.SERVER_LOST) if report.stopped else ended(
            started, StepStatus.FAILED, report.reason, kind=FailureKind.NOT_STOPPED)
        return replace(out, stop=report, failed_at=failed_at)

    def _why(self, end: WaitEnd, cancel: CancelToken, timeout: float, *, answered: bool) -> str:
        """Return why the cache stops a goal ('' when it does not)."""
        if end is WaitEnd.DONE:
            return ''
        if end is WaitEnd.CANCELED or cancel.cancelled:
            return 'canceled'
        if answered:
            return f'{self.tool.server} timed out after {timeout:g} s (goal canceled)'
        return f'{self.tool.server} did not answer the goal in {timeout:g} s'

    def _stopped(self, started: float, end: WaitEnd, cancel: CancelToken, why: str,
                 failed_at: float, report: StopReport | None) -> CallOutcome:
        """Return the outcome of a goal the cache stopped, once it stopped."""
        response = report.result if report is not None else None
        if end is WaitEnd.CANCELED or cancel.cancelled:
            out = ended(started, StepStatus.CANCELED, 'canceled', response)
        else:
            out = ended(started, StepStatus.FAILED, why, response, kind=FailureKind.TIMEOUT)
        return replace(out, stop=report, failed_at=failed_at)


class _Running:
    """
    A proxied goal the real server accepted: its handle, its result, and its stop if any.

    ``over`` completes when the result arrived or a stop finished (a robot that did
    not stop has no result to wait for).
    """

    def __init__(self, handle: ClientGoalHandle[Any, Any, Any], result: Future[Any],
                 over: Future[None]) -> None:
        self.handle = handle
        self.result = result
        self.over = over
        over.add_done_callback(lambda _f: None)  # completing it wakes the executor
        self.stopping: Future[StopReport] | None = None
        self._lock = threading.Lock()
        result.add_done_callback(lambda _f: self.settled())

    def settled(self) -> None:
        """Complete ``over`` (once)."""
        with self._lock:
            if self.over.done():
                return
            self.over.set_result(None)


class _Forward:
    """
    One proxied goal on its way to the real server.

    Sent from the goal callback, finished by the execute callback. Feedback that
    arrives before the proxy's goal handle exists is kept and published once it does.
    """

    def __init__(self, *, goal: Any, session: Session | None) -> None:
        self.goal = goal  # keeps id(goal), the key in ActionProxy._forwarded, unique
        self.session = session
        self.pre: Snapshot | None = None
        self.started = 0.0
        self.sent: Future[ClientGoalHandle[Any, Any, Any]] | None = None
        self.taker: TraceTaker | None = None
        self._handle: ServerGoalHandle[Any, Any, Any] | None = None
        self._early: list[Any] = []

    def feedback(self, message: Any) -> None:
        if self.taker is not None:
            self.taker.feedback(message.feedback)
        if self._handle is None:
            self._early.append(message.feedback)
        else:
            self._handle.publish_feedback(message.feedback)

    def attach(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> None:
        self._handle = goal_handle
        for feedback in self._early:
            goal_handle.publish_feedback(feedback)
        self._early.clear()


def _on_accept(sent: Future[Any], noter: TraceTaker | Watching | None) -> None:
    """Tell ``noter`` when the goal's answer arrives (its zero: time into the step)."""
    if noter is not None:
        sent.add_done_callback(lambda _f: noter.accepted(time.monotonic()))


def _done(future: Future[T]) -> T:
    """Return a done future's result (rclpy types it Optional: None only before it is done)."""
    value = future.result()
    assert value is not None
    return value


def _status(goal_status: int) -> StepStatus:
    """Map an action_msgs GoalStatus code to a step status."""
    if goal_status == GoalStatus.STATUS_SUCCEEDED:
        return StepStatus.SUCCEEDED
    if goal_status == GoalStatus.STATUS_CANCELED:
        return StepStatus.CANCELED
    return StepStatus.FAILED


def make_proxy(**kwargs: Any) -> ToolProxy:
    """Build the proxy matching ``kwargs['tool'].kind``."""
    tool: ToolConfig = kwargs['tool']
    return ActionProxy(**kwargs) if tool.kind is ToolKind.ACTION else ServiceProxy(**kwargs)
