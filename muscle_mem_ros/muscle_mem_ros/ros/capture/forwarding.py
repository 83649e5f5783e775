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

This module holds what both kinds share; the action and the service proxy are
:mod:`.proxies`. A tool configured with ``record_from: introspection`` gets the
client only: nothing is served, the agent calls the real server, and :mod:`.tap`
records its calls from the server's introspection events through
:meth:`ToolProxy.record`; replay goes through the same client as here.

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
ROS graph (:mod:`..rclfix.watch`): a server that dies mid-goal ends the proxied goal
ABORTED (a service call: the default response, ``success`` false where the type
has it), with the reason in the log and in the result's ``error_string`` or
``message`` field where the type has one. The same objects execute steps during replay
(:meth:`ToolProxy.call`, blocking, with the per-step timeout), through the same
clients.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
import math
import threading
import time
from typing import Any, Protocol


from muscle_mem_ros.checks.tube import left_tube
from muscle_mem_ros.errors import MuscleMemError
from muscle_mem_ros.records import CheckFailure, Snapshot, Step, StepStatus, ToolKind
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.ros.capture.recorder import Recorder, Session
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.capture.stopping import StopReport
from muscle_mem_ros.ros.capture.tracing import Sampler, TraceTaker
from muscle_mem_ros.ros.messages.cdr import canonical_cdr
from muscle_mem_ros.ros.messages.goalfields import set_fields
from muscle_mem_ros.ros.messages.introspection import message_to_json
from muscle_mem_ros.ros.node.nodeconfig import StopRule, ToolConfig
from muscle_mem_ros.ros.rclfix.sync import CancelToken
from muscle_mem_ros.ros.rclfix.watch import CallWatch
from rclpy.callback_groups import CallbackGroup
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.node import Node as RosNode
from rclpy.serialization import deserialize_message, serialize_message
from rclpy.task import Future

__all__ = ['CallOutcome', 'ended', 'Held', 'lost', 'SERVER_WAIT', 'ToolProxy', 'Watching',
           'with_reason']

SERVER_WAIT = 2.0
"""Seconds to wait for a server that is not discovered yet."""


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
        ``TIMEOUT``, ``SERVER_LOST`` or ``DURING_CHECK`` (its watch canceled it); None
        otherwise (the walk then says ``STEP_FAILED``).
    :ivar failure: What its watch saw leave the tube (kind ``DURING_CHECK``), else None.
    :ivar stop: How the cache stopped it (its watch, the timeout, a cancel), else None.
    :ivar failed_at: Monotonic time it failed (the watch tripped, the time ran out), or nan:
        events are stamped with it, not with when the stop after it ended.
    """

    status: StepStatus
    detail: str
    started: float
    ended: float
    response: Any = None
    kind: FailureKind | None = None
    failure: CheckFailure | None = None
    stop: StopReport | None = None
    failed_at: float = math.nan


class Watching(Protocol):
    """The check during one replayed goal (:class:`~..execution.watch.StepWatch`)."""

    token: CancelToken
    failure: CheckFailure | None
    names: frozenset[str]
    tripped_at: float

    def begin(self, sent: float) -> None:
        """Start judging: the goal was sent."""

    def accepted(self, at: float) -> None:
        """Note when the goal was accepted."""

    def feedback(self, message: Any) -> None:
        """Judge one feedback message."""

    def sample(self, snapshot: Snapshot) -> None:
        """Judge one poll of the sensors."""


class Held(Protocol):
    """
    Whether the robot is held after a stop that failed (:mod:`..execution.standstill`).

    A proxy tells it when a goal it stopped did not stop, and asks it before it sends
    anything: while it refuses, nothing goes to the robot.
    """

    def refusal(self) -> str:
        """Return why nothing may be sent now ('' when the robot may be commanded)."""

    def not_stopped(self, server: str, reason: str) -> None:
        """Note that a goal on ``server`` did not stop (``reason``: the stop's report)."""


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
    :param sampler: Polls the sensors while an action step runs (its trace, its watch);
        None: nothing is traced or watched.
    :param traced: Names of the sensors a recorded action step's trace keeps.
    :param stop_rule: What a goal the cache stops is held to (:mod:`.stopping`).
    :param held: Told of a stop that failed, and asked before anything is sent (None: the
        proxy keeps no such record).
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
        logger: RcutilsLogger | None = None,
        timeout: float | None = None,
        sampler: Sampler | None = None,
        traced: Collection[str] = (),
        stop_rule: StopRule = StopRule(),
        held: Held | None = None,
    ) -> None:
        self.tool = tool
        self._stop_rule = stop_rule
        self._held = held
        self.sampler = sampler
        self._traced = frozenset(traced)
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

    def stop_calls(self) -> list[Future[StopReport]]:
        """
        Stop every proxied goal in flight (a task that had them ended, a deactivate).

        :return: Each stop's report, once it is over (a service call: none, it cannot be
            stopped).
        """
        return []

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
             fields: Mapping[str, Any] | None = None,
             watch: Watching | None = None,
             say: Callable[[str], None] | None = None) -> CallOutcome:
        """
        Replay one stored payload against the real server.

        :param payload: The stored CDR bytes.
        :param timeout: Seconds the call may take.
        :param cancel: Cancels it.
        :param fields: Bound fields to set before sending (leaf path -> value).
        :param watch: Judges the goal while it runs and cancels it when the world leaves
            its recording (an action; a service is never watched).
        :param say: Told at once what happens while the goal is stopped (feedback).
        :return: How it ended, once the goal ended and, when the cache stopped it, the
            robot came to rest (:mod:`.stopping`); a robot that did not stop is a failure
            of kind ``NOT_STOPPED``. A watch that tripped makes it a failure of kind
            ``DURING_CHECK``, unless the goal succeeded before its cancel arrived: the
            motion ran to its end, and the step is finished by its result and judged by
            its post-check, as a step that was not watched.
        """
        now = time.monotonic()
        held = self.refused()
        if held:  # a robot that did not stop is commanded by nobody, a replay neither
            return CallOutcome(StepStatus.FAILED, held, now, now, kind=FailureKind.NOT_STOPPED)
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
        out = self._send(message, timeout=timeout, cancel=cancel, watch=watch, say=say)
        if out.kind is FailureKind.NOT_STOPPED:
            self.not_stopped(out.detail)
        if watch is None or watch.failure is None or cancel.cancelled:
            return out
        out = replace(out, failed_at=watch.tripped_at)
        if out.kind is FailureKind.NOT_STOPPED:
            return replace(out, failure=watch.failure,
                           detail=f'{left_tube(watch.failure)}; {out.detail}')
        if out.status is StepStatus.SUCCEEDED:
            self._log.info(f'{self._label}: the goal succeeded before its cancel arrived '
                           f'({left_tube(watch.failure)}); its post-check judges it')
            return out
        return replace(out, status=StepStatus.FAILED, detail=left_tube(watch.failure),
                       kind=FailureKind.DURING_CHECK, failure=watch.failure)

    def refused(self) -> str:
        """Return why nothing may be sent to the robot now ('' when it may)."""
        return self._held.refusal() if self._held is not None else ''

    def not_stopped(self, reason: str) -> None:
        """Note that a goal this proxy stopped did not stop: the robot is held."""
        if self._held is not None:
            self._held.not_stopped(self.tool.server, reason)

    def start_trace(self, session: Session | None, started: float,
                    pre: Snapshot | None = None) -> TraceTaker | None:
        """Start tracing an action step being recorded, from ``pre`` (None: not traced)."""
        if session is None or self.sampler is None or not self._traced \
                or self.kind is not ToolKind.ACTION:
            return None
        taker = TraceTaker(sensors=self._traced, rate=self.sampler.rate, started=started,
                           pre=pre, views=self._hub.views)
        self.sampler.add(taker)
        return taker

    def end_trace(self, taker: TraceTaker | None) -> TraceTaker | None:
        """Stop sampling for ``taker`` (the step ended); its trace ends with the post snapshot."""
        if taker is not None and self.sampler is not None:
            self.sampler.remove(taker)
        return taker

    def _send(
        self, message: Any, *, timeout: float, cancel: CancelToken,
        feedback: Callable[[Any], None] | None = None, watch: Watching | None = None,
        say: Callable[[str], None] | None = None,
    ) -> CallOutcome:
        """Send ``message`` to the real server, unless canceled or the server is absent."""
        started = time.monotonic()
        if cancel.cancelled:
            return ended(started, StepStatus.CANCELED, 'canceled')
        if not self.ready() and not self._wait_ready(min(timeout, SERVER_WAIT)):
            return ended(started, StepStatus.FAILED,
                         f'{self._server_kind} {self.tool.server} not available')
        return self._exchange(message, started=started, timeout=timeout, cancel=cancel,
                              feedback=feedback, watch=watch, say=say)

    def _wait_ready(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the real server; True once it is discovered."""
        raise NotImplementedError

    def _exchange(
        self, message: Any, *, started: float, timeout: float, cancel: CancelToken,
        feedback: Callable[[Any], None] | None, watch: Watching | None,
        say: Callable[[str], None] | None,
    ) -> CallOutcome:
        """Send to the discovered server and wait for the outcome (a service: unwatched)."""
        raise NotImplementedError

    def _pre(self, session: Session | None) -> Snapshot | None:
        return self._hub.capture(thumbnails=True) if session is not None else None

    async def _record_aside(
        self, session: Session | None, message: Any, pre: Snapshot | None, out: CallOutcome,
        taker: TraceTaker | None = None,
    ) -> None:
        """
        Run :meth:`_record` in a thread of its own and await it.

        Its post-snapshot wait blocks (up to ``post_timeout``); the proxy
        node's single executor thread must keep serving other calls meanwhile.
        """
        if session is None:
            return
        done: Future[None] = Future(executor=self._node.executor)
        done.add_done_callback(lambda _f: None)  # completing it wakes the executor

        def work() -> None:
            try:
                self._record(session, message, pre, out, taker)
            except Exception as err:  # logged; the call itself succeeded
                self._log.error(f'{self.tool.proxy}: recording the step failed: {err!r}')
            finally:
                done.set_result(None)

        threading.Thread(target=work, name=f'record {self.tool.proxy}', daemon=True).start()
        await done

    def record(
        self, session: Session | None, message: Any, pre: Snapshot | None, out: CallOutcome,
        taker: TraceTaker | None = None,
    ) -> Snapshot | None:
        """
        Record a call the agent made straight to the server (seen in introspection events).

        The same as a proxied call's recording (blocks for the post snapshot).

        :param session: The recording the call was made in (nothing if None or ended).
        :param message: The goal or request.
        :param pre: Snapshot taken when the call was seen starting.
        :param out: How it ended (``started``/``ended`` on the monotonic clock).
        :param taker: What the sensors did while it ran (:meth:`start_trace`, ended).
        :return: The post snapshot if the step was appended, else None.
        """
        return self._record(session, message, pre, out, taker)

    def _record(
        self, session: Session | None, message: Any, pre: Snapshot | None, out: CallOutcome,
        taker: TraceTaker | None = None,
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
        post = self._hub.capture(thumbnails=True)
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
            trace=taker.trace(post) if taker is not None else None,
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


def lost(server: str) -> str:
    return f'{server} left the ROS graph during the step (its process stopped or crashed)'


_REASON_FIELDS = ('error_string', 'message', 'error_msg', 'reason')
"""String fields of a result or response that carry a failure's reason, if the type has one."""


def with_reason(message: Any, reason: str) -> Any:
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


def ended(
    started: float, status: StepStatus, detail: str, response: Any = None,
    kind: FailureKind | None = None,
) -> CallOutcome:
    return CallOutcome(status, detail, started, time.monotonic(), response, kind)
