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
The node's side of the walk: sensor snapshots judge, tool proxies execute.

The walk itself and its rules are :mod:`muscle_mem_ros.walk` (shared with the
Python ``Engine``). Here: the matcher picks the best candidate whose recorded pre
snapshot matches a fresh snapshot (before the first step the walk waits for
sensor data received after the request, and, within ``sensor_startup_timeout``
of the node's start, for the first message of every sensor that has not sent
one yet, saying so in the feedback); its stored payload is sent to the real
server (byte-identical CDR) and the result awaited with a per-step timeout.
Then the post-check: once every sensor reported data received after the step
ended (at most ``post_check_timeout``), the recorded post snapshot is compared
with a fresh one.

Node specifics:

* Steps recorded without a pre snapshot (no sensors) are replayed only when
  ``allow_unchecked_replay`` is true; otherwise they never pass.
* Stale or missing sensor data fails a check (the core's ToleranceCheck).
* A step whose tool is not configured is never a candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
import json
import logging
import math
import threading
import time
from typing import Any

from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.bindings import (
    advance, bound_variant, Declared, DEFAULT_MAX_SHIFT, element_tolerances, explains,
    match_variant, Plan, Shift, Substitution,
)
from muscle_mem_ros.checks import ToleranceCheck
from muscle_mem_ros.errors import MuscleMemError
from muscle_mem_ros.learning import bound_params, follow, Learner
from muscle_mem_ros.matcher import Matcher
from muscle_mem_ros.records import CheckFailure, Node, SensorSpec, Snapshot, Step, TrajectoryInfo
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.ros.convert import substitution_msg
from muscle_mem_ros.ros.health import StoreHealth
from muscle_mem_ros.ros.proxy import CallOutcome, ToolProxy
from muscle_mem_ros.ros.retarget import BoundWalk
from muscle_mem_ros.ros.sensors import SensorHub
from muscle_mem_ros.ros.sync import CancelToken
from muscle_mem_ros.store import Store
from muscle_mem_ros.walk import (
    candidates_at, choose, locate, Miss, Reporter, StepEvent, trajectories_of, Verdict, walk,
    WalkResult,
)

__all__ = ['DryRun', 'EventReporter', 'Replayer', 'describe_failure']

BOUND_MARK = '"$bound":true'
"""How a bound parameter leaf appears in a canonical variant (a cheap pre-filter)."""

_EVENTS = {
    StepEvent.STEP_OK: CacheEvent.STEP_OK,
    StepEvent.CHECK_FAILED: CacheEvent.CHECK_FAILED,
    StepEvent.STEP_FAILED: CacheEvent.ERROR,
}


@dataclass(frozen=True)
class DryRun:
    """Would the first step replay now, and if not why."""

    would_replay: bool
    node: Node | None
    reason: str
    failure: CheckFailure | None = None
    trajectory_id: int = 0
    """The trajectory the first step belongs to (see :mod:`muscle_mem_ros.walk`); 0 if none."""


class EventReporter:
    """
    Publish a walk's events for one task as CacheEvents, and its progress as feedback.

    :param task: The task the events are about.
    :param sink: ``sink(kind=, task=, step=, trajectory_id=, detail=, failure=)``.
    :param feedback: Called with (step, total, detail) for progress, or None.
    """

    def __init__(self, *, task: str, sink: Callable[..., None],
                 feedback: Callable[..., None] | None = None) -> None:
        self._task = task
        self._sink = sink
        self._feedback = feedback
        self._total = -1
        self._pending: dict[int, list[Any]] = {}
        self.substitutions: list[Substitution] = []
        """Every substitution of the walk, in order (the ExecuteTask result lists them)."""

    def event(
        self, *, kind: StepEvent, step: int, trajectory_id: int = 0, detail: str = '',
        failure: CheckFailure | None = None,
    ) -> None:
        """Publish one CacheEvent; a bound step's STEP_OK carries its substitutions."""
        subs = self._pending.pop(step, []) if kind is StepEvent.STEP_OK else []
        if subs:
            detail += ' (' + ', '.join(s.describe() for s in subs) + ')'
        self._sink(kind=_EVENTS[kind], task=self._task, step=step,
                   trajectory_id=trajectory_id, detail=detail, failure=failure,
                   substituted=[substitution_msg(s) for s in subs])

    def progress(self, *, step: int, total: int, detail: str) -> None:
        """Publish feedback, when there is a channel for it."""
        self._total = total
        if self._feedback is not None:
            self._feedback(step, total, detail)

    def substituted(self, step: int, subs: Sequence[Substitution]) -> None:
        """Note a bound step's substitutions; feedback says them before the goal is sent."""
        self._pending[step] = list(subs)
        self.substitutions.extend(subs)
        if self._feedback is not None:
            self._feedback(step, self._total, f'step {step}: ' + ', '.join(
                s.describe() for s in subs), [substitution_msg(s) for s in subs])


def describe_failure(failure: CheckFailure) -> str:
    """Render a check failure: 'sensor object deviates 0.081 (tolerance 0.02)'."""
    if failure.kind is FailureKind.OUT_OF_TOLERANCE:
        return (
            f'sensor {failure.sensor} deviates {failure.deviation:.4g} '
            f'(tolerance {failure.tolerance:.4g})'
        )
    if failure.sensor:
        return f'sensor {failure.sensor} {failure.reason}'
    return failure.reason


class Replayer:
    """
    Execute learned trajectories through the tool proxies' clients.

    The node's ``Judge`` and ``Executor`` of :mod:`muscle_mem_ros.walk`.

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
        infer_bindings: bool = False,
        binding_max_shift: float = DEFAULT_MAX_SHIFT,
    ) -> None:
        self._store = store
        self.hub = hub
        self._hub = hub
        self._tools = dict(tools)
        self.check = self._check = ToleranceCheck(sensors=sensors) if sensors else None
        self._matcher = Matcher(check=self._check) if self._check is not None else None
        self.allow_unchecked = self._allow_unchecked = allow_unchecked_replay
        self._declared = tuple(declared)
        self._infer = infer_bindings
        self._max_shift = binding_max_shift
        self.tolerance = element_tolerances(sensors)
        self._learners: dict[tuple[str, str], Learner] = {}
        self._learners_lock = threading.Lock()
        self.step_timeout = step_timeout
        self._post_timeout = post_timeout
        self._startup_deadline = time.monotonic() + sensor_startup_timeout
        self._health = health if health is not None else StoreHealth(
            logger=logging.getLogger(__name__))

    def usable(self, candidates: Sequence[Node]) -> Sequence[Node]:
        """
        Return the candidates whose tool is configured (the same list object when all are).

        Keeping the store's list keeps its identity, under which the matcher
        caches the candidates' index.
        """
        if all(c.step.tool in self._tools for c in candidates):
            return candidates
        return [c for c in candidates if c.step.tool in self._tools]

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
            usable = self.usable(self._store.children(task=task, variant=variant, parent=None))
            if self._matcher is not None:
                self._matcher.warm(usable)
            self.plans(task, variant)
            count += len(usable)
        return count

    def pick(self, candidates: Sequence[Node], step: int) -> Verdict:
        """Return the matcher's best candidate (or the blind ones), else why none passes."""
        usable = self.usable(candidates)
        early = self.unusable(candidates, usable, step)
        if early is not None:
            return early
        failure: CheckFailure | None = None
        if self._matcher is not None:
            selection = self._matcher.select(usable, self._hub.capture(), now_time=self._hub.now())
            if selection.node is not None:
                score = selection.result.score if selection.result is not None else 0.0
                return Verdict(((selection.node, score),))
            if selection.rejected and selection.rejected[0][1].failures:
                failure = selection.rejected[0][1].failures[0]
        if self._allow_unchecked:
            blind = [c for c in usable if c.step.pre is None or not c.step.pre.features]
            if blind:
                return Verdict(tuple((c, 0.0) for c in blind))
        if failure is not None and failure.kind is not FailureKind.UNCHECKED:
            return _missed(FailureKind.PRE_CHECK, f'pre-check failed at step {step}: '
                           f'{describe_failure(failure)}', failure)
        return _missed(
            FailureKind.UNCHECKED, f'step {step} was recorded without sensor checks and '
            'allow_unchecked_replay is false', failure,
        )

    def unusable(self, candidates: Sequence[Node], usable: Sequence[Node],
                 step: int) -> Verdict | None:
        """Return the miss when nothing can be judged (no usable tool, a broken sensor)."""
        if not usable:
            if not candidates:
                return _missed(FailureKind.NO_CANDIDATE, f'nothing learned for step {step}')
            tools = ', '.join(sorted({c.step.tool for c in candidates}))
            return _missed(FailureKind.NO_CANDIDATE, f'step {step}: tool {tools} not configured')
        problems = self._hub.problems()
        if problems:
            name, problem = next(iter(problems.items()))
            failure = CheckFailure(name, math.inf, 0.0, math.inf, f'unusable: {problem}',
                                   FailureKind.MISSING)
            return _missed(FailureKind.PRE_CHECK, f'pre-check failed at step {step}: {problem}',
                           failure)
        return None

    def plans(self, task: str, variant: str) -> Mapping[int, Plan]:
        """
        Return the bindings of every learned step of a tree (node id -> plan).

        The tree's learner reads only trajectories it has not seen
        (:func:`muscle_mem_ros.learning.follow`); plans are built when read.
        """
        if not self._declared and not self._infer:
            return {}
        with self._learners_lock:
            learner = self._learners[(task, variant)] = follow(
                self._learners.get((task, variant)), self._store, task=task, variant=variant,
                params=lambda t: _params(t.params_json), new=lambda: Learner(
                    declared=self._declared, infer=self._infer, max_shift=self._max_shift,
                    tolerance=self.tolerance))
        return learner.plans

    def filer(self, *, task: str, variant: str, params_json: str, parent: int | None,
              steps: Sequence[Step]) -> tuple[str, int | None, list[Step]]:
        """
        File a finished recording by its bindings (see :meth:`.recorder.Recorder.finish`).

        A new tree whose goals use parameters is filed under a variant with those
        parameters bound; steps that a learned step's bindings explain (the same
        step in a moved world) follow that step instead of starting a new branch.
        """
        params = _params(params_json)
        if parent is None and BOUND_MARK not in variant and (self._infer or self._declared):
            by_param = bound_params(steps, params, declared=self._declared, infer=self._infer)
            if by_param:
                variant = bound_variant(params, by_param)
        plans = self.plans(task, variant)
        at, i, shift = parent, 0, Shift()
        while plans and i < len(steps):
            found = None
            for child in self._store.children(task=task, variant=variant, parent=at):
                plan = plans.get(child.id, Plan())
                bound = explains(plan, child, steps[i], params, self.check, self.tolerance, shift)
                if bound is not None:
                    found = child
                    advance(shift, child, self.tolerance, plan, bound)
                    break
            if found is None:
                break
            at, i = found.id, i + 1
        return variant, at, list(steps[i:])

    def describe_bindings(self, info: TrajectoryInfo) -> str:
        """Return '; bound: <step>:<field> <- <source> (<origin>), ...' for a trajectory, or ''."""
        try:
            plans = self.plans(info.task, info.variant)
        except MuscleMemError:  # the event is still worth sending without them
            return ''
        bound = [f'{depth}:{b.field} <- {b.source} ({b.origin})'
                 for depth, node_id in enumerate(info.node_ids)
                 for b in plans.get(node_id, Plan()).bindings]
        return '; bound: ' + ', '.join(bound) if bound else ''

    def variant_for(self, task: str, params: Mapping[str, Any], literal: str) -> str:
        """
        Return the tree a run with ``params`` uses: its own, else one with them bound.

        :param task: The task.
        :param params: The run's parameters.
        :param literal: Their canonical JSON (the tree of runs with exactly these values).
        :return: ``literal`` when such a tree exists or no tree binds the differing
            parameters; else the bound tree with the most trajectories (then the newest).
        """
        counts: dict[str, tuple[int, float]] = {}
        for info in self._store.trajectories(task=task):
            n, newest = counts.get(info.variant, (0, 0.0))
            counts[info.variant] = (n + 1, max(newest, info.created))
        if literal in counts:
            return literal
        fitting = [(c, v) for v, c in counts.items()
                   if BOUND_MARK in v and match_variant(v, params)]
        return max(fitting)[1] if fitting else literal

    def prepare(self, reporter: Reporter | None = None) -> None:
        """
        Wait (at most ``post_check_timeout``) for sensor data received from now on.

        The first pre-check must not judge the world by a message older than
        the request; later pre-checks follow a post-check that already waited.
        Right after the node's start a sensor may not have spoken yet (its
        publisher is still starting, discovery takes a while under load):
        until ``sensor_startup_timeout`` after the start, its first message is
        waited for, and the reporter is told. On timeout the check runs
        anyway, and stale or missing data fails it.

        :param reporter: Told what is waited for (ExecuteTask feedback), if given.
        """
        if not self._hub.names:
            return
        since = self._hub.now()
        silent = self._hub.silent()
        remaining = self._startup_deadline - since
        if silent and remaining > 0:
            if reporter is not None:
                reporter.progress(step=0, total=0,
                                  detail=f'waiting for sensors: {", ".join(silent)}')
            self._hub.wait_first(remaining)
        self._hub.wait_newer(since, self._post_timeout)

    def dry_run(self, *, task: str, variant: str, path: Sequence[int] | None = None,
                params: Mapping[str, Any] | None = None) -> DryRun:
        """Answer whether the first step would replay now (under its bindings); moves nothing."""
        self.prepare()
        candidates = candidates_at(self._store, task=task, variant=variant, parent=None,
                                   depth=0, path=path)
        if not candidates:
            return DryRun(False, None, f"nothing learned for task '{task}' with these params")
        verdict = self._session(task, variant, params).pick(candidates, 0)
        node = choose(verdict)
        if node is None:
            miss = verdict.miss or Miss(FailureKind.NO_CANDIDATE, 'nothing passes')
            return DryRun(False, None, miss.reason, miss.failure)
        trajectory_id, _ = locate(trajectories_of(self._store, task, variant, path), node)
        tool = self._tools[node.step.tool]
        if not tool.ready():
            return DryRun(False, node, f'server {tool.tool.server} is not available',
                          trajectory_id=trajectory_id)
        return DryRun(True, node, 'the first step passes its pre-check',
                      trajectory_id=trajectory_id)

    def walk(
        self,
        *,
        task: str,
        variant: str,
        reporter: Reporter,
        cancel: CancelToken,
        path: Sequence[int] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> WalkResult:
        """
        Replay from the root as far as the checks allow (:func:`muscle_mem_ros.walk.walk`).

        :param task: Task name.
        :param variant: Tree key (canonical params JSON).
        :param reporter: Gets events and progress.
        :param cancel: Cancels the walk and the in-flight goal.
        :param path: Restrict to this root-to-leaf node path (Replay with a trajectory id).
        :param params: The run's parameters (bound fields take their values from them).
        :return: How it ended; ``unsaved`` says why the replay counters of a complete
            walk could not be stored.
        """
        session = self._session(task, variant, params, reporter)
        result = walk(store=self._store, task=task, variant=variant, judge=session,
                      executor=session, reporter=reporter, cancel=cancel, path=path)
        if result.complete and result.trajectory_id:
            _, unsaved = self._health.bookkeep('replay counters', partial(
                self._store.note_replay, trajectory_id=result.trajectory_id))
            if unsaved:
                result = replace(result, unsaved=unsaved)
        return result

    def _session(self, task: str, variant: str, params: Mapping[str, Any] | None,
                 reporter: Reporter | None = None) -> BoundWalk:
        """Return the judge and executor of one walk of a tree (its bindings, the run's params)."""
        return BoundWalk(
            replayer=self, plans=self.plans(task, variant), params=params or {},
            tolerance=self.tolerance,
            on_substituted=getattr(reporter, 'substituted', lambda step, subs: None))

    def execute(self, node: Node, step: int, cancel: CancelToken) -> CallOutcome:
        """Send ``node``'s stored payload to its server and wait (at most ``step_timeout``)."""
        return self.send(node, cancel)

    def send(self, node: Node, cancel: CancelToken,
             fields: Mapping[str, Any] | None = None) -> CallOutcome:
        """Send ``node``'s payload, with ``fields`` set, and wait (at most ``step_timeout``)."""
        return self._tools[node.step.tool].call(node.step.payload, timeout=self.step_timeout,
                                                cancel=cancel, fields=fields)

    def post_check(self, node: Node, step: int, ended: float,
                   expected: Snapshot | None = None) -> Miss | None:
        """
        Judge ``node``'s post-check with data newer than ``ended``; None when it passed.

        :param expected: What the world should look like (the recording moved by a bound
            walk's shift); default the recorded post snapshot.
        """
        recorded = node.step.post if expected is None else expected
        if self._check is None or recorded is None or not recorded.features:
            return None
        failure: CheckFailure | None
        if not self._hub.wait_newer(ended, self._post_timeout):
            lagging = ', '.join(self._hub.lagging(ended))
            failure = CheckFailure(
                lagging, math.inf, 0.0, math.inf,
                f'sent no data within {self._post_timeout:g} s after the step',
                FailureKind.STALE,
            )
        else:
            result = self._check.evaluate(recorded, self._hub.capture(), now_time=self._hub.now())
            failure = result.failures[0] if not result.passed and result.failures else None
        if failure is None:
            return None
        return Miss(FailureKind.POST_CHECK,
                    f'post-check failed at step {step}: {describe_failure(failure)}', failure)


def _params(params_json: str) -> dict[str, Any]:
    """Return a trajectory's recorded parameters ({} when unreadable)."""
    try:
        value = json.loads(params_json or '{}')
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _missed(kind: FailureKind, reason: str, failure: CheckFailure | None = None) -> Verdict:
    return Verdict((), Miss(kind, reason, failure))
