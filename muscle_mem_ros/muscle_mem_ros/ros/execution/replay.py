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
Python ``Engine``). A run reads its tree once (:meth:`.trees.Trees.view`); each
walk gets a :class:`NodeWalk`, the walk's ``Judge`` and ``Executor``: the
sensors judge literally (:class:`~.sensing.SensorJudge`, the matcher's index)
while neither the candidates have bindings nor the world has moved, and the
core's :class:`~muscle_mem_ros.bindings.judge.BindingJudge` judges otherwise. A chosen
step's stored payload is sent to the real server (byte-identical CDR, bound
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
from typing import Any

from muscle_mem_ros.bindings.filing import file_steps
from muscle_mem_ros.bindings.judge import BindingJudge
from muscle_mem_ros.bindings.rules import (
    Declared, DEFAULT_MAX_SHIFT, element_tolerances, sensor_sources, Substitution,
)
from muscle_mem_ros.records import CheckFailure, Node, SensorSpec, Step, StepStatus
from muscle_mem_ros.replay.gates import Gate, gate_tree, Trusted
from muscle_mem_ros.replay.shadow import ShadowRun
from muscle_mem_ros.replay.treeview import recorded_params, Trees, TreeView
from muscle_mem_ros.replay.walk import (
    blamed, candidates_at, choose, locate, Miss, Reporter, Verdict, walk, WalkResult,
)
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.ros.capture.forwarding import CallOutcome, ToolProxy
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.execution.judge import describe_failure, missed, NodeSenses, SensorJudge
from muscle_mem_ros.ros.node.health import StoreHealth
from muscle_mem_ros.ros.rclfix.sync import CancelToken
from muscle_mem_ros.store import Store

__all__ = ['DryRun', 'NodeWalk', 'Replayer']


@dataclass(frozen=True)
class DryRun:
    """Would the first step replay now, and if not why."""

    would_replay: bool
    node: Node | None
    reason: str
    failure: CheckFailure | None = None
    trajectory_id: int = 0
    """The trajectory the first step belongs to (see :mod:`...replay.walk`); 0 if none."""


class NodeWalk:
    """
    The Judge and Executor of one walk (one per walk: its binding judge keeps the shift).

    :param sensing: The node's literal judge.
    :param send: Sends a node's payload with fields set: ``send(node, cancel, fields)``.
    :param tree: The tree walked, as the run read it.
    :param params: The run's task parameters.
    :param tolerance: Tolerance of a sensor element.
    :param on_substituted: Called with a step's substitutions before it is sent.
    """

    def __init__(self, *, sensing: SensorJudge,
                 send: Callable[[Node, CancelToken, Mapping[str, Any] | None], CallOutcome],
                 tree: TreeView, params: Mapping[str, Any],
                 tolerance: Callable[[str], float | None],
                 on_substituted: Callable[[int, Sequence[Substitution]], None]) -> None:
        self._sensing = sensing
        self._send = send
        self._senses = NodeSenses(sensing, tolerance)
        self._judge = BindingJudge(plans=tree.plans, params=params, senses=self._senses)
        self._on_substituted = on_substituted
        self._trusted: frozenset[int] | None = None
        self._held = ''

    def gate(self, trusted: frozenset[int] | None, held: str) -> None:
        """Let only ``trusted`` learned steps replay (None: all); ``held`` says why not others."""
        self._trusted, self._held = trusted, held

    def prepare(self, reporter: Reporter) -> None:
        """Wait for fresh sensor data."""
        self._sensing.prepare(reporter)

    def pick(self, candidates: Sequence[Node], step: int) -> Verdict:
        """Judge literally while nothing is bound or moved, else each candidate under its plan."""
        if self._trusted is not None:
            allowed = [c for c in candidates if c.id in self._trusted]
            if not allowed and candidates:
                return missed(FailureKind.NO_CANDIDATE, f'gate: {self._held}')
            candidates = allowed
        usable = self._sensing.usable(candidates)
        if self._judge.literal(usable):
            return self._sensing.pick(candidates, step, usable)
        early = self._sensing.unusable(candidates, usable, step)
        if early is not None:
            return early
        self._senses.look(self._judge.current)
        passing, failures = self._judge.pick(usable, step)
        if passing:
            return Verdict(tuple(passing))
        worst = blamed(failures)
        if worst is None:
            return missed(FailureKind.NO_CANDIDATE, f'nothing learned for step {step}')
        node, failure = worst
        others = [f'node {n.id}: {describe_failure(f)}' for n, f in failures if n is not node][:3]
        more = f' (other candidates: {"; ".join(others)})' if others else ''
        reason = f'pre-check failed at step {step}: {describe_failure(failure)}{more}'
        return missed(FailureKind.PRE_CHECK, reason, failure)

    def execute(self, node: Node, step: int, cancel: CancelToken) -> CallOutcome:
        """Send the step with its bound fields set; then move the shift by what it did."""
        bound = self._judge.sending(node)
        if bound is not None and bound.substitutions:
            self._on_substituted(step, bound.substitutions)
        out = self._send(node, cancel, bound.values if bound is not None and bound.values
                         else None)
        if out.status is StepStatus.SUCCEEDED:
            self._judge.ran(node)
        return out

    def post_check(self, node: Node, step: int, ended: float) -> Miss | None:
        """Judge the post-check against the recording moved by the shift."""
        return self._sensing.post_check(node, step, ended,
                                        expected=self._judge.expected_post(node))


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
    ) -> None:
        self._store = store
        self.gate = gate
        self._tools = dict(tools)
        self.sensing = SensorJudge(
            hub=hub, tools=self._tools, sensors=sensors,
            allow_unchecked_replay=allow_unchecked_replay, post_timeout=post_timeout,
            sensor_startup_timeout=sensor_startup_timeout)
        self.trees = Trees(store, declared=declared, infer=infer_bindings,
                           max_shift=binding_max_shift, tolerance=element_tolerances(sensors),
                           sources=sensor_sources(sensors))
        self.step_timeout = step_timeout
        self._health = health if health is not None else StoreHealth(
            logger=logging.getLogger(__name__))

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
        return count

    def file(self, *, task: str, variant: str, params_json: str, parent: int | None,
             steps: Sequence[Step]) -> tuple[str, int | None, list[Step]]:
        """File a finished recording by its bindings (:func:`~...bindings.filing.file_steps`)."""
        trees = self.trees
        return file_steps(
            variant=variant, parent=parent, steps=steps,
            params=recorded_params(params_json), plans=partial(trees.plans, task),
            children=lambda tree, at: self._store.children(task=task, variant=tree, parent=at),
            check=self.sensing.check, tolerance=trees.tolerance, declared=trees.declared,
            infer=trees.infer, others=partial(trees.literal_trees, task, variant))

    def trusted(self, tree: TreeView) -> Trusted:
        """Return what the gate lets replay in ``tree`` (:func:`.trust.gate_tree`)."""
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
        session = self._session(tree, params)
        session.gate(trust.nodes, trust.reason())
        verdict = session.pick(candidates, 0)
        node = choose(verdict)
        if node is None:
            miss = verdict.miss or Miss(FailureKind.NO_CANDIDATE, 'nothing passes')
            return DryRun(False, None, miss.reason, miss.failure)
        trajectory_id, _ = locate([p for p in tree.paths(path) if p[2] not in trust.reasons],
                                  node)
        tool = self._tools[node.step.tool]
        if not tool.ready():
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

        :param tree: The tree, as the run read it (:meth:`.trees.Trees.view`).
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
        session = self._session(tree, params, reporter)
        trust = trust if trust is not None else self.trusted(tree)
        session.gate(trust.nodes, trust.reason())
        result = walk(store=self._store, task=tree.task, variant=tree.variant, judge=session,
                      executor=session, reporter=reporter, cancel=cancel, path=path, tree=tree)
        if result.complete and result.trajectory_id:
            _, unsaved = self._health.bookkeep('replay counters', partial(
                self._store.note_replay, trajectory_id=result.trajectory_id))
            if unsaved:
                result = replace(result, unsaved=unsaved)
        return result

    def _session(self, tree: TreeView, params: Mapping[str, Any] | None,
                 reporter: Reporter | None = None) -> NodeWalk:
        """Return the judge and executor of one walk of a tree (its bindings, the run's params)."""
        return NodeWalk(
            sensing=self.sensing, send=self.send, tree=tree, params=params or {},
            tolerance=self.trees.tolerance,
            on_substituted=getattr(reporter, 'substituted', lambda step, subs: None))

    def shadow(self, *, tree: TreeView, params: Mapping[str, Any],
               agreement: Callable[[str], float]) -> ShadowRun:
        """
        Start predicting an agent's steps as a walk of ``tree`` would have.

        :return: The comparison, to which each step is added as it is recorded
            (:class:`.shadow.ShadowRun`).
        """
        return ShadowRun(params=params, plans=tree.plans,
                         children=lambda at: self._store.children(
                             task=tree.task, variant=tree.variant, parent=at),
                         check=self.sensing.check, tolerance=self.trees.tolerance,
                         agreement=agreement, describe=describe_failure)

    def send(self, node: Node, cancel: CancelToken,
             fields: Mapping[str, Any] | None = None) -> CallOutcome:
        """Send ``node``'s payload, with ``fields`` set, and wait (at most ``step_timeout``)."""
        return self._tools[node.step.tool].call(node.step.payload, timeout=self.step_timeout,
                                                cancel=cancel, fields=fields)
