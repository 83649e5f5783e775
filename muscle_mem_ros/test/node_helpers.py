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
Real ROS test doubles for the behavior-cache node tests.

* :class:`FakeRobot`: publishes a 3-joint ``JointState`` and an object
  ``PoseStamped`` at 50 Hz, serves ``muscle_mem_demo_interfaces/action/FollowJointTrajectory``
  (moves the joints to the last waypoint at once, or slowly when asked),
  ``test_msgs/action/Fibonacci`` and a ``std_srvs/srv/SetBool`` gripper. It logs
  every goal's CDR bytes, can abort the next goal, and can "bump" the object
  when the N-th call from now finishes.
* :class:`FakeAgent`: serves ``ExecuteTask`` and performs a fixed plan through
  the cache's proxies (arm, gripper, arm to the object, Fibonacci), skipping the
  steps before ``resume_from_step``; logs every goal it received. It can decompose
  (:class:`Subtasks`): a task given a plan of its own may call other tasks through the
  cache's ``~/execute_subtask`` as steps of its plan.
* :class:`CacheProcess`: the cache node in a subprocess
  (``python -m muscle_mem_ros.ros.node.main --ros-args --params-file ...``).
* :class:`Harness`: all of the above plus a client node, on one executor thread.

Everything is real: rclpy, DDS, SQLite. Topics and servers live under a
unique prefix per harness so leftovers of another test cannot interfere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
import json
import os
from pathlib import Path
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import Any
import uuid

from builtin_interfaces.msg import Duration
from geometry_msgs.msg import PoseStamped
from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.matching import wait_for_action_matched, wait_for_service_matched
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
import rclpy
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool
from test_msgs.action import Fibonacci
from trajectory_msgs.msg import JointTrajectoryPoint
import yaml

DESTROYED_WHILE_SPINNING = SubscriptionEventCallbacks(use_default_callbacks=False)
"""Events of a subscription a test destroys while the harness spins: none. rclpy 9.1.2's
executor dies when a subscription's event handler (rclpy's default one, which logs an
incompatible QoS) is destroyed while it builds its wait set: ``add_to_wait_set`` enters the
handle a second time and raises InvalidHandle. A subscription alone is safe. A publisher
has a default event handler too (``PublisherEventCallbacks(use_default_callbacks=False)``)."""
HOME = (0.0, 0.0, 0.0)
OBJECT_HOME = (0.4, 0.1, 0.05)
JOINT_NAMES = ['j1', 'j2', 'j3']


class FeedbackClient(ActionClient):
    """
    An action client that hands over a goal's feedback even when it comes after the result.

    Feedback travels on a topic and the result on a service, so the last feedback can
    arrive second, and rclpy's client then drops it (it forgets a goal's feedback callback
    when the result arrives). The tests' servers match the feedback reader before a goal
    is sent (:func:`~muscle_mem_ros.ros.rclfix.matching.wait_for_action_matched`) and publish it
    reliably, so every message arrives; this keeps it from being dropped on the way in.
    Its reader keeps up to 1000 messages (rclpy's default is 10), so feedback that
    arrives while the test's executor is busy is not pushed out before it is taken.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault('feedback_sub_qos_profile', QoSProfile(depth=1000))
        super().__init__(*args, **kwargs)

    def _remove_pending_result_request(self, future: Any) -> None:
        seq = self._remove_pending_request(future, self._pending_result_requests)
        self._result_sequence_number_to_goal_id.pop(seq, None)  # the callback stays


@dataclass(frozen=True)
class Names:
    """Every ROS name of one harness, under a unique prefix."""

    prefix: str
    node: str

    @classmethod
    def unique(cls) -> Names:
        tag = uuid.uuid4().hex[:8]
        return cls(prefix=f't{tag}', node=f'mm_{tag}')

    @property
    def joints(self) -> str:
        return f'/{self.prefix}/joint_states'

    @property
    def object(self) -> str:  # noqa: A003 (the sim robot's topic name)
        return f'/{self.prefix}/object_pose'

    @property
    def arm(self) -> str:
        return f'/{self.prefix}/arm/follow_joint_trajectory'

    @property
    def fib(self) -> str:
        return f'/{self.prefix}/fibonacci'

    @property
    def gripper(self) -> str:
        return f'/{self.prefix}/gripper/set'

    @property
    def agent(self) -> str:
        return f'/{self.prefix}/agent/execute_task'

    @property
    def description(self) -> str:
        """Return the robot description topic the cache reads (``robot_description``, remapped)."""
        return f'/{self.prefix}/robot_description'

    def proxy(self, server: str) -> str:
        """Return the default proxy name of ``server`` (``~/<server>``)."""
        return f'/{self.node}{server}'

    def cache(self, name: str) -> str:
        """Return a name under the cache node (``~/<name>``)."""
        return f'/{self.node}/{name}'

    @property
    def subtask(self) -> str:
        """Return the cache's subtask action (``~/execute_subtask``)."""
        return self.cache('execute_subtask')


def params(names: Names, *, store: Path, **overrides: Any) -> dict[str, Any]:
    """Return the cache's parameters for a harness (nested-map style); overrides by dotted name."""
    values: dict[str, Any] = {
        'store_path': str(store),
        'agent_action': names.agent,
        'cache_mode': 'learn',
        'step_timeout': 5.0,
        'post_check_timeout': 1.0,
        'agent_timeout': 20.0,
        'robot_description_timeout': 0.0,  # the body is the joints and tools (test_node_bodies)
        'sensors': {
            'joints': {'topic': names.joints, 'type': 'sensor_msgs/msg/JointState',
                       'fields': ['position'], 'tolerance': [0.01], 'mode': 'abs',
                       'max_age': 0.5},
            'object': {'topic': names.object, 'type': 'geometry_msgs/msg/PoseStamped',
                       'fields': ['pose.position'], 'tolerance': [0.02], 'mode': 'norm',
                       'max_age': 0.5},
        },
        'actions': {
            'arm': {'server': names.arm,
                    'type': 'muscle_mem_demo_interfaces/action/FollowJointTrajectory'},
            'fib': {'server': names.fib, 'type': 'test_msgs/action/Fibonacci'},
        },
        'services': {
            'gripper': {'server': names.gripper, 'type': 'std_srvs/srv/SetBool'},
        },
    }
    return override(values, overrides)


def override(values: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Set ``overrides`` (dotted name -> value; None removes it) in nested ``values``."""
    for dotted, value in overrides.items():
        keys = dotted.split('.')
        target = values
        for key in keys[:-1]:
            target = target.setdefault(key, {})
        if value is None:
            target.pop(keys[-1], None)
        else:
            target[keys[-1]] = value
    return values


def write_params(path: Path, node_name: str, values: dict[str, Any]) -> Path:
    """Write a ROS params file for ``node_name``."""
    path.write_text(yaml.safe_dump({node_name: {'ros__parameters': values}}))
    return path


class CacheProcess:
    """The behavior-cache node in its own process."""

    def __init__(self, *, names: Names, params_file: Path, log: Path,
                 domain_id: int | None = None, host: Path | None = None) -> None:
        """
        Start the node.

        :param host: A script that runs the node's main (an instrumented process, e.g.
            ``store_reads_host.py``); None: ``python -m muscle_mem_ros.ros.node.main``.
        """
        self.names = names
        self.log = log
        self._log_file = open(log, 'w')  # noqa: SIM115 - closed in stop()
        env = dict(os.environ)
        if domain_id is not None:
            env['ROS_DOMAIN_ID'] = str(domain_id)
        entry = ['-m', 'muscle_mem_ros.ros.node.main'] if host is None else [str(host)]
        self.proc = subprocess.Popen(
            [sys.executable, *entry, '--ros-args',
             '-r', f'__node:={names.node}', '-r', f'robot_description:={names.description}',
             '--params-file', str(params_file)],
            stdout=self._log_file, stderr=subprocess.STDOUT, env=env,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Signal the process and wait for its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log_file.close()
        return self.proc.returncode

    def output(self) -> str:
        if not self._log_file.closed:
            self._log_file.flush()
        return self.log.read_text()


def run_cache_to_exit(*, names: Names, values: dict[str, Any], tmp: Path,
                      timeout: float = 30.0) -> subprocess.CompletedProcess:
    """Start the cache with ``values`` and wait for it to exit (bad-config tests)."""
    params_file = write_params(tmp / 'bad.yaml', names.node, values)
    return subprocess.run(
        [sys.executable, '-m', 'muscle_mem_ros.ros.node.main', '--ros-args',
         '-r', f'__node:={names.node}', '--params-file', str(params_file)],
        capture_output=True, text=True, timeout=timeout, env=dict(os.environ),
    )


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until true or ``timeout``; a guard, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def wait_feedback(feedback: list[Any], until: Callable[[list[Any]], bool], what: str,
                  timeout: float = 10.0) -> list[Any]:
    """
    Return a copy of ``feedback`` once ``until(copy)`` holds; fail naming ``what`` if not.

    Feedback travels on a topic, the result on a service: the last feedback messages may
    arrive after the result. A test that asserts on feedback after a result waits here
    (bounded) for what it needs.
    """
    wait_until(lambda: until(list(feedback)), timeout)
    got = list(feedback)
    assert until(got), f'{what}: not there after {timeout} s; received {got}'
    return got


class FakeRobot(Node):
    """Controller, sensors and gripper of a pretend arm."""

    def __init__(self, *, names: Names, context: Any) -> None:
        super().__init__(f'{names.prefix}_robot', context=context)
        group = ReentrantCallbackGroup()
        self._lock = threading.Lock()
        self.joints = list(HOME)
        self.object = list(OBJECT_HOME)
        self.publish_object = True
        self.arm_delay = 0.0
        self.abort_next = 0
        self.abort_at: set[int] = set()
        """Indices in :attr:`arm_goals` of the arm goals to abort (each once), besides
        ``abort_next``."""
        self.bump_after: tuple[int, tuple[float, float, float]] | None = None
        self.arm_goals: list[bytes] = []
        self.fib_goals: list[bytes] = []
        self.gripper_requests: list[bool] = []
        self.arm_canceled = 0
        self.arm_active = threading.Event()
        self.published = 0
        self._joint_pub = self.create_publisher(JointState, names.joints, 10)
        self._object_pub = self.create_publisher(PoseStamped, names.object, 10)
        self.create_timer(0.02, self._publish, callback_group=group)
        ActionServer(self, FollowJointTrajectory, names.arm, self._arm,
                     goal_callback=lambda _g: GoalResponse.ACCEPT,
                     cancel_callback=lambda _h: CancelResponse.ACCEPT, callback_group=group)
        ActionServer(self, Fibonacci, names.fib, self._fib, callback_group=group)
        self.create_service(SetBool, names.gripper, self._gripper, callback_group=group)

    def reset(self) -> None:
        """Home the arm, put the object back, clear faults (logs are kept)."""
        with self._lock:
            self.joints = list(HOME)
            self.object = list(OBJECT_HOME)
            self.publish_object = True
            self.arm_delay = 0.0
            self.abort_next = 0
            self.abort_at = set()
            self.bump_after = None
        self.arm_active.clear()
        self.settle()

    def settle(self) -> None:
        """Return once two sensor messages with the current state were published."""
        start = self.published
        wait_until(lambda: self.published >= start + 2, 5.0)

    def move_object(self, xyz: tuple[float, float, float]) -> None:
        with self._lock:
            self.object = list(xyz)
        self.settle()

    def set_joints(self, joints: list[float]) -> None:
        with self._lock:
            self.joints = list(joints)
        self.settle()

    def _publish(self) -> None:
        with self._lock:
            joints, obj, pub_obj = list(self.joints), list(self.object), self.publish_object
        stamp = self.get_clock().now().to_msg()
        js = JointState(name=JOINT_NAMES, position=joints)
        js.header.stamp = stamp
        self._joint_pub.publish(js)
        if pub_obj:
            pose = PoseStamped()
            pose.header.stamp = stamp
            pose.header.frame_id = 'world'
            pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = obj
            pose.pose.orientation.w = 1.0
            self._object_pub.publish(pose)
        self.published += 1

    def _count_call(self) -> None:
        """Apply a pending bump when its call finishes (before the result is sent)."""
        with self._lock:
            if self.bump_after is None:
                return
            left, xyz = self.bump_after
            if left <= 1:
                self.object = list(xyz)
                self.bump_after = None
            else:
                self.bump_after = (left - 1, xyz)

    def _arm(self, goal_handle: Any) -> Any:
        goal = goal_handle.request
        self.arm_goals.append(bytes(serialize_message(goal)))
        result = FollowJointTrajectory.Result()
        with self._lock:
            at = len(self.arm_goals) - 1
            abort = self.abort_next > 0 or at in self.abort_at
            self.abort_next -= int(self.abort_next > 0 and at not in self.abort_at)
            self.abort_at.discard(at)
            delay = self.arm_delay
        self.arm_active.set()
        try:
            if abort:
                result.error_code = FollowJointTrajectory.Result.INVALID_GOAL
                result.error_string = 'aborted by the test'
                goal_handle.abort()
                return result
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline:
                if goal_handle.is_cancel_requested:
                    self.arm_canceled += 1
                    goal_handle.canceled()
                    return result
                feedback = FollowJointTrajectory.Feedback(joint_names=JOINT_NAMES)
                with self._lock:
                    feedback.actual.positions = list(self.joints)
                goal_handle.publish_feedback(feedback)
                time.sleep(0.02)
            points = goal.trajectory.points
            if points:
                with self._lock:
                    self.joints = list(points[-1].positions)
            self._count_call()
            goal_handle.succeed()
            result.error_string = 'reached'
            return result
        finally:
            self.arm_active.clear()

    def _fib(self, goal_handle: Any) -> Any:
        self.fib_goals.append(bytes(serialize_message(goal_handle.request)))
        seq = [0, 1]
        for _ in range(max(0, goal_handle.request.order - 1)):
            seq.append(seq[-1] + seq[-2])
        self._count_call()
        goal_handle.succeed()
        return Fibonacci.Result(sequence=seq[: goal_handle.request.order + 1])

    def _gripper(self, request: Any, response: Any) -> Any:
        self.gripper_requests.append(bool(request.data))
        self._count_call()
        response.success = True
        response.message = 'closed' if request.data else 'opened'
        return response


@dataclass
class AgentCall:
    """One ExecuteTask goal the agent received."""

    task: str
    params_json: str
    resume_from_step: int
    resume_reason: str
    steps_done: int


def plan(obj: tuple[float, float, float], order: int = 5) -> list[tuple[str, Any]]:
    """
    Return the agent's plan: arm out, close gripper, arm to the object, count (Fibonacci).

    The count is the task parameter ``order`` when the task has one (default 5).
    """
    return [
        ('arm', [0.1, 0.2, 0.3]),
        ('gripper', True),
        ('arm', [round(obj[0], 3), round(obj[1], 3), 0.5]),
        ('fib', order),
    ]


SUBTASK = 'subtask'
"""A plan step's kind that calls a task through the cache; its arg is ``(task, params)``."""


@dataclass
class SubtaskCall:
    """One subtask goal an agent sent to the cache's ``~/execute_subtask``, and its outcome."""

    caller: str
    """The task whose agent goal made the call."""
    task: str
    params_json: str
    handle: Any = None
    """The goal handle once the cache answered the goal (cancel it to cancel the call)."""
    status: int = 0
    """The goal's final status (``GoalStatus``); 0 until it ended (or when it never did)."""
    result: Any = None
    """The ``ExecuteTask.Result``; None until it ended."""
    feedback: list[Any] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def ok(self) -> bool:
        return self.status == 4 and self.result is not None and self.result.success

    @property
    def message(self) -> str:
        return self.result.message if self.result is not None else 'no answer'


class Subtasks:
    """
    How an agent decomposes: per-task plans, and calls to the cache's ``~/execute_subtask``.

    A task named in :attr:`plans` is done by its plan, whose steps may be
    ``(SUBTASK, (task, params))``: the agent sends that subtask to the cache and waits for
    its result (the cache replays it, or sends it back to this agent as a goal of its own,
    which the agent's ExecuteTask server takes while the caller's goal waits: a reentrant
    group and enough executor threads). A failed call ends the caller's goal (aborted)
    unless :attr:`on_failure` is ``'continue'``.
    """

    def __init__(self, node: Node, names: Names, group: Any) -> None:
        self.plans: dict[str, Callable[[Any, dict[str, Any]], list[tuple[str, Any]]]] = {}
        """Task name -> plan (world, params) -> steps; the world is what the agent sees."""
        self.on_failure = 'abort'
        self.calls: list[SubtaskCall] = []
        self.client = ActionClient(node, ExecuteTask, names.subtask, callback_group=group)

    def plan(self, task: str, world: Any, params: dict[str, Any]) -> list[tuple[str, Any]] | None:
        """Return the plan of ``task`` when it has one of its own (None: the default)."""
        plan_of = self.plans.get(task)
        return None if plan_of is None else plan_of(world, params)

    def running(self, task: str) -> SubtaskCall | None:
        """Return the newest call of ``task`` not ended yet, once the cache accepted it."""
        for call in reversed(list(self.calls)):
            if call.task == task and call.handle is not None and not call.done.is_set():
                return call
        return None

    def failure(self, caller: str, task: str, params: dict[str, Any]) -> str:
        """Call ``task`` for ``caller``; return why the caller's goal ends ('': it goes on)."""
        call = self.call(caller, task, params)
        if call.ok or self.on_failure != 'abort':
            return ''
        return f'subtask {task} failed: {call.message}'

    def call(self, caller: str, task: str, params: dict[str, Any],
             timeout: float = 60.0) -> SubtaskCall:
        """Send ``task`` to the cache as a subtask of ``caller``'s goal; wait for its end."""
        record = SubtaskCall(caller=caller, task=task, params_json=json.dumps(params))
        self.calls.append(record)
        try:
            if not self.client.wait_for_server(timeout_sec=10.0):
                return record
            goal = ExecuteTask.Goal(task=task, params_json=record.params_json)
            handle = _wait(self.client.send_goal_async(
                goal, feedback_callback=lambda msg: record.feedback.append(msg.feedback)),
                10.0)
            if handle is None or not handle.accepted:
                return record
            record.handle = handle
            for _ in range(3):  # a result request is idempotent; a lost answer is asked again
                wrapped = _wait(handle.get_result_async(), timeout / 3)
                if wrapped is not None:
                    record.status, record.result = wrapped.status, wrapped.result
                    break
            return record
        finally:
            record.done.set()


def perform(goal_handle: Any, steps: list[tuple[str, Any]], *, caller: str,
            subtasks: Subtasks, do: Callable[[str, Any], bool]) -> Any:
    """
    Do an agent's ``steps`` for its goal and end the goal: aborted at the first that fails.

    A subtask step is sent to the cache (:meth:`Subtasks.failure`), any other is ``do``'s.
    """
    result = ExecuteTask.Result()
    for kind, arg in steps:
        why = subtasks.failure(caller, *arg) if kind == SUBTASK else (
            '' if do(kind, arg) else f'{kind} failed')
        if why:
            result.message = why
            goal_handle.abort()
            return result
    result.success = True
    result.steps_by_agent = len(steps)
    result.message = f'agent did {len(steps)} steps'
    goal_handle.succeed()
    return result


def _wait(future: Any, timeout: float) -> Any:
    """Return ``future``'s result once done (None after ``timeout``), spun by another thread."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not future.done():
        done.wait(timeout)
    return future.result() if future.done() else None


class FakeAgent(Node):
    """An ExecuteTask server that performs :func:`plan` through the cache's proxies."""

    def __init__(self, *, names: Names, robot: FakeRobot, context: Any) -> None:
        super().__init__(f'{names.prefix}_agent', context=context)
        group = ReentrantCallbackGroup()
        self._robot = robot
        self.calls: list[AgentCall] = []
        self.fail_next = False
        self.step_delay = 0.0
        self.canceled = 0
        self.canceled_tasks: list[str] = []
        """The task of each goal the agent ended as canceled."""
        self.subtasks = Subtasks(self, names, group)
        self._arm = ActionClient(self, FollowJointTrajectory, names.proxy(names.arm),
                                 callback_group=group)
        self._fib = ActionClient(self, Fibonacci, names.proxy(names.fib), callback_group=group)
        self._gripper = self.create_client(SetBool, names.proxy(names.gripper),
                                           callback_group=group)
        ActionServer(self, ExecuteTask, names.agent, self._execute, callback_group=group,
                     cancel_callback=lambda _h: CancelResponse.ACCEPT)

    def _wait(self, future: Any, timeout: float = 10.0) -> Any:
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not future.done():
            done.wait(timeout)
        return future.result() if future.done() else None

    def _action(self, client: ActionClient, goal: Any, timeout: float | None) -> bool:
        if not client.wait_for_server(timeout_sec=timeout or 10.0):
            return False
        handle = self._wait(client.send_goal_async(goal), timeout or 10.0)
        if handle is None or not handle.accepted:
            return False
        wrapped = self._wait(handle.get_result_async(), timeout or 30.0)
        return wrapped is not None and wrapped.status == 4  # STATUS_SUCCEEDED

    def do(self, kind: str, arg: Any, timeout: float | None = None) -> bool:
        """Perform one plan step through the proxies (``timeout`` bounds each wait)."""
        if kind == 'arm':
            goal = FollowJointTrajectory.Goal()
            goal.trajectory.joint_names = JOINT_NAMES
            goal.trajectory.points = [JointTrajectoryPoint(
                positions=[float(x) for x in arg], time_from_start=Duration(sec=0))]
            return self._action(self._arm, goal, timeout)
        if kind == 'fib':
            return self._action(self._fib, Fibonacci.Goal(order=int(arg)), timeout)
        if not self._gripper.wait_for_service(timeout_sec=timeout or 10.0):
            return False
        response = self._wait(self._gripper.call_async(SetBool.Request(data=bool(arg))),
                              timeout or 10.0)
        return response is not None and response.success

    def _execute(self, goal_handle: Any) -> Any:
        goal = goal_handle.request
        self.calls.append(AgentCall(goal.task, goal.params_json, goal.resume_from_step,
                                    goal.resume_reason, goal.steps_done))
        result = ExecuteTask.Result()
        if self.fail_next:
            self.fail_next = False
            result.message = 'agent failed on purpose'
            goal_handle.abort()
            return result
        with self._robot._lock:
            obj = tuple(self._robot.object)
        try:
            params = json.loads(goal.params_json or '{}')
        except ValueError:
            params = {}
        params = params if isinstance(params, dict) else {}
        own = self.subtasks.plan(goal.task, obj, params)
        full = plan(obj, params.get('order', 5)) if own is None else own
        steps = full[goal.resume_from_step:]
        for index, (kind, arg) in enumerate(steps):
            if self.step_delay:
                time.sleep(self.step_delay)
            if goal_handle.is_cancel_requested:
                return self._canceled(goal_handle, result)
            goal_handle.publish_feedback(ExecuteTask.Feedback(
                mode=ExecuteTask.Feedback.MODE_AGENT, step=goal.resume_from_step + index,
                total=-1, detail=f'{kind} {arg}'))
            if kind == SUBTASK:
                why = self.subtasks.failure(goal.task, *arg)
                if goal_handle.is_cancel_requested:
                    return self._canceled(goal_handle, result)
                if why:
                    result.message = why
                    goal_handle.abort()
                    return result
                continue
            if not self.do(kind, arg):
                result.message = f'step {kind} failed'
                goal_handle.abort()
                return result
        result.success = True
        result.steps_by_agent = len(steps)
        result.message = f'agent did {len(steps)} steps'
        goal_handle.succeed()
        return result

    def _canceled(self, goal_handle: Any, result: Any) -> Any:
        self.canceled += 1
        self.canceled_tasks.append(goal_handle.request.task)
        goal_handle.canceled()
        result.message = 'canceled'
        return result


@dataclass
class TaskRun:
    """Outcome of one ExecuteTask call: status, result, feedback received."""

    status: int
    result: Any
    feedback: list[Any] = field(default_factory=list)


class Harness:
    """Robot, agent and a client node on one executor thread, plus the cache process."""

    def __init__(self, *, tmp: Path, names: Names | None = None,
                 domain_id: int | None = None, subtasks: bool = False) -> None:
        """
        Start the robot, agent and client.

        :param domain_id: ROS domain of this harness and its cache (None: the
            environment's); two harnesses with the same names on two domains are two
            robots of a fleet.
        :param subtasks: The agent decomposes (:class:`Subtasks`): start_cache also waits
            until the agent's client of the cache's ``~/execute_subtask`` is matched.
        """
        self.tmp = tmp
        self.subtasks = subtasks
        self.names = names or Names.unique()
        self.domain_id = domain_id
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.robot, self.agent = self._doubles()
        self.client = Node(f'{self.names.prefix}_client', context=self.context)
        self._group = ReentrantCallbackGroup()
        self.events: list[CacheEvent] = []
        self.client.create_subscription(
            CacheEvent, self.names.cache('events'), self.events.append, 100,
            callback_group=self._group)
        self.execute_client = FeedbackClient(
            self.client, ExecuteTask, self.names.cache('execute_task'),
            callback_group=self._group)
        # each level of nested subtasks holds a thread in the agent while the level below runs
        self.executor = MultiThreadedExecutor(num_threads=16, context=self.context)
        for node in (self.robot, self.agent, self.client):
            self.executor.add_node(node)
        self.spin_error = ''
        self.extra_nodes: list[Node] = []
        """Nodes a test added to :attr:`executor`: destroyed with the harness, not sooner."""
        self._spinner = Spinner(self.executor, on_exit=self._spun)
        self.cache: CacheProcess | None = None
        self._clients: dict[str, Any] = {}

    def _doubles(self) -> tuple[Any, Any]:
        """Return the robot and the agent (a harness for another robot overrides this)."""
        robot = FakeRobot(names=self.names, context=self.context)
        return robot, FakeAgent(names=self.names, robot=robot, context=self.context)

    def _spun(self, error: BaseException | None) -> None:
        if error is not None and rclpy.ok(context=self.context):  # a callback raised
            self.spin_error = ''.join(traceback.format_exception(error))

    def start_cache(self, host: Path | None = None, **overrides: Any) -> CacheProcess:
        """
        Start the cache process (store in tmp) and wait until it answers.

        Waits for the ready log line, the ExecuteTask server and an answer from
        each of the cache's services: a server seen in the graph can still lose a
        request sent before the endpoints matched (or be a stopped process's stale
        entry), and Fast DDS drops a response to a client whose response reader the
        new server has not matched yet ("failed to send response (timeout)"). Each
        warm-up request is one the service refuses (empty task name, unknown id,
        nothing recording), so nothing changes.
        """
        values = self.values(**overrides)
        params_file = write_params(self.tmp / 'params.yaml', self.names.node, values)
        log = self.tmp / f'cache_{len(list(self.tmp.glob("cache_*.log")))}.log'
        self.cache = CacheProcess(names=self.names, params_file=params_file, log=log,
                                  domain_id=self.domain_id, host=host)
        cache = self.cache
        try:
            self._wait_ready(cache)
        except BaseException:  # a fixture that raises is not torn down: no process left
            self.stop_cache()
            raise
        return cache

    def _wait_ready(self, cache: CacheProcess) -> None:
        """Wait until the cache is up, serves, and passed a call through each proxy."""
        if not wait_until(lambda: 'behavior cache ready' in cache.output()
                          or not cache.alive(), 30.0) or not cache.alive():
            raise RuntimeError(f'cache did not start:\n{cache.output()}')
        if not wait_for_action_matched(self.client, self.execute_client,
                                       f'/{self.names.node}', 30.0):
            raise RuntimeError(f'cache did not serve ExecuteTask:\n{cache.output()}')
        self._warm_services(cache)
        self._warm_proxies(cache)
        if self.subtasks and not wait_for_action_matched(
                self.agent, self.agent.subtasks.client, f'/{self.names.node}', 30.0):
            raise RuntimeError(f'cache did not serve execute_subtask:\n{cache.output()}')

    def values(self, **overrides: Any) -> dict[str, Any]:
        """Return the cache's parameters for this harness's robot (:func:`params`)."""
        return params(self.names, store=self.tmp / 'cache.db', **overrides)

    def _warm_services(self, cache: CacheProcess) -> None:
        """Call each of the cache's services with a request it refuses, until each answers."""
        from muscle_mem_interfaces.srv import (
            Forget, GetTrajectory, ListTasks, Replay, StartRecording, StopRecording,
        )
        harmless = (
            (ListTasks, 'list_tasks', {'task': '', 'with_steps': False}),
            (GetTrajectory, 'get_trajectory', {'trajectory_id': 0}),
            (Replay, 'replay', {'task': ''}),
            (Forget, 'forget', {'task': ''}),
            (StartRecording, 'start_recording', {'task': ''}),
            (StopRecording, 'stop_recording', {'save': False}),
        )
        for srv_type, name, fields in harmless:
            for _ in range(30):
                try:
                    self.call(srv_type, name, timeout=1.0, **fields)
                    break
                except TimeoutError:
                    continue
            else:
                raise RuntimeError(f'cache did not answer {name}:\n{cache.output()}')

    def _warm_proxies(self, cache: CacheProcess) -> None:
        """
        Pass one harmless call through each proxy, from the agent's own clients, until one ends.

        The new process has to discover the robot's servers (a proxy waits 2 s for a server it
        has not seen, then aborts the goal), and a request sent between graph discovery and
        endpoint matching is lost. Under load either can fail a test's first proxied step; a
        completed round trip per proxy shows both legs (agent -> proxy -> robot) are matched.
        Outside a task nothing is recorded; the arm is sent where it already is.
        """
        with self.robot._lock:
            joints = list(self.robot.joints)
        for kind, arg in (('arm', joints), ('gripper', False), ('fib', 1)):
            for _ in range(6):
                if self.agent.do(kind, arg, timeout=5.0):
                    break
            else:
                raise RuntimeError(f'the {kind} proxy did not pass a call:\n{cache.output()}')

    def stop_cache(self) -> int:
        """Stop the cache process; wait until its servers left the graph."""
        return self.stop_cache_with(signal.SIGTERM)

    def stop_cache_with(self, sig: int) -> int:
        """
        Send ``sig`` to the cache process and wait for its exit code.

        After a clean exit, also wait until its servers left the graph (quick);
        a killed process stays in the graph until its discovery lease ends, which
        start_cache copes with (it waits for an answer from the new process).
        """
        assert self.cache is not None
        code = self.cache.stop(sig)
        self.cache = None
        for client in self._clients.values():  # the next process matches new ones
            self.client.destroy_client(client)
        self._clients.clear()
        if sig != signal.SIGKILL:
            wait_until(lambda: not self.execute_client.server_is_ready(), 2.0)
        return code

    def close(self) -> None:
        if self.cache is not None:
            self.stop_cache()
        self._spinner.stop()
        # Destroyed here, in order, with nothing spinning: left to the garbage collector, an
        # action server or client is finalized in whatever thread runs it next (a later
        # test's executor), after its node, and rclpy 9.1.2 can crash there (a fresh-clone
        # run died of a segmentation fault "Garbage-collecting" in a spinning thread).
        for node in (self.robot, self.agent, self.client, *self.extra_nodes):
            for waitable in list(node.waitables):
                waitable.destroy()
            node.destroy_node()
        rclpy.try_shutdown(context=self.context)

    def wait(self, future: Any, timeout: float = 30.0) -> Any:
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not future.done():
            done.wait(timeout)
        if not future.done():
            tail = ''
            if self.cache is not None:
                tail = '\n'.join(self.cache.output().splitlines()[-20:])
            died = f'\nthe test executor died:\n{self.spin_error}' if self.spin_error else ''
            raise TimeoutError(f'no answer in {timeout} s; end of the cache log:\n{tail}{died}')
        return future.result()

    def result(self, handle: Any, timeout: float = 30.0, attempts: int = 3) -> Any:
        """
        Return the wrapped result of an accepted goal, asking again if an answer is lost.

        A result request is idempotent (the server keeps a finished goal's result
        for its ``result_timeout``). Fast DDS drops a response to a client whose
        response reader the server has not matched yet ("failed to send response
        (timeout): client will not receive response"), which happens to a client
        created moments before a goal that ends at once; the request is then sent
        again, ``attempts`` times in all within ``timeout``.
        """
        for attempt in range(attempts):
            try:
                return self.wait(handle.get_result_async(), timeout / attempts)
            except TimeoutError:
                if attempt == attempts - 1:
                    raise

    def send_task(self, task: str, params_json: str = '',
                  feedback: list[Any] | None = None) -> Any:
        """Send an ExecuteTask goal; return its goal handle (accepted or not)."""
        goal = ExecuteTask.Goal(task=task, params_json=params_json)
        cb = (lambda msg: feedback.append(msg.feedback)) if feedback is not None else None
        return self.wait(self.execute_client.send_goal_async(goal, feedback_callback=cb))

    def run_task(self, task: str, params_json: str = '', timeout: float = 60.0) -> TaskRun:
        """Run a task to the end through the cache."""
        feedback: list[Any] = []
        handle = self.send_task(task, params_json, feedback)
        assert handle.accepted
        wrapped = self.wait(handle.get_result_async(), timeout)
        return TaskRun(wrapped.status, wrapped.result, feedback)

    def call(self, srv_type: type, name: str, timeout: float = 30.0, **fields: Any) -> Any:
        """Call one of the cache's services (``name`` relative to the node)."""
        client = self._clients.get(name)
        if client is None:
            client = self.client.create_client(srv_type, self.names.cache(name),
                                               callback_group=self._group)
            # its first answer would go to nobody if the cache had not matched it yet
            if not wait_for_service_matched(self.client, client, f'/{self.names.node}', 15.0):
                self.client.destroy_client(client)
                raise RuntimeError(f'service {name} not available')
            self._clients[name] = client
        if not client.wait_for_service(timeout_sec=15.0):
            raise RuntimeError(f'service {name} not available')
        future = client.call_async(srv_type.Request(**fields))
        try:
            return self.wait(future, timeout)
        except TimeoutError:
            client.remove_pending_request(future)
            raise

    def events_of(self, kind: int, task: str | None = None) -> list[CacheEvent]:
        return [e for e in list(self.events)
                if e.type == kind and (task is None or e.task == task)]

    def wait_events(self, kind: int, task: str | None = None, count: int = 1,
                    timeout: float = 10.0) -> list[CacheEvent]:
        """
        Return the events of ``kind`` (and ``task``) once at least ``count`` arrived.

        Events travel on a topic, unordered with a task's result or a service's response:
        a test that asserts on events after a result waits here (bounded) for them.
        """
        wait_until(lambda: len(self.events_of(kind, task)) >= count, timeout)
        found = self.events_of(kind, task)
        assert len(found) >= count, (
            f'{len(found)} events of type {kind} for task {task!r} after {timeout} s, '
            f'expected {count}; all events: {[(e.type, e.task, e.step) for e in self.events]}')
        return found

    def set_mode(self, mode: str) -> Any:
        """Change the cache's ``cache_mode`` parameter at run time."""
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParameters
        value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=mode)
        response = self.call(SetParameters, 'set_parameters',
                             parameters=[Parameter(name='cache_mode', value=value)])
        return response.results[0]
