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
Action and service proxies: serve a tool's type under a proxy name, forward to the server.

Point the agent at the proxy name instead of the real server. Every goal
(request) is forwarded unchanged to the real server, feedback flows back,
a cancel of the proxied goal cancels the real one, and the real result (or
response) is returned with the same status. Outside a recording that is all:
a transparent pass-through.

While a recording is active (see :mod:`.recorder`) each call that succeeds also
becomes a :class:`~muscle_mem_ros.records.Step`: a snapshot before forwarding,
the goal as CDR bytes (``rclpy.serialization``, padding zeroed by
:func:`~muscle_mem_ros.ros.messages.cdr.canonical_cdr` so that equal goals give equal
bytes) and as JSON, the duration, and a snapshot after the sensors reported
data newer than the call's end. That wait (at most ``post_check_timeout``)
happens before the result goes back to the agent, so the next step's pre
snapshot never precedes this one's post. Calls that fail, are canceled or are
rejected are forwarded but not recorded.

A tool configured with ``record_from: introspection`` gets the client only:
nothing is served, the agent calls the real server, and :mod:`.tap` records
its calls from the server's introspection events through :meth:`ToolProxy.record`;
replay goes through the same client as here.

Two proxy-specific decisions: the proxy accepts every goal and aborts it if the
real server rejects it or is not available (the action protocol gives a goal
callback no way to wait for the server's answer; the goal callback does send
the goal on at once, which takes one executor hand-over off every proxied
goal); a service response with a
boolean ``success`` field set to false (``std_srvs/srv/SetBool``,
``std_srvs/srv/Trigger``) counts as a failed step.

Serving is asynchronous (coroutine callbacks): a proxied call in flight holds
no executor thread, and the caller's cancel is forwarded. It waits for the real
server at most ``step_timeout`` seconds, and only while the server is in the
ROS graph (:mod:`.watch`): a server that dies mid-goal ends the proxied goal
ABORTED (a service call: the default response, ``success`` false where the type
has it), with the reason in the log and in the result's ``error_string`` or
``message`` field where the type has one. The same objects execute steps during replay
(:meth:`ToolProxy.call`, blocking, with the per-step timeout), through the same
clients.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
import threading
import time
from typing import Any

from action_msgs.msg import GoalStatus
from muscle_mem_ros.errors import MuscleMemError
from muscle_mem_ros.records import Snapshot, Step, StepStatus, ToolKind
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.ros.config import RecordFrom, ToolConfig
from muscle_mem_ros.ros.messages.cdr import canonical_cdr
from muscle_mem_ros.ros.messages.goalfields import set_fields
from muscle_mem_ros.ros.messages.introspection import message_to_json
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.action_server import ActionServer
from muscle_mem_ros.ros.rclfix.sync import cancel_when_accepted, CancelToken
from muscle_mem_ros.ros.rclfix.watch import CallWatch, wait_watched, WaitEnd
from muscle_mem_ros.ros.recorder import Recorder, Session
from muscle_mem_ros.ros.sensors import SensorHub
from rclpy.action import CancelResponse, GoalResponse
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node as RosNode
from rclpy.serialization import deserialize_message, serialize_message
from rclpy.task import Future

__all__ = ['ActionProxy', 'CallOutcome', 'ServiceProxy', 'ToolProxy', 'make_proxy']

_CANCEL_GRACE = 2.0
"""Seconds to wait for a canceled goal's result before giving up on it."""
_SERVER_WAIT = 2.0
"""Seconds to wait for a server that is not discovered yet."""
_RESULT_KEEP = 1
"""Seconds a proxied goal's result stays available after it finished. Callers
ask for it at once; rclpy's default of 10 s makes every status message carry
hundreds of finished goals when goals come back to back, which every client
then parses."""


@dataclass(frozen=True)
class CallOutcome:
    """
    How one forwarded or replayed call ended.

    :ivar status: Succeeded, failed (aborted, rejected, timed out, unavailable) or canceled.
    :ivar detail: Human-readable reason, '' on success.
    :ivar started: Monotonic time the call was sent.
    :ivar ended: Monotonic time the result arrived (or the wait ended).
    :ivar response: The result message (action) or response (service), or None.
    :ivar kind: Why a failed call failed when it is more than the server's own answer:
        ``TIMEOUT`` or ``SERVER_LOST``; None otherwise (the walk then says ``STEP_FAILED``).
    """

    status: StepStatus
    detail: str
    started: float
    ended: float
    response: Any = None
    kind: FailureKind | None = None


class ToolProxy:
    """
    Common part of action and service proxies: recording and replay entry point.

    :param node: Node owning the server and client.
    :param tool: The tool's configuration.
    :param hub: Sensor capture for pre and post snapshots.
    :param recorder: The active recording, if any.
    :param callback_group: Group for the server and client callbacks: reentrant, else
        a pending coroutine (a forwarded call) would keep its own client's
        response from being delivered.
    :param post_timeout: Max seconds to wait for sensor data newer than a call's end.
    :param logger: Where to log (default: ``node``'s logger).
    :param timeout: Seconds a call may take (the node's ``step_timeout``), proxied or
        replayed; None: no limit for proxied calls (replayed ones get their own).
    """

    kind: ToolKind
    _server_kind = 'server'
    """How errors name the real server ('action server', 'service')."""

    def __init__(
        self,
        *,
        node: RosNode,
        tool: ToolConfig,
        hub: SensorHub,
        recorder: Recorder,
        callback_group: CallbackGroup,
        post_timeout: float,
        logger: Any = None,
        timeout: float | None = None,
    ) -> None:
        self.tool = tool
        self._node = node
        self._hub = hub
        self._recorder = recorder
        self._group = callback_group
        self._post_timeout = post_timeout
        self._log = logger if logger is not None else node.get_logger()
        self._label = tool.proxy or tool.server
        """How log lines name this tool: the proxy, or the server when nothing is served."""
        self._watch = CallWatch(node=node, callback_group=callback_group, present=self.ready,
                                server=tool.server, timeout=timeout)

    @property
    def payload_type(self) -> Any:
        """Message class of the stored payload (goal or request)."""
        raise NotImplementedError

    def end_calls(self, timeout: float) -> None:
        """
        End the proxied calls in flight before the proxy goes (deactivate, shutdown).

        :param timeout: Seconds to wait at most for their clients to have their results.
        """

    def ready(self) -> bool:
        """Return True when the real server is discovered."""
        raise NotImplementedError

    def destroy(self) -> None:
        """
        Destroy this proxy's servers and clients (deactivate calls it, before the node goes).

        ``destroy_node`` leaves action servers and clients alone, and each keeps the rcl node
        alive: a node reactivated without this stays in the graph once per cycle.
        """
        raise NotImplementedError

    def call(self, payload: bytes, *, timeout: float, cancel: CancelToken,
             fields: Mapping[str, Any] | None = None) -> CallOutcome:
        """
        Replay one stored payload against the real server.

        :param payload: The stored CDR bytes.
        :param timeout: Seconds the call may take.
        :param cancel: Cancels it.
        :param fields: Bound fields to set before sending (leaf path -> value).
        :return: How it ended.
        """
        now = time.monotonic()
        try:
            message = deserialize_message(payload, self.payload_type)
            if fields:
                set_fields(message, fields)
        except Exception as err:  # stored bytes no longer match the type
            return CallOutcome(
                StepStatus.FAILED, f'cannot decode or rebind the stored payload as '
                f'{self.tool.type_name}: '
                f'{err}', now, now,
            )
        return self._send(message, timeout=timeout, cancel=cancel)

    def _send(
        self, message: Any, *, timeout: float, cancel: CancelToken,
        feedback: Callable[[Any], None] | None = None,
    ) -> CallOutcome:
        """Send ``message`` to the real server, unless canceled or the server is absent."""
        started = time.monotonic()
        if cancel.cancelled:
            return _ended(started, StepStatus.CANCELED, 'canceled')
        if not self.ready() and not self._wait_ready(min(timeout, _SERVER_WAIT)):
            return _ended(started, StepStatus.FAILED,
                          f'{self._server_kind} {self.tool.server} not available')
        return self._exchange(message, started=started, timeout=timeout, cancel=cancel,
                              feedback=feedback)

    def _wait_ready(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the real server; True once it is discovered."""
        raise NotImplementedError

    def _exchange(
        self, message: Any, *, started: float, timeout: float, cancel: CancelToken,
        feedback: Callable[[Any], None] | None,
    ) -> CallOutcome:
        """Send to the discovered server and wait for the outcome."""
        raise NotImplementedError

    def _pre(self, session: Session | None) -> Snapshot | None:
        return self._hub.capture() if session is not None else None

    async def _record_aside(
        self, session: Session | None, message: Any, pre: Snapshot | None, out: CallOutcome
    ) -> None:
        """
        Run :meth:`_record` in a thread of its own and await it.

        Its post-snapshot wait blocks (up to ``post_timeout``); the proxy
        node's single executor thread must keep serving other calls meanwhile.
        """
        if session is None:
            return
        done: Future = Future(executor=self._node.executor)
        done.add_done_callback(lambda _f: None)  # completing it wakes the executor

        def work() -> None:
            try:
                self._record(session, message, pre, out)
            except Exception as err:  # logged; the call itself succeeded
                self._log.error(f'{self.tool.proxy}: recording the step failed: {err!r}')
            finally:
                done.set_result(None)

        threading.Thread(target=work, name=f'record {self.tool.proxy}', daemon=True).start()
        await done

    def record(
        self, session: Session | None, message: Any, pre: Snapshot | None, out: CallOutcome
    ) -> Snapshot | None:
        """
        Record a call the agent made straight to the server (seen in introspection events).

        The same as a proxied call's recording (blocks for the post snapshot).

        :param session: The recording the call was made in (nothing if None or ended).
        :param message: The goal or request.
        :param pre: Snapshot taken when the call was seen starting.
        :param out: How it ended (``started``/``ended`` on the monotonic clock).
        :return: The post snapshot if the step was appended, else None.
        """
        return self._record(session, message, pre, out)

    def _record(
        self, session: Session | None, message: Any, pre: Snapshot | None, out: CallOutcome
    ) -> Snapshot | None:
        """Append the call to ``session`` if still active and succeeded; return its post."""
        if session is None:
            return None
        if out.status is not StepStatus.SUCCEEDED:
            self._log.info(
                f'{self._label}: call {out.status.value} ({out.detail}); not recorded'
            )
            return None
        if self._hub.names and not self._hub.wait_newer(out.ended, self._post_timeout):
            self._log.warning(
                f'{self._label}: no data newer than the call from '
                f'{", ".join(self._hub.lagging(out.ended))}; post snapshot uses older data'
            )
        post = self._hub.capture()
        step = Step(
            tool=self.tool.server,
            kind=self.kind,
            type_name=self.tool.type_name,
            payload=canonical_cdr(bytes(serialize_message(message)), self.payload_type),
            payload_json=message_to_json(message),
            pre=pre if pre is not None and pre.features else None,
            post=post if post.features else None,
            status=out.status,
            duration=out.ended - out.started,
        )
        try:
            appended = session is self._recorder.active and session.append(step)
        except MuscleMemError as err:  # the call itself succeeded: say so, log the loss
            self._log.error(f'{self._label}: step not recorded: {err}')
            return None
        if not appended:
            self._log.warning(f'{self._label}: recording ended during the call; not recorded')
            return None
        return post


class ActionProxy(ToolProxy):
    """Proxy for one action server (any action type)."""

    kind = ToolKind.ACTION

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        tool = self.tool
        self._client = ActionClient(
            self._node, tool.interface, tool.server, callback_group=self._group
        )
        self._handles: dict[bytes, Any] = {}
        self._handles_lock = threading.Lock()
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

    def end_calls(self, timeout: float) -> None:
        """
        Cancel the real goals of the proxied goals in flight; wait until their results went out.

        Each such goal then ends as the real server answers the cancel (aborted: the client
        did not ask for it), instead of meeting a destroyed server.

        :param timeout: Seconds to wait at most.
        """
        with self._handles_lock:
            handles = list(self._handles.values())
        for handle in handles:
            handle.cancel_goal_async()
        if self._server is not None and not self._server.wait_results_sent(timeout):
            self._log.warning(f'{self._label}: a proxied goal did not end within {timeout:g} s')

    def destroy(self) -> None:
        """Destroy the action client and the served proxy action."""
        self._client.destroy()
        if self._server is not None:
            self._server.destroy()

    def ready(self) -> bool:
        """Return True when the real action server is discovered."""
        return bool(self._client.server_is_ready())

    def _on_cancel(self, goal_handle: Any) -> CancelResponse:
        with self._handles_lock:
            handle = self._handles.get(bytes(goal_handle.goal_id.uuid))
        if handle is not None:
            handle.cancel_goal_async()
        # Not forwarded yet: _serve sees is_cancel_requested once the real goal exists.
        return CancelResponse.ACCEPT

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
            if self._client.server_is_ready():
                self._forwarded[id(goal)] = self._forward(goal)
        except Exception as err:  # _serve tries again and aborts the goal with the reason
            self._log.error(f'{self.tool.proxy}: forwarding failed: {err!r}')
        return GoalResponse.ACCEPT

    def _forward(self, goal: Any) -> _Forward:
        """Take the pre snapshot if recording, then send ``goal`` to the real server."""
        forward = _Forward(goal=goal, session=self._recorder.active)
        forward.pre = self._pre(forward.session)
        forward.started = time.monotonic()
        forward.sent = self._client.send_goal_async(goal, feedback_callback=forward.feedback)
        return forward

    async def _serve(self, goal_handle: Any) -> Any:
        """Finish one proxied goal (a coroutine: waiting holds no executor thread)."""
        key = bytes(goal_handle.goal_id.uuid)
        empty = self.tool.interface.Result()
        goal = goal_handle.request
        forward = self._forwarded.pop(id(goal), None)
        try:
            if forward is None:  # the server was not there when the goal came
                if goal_handle.is_cancel_requested:
                    goal_handle.canceled()
                    return empty
                if not self._client.wait_for_server(timeout_sec=_SERVER_WAIT):
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
            with self._handles_lock:
                self._handles[key] = handle
            if goal_handle.is_cancel_requested:
                handle.cancel_goal_async()
            result = handle.get_result_async()
            lost = await self._watch.wait(result, started=forward.started)
            if lost:
                handle.cancel_goal_async()  # a server that is only slow stops the goal too
                return self._give_up(goal_handle, lost)
            wrapped = result.result()
            out = CallOutcome(_status(wrapped.status), '', forward.started, time.monotonic(),
                              wrapped.result)
            if out.status is StepStatus.SUCCEEDED:
                await self._record_aside(forward.session, goal, forward.pre, out)
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

    def _give_up(self, goal_handle: Any, reason: str) -> Any:
        """Abort the proxied goal: the real server is gone or did not answer in time."""
        self._log.warning(f'{self.tool.proxy}: goal aborted: {reason}')
        goal_handle.abort()
        return _with_reason(self.tool.interface.Result(), reason)

    _server_kind = 'action server'

    def _wait_ready(self, timeout: float) -> bool:
        return bool(self._client.wait_for_server(timeout_sec=timeout))

    def _exchange(
        self, message: Any, *, started: float, timeout: float, cancel: CancelToken,
        feedback: Callable[[Any], None] | None,
    ) -> CallOutcome:
        server = self.tool.server
        send = self._client.send_goal_async(message, feedback_callback=feedback)
        end = wait_watched(send, timeout=timeout, cancel=cancel, present=self.ready)
        if end is not WaitEnd.DONE:
            cancel_when_accepted(send)
            if end is WaitEnd.CANCELED:
                return _ended(started, StepStatus.CANCELED, 'canceled')
            if end is WaitEnd.LOST:
                return _ended(started, StepStatus.FAILED, _lost(server),
                              kind=FailureKind.SERVER_LOST)
            return _ended(started, StepStatus.FAILED,
                          f'{server} did not answer the goal in {timeout:g} s',
                          kind=FailureKind.TIMEOUT)
        handle = send.result()
        if handle is None or not handle.accepted:
            return _ended(started, StepStatus.FAILED, f'{server} rejected the goal')
        result = handle.get_result_async()
        remaining = max(0.0, timeout - (time.monotonic() - started))
        end = wait_watched(result, timeout=remaining, cancel=cancel, present=self.ready)
        if end is not WaitEnd.DONE:
            handle.cancel_goal_async()
            if end is WaitEnd.LOST:  # nobody is left to confirm the cancel
                return _ended(started, StepStatus.FAILED, _lost(server),
                              kind=FailureKind.SERVER_LOST)
            end = wait_watched(result, timeout=_CANCEL_GRACE, cancel=CancelToken(),
                               present=self.ready)
            response = result.result().result if end is WaitEnd.DONE else None
            if cancel.cancelled:
                return _ended(started, StepStatus.CANCELED, 'canceled', response)
            return _ended(
                started, StepStatus.FAILED,
                f'{server} timed out after {timeout:g} s (goal canceled)',
                response, kind=FailureKind.TIMEOUT,
            )
        wrapped = result.result()
        status = _status(wrapped.status)
        detail = {StepStatus.SUCCEEDED: '', StepStatus.CANCELED: f'{server} canceled the goal',
                  StepStatus.FAILED: f'{server} aborted the goal'}[status]
        return _ended(started, status, detail, wrapped.result)


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
        self.sent: Future | None = None
        self._handle: Any = None
        self._early: list[Any] = []

    def feedback(self, message: Any) -> None:
        if self._handle is None:
            self._early.append(message.feedback)
        else:
            self._handle.publish_feedback(message.feedback)

    def attach(self, goal_handle: Any) -> None:
        self._handle = goal_handle
        for feedback in self._early:
            goal_handle.publish_feedback(feedback)
        self._early.clear()


def _status(goal_status: int) -> StepStatus:
    """Map an action_msgs GoalStatus code to a step status."""
    if goal_status == GoalStatus.STATUS_SUCCEEDED:
        return StepStatus.SUCCEEDED
    if goal_status == GoalStatus.STATUS_CANCELED:
        return StepStatus.CANCELED
    return StepStatus.FAILED


def _service_succeeded(response: Any) -> bool:
    success = getattr(response, 'success', True)
    return success if isinstance(success, bool) else True


class ServiceProxy(ToolProxy):
    """Proxy for one service (any service type)."""

    kind = ToolKind.SERVICE

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        tool = self.tool
        self._client: Any = self._node.create_client(
            tool.interface, tool.server, callback_group=self._group
        )
        self._service = None if tool.record_from is RecordFrom.INTROSPECTION else \
            self._node.create_service(
                tool.interface, tool.proxy, self._serve, callback_group=self._group)

    @property
    def payload_type(self) -> Any:
        """Return the service's Request class."""
        return self.tool.interface.Request

    def destroy(self) -> None:
        """Destroy the service client and the served proxy service."""
        self._node.destroy_client(self._client)
        if self._service is not None:
            self._node.destroy_service(self._service)

    def ready(self) -> bool:
        """Return True when the real service is discovered."""
        return bool(self._client.service_is_ready())

    async def _serve(self, request: Any, response: Any) -> Any:
        """Forward one proxied request (a coroutine: waiting holds no executor thread)."""
        try:
            session = self._recorder.active
            pre = self._pre(session)
            if not self._client.service_is_ready() and not self._client.wait_for_service(
                timeout_sec=_SERVER_WAIT
            ):
                self._log.error(f'{self.tool.proxy}: {self.tool.server} not available; '
                                'answering with a default response')
                return response
            started = time.monotonic()
            future = self._client.call_async(request)
            lost = await self._watch.wait(future, started=started)
            if lost:
                self._client.remove_pending_request(future)
                self._log.warning(f'{self.tool.proxy}: request failed: {lost}')
                return _with_reason(response, lost)
            answer = future.result()
            status = StepStatus.SUCCEEDED if _service_succeeded(answer) else StepStatus.FAILED
            await self._record_aside(
                session, request, pre, CallOutcome(status, '', started, time.monotonic(), answer))
            return answer
        except Exception as err:  # never let one request take the node down
            self._log.error(f'{self.tool.proxy}: {err!r}')
            return response

    _server_kind = 'service'

    def _wait_ready(self, timeout: float) -> bool:
        return bool(self._client.wait_for_service(timeout_sec=timeout))

    def _exchange(
        self, message: Any, *, started: float, timeout: float, cancel: CancelToken,
        feedback: Callable[[Any], None] | None,
    ) -> CallOutcome:
        server = self.tool.server
        future = self._client.call_async(message)
        end = wait_watched(future, timeout=timeout, cancel=cancel, present=self.ready)
        if end is not WaitEnd.DONE:
            self._client.remove_pending_request(future)
            if end is WaitEnd.CANCELED:
                return _ended(started, StepStatus.CANCELED, 'canceled')
            if end is WaitEnd.LOST:
                return _ended(started, StepStatus.FAILED, _lost(server),
                              kind=FailureKind.SERVER_LOST)
            return _ended(started, StepStatus.FAILED, f'{server} did not answer in {timeout:g} s',
                          kind=FailureKind.TIMEOUT)
        response = future.result()
        if not _service_succeeded(response):
            message_text = getattr(response, 'message', '')
            return _ended(
                started, StepStatus.FAILED,
                f'{server} answered success=false {message_text!r}'.strip(),
                response,
            )
        return _ended(started, StepStatus.SUCCEEDED, '', response)


def _lost(server: str) -> str:
    return f'{server} left the ROS graph during the step (its process stopped or crashed)'


_REASON_FIELDS = ('error_string', 'message', 'error_msg', 'reason')
"""String fields of a result or response that carry a failure's reason, if the type has one."""


def _with_reason(message: Any, reason: str) -> Any:
    """
    Put ``reason`` into the first reason field ``message`` has, and ``success`` to false.

    :param message: An action result or a service response.
    :param reason: Why the call failed.
    :return: ``message``.
    """
    fields = message.get_fields_and_field_types()
    for name in _REASON_FIELDS:
        if fields.get(name) == 'string':
            setattr(message, name, reason)
            break
    if fields.get('success') == 'boolean':
        message.success = False
    return message


def _ended(
    started: float, status: StepStatus, detail: str, response: Any = None,
    kind: FailureKind | None = None,
) -> CallOutcome:
    return CallOutcome(status, detail, started, time.monotonic(), response, kind)


def make_proxy(**kwargs: Any) -> ToolProxy:
    """Build the proxy matching ``kwargs['tool'].kind``."""
    tool: ToolConfig = kwargs['tool']
    return ActionProxy(**kwargs) if tool.kind is ToolKind.ACTION else ServiceProxy(**kwargs)
