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
Tasks within tasks: ``~/execute_subtask``, and a replayed subtask step.

A planning agent decomposes; the cache learns each skill in its own tree and runs it
for every task that calls it (:mod:`muscle_mem_ros.replay.subtasks` has the step and its
rules). A subtask runs as any task runs (:class:`.tasks.TaskRunner`: a replay when it is
learned and its checks pass, otherwise the agent's own ExecuteTask server is sent the
subtask, and what it does is learned in the subtask's tree), reached in two ways:

* the agent of a running task sends it to ``~/execute_subtask`` (same ExecuteTask type):
  accepted only while that agent is in control (:meth:`TaskStack.admit`); the parent's
  recording, when it records, gets the call as one step once it succeeded
  (:class:`SubtaskServer`);
* the parent's replay reaches such a step: the walk runs the subtask through the cache
  (:meth:`SubtaskServer.replay_step`), and goes on after it as after any step.

A refused subtask goal is accepted and at once aborted with the reason (a plain goal
rejection could not say why), as a second ExecuteTask goal is. The running tasks form a
stack (:class:`TaskStack`); each has a cancel token under its caller's, so a cancel of the
parent cancels the subtask and whoever does it (the replayed goal, or the agent's goal).
Feedback of a subtask reaches its own caller and every task above it, naming the task
and its depth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import json
import threading
import time
from typing import Any, Protocol

from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.errors import MuscleMemError
from muscle_mem_ros.records import StepStatus
from muscle_mem_ros.replay.subtasks import refusal, subtask_step, SubtaskCall
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.ros.capture.forwarding import CallOutcome
from muscle_mem_ros.ros.capture.recorder import Recorder, Session
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.execution.events import EventSink
from muscle_mem_ros.ros.node.nodeconfig import CacheMode
from muscle_mem_ros.ros.rclfix.action_server import ActionServer
from muscle_mem_ros.ros.rclfix.sync import CancelToken
from rclpy.action.server import CancelResponse, GoalResponse
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node as RosNode
from rclpy.task import Future

__all__ = ['Frame', 'LocalGoal', 'Runner', 'SubtaskServer', 'TaskStack']

Publish = Callable[[Any], None]
"""Publishes one ExecuteTask feedback message."""


class Runner(Protocol):
    """Runs one task's goal (:class:`.tasks.TaskRunner`, which imports this module)."""

    def run(self, goal_handle: Any, *, mode: CacheMode, cancel: CancelToken,
            frame: Frame | None = None) -> Any:
        """Execute the goal as task ``frame`` (None: the task sent); return its result."""


@dataclass(eq=False)
class Frame:
    """
    One running task: the one sent to ``~/execute_task`` (depth 0), or a subtask of it.

    :ivar task: Its name.
    :ivar depth: 0 for the task sent, 1 for a subtask it called, ...
    :ivar cancel: Cancels it (and, through their tokens, its subtasks).
    :ivar publish: Sends a feedback message to its own caller (and to every task above).
    :ivar parent: The task that called it, or None.
    :ivar agent: True while its agent is in control (it may send subtasks then).
    :ivar session: The recording its agent's steps go to while the agent works, or None.
    :ivar asked: The agent was asked for it or for a subtask below it (a replay of it that
        completed is then not a cache hit: the agent did part of it).
    :ivar agent_steps: Steps the agent did in the subtasks its replay ran (its result's
        ``steps_by_agent`` when the replay completed).
    :ivar not_stopped: Why a goal the cache sent for it did not stop ('' : none did). Every
        task above ends with it too, and no agent is asked (:meth:`robot_not_stopped`).
    """

    task: str
    depth: int
    cancel: CancelToken
    publish: Publish
    parent: Frame | None = None
    agent: bool = False
    session: Session | None = None
    asked: bool = False
    agent_steps: int = 0
    not_stopped: str = ''

    def robot_not_stopped(self, reason: str) -> None:
        """
        Note that the robot did not stop under this task: every task above ends with it.

        A task above whose agent is in control is canceled (its agent must not command a
        robot that is still moving; its result says why, not 'canceled').
        """
        frame: Frame | None = self
        while frame is not None:
            frame.not_stopped = frame.not_stopped or reason
            if frame is not self and frame.agent:
                frame.cancel.cancel()
            frame = frame.parent

    def agent_did(self, steps: int) -> None:
        """Note ``steps`` the agent did for this subtask in the tasks above that replayed it."""
        frame = self.parent
        while frame is not None and not frame.agent:
            frame.agent_steps += steps
            frame = frame.parent

    def ask_agent(self) -> None:
        """Note that the agent is asked for this task (so, for part of every task above)."""
        frame: Frame | None = self
        while frame is not None:
            frame.asked = True
            frame = frame.parent

    def feedback(self, message: Any) -> None:
        """Publish ``message`` as this task's (its ``task`` and ``depth`` filled in)."""
        message.task = self.task
        message.depth = self.depth
        self.publish(message)


class TaskStack:
    """The tasks running now, outermost first (one task at a time, its subtasks on top)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._top: Frame | None = None

    @property
    def top(self) -> Frame | None:
        """Return the innermost running task, or None."""
        return self._top

    def depth_of(self, task: str) -> int:
        """Return the depth ``task`` runs at (0 when it does not run: a top-level event)."""
        frame = self._top
        while frame is not None:
            if frame.task == task:
                return frame.depth
            frame = frame.parent
        return 0

    def root(self, task: str, cancel: CancelToken, publish: Publish) -> Frame:
        """Enter the task sent to the cache (nothing else runs: the node's guard says so)."""
        frame = Frame(task=task, depth=0, cancel=cancel, publish=publish)
        with self._lock:
            self._top = frame
        return frame

    def admit(self, task: str, *, by_agent: bool, cancel: CancelToken | None = None,
              publish: Publish | None = None) -> Frame | str:
        """
        Enter ``task`` as a subtask of the innermost running task, or say why not.

        :param by_agent: Sent to ``~/execute_subtask`` by an agent (its task must be in the
            agent's hands), rather than reached by a replay.
        :param cancel: The token the subtask's is under (default: its caller's).
        :param publish: Where its feedback goes besides its callers (its own goal).
        :return: The subtask's frame, or the reason it is refused.
        """
        with self._lock:
            top = self._top
            if top is None:
                return ('no task is running: a subtask is sent by the agent of a running '
                        'task (to ~/execute_subtask while the cache has handed it the task)')
            if by_agent and not top.agent:
                return (f"the cache is running task '{top.task}' itself (replaying, or a "
                        'subtask of it): a subtask is accepted only while the agent is in '
                        'control')
            running: list[str] = []
            frame: Frame | None = top
            while frame is not None:
                running.insert(0, frame.task)
                frame = frame.parent
            reason = refusal(running, task)
            if reason:
                return reason
            up = top.publish if publish is None else _both(publish, top.publish)
            child = Frame(task=task, depth=top.depth + 1,
                          cancel=CancelToken(parent=cancel or top.cancel),
                          publish=up, parent=top)
            self._top = child
            return child

    def leave(self, frame: Frame) -> None:
        """Leave ``frame`` (it ended); its caller is the innermost again."""
        with self._lock:
            if self._top is frame:
                self._top = frame.parent


def _both(own: Publish, up: Publish) -> Publish:
    def publish(message: Any) -> None:
        own(message)
        up(message)
    return publish


class LocalGoal:
    """
    A subtask's goal when no client sent it (a replayed subtask step): what the runner asks.

    Its feedback goes through its frame to the tasks above; its end is kept here.
    """

    is_cancel_requested = False

    def __init__(self, call: SubtaskCall) -> None:
        self.request = ExecuteTask.Goal(task=call.task, params_json=call.params_json)
        self.state = 'executing'

    @property
    def is_active(self) -> bool:
        """Return True until the run ended it."""
        return self.state == 'executing'

    def publish_feedback(self, message: Any) -> None:
        """Nothing: a local goal's feedback reaches the tasks above through its frame."""

    def succeed(self) -> None:
        """End it: succeeded."""
        self.state = 'succeeded'

    def abort(self) -> None:
        """End it: aborted."""
        self.state = 'aborted'

    def canceled(self) -> None:
        """End it: canceled."""
        self.state = 'canceled'


class SubtaskServer:
    """
    Serve ``~/execute_subtask`` and run replayed subtask steps, both through the runner.

    :param node: The node the server is on.
    :param group: The callback group of the server.
    :param stack: The running tasks.
    :param sink: Publishes events.
    :param mode: Returns the cache mode a subtask runs in (the node's, read when it starts).
    :param runner: Returns the task runner (None: the node is not active).
    :param hub: Returns the sensor capture (for a recorded call's snapshots), or None.
    """

    def __init__(self, *, node: RosNode, group: CallbackGroup, stack: TaskStack,
                 sink: EventSink, mode: Callable[[], CacheMode],
                 runner: Callable[[], Runner | None],
                 hub: Callable[[], SensorHub | None]) -> None:
        self._node = node
        self._group = group
        self._stack = stack
        self._sink = sink
        self._mode = mode
        self._runner = runner
        self._hub = hub
        self._post_timeout = 0.0
        self._tokens: dict[bytes, CancelToken] = {}
        self._recorder: Recorder | None = None
        self._server: ActionServer | None = None

    def serve(self, *, recorder: Recorder, post_timeout: float) -> None:
        """
        Make the ``~/execute_subtask`` server (configure).

        :param recorder: The node's recorder.
        :param post_timeout: Max seconds to wait for sensor data newer than a call's end.
        """
        self._recorder = recorder
        self._post_timeout = post_timeout
        self._server = ActionServer(
            self._node, ExecuteTask, '~/execute_subtask', self._execute,
            goal_callback=lambda _goal: GoalResponse.ACCEPT, cancel_callback=self._cancel,
            callback_group=self._group)

    def stop(self) -> None:
        """Destroy the server (cleanup)."""
        if self._server is not None:
            self._server.destroy()
            self._server = None
        self._recorder = None

    def wait_results_sent(self, timeout: float) -> bool:
        """Wait until every subtask's result was sent (True), or ``timeout`` s (False)."""
        server = self._server
        return server is None or server.wait_results_sent(timeout)

    def _cancel(self, goal_handle: Any) -> CancelResponse:
        token = self._tokens.get(bytes(goal_handle.goal_id.uuid))
        if token is not None:
            token.cancel()
        return CancelResponse.ACCEPT

    async def _execute(self, goal_handle: Any) -> Any:
        """
        Run a subtask the agent sent, in a thread of its own, and await its result.

        The task that called it holds one of the node's executor threads while it waits on
        its agent; a subtask (and its subtasks) must not take more, or a few levels of
        nesting would leave none to deliver the results they wait for.
        """
        done: Future[Any] = Future(executor=self._node.executor)
        done.add_done_callback(lambda _f: None)  # completing it wakes the executor

        def work() -> None:
            try:
                done.set_result(self._run(goal_handle))
            except Exception as err:  # the server aborts the goal with the reason
                done.set_exception(err)

        threading.Thread(target=work, name=f'subtask {goal_handle.request.task}',
                         daemon=True).start()
        return await done

    def _run(self, goal_handle: Any) -> Any:
        """Run a subtask the agent sent; record it in its caller's recording if it succeeded."""
        goal = goal_handle.request
        task = goal.task.strip()
        runner = self._runner()
        admitted = 'the node is not active' if runner is None else self._stack.admit(
            task, by_agent=True, publish=goal_handle.publish_feedback)
        if isinstance(admitted, str):
            message = f"subtask '{task}' rejected: {admitted}"
            self._sink(kind=CacheEvent.ERROR, task=task, step=-1, detail=message)
            goal_handle.abort()
            return ExecuteTask.Result(success=False, message=message)
        assert runner is not None
        frame, key = admitted, bytes(goal_handle.goal_id.uuid)
        self._tokens[key] = frame.cancel
        if goal_handle.is_cancel_requested:
            frame.cancel.cancel()
        session = frame.parent.session if frame.parent is not None else None
        pre = self._snapshot() if session is not None else None
        started, entry = time.monotonic(), self._active_recording()
        try:
            result = runner.run(goal_handle, mode=self._mode(), cancel=frame.cancel, frame=frame)
        except Exception as err:  # keep the node and the parent alive; the caller gets why
            self._node.get_logger().error(f"subtask '{task}' failed: {err!r}")
            self._sink(kind=CacheEvent.ERROR, task=task, step=-1, detail=str(err))
            if goal_handle.is_active:
                goal_handle.abort()
            return ExecuteTask.Result(success=False, message=f'internal error: {err}')
        finally:
            self._stack.leave(frame)
            self._tokens.pop(key, None)
            self._unwind(entry)
        if result.success and session is not None:
            self._record(session, goal.params_json, task, pre, started)
        return result

    def replay_step(self, parent: str, call: SubtaskCall, cancel: CancelToken) -> CallOutcome:
        """
        Run a subtask step a walk of ``parent`` reached: through the cache, as a task.

        Under ExecuteTask it runs in the node's mode (a miss goes to the agent, as the
        subtask alone); under a Replay call, which never asks the agent, in
        ``replay_only``.

        :return: Succeeded when the subtask did (by replay, the agent, or both).
        """
        started = time.monotonic()
        runner = self._runner()
        if runner is None:
            return CallOutcome(StepStatus.FAILED, 'the node is not active', started, started)
        mode, root = self._mode(), None
        if self._stack.top is None:  # a Replay call walks the parent
            root = self._stack.root(parent, cancel, lambda _message: None)
            mode = CacheMode.REPLAY_ONLY
        admitted = self._stack.admit(call.task, by_agent=False, cancel=cancel)
        if isinstance(admitted, str):
            if root is not None:
                self._stack.leave(root)
            return CallOutcome(StepStatus.FAILED, f"subtask '{call.task}': {admitted}",
                               started, time.monotonic())
        goal, entry = LocalGoal(call), self._active_recording()
        try:
            result = runner.run(goal, mode=mode, cancel=admitted.cancel, frame=admitted)
        finally:
            self._unwind(entry)
            self._stack.leave(admitted)
            if root is not None:
                self._stack.leave(root)
        if result.success:
            return CallOutcome(StepStatus.SUCCEEDED, '', started, time.monotonic(), result)
        if admitted.not_stopped:
            return CallOutcome(StepStatus.FAILED, f"subtask '{call.task}': {result.message}",
                               started, time.monotonic(), result, kind=FailureKind.NOT_STOPPED)
        status = StepStatus.CANCELED if cancel.cancelled else StepStatus.FAILED
        return CallOutcome(status, f"subtask '{call.task}': {result.message}", started,
                           time.monotonic(), result)

    def _active_recording(self) -> Session | None:
        return self._recorder.active if self._recorder is not None else None

    def _unwind(self, entry: Session | None) -> None:
        """Discard what a subtask that raised left recording (a clean end closed its own)."""
        if self._recorder is not None and self._recorder.unwind(entry):
            self._node.get_logger().warning('a failed subtask left its recording open: '
                                            'discarded')

    def _snapshot(self) -> Any:
        hub = self._hub()
        return hub.capture(thumbnails=True) if hub is not None else None

    def _record(self, session: Session, params_json: str, task: str, pre: Any,
                started: float) -> None:
        """Append the call to its caller's recording (if that is still the active one)."""
        recorder, hub = self._recorder, self._hub()
        ended = time.monotonic()
        if hub is None or recorder is None:
            return
        if hub.names and not hub.wait_newer(ended, self._post_timeout):
            self._node.get_logger().warning(
                f"subtask '{task}': no data newer than its end from "
                f'{", ".join(hub.lagging(ended))}; post snapshot uses older data')
        post = hub.capture(thumbnails=True)
        params = json.loads(params_json.strip() or '{}')
        step = subtask_step(task, params, pre=pre if pre is not None and pre.features else None,
                            post=post if post.features else None, duration=ended - started)
        try:
            appended = session is recorder.active and session.append(step)
        except MuscleMemError as err:
            self._node.get_logger().error(f"subtask '{task}': call not recorded: {err}")
            return
        if not appended:
            self._node.get_logger().warning(
                f"subtask '{task}': its caller's recording ended meanwhile; not recorded")
