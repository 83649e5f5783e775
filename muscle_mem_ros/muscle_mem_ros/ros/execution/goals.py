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
The ExecuteTask action's goals: accepted while active, one at a time, canceled, counted.

Two servers of that type: ``~/execute_task`` for the task sent to the cache, and
``~/execute_subtask`` for the subtasks its agent sends while it works
(:mod:`.subtasks`, which also runs a replayed subtask step).

The server (``~/execute_task``) is made at configure, as nav2 makes its action servers,
and destroyed at cleanup: while the node is inactive it stays advertised and rejects
every goal, so the result of a goal canceled by a deactivation still reaches its
client, and a client waiting for the server sees it at once.

One activity at a time (the node's guard: an ExecuteTask goal, a Replay call, a manual
recording or a Forget). A second goal while one runs is accepted and at once aborted
with ``success=false`` and a message naming the running activity (a plain goal
rejection could not say why). An accepted goal is run by the task runner
(:class:`.tasks.TaskRunner`); an unexpected error aborts it with the reason (an
``ERROR`` event, and an automatic recording discarded), and the node keeps serving.
"""

from __future__ import annotations

from collections.abc import Callable
import threading
from typing import Any

from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.errors import MuscleMemError
from muscle_mem_ros.ros.capture.recorder import Recorder
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.execution.events import EventSink
from muscle_mem_ros.ros.execution.subtasks import SubtaskServer, TaskStack
from muscle_mem_ros.ros.execution.tasks import GoalHandle, TaskRunner
from muscle_mem_ros.ros.node.nodeconfig import CacheMode
from muscle_mem_ros.ros.rclfix.action_server import ActionServer
from muscle_mem_ros.ros.rclfix.sync import CancelToken, TaskGuard
from rclpy.action.server import CancelResponse, GoalResponse
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node as RosNode

__all__ = ['TaskGoals']


class TaskGoals:
    """
    Serve ExecuteTask goals: accept, cancel, run one at a time, count runs and hits.

    Made with the node; :meth:`serve` (configure) makes the action server and
    :meth:`stop` (cleanup) destroys it. The counts last as long as the node.

    :param node: The node the server is on.
    :param guard: One activity at a time (shared with the services).
    :param group: The callback group of the server.
    :param sink: Publishes events.
    :param mode: Returns the cache mode a goal runs in (read when it starts).
    :param accepting: Returns True while goals are accepted (the node is active).
    :param runner: Returns the task runner (None: the node is not active).
    :param hub: Returns the sensor capture (None: the node is not active).
    """

    def __init__(self, *, node: RosNode, guard: TaskGuard, group: CallbackGroup,
                 sink: EventSink, mode: Callable[[], CacheMode],
                 accepting: Callable[[], bool],
                 runner: Callable[[], TaskRunner | None],
                 hub: Callable[[], SensorHub | None]) -> None:
        self._node = node
        self._guard = guard
        self._group = group
        self._sink = sink
        self._mode = mode
        self._accepting = accepting
        self._runner = runner
        self._tokens: dict[bytes, CancelToken] = {}
        self._counts_lock = threading.Lock()
        self._runs = 0
        self._hits = 0
        self._recorder: Recorder | None = None
        self._server: ActionServer | None = None
        self.stack = TaskStack()
        """The tasks running now (the task sent, and its subtasks on top)."""
        self.subtasks = SubtaskServer(node=node, group=group, stack=self.stack, sink=sink,
                                      mode=mode, runner=runner, hub=hub)

    def serve(self, *, recorder: Recorder, post_timeout: float) -> None:
        """
        Make the ``~/execute_task`` and ``~/execute_subtask`` servers (configure).

        :param recorder: The node's recorder.
        :param post_timeout: Max seconds to wait for sensor data newer than a call's end.
        """
        self._recorder = recorder
        self.subtasks.serve(recorder=recorder, post_timeout=post_timeout)
        self._server = ActionServer(
            self._node, ExecuteTask, '~/execute_task', self._execute,
            goal_callback=self._accept, cancel_callback=self._cancel,
            callback_group=self._group,
        )

    def stop(self) -> None:
        """Destroy the servers (cleanup); a later :meth:`serve` makes them again."""
        self.subtasks.stop()
        if self._server is not None:
            self._server.destroy()
            self._server = None
        self._recorder = None

    def counts(self) -> tuple[int, int]:
        """Return the goals run and, of those, the cache hits, since the node started."""
        with self._counts_lock:
            return self._runs, self._hits

    def cancel(self) -> None:
        """Cancel the running goal (its in-flight call or agent goal is canceled too)."""
        for token in list(self._tokens.values()):
            token.cancel()

    def wait_results_sent(self, timeout: float) -> bool:
        """
        Wait until no goal is executing and every requested result was sent.

        :param timeout: Seconds to wait at most.
        :return: True when nothing is owed (or there is no server), False after ``timeout``.
        """
        server = self._server
        return self.subtasks.wait_results_sent(timeout) and (
            server is None or server.wait_results_sent(timeout))

    def _accept(self, _goal: Any) -> GoalResponse:
        """Accept ExecuteTask goals while active; reject them while inactive."""
        return GoalResponse.ACCEPT if self._accepting() else GoalResponse.REJECT

    def _cancel(self, goal_handle: GoalHandle) -> CancelResponse:
        token = self._tokens.get(bytes(goal_handle.goal_id.uuid))
        if token is not None:
            token.cancel()
        # Not started yet: _execute sees is_cancel_requested and stops at once.
        return CancelResponse.ACCEPT

    def _execute(self, goal_handle: GoalHandle) -> Any:
        goal = goal_handle.request
        with self._guard.held(f"task '{goal.task}'") as holder:
            if holder is not None:
                message = f'rejected: {holder} is already running (one task at a time)'
                self._sink(kind=CacheEvent.ERROR, task=goal.task, step=-1, detail=message)
                goal_handle.abort()
                return ExecuteTask.Result(success=False, message=message)
            return self._run(goal_handle)

    def _run(self, goal_handle: GoalHandle) -> Any:
        """Run an accepted goal while holding the guard; a failure aborts it, never the node."""
        goal = goal_handle.request
        key = bytes(goal_handle.goal_id.uuid)
        token = CancelToken()
        self._tokens[key] = token
        try:
            if goal_handle.is_cancel_requested:
                token.cancel()
            runner = self._runner()
            if runner is None:
                raise MuscleMemError('the node is not active')
            result = runner.run(goal_handle, mode=self._mode(), cancel=token)
            with self._counts_lock:
                self._runs += 1
                self._hits += int(bool(result.cache_hit))
            return result
        except Exception as err:  # keep the node alive; the client gets the reason
            self._node.get_logger().error(f"task '{goal.task}' failed: {err!r}")
            self._sink(kind=CacheEvent.ERROR, task=goal.task, step=-1, detail=str(err))
            self._discard_recording()
            if goal_handle.is_active:
                goal_handle.abort()
            return ExecuteTask.Result(success=False, message=f'internal error: {err}')
        finally:
            self._tokens.pop(key, None)

    def _discard_recording(self) -> None:
        """Discard the automatic recording a failed goal left open (a manual one stays)."""
        recorder = self._recorder
        assert recorder is not None, 'a goal runs only while the node is configured'
        session = recorder.active
        if session is not None and not session.manual:
            try:
                recorder.finish(save=False)
            except MuscleMemError:
                pass
