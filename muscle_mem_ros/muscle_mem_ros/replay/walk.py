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
The tree walk: replay a task's learned steps while their checks pass.

Written once, used by :class:`~muscle_mem_ros.engine.engine.Engine` (Python tools,
user checks) and by the ROS node (goals and requests through the tool
proxies, sensor snapshots). A front end supplies two small objects:

* a :class:`Judge`, which prepares the world view before the first pre-check
  (the node waits for fresh sensor data), says which candidates pass their
  pre-check and how close each is, and judges a replayed step's post-check;
* an :class:`Executor`, which executes one learned step and says how it ended.

The rules (the only place they are written down):

* At node P (None = the root) the candidates are P's children (restricted to
  ``path`` when one trajectory is replayed). Among those that pass their
  pre-check the best wins: lowest distance (0 = identical), then most
  successes, then most recently used, then the lowest id (:func:`.ranking.rank_key`).
* When no candidate passes and P is terminal (some trajectory ends there) and
  P's post-check did not fail, the walk is complete: a full hit. A child that
  passes at a terminal node is still taken (the longer trajectory wins).
* When no candidate passes otherwise, the walk stops before step k (the
  agent does step k under P): kind NO_CANDIDATE, PRE_CHECK or what the judge
  says. The reason given is the failure of the candidate the walk would have
  taken had every check passed (:func:`blamed`: most successes, then most
  recent), not the smallest deviation, which could be another branch's.
* A post-check failure at step k is reported (``CHECK_FAILED``) but does not by
  itself stop the walk: node k's children are tried next, so a learned
  recovery branch replays. If none passes, the walk stops with resume step k+1
  under node k (kind POST_CHECK), even at a terminal node: the world is not
  what the recorded run left, so the task is not done.
* A step whose check during the motion failed (the front end canceled it the moment
  the world left its recording's tube, outcome kind ``DURING_CHECK``) stops the walk
  with ``CHECK_FAILED`` and resume step k under P: the agent redoes step k from the
  world as it is. (A goal that succeeded before its cancel arrived ran to its end: the
  front end reports it succeeded, and its post-check judges the world it left.) A step
  the front end could not stop (kind ``NOT_STOPPED``: the robot did not stop) stops the
  walk with that kind, after its ``CHECK_FAILED`` when a check during it had failed; the
  front end then ends the task without the agent.
* A failed step (raised, aborted, rejected, timed out, server missing) stops
  the walk with resume step k under P (the agent redoes step k); a canceled
  one stops it as CANCELED.
* The body is checked at every step a walk takes, whatever the gate (:func:`on_body`): a
  candidate that passed its pre-check but is not on a trajectory this body replays, as
  the run read its tree (another body's, or a branch a fleet added since the run began),
  is not taken; a miss it alone would have served names why.
* The trajectory a walk is on at step k (reported with each event, used as
  the progress ``total``): of the learned trajectories through step k's node,
  the one replayed to the end most often, then the longer, then the newer.
  Which trajectory a walk completes is known only at its end.

Every walk ends with one :class:`WalkResult`; a walk that did not complete
carries the one :class:`~muscle_mem_ros.resume.Resume` record an agent
continues from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import contextlib
from dataclasses import dataclass
from enum import Enum
from typing import Any, ContextManager, overload, Protocol, TypeVar

from .ranking import rank_key
from .treeview import Paths, TreeView
from ..records import CheckFailure, Node, StepStatus
from ..resume import FailureKind, Resume
from ..store.base import Store

__all__ = [
    'blamed', 'Cancel', 'candidates_at', 'choose', 'Executor', 'Judge', 'locate', 'Miss',
    'on_body', 'Outcome', 'Reporter', 'StepEvent', 'Verdict', 'walk', 'WalkResult',
]


class StepEvent(Enum):
    """What a walk reports about one step."""

    STEP_OK = 'step_ok'
    """The step succeeded and its post-check passed (or it has none)."""
    CHECK_FAILED = 'check_failed'
    """A pre-check (no candidate passed) or a post-check failed, with the sensor failure."""
    STEP_FAILED = 'step_failed'
    """The step itself failed."""


@dataclass(frozen=True)
class Miss:
    """
    Why no candidate passed, or why a post-check failed.

    :ivar kind: The kind of failure.
    :ivar reason: Human text, e.g. 'pre-check failed at step 2: sensor object deviates 0.08'.
    :ivar failure: The sensor failure behind it, if one is known.
    :ivar node: The learned step ``failure`` was judged against, when a judge says: the
        candidate :func:`blamed` names, or the step whose post-check failed.
    """

    kind: FailureKind
    reason: str
    failure: CheckFailure | None = None
    node: Node | None = None


@dataclass(frozen=True)
class Verdict:
    """
    A judge's answer for one step's candidates.

    :ivar passing: Candidates that passed their pre-check with their distance
        (0 = identical, lower is better); the walk ranks them.
    :ivar miss: Why none passed (read only when ``passing`` is empty).
    """

    passing: Sequence[tuple[Node, float]]
    miss: Miss | None = None


class Judge(Protocol):
    """Takes snapshots and judges candidates (user checks, or the sensor hub)."""

    def prepare(self, reporter: Reporter) -> None:
        """Get ready for the first pre-check (the node waits for fresh sensor data)."""

    def pick(self, candidates: Sequence[Node], step: int) -> Verdict:
        """Return the candidates for step ``step`` that pass their pre-check."""

    def post_check(self, node: Node, step: int, ended: float) -> Miss | None:
        """Judge ``node``'s post-check after it ended at ``ended``; None when it passed."""


class Outcome(Protocol):
    """
    How an executed step ended (the proxy's ``CallOutcome`` is one).

    An outcome may also carry ``kind``, a :class:`FailureKind` saying why a failed
    step failed beyond the server's own answer (``TIMEOUT``, ``SERVER_LOST``,
    ``DURING_CHECK``, then with ``failure``, the :class:`CheckFailure`); the walk
    stops with ``STEP_FAILED`` when it has none.
    """

    @property
    def status(self) -> StepStatus:
        """Return how the step ended."""

    @property
    def ended(self) -> float:
        """Return the ``time.monotonic`` time at which it ended."""

    @property
    def detail(self) -> str:
        """Return what the server said, for people."""


class Cancel(Protocol):
    """Says whether the caller cancelled a walk (the node's ``CancelToken``)."""

    @property
    def cancelled(self) -> bool:
        """Return True once the caller cancelled."""


C = TypeVar('C', bound=Cancel)
C_contra = TypeVar('C_contra', bound=Cancel, contravariant=True)


class Executor(Protocol[C_contra]):
    """Executes one learned step (a Python call, or a goal/request to a server)."""

    def execute(self, node: Node, step: int, cancel: C_contra) -> Outcome:
        """Execute ``node``'s step; ``cancel.cancelled`` may end it early."""


class Reporter(Protocol):
    """Receives a walk's events and progress."""

    def event(
        self, *, kind: StepEvent, step: int, trajectory_id: int = 0, detail: str = '',
        failure: CheckFailure | None = None,
    ) -> None:
        """Report one event about step ``step``."""

    def progress(self, *, step: int, total: int, detail: str) -> None:
        """Report that step ``step`` of about ``total`` is running."""


@dataclass(frozen=True)
class WalkResult:
    """
    How one walk ended.

    :ivar complete: True for a full hit.
    :ivar resume: Where an agent continues (for a complete walk: after the last
        step, kind None); ``resume.replayed`` are the steps replayed.
    :ivar last_node: Last node executed successfully: the parent of a branch.
    :ivar trajectory_id: Trajectory completed (when complete), else 0.
    :ivar reason: Human text: why it stopped; for a complete walk '' (or what
        failed on the way, e.g. a post-check a learned child recovered from).
    :ivar failed_step: Step index that failed, -1 if none.
    :ivar failure: The sensor failure behind a failed check, if any.
    :ivar unsaved: Why the front end could not store the walk's bookkeeping
        (replay counters), '' when it could; the outcome stands either way.
    :ivar on_trajectory: The trajectory the walk was on when it stopped (0: it executed no
        step, or no tree was given): the one its outcome is booked against
        (:mod:`.booking`).
    :ivar stepped_back: Why that trajectory stepped back with this walk ('' if it did not).
    """

    complete: bool
    resume: Resume
    last_node: Node | None
    trajectory_id: int = 0
    reason: str = ''
    failed_step: int = -1
    failure: CheckFailure | None = None
    unsaved: str = ''
    on_trajectory: int = 0
    stepped_back: str = ''

    @property
    def kind(self) -> FailureKind | None:
        """Return why the walk stopped, None for a complete walk."""
        return self.resume.kind

    @property
    def steps_replayed(self) -> int:
        """Return the number of steps executed successfully."""
        return len(self.resume.replayed)


def locate(paths: Paths, node: Node) -> tuple[int, int]:
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


def candidates_at(store: Store, *, task: str, variant: str, parent: Node | None, depth: int,
                  path: Sequence[int] | None) -> Sequence[Node]:
    """
    Return the children of ``parent``, restricted to ``path`` when one is given.

    Unrestricted, the store's own (cached) sequence is returned as it is: the matcher
    keys its per-node index on it.
    """
    children = store.children(task=task, variant=variant,
                              parent=None if parent is None else parent.id)
    if path is None:
        return children
    if depth >= len(path):
        return []
    return [c for c in children if c.id == path[depth]]


def blamed(failures: Sequence[tuple[Node, CheckFailure]]) -> tuple[Node, CheckFailure] | None:
    """
    Return the failure a miss reports: that of the candidate the walk would have taken.

    Of candidates that all failed, the walk would have replayed the one with the most
    successes, then the most recently used, then the lowest id (:func:`.ranking.rank_key` at an
    equal distance): its failure says why the usual branch did not replay. The
    smallest deviation could belong to another branch and blame the wrong thing.
    """
    return min(failures, key=lambda item: rank_key(item[0]), default=None)


def choose(verdict: Verdict) -> Node | None:
    """Return the best passing candidate of ``verdict`` (:func:`.ranking.rank_key`), or None."""
    best = min(verdict.passing, key=lambda item: rank_key(item[0], item[1]), default=None)
    return best[0] if best is not None else None


def on_body(verdict: Verdict, tree: TreeView | None, step: int) -> Verdict:
    """
    Return ``verdict`` without the passing candidates this body does not replay.

    Checked at every step, after the judge (so a store's own list of children, and the
    matcher's index kept on it, serve the common case untouched): a node outside the
    tree's :attr:`~.treeview.TreeView.visible` steps is another body's branch, or one
    added to the tree since the run read it (a fleet robot's, whose body this run has not
    read). When none is left, the miss says so.
    """
    if tree is None or tree.visible is None or tree.kin is None:
        return verdict
    seen, kin = tree.visible, tree.kin
    if all(node.id in seen for node, _ in verdict.passing):
        return verdict
    kept = tuple((node, d) for node, d in verdict.passing if node.id in seen)
    if kept:
        return Verdict(kept, verdict.miss)
    left = sorted(node.id for node, _ in verdict.passing)
    foreign = sorted({kin.reason(t.body) for t in tree.foreign if set(left) & set(t.node_ids)})
    why = '; '.join(foreign) or ('learned after this run read the tree: its body is read '
                                 'by the next run')
    return Verdict((), Miss(FailureKind.NO_CANDIDATE, f'step {step}: what passes its '
                            f'pre-check (node {", ".join(map(str, left))}) is not this '
                            f"body's to replay: {why}"))


class _NoCancel:
    cancelled = False


@overload
def walk(
    *, store: Store, task: str, variant: str, judge: Judge, executor: Executor[C],
    reporter: Reporter, cancel: C, path: Sequence[int] | None = None,
    tree: TreeView | None = None, measure: Callable[[str], ContextManager[Any]] | None = None,
) -> WalkResult: ...


@overload
def walk(
    *, store: Store, task: str, variant: str, judge: Judge, executor: Executor[Cancel],
    reporter: Reporter, cancel: None = None, path: Sequence[int] | None = None,
    tree: TreeView | None = None, measure: Callable[[str], ContextManager[Any]] | None = None,
) -> WalkResult: ...


def walk(
    *, store: Store, task: str, variant: str, judge: Judge, executor: Executor[Any],
    reporter: Reporter, cancel: Cancel | None = None, path: Sequence[int] | None = None,
    tree: TreeView | None = None,
    measure: Callable[[str], ContextManager[Any]] | None = None,
) -> WalkResult:
    """
    Replay from the root as far as the rules (module docstring) allow.

    :param store: The cache.
    :param task: Task key.
    :param variant: Tree key (canonical params JSON, '' for the engine).
    :param judge: Judges pre- and post-checks.
    :param executor: Executes steps; it is handed ``cancel``.
    :param reporter: Gets events and progress.
    :param cancel: Cancels the walk, or None (never cancelled: the executor then takes
        any :class:`Cancel`).
    :param path: Restrict the walk to this root-to-leaf node path.
    :param tree: The tree as the run read it (:meth:`.treeview.Trees.view`): the trajectory
        each step is on is found in it (events, progress total) and the one completed;
        None: events carry trajectory id 0 and the total -1, and the completed
        trajectory is asked of the store.
    :param measure: ``measure(phase)`` context manager timing 'lookup' and 'replay'.
    :return: How the walk ended.
    """
    cancel = cancel if cancel is not None else _NoCancel()
    timed = measure if measure is not None else (lambda phase: contextlib.nullcontext())
    judge.prepare(reporter)
    paths = tree.paths(path) if tree is not None else ()
    parent: Node | None = None
    replayed: list[Node] = []
    post_miss: Miss | None = None
    on = 0

    def stop(kind: FailureKind, reason: str, failed_step: int = -1,
             failure: CheckFailure | None = None) -> WalkResult:
        resume = Resume(len(replayed), reason, tuple(n.step.tool for n in replayed), kind,
                        None if parent is None else parent.id)
        return WalkResult(False, resume, parent, reason=reason, failed_step=failed_step,
                          failure=failure, on_trajectory=on)

    while True:
        depth = len(replayed)
        with timed('lookup'):
            candidates = candidates_at(store, task=task, variant=variant, parent=parent,
                                       depth=depth, path=path)
        verdict = on_body(judge.pick(candidates, depth), tree, depth)
        node = choose(verdict)
        if node is None:
            if parent is not None and parent.terminal and post_miss is None:
                info = (tree.ending_at(parent.id) if tree is not None
                        else store.trajectory_ending_at(parent.id))
                resume = Resume(depth, '', tuple(n.step.tool for n in replayed), None, parent.id)
                return WalkResult(True, resume, parent, info.id if info is not None else 0,
                                  on_trajectory=on)
            miss = verdict.miss or Miss(FailureKind.NO_CANDIDATE,
                                        f'nothing learned for step {depth}')
            if miss.failure is not None:
                reporter.event(kind=StepEvent.CHECK_FAILED, step=depth, detail=miss.reason,
                               failure=miss.failure)
            if post_miss is not None:
                return stop(FailureKind.POST_CHECK, f'{miss.reason}; {post_miss.reason}',
                            depth if candidates else -1, miss.failure)
            return stop(miss.kind, miss.reason, depth if candidates else -1, miss.failure)
        on, total = locate(paths, node) if paths else (0, -1)
        reporter.progress(step=depth, total=total, detail=f'step {depth}: {node.step.tool}')
        with timed('replay'):
            out = executor.execute(node, depth, cancel)
        if out.status is StepStatus.CANCELED and cancel.cancelled:
            return stop(FailureKind.CANCELED, 'canceled', depth)
        kind, failure = getattr(out, 'kind', None), getattr(out, 'failure', None)
        if kind is FailureKind.DURING_CHECK or (kind is FailureKind.NOT_STOPPED and failure):
            reason = f'check during step {depth} ({node.step.tool}) failed: {out.detail}'
            reporter.event(kind=StepEvent.CHECK_FAILED, step=depth, trajectory_id=on,
                           detail=reason, failure=failure)
            return stop(kind, reason, depth, failure)
        if out.status is not StepStatus.SUCCEEDED:
            reason = f'step {depth} ({node.step.tool}) failed: {out.detail}'
            reporter.event(kind=StepEvent.STEP_FAILED, step=depth, trajectory_id=on,
                           detail=reason)
            return stop(getattr(out, 'kind', None) or FailureKind.STEP_FAILED, reason, depth)
        replayed.append(node)
        parent = node
        post_miss = judge.post_check(node, depth, out.ended)
        if post_miss is None:
            reporter.event(kind=StepEvent.STEP_OK, step=depth, trajectory_id=on,
                           detail=f'step {depth}: {node.step.tool} ok')
        else:
            reporter.event(kind=StepEvent.CHECK_FAILED, step=depth, trajectory_id=on,
                           detail=post_miss.reason, failure=post_miss.failure)
