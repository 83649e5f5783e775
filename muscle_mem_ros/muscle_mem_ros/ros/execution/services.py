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
The node's services: Replay, ListTasks, GetTrajectory, Forget, Start/StopRecording.

Every handler validates its request first and answers ``success=false`` with
a message for a bad one (empty task name, invalid params JSON, unknown task or
trajectory): nothing is stored or removed and the node keeps running. Replay,
Forget and StartRecording take the node's one-activity guard and refuse while
a task, a replay or a manual recording is running.

Replay never calls the agent. With a trajectory id, only that trajectory's
path is followed and its own params are used (the request's params must then
be empty or equal). ``dry_run`` checks only whether the first step would
replay now (its pre-check against the current sensors, and the server being
available) and moves nothing; it answers the trajectory that first step is on
(:mod:`muscle_mem_ros.replay.walk` says which, when several share it). Replay and its dry
run go through the same gate as ExecuteTask (``replay_requires``, asked of
:meth:`.replay.Replayer.trusted`): a held-back trajectory is not replayed and the
answer is the gate's reason (``gate: trajectory 7 is not approved ...``); with a
trajectory id that the gate holds back, nothing moves at all. With ``cache_mode``
off, Replay and StartRecording refuse (the cache is disabled); in ``shadow`` Replay
refuses too (the agent does every task, the cache replays nothing). Forget with
``abandoned_recordings`` deletes the incomplete recordings of stopped processes (never
one a live process is making) and touches nothing learned.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
import json
from typing import Any

from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.errors import MuscleMemError, UnknownTrajectoryError
from muscle_mem_ros.records import CheckFailure
from muscle_mem_ros.replay.gates import approve, covered
from muscle_mem_ros.ros.capture.recorder import Recorder
from muscle_mem_ros.ros.execution.events import EventReporter, EventSink
from muscle_mem_ros.ros.execution.replay import Replayer
from muscle_mem_ros.ros.messages.convert import canonical_params, task_info, trajectory_info
from muscle_mem_ros.ros.node.nodeconfig import CacheMode
from muscle_mem_ros.ros.rclfix.sync import CancelToken, TaskGuard
from muscle_mem_ros.store import Store
from rclpy.impl.rcutils_logger import RcutilsLogger

__all__ = ['CacheServices']


def _store_error(response: Any, err: MuscleMemError, trajectory_id: int | None = None) -> Any:
    """
    Answer a request whose store call raised ``err`` (``success`` stays false).

    :param response: The answer.
    :param err: What the store raised.
    :param trajectory_id: The trajectory the request named, if it names one: the store not
        knowing it is answered as such.
    :return: ``response``.
    """
    if trajectory_id is not None and isinstance(err, UnknownTrajectoryError):
        response.message = f'unknown trajectory {trajectory_id}'
    else:
        response.message = f'store error: {err}'
    return response


def _fill_failure(response: Any, failure: CheckFailure | None) -> None:
    if failure is not None:
        response.failed_sensor = failure.sensor
        response.deviation = float(failure.deviation)
        response.tolerance = float(failure.tolerance)


class CacheServices:
    """
    Handlers for the node's services (registered by the node).

    :param store: The cache.
    :param replayer: Walks the tree.
    :param recorder: The recording in progress.
    :param guard: One activity at a time.
    :param sink: Publishes events (same signature as the task runner's).
    :param logger: The node's logger.
    :param mode: Returns the current cache mode (Replay and StartRecording refuse in ``off``).
    :param held: Returns why nothing may command the robot now ('' : it may); Replay
        refuses with it (a robot that did not stop, :mod:`.standstill`).
    """

    def __init__(
        self,
        *,
        store: Store,
        replayer: Replayer,
        recorder: Recorder,
        guard: TaskGuard,
        sink: EventSink,
        logger: RcutilsLogger,
        mode: Callable[[], CacheMode] = lambda: CacheMode.LEARN,
        held: Callable[[], str] = lambda: '',
    ) -> None:
        self._store = store
        self._replayer = replayer
        self._recorder = recorder
        self._guard = guard
        self._sink = sink
        self._log = logger
        self._mode = mode
        self._held = held
        self.cancel: CancelToken | None = None

    def _known(self, task: str) -> bool:
        return any(t.name == task for t in self._store.tasks()) or bool(
            self._store.trees(task=task))

    def _wrong_target(self, task: str, trajectory_id: int) -> str | None:
        """
        Say why ``task`` (or its trajectory ``trajectory_id``, if not 0) cannot be acted on.

        :return: The answer's message, or None when the store knows them as asked.
        :raises UnknownTrajectoryError: No trajectory ``trajectory_id``.
        """
        if trajectory_id:
            info = self._store.trajectory(trajectory_id)
            if info.task != task:
                return f'trajectory {info.id} belongs to task {info.task!r}'
        elif not self._known(task):
            return f"unknown task '{task}'"
        return None

    def replay(self, request: Any, response: Any) -> Any:
        """Replay a learned trajectory (or dry-run its first step)."""
        response.failed_step = -1
        task = request.task.strip()
        try:
            if not task:
                raise ValueError('task name is empty')
            literal = canonical_params(request.params_json)
            params = json.loads(literal)
            variant = self._replayer.trees.variant_for(task, params, literal)
            path = None
            if request.trajectory_id:
                info = self._store.trajectory(request.trajectory_id)
                if info.task != task:
                    raise ValueError(f'trajectory {info.id} belongs to task {info.task!r}')
                if not request.params_json.strip():
                    params = json.loads(info.params_json or '{}')
                elif variant != info.variant:
                    raise ValueError(f'trajectory {info.id} was learned with params '
                                     f'{info.params_json}, not {literal}')
                variant = info.variant
                path = list(info.node_ids)
            elif not self._store.trees(task=task):
                raise ValueError(f"unknown task '{task}': nothing learned")
        except UnknownTrajectoryError:
            response.message = f'bad request: unknown trajectory {request.trajectory_id}'
            return response
        except ValueError as err:
            response.message = f'bad request: {err}'
            return response
        response.trajectory_id = request.trajectory_id
        mode = self._mode()
        if mode is CacheMode.OFF:
            response.message = 'cache_mode is off: nothing is replayed'
            return response
        if mode is CacheMode.SHADOW:
            response.failed_step = 0
            response.message = ('cache_mode is shadow: nothing is replayed (the agent does '
                                'every task and the cache only predicts)')
            return response
        held = self._held()
        if held:  # nobody commands a robot that did not stop
            response.failed_step = 0
            response.message = held
            return response
        try:
            view = self._replayer.trees.view(task, variant)
            trust = self._replayer.trusted(view)
        except MuscleMemError as err:
            response.message = f'replay error: {err}'
            return response
        if request.trajectory_id in trust.reasons:  # nothing of it moves, not even a prefix
            response.failed_step = 0
            response.message = f'gate: {trust.reasons[request.trajectory_id]}'
            return response
        if request.dry_run:
            dry = self._replayer.dry_run(tree=view, path=path, params=params)
            response.success = dry.would_replay
            response.trajectory_id = dry.trajectory_id or request.trajectory_id
            response.failed_step = -1 if dry.would_replay else 0
            response.message = dry.reason
            _fill_failure(response, dry.failure)
            return response
        with self._guard.held(f"replay of task '{task}'") as holder:
            if holder is not None:
                response.message = f'busy: {holder} is running (one task at a time)'
                return response
            self.cancel = token = CancelToken()
            reporter = EventReporter(task=task, sink=self._sink)
            try:
                walk = self._replayer.walk(
                    tree=view, path=path, cancel=token, params=params, trust=trust,
                    reporter=reporter,
                )
                reporter.flush()
            except MuscleMemError as err:
                response.message = f'replay error: {err}'
                return response
            finally:
                self.cancel = None
        if walk.stepped_back:
            self._sink(kind=CacheEvent.STEPPED_BACK, task=task, step=walk.failed_step,
                       trajectory_id=walk.on_trajectory, detail=walk.stepped_back)
        response.steps_executed = walk.steps_replayed
        response.success = walk.complete
        if response.success:
            response.trajectory_id = walk.trajectory_id
            response.message = f'replayed {walk.steps_replayed} steps'
            self._sink(kind=CacheEvent.HIT, task=task, step=-1,
                       trajectory_id=walk.trajectory_id, detail=response.message)
            return response
        response.failed_step = walk.failed_step if walk.failed_step >= 0 else walk.resume.step
        response.message = walk.reason
        _fill_failure(response, walk.failure)
        return response

    def list_tasks(self, request: Any, response: Any) -> Any:
        """List tasks and their trajectories."""
        task = request.task.strip()
        try:
            stats = [s for s in self._store.tasks() if not task or s.name == task]
            if task and not stats:
                response.message = f"unknown task '{task}'"
                return response
            trajectories = self._store.trajectories(task=task or None)
            response.tasks = [task_info(s) for s in stats]
            trees = self._replayer.trees
            response.trajectories = [
                trajectory_info(t, self._store.path(t.id) if request.with_steps else None,
                                trees.plans(t.task, t.variant) if request.with_steps else None)
                for t in trajectories
            ]
        except MuscleMemError as err:
            return _store_error(response, err)
        response.success = True
        response.message = (
            f'{len(response.tasks)} tasks, {len(response.trajectories)} trajectories'
        )
        return response

    def get_trajectory(self, request: Any, response: Any) -> Any:
        """One trajectory with its steps."""
        try:
            info = self._store.trajectory(request.trajectory_id)
            plans = self._replayer.trees.plans(info.task, info.variant)
            response.trajectory = trajectory_info(info, self._store.path(info.id), plans)
        except MuscleMemError as err:
            return _store_error(response, err, request.trajectory_id)
        response.success = True
        response.message = f'{len(info.node_ids)} steps'
        return response

    def forget(self, request: Any, response: Any) -> Any:
        """Forget a task or one of its trajectories, or purge abandoned recordings."""
        task = request.task.strip()
        if request.abandoned_recordings:
            return self._purge_abandoned(request, response, task)
        if not task:
            response.message = 'bad request: task name is empty'
            return response
        with self._guard.held(f"forget of task '{task}'") as holder:
            if holder is not None:
                response.message = f'busy: {holder} is running'
                return response
            try:
                wrong = self._wrong_target(task, request.trajectory_id)
                if wrong is not None:
                    response.message = wrong
                    return response
                response.removed = self._store.forget(
                    task=task, trajectory_id=request.trajectory_id or None
                )
            except MuscleMemError as err:
                return _store_error(response, err, request.trajectory_id)
        response.success = True
        response.message = f'removed {response.removed} trajectories'
        return response

    def approve(self, request: Any, response: Any) -> Any:
        """
        Approve (or revoke) a task or one of its trajectories for replay.

        An approval covers the trajectories and inferred bindings the task has now, as this
        node learns them (:func:`muscle_mem_ros.replay.gates.approve`); the answer says which.
        """
        task = request.task.strip()
        who = request.who.strip()
        if not task:
            response.message = 'bad request: task name is empty'
            return response
        if not request.revoke and not who:
            response.message = 'bad request: who approves is required'
            return response
        try:
            wrong = self._wrong_target(task, request.trajectory_id)
            if wrong is not None:
                response.message = wrong
                return response
            what = (f'trajectory {request.trajectory_id} of task {task!r}'
                    if request.trajectory_id else f'task {task!r}')
            if request.revoke:
                if not self._store.revoke(task=task, trajectory_id=request.trajectory_id):
                    response.message = f'{what} was not approved'
                    return response
                response.message = f'revoked the approval of {what}'
            else:
                approval = approve(self._store, task=task, trajectory_id=request.trajectory_id,
                                   who=who, plans=partial(self._replayer.trees.plans, task))
                response.message = f'{what} approved by {who}: {covered(approval)}'
        except MuscleMemError as err:
            return _store_error(response, err, request.trajectory_id)
        response.success = True
        self._log.info(response.message)
        return response

    def _purge_abandoned(self, request: Any, response: Any, task: str) -> Any:
        """Delete every recording a stopped process left unfinished (live ones stay)."""
        if task or request.trajectory_id:
            response.message = ('bad request: abandoned_recordings purges recordings only; '
                                'leave task and trajectory_id empty')
            return response
        try:
            response.removed = self._store.purge_abandoned()
        except MuscleMemError as err:
            return _store_error(response, err)
        response.success = True
        response.message = f'purged {response.removed} abandoned recordings'
        return response

    def start_recording(self, request: Any, response: Any) -> Any:
        """Begin a manual recording (teach by teleop)."""
        task = request.task.strip()
        try:
            if not task:
                raise ValueError('task name is empty')
            variant = canonical_params(request.params_json)
        except ValueError as err:
            response.message = f'bad request: {err}'
            return response
        if self._mode() is CacheMode.OFF:
            response.message = 'cache_mode is off: nothing is recorded'
            return response
        holder = self._guard.claim(f"manual recording of task '{task}'")
        if holder is not None:
            response.message = f'busy: {holder} is running'
            return response
        try:
            self._recorder.start(task=task, params_json=variant, parent=None, manual=True)
        except Exception as err:
            self._guard.release()
            response.message = f'cannot record: {err}'
            return response
        self._sink(kind=CacheEvent.RECORDING_STARTED, task=task, step=-1,
                   detail='manual recording started')
        response.success = True
        response.message = f"recording task '{task}': send goals through the proxies"
        return response

    def stop_recording(self, request: Any, response: Any) -> Any:
        """End the manual recording: save it as a trajectory, or discard it."""
        session = self._recorder.active
        if session is None or not session.manual:
            response.message = 'no manual recording is active'
            return response
        try:
            ended, info = self._recorder.finish(save=request.save)
        except MuscleMemError as err:
            response.message = f'not stored: {err}'
            return response
        finally:
            self._guard.release()
        response.steps = ended.steps if ended is not None else 0
        response.trajectory_id = info.id if info is not None else 0
        response.success = True
        response.message = (f'saved {response.steps} steps as trajectory {response.trajectory_id}'
                            if info is not None else f'discarded {response.steps} steps')
        self._sink(kind=CacheEvent.RECORDING_STOPPED, task=session.task, step=-1,
                   trajectory_id=response.trajectory_id, detail=response.message)
        return response
