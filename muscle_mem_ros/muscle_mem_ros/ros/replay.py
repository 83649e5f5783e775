"""
Walk a task's learned tree over ROS: pre-check, send, wait, post-check, continue.

At node P (None = the root) the candidates are P's children. The matcher picks
the best one whose recorded pre snapshot matches a fresh snapshot (before the
first step the walk waits for sensor data received after the request, and,
within ``sensor_startup_timeout`` of the node's start, for the first message
of every sensor that has not sent one yet, saying so in the feedback); its stored
payload is sent to the real server (byte-identical CDR) and the result awaited
with a per-step timeout. Then the post-check: once every sensor reported data
received after the step ended (at most ``post_check_timeout``), the recorded
post snapshot is compared with a fresh one.

Decisions (the lead's, documented here):

* A post-check failure at step k is reported (``CHECK_FAILED``) but does not by
  itself stop the walk: node k's children are tried next, so a learned recovery
  branch replays. If none passes, the walk stops with resume step k+1 under
  node k.
* When no child passes and P is terminal (some trajectory ends there), the walk
  is complete: a full hit. A child that passes at a terminal node is still
  taken (the longer trajectory is preferred).
* A failed step (aborted, rejected, timed out, server missing) stops the walk
  with resume step k under P (the agent redoes step k).
* Steps recorded without a pre snapshot (no sensors) are replayed only when
  ``allow_unchecked_replay`` is true; otherwise they never pass.
* Stale or missing sensor data fails a check (the core's ToleranceCheck).
* The trajectory a walk is on at step k (the ``trajectory_id`` of its STEP_OK
  event, of a post-check or step failure there, and of a dry run): of the learned
  trajectories through step k's node, the one replayed to the end most often,
  then the longer, then the newer. Its length is the feedback's ``total``. Which
  trajectory a walk completes is known only at its end (the HIT event's id).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import partial
import logging
import math
import time
from typing import Protocol

from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.checks import ToleranceCheck
from muscle_mem_ros.matcher import Matcher
from muscle_mem_ros.records import CheckFailure, Node, SensorSpec, StepStatus
from muscle_mem_ros.ros.health import StoreHealth
from muscle_mem_ros.ros.proxy import ToolProxy
from muscle_mem_ros.ros.sensors import SensorHub
from muscle_mem_ros.ros.sync import CancelToken
from muscle_mem_ros.store import Store

__all__ = ['DryRun', 'Replayer', 'Reporter', 'WalkOutcome', 'WalkResult', 'describe_failure']


class WalkOutcome(Enum):
    """How a walk ended."""

    COMPLETE = 'complete'
    """Reached a terminal node with nothing further passing: a full replay."""
    DIVERGED = 'diverged'
    """No candidate passed its pre-check (including: nothing learned)."""
    STEP_FAILED = 'step_failed'
    """A replayed step failed at the server (aborted, rejected, timeout, unavailable)."""
    CANCELED = 'canceled'
    """The caller canceled; the in-flight goal was canceled too."""


@dataclass(frozen=True)
class WalkResult:
    """
    Outcome of one walk.

    :ivar outcome: How it ended.
    :ivar steps_replayed: Steps sent and succeeded in this walk.
    :ivar last_node: Last node executed successfully: the parent of a branch.
    :ivar resume_step: Index of the first step still to do (for a handoff).
    :ivar trajectory_id: Trajectory completed (COMPLETE), else 0.
    :ivar reason: Human-readable reason; '' for a clean full hit.
    :ivar failed_step: Step index that failed, -1 if none.
    :ivar failure: The sensor failure behind a failed check, if any.
    :ivar unsaved: Why the walk's bookkeeping (replay counters) could not be
        stored, '' when it was: the walk's outcome stands either way.
    """

    outcome: WalkOutcome
    steps_replayed: int
    last_node: Node | None
    resume_step: int
    trajectory_id: int = 0
    reason: str = ''
    failed_step: int = -1
    failure: CheckFailure | None = None
    unsaved: str = ''


@dataclass(frozen=True)
class DryRun:
    """Would the first step replay now, and if not why."""

    would_replay: bool
    node: Node | None
    reason: str
    failure: CheckFailure | None = None
    trajectory_id: int = 0
    """The trajectory the first step belongs to (see the module doc); 0 if none passes."""


class Reporter(Protocol):
    """Receives events and progress from a walk (the node publishes them)."""

    def event(
        self, *, kind: int, step: int, trajectory_id: int = 0, detail: str = '',
        failure: CheckFailure | None = None,
    ) -> None:
        """Publish one CacheEvent of ``kind``."""

    def progress(self, *, step: int, total: int, detail: str) -> None:
        """Report that step ``step`` of about ``total`` is running."""


def describe_failure(failure: CheckFailure) -> str:
    """Render a check failure: 'sensor object deviates 0.081 (tolerance 0.02)'."""
    if failure.reason == 'out of tolerance':
        return (
            f'sensor {failure.sensor} deviates {failure.deviation:.4g} '
            f'(tolerance {failure.tolerance:.4g})'
        )
    if failure.sensor:
        return f'sensor {failure.sensor} {failure.reason}'
    return failure.reason


@dataclass(frozen=True)
class _Choice:
    node: Node | None
    reason: str
    failure: CheckFailure | None


class Replayer:
    """
    Execute learned trajectories through the tool proxies' clients.

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
    ) -> None:
        self._store = store
        self._hub = hub
        self._tools = dict(tools)
        self._check = ToleranceCheck(sensors=sensors) if sensors else None
        self._matcher = Matcher(check=self._check) if self._check is not None else None
        self._allow_unchecked = allow_unchecked_replay
        self.step_timeout = step_timeout
        self._post_timeout = post_timeout
        self._startup_deadline = time.monotonic() + sensor_startup_timeout
        self._health = health if health is not None else StoreHealth(
            logger=logging.getLogger(__name__))

    def _usable(self, candidates: Sequence[Node]) -> Sequence[Node]:
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
        for a tree with 100 000 first steps). Returns the number of first steps.
        """
        self._store.preload()
        count = 0
        for task, variant in sorted({(t.task, t.variant) for t in self._store.trajectories()}):
            usable = self._usable(self._store.children(task=task, variant=variant, parent=None))
            if self._matcher is not None:
                self._matcher.warm(usable)
            count += len(usable)
        return count

    def _choose(self, candidates: Sequence[Node], step: int) -> _Choice:
        usable = self._usable(candidates)
        if not usable:
            if not candidates:
                return _Choice(None, f'nothing learned for step {step}', None)
            tools = ', '.join(sorted({c.step.tool for c in candidates}))
            return _Choice(None, f'step {step}: tool {tools} not configured', None)
        failure: CheckFailure | None = None
        problems = self._hub.problems()
        if problems:
            name, problem = next(iter(problems.items()))
            failure = CheckFailure(name, math.inf, 0.0, math.inf, f'unusable: {problem}')
            return _Choice(None, f'pre-check failed at step {step}: {problem}', failure)
        if self._matcher is not None:
            selection = self._matcher.select(usable, self._hub.capture(), now_time=self._hub.now())
            if selection.node is not None:
                return _Choice(selection.node, '', None)
            if selection.rejected and selection.rejected[0][1].failures:
                failure = selection.rejected[0][1].failures[0]
        if self._allow_unchecked:
            blind = [c for c in usable if c.step.pre is None or not c.step.pre.features]
            if blind:
                best = max(blind, key=lambda c: (c.success_count, c.last_used))
                return _Choice(best, '', None)
        if failure is not None and failure.reason != 'no pre-check':
            return _Choice(None, f'pre-check failed at step {step}: '
                           f'{describe_failure(failure)}', failure)
        return _Choice(
            None, f'step {step} was recorded without sensor checks and '
            'allow_unchecked_replay is false', failure,
        )

    def _candidates(
        self, *, task: str, variant: str, parent: Node | None, depth: int,
        path: Sequence[int] | None,
    ) -> list[Node]:
        children = self._store.children(
            task=task, variant=variant, parent=None if parent is None else parent.id
        )
        if path is None:
            return children
        if depth >= len(path):
            return []
        return [c for c in children if c.id == path[depth]]

    def _fresh(self, reporter: Reporter | None = None) -> None:
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

    def _paths(
        self, task: str, variant: str, path: Sequence[int] | None,
    ) -> list[tuple[int, tuple[int, ...], int]]:
        """Return (replay count, node ids, id) of the trajectories a walk may be on."""
        return [(t.replay_count, t.node_ids, t.id) for t in self._store.trajectories(task=task)
                if t.variant == variant and (path is None or list(t.node_ids) == list(path))]

    def dry_run(self, *, task: str, variant: str, path: Sequence[int] | None = None) -> DryRun:
        """Answer whether the first step would replay now; moves nothing."""
        self._fresh()
        candidates = self._candidates(task=task, variant=variant, parent=None, depth=0, path=path)
        if not candidates:
            return DryRun(False, None, f"nothing learned for task '{task}' with these params")
        choice = self._choose(candidates, 0)
        if choice.node is None:
            return DryRun(False, None, choice.reason, choice.failure)
        trajectory_id, _ = self._on(self._paths(task, variant, path), choice.node)
        tool = self._tools[choice.node.step.tool]
        if not tool.ready():
            return DryRun(False, choice.node, f'server {tool.tool.server} is not available',
                          trajectory_id=trajectory_id)
        return DryRun(True, choice.node, 'the first step passes its pre-check',
                      trajectory_id=trajectory_id)

    @staticmethod
    def _on(paths: Sequence[tuple[int, tuple[int, ...], int]], node: Node) -> tuple[int, int]:
        """
        Return the trajectory a walk at ``node`` is on, and its length.

        :param paths: (replay count, node ids, id) of the candidate trajectories.
        :param node: The step the walk is at.
        :return: (id, length) of the most replayed trajectory through ``node``, then the
            longer, then the newer; (0, -1) when none goes through it.
        """
        best = max(((replays, len(ids), tid) for replays, ids, tid in paths if node.id in ids),
                   default=None)
        return (best[2], best[1]) if best is not None else (0, -1)

    def walk(
        self,
        *,
        task: str,
        variant: str,
        reporter: Reporter,
        cancel: CancelToken,
        path: Sequence[int] | None = None,
    ) -> WalkResult:
        """
        Replay from the root as far as the checks allow.

        :param task: Task name.
        :param variant: Tree key (canonical params JSON).
        :param reporter: Gets events and progress.
        :param cancel: Cancels the walk and the in-flight goal.
        :param path: Restrict to this root-to-leaf node path (Replay with a trajectory id).
        """
        self._fresh(reporter)
        paths = self._paths(task, variant, path)
        parent: Node | None = None
        depth = 0
        replayed = 0
        post_note = ''
        while True:
            candidates = self._candidates(
                task=task, variant=variant, parent=parent, depth=depth, path=path
            )
            choice = self._choose(candidates, depth)
            node = choice.node
            if node is None:
                if parent is not None and parent.terminal:
                    info = self._store.trajectory_ending_at(parent.id)
                    trajectory_id = info.id if info is not None else 0
                    unsaved = ''
                    if trajectory_id:
                        _, unsaved = self._health.bookkeep('replay counters', partial(
                            self._store.note_replay, trajectory_id=trajectory_id))
                    return WalkResult(
                        WalkOutcome.COMPLETE, replayed, parent, depth, trajectory_id, post_note,
                        unsaved=unsaved,
                    )
                if choice.failure is not None:
                    reporter.event(
                        kind=CacheEvent.CHECK_FAILED, step=depth, detail=choice.reason,
                        failure=choice.failure,
                    )
                reason = choice.reason + (f'; {post_note}' if post_note else '')
                return WalkResult(
                    WalkOutcome.DIVERGED, replayed, parent, depth, reason=reason,
                    failed_step=depth if candidates else -1, failure=choice.failure,
                )
            step = node.step
            tool = self._tools[step.tool]
            on, total = self._on(paths, node)
            reporter.progress(step=depth, total=total, detail=f'step {depth}: {step.tool}')
            out = tool.call(step.payload, timeout=self.step_timeout, cancel=cancel)
            if out.status is StepStatus.CANCELED and cancel.cancelled:
                return WalkResult(
                    WalkOutcome.CANCELED, replayed, parent, depth, reason='canceled',
                    failed_step=depth,
                )
            if out.status is not StepStatus.SUCCEEDED:
                reason = f'step {depth} ({step.tool}) failed: {out.detail}'
                reporter.event(kind=CacheEvent.ERROR, step=depth, trajectory_id=on, detail=reason)
                return WalkResult(
                    WalkOutcome.STEP_FAILED, replayed, parent, depth, reason=reason,
                    failed_step=depth,
                )
            replayed += 1
            post_note = self._post_check(node, depth, out.ended, reporter, on)
            if not post_note:
                reporter.event(
                    kind=CacheEvent.STEP_OK, step=depth, trajectory_id=on,
                    detail=f'step {depth}: {step.tool} ok',
                )
            parent = node
            depth += 1

    def _post_check(
        self, node: Node, depth: int, ended: float, reporter: Reporter, trajectory_id: int,
    ) -> str:
        """Run the post-check of ``node``; return '' or what failed."""
        recorded = node.step.post
        if self._check is None or recorded is None or not recorded.features:
            return ''
        failure: CheckFailure | None
        if not self._hub.wait_newer(ended, self._post_timeout):
            lagging = ', '.join(self._hub.lagging(ended))
            failure = CheckFailure(
                lagging, math.inf, 0.0, math.inf,
                f'sent no data within {self._post_timeout:g} s after the step',
            )
        else:
            result = self._check.evaluate(recorded, self._hub.capture(), now_time=self._hub.now())
            failure = result.failures[0] if not result.passed and result.failures else None
        if failure is None:
            return ''
        note = f'post-check failed at step {depth}: {describe_failure(failure)}'
        reporter.event(kind=CacheEvent.CHECK_FAILED, step=depth, trajectory_id=trajectory_id,
                       detail=note, failure=failure)
        return note
