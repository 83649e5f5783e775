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
The demo's ROS client: resets and changes the world, runs the task, observes what happened.

:class:`StoryDriver` is an rclpy node spun in a background thread. It talks only to public
interfaces: the sim robot's ``~/reset``, ``~/move_object``, ``~/move_distractor`` and
``~/knocks``, the cache's
``/muscle_mem/execute_task`` and ``/muscle_mem/events``, the agent's ``/demo_agent/calls``,
and ``/joint_states`` / ``/object_pose`` (and, given a camera topic, its frames:
:mod:`muscle_mem_demo.camera_frames`).
"""

from __future__ import annotations

from collections.abc import Callable
import json
import math
import threading
import time
from typing import Any

from geometry_msgs.msg import PoseStamped
from muscle_mem_demo import kinematics
from muscle_mem_demo.camera_frames import FrameLog
from muscle_mem_demo.story import (
    KNOCK_DELAY, KnockReport, RunOutcome, RunSpec, TASK)
from muscle_mem_demo_interfaces.msg import Knock
from muscle_mem_demo_interfaces.srv import MoveObject
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.errors import MuscleMemError
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.matching import AgentSeen, wait_for_action_matched
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
from rcl_interfaces.srv import SetParameters
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.client import Client
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger

__all__ = ['DriverError', 'StoryDriver', 'knock_report', 'substitution_record']


class DriverError(MuscleMemError, RuntimeError):
    """The demo could not talk to a node it needs."""


class StoryDriver(Node):
    """Performs the story's runs against the running nodes."""

    def __init__(
        self,
        *,
        cache_action: str = '/muscle_mem/execute_task',
        cache_events: str = '/muscle_mem/events',
        robot: str = '/sim_robot',
        agent: str = '/demo_agent',
        node_name: str = 'sim_demo',
        camera: str | None = None,
    ) -> None:
        super().__init__(node_name)
        group = ReentrantCallbackGroup()
        self._lock = threading.Lock()
        self._joints: JointState | None = None
        self._object: PoseStamped | None = None
        self._recording = False
        self._trace_start = 0.0
        self._trace_end = math.inf
        self._trace_times: list[float] = []
        self._trace_positions: list[tuple[float, ...]] = []
        self._calls: list[dict[str, Any]] = []
        self._events: list[CacheEvent] = []
        self._knocks: list[Knock] = []
        self._goals: list[dict[str, Any]] = []
        self._task = ActionClient(self, ExecuteTask, cache_action, callback_group=group)
        self._cache_node = cache_action.rsplit('/', 1)[0]
        self._cache_sees_agent = AgentSeen(self, self._cache_node)
        self._agent_server = ActionClient(self, ExecuteTask, f'{agent}/execute_task',
                                          callback_group=group)
        self._reset = self.create_client(Trigger, f'{robot}/reset', callback_group=group)
        self._move = self.create_client(MoveObject, f'{robot}/move_object',
                                        callback_group=group)
        self._distract = self.create_client(MoveObject, f'{robot}/move_distractor',
                                            callback_group=group)
        self._parameters = self.create_client(SetParameters, f'{robot}/set_parameters',
                                              callback_group=group)
        self._frames = None if camera is None else FrameLog(self, camera, callback_group=group)
        # 30 deep (0.25 s at 120 Hz), not more: a loaded machine's executor that falls
        # behind then drops old states instead of judging a run on seconds-old ones (1000
        # deep, the joints lagged 4-5 s behind the object pose under two CPU hogs)
        self.create_subscription(JointState, '/joint_states', self._on_joints, 30,
                                 callback_group=group)
        self.create_subscription(PoseStamped, '/object_pose', self._on_object, 10,
                                 callback_group=group)
        self._calls_topic = f'{agent}/calls'
        self.create_subscription(String, self._calls_topic, self._on_call, 10,
                                 callback_group=group)
        self.create_subscription(CacheEvent, cache_events, self._on_event, 50,
                                 callback_group=group)
        self.create_subscription(Knock, f'{robot}/knocks', self._on_knock, 10,
                                 callback_group=group)
        self.create_subscription(String, f'{robot}/goals', self._on_goal, 50,
                                 callback_group=group)
        self._executor = MultiThreadedExecutor(num_threads=3)
        self._executor.add_node(self)
        self._spinner = Spinner(self._executor)

    def close(self) -> None:
        """
        Stop spinning and destroy the node.

        Through :class:`~muscle_mem_ros.ros.rclfix.shutdown.Spinner`: ``Executor.shutdown``
        while another thread spins races in rclpy 9.1.2, and the spinning thread left
        waiting aborted the process at exit under load ('terminate called without an
        active exception' after ``--record-bag``).
        """
        self._spinner.stop(2.0)
        self.destroy_node()

    # -- subscriptions ------------------------------------------------------------------------

    def _on_joints(self, msg: JointState) -> None:
        with self._lock:
            self._joints = msg
            stamp = _ns(msg.header.stamp) * 1e-9
            if self._recording and self._trace_start <= stamp <= self._trace_end:
                by_name = dict(zip(msg.name, msg.position, strict=False))
                if all(n in by_name for n in kinematics.ARM_JOINTS):
                    self._trace_times.append(stamp - self._trace_start)
                    self._trace_positions.append(
                        tuple(float(by_name[n]) for n in kinematics.ARM_JOINTS)
                    )

    def _on_object(self, msg: PoseStamped) -> None:
        with self._lock:
            self._object = msg

    def _on_call(self, msg: String) -> None:
        try:
            call = json.loads(msg.data)
        except json.JSONDecodeError:
            return
        with self._lock:
            self._calls.append(call)

    def _on_event(self, msg: CacheEvent) -> None:
        with self._lock:
            self._events.append(msg)

    def _on_knock(self, msg: Knock) -> None:
        with self._lock:
            self._knocks.append(msg)

    def _on_goal(self, msg: String) -> None:
        try:
            record = json.loads(msg.data)
        except json.JSONDecodeError:
            return
        with self._lock:
            self._goals.append(record)

    # -- readiness ----------------------------------------------------------------------------

    def wait_ready(self, *, timeout: float, alive: Callable[[], None],
                   cache: bool = True) -> None:
        """
        Wait until every interface the story uses is up and the sensors are streaming.

        :param timeout: seconds.
        :param alive: called while waiting; raises if a child process died.
        :param cache: False when ``cache_action`` is the agent's own (no cache runs: the
            demo's ``--record-bag``), so nothing waits for a cache to discover its agent.
        :raises DriverError: something is still missing after ``timeout`` (named).
        """
        deadline = time.monotonic() + timeout
        checks: list[tuple[str, Callable[[], bool]]] = [
            (f'the cache action {self._task._action_name}', self._task.server_is_ready),
            (f'the agent action {self._agent_server._action_name}',
             self._agent_server.server_is_ready),
            ('the robot service ~/reset', self._reset.service_is_ready),
            ('the robot service ~/move_object', self._move.service_is_ready),
            ('/joint_states and /object_pose', self._streaming),
            ('the agent topic ~/calls', lambda: self.count_publishers(self._calls_topic) > 0),
        ]
        discovery = 'the cache to discover the agent'
        checks += [
            # a task sent before the cache discovered its agent would fail at once
            (discovery, lambda: not cache or self._cache_sees_agent.wait(0.0)),
            # its feedback (replay and agent progress) reaches this node from the first task
            ('the cache to match this node as its client', lambda: wait_for_action_matched(
                self, self._task, self._cache_node, 1.0)),
        ]
        for what, ready in checks:
            while not ready():
                alive()
                if time.monotonic() > deadline:
                    heard = f' ({self._cache_sees_agent.heard})' if what == discovery else ''
                    raise DriverError(f'timed out waiting for {what}{heard}')
                time.sleep(0.05)

    def _streaming(self) -> bool:
        with self._lock:
            return self._joints is not None and self._object is not None

    # -- one run ------------------------------------------------------------------------------

    def prepare(self, spec: RunSpec, *, attempts: int = 3) -> None:
        """
        Reset the world, then apply the run's nudge and bump; wait for fresh sensor data.

        A lost service reply is retried from the reset (which drops pending bumps), so a
        bump is never queued twice.

        :raises DriverError: the robot did not answer or refused the change.
        """
        last = ''
        for _ in range(attempts):
            try:
                self._call(self._reset, Trigger.Request(), timeout=5.0)
                if spec.nudge is not None:
                    self._move_object(spec.nudge, after_goals=0, yaw=spec.turn)
                if spec.bump is not None:
                    self._move_object(spec.bump, after_goals=1)
                if spec.knock is not None:
                    self._move_object(spec.knock, after_goals=0, delay=KNOCK_DELAY)
                if spec.camera_noise is not None:
                    self.set_robot_parameter('camera_noise', spec.camera_noise)
                if spec.distractor is not None:
                    self._move_object(spec.distractor, after_goals=0, client=self._distract)
                    time.sleep(1.0)  # it falls (0.1 m: 0.14 s) and comes to rest
            except TimeoutError as err:
                last = str(err)
                continue
            self._wait_fresh(self.get_clock().now().nanoseconds, timeout=5.0)
            return
        raise DriverError(f'could not prepare the world: {last}')

    def _move_object(self, position: tuple[float, float, float], *, after_goals: int,
                     delay: float = 0.0, client: Client | None = None, yaw: float = 0.0) -> None:
        request = MoveObject.Request()
        request.delay = delay
        request.pose.position.x, request.pose.position.y, request.pose.position.z = position
        request.pose.orientation.z = math.sin(0.5 * yaw)
        request.pose.orientation.w = math.cos(0.5 * yaw)
        request.after_goals = after_goals
        response = self._call(client or self._move, request, timeout=5.0)
        if not response.success:
            raise DriverError(f'{(client or self._move).srv_name} refused: {response.message}')

    def set_robot_parameter(self, name: str, value: float) -> None:
        """
        Set a double parameter of the sim robot (``camera_noise``) through its service.

        :raises TimeoutError: no reply.
        :raises DriverError: the robot refused it.
        """
        request = SetParameters.Request(parameters=[
            Parameter(name, Parameter.Type.DOUBLE, float(value)).to_parameter_msg()])
        response = self._call(self._parameters, request, timeout=5.0)
        if not all(r.successful for r in response.results):
            raise DriverError(f'the robot refused {name} = {value}: '
                              f'{"; ".join(r.reason for r in response.results)}')

    def _drop_when_moving(self, position: tuple[float, float, float], delay: float,
                          outcome: RunOutcome, *, timeout: float = 30.0) -> None:
        """
        Drop the distractor at ``position`` ``delay`` s after the arm starts moving.

        Runs in a thread of its own; sets ``outcome.dropped_at`` (ROS time) to when it asked
        the sim to drop the box, the earliest the camera can see it. The sim's answer comes
        a round trip later, on a loaded machine after the camera's next frame: stamped on
        the answer, a watch that tripped on the box could seem to trip before the drop. The
        motion's start is the first /joint_states with an arm joint 5 mrad from where it was
        when the task was sent.
        """
        start = self._arm_positions()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = self._arm_positions()
            if start is None:
                start = now
            elif now is not None and max(abs(a - b) for a, b in zip(now, start)) > 0.005:
                break
            time.sleep(0.005)
        else:
            return
        time.sleep(delay)
        asked = self.get_clock().now().nanoseconds * 1e-9
        try:
            self._move_object(position, after_goals=0, client=self._distract)
        except (TimeoutError, DriverError) as err:
            self.get_logger().error(f'the drop failed: {err}')
            return
        outcome.dropped_at = asked

    def _arm_positions(self) -> tuple[float, ...] | None:
        with self._lock:
            joints = self._joints
        if joints is None:
            return None
        by_name = dict(zip(joints.name, joints.position, strict=False))
        if not all(n in by_name for n in kinematics.ARM_JOINTS):
            return None
        return tuple(float(by_name[n]) for n in kinematics.ARM_JOINTS)

    def execute(self, spec: RunSpec, *, timeout: float) -> RunOutcome:
        """
        Send the task (with the run's parameters) to the cache, wait, observe the world after.

        The cube's position when the goal is sent is ``object_start``; what the cache reports
        as substituted (ExecuteTask result ``substituted``, when the cache has that field)
        is ``substituted``.
        """
        outcome = RunOutcome(spec=spec)
        with self._lock:
            if self._object is not None:
                p = self._object.pose.position
                outcome.object_start = (p.x, p.y, p.z)
            self._calls.clear()
            self._events.clear()
            self._knocks.clear()
            self._goals.clear()
            self._trace_times, self._trace_positions = [], []
            self._trace_start = self.get_clock().now().nanoseconds * 1e-9
            self._trace_end = math.inf
            self._recording = True
        if self._frames is not None:
            self._frames.start(self._trace_start)
        dropper = None
        if spec.drop is not None:
            dropper = threading.Thread(target=self._drop_when_moving,
                                       args=(spec.drop, spec.drop_delay, outcome), daemon=True)
            dropper.start()
        started = time.monotonic()
        try:
            goal = ExecuteTask.Goal(task=spec.task or TASK, params_json=spec.params_json)
            handle = self._wait(self._task.send_goal_async(goal),
                                timeout=30.0, what='goal acceptance')
            if not handle.accepted:
                outcome.message = 'the cache rejected the task'
                return outcome
            response = self._wait(handle.get_result_async(), timeout=timeout, what='result')
            result = response.result
            outcome.wall_time = time.monotonic() - started
            outcome.success = bool(result.success)
            outcome.cache_hit = bool(result.cache_hit)
            outcome.replayed = int(result.steps_replayed)
            outcome.by_agent = int(result.steps_by_agent)
            outcome.message = result.message
            outcome.substituted = tuple(
                substitution_record(s) for s in getattr(result, 'substituted', ()))
        except TimeoutError as err:
            outcome.message = str(err)
        finally:
            done_at = self.get_clock().now().nanoseconds
            with self._lock:
                self._trace_end = done_at * 1e-9
        self._wait_settled(timeout=10.0, knock=spec.knock is not None)
        if dropper is not None:
            dropper.join(timeout=10.0)
        if self._frames is not None:
            outcome.frames = self._frames.take()
        try:
            obj = self._wait_fresh(done_at, timeout=5.0)
            p, q = obj.pose.position, obj.pose.orientation
            outcome.final_object = (p.x, p.y, p.z)
            outcome.final_yaw = 2.0 * math.atan2(q.z, q.w)
        except DriverError as err:
            outcome.message += f'; {err}'
            outcome.unobserved = str(err)
        with self._lock:
            self._recording = False
            outcome.trace_times = self._trace_times
            outcome.trace_positions = self._trace_positions
            outcome.trace_origin = self._trace_start
            outcome.agent_calls = tuple(
                int(c.get('resume_from_step', -1)) for c in self._calls
                if c.get('event') == 'start'
            )
            outcome.agent_tasks = tuple(str(c.get('task', '')) for c in self._calls
                                        if c.get('event') == 'start')
            outcome.hits = tuple((e.task, int(getattr(e, 'depth', 0))) for e in self._events
                                 if e.type == CacheEvent.HIT)
            failed = [e for e in self._events if e.type == CacheEvent.CHECK_FAILED]
            outcome.stops = tuple((_ns(e.stamp) * 1e-9, e.detail) for e in self._events
                                  if e.type == getattr(CacheEvent, 'STOPPED', -1))
            outcome.goals = tuple(self._goals)
            knocks = list(self._knocks)
        during = [e for e in failed if getattr(e, 'time_into_step', -1.0) >= 0.0]
        outcome.canceled = tuple((int(e.step), float(e.time_into_step)) for e in during)
        if during:
            outcome.check_failed_at = _ns(during[0].stamp) * 1e-9
        if knocks:
            outcome.knock = knock_report(knocks[0], sent_at=started)
        outcome.motion_started = _first_motion(outcome)
        if failed:
            e = failed[0]
            outcome.check_failure = e.detail or (
                f'step {e.step}: {e.sensor} off by {e.deviation:.3f} (tolerance {e.tolerance:g})'
            )
        return outcome

    # -- helpers ------------------------------------------------------------------------------

    _CLOSING = (CacheEvent.HIT, CacheEvent.BRANCH_LEARNED, CacheEvent.ERROR)

    def _wait_settled(self, *, timeout: float, knock: bool = False) -> None:
        """
        Wait (bounded) until the run's last announcements and events have arrived.

        They travel on topics, unordered with the result: the cache's closing event of the
        run's own task (hit, branch learned or error at depth 0; a subtask's comes before),
        an "end" for every agent call that started, and
        the robot's Knock when ``knock``.
        A run that produced neither (canceled, timed out) is judged after ``timeout``.
        """
        def settled() -> bool:
            with self._lock:
                starts = sum(c.get('event') == 'start' for c in self._calls)
                ends = sum(c.get('event') == 'end' for c in self._calls)
                closed = any(e.type in self._CLOSING and getattr(e, 'depth', 0) == 0
                             for e in self._events)
                knocked = bool(self._knocks) or not knock
            return closed and ends >= starts and knocked

        deadline = time.monotonic() + timeout
        while not settled() and time.monotonic() < deadline:
            time.sleep(0.02)

    def _wait_fresh(self, after_ns: int, *, timeout: float) -> PoseStamped:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                joints, obj = self._joints, self._object
            if (
                joints is not None
                and obj is not None
                and _ns(joints.header.stamp) > after_ns
                and _ns(obj.header.stamp) > after_ns
            ):
                return obj
            time.sleep(0.01)

        def age(msg: Any) -> str:
            return 'none' if msg is None else f'{(after_ns - _ns(msg.header.stamp)) * 1e-9:+.3f} s'

        with self._lock:
            joints, obj = self._joints, self._object
        # Seen 3 times in about 25 stories, not reproduced since these figures: which stream
        # stopped, and whether this node still spins, is the next clue.
        raise DriverError(
            f'no fresh /joint_states and /object_pose from the robot in {timeout:g} s (the '
            f'newest were stamped {age(joints)} and {age(obj)} before the awaited time; this '
            f"node's executor thread {'runs' if self._spinner.is_alive() else 'has ended'})")

    def _call(self, client: Client, request: Any, *, timeout: float) -> Any:
        if not client.wait_for_service(timeout_sec=timeout):
            raise TimeoutError(f'service {client.srv_name} not available')
        return self._wait(client.call_async(request), timeout=timeout,
                          what=f'a reply from {client.srv_name}')

    @staticmethod
    def _wait(future: Future, *, timeout: float, what: str) -> Any:
        event = threading.Event()
        future.add_done_callback(lambda _f: event.set())
        if not event.wait(timeout):
            future.cancel()
            raise TimeoutError(f'timed out after {timeout:g} s waiting for {what}')
        if future.exception() is not None:
            raise DriverError(f'{what} failed: {future.exception()}')
        return future.result()


def substitution_record(msg: Any) -> dict[str, object]:
    """
    Return a Substitution message as a plain dict: step, tool, field, source, recorded, value.

    :param msg: a ``muscle_mem_interfaces/msg/Substitution`` (fields read by name, so a
        field the message lacks is left out).
    """
    record: dict[str, object] = {}
    for name in ('step', 'tool', 'field', 'source', 'origin', 'recorded', 'value'):
        if hasattr(msg, name):
            value = getattr(msg, name)
            record[name] = value if isinstance(value, (int, float, str)) else str(value)
    return record


def knock_report(msg: Any, *, sent_at: float = math.nan) -> KnockReport:
    """Return a ``muscle_mem_demo_interfaces/msg/Knock`` as a :class:`KnockReport`."""
    def xyz(point: Any) -> tuple[float, float, float]:
        return (float(point.x), float(point.y), float(point.z))

    return KnockReport(knocked_at=float(msg.knocked_at), cancel_at=float(msg.cancel_at),
                       outcome=str(msg.outcome), time_into_goal=float(msg.time_into_goal),
                       target=xyz(msg.goal_target), at_knock=xyz(msg.grasp_at_knock),
                       at_cancel=xyz(msg.grasp_at_cancel), at_end=xyz(msg.grasp_at_end),
                       sent_at=sent_at)


def _first_motion(outcome: RunOutcome, *, threshold: float = 0.005) -> float:
    """Return when (ROS time, s) an arm joint first moved ``threshold`` rad in the run's trace."""
    rows = outcome.trace_positions
    for at, row in zip(outcome.trace_times, rows):
        if max(abs(a - b) for a, b in zip(row, rows[0])) > threshold:
            return outcome.trace_origin + at
    return math.nan


def _ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)
