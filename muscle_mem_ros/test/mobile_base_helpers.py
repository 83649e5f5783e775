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
A robot unlike the demo whose moves take seconds: a mobile base whose ``goto`` is an action.

The check during a step (issue 28) needs a step long enough for the world to change
while it runs, on a robot whose moves are actions, not the demo arm:

* :class:`MobileBase`: a ``muscle_mem_demo_interfaces/action/MoveToPose`` server
  ``goto`` that drives the base in a straight line at constant speed to the goal's
  target (x, y) in the goal's ``duration`` (0: :attr:`MobileBase.duration`, about
  2 s), publishing its ``current`` pose as feedback every 20 ms. The position is a
  function of the clock, not of the loop, so a late loop on a loaded machine does
  not slow the motion down. Its cancel has the manners a test sets
  (:attr:`MobileBase.manners`): ``polite`` stops the base where it is the moment the
  cancel arrives (each :class:`Goto` says where and when); ``refuse`` is rclpy's
  default cancel callback (the goal runs on to its end); ``deaf`` refuses it and
  ignores the stop too; ``brake`` accepts, then decelerates for
  :attr:`MobileBase.brake` seconds before reporting CANCELED, as a trajectory
  controller does; ``coast`` accepts and reports CANCELED at once, while the base
  goes on at its speed for :attr:`MobileBase.coast` seconds, then stops (a server that
  reports at once and stops after). A ``std_srvs/srv/Trigger`` ``base_stop`` (the
  tool's stop) halts the base at once and aborts its goal. A ``std_srvs/srv/Trigger``
  ``dock`` drives the base to :data:`DOCK` in :attr:`MobileBase.dock_duration` seconds
  and answers once there (a service that moves the robot, and cannot be canceled).
  :meth:`MobileBase.vanish` takes the goto server off the graph while its goal's motion
  goes on. Every goal that starts while another still executes is noted
  (:attr:`MobileBase.overlaps`: two motions at once). Odometry at 50 Hz, a tag to dock
  at (``PoseStamped``) at 20 Hz that a test moves or silences at any moment, a
  360-range ``LaserScan`` at 10 Hz (more than 16 elements: never watched) and a
  ``std_srvs/srv/SetBool`` gripper.
* :class:`BaseAgent`: ``ExecuteTask``: go 0.4 m in front of the tag, grip, go to the
  shelf of the task parameter ``bin``, release, through the cache's proxies. It accepts
  a cancel, or refuses it (:attr:`BaseAgent.ignores_cancels`, rclpy's default).
* :class:`BaseHarness`: both, a client, and the cache process configured for them
  (the approach's target declared bound to the tag).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
import json
import math
import threading
import time
from typing import Any

from builtin_interfaces.msg import Duration
from geometry_msgs.msg import PoseStamped
from mobile_helpers import BASE_HOME, BIN_PITCH, SHELF_X, STANDOFF, TAG_HOME
from muscle_mem_demo_interfaces.action import MoveToPose
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from nav_msgs.msg import Odometry
from node_helpers import AgentCall, Harness, Names, override, perform, Subtasks, wait_until
import numpy as np
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import LaserScan
from std_srvs.srv import SetBool, Trigger

DURATION = 2.0
"""Seconds a goto takes when its goal says 0."""
DOCK = (0.0, -1.0)
"""Where the ``dock`` service drives the base."""
TICK = 0.02
"""The base's control period (feedback every tick)."""


@dataclass
class Goto:
    """
    One goto goal the base executed.

    :ivar target: The goal's (x, y).
    :ivar start: Where the base was when it started.
    :ivar duration: Seconds the motion takes.
    :ivar started: Monotonic time the motion began.
    :ivar canceled_at: Monotonic time its cancel request arrived, or nan.
    :ivar stopped: Where the base stopped when canceled, or None.
    :ivar ended: Monotonic time the goal ended (succeeded or canceled), or nan.
    :ivar lag: Seconds from accepting the goal to starting to move (a busy robot is late).
    """

    target: tuple[float, float]
    start: tuple[float, float]
    duration: float
    started: float
    canceled_at: float = math.nan
    stopped: tuple[float, float] | None = None
    ended: float = math.nan
    lag: float = math.nan
    brake_at: float = math.nan
    """Monotonic time a braking cancel arrived (the base decelerates from there), or nan."""
    brake: float = 0.0
    """Seconds the braking takes."""
    refused: int = 0
    """Cancels refused."""
    coasting: bool = False
    """Its cancel was reported at once, and the base coasts (``coast`` manners)."""

    def at(self, now: float) -> tuple[float, float]:
        """Return where the motion puts the base at monotonic time ``now``."""
        if self.duration <= 0:
            return self.target
        if self.coasting:  # at its speed until the coast ends, then still
            now = min(now, self.brake_at + self.brake)
        share = min(1.0, max(0.0, (now - self.started) / self.duration))
        if not self.coasting and not math.isnan(self.brake_at) and now > self.brake_at \
                and self.brake > 0:
            # the speed falls from its cruise value to 0 over `brake` seconds
            was = min(1.0, max(0.0, (self.brake_at - self.started) / self.duration))
            speed = 1.0 / self.duration if was < 1.0 else 0.0
            t = min(now - self.brake_at, self.brake)
            share = min(1.0, was + speed * (t - t * t / (2 * self.brake)))
        return (self.start[0] + (self.target[0] - self.start[0]) * share,
                self.start[1] + (self.target[1] - self.start[1]) * share)

    @property
    def canceled(self) -> bool:
        """Return whether the goal was canceled."""
        return self.stopped is not None

    def short_by(self) -> float:
        """Return how far from its target the base stopped (0 when it arrived)."""
        if self.stopped is None:
            return 0.0
        return math.dist(self.stopped, self.target)


class MobileBase(Node):
    """Base (``goto`` action), gripper, odometry, tag and scan of a pretend mobile picker."""

    def __init__(self, *, names: Names, context: Any, seed: int = 5) -> None:
        super().__init__(f'{names.prefix}_base', context=context)
        group = ReentrantCallbackGroup()
        self.lock = threading.Lock()
        self._rng = np.random.default_rng(seed)
        self.duration = DURATION
        self.base = BASE_HOME
        """Where the base is when no goto moves it."""
        self.tag = TAG_HOME
        self.tag_on = True
        """False: the tag publishes nothing (lost from view)."""
        self._walls = self._rng.uniform(0.5, 8.0, 360)
        self.ranges = self._walls.copy()
        self.gotos: list[Goto] = []
        self.grips: list[bool] = []
        self._moving: dict[bytes, Goto] = {}
        self._accepted: dict[bytes, float] = {}
        self.manners = 'polite'
        """How the goto server answers a cancel: polite, refuse, deaf or brake (module doc)."""
        self.brake = 1.0
        """Seconds a braking cancel decelerates for."""
        self.coast = 1.0
        """Seconds a base whose cancel reported at once (``coast``) coasts for."""
        self.dock_duration = 0.3
        """Seconds the dock service drives for."""
        self.overlaps: list[tuple[Goto, Goto]] = []
        """(still executing, started meanwhile): two motions commanded at once."""
        self.stops = 0
        """Calls of the base_stop service."""
        self.tag_times: list[float] = []
        """Monotonic time of each tag message published (to tell a quiet robot from a
        cache that heard nothing)."""
        self.started = threading.Condition(self.lock)
        self.published = {'odom': 0, 'tag': 0, 'scan': 0}
        self._odom = self.create_publisher(Odometry, f'/{names.prefix}/odom', 10)
        self._tag = self.create_publisher(PoseStamped, f'/{names.prefix}/tag', 10)
        self._scan = self.create_publisher(LaserScan, f'/{names.prefix}/scan', 10)
        self.create_timer(0.02, self._publish_odom, callback_group=group)
        self.create_timer(0.05, self._publish_tag, callback_group=group)
        self.create_timer(0.1, self._publish_scan, callback_group=group)
        self._group = group
        self._goto_name = f'/{names.prefix}/goto'
        self._goto_server: ActionServer | None = None
        self.appear()
        self.create_service(Trigger, f'/{names.prefix}/dock', self._dock, callback_group=group)
        self.create_service(SetBool, f'/{names.prefix}/gripper', self._grip,
                            callback_group=group)
        self.create_service(Trigger, f'/{names.prefix}/base_stop', self._stop,
                            callback_group=group)

    def appear(self) -> None:
        """Serve the goto action (again, after :meth:`vanish`)."""
        if self._goto_server is None:
            self._goto_server = ActionServer(
                self, MoveToPose, self._goto_name, self._goto,
                goal_callback=lambda _g: GoalResponse.ACCEPT,
                handle_accepted_callback=self._accept,
                cancel_callback=self._cancel, callback_group=self._group)

    def vanish(self) -> float:
        """Take the goto server off the graph (its goal's motion goes on); return when."""
        server, self._goto_server = self._goto_server, None
        if server is not None:
            server.destroy()
        return time.monotonic()

    def reset(self) -> None:
        """Send the base home, show the tag at home, move every scan range 5 to 12 cm."""
        with self.lock:
            self.base = BASE_HOME
            self.tag = TAG_HOME
            self.tag_on = True
            self.duration = DURATION
            self.manners = 'polite'
            self.coast = 1.0
            self.dock_duration = 0.3
            self.overlaps.clear()
            self.stops = 0
            self.ranges = self._walls + self._rng.choice((-1, 1), 360) * self._rng.uniform(
                0.05, 0.12, 360)
        self.appear()
        self.settle()

    def settle(self) -> None:
        """Return once every stream published twice more (the world as it is now)."""
        start = dict(self.published)
        wait_until(lambda: all(self.published[k] >= start[k] + 2 for k in start), 5.0)

    def where(self) -> tuple[float, float]:
        """Return where the base is now."""
        with self.lock:
            return self._where(time.monotonic())

    def move_tag(self, xy: tuple[float, float]) -> float:
        """Put the tag at ``xy`` at once; return the monotonic time it moved."""
        with self.lock:
            self.tag = (float(xy[0]), float(xy[1]))
            return time.monotonic()

    def show_tag(self, on: bool) -> float:
        """Let the tag publish (or silence it); return the monotonic time."""
        with self.lock:
            self.tag_on = on
            return time.monotonic()

    def set_ranges(self, ranges: np.ndarray) -> None:
        """Make the scan read ``ranges`` (360 of them) from its next message on."""
        with self.lock:
            self.ranges = np.asarray(ranges, dtype=float)

    def wait_goto(self, index: int, timeout: float = 15.0) -> Goto | None:
        """Return goto ``index`` (of :attr:`gotos`) once it started, or None after ``timeout``."""
        with self.started:
            self.started.wait_for(lambda: len(self.gotos) > index, timeout)
            return self.gotos[index] if len(self.gotos) > index else None

    def _where(self, now: float) -> tuple[float, float]:
        for goto in self._moving.values():  # (one at a time here)
            return goto.at(now)
        return self.base

    def _publish_odom(self) -> None:
        with self.lock:
            x, y = self._where(time.monotonic())
        odom = Odometry()
        odom.header.stamp = self.get_clock().now().to_msg()
        odom.header.frame_id = 'map'
        odom.child_frame_id = 'base_link'
        odom.pose.pose.position.x, odom.pose.pose.position.y = x, y
        odom.pose.pose.orientation.w = 1.0
        self._odom.publish(odom)
        self.published['odom'] += 1

    def _publish_tag(self) -> None:
        with self.lock:
            on, (x, y) = self.tag_on, self.tag
        if on:
            self._tag.publish(_pose(x, y, self.get_clock().now().to_msg()))
            self.tag_times.append(time.monotonic())
        self.published['tag'] += 1

    def _publish_scan(self) -> None:
        with self.lock:
            ranges = self.ranges.tolist()
        scan = LaserScan(ranges=ranges, range_min=0.05, range_max=30.0,
                         angle_min=-math.pi, angle_max=math.pi,
                         angle_increment=2 * math.pi / 360)
        scan.header.stamp = self.get_clock().now().to_msg()
        scan.header.frame_id = 'laser'
        self._scan.publish(scan)
        self.published['scan'] += 1

    def tag_gap(self, start: float, end: float) -> float:
        """Return the longest time between tag messages published from ``start`` to ``end``."""
        times = [start] + [t for t in list(self.tag_times) if start < t < end] + [end]
        return max(b - a for a, b in zip(times, times[1:]))

    def _accept(self, goal_handle: Any) -> None:
        self._accepted[bytes(goal_handle.goal_id.uuid)] = time.monotonic()
        goal_handle.execute()

    def _cancel(self, goal_handle: Any) -> CancelResponse:
        """Answer a cancel with the base's manners (module docstring)."""
        now = time.monotonic()
        with self.lock:
            goto = self._moving.get(bytes(goal_handle.goal_id.uuid))
            if self.manners in ('refuse', 'deaf'):
                if goto is not None:
                    goto.refused += 1
                return CancelResponse.REJECT
            if goto is not None and goto.stopped is None and math.isnan(goto.canceled_at):
                goto.canceled_at = now
                if self.manners == 'brake':
                    goto.brake_at, goto.brake = now, self.brake
                elif self.manners == 'coast':
                    goto.brake_at, goto.brake, goto.coasting = now, self.coast, True
                    goto.ended = now + self.coast  # the motion ends then, the goal now
                    threading.Timer(self.coast, self._coasted, (goto,)).start()
                else:
                    self._halt(goto, now)
        return CancelResponse.ACCEPT

    def _coasted(self, goto: Goto) -> None:
        """End a coasting goto's motion where it came to rest (unless another replaced it)."""
        with self.lock:
            if any(g is goto for g in self._moving.values()):
                self._halt(goto, time.monotonic())

    def _dock(self, _request: Any, response: Any) -> Any:
        """Drive the base to :data:`DOCK` in :attr:`dock_duration` s; answer once there."""
        with self.lock:
            now = time.monotonic()
            goto = Goto(DOCK, self._where(now), self.dock_duration, now, lag=0.0)
            self._begin(b'dock', goto, now)
        time.sleep(self.dock_duration)
        with self.lock:
            goto.ended = time.monotonic()
            if any(g is goto for g in self._moving.values()):
                self._moving.pop(b'dock', None)
                self.base = DOCK
        response.success = True
        response.message = 'docked'
        return response

    def _begin(self, key: bytes, goto: Goto, now: float) -> None:
        """Start moving by ``goto`` (holding the lock); note a motion it overlaps."""
        self.overlaps.extend((other, goto) for other in self._moving.values()
                             if math.isnan(other.ended) or other.ended > now)
        self._moving = {key: goto}
        self.gotos.append(goto)
        self.started.notify_all()

    def _halt(self, goto: Goto, now: float) -> None:
        """Stop ``goto`` where it is at ``now`` (holding the lock)."""
        goto.stopped = goto.at(now)
        self.base = goto.stopped
        self._moving = {k: g for k, g in self._moving.items() if g is not goto}

    def _stop(self, _request: Any, response: Any) -> Any:
        """Halt the base at once (the tool's stop); its goal ends aborted."""
        now = time.monotonic()
        with self.lock:
            self.stops += 1
            for goto in () if self.manners == 'deaf' else list(self._moving.values()):
                if goto.stopped is None:
                    self._halt(goto, now)
        response.success = True
        response.message = 'stopped'
        return response

    def _goto(self, goal_handle: Any) -> Any:
        goal = goal_handle.request
        key = bytes(goal_handle.goal_id.uuid)
        seconds = goal.duration.sec + goal.duration.nanosec * 1e-9
        target = (goal.target.pose.position.x, goal.target.pose.position.y)
        with self.lock:
            now = time.monotonic()
            goto = Goto(target, self._where(now), seconds or self.duration, now,
                        lag=now - self._accepted.pop(key, now))
            self._begin(key, goto, now)
        result = MoveToPose.Result()
        while True:
            with self.lock:
                now = time.monotonic()
                if goto.stopped is None and not math.isnan(goto.brake_at) and \
                        now >= goto.brake_at + goto.brake:
                    self._halt(goto, now)  # braked to a stop
                halted = goto.stopped is not None
                done = not halted and math.isnan(goto.brake_at) and \
                    now - goto.started >= goto.duration
                here = goto.stopped if halted else goto.at(now)
                if done:
                    self._moving.pop(key, None)
                    self.base = goto.target
            if goto.coasting:  # CANCELED at once; the base coasts on (_coasted ends it)
                while not goal_handle.is_cancel_requested and \
                        time.monotonic() < goto.canceled_at + 1.0:
                    time.sleep(0.001)
                goal_handle.canceled()
                result.error_string = 'canceled'
                return result
            if halted:
                goto.ended = time.monotonic()
                if not math.isnan(goto.canceled_at):  # a cancel it accepted
                    while not goal_handle.is_cancel_requested and \
                            time.monotonic() < goto.ended + 1.0:
                        time.sleep(0.001)  # rclpy marks it CANCELING after the callback
                    goal_handle.canceled()
                    result.error_string = 'canceled'
                else:
                    goal_handle.abort()
                    result.error_string = 'stopped'
                return result
            feedback = MoveToPose.Feedback(current=_pose(here[0], here[1],
                                                         self.get_clock().now().to_msg()))
            goal_handle.publish_feedback(feedback)
            if done:
                goto.ended = now
                goal_handle.succeed()
                result.error_code = MoveToPose.Result.SUCCESSFUL
                result.error_string = 'arrived'
                return result
            time.sleep(TICK)

    def _grip(self, request: Any, response: Any) -> Any:
        self.grips.append(bool(request.data))
        response.success = True
        response.message = 'closed' if request.data else 'opened'
        return response


def _pose(x: float, y: float, stamp: Any = None) -> PoseStamped:
    pose = PoseStamped()
    pose.header.frame_id = 'map'
    if stamp is not None:
        pose.header.stamp = stamp
    pose.pose.position.x, pose.pose.position.y = float(x), float(y)
    pose.pose.orientation.w = 1.0
    return pose


def fetch_plan(tag: tuple[float, float], params: dict[str, Any]) -> list[tuple[str, Any]]:
    """Return the fetch: 0.4 m in front of the tag, grip, the shelf of ``bin``, release."""
    shelf = (SHELF_X, BIN_PITCH * int(params.get('bin', 1)))
    return [('goto', (tag[0] - STANDOFF, tag[1])), ('gripper', True),
            ('goto', shelf), ('gripper', False)]


class BaseAgent(Node):
    """
    ExecuteTask: fetch from the tag to a shelf, through the cache's proxies.

    A task with a plan in :attr:`subtasks` follows it instead, sending its subtask steps
    to the cache's ``~/execute_subtask`` (the harness started with ``subtasks=True``).
    """

    def __init__(self, *, names: Names, robot: MobileBase, context: Any) -> None:
        super().__init__(f'{names.prefix}_base_agent', context=context)
        group = ReentrantCallbackGroup()
        self._robot = robot
        self.calls: list[AgentCall] = []
        self._goto = ActionClient(self, MoveToPose, names.proxy(f'/{names.prefix}/goto'),
                                  callback_group=group)
        self._gripper = self.create_client(SetBool, names.proxy(f'/{names.prefix}/gripper'),
                                           callback_group=group)
        self._dock = self.create_client(Trigger, names.proxy(f'/{names.prefix}/dock'),
                                        callback_group=group)
        self.subtasks = Subtasks(self, names, group)
        self.ignores_cancels = False
        """True: the ExecuteTask server refuses every cancel, as rclpy's default cancel
        callback does (the goal and its proxied goals run on)."""
        ActionServer(self, ExecuteTask, names.agent, self._execute, callback_group=group,
                     cancel_callback=self._on_cancel)

    def _on_cancel(self, _goal_handle: Any) -> CancelResponse:
        return CancelResponse.REJECT if self.ignores_cancels else CancelResponse.ACCEPT

    @staticmethod
    def _wait(future: Any, timeout: float) -> Any:
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not future.done():
            done.wait(timeout)
        return future.result() if future.done() else None

    def do(self, kind: str, arg: Any, seconds: float = 0.0) -> bool:
        """Perform one step through the proxies: ``goto`` (x, y) in ``seconds``, ``gripper``."""
        if kind == 'goto':
            if not self._goto.wait_for_server(timeout_sec=10.0):
                return False
            whole = int(seconds)
            goal = MoveToPose.Goal(target=_pose(*arg), duration=Duration(
                sec=whole, nanosec=int(round((seconds - whole) * 1e9))))
            handle = self._wait(self._goto.send_goal_async(goal), 10.0)
            if handle is None or not handle.accepted:
                return False
            wrapped = self._wait(handle.get_result_async(), 30.0)
            return wrapped is not None and wrapped.status == 4  # STATUS_SUCCEEDED
        if kind == 'dock':
            if not self._dock.wait_for_service(timeout_sec=10.0):
                return False
            answer = self._wait(self._dock.call_async(Trigger.Request()), 30.0)
            return answer is not None and answer.success
        if not self._gripper.wait_for_service(timeout_sec=10.0):
            return False
        answer = self._wait(self._gripper.call_async(SetBool.Request(data=bool(arg))), 10.0)
        return answer is not None and answer.success

    def _execute(self, goal_handle: Any) -> Any:
        goal = goal_handle.request
        self.calls.append(AgentCall(goal.task, goal.params_json, goal.resume_from_step,
                                    goal.resume_reason, goal.steps_done))
        with self._robot.lock:
            tag = self._robot.tag
        params = json.loads(goal.params_json or '{}')
        own = self.subtasks.plan(goal.task, tag, params)
        steps = (own if own is not None else fetch_plan(tag, params))[goal.resume_from_step:]
        return perform(goal_handle, steps, caller=goal.task, subtasks=self.subtasks, do=self.do)


class BaseHarness(Harness):
    """The mobile base, its agent, a client, and the cache configured for them."""

    def _doubles(self) -> tuple[Any, Any]:
        robot = MobileBase(names=self.names, context=self.context)
        return robot, BaseAgent(names=self.names, robot=robot, context=self.context)

    def values(self, **overrides: Any) -> dict[str, Any]:
        """Return the base's cache parameters (dotted overrides)."""
        prefix = self.names.prefix
        values: dict[str, Any] = {
            'store_path': str(self.tmp / 'cache.db'), 'agent_action': self.names.agent,
            'step_timeout': 8.0, 'post_check_timeout': 1.0, 'agent_timeout': 30.0,
            'robot_description_timeout': 0.0,  # the body: joints and tools
            'sensors': {
                'odom': {'topic': f'/{prefix}/odom', 'type': 'nav_msgs/msg/Odometry',
                         'fields': ['pose.pose.position'], 'tolerance': [0.05],
                         'mode': 'norm', 'max_age': 0.5},
                'tag': {'topic': f'/{prefix}/tag', 'type': 'geometry_msgs/msg/PoseStamped',
                        'fields': ['pose.position'], 'tolerance': [0.03], 'mode': 'norm',
                        'max_age': 0.5},
                # 360 ranges: checked before and after each step (their root mean square
                # against one tolerance), never traced nor watched while one runs
                'scan': {'topic': f'/{prefix}/scan', 'type': 'sensor_msgs/msg/LaserScan',
                         'fields': ['ranges'], 'tolerance': [0.3], 'mode': 'rms',
                         'max_age': 0.5},
            },
            'actions': {
                'goto': {'server': f'/{prefix}/goto',
                         'type': 'muscle_mem_demo_interfaces/action/MoveToPose'},
            },
            'services': {
                'gripper': {'server': f'/{prefix}/gripper', 'type': 'std_srvs/srv/SetBool'},
            },
            # the approach stops 0.4 m in front of the tag (max_offset, x; y straight in
            # front); the shelves are farther from the tag, so their goals stay as recorded
            'bindings': {
                'tag_x': {'tool': 'goto', 'field': 'target.pose.position.x',
                          'source': 'sensor:tag[0]', 'max_offset': 0.5, 'max_shift': 0.3},
                'tag_y': {'tool': 'goto', 'field': 'target.pose.position.y',
                          'source': 'sensor:tag[1]', 'max_offset': 0.05, 'max_shift': 0.3},
            },
        }
        return override(values, overrides)

    def _warm_proxies(self, cache: Any) -> None:
        """Pass one call through each proxy: a 20 ms goto where the base is, the gripper."""
        for kind, arg in (('goto', self.robot.where()), ('gripper', False)):
            for _ in range(6):
                if self.agent.do(kind, arg, seconds=0.02):
                    break
            else:
                raise RuntimeError(f'the {kind} proxy did not pass a call:\n{cache.output()}')


def fresh_world(harness: BaseHarness) -> Iterator[BaseHarness]:
    """Yield ``harness`` with the world reset and the cache learning; then check it lived."""
    harness.robot.reset()
    assert harness.set_mode('learn').successful
    yield harness
    harness.robot.reset()
    assert harness.cache is not None and harness.cache.alive(), harness.cache.output()
