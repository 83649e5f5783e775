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
The agent's goal for a task: sent, waited for, and, when the cache ends it, stopped.

The cache ends the agent's goal when the task is canceled (its caller, a deactivate, a
robot that did not stop under a subtask) or ``agent_timeout`` runs out. It sends the
agent a cancel and reads the answer: an agent need not honour it (rclpy's default
cancel callback refuses every cancel), and one that accepts may still leave its goals
running. So the task is over only once every goal in flight through the proxies went
through the same stop as a replayed step (:mod:`.inflight`), and the outcome says what
happened: what the agent answered, how its goal ended (or that it ran on), and each
stop. Nothing here says the agent stopped unless its goal ended.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from muscle_mem_ros.ros.capture.stopping import status_name
from muscle_mem_ros.ros.execution.inflight import InFlight
from muscle_mem_ros.ros.rclfix.sync import cancel_when_accepted, CancelToken, wait_future
from rclpy.action.client import ActionClient, ClientGoalHandle
from rclpy.task import Future

__all__ = ['AgentOutcome', 'call_agent', 'CANCEL_GRACE']

CANCEL_GRACE = 2.0
"""Seconds the agent has to answer the cache's cancel and end its goal."""


@dataclass(frozen=True)
class AgentOutcome:
    """
    How the agent's goal ended.

    :ivar result: Its ExecuteTask result, or None (it never ended, or was never accepted).
    :ivar failure: Why it failed ('' when it succeeded).
    :ivar canceled: What the agent did with the cache's cancel, and how its goal ended
        ('' when the cache did not cancel it).
    :ivar stops: The goals in flight through the proxies, stopped after the cancel (None
        when the cache did not cancel it).
    """

    result: Any = None
    failure: str = ''
    canceled: str = ''
    stops: InFlight | None = None

    def said(self) -> str:
        """Return the cancel and the stops in one line ('' when there was no cancel)."""
        stops = self.stops.describe() if self.stops is not None else ''
        return '; '.join(filter(None, (self.canceled, f'its goals through the proxies: {stops}'
                                       if stops else '')))


def call_agent(agent: ActionClient[Any, Any, Any], goal: Any, *,
               feedback: Callable[[Any], None], cancel: CancelToken, timeout: float,
               end_goals: Callable[[], InFlight]) -> AgentOutcome:
    """
    Send ``goal`` to the agent and wait for its end, or end it (module docstring).

    :param feedback: Told each feedback message of the goal.
    :param cancel: Cancels the goal.
    :param timeout: ``agent_timeout``.
    :param end_goals: Stops the goals in flight through the proxies; returns once stopped.
    """
    send = agent.send_goal_async(goal, feedback_callback=feedback)
    if not wait_future(send, timeout, cancel):
        cancel_when_accepted(send)
        failure = 'canceled' if cancel.cancelled else 'agent did not answer the goal'
        return AgentOutcome(None, failure, 'the agent had not accepted the goal',
                            end_goals())
    handle = send.result()
    if handle is None or not handle.accepted:
        return AgentOutcome(None, 'agent rejected the goal')
    future = handle.get_result_async()
    if wait_future(future, timeout, cancel):
        wrapped: Any = future.result()
        if wrapped.result.success:
            return AgentOutcome(wrapped.result)
        return AgentOutcome(wrapped.result, wrapped.result.message or
                            f'agent goal ended with status {wrapped.status}')
    failure = 'canceled' if cancel.cancelled else \
        f'agent timed out after {timeout:g} s (goal canceled)'
    answer = handle.cancel_goal_async()
    stops = end_goals()  # at once: the agent may refuse the cancel, and its goals run on
    answered = _answered(handle, answer)
    if not future.done():  # its goals were stopped under it: it may end now
        wait_future(future, CANCEL_GRACE)
    if future.done():
        wrapped = future.result()
        ended = f'its goal ended {status_name(int(wrapped.status))}'
        return AgentOutcome(wrapped.result, failure, f'{answered}; {ended}', stops)
    return AgentOutcome(None, failure, f'{answered}; its goal had not ended', stops)


def _answered(handle: ClientGoalHandle[Any, Any, Any], answer: Future[Any]) -> str:
    """Return what the agent answered the cache's cancel (waiting for it up to the grace)."""
    if not wait_future(answer, CANCEL_GRACE):
        return f'the agent did not answer the cancel in {CANCEL_GRACE:g} s'
    ours = bytes(handle.goal_id.uuid)
    canceling = [bytes(g.goal_id.uuid) for g in getattr(answer.result(), 'goals_canceling', [])]
    return 'the agent accepted the cancel' if ours in canceling else 'the agent refused the cancel'
