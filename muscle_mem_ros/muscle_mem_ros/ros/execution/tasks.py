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
ExecuteTask: replay from memory, hand off to the agent, learn what it does.

One goal at a time. For a goal:

1. Validate: a non-empty task name and a params JSON object; otherwise the goal
   is aborted with the reason (nothing stored, the node keeps running).
2. ``learn`` and ``replay_only``: walk the tree (:mod:`muscle_mem_ros.replay.walk`, through
   :mod:`.replay`). A full walk is a cache hit (``HIT``; the agent is not called).
3. Otherwise (a miss at the root, a diverged check at step k, a failed step)
   ``learn`` hands off: ``HANDOFF`` (and ``MISS`` when nothing matched at the start:
   a step that failed or was stopped mid-task is a hand-back, not a miss),
   then an ExecuteTask goal to ``agent_action`` with ``resume_from_step``,
   ``resume_reason`` and ``steps_done`` filled in from the walk's ``Resume``
   (``convert.resume_goal``). The agent's calls through the
   proxies are recorded under the last replayed node; when the agent succeeds
   they are committed (``BRANCH_LEARNED``), when it fails they are discarded.
   ``replay_only`` fails instead, with the reason. ``record_only`` skips the
   walk and always hands off from step 0. ``off`` forwards the goal to the
   agent unchanged and records nothing.
4. Cancel of the task cancels the in-flight goal (the controller's during a
   replay, the agent's during a handoff). A replayed goal the cache stops (its watch,
   ``step_timeout``, this cancel) is over only once it ended and the robot rests
   (:mod:`..capture.stopping`); a robot that did not stop ends the task ABORTED and
   the agent is not asked. An agent's goal the cache ends is over only once every goal
   in flight through the proxies (the agent's, a subtask's) went through the same stop
   and every subtask ended (:mod:`.agentcall`); the result says what the agent answered
   and how each stop went.
5. While a stop that failed is on record (:mod:`.standstill`) a new task is refused,
   naming the server that did not stop.

Feedback: ``mode`` (replay / agent / shadow), ``step``, ``total`` (-1 while the
agent is in control), ``detail``. In ``shadow`` (and while a gate holds a task in
shadow) each of the agent's steps gets its verdict as it is recorded, before the
proxy answers the agent's call (:class:`.events.ShadowReporter`): a ``SHADOW_STEP``
event and a ``MODE_SHADOW`` feedback, not a burst before the result. An rclpy client
drops feedback it has not taken when the result arrives (the two travel apart), so
the result's message says every step's verdict too (:func:`muscle_mem_ros.replay.shadow.summary`).
The shadow counts are noted once, after the agent succeeded, as before.

Bookkeeping never fails a task (:mod:`..node.health`): when the store cannot write
(a full disk), a replay still succeeds and a miss still goes to the agent; the
result message ends with "(not stored: <error>)", an ``ERROR`` event says the
same, and ``/diagnostics`` shows the store degraded until a write succeeds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
import json
import time
from typing import Any

from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.errors import MuscleMemError, RecordingBusyError
from muscle_mem_ros.records import TrajectoryInfo
from muscle_mem_ros.replay.gates import Trusted
from muscle_mem_ros.replay.shadow import followed, summary
from muscle_mem_ros.replay.treeview import TreeView
from muscle_mem_ros.resume import FailureKind, Resume
from muscle_mem_ros.ros.capture.forwarding import ToolProxy
from muscle_mem_ros.ros.capture.recorder import Recorder, Session
from muscle_mem_ros.ros.execution.agentcall import call_agent, CANCEL_GRACE
from muscle_mem_ros.ros.execution.events import (
    describe_bindings, EventReporter, EventSink, ShadowReporter,
)
from muscle_mem_ros.ros.execution.inflight import InFlight, stop_in_flight, stop_limit
from muscle_mem_ros.ros.execution.replay import Replayer
from muscle_mem_ros.ros.execution.subtasks import Frame, TaskStack
from muscle_mem_ros.ros.messages.convert import canonical_params, resume_goal
from muscle_mem_ros.ros.node.health import StoreHealth
from muscle_mem_ros.ros.node.nodeconfig import CacheMode, DEFAULT_AGREEMENT, StopRule
from muscle_mem_ros.ros.rclfix.sync import CancelToken
from muscle_mem_ros.store import Store
from rclpy.action.client import ActionClient
from rclpy.action.server import ServerGoalHandle
from rclpy.impl.rcutils_logger import RcutilsLogger

__all__ = ['GoalHandle', 'TaskRunner']

_AGENT_WAIT = 2.0
"""Seconds to wait for an agent action server that is not discovered yet."""

GoalHandle = ServerGoalHandle[Any, Any, Any]
"""An ExecuteTask goal on the node's server (the generated messages are untyped)."""

_FROM_START = Resume(0, '')
"""The resume point of a task the agent does from the beginning on purpose (no walk)."""


def _replay_feedback(frame: Frame, step: int, total: int, detail: str,
                     substituted: Sequence[Any] = ()) -> None:
    """Publish a walk's progress (and a bound step's substitutions) as replay feedback."""
    frame.feedback(ExecuteTask.Feedback(
        mode=ExecuteTask.Feedback.MODE_REPLAY, step=step, total=total, detail=detail,
        substituted=list(substituted),
    ))


def _shadow_feedback(frame: Frame, step: int, detail: str) -> None:
    """Publish one step's shadow verdict as feedback (the agent is in control: total -1)."""
    frame.feedback(ExecuteTask.Feedback(
        mode=ExecuteTask.Feedback.MODE_SHADOW, step=step, total=-1, detail=detail))


def _end_canceled(goal_handle: GoalHandle) -> None:
    """End a goal stopped by a cancel: CANCELED if the client asked, else (shutdown) ABORTED."""
    if goal_handle.is_cancel_requested:
        goal_handle.canceled()
    else:
        goal_handle.abort()


class TaskRunner:
    """
    Run one ExecuteTask goal (the caller guarantees one at a time), and its subtasks.

    A subtask (:mod:`.subtasks`) runs here as any task does, as a frame on top of its
    caller's: its feedback goes up to every caller, and its recording (a handoff) is
    nested on top of its caller's.

    :param store: The cache.
    :param replayer: Walks the tree.
    :param recorder: Records the agent's proxied calls.
    :param agent: Client of the agent's ExecuteTask server, or None.
    :param agent_name: The agent's action name, for messages.
    :param agent_timeout: Max seconds the agent may take.
    :param sink: Publishes events.
    :param logger: The node's logger.
    :param health: Notes failed and successful store writes (default: a fresh one).
    :param agreement: A tool's shadow agreement (what a shadow run calls the same goal).
    :param stack: The running tasks (default: a fresh one).
    :param held: Returns why nothing may command the robot now ('' : it may).
    :param proxies: The proxies by server: their goals in flight are stopped when the cache
        ends the agent's goal.
    :param stop_rule: The stops' limits.
    """

    def __init__(
        self,
        *,
        store: Store,
        replayer: Replayer,
        recorder: Recorder,
        agent: ActionClient[Any, Any, Any] | None,
        agent_name: str,
        agent_timeout: float,
        sink: EventSink,
        logger: RcutilsLogger,
        health: StoreHealth | None = None,
        agreement: Callable[[str], float] = lambda tool: DEFAULT_AGREEMENT,
        stack: TaskStack | None = None,
        held: Callable[[], str] = lambda: '',
        proxies: Mapping[str, ToolProxy] | None = None,
        stop_rule: StopRule = StopRule(),
    ) -> None:
        self._store = store
        self._replayer = replayer
        self._recorder = recorder
        self._agent = agent
        self._agent_name = agent_name
        self._agent_timeout = agent_timeout
        self._sink = sink
        self._log = logger
        self._health = health if health is not None else StoreHealth(logger=logger)
        self.steps_replayed_total = 0
        self._agreement = agreement
        self.stack = stack if stack is not None else TaskStack()
        self._proxies = dict(proxies or {})
        self._held = held
        self._stop_rule = stop_rule

    def run(self, goal_handle: GoalHandle, *, mode: CacheMode, cancel: CancelToken,
            frame: Frame | None = None) -> Any:
        """
        Execute the goal; set its terminal state and return the result.

        :param frame: The subtask this goal is, entered by the caller (None: the task sent
            to ``~/execute_task``, entered here).
        """
        if frame is not None:
            return self._run(goal_handle, mode=mode, cancel=cancel, frame=frame)
        held = self._held()
        if held:  # nobody commands a robot that did not stop
            return self._fail(goal_handle, ExecuteTask.Result(), goal_handle.request.task, held)
        frame = self.stack.root(goal_handle.request.task.strip(), cancel,
                                goal_handle.publish_feedback)
        try:
            return self._run(goal_handle, mode=mode, cancel=cancel, frame=frame)
        finally:
            self.stack.leave(frame)

    def _run(self, goal_handle: GoalHandle, *, mode: CacheMode, cancel: CancelToken,
             frame: Frame) -> Any:
        goal = goal_handle.request
        result = ExecuteTask.Result()
        task = goal.task.strip()
        try:
            if not task:
                raise ValueError('task name is empty')
            literal = canonical_params(goal.params_json)
        except ValueError as err:
            return self._fail(goal_handle, result, task, f'bad goal: {err}')
        params = json.loads(literal)
        trees = self._replayer.trees
        variant = trees.variant_for(task, params, literal)
        if mode is CacheMode.OFF:
            return self._handoff(
                goal_handle, result, frame=frame, cancel=cancel, task=task, variant=variant,
                literal=literal, resume=_FROM_START, record=False,
            )
        if mode is CacheMode.SHADOW:
            return self._handoff(
                goal_handle, result, frame=frame, cancel=cancel, task=task, variant=variant,
                literal=literal,
                resume=Resume(0, 'shadow mode: the agent does the task, the cache predicts'),
                record=True, shadow=trees.view(task, variant), params=params)
        walk = None
        if mode is not CacheMode.RECORD_ONLY:
            view = trees.view(task, variant)
            trust = self._trusted(view)
            if trust.nodes is not None and not trust.nodes and view.trajectories:
                reason = f'gate: {trust.reason()}'
                if mode is CacheMode.REPLAY_ONLY:
                    self._count(task, hit=False)
                    return self._fail(goal_handle, result, task, f'replay_only: {reason}')
                return self._handoff(
                    goal_handle, result, frame=frame, cancel=cancel, task=task, variant=variant,
                    literal=literal, resume=Resume(0, f'{reason}; the task runs in shadow',
                                                   kind=FailureKind.NO_CANDIDATE),
                    record=True, shadow=view, params=params)
            reporter = EventReporter(task=task, sink=self._sink,
                                     feedback=partial(_replay_feedback, frame))
            walk = self._replayer.walk(tree=view, reporter=reporter, cancel=cancel,
                                       params=params, trust=trust)
            reporter.flush()
            if walk.stepped_back:
                self._sink(kind=CacheEvent.STEPPED_BACK, task=task, step=walk.failed_step,
                           trajectory_id=walk.on_trajectory, detail=walk.stepped_back)
            self.steps_replayed_total += walk.steps_replayed
            result.steps_replayed = walk.steps_replayed
            result.substituted = list(reporter.messages)
            if walk.kind is FailureKind.CANCELED:
                _end_canceled(goal_handle)
                result.message = f'canceled at step {walk.resume.step}'
                return result
            if walk.kind is FailureKind.NOT_STOPPED:  # nobody is handed a moving robot
                frame.robot_not_stopped(walk.reason)
                self._count(task, hit=False)
                return self._fail(goal_handle, result, task,
                                  f'{walk.reason} (the agent was not asked)')
            if walk.complete:
                unsaved = walk.unsaved or self._count(task, hit=True)
                helped = ' (the agent did part of a subtask)' if frame.asked else ''
                self._sink(
                    kind=CacheEvent.HIT, task=task, step=-1, trajectory_id=walk.trajectory_id,
                    detail=f'replayed {walk.steps_replayed} steps{helped}',
                )
                goal_handle.succeed()
                result.success = True
                result.cache_hit = not frame.asked
                result.steps_by_agent = frame.agent_steps
                result.trajectory_id = walk.trajectory_id
                result.message = (f'replayed {walk.steps_replayed} steps{helped}' if frame.asked
                                  else f'cache hit: replayed {walk.steps_replayed} steps')
                if reporter.substitutions:
                    result.message += f', {len(reporter.substitutions)} goal fields rebound'
                result.message += self._not_stored(task, unsaved)
                return result
            if mode is CacheMode.REPLAY_ONLY:
                self._count(task, hit=False)
                if walk.steps_replayed == 0 and walk.kind is not None and walk.kind.at_start:
                    self._sink(kind=CacheEvent.MISS, task=task, step=-1, detail=walk.reason)
                return self._fail(
                    goal_handle, result, task,
                    f'replay_only: {walk.reason} (the agent is not called in replay_only mode)',
                )
        # A miss in a tree whose gate holds some trajectories back (not learned long enough,
        # not approved, stepped back): the agent's run is compared with them, so a held branch
        # earns its shadow runs while a trusted sibling replays elsewhere.
        held = walk is not None and walk.steps_replayed == 0 and bool(trust.reasons)
        return self._handoff(
            goal_handle, result, frame=frame, cancel=cancel, task=task, variant=variant,
            literal=literal, resume=walk.resume if walk is not None else _FROM_START, record=True,
            shadow=view if held else None, params=params,
        )

    def _trusted(self, view: TreeView) -> Trusted:
        """Return what the gate lets replay in ``view`` (the Replayer's gate, as every path)."""
        return self._replayer.trusted(view)

    def _shadowing(self, frame: Frame, view: TreeView,
                   params: dict[str, Any]) -> ShadowReporter:
        """Return the reporter that says each recorded step's verdict (the recording observer)."""
        return ShadowReporter(
            run=self._replayer.shadow(tree=view, params=params, agreement=self._agreement),
            view=view, sink=self._sink, feedback=partial(_shadow_feedback, frame),
            logger=self._log)

    def _shadow(self, reporter: ShadowReporter, view: TreeView, session: Session) -> str:
        """Say the verdicts not said yet, count the run; return the result's summary."""
        self._recorder.settle()  # calls seen after the agent's answer (a tap's) are steps too
        with session.lock:
            steps = list(session.recording.steps)
        try:
            found = reporter.finish(steps)
        except MuscleMemError as err:
            self._log.error(f"task '{view.task}': shadow comparison failed: {err}")
            return f'shadow: not compared ({err})'
        trajectory_id, agreed = followed(found, view.trajectories)
        bindings = [(s.node_id, field, ok) for s in found if s.node_id is not None
                    for field, ok in s.bindings]
        if trajectory_id or bindings:
            self._health.bookkeep('shadow counts', partial(
                self._store.note_shadow, task=view.task, trajectory_id=trajectory_id,
                agreed=agreed, bindings=bindings))
        return summary(found)

    def _bindings_of(self, info: TrajectoryInfo) -> str:
        """Return what a learned trajectory binds, for its event ('' when unknown)."""
        try:
            plans = self._replayer.trees.plans(info.task, info.variant)
        except MuscleMemError:  # the event is still worth sending without them
            return ''
        return describe_bindings(info, plans)

    def _count(self, task: str, *, hit: bool) -> str:
        """Count a hit or a miss; return '' or why it could not be stored."""
        return self._health.bookkeep(
            'hit count' if hit else 'miss count',
            partial(self._store.note_outcome, task=task, hit=hit))[1]

    def _not_stored(self, task: str, error: str) -> str:
        """Report a write the task could not make: an ERROR event; return the message suffix."""
        if not error:
            return ''
        self._sink(kind=CacheEvent.ERROR, task=task, step=-1, detail=f'not stored: {error}')
        return f' (not stored: {error})'

    def _fail(self, goal_handle: GoalHandle, result: Any, task: str, message: str) -> Any:
        self._sink(kind=CacheEvent.ERROR, task=task, step=-1, detail=message)
        self._log.warning(f"task '{task}': {message}")
        goal_handle.abort()
        result.success = False
        result.message = message
        return result

    def _handoff(
        self, goal_handle: GoalHandle, result: Any, *, frame: Frame, cancel: CancelToken,
        task: str, variant: str, literal: str, resume: Resume, record: bool,
        shadow: TreeView | None = None, params: dict[str, Any] | None = None,
    ) -> Any:
        goal = goal_handle.request
        reason = resume.reason
        unsaved = ''
        if record:
            unsaved = self._count(task, hit=False)
            if resume.kind is not None and resume.kind.at_start and resume.steps_done == 0:
                self._sink(kind=CacheEvent.MISS, task=task, step=-1, detail=reason)
            self._sink(kind=CacheEvent.HANDOFF, task=task, step=resume.step, detail=reason or
                       'record_only: the agent performs the task')
        agent = self._agent
        if agent is None:
            return self._fail(goal_handle, result, task, (f'{reason}; ' if reason else '') +
                              'no agent configured (agent_action is empty)')
        if not agent.server_is_ready() and not agent.wait_for_server(timeout_sec=_AGENT_WAIT):
            return self._fail(goal_handle, result, task, (f'{reason}; ' if reason else '') +
                              f'agent {self._agent_name} is not available')
        session = None
        shadowing = (self._shadowing(frame, shadow, params or {})
                     if shadow is not None else None)
        if record:
            try:
                session = self._recorder.start(
                    task=task, params_json=literal, variant=variant, parent=resume.last_node,
                    manual=False, observer=shadowing.observe if shadowing else None,
                    nested=frame.depth > 0,
                )
            except RecordingBusyError as err:
                return self._fail(goal_handle, result, task, f'cannot record: {err}')
            except MuscleMemError as err:  # the agent still does the task; nothing is learned
                unsaved = f"the agent's steps: {self._health.failed('the recording', err)}"
            else:
                self._health.succeeded()
        agent_goal = resume_goal(task=task, params_json=goal.params_json,
                                 resume=resume) if record else goal

        def feedback(msg: Any) -> None:
            fb = msg.feedback
            frame.feedback(ExecuteTask.Feedback(
                mode=ExecuteTask.Feedback.MODE_AGENT, step=fb.step, total=-1, detail=fb.detail,
            ))
        frame.ask_agent()
        frame.agent, frame.session = True, session  # the agent may call subtasks meanwhile
        try:
            outcome = call_agent(agent, agent_goal, feedback=feedback, cancel=cancel,
                                 timeout=self._agent_timeout, end_goals=self._end_goals)
            if outcome.stops is not None:  # the cache ended it: its subtasks end first
                self._subtasks_ended(frame)
        finally:
            frame.agent, frame.session = False, None
        agent_result = outcome.result
        if agent_result is None or not agent_result.success:
            if session is not None:
                self._health.bookkeep('the discarded recording',
                                      partial(self._recorder.finish, save=False))
            message = outcome.failure or (agent_result.message if agent_result
                                          else 'agent failed')
            stops = outcome.stops
            own = stops is not None and not stops.stopped
            if stops is not None and own:
                frame.robot_not_stopped(stops.reason)
            if frame.not_stopped:  # its goals, or a subtask's replay, could not stop the robot
                where = '' if own else 'in a subtask; '
                return self._fail(goal_handle, result, task,
                                  f'{frame.not_stopped} ({where}{outcome.said()})')
            if cancel.cancelled:
                _end_canceled(goal_handle)
                result.message = ('canceled while the agent was in control: '
                                  f'{outcome.said() or message}')
                return result
            return self._fail(goal_handle, result, task, '; '.join(filter(None, (
                f'agent failed: {message}', outcome.said()))))
        result.success = True
        result.cache_hit = False
        result.steps_replayed = resume.steps_done
        result.message = agent_result.message or 'done by the agent'
        if session is None:
            result.steps_by_agent = agent_result.steps_by_agent
            frame.agent_did(result.steps_by_agent)
            if not record:
                result.trajectory_id = agent_result.trajectory_id
            result.message += self._not_stored(task, unsaved)
            goal_handle.succeed()
            return result
        if shadowing is not None and shadow is not None:
            result.message += '; ' + self._shadow(shadowing, shadow, session)
        try:
            ended, info = self._recorder.finish(save=True, filer=self._replayer.file)
        except MuscleMemError as err:
            self._health.failed('the learned steps', err)
            self._log.error(f"task '{task}': agent succeeded but its steps were not stored: {err}")
            result.message += self._not_stored(task, "the agent's steps: " + '; '.join(
                text for text in (str(err), unsaved) if text))
            goal_handle.succeed()
            return result
        self._health.succeeded()
        result.message += self._not_stored(task, unsaved)
        result.steps_by_agent = ended.steps if ended is not None else 0
        frame.agent_did(result.steps_by_agent)
        if info is not None:
            result.trajectory_id = info.id
            self._sink(
                kind=CacheEvent.BRANCH_LEARNED, task=task, step=resume.step,
                trajectory_id=info.id,
                detail=f'learned {result.steps_by_agent} steps from step {resume.step}'
                + self._bindings_of(info),
            )
        goal_handle.succeed()
        return result

    def _end_goals(self) -> InFlight:
        """Stop every goal in flight through the proxies; return once each stop is over."""
        return stop_in_flight(self._proxies.values(), self._stop_rule)

    def _subtasks_ended(self, frame: Frame) -> None:
        """Wait until every subtask above ``frame`` ended (each bounded by its own stops)."""
        deadline = time.monotonic() + stop_limit(self._stop_rule) + 2 * CANCEL_GRACE
        while self.stack.top is not frame and self.stack.top is not None \
                and time.monotonic() < deadline:
            time.sleep(0.01)
