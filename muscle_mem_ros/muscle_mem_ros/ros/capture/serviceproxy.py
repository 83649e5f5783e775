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
The service proxy: a service's calls forwarded, recorded and replayed (:mod:`.forwarding`).

A replayed request that times out, is canceled (the walk's cancel) or whose service leaves
the graph is not over when the cache stops waiting: no cancel reaches a service, and it may
still move the robot. Such a step is settled (:meth:`..stopping.Stopper.settle`): its answer
is waited for (``stop_timeout`` at most) and then the robot must be seen at rest; otherwise
the step fails ``NOT_STOPPED`` and nobody is handed the robot. A proxied request the proxy
gives up on (``step_timeout``, its service gone) is settled the same way before the agent
gets its failure; one that does not settle holds the robot (``Held``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
import threading
import time
from typing import Any

from muscle_mem_ros.records import StepStatus, ToolKind
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.ros.capture.forwarding import (
    CallOutcome, ended, lost, SERVER_WAIT, ToolProxy, Watching, with_reason,
)
from muscle_mem_ros.ros.capture.stopping import Stopper, StopReport
from muscle_mem_ros.ros.messages.success import answered
from muscle_mem_ros.ros.node.nodeconfig import RecordFrom
from muscle_mem_ros.ros.rclfix.sync import CancelToken
from muscle_mem_ros.ros.rclfix.watch import wait_watched, WaitEnd
from rclpy.client import Client
from rclpy.task import Future

__all__ = ['ServiceProxy']


class ServiceProxy(ToolProxy):
    """Proxy for one service (any service type)."""

    kind = ToolKind.SERVICE

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        tool = self.tool
        self._client: Client[Any, Any] = self._node.create_client(
            tool.interface, tool.server, callback_group=self._group
        )
        self._service = None if tool.record_from is RecordFrom.INTROSPECTION else \
            self._node.create_service(
                tool.interface, tool.proxy, self._serve, callback_group=self._group)
        rate = self.sampler.rate if self.sampler is not None else 40.0
        self.stopper = Stopper(client=None, server=tool.server, capture=self._hub.capture,
                               rule=self._stop_rule, present=self.ready, period=1.0 / rate)
        """Settles a replayed request given up while the service may still run (module)."""

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
            held = self.refused()
            if held:  # a robot that did not stop is commanded by nobody
                self._log.warning(f'{self.tool.proxy}: request refused: {held}')
                return with_reason(response, held)
            session = self._recorder.active
            pre = self._pre(session)
            if not self._client.service_is_ready() and not self._client.wait_for_service(
                timeout_sec=SERVER_WAIT
            ):
                self._log.error(f'{self.tool.proxy}: {self.tool.server} not available; '
                                'answering with a default response')
                return response
            started = time.monotonic()
            future = self._client.call_async(request)
            lost = await self._watch.wait(future, started=started)
            if lost:  # answered once the request is settled, as a replayed one (module)
                report = await self._settle_aside(lost, future)
                if not future.done():
                    self._client.remove_pending_request(future)
                why = lost if report.stopped else report.reason
                if not report.stopped:
                    self.not_stopped(report.reason)
                self._log.warning(f'{self.tool.proxy}: request failed: {why} '
                                  f'({report.describe()})')
                return with_reason(response, why)
            answer = future.result()
            why = answered(answer, self.tool.success)
            status = StepStatus.FAILED if why else StepStatus.SUCCEEDED
            await self._record_aside(
                session, request, pre, CallOutcome(status, '', started, time.monotonic(), answer))
            return answer
        except Exception as err:  # never let one request take the node down
            self._log.error(f'{self.tool.proxy}: {err!r}')
            return response

    async def _settle_aside(self, what: str, future: Any) -> StopReport:
        """Settle a proxied request given up, in a thread of its own (the executor serves on)."""
        done: Future[StopReport] = Future(executor=self._node.executor)
        done.add_done_callback(lambda _f: None)  # completing it wakes the executor
        running = None if not self.ready() else future  # a service that left answers nothing

        def work() -> None:
            try:
                report = self.stopper.settle(what, sensors=self._traced, answer=running)
            except Exception as err:  # noqa: BLE001 - an error is no stop: not stopped
                report = StopReport(False, (), reason=f'{self.tool.server}: settling the '
                                    f'request failed ({err!r}): the robot did not stop')
            done.set_result(report)

        threading.Thread(target=work, name=f'settle {self.tool.proxy}', daemon=True).start()
        report = await done
        assert report is not None
        return report

    _server_kind = 'service'

    def _wait_ready(self, timeout: float) -> bool:
        return bool(self._client.wait_for_service(timeout_sec=timeout))

    def _exchange(
        self, message: Any, *, started: float, timeout: float, cancel: CancelToken,
        feedback: Callable[[Any], None] | None, watch: Watching | None,
        say: Callable[[str], None] | None,
    ) -> CallOutcome:
        server = self.tool.server
        future = self._client.call_async(message)
        end = wait_watched(future, timeout=timeout, cancel=cancel, present=self.ready)
        if end is not WaitEnd.DONE:
            return self._settle(future, end, started=started, timeout=timeout, say=say)
        response = future.result()
        why = answered(response, self.tool.success)
        if why:
            message_text = getattr(response, 'message', '')
            return ended(
                started, StepStatus.FAILED,
                f'{server} answered {why} {message_text!r}'.strip(),
                response,
            )
        return ended(started, StepStatus.SUCCEEDED, '', response)

    def _settle(self, future: Any, end: WaitEnd, *, started: float, timeout: float,
                say: Callable[[str], None] | None) -> CallOutcome:
        """Return the outcome of a request given up, once it is settled (module docstring)."""
        server = self.tool.server
        failed_at = time.monotonic()
        what = {WaitEnd.CANCELED: f'canceled while {server} runs (no cancel reaches a service)',
                WaitEnd.LOST: lost(server)}.get(end, f'{server} did not answer in {timeout:g} s')
        report = self.stopper.settle(what, sensors=self._traced, say=say,
                                     answer=None if end is WaitEnd.LOST else future)
        if not future.done():
            self._client.remove_pending_request(future)
        if not report.stopped:
            out = ended(started, StepStatus.FAILED, report.reason, kind=FailureKind.NOT_STOPPED)
        elif end is WaitEnd.CANCELED:
            out = ended(started, StepStatus.CANCELED, 'canceled')
        elif end is WaitEnd.LOST:
            out = ended(started, StepStatus.FAILED, lost(server), kind=FailureKind.SERVER_LOST)
        else:
            out = ended(started, StepStatus.FAILED, what, kind=FailureKind.TIMEOUT)
        return replace(out, stop=report, failed_at=failed_at)
