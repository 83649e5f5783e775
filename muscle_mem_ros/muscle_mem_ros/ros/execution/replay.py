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
The node's side of the walk: its tree read once, sensors judge, tool proxies execute.

The walk itself and its rules are :mod:`muscle_mem_ros.replay.walk` (shared with the
Python ``Engine``). A run reads its tree once (:meth:`...replay.treeview.Trees.view`); each
walk gets its ``Judge``, a :class:`~.judge.WalkJudge` (everything that judges a
candidate on the node is :mod:`.judge`), and its ``Executor``, a :class:`ProxyExecutor`:
a chosen step's stored payload is sent to the real server (byte-identical CDR, bound
fields set) and the result awaited with a per-step timeout.

Every walk and every dry run is gated: the Replayer holds the node's
``replay_requires`` and asks :func:`muscle_mem_ros.replay.gates.gate_tree` what it lets
replay, unless the caller passes the verdict it already asked for. A learned step
the gate holds back is never a candidate, so no path through here (ExecuteTask, the
Replay service, its dry run) sends it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
import logging
import math
import threading
import time
from typing import Any

from muscle_mem_ros.bindings.rules import (
    Declared, DEFAULT_MAX_SHIFT, element_tolerances, sensor_sources, Substitution,
)
from muscle_mem_ros.body import Body
from muscle_mem_ros.checks.banding import band_tolerances
from muscle_mem_ros.errors import MuscleMemError
from muscle_mem_ros.records import (
    CheckFailure, Node, ReplayBook, ReplayOutcome, SensorSpec, Step, StepStatus, ToolKind,
)
from muscle_mem_ros.replay.booking import booked, outcome_of, StepBack
from muscle_mem_ros.replay.gates import Gate, gate_tree, Trusted
from muscle_mem_ros.replay.shadow import ShadowRun
from muscle_mem_ros.replay.subtasks import subtask_call, SubtaskCall
from muscle_mem_ros.replay.treeview import Trees, TreeView
from muscle_mem_ros.replay.walk import (
    candidates_at, choose, locate, Miss, Reporter, walk, WalkResult,
)
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.ros.capture.forwarding import CallOutcome, ToolProxy
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.execution.failedviews import FailedViews, WalkViews
from muscle_mem_ros.ros.execution.judge import describe_failure, SensorJudge, WalkJudge
from muscle_mem_ros.ros.execution.watch import make_watch, StepWatch
from muscle_mem_ros.ros.execution.watchticks import WatchTicks
from muscle_mem_ros.ros.node.health import StoreHealth
from muscle_mem_ros.ros.rclfix.sync import CancelToken
from muscle_mem_ros.store import Store
from rclpy.impl.rcutils_logger import RcutilsLogger

__all__ = ['DryRun', 'ProxyExecutor', 'Replayer']


def _only(children: Sequence[Node], visible: frozenset[int] | None) -> Sequence[Node]:
    """Return the children among ``visible`` learned steps (None: all, as they are)."""
    return children if visible is None else [c for c in children if c.id in visible]


@dataclass(frozen=True)
class DryRun:
    """Would the first step replay now, and if not why."""

    would_replay: bool
    node: Node | None
    reason: str
    failure: CheckFailure | None = None
    trajectory_id: int = 0
    """The trajectory the first step belongs to (see replay.walk); 0 if none."""


Say = Callable[[str], None]
"""Told at once what happens while a step's goal is stopped."""
Send = Callable[[Node, CancelToken, Mapping[str, Any] | None, StepWatch | None, Say | None],
                CallOutcome]
"""Sends a node's payload: ``send(node, cancel, fields, watch, say)``."""
RunSubtask = Callable[[str, SubtaskCall, CancelToken], CallOutcome]
"""Runs a subtask step of a task through the cache: ``run(parent task, call, cancel)``."""


class ProxyExecutor:
    """
    The Executor of one walk: a chosen step sent through its tool, its bound fields set.

    :param judge: The walk's judge (what its bindings send, and that a step ran).
    :param send: Sends a node's payload with fields set and its watch (:data:`Send`).
    :param on_substituted: Called with a step's substitutions before it is sent.
    :param watching: Returns the watch of a step about to be sent, or None (not watched).
    :param on_watched: Called with a watched step's (watched, not watched) element labels.
    :param task: The task walked (a subtask step's caller).
    :param subtasks: Runs a subtask step (None: such a step fails, saying so).
    :param reporter: Told what happens while a step's goal is stopped (``stopping``) and
        how it was (``stopped``), when it has those methods (the node's EventReporter).
    :param views: The walk's failed views: what a watch saw as it tripped is held then (and
        kept when the walk stops on it, :meth:`Replayer.walk`); None: not held.
    :param ticks: Publishes each reading a step's watch judges (None: not published).
    """

    def __init__(self, *, judge: WalkJudge, send: Send,
                 on_substituted: Callable[[int, Sequence[Substitution]], None],
                 watching: Callable[[Node, CancelToken], StepWatch | None] | None = None,
                 on_watched: Callable[[int, Sequence[str], Sequence[str]], None] | None = None,
                 task: str = '', subtasks: RunSubtask | None = None,
                 reporter: Any = None, views: WalkViews | None = None,
                 ticks: WatchTicks | None = None) -> None:
        self._views = views
        self._ticks = ticks
        self._stopping = getattr(reporter, 'stopping', None)
        self._stopped = getattr(reporter, 'stopped', None)
        self._task = task
        self._subtasks = subtasks
        self._bindings = judge.bindings
        self._send = send
        self._on_substituted = on_substituted
        self._watching = watching
        self._on_watched = on_watched

    def execute(self, node: Node, step: int, cancel: CancelToken) -> CallOutcome:
        """Send the step with its bound fields set and its watch; then move the shift."""
        bound = self._bindings.sending(node)
        if bound is not None and bound.substitutions:
            self._on_substituted(step, bound.substitutions)
        if node.step.kind is ToolKind.SUBTASK:
            out = self._subtask(node, bound.values if bound is not None else None, cancel)
            if out.status is StepStatus.SUCCEEDED:
                self._bindings.ran(node)
            return out
        watch = self._watching(node, cancel) if self._watching is not None else None
        if watch is not None and self._on_watched is not None:
            self._on_watched(step, watch.labels, watch.unwatched)
        if watch is not None and self._ticks is not None:
            self._ticks.attach(watch, task=self._task, step=step, tool=node.step.tool)
        views = self._views
        if watch is not None and views is not None:
            watch.token.on_cancel(lambda: views.tripped(node, watch.failure))
        say = partial(self._stopping, step) if self._stopping is not None else None
        out = self._send(node, cancel, bound.values if bound is not None and bound.values
                         else None, watch, say)
        if self._stopped is not None and (out.stop is not None or math.isfinite(out.failed_at)):
            self._stopped(step, out.failed_at, out.stop)
        if out.status is StepStatus.SUCCEEDED:
            self._bindings.ran(node)
        return out

    def _subtask(self, node: Node, fields: Mapping[str, Any] | None,
                 cancel: CancelToken) -> CallOutcome:
        """Run a subtask step through the cache (its bound parameters set)."""
        now = time.monotonic()
        try:
            call = subtask_call(node.step, fields)
        except MuscleMemError as err:
            return CallOutcome(StepStatus.FAILED, str(err), now, now)
        if self._subtasks is None:
            return CallOutcome(StepStatus.FAILED, f"subtask '{call.task}': subtasks cannot "
                               'run here', now, now)
        return self._subtasks(self._task, call, cancel)


class Replayer:
    """
    Replay learned trajectories through the tool proxies' clients.

    :param store: The cache.
    :param hub: Sensor capture.
    :param tools: Proxies by real server name (``Step.tool``).
    :param sensors: Tolerance specs of the configured sensors (may be empty).
    :param allow_unchecked_replay: Replay steps recorded without a pre snapshot.
    :param step_timeout: Seconds one replayed step may take.
    :param post_timeout: Max seconds to wait for data newer than a step's end.
    :param sensor_startup_timeout: Seconds from now (the node's start) during which a walk
        waits for sensors that have not sent their first message yet.
    :param health: Notes failed and successful bookkeeping writes (default: a fresh one
        logging to this module's logger).
    :param declared: Bindings from the params file.
    :param infer_bindings: Infer bindings from the recordings.
    :param binding_max_shift: ``max_shift`` of inferred numeric bindings.
    :param gate: ``replay_requires``: what a learned trajectory must have earned before
        any walk or dry run here replays it.
    :param step_back: When a trajectory whose replays fail is held (every walk's outcome is
        booked against its trajectory, :mod:`muscle_mem_ros.replay.booking`).
    :param agreement: A tool's agreement: an agent's run whose goals are within it of a
        learned branch's (and whose checks pass) folds into that branch when filed.
    :param watched: Names of the sensors a replayed action goal is watched on while it runs
        (empty: no goal is watched; the tools' proxies need a sampler for it).
    :param watch_scale: Factor on every tolerance while a step is watched.
    :param own: Names of the sensors of the robot's own state: a watch that trips blames
        the others while these are on their path (:class:`~muscle_mem_ros.checks.tube.Tube`).
    :param watch_rate: Hz at which the sampler polls the sensors of a watched step.
    """

    def __init__(
        self,
        *,
        store: Store,
        hub: SensorHub,
        tools: Mapping[str, ToolProxy],
        sensors: Sequence[SensorSpec],
        allow_unchecked_replay: bool,
        step_timeout: float,
        post_timeout: float,
        sensor_startup_timeout: float = 0.0,
        health: StoreHealth | None = None,
        declared: Sequence[Declared] = (),
        infer_bindings: bool = True,
        binding_max_shift: float = DEFAULT_MAX_SHIFT,
        gate: Gate = Gate(),
        step_back: StepBack = StepBack(),
        agreement: Callable[[str], float] = lambda tool: 0.0,
        watched: frozenset[str] = frozenset(),
        watch_scale: float = 1.0,
        watch_rate: float = 40.0,
        own: frozenset[str] = frozenset(),
        body: Body | None = None,
    ) -> None:
        self._store = store
        self._specs = tuple(sensors)
        store.order_first_steps(band_tolerances(sensors))  # a restart reads few of them
        self._watched = watched
        self._own = own
        self._scale = watch_scale
        self._period = 1.0 / watch_rate
        self.gate = gate
        self.step_back = step_back
        self.agreement = agreement
        self.booked: dict[ReplayOutcome, int] = dict.fromkeys(ReplayOutcome, 0)
        """Replays booked since the node started, by outcome (``/diagnostics``)."""
        self._tools = dict(tools)
        self.sensing = SensorJudge(
            hub=hub, tools=self._tools, sensors=sensors,
            allow_unchecked_replay=allow_unchecked_replay, post_timeout=post_timeout,
            sensor_startup_timeout=sensor_startup_timeout)
        self.trees = Trees(store, declared=declared, infer=infer_bindings,
                           max_shift=binding_max_shift, tolerance=element_tolerances(sensors),
                           sources=sensor_sources(sensors), learned_with=repr(self._specs),
                           body=body)
        self.step_timeout = step_timeout
        self.subtasks: RunSubtask | None = None
        """Runs a subtask step (set by the node: :meth:`..subtasks.SubtaskServer.replay_step`)."""
        self.ticks: WatchTicks | None = None
        """Publishes each reading a replayed step's watch judges (set by the node: ``~/watch``)."""
        self._health = health if health is not None else StoreHealth(
            logger=logging.getLogger(__name__))
        self.failed_views = FailedViews(store=store, hub=hub, health=self._health)
        """Keeps what a camera saw when a check on it failed (:mod:`.failedviews`)."""

    def warm(self) -> int:
        """
        Read every tree's first steps and index them for matching, ahead of the first task.

        A persistent store reads lazily, and the matcher indexes a candidate set
        on first use: without this the first task after a start pays both (seconds
        for a tree with 100 000 first steps); the trees' bindings are learned too.
        Returns the number of first steps.
        """
        self._store.preload()
        count = 0
        for task, variant in sorted({(t.task, t.variant) for t in self._store.trajectories()}):
            count += self.sensing.warm(self._store.children(task=task, variant=variant,
                                                            parent=None))
            self.trees.plans(task, variant)
        self.trees.keep()
        return count

    def keep_learned(self, logger: RcutilsLogger) -> None:
        """
        Stop learning in the background; keep the trees' plans with the store (deactivate).

        The failed views still being made are kept first (a bounded wait).
        """
        self.failed_views.close()
        self.trees.close()
        try:
            kept = self.trees.keep()
        except MuscleMemError as err:  # a copy of what learning finds: the next start relearns
            logger.warning(f'store: could not keep the learned plans: {err}')
        else:
            if kept:
                logger.info(f'store: learned plans of {kept} tree(s) kept for the next start')

    def warm_in_background(self, *, logger: RcutilsLogger, name: str,
                           quiet: Callable[[], bool]) -> None:
        """
        Run :meth:`warm` in a daemon thread; log what it loaded, or why it could not.

        :param logger: The node's logger.
        :param name: The thread's name.
        :param quiet: Returns True when a failure is not worth a warning (the node is closing).
        """
        threading.Thread(target=self._warm_logged, args=(logger, quiet), name=name,
                         daemon=True).start()

    def _warm_logged(self, logger: RcutilsLogger, quiet: Callable[[], bool]) -> None:
        started = time.monotonic()
        try:
            count = self.warm()
        except Exception as err:  # closing, or a store problem the first task will report
            if not quiet():
                logger.warning(f'store: could not preload first steps: {err!r}')
            return
        took = time.monotonic() - started
        logger.info(f'store: {count} first step(s) loaded and indexed in {took:.2f} s')

    def file(self, *, task: str, variant: str, params_json: str, parent: int | None,
             steps: Sequence[Step]) -> tuple[str, int | None, list[Step]]:
        """File a finished recording by its bindings (:meth:`...replay.treeview.Trees.file`)."""
        return self.trees.file(task=task, variant=variant, params_json=params_json,
                               parent=parent, steps=steps, check=self.sensing.check,
                               agreement=self.agreement)

    def trusted(self, tree: TreeView) -> Trusted:
        """Return what the gate lets replay in ``tree`` (:func:`...replay.gates.gate_tree`)."""
        return gate_tree(self.gate, self._store, tree)

    def dry_run(self, *, tree: TreeView, path: Sequence[int] | None = None,
                params: Mapping[str, Any] | None = None) -> DryRun:
        """
        Answer whether the first step would replay now (gate, bindings, checks); moves nothing.

        A first step the gate holds back does not replay: the answer is the gate's reason.
        """
        self.sensing.prepare()
        candidates = candidates_at(self._store, task=tree.task, variant=tree.variant,
                                   parent=None, depth=0, path=path)
        if not candidates:
            return DryRun(False, None,
                          f"nothing learned for task '{tree.task}' with these params")
        trust = self.trusted(tree)
        judge = self._judge(tree, params)
        judge.gate(trust.nodes, trust.held())
        verdict = judge.pick(candidates, 0)
        node = choose(verdict)
        if node is None:
            miss = verdict.miss or Miss(FailureKind.NO_CANDIDATE, 'nothing passes')
            return DryRun(False, None, miss.reason, miss.failure)
        trajectory_id, _ = locate([p for p in tree.paths(path) if p[2] not in trust.reasons],
                                  node)
        tool = self._tools.get(node.step.tool)
        if tool is not None and not tool.ready():
            return DryRun(False, node, f'server {tool.tool.server} is not available',
                          trajectory_id=trajectory_id)
        return DryRun(True, node, 'the first step passes its pre-check',
                      trajectory_id=trajectory_id)

    def walk(
        self,
        *,
        tree: TreeView,
        reporter: Reporter,
        cancel: CancelToken,
        path: Sequence[int] | None = None,
        params: Mapping[str, Any] | None = None,
        trust: Trusted | None = None,
    ) -> WalkResult:
        """
        Replay from the root as far as the checks allow (:func:`muscle_mem_ros.replay.walk.walk`).

        :param tree: The tree, as the run read it (:meth:`...replay.treeview.Trees.view`).
        :param reporter: Gets events and progress.
        :param cancel: Cancels the walk and the in-flight goal.
        :param path: Restrict to this root-to-leaf node path (Replay with a trajectory id).
        :param params: The run's parameters (bound fields take their values from them).
        :param trust: What the gate lets replay in ``tree``, when the caller asked already
            (default: :meth:`trusted` is asked now). A miss that only held-back steps would
            have passed says why they are held.
        :return: How it ended; ``unsaved`` says why the replay counters of a complete
            walk could not be stored.
        """
        views = self.failed_views.walk(tree.task)
        judge = self._judge(tree, params, views)
        trust = trust if trust is not None else self.trusted(tree)
        judge.gate(trust.nodes, trust.held())
        executor = ProxyExecutor(
            judge=judge, send=self.send,
            on_substituted=getattr(reporter, 'substituted', lambda step, subs: None),
            watching=partial(self.watch, judge) if self._watched else None,
            on_watched=getattr(reporter, 'watched', None), task=tree.task,
            subtasks=self.subtasks, reporter=reporter, views=views, ticks=self.ticks)
        result = walk(store=self._store, task=tree.task, variant=tree.variant, judge=judge,
                      executor=executor, reporter=reporter, cancel=cancel, path=path, tree=tree)
        if not result.complete:  # a pre-check's miss, a watch's trip: kept once the walk stops
            views.keep(result.failure)
        unsaved = ''
        if result.complete and result.trajectory_id:
            _, unsaved = self._health.bookkeep('replay counters', partial(
                self._store.note_replay, trajectory_id=result.trajectory_id))
        stepped, unbooked = self._book(tree.task, result)
        if unsaved or unbooked or stepped:
            result = replace(result, unsaved='; '.join(t for t in (unsaved, unbooked) if t),
                             stepped_back=stepped)
        return result

    def _book(self, task: str, result: WalkResult) -> tuple[str, str]:
        """Book how a walk ended against its trajectory; return (why it stepped back, error)."""
        found = outcome_of(complete=result.complete, trajectory_id=result.trajectory_id,
                           on_trajectory=result.on_trajectory, kind=result.kind)
        if found is None:
            return '', ''
        trajectory_id, outcome = found
        self.booked[outcome] += 1
        now = time.time()

        def booker(book: ReplayBook, agreed: int) -> ReplayBook:
            return booked(book, outcome, self.step_back, now=now, agreed=agreed)
        book, unsaved = self._health.bookkeep('replay outcome', partial(
            self._store.book_replay, task=task, trajectory_id=trajectory_id, booker=booker))
        if book is not None and book.stepped_back == now:
            return f'trajectory {trajectory_id} stepped back: {book.why}', unsaved
        return '', unsaved

    def _judge(self, tree: TreeView, params: Mapping[str, Any] | None,
               views: WalkViews | None = None) -> WalkJudge:
        """Return the judge of one walk of a tree (its bindings, the run's params, its views)."""
        return WalkJudge(sensors=self.sensing, plans=tree.plans, params=params or {},
                         tolerance=self.trees.tolerance,
                         on_failed=views.judged if views is not None else None)

    def shadow(self, *, tree: TreeView, params: Mapping[str, Any],
               agreement: Callable[[str], float]) -> ShadowRun:
        """
        Start predicting an agent's steps as a walk of ``tree`` would have.

        :return: The comparison, to which each step is added as it is recorded
            (:class:`...replay.shadow.ShadowRun`).
        """
        mine = tree.nodes  # another body's steps are not predicted
        return ShadowRun(params=params, plans=tree.plans,
                         children=lambda at: _only(self._store.children(
                             task=tree.task, variant=tree.variant, parent=at), mine),
                         check=self.sensing.check, tolerance=self.trees.tolerance,
                         agreement=agreement, describe=describe_failure)

    def watch(self, judge: WalkJudge, node: Node, cancel: CancelToken) -> StepWatch | None:
        """Return the watch of ``node``, about to be sent in ``judge``'s walk (None: unwatched)."""
        watch = make_watch(node, sensors=self._specs, watch=self._watched,
                           during=judge.bindings.during(node), scale=self._scale,
                           cancel=cancel, period=self._period, own=self._own)
        if watch is not None:
            hub = self.sensing.hub
            watch.why = lambda name: hub.problems().get(name, '')
        return watch

    def send(self, node: Node, cancel: CancelToken,
             fields: Mapping[str, Any] | None = None,
             watch: StepWatch | None = None, say: Say | None = None) -> CallOutcome:
        """Send ``node``'s payload, with ``fields`` set, and wait (at most ``step_timeout``)."""
        return self._tools[node.step.tool].call(node.step.payload, timeout=self.step_timeout,
                                                cancel=cancel, fields=fields, watch=watch,
                                                say=say)
