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
A stop is a stop: a goal the cache sent and stops is over only once the robot stopped.

Whoever stops a goal the cache sent (its watch, ``step_timeout``, the caller's cancel,
a lifecycle deactivate, the agent canceling a proxied goal) goes through
:meth:`Stopper.stop`, and nobody else commands the robot until it returns:

1. the cancel is sent and its answer read: the server accepted it (the goal is in
   the answer's ``goals_canceling``), refused it (rclpy's default cancel callback
   refuses every cancel), or did not answer within ``stop_timeout``;
2. refused, unanswered, or accepted but the goal still not terminal ``stop_timeout``
   after the cancel: the tool's own stop is used, when it has one
   (``actions.<tool>.stop_goal``: a goal of the tool's type sent to the same server;
   the hold of a FollowJointTrajectory tool, its default: the stopped goal's joints
   where the JointState sensors say they are now, as a one-point trajectory that a
   joint_trajectory_controller executes, preempting the goal (:mod:`..node.stops`); or
   ``actions.<tool>.stop_service``: a service called with an empty request, such as
   ``/emergency_stop``), and the goal (and the stop goal) get another ``stop_timeout``
   to end. A stop goal carries the cache's stop mark in its goal id
   (:func:`..node.stops.stop_goal_id`): ``learn`` does not take it for a task's step;
3. once the server reported the goal terminal (CANCELED, ABORTED or SUCCEEDED: a goal
   that succeeded before its cancel arrived ran to its end), the robot must come to
   rest within ``stop_timeout``: see :mod:`muscle_mem_ros.checks.rest`.

A goal still not terminal, a server that left the ROS graph meanwhile, or sensors that
do not show rest make the stop fail: the report says the robot did not stop, naming the
server, and the task ends ABORTED without asking the agent (a moving robot is handed to
nobody). Every happening is noted with the monotonic time it happened (events are
stamped with it) and said at once (feedback).

The rest sensors are the step's (those it was watched on, or the sensors its trace
keeps) and, always, the robot's own state (:attr:`StopRule.own
<muscle_mem_ros.ros.node.nodeconfig.StopRule.own>`: its joints, its odometry): a step
watched on a cube it does not touch, a retargeted step whose joints are not watched, or
a node with ``watch: false`` still sees the robot itself stop. Large sensors count too
(judged on a summary: :mod:`muscle_mem_ros.checks.rest`).

A call that no cancel reaches is settled instead (:meth:`Stopper.settle`): a goal whose
server left the ROS graph mid-goal (the goal may still run: the tool's stop service is
called, if it has one), and a service request that timed out or was canceled (the service
still runs: its answer is waited for, ``stop_timeout`` at most). Either is over once the
robot is seen at rest; otherwise it ends as a stop that failed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
import time
from typing import Any

from action_msgs.msg import GoalStatus
from muscle_mem_ros.checks.rest import Rest
from muscle_mem_ros.ros.node.nodeconfig import StopConfig, StopRule, ToolConfig
from muscle_mem_ros.ros.node.stops import hold_goal, stop_goal_id
from muscle_mem_ros.ros.rclfix.sync import CancelToken
from muscle_mem_ros.ros.rclfix.watch import ResultAgain, wait_watched, WaitEnd
from rclpy.action.client import ClientGoalHandle
from rclpy.task import Future

__all__ = ['Happened', 'stopper_for', 'StopReport', 'Stopper',
           'status_name']

_STATUS = {GoalStatus.STATUS_SUCCEEDED: 'SUCCEEDED', GoalStatus.STATUS_CANCELED: 'CANCELED',
           GoalStatus.STATUS_ABORTED: 'ABORTED'}


def status_name(status: int) -> str:
    """Return a GoalStatus code's name ('CANCELED', ...)."""
    return _STATUS.get(status, f'status {status}')


@dataclass(frozen=True)
class Happened:
    """One thing that happened while stopping: when (monotonic) and what."""

    at: float
    text: str


@dataclass(frozen=True)
class StopReport:
    """
    How a stop ended.

    :ivar stopped: The goal ended and the robot came to rest.
    :ivar happened: What happened, in order, with when.
    :ivar status: The goal's terminal GoalStatus (STATUS_UNKNOWN when it did not end).
    :ivar result: The goal's result message, or None.
    :ivar reason: Why it did not stop, naming the server ('' when it did).
    """

    stopped: bool
    happened: tuple[Happened, ...]
    status: int = GoalStatus.STATUS_UNKNOWN
    result: Any = None
    reason: str = ''

    def describe(self) -> str:
        """Return the happenings in one line ('cancel refused by /arm; stop goal sent; ...')."""
        return '; '.join(h.text for h in self.happened)


@dataclass
class _Stop:
    """One stop in progress."""

    handle: ClientGoalHandle[Any, Any, Any] | None
    result: Future[Any] | None
    say: Callable[[str], None] | None
    goal: Any = None
    happened: list[Happened] = field(default_factory=list)
    escalated: bool = False
    extra: list[Future[Any]] = field(default_factory=list)

    def note(self, text: str) -> None:
        self.happened.append(Happened(time.monotonic(), text))
        if self.say is not None:
            self.say(text)


class Stopper:
    """
    Stop goals on one action server (module docstring); used by replays, proxies and run-bt.

    :param client: The action client the goals were sent with.
    :param server: The server's name (said in every report).
    :param capture: Returns a snapshot of the named sensors (the sensor hub's ``capture``).
    :param rule: ``stop_timeout``, ``rest_window`` and the sensors' specs.
    :param period: Seconds between two looks at the sensors.
    :param means: The tool's own stop, or None.
    :param service: The client of ``means.service`` (made by whoever owns the node).
    :param present: Returns False once the server has left the ROS graph.
    :param tool: The tool's name in the params file (a failed stop's hint names it).
    :param joints: Returns joint positions by name (the sensor hub's ``joint_positions``):
        what a hold (``means.hold``) is built from.
    """

    def __init__(self, *, client: Any, server: str, capture: Callable[[Collection[str]], Any],
                 rule: StopRule, period: float = 0.025,
                 means: StopConfig | None = None, service: Any = None,
                 present: Callable[[], bool] = lambda: True, tool: str = '',
                 joints: Callable[[], dict[str, float]] = dict) -> None:
        self._joints = joints
        self._tool = tool
        self._client = client
        self._server = server
        self._capture = capture
        self._specs = {s.name: s for s in rule.specs}
        self.timeout = rule.timeout
        self._window = rule.window
        self._period = period
        self._means = means
        self.service = service
        """The client of the tool's stop service, or None (its owner destroys it)."""
        self._present = present
        self._own = frozenset(rule.own)

    def stop(self, handle: ClientGoalHandle[Any, Any, Any], result: Future[Any], *,
             sensors: Collection[str], say: Callable[[str], None] | None = None,
             goal: Any = None) -> StopReport:
        """
        Stop the goal of ``handle`` (its result future ``result``); block until it stopped.

        :param sensors: The rest sensors (those the step was watched on); none: rest is
            not judged (the goal's end is all there is to see).
        :param say: Told each happening at once (feedback).
        :param goal: The goal being stopped (a hold holds its joints); None: the one its
            client (:class:`..rclfix.action_client.ActionClient`) remembers sending.
        """
        stop = _Stop(handle, result, say, goal)
        if not result.done():
            self._cancel(stop)
            if not result.done() and not self._wait(stop, result) and not stop.escalated:
                stop.note(f'{self._server} did not end the goal within {self.timeout:g} s of '
                          'the cancel')
                self._escalate(stop)
                self._wait(stop, result)
        if not result.done():
            return self._not_stopped(stop, f'{self._server} did not end the goal')
        wrapped = result.result()
        status = int(getattr(wrapped, 'status', GoalStatus.STATUS_UNKNOWN))
        answer = getattr(wrapped, 'result', None)
        stop.note(f'{self._server} reported the goal {status_name(status)}')
        for extra in stop.extra:
            if not self._wait(stop, extra):
                return self._not_stopped(stop, f'{self._server} did not end the stop goal',
                                         status, answer)
        rest = self._rest(stop, sensors)
        if rest:
            return self._not_stopped(stop, f'{self._server} ended the goal, but {rest}',
                                     status, answer)
        return StopReport(True, tuple(stop.happened), status, answer)

    def settle(self, what: str, *, sensors: Collection[str], answer: Future[Any] | None = None,
               say: Callable[[str], None] | None = None) -> StopReport:
        """
        Settle a call that no cancel reaches (module docstring); block until it is over.

        :param what: What happened to it, naming the server ('/x left the ROS graph ...').
        :param sensors: The step's rest sensors (the robot's own are added).
        :param answer: The future of a service request that still runs (its answer is
            waited for, ``stop_timeout`` at most); None: a goal on a server that left.
        :param say: Told each happening at once (feedback).
        """
        stop = _Stop(None, None, say)
        stop.note(what)
        if answer is not None:
            if not self._wait(stop, answer, present=lambda: True):
                return self._not_stopped(stop, f'{self._server} did not answer within '
                                         f'{self.timeout:g} s after: it may still be moving')
            stop.note(f'{self._server} answered')
        elif self._means is not None and self._means.service:
            self._escalate(stop)
        rest = self._rest(stop, sensors)
        if rest:
            return self._not_stopped(stop, f'{what}, and {rest}')
        return StopReport(True, tuple(stop.happened))

    def _cancel(self, stop: _Stop) -> None:
        """Send the cancel, read its answer, and escalate at once when it was refused."""
        assert stop.handle is not None and stop.result is not None, 'a goal is stopped'
        answer = stop.handle.cancel_goal_async()
        if self._wait(stop, answer, also=stop.result) and answer.done():
            response = answer.result()
            ours = bytes(stop.handle.goal_id.uuid)
            canceling = [bytes(g.goal_id.uuid) for g in getattr(response, 'goals_canceling', [])]
            if ours in canceling:
                stop.note(f'{self._server} accepted the cancel')
                return
            if stop.result.done():
                return  # it ended as the cancel arrived: nothing left to cancel
            stop.note(f'{self._server} refused the cancel')
        elif stop.result.done():
            return
        else:
            stop.note(f'{self._server} did not answer the cancel in {self.timeout:g} s')
        self._escalate(stop)

    def _escalate(self, stop: _Stop) -> None:
        """Use the tool's own stop, if it has one (once)."""
        means = self._means
        if stop.escalated or means is None:
            return
        stop.escalated = True
        if means.service:
            future = self.service.call_async(means.service_type.Request())
            stop.note(f'called {means.service} (the stop of {self._server})')
            if not self._wait(stop, future):
                stop.note(f'{means.service} did not answer in {self.timeout:g} s')
            return
        goal = means.goal
        if means.hold:
            stopped = stop.goal if stop.goal is not None else self._goal_of(stop.handle)
            try:
                goal = hold_goal(stopped, self._joints())
            except ValueError as err:
                stop.note(f'no hold for {self._server}: {err}')
                return
        sent = self._client.send_goal_async(goal, goal_uuid=stop_goal_id())
        stop.note(f'stop goal sent to {self._server}' + (
            f' (hold {_joints_at(goal)})' if means.hold else ''))
        if not self._wait(stop, sent):
            stop.note(f'{self._server} did not answer the stop goal')
            stop.extra.append(sent)  # not terminal: fails the stop below
            return
        handle = sent.result()
        if handle is None or not handle.accepted:
            stop.note(f'{self._server} rejected the stop goal')
            return
        stop.extra.append(handle.get_result_async())

    def _goal_of(self, handle: ClientGoalHandle[Any, Any, Any] | None) -> Any:
        """Return the goal of ``handle`` as its client sent it (None: not known)."""
        goal_of = getattr(self._client, 'goal_of', None)
        return goal_of(handle.goal_id) if goal_of is not None and handle is not None else None

    def _wait(self, stop: _Stop, future: Future[Any], also: Future[Any] | None = None,
              present: Callable[[], bool] | None = None) -> bool:
        """
        Wait up to ``stop_timeout`` for ``future`` (or ``also``); False when neither ended.

        :param present: Whether the server of ``future`` is still there (default: the
            action server's).
        """
        token = CancelToken()
        if also is not None:
            also.add_done_callback(lambda _f: token.cancel())
        again = ResultAgain(stop.handle, future) \
            if future is stop.result and stop.handle is not None else None
        end = wait_watched(future, timeout=self.timeout, cancel=token,
                           present=present or self._present, again=again)
        if end is WaitEnd.LOST:
            stop.note(f'{self._server} left the ROS graph while stopping')
        return end is WaitEnd.DONE or (also is not None and also.done())

    def _rest(self, stop: _Stop, sensors: Collection[str]) -> str:
        """
        Wait until the rest sensors show rest; return '' then, or why not by the deadline.

        The rest sensors are ``sensors`` and the robot's own state (module docstring); none
        configured: rest is not judged (nothing sees the robot).
        """
        specs = [spec for name, spec in self._specs.items()
                 if name in sensors or name in self._own]
        if not specs:
            return ''
        since = time.monotonic()
        rest = Rest(sensors=specs, since=since, window=self._window)
        names = rest.sensors
        deadline = since + self.timeout
        while True:
            rest.add(self._capture(names))
            now = time.monotonic()
            if rest.at_rest(now):
                stop.note(f'at rest after {(now - since) * 1000:.0f} ms '
                          f'({", ".join(sorted(names))} still for {self._window:g} s)')
                return ''
            if now >= deadline:
                return f'{rest.why} ({self.timeout:g} s after it ended)'
            time.sleep(min(self._period, max(0.0, deadline - now)))

    def _not_stopped(self, stop: _Stop, what: str, status: int = GoalStatus.STATUS_UNKNOWN,
                     answer: Any = None) -> StopReport:
        hint = '' if self._means is not None or not self._tool else \
            f' (actions.{self._tool} has no stop_goal or stop_service)'
        reason = f'{what}: the robot did not stop{hint}'
        stop.note(reason)
        return StopReport(False, tuple(stop.happened), status, answer, reason)


def _joints_at(goal: Any) -> str:
    """Return a hold's joints and positions, for people ('j1 0.12, j2 -0.5')."""
    trajectory = goal.trajectory
    pairs = zip(trajectory.joint_names, trajectory.points[0].positions)
    return ', '.join(f'{n} {p:.4g}' for n, p in pairs)


def stopper_for(*, node: Any, tool: ToolConfig, client: Any, hub: Any, rule: StopRule,
                rate: float) -> Stopper:
    """
    Return the stopper of an action tool's goals, its stop service's client made on ``node``.

    :param client: The tool's action client.
    :param hub: The sensor hub (:class:`.sensors.SensorHub`): the rest is judged on its
        snapshots, a hold is built from its joint positions.
    :param rate: Hz at which the rest is looked at (``watch_rate``).
    """
    stop = tool.stop
    service = node.create_client(stop.service_type, stop.service) \
        if stop is not None and stop.service else None
    return Stopper(client=client, server=tool.server, capture=hub.capture, rule=rule,
                   means=stop, service=service, present=client.server_is_ready,
                   tool=tool.name, period=1.0 / rate, joints=hub.joint_positions)
