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
ROS 2 node ``demo_agent``: a slow planning agent serving ExecuteTask for the demo arm.

It stands in for an LLM, VLM or motion-planner agent: before every step it perceives the
world (``joint_states``, ``object_pose``), asks :func:`planner.next_step` what to do, spends
``think_time`` seconds "thinking", and sends the step as a Cartesian MoveToPose goal (to and
from the cube, at the place target), a joint-trajectory goal (the move home) or a gripper
GripperCommand goal (finger position 0 closes, 0.04 opens; closing on the cube stalls against
it, which is a grasp). The moves to and from the cube turn the gripper by the cube's yaw (read
from ``object_pose``'s orientation), the moves at the place target back to yaw 0. Point
``pose_action``, ``arm_action`` and ``gripper_action`` at the behavior cache's proxies (or
remap them) so the cache records what the agent does.

Task ``pick_and_place``; params JSON may hold ``{"place": [x, y]}`` (metres; the place steps'
goals then carry exactly these x, y). The resume context is honoured: with
``resume_from_step`` k the steps before k are taken as done and the rest is planned from the
current state, numbered from k.

The same work as skills: ``pick`` (approach, descend, close, lift: the cube ends in the
jaws at hover height) and ``place`` (params ``{"place": [x, y]}``: carry, lower, open,
return home; it fails when nothing is held). And two tasks the agent decomposes into them,
``restock`` (the cube to the shelf, :data:`planner.SHELF`) and ``tidy`` (to the bin,
:data:`planner.BIN`), either taking ``{"place": [x, y]}`` instead: the agent does not move
the arm for these, it sends each subtask (one "think" each) as an ExecuteTask goal to
``subtask_action``, the behavior cache's ``~/execute_subtask``, which replays the skill
if it has learned it or sends it back to this agent, and learns it on its own. A step of a
parent is one subtask call. This server therefore takes a second goal while one runs,
provided every running goal waits for a subtask (the one arriving is that subtask); any
other concurrent goal is rejected. Canceling a parent cancels the subtask it waits for.

Each call is announced on ``~/calls`` (std_msgs/String, JSON: event start|end, task,
resume_from_step, steps, success) so demos and tests can count the agent's calls.

Parameters: ``arm`` ('panda': the arm it plans for, one of the sim robot's, :mod:`arms`; its
joints are read from ``joint_states`` by name), ``think_time`` (s, 1.5),
``arm_action`` ('arm/follow_joint_trajectory'), ``pose_action`` ('arm/move_to_pose'),
``gripper_action`` ('gripper/gripper_cmd'), ``gripper_effort`` (N, 20.0),
``place_x``/``place_y`` (m, 0.4/-0.3),
``move_time``/``vertical_time`` (s of robot motion, 0.8/0.5), ``step_timeout`` (s, 30.0),
``max_steps`` (16), ``goal_tolerance`` (rad, 0.005), ``path_tolerance`` (rad, 0.0: the
joint-trajectory goal's per-joint path tolerance; 0 leaves the server's, none), ``subtask_action``
('muscle_mem/execute_subtask': the cache node ``muscle_mem`` in this node's namespace),
``introspection`` (false: true publishes service introspection events, with contents, of its
arm, pose and gripper clients and of its ExecuteTask server, which is what a bag needs for
``muscle-mem learn``: ``sim_demo --record-bag``).
"""

from __future__ import annotations

from collections.abc import Callable
import json
import sys
import threading
import time
from typing import Any

from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import PoseStamped
from muscle_mem_demo import arms, gripper_yaw, kinematics
from muscle_mem_demo.params import (
    declare_bool, declare_int, declare_number, declare_string, spin_node)
from muscle_mem_demo.planner import (
    next_pick_step,
    next_place_step,
    next_step,
    next_subtask,
    PARENT_PLACES,
    PickPlaceSpec,
    PlannedStep,
    PlanningError,
    StepKind,
    WorldView,
)
from muscle_mem_demo_interfaces.action import FollowJointTrajectory, GripperCommand, MoveToPose
from muscle_mem_demo_interfaces.msg import JointTolerance
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.action_server import ActionServer
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
import rclpy
from rclpy.action import CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_system_default
from rclpy.service_introspection import ServiceIntrospectionState
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

__all__ = ['DemoAgentNode', 'SKILLS', 'TASK_NAME', 'TASKS', 'main']

TASK_NAME = 'pick_and_place'
"""The task the demo agent does in one piece."""

SKILLS: dict[str, Callable[[WorldView, PickPlaceSpec], PlannedStep | None]] = {
    TASK_NAME: next_step,
    'pick': next_pick_step,
    'place': next_place_step,
}
"""The tasks the agent does step by step, with their planner."""

TASKS: tuple[str, ...] = (*SKILLS, *PARENT_PLACES)
"""Every task the demo agent knows: the skills, then the tasks it decomposes."""

EXECUTOR_THREADS = 8
"""Threads of the agent's executor: a parent goal and its subtask goal each hold one while
they wait, the rest serve results, feedback and sensors."""

_SHUTDOWN_WAIT = 5.0
"""Seconds shutdown waits for the running task's result to reach its client."""


class _TaskFailed(Exception):
    """A step could not be planned or executed; the message says why."""


class _TaskCanceled(Exception):
    """The task was canceled while a step was in flight (the step's goal was canceled)."""


class DemoAgentNode(Node):
    """Serves ``~/execute_task`` and plans the pick-and-place step by step."""

    def __init__(self, *, node_name: str = 'demo_agent', **kwargs: Any) -> None:
        """
        Declare and check parameters, create the clients, subscriptions and server.

        :raises ValueError: a parameter is out of range; the message names it.
        """
        super().__init__(node_name, **kwargs)
        arm = declare_string(self, 'arm', kinematics.ARM)
        if arm not in arms.ARMS:
            raise ValueError(f"parameter 'arm': {arm!r} is not one of {sorted(arms.ARMS)}")
        kinematics.use_arm(arm)
        self._think_time = declare_number(self, 'think_time', 1.5, minimum=0.0)
        arm_action = declare_string(self, 'arm_action', 'arm/follow_joint_trajectory')
        pose_action = declare_string(self, 'pose_action', 'arm/move_to_pose')
        gripper = declare_string(self, 'gripper_action', 'gripper/gripper_cmd')
        self._gripper_effort = declare_number(self, 'gripper_effort', 20.0, minimum=0.0)
        self._step_timeout = declare_number(self, 'step_timeout', 30.0, minimum=0.0,
                                            exclusive=True)
        self._goal_tolerance = declare_number(self, 'goal_tolerance', 0.005, minimum=0.0)
        self._path_tolerance = declare_number(self, 'path_tolerance', 0.0, minimum=0.0)
        self._max_steps = declare_int(self, 'max_steps', 16, minimum=1)
        place_x = declare_number(self, 'place_x', 0.4)
        place_y = declare_number(self, 'place_y', -0.3)
        move_time = declare_number(self, 'move_time', 0.8, minimum=0.0, exclusive=True)
        vertical_time = declare_number(self, 'vertical_time', 0.5, minimum=0.0, exclusive=True)
        subtask_action = declare_string(self, 'subtask_action', 'muscle_mem/execute_subtask')
        introspection = declare_bool(self, 'introspection', False)
        try:
            self._spec = PickPlaceSpec(place_x=place_x, place_y=place_y, move_time=move_time,
                                       vertical_time=vertical_time)
        except ValueError as err:
            raise ValueError(f"parameters 'place_x'/'place_y': {err}") from err
        self._group = ReentrantCallbackGroup()
        self._lock = threading.Lock()
        self._joints: JointState | None = None
        self._object: PoseStamped | None = None
        self._running = 0
        self._waiting = 0
        self._stopping = threading.Event()
        self._senses = _Senses(self, self._on_joints, self._on_object)
        self._arm = ActionClient(self, FollowJointTrajectory, arm_action,
                                 callback_group=self._group)
        self._pose = ActionClient(self, MoveToPose, pose_action, callback_group=self._group)
        self._gripper = ActionClient(self, GripperCommand, gripper, callback_group=self._group)
        self._subtasks = ActionClient(self, ExecuteTask, subtask_action,
                                      callback_group=self._group)
        self._calls = self.create_publisher(String, '~/calls', 10)
        self._server = ActionServer(
            self,
            ExecuteTask,
            '~/execute_task',
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=self._group,
        )
        if introspection:  # what a bag needs to learn from: the goals, whom they went to
            for endpoint in (self._arm, self._pose, self._gripper, self._server):
                endpoint.configure_introspection(self.get_clock(), qos_profile_system_default,
                                                 ServiceIntrospectionState.CONTENTS)
        self.get_logger().info(
            f'demo agent up: {arm}, think {self._think_time} s/step, '
            f'arm -> {self._arm._action_name}, pose -> {self._pose._action_name}, '
            f'gripper -> {self._gripper._action_name}, subtasks -> {self._subtasks._action_name}'
        )

    def shutdown(self) -> None:
        """
        End a running task ('shutting down') and wait until its client has the result.

        Called after a shutdown signal, while the executor still spins: a client of the
        running task gets an aborted result with the reason instead of waiting forever.
        """
        self._stopping.set()
        if not self._server.wait_results_sent(_SHUTDOWN_WAIT):
            self.get_logger().warning(
                f'shutdown: a task result was not sent within {_SHUTDOWN_WAIT:g} s')
        self._senses.close()

    def destroy_node(self) -> None:
        """Destroy the perception's helper node too (stopped first if no shutdown did)."""
        self._senses.close()
        super().destroy_node()

    def _check_stopping(self) -> None:
        if self._stopping.is_set():
            raise _TaskFailed('shutting down')

    # -- perception ---------------------------------------------------------------------------

    def _on_joints(self, msg: JointState) -> None:
        with self._lock:
            self._joints = msg

    def _on_object(self, msg: PoseStamped) -> None:
        with self._lock:
            self._object = msg

    def _perceive(self, *, after: int, timeout: float) -> WorldView:
        """
        Wait for a joint state and an object pose stamped after ``after`` (ns); build the view.

        Stamps, not arrival order, decide freshness: a message read just before the last
        step ended may arrive after its result.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                joints, obj = self._joints, self._object
            if (
                joints is not None
                and obj is not None
                and _stamp_ns(joints.header.stamp) > after
                and _stamp_ns(obj.header.stamp) > after
            ):
                break
            if time.monotonic() > deadline:
                raise _TaskFailed('no fresh joint_states / object_pose (is the robot up?)')
            self._check_stopping()
            time.sleep(0.005)
        by_name = dict(zip(joints.name, joints.position, strict=False))
        try:
            arm = tuple(float(by_name[n]) for n in kinematics.ARM_JOINTS)
            jaws = [float(by_name[n]) for n in kinematics.GRIPPER_JOINTS]
        except KeyError as err:
            raise _TaskFailed(f'joint_states lacks joint {err}') from err
        closed = kinematics.jaws_closed(jaws)
        p, q = obj.pose.position, obj.pose.orientation
        return WorldView(joints=arm, gripper_closed=closed, object_position=(p.x, p.y, p.z),
                         object_yaw=gripper_yaw.yaw_of((q.x, q.y, q.z, q.w)))

    # -- ExecuteTask --------------------------------------------------------------------------

    def _on_goal(self, goal: ExecuteTask.Goal) -> GoalResponse:
        with self._lock:
            # a goal while every running one waits for a subtask is that subtask
            if self._running > self._waiting:
                self.get_logger().warning(
                    f'rejecting task {goal.task!r}: one is already running')
                return GoalResponse.REJECT
            self._running += 1
        return GoalResponse.ACCEPT

    def _execute(self, goal_handle: ServerGoalHandle) -> ExecuteTask.Result:
        goal = goal_handle.request
        result = ExecuteTask.Result()
        start_step = max(0, int(goal.resume_from_step))
        self._announce(event='start', task=goal.task, resume_from_step=start_step, steps=0)
        progress = [0]  # steps done, kept by the task's loop
        try:
            spec = self._task_spec(goal.task, goal.params_json)
            if goal.resume_reason:
                self.get_logger().info(f'resuming at step {start_step}: {goal.resume_reason}')
            if goal.task in PARENT_PLACES:
                canceled = self._decompose(goal_handle, spec, start_step, progress)
            else:
                canceled = self._act(goal_handle, SKILLS[goal.task], spec, start_step, progress)
            if canceled:
                goal_handle.canceled()
                result.message = f'canceled before step {start_step + progress[0]}'
                result.steps_by_agent = progress[0]
                return result
            result.success = True
            result.message = (f'{goal.task} done: {progress[0]} step(s) from step '
                              f'{start_step}')
            goal_handle.succeed()
        except _TaskCanceled:
            result.message = f'canceled during step {start_step + progress[0]}'
            goal_handle.canceled()
        except _TaskFailed as err:
            result.success = False
            result.message = f'step {start_step + progress[0]}: {err}'
            if self._stopping.is_set():  # a shutdown, not a failure of the task
                self.get_logger().warning(result.message)
            else:
                self.get_logger().error(result.message)
            goal_handle.abort()
        finally:
            with self._lock:
                self._running -= 1
            self._announce(event='end', task=goal.task, resume_from_step=start_step,
                           steps=progress[0], success=result.success)
        result.steps_by_agent = progress[0]
        return result

    def _act(self, goal_handle: ServerGoalHandle,
             planner: Callable[[WorldView, PickPlaceSpec], PlannedStep | None],
             spec: PickPlaceSpec, start_step: int, progress: list[int]) -> bool:
        """
        Plan and send the task's steps until it is done; return True when canceled between.

        :raises _TaskFailed: a step could not be planned or done.
        :raises _TaskCanceled: canceled during a step.
        """
        # plan only from data stamped after the task arrived: on a handoff the world may
        # have changed just before (a bump the cache's post-check caught)
        since = self.get_clock().now().nanoseconds
        while True:
            thinking_since = time.monotonic()
            view = self._perceive(after=since, timeout=self._step_timeout)
            step = self._plan(planner, view, spec)
            if step is None:
                return False
            if progress[0] >= self._max_steps:
                raise _TaskFailed(f'not finished after {progress[0]} steps')
            index = start_step + progress[0]
            self.get_logger().info(
                f'step {index}: {step.label} (object at '
                f'{_fmt(view.object_position)}, grasp point at '
                f'{_fmt(kinematics.forward(view.joints))}, '
                f'jaws {"closed" if view.gripper_closed else "open"})'
            )
            if self._think(goal_handle, index, step.label, thinking_since):
                return True
            self._send(step, goal_handle)
            since = self.get_clock().now().nanoseconds
            progress[0] += 1

    def _decompose(self, goal_handle: ServerGoalHandle, spec: PickPlaceSpec, start_step: int,
                   progress: list[int]) -> bool:
        """
        Send the parent's subtasks to the cache until it is done; True when canceled between.

        :raises _TaskFailed: a subtask failed or was refused (its message says why).
        :raises _TaskCanceled: canceled while a subtask ran (that subtask was canceled).
        """
        since = self.get_clock().now().nanoseconds
        while True:
            thinking_since = time.monotonic()
            view = self._perceive(after=since, timeout=self._step_timeout)
            name = next_subtask(view, spec)
            if name is None:
                return False
            if progress[0] >= self._max_steps:
                raise _TaskFailed(f'not finished after {progress[0]} subtasks')
            index = start_step + progress[0]
            params: dict[str, Any] = {}
            if name == 'place':
                params['place'] = [spec.place_x, spec.place_y]
            label = f'subtask {name} {json.dumps(params)}'
            self.get_logger().info(f'step {index}: {label} (object at '
                                   f'{_fmt(view.object_position)})')
            if self._think(goal_handle, index, label, thinking_since):
                return True
            self._run_subtask(name, params, goal_handle)
            since = self.get_clock().now().nanoseconds
            progress[0] += 1

    def _think(self, goal_handle: ServerGoalHandle, index: int, label: str,
               since: float) -> bool:
        """Spend the think time on step ``index``; return True when canceled meanwhile."""
        self._feedback(goal_handle, index, f'step {index}: thinking about {label}')
        self._stopping.wait(max(0.0, self._think_time - (time.monotonic() - since)))
        self._check_stopping()
        if goal_handle.is_cancel_requested:
            return True
        self._feedback(goal_handle, index, f'step {index}: {label}')
        return False

    def _task_spec(self, task: str, params_json: str) -> PickPlaceSpec:
        if task not in TASKS:
            raise _TaskFailed(f'unknown task {task!r} (this agent knows '
                              f'{", ".join(repr(t) for t in TASKS)})')
        try:
            params = json.loads(params_json) if params_json.strip() else {}
        except json.JSONDecodeError as err:
            raise _TaskFailed(f'params_json is not JSON: {err}') from err
        if not isinstance(params, dict):
            raise _TaskFailed('params_json must be a JSON object')
        place = params.get('place', PARENT_PLACES.get(task))
        if place is None:
            return self._spec
        try:
            x, y = (float(v) for v in place)
            return PickPlaceSpec(place_x=x, place_y=y, move_time=self._spec.move_time,
                                 vertical_time=self._spec.vertical_time)
        except (TypeError, ValueError) as err:
            raise _TaskFailed(f'params "place" must be [x, y] within reach: {err}') from err

    @staticmethod
    def _plan(planner: Callable[[WorldView, PickPlaceSpec], PlannedStep | None],
              view: WorldView, spec: PickPlaceSpec) -> PlannedStep | None:
        try:
            return planner(view, spec)
        except (kinematics.UnreachableError, PlanningError) as err:
            raise _TaskFailed(str(err)) from err

    def _feedback(self, goal_handle: ServerGoalHandle, step: int, detail: str) -> None:
        feedback = ExecuteTask.Feedback()
        feedback.mode = ExecuteTask.Feedback.MODE_AGENT
        feedback.step = step
        feedback.total = -1
        feedback.detail = detail
        feedback.task = goal_handle.request.task
        goal_handle.publish_feedback(feedback)

    def _announce(self, **fields: Any) -> None:
        self._calls.publish(String(data=json.dumps(fields, sort_keys=True)))

    # -- acting -------------------------------------------------------------------------------

    def _send(self, step: PlannedStep, task: ServerGoalHandle) -> None:
        if step.kind is StepKind.GRIPPER:
            self._run_goal(self._gripper, self._gripper_goal(step), step, task)
        elif step.kind is StepKind.POSE:
            self._run_goal(self._pose, self._pose_goal(step), step, task)
        else:
            self._run_goal(self._arm, self._trajectory_goal(step), step, task)

    @staticmethod
    def _pose_goal(step: PlannedStep) -> MoveToPose.Goal:
        """Return the MoveToPose goal of a POSE step: the planned target, gripper down, turned."""
        if step.target is None:
            raise _TaskFailed(f'{step.label}: a Cartesian step without a target')
        goal = MoveToPose.Goal()
        goal.target.header.frame_id = 'world'
        position = goal.target.pose.position
        position.x, position.y, position.z = step.target.x, step.target.y, step.target.z
        q = goal.target.pose.orientation
        q.x, q.y, q.z, q.w = gripper_yaw.from_yaw(step.yaw)
        goal.duration = _duration(step.duration)
        return goal

    def _gripper_goal(self, step: PlannedStep) -> GripperCommand.Goal:
        """Return the GripperCommand goal of a GRIPPER step: fully closed or fully open."""
        goal = GripperCommand.Goal()
        goal.command.position = float(
            kinematics.GRIPPER_CLOSED if step.close else kinematics.GRIPPER_OPEN)
        goal.command.max_effort = float(self._gripper_effort)
        return goal

    def _trajectory_goal(self, step: PlannedStep) -> FollowJointTrajectory.Goal:
        goal = FollowJointTrajectory.Goal()
        goal.goal_tolerance = [JointTolerance(name=name, position=self._goal_tolerance)
                               for name in kinematics.ARM_JOINTS]
        if self._path_tolerance > 0.0:
            goal.path_tolerance = [JointTolerance(name=name, position=self._path_tolerance)
                                   for name in kinematics.ARM_JOINTS]
        goal.trajectory = JointTrajectory()
        goal.trajectory.joint_names = list(kinematics.ARM_JOINTS)
        point = JointTrajectoryPoint()
        point.positions = [float(v) for v in step.joints]
        point.velocities = [0.0] * len(step.joints)
        point.time_from_start = _duration(step.duration)
        goal.trajectory.points = [point]
        return goal

    def _run_goal(self, client: ActionClient, goal: Any, step: PlannedStep,
                  task: ServerGoalHandle) -> None:
        """Send one arm goal, wait for its result (canceled with the task); raise on failure."""
        if not client.wait_for_server(timeout_sec=self._step_timeout):
            raise _TaskFailed(f'action server {client._action_name} not available')
        handle = self._wait(client.send_goal_async(goal), 'goal acceptance')
        if not handle.accepted:
            raise _TaskFailed(f'{step.label}: goal rejected')
        result = handle.get_result_async()
        deadline = time.monotonic() + self._step_timeout
        while not result.done():
            if task.is_cancel_requested:
                handle.cancel_goal_async()
                self._wait(result, 'the canceled trajectory to stop')
                raise _TaskCanceled()
            if time.monotonic() > deadline or self._stopping.is_set():
                handle.cancel_goal_async()
                self._check_stopping()
                raise _TaskFailed(f'{step.label}: no result within {self._step_timeout} s')
            time.sleep(0.02)
        response = self._wait(result, 'goal result')
        if isinstance(goal, GripperCommand.Goal):
            # gripper_action_controller's answer: SUCCEEDED (reached, or stalled on the cube)
            if response.status != GoalStatus.STATUS_SUCCEEDED:
                raise _TaskFailed(f'{step.label}: gripper goal ended with status '
                                  f'{response.status} at {response.result.position:.4f}')
            return
        code = response.result.error_code
        if code != 0:  # SUCCESSFUL in both FollowJointTrajectory and MoveToPose
            raise _TaskFailed(f'{step.label}: error {code} {response.result.error_string}')

    def _run_subtask(self, name: str, params: dict[str, Any], task: ServerGoalHandle) -> None:
        """
        Send one subtask to the cache, wait for its result (canceled with the task).

        While it waits, this goal counts as waiting, so the subtask's goal, which the cache
        may send back to this agent, is accepted.
        """
        if not self._subtasks.wait_for_server(timeout_sec=self._step_timeout):
            raise _TaskFailed(f'action server {self._subtasks._action_name} not available')
        goal = ExecuteTask.Goal(task=name, params_json=json.dumps(params, sort_keys=True))
        with self._lock:
            self._waiting += 1
        try:
            handle = self._wait(self._subtasks.send_goal_async(goal), 'subtask acceptance')
            if not handle.accepted:
                raise _TaskFailed(f'subtask {name}: goal rejected')
            result = handle.get_result_async()
            deadline = time.monotonic() + self._step_timeout * (self._max_steps + 1)
            while not result.done():
                if task.is_cancel_requested:
                    handle.cancel_goal_async()
                    self._wait(result, f'the canceled subtask {name} to end')
                    raise _TaskCanceled()
                if time.monotonic() > deadline or self._stopping.is_set():
                    handle.cancel_goal_async()
                    self._check_stopping()
                    raise _TaskFailed(f'subtask {name}: no result in time')
                time.sleep(0.02)
        finally:
            with self._lock:
                self._waiting -= 1
        response = self._wait(result, f'subtask {name} result')
        if response.status == GoalStatus.STATUS_CANCELED and task.is_cancel_requested:
            raise _TaskCanceled()
        if not response.result.success:
            raise _TaskFailed(f'subtask {name} failed: {response.result.message}')

    def _wait(self, future: Future, what: str) -> Any:
        event = threading.Event()
        future.add_done_callback(lambda _f: event.set())
        deadline = time.monotonic() + self._step_timeout
        while not event.wait(0.05):
            if self._stopping.is_set() or time.monotonic() > deadline:
                future.cancel()
                self._check_stopping()
                raise _TaskFailed(f'timed out waiting for {what}')
        if future.exception() is not None:
            raise _TaskFailed(f'{what} failed: {future.exception()}')
        return future.result()


class _Senses:
    """
    The agent's perception subscriptions, on a helper node spun by an executor of its own.

    ``joint_states`` (120 Hz) and ``object_pose`` (30 Hz) on the agent's multi-threaded
    executor kept one core busy while a task ran: every message rebuilt a wait set over all
    the agent's action clients and servers, and the executor yields a ready subscription
    again until a worker thread has taken its message. A single-threaded executor on a node
    that holds only these two subscriptions takes each message inline, with nothing else to
    wait on. The helper is ``_<agent>_senses`` in the agent's namespace, with the same
    global remappings (a remapped ``joint_states`` applies to it as well).

    :param node: The agent node.
    :param on_joints: Called with each JointState.
    :param on_object: Called with each object PoseStamped.
    """

    def __init__(self, node: Node, on_joints: Callable[[JointState], None],
                 on_object: Callable[[PoseStamped], None]) -> None:
        name = f'_{node.get_name()}_senses'
        self._node = rclpy.create_node(
            name, context=node.context, namespace=node.get_namespace(),
            cli_args=['--ros-args', '-r', f'__node:={name}'], start_parameter_services=False)
        self._node.create_subscription(JointState, 'joint_states', on_joints, 10)
        self._node.create_subscription(PoseStamped, 'object_pose', on_object, 10)
        executor = SingleThreadedExecutor(context=node.context)
        executor.add_node(self._node)
        self._spinner: Spinner | None = Spinner(executor)

    def close(self) -> None:
        """Stop spinning and destroy the helper node (once; later calls do nothing)."""
        spinner, self._spinner = self._spinner, None
        if spinner is not None:
            spinner.stop(_SHUTDOWN_WAIT)
            self._node.destroy_node()


def _duration(seconds: float) -> Duration:
    whole = int(seconds)
    return Duration(sec=whole, nanosec=int(round((seconds - whole) * 1e9)))


def _stamp_ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _fmt(point: object) -> str:
    if isinstance(point, kinematics.GraspPoint):
        point = (point.x, point.y, point.z)
    return '(' + ', '.join(f'{v:.3f}' for v in point) + ')'  # type: ignore[union-attr]


def main(args: list[str] | None = None) -> int:
    """Run the demo agent until interrupted; exit code 1 on bad parameters."""
    return spin_node(DemoAgentNode, name='demo_agent', args=args, on_exit=DemoAgentNode.shutdown,
                     num_threads=EXECUTOR_THREADS)


if __name__ == '__main__':
    sys.exit(main())
