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
The goals in flight through the proxies, stopped when whoever sent them no longer may.

A task the cache ends while its agent has it (the caller's cancel, ``agent_timeout``, a
deactivate) is over only once every goal the agent (or a subtask's agent) has running
through the proxies went through the same stop as a replayed step
(:mod:`..capture.stopping`: the cancel and its answer, the tool's stop, the rest). An
agent need not honour a cancel (rclpy's default cancel callback refuses it), and its goals
would drive the robot while the next task runs. A deactivate does the same for the goals
still in flight when it tears the proxies down.

Every stop is bounded by the stop path's own limits (:func:`stop_limit`), so waiting for
them is too: nothing here has a timeout of its own.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
import time
from typing import Any

from muscle_mem_ros.ros.capture.forwarding import ToolProxy
from muscle_mem_ros.ros.capture.stopping import StopReport
from muscle_mem_ros.ros.node.nodeconfig import StopRule
from muscle_mem_ros.ros.rclfix.sync import TaskGuard

__all__ = ['InFlight', 'stop_in_flight', 'stop_limit', 'wind_down']

_WAITS = 6
"""The waits of ``stop_timeout`` one stop may take, one after the other: the cancel's answer,
the tool's stop's answer, the goal's end, the goal's end after the stop, the stop goal's
end, the rest."""
_SLACK = 1.0
"""Seconds on top for the threads and messages between those waits."""
_AGENT_WAITS = 4.0
"""Seconds a canceled task may spend on its agent besides its stops: the agent's answer to
the cancel and its goal's end (:data:`.agentcall.CANCEL_GRACE` each), twice over for a
subtask's agent under it."""


def stop_limit(rule: StopRule) -> float:
    """Return the longest one stop may take under ``rule`` (its waits one after the other)."""
    return _WAITS * rule.timeout + _SLACK


@dataclass(frozen=True)
class InFlight:
    """
    How the goals in flight were stopped.

    :ivar reports: Each stop's report, in the order they ended.
    :ivar unfinished: How many stops were not over by their limit (each: not stopped).
    """

    reports: tuple[StopReport, ...] = ()
    unfinished: int = 0

    @property
    def stopped(self) -> bool:
        """Return True when every goal ended and the robot rests (or none was in flight)."""
        return not self.unfinished and all(r.stopped for r in self.reports)

    @property
    def reason(self) -> str:
        """Return why the robot did not stop, naming the server ('' when it did)."""
        for report in self.reports:
            if not report.stopped:
                return report.reason
        if self.unfinished:
            return (f'{self.unfinished} stop(s) of a proxied goal did not end in time: the robot '
                    'did not stop')
        return ''

    def describe(self) -> str:
        """Return what happened, every stop's happenings ('' when nothing was in flight)."""
        return '; '.join(filter(None, (r.describe() or r.reason for r in self.reports)))


def stop_in_flight(proxies: Iterable[ToolProxy], rule: StopRule) -> InFlight:
    """
    Stop every proxied goal in flight, all at once; return once each stop is over.

    :param proxies: The node's proxies.
    :param rule: The stops' limits (a stop not over by :func:`stop_limit` counts as not
        stopped; the stopper bounds itself well before that).
    """
    stops = [future for proxy in proxies for future in proxy.stop_calls()]
    deadline = time.monotonic() + stop_limit(rule)
    while any(not f.done() for f in stops) and time.monotonic() < deadline:
        time.sleep(0.01)
    reports = tuple(f.result() for f in stops if f.done())
    return InFlight(tuple(r for r in reports if r is not None),
                    sum(1 for f in stops if not f.done()))


def wind_down(*, guard: TaskGuard, proxies: Collection[ToolProxy], rule: StopRule,
              logger: Any) -> None:
    """
    Wait for what a deactivate canceled: the task's stops, then every proxied goal's.

    The running task (or replay) ends only once its stops are over: it is waited for as
    long as its stops may take (a replayed step's, then its agent's goals' and a subtask's
    under it), not a fixed time. The proxied goals still in flight (sent outside a task)
    are then stopped the same way, all at once. A stop that did not stop the robot is
    logged; the proxy that made it has put it on record (:mod:`.standstill`).

    :param guard: The node's one-activity guard (held by the running task).
    :param proxies: The node's proxies.
    :param rule: The stops' limits.
    :param logger: The node's logger.
    """
    limit = 2 * stop_limit(rule) + 2 * _AGENT_WAITS
    deadline = time.monotonic() + limit
    while guard.holder is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    if guard.holder is not None:
        logger.error(f'deactivate: {guard.holder} still running {limit:g} s after its '
                     'cancel, longer than its stops may take')
    stops = stop_in_flight(proxies, rule)
    if not stops.stopped:
        logger.error(f'deactivate: {stops.reason}')
    elif stops.reports:
        logger.info(f'deactivate: proxied goals stopped: {stops.describe()}')
