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
A behavior tree document as a py_trees tree: the cache's walk, written out.

Shape, for the steps that may come at one point of the task (a *choice*)::

    Selector "step k"                      (memory: a running branch keeps the tick)
      Sequence "<tool> (learned step 12)"  one per learned step, best ranked first
        PreCheck                           the step's pre-check under its bindings
        Selector "then"
          Sequence "run"
            Call                           send the goal, bound fields set now
            PostCheck                      the step's post-check, moved by the shift
            PreCheck, Call, PostCheck      the steps that follow while there is one way on
            <the choice after them>        or Success at the end of a trajectory
          AskAgent                         a failed check or call: hand off
      AskAgent                             no learned step passes: hand off

An action step recorded with a trace runs watched: its ``Call`` is in a ``Parallel
"watched"`` with a :class:`Watch` leaf (policy: succeed when the Call succeeds; any child's
failure fails it). The Watch is RUNNING while the world stays in the tube of the step's
recording (:mod:`muscle_mem_ros.checks.tube`) and FAILURE the moment it left it: the
Parallel fails, the Call is terminated (which cancels its goal) and the agent is asked
from this step, which is not counted as done, as the cache hands over after a check
during a step. A service (it cannot be canceled) and a step recorded before traces keep
the plain Call.

A subtask step (kind ``subtask``) is a :class:`Subtask` leaf in the Call's place: it runs
the tree the step calls (the document's ``subtrees``, :mod:`.subtrees`) with the call's
parameters, as a tree of its own inside the leaf, and counts as one step of its caller.

The leaves call a :class:`Runtime` (the robot side: :mod:`muscle_mem_ros.cli.runbt`
over rclpy, or a test double), and the pre-checks and bound values come from the same
:class:`~muscle_mem_ros.bindings.judge.BindingJudge` a replay uses, so the tree decides as the
cache would. The agent is asked with the resume point the cache would give it: the
number of steps done (``resume_from_step`` and ``steps_done``, the 0-based index of the
first step left to it, as ExecuteTask counts steps). Every step the run reports is
numbered that way; a learned step's id in the document is always labelled
``learned step N``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

import py_trees
from py_trees.behaviour import Behaviour
from py_trees.common import ParallelPolicy, Status

from .document import BtDocument, BtStep
from ..bindings.judge import BindingJudge, Bound
from ..checks.tube import left_tube
from ..errors import MuscleMemError
from ..records import CheckFailure, Node, Snapshot, ToolKind
from ..replay.subtasks import refusal, subtask_call
from ..resume import Resume

__all__ = ['build_tree', 'Progress', 'Runtime', 'Subtask', 'watched']


class Runtime(Protocol):
    """What the tree's leaves ask of the robot (each call returns at once)."""

    def judge(self) -> BindingJudge:
        """Return the binding judge of the run (one per run: it keeps the shift)."""

    def look(self) -> None:
        """Take the snapshot the next pre-check judges."""

    def start_call(self, node: Node, bound: Bound | None) -> None:
        """Send ``node``'s goal with the bound fields set (:meth:`call_status` follows it)."""

    def call_status(self) -> Status:
        """Return RUNNING until the call ended, then SUCCESS or FAILURE."""

    def cancel_call(self) -> None:
        """Cancel the call in flight (its leaf was interrupted); nothing when none runs."""

    def watch_failure(self) -> CheckFailure | None:
        """Return what left the running call's recorded tube; None while it stays in it."""

    def post_status(self, node: Node, expected: Snapshot | None) -> Status:
        """Return RUNNING until fresh data came, then whether it matches ``expected``."""

    def start_agent(self, resume: Resume) -> None:
        """Send the task to the agent from ``resume.step`` (= the steps done)."""

    def agent_status(self) -> Status:
        """Return RUNNING until the agent answered, then SUCCESS or FAILURE."""

    def subtask(self, doc: BtDocument) -> Runtime:
        """Return the runtime of a subtask's tree ``doc`` (its own judge, its own agent call)."""


@dataclass
class Progress:
    """
    What a run did: steps done by the tree, whether and why the agent was asked.

    :ivar done: Steps the tree completed (the ExecuteTask index of the next step).
    :ivar tools: The tool of each step done, in order.
    :ivar last_node: Learned step id of the last step done (None: none yet).
    """

    done: int = 0
    reason: str = ''
    agent_asked: bool = False
    tools: list[str] = field(default_factory=list)
    last_node: int | None = None
    subtasks_by_agent: list[str] = field(default_factory=list)
    """The subtasks (theirs too) the agent was asked for, each time, in order."""

    def resume(self, reason: str) -> Resume:
        """Return the resume point of a hand-off now: the steps done, and why."""
        return Resume(self.done, reason, tuple(self.tools), last_node=self.last_node)


class _Leaf(py_trees.behaviour.Behaviour):

    def __init__(self, name: str, runtime: Runtime, progress: Progress) -> None:
        super().__init__(name)
        self.runtime = runtime
        self.progress = progress


class PreCheck(_Leaf):
    """Pass when the learned step passes its pre-check now, under its bindings."""

    def __init__(self, node: Node, runtime: Runtime, progress: Progress) -> None:
        super().__init__(f'pre-check {node.id}', runtime, progress)
        self.node = node

    def update(self) -> Status:
        self.runtime.look()
        passing, failures = self.runtime.judge().pick([self.node], self.progress.done)
        if passing:
            return Status.SUCCESS
        if failures:
            self.progress.reason = f'step {self.progress.done}: {failures[0][1].reason}'
        return Status.FAILURE


class Call(_Leaf):
    """Send the learned step's goal (bound fields computed now) and wait for its end."""

    def __init__(self, node: Node, runtime: Runtime, progress: Progress) -> None:
        super().__init__(f'{node.step.tool} (learned step {node.id})', runtime, progress)
        self.node = node

    def initialise(self) -> None:
        self.runtime.start_call(self.node, self.runtime.judge().sending(self.node))

    def update(self) -> Status:
        status = self.runtime.call_status()
        if status is Status.SUCCESS:
            self.runtime.judge().ran(self.node)
            self.progress.done += 1
            self.progress.tools.append(self.node.step.tool)
            self.progress.last_node = self.node.id
        elif status is Status.FAILURE:
            self.progress.reason = f'step {self.progress.done}: {self.node.step.tool} failed'
        return status

    def terminate(self, new_status: Status) -> None:
        if new_status is Status.INVALID and self.status is Status.RUNNING:
            self.runtime.cancel_call()  # interrupted: its watch failed, or the run stops


class Watch(_Leaf):
    """RUNNING while the world stays in the step's recorded tube; FAILURE once it left it."""

    def __init__(self, node: Node, runtime: Runtime, progress: Progress) -> None:
        super().__init__(f'watch {node.id}', runtime, progress)
        self.node = node

    def update(self) -> Status:
        failure = self.runtime.watch_failure()
        if failure is None:
            return Status.RUNNING
        self.progress.reason = (f'check during step {self.progress.done} '
                                f'({self.node.step.tool}) failed: {left_tube(failure)}')
        return Status.FAILURE


class PostCheck(_Leaf):
    """Pass when the sensors after the step match its recording (moved by the shift)."""

    def __init__(self, node: Node, runtime: Runtime, progress: Progress) -> None:
        super().__init__(f'post-check {node.id}', runtime, progress)
        self.node = node

    def update(self) -> Status:
        status = self.runtime.post_status(self.node,
                                          self.runtime.judge().expected_post(self.node))
        if status is Status.FAILURE:
            self.progress.reason = f'post-check of step {self.progress.done - 1} failed'
        return status


class AskAgent(_Leaf):
    """Hand the task to the agent from the steps done so far, as the cache would."""

    def __init__(self, runtime: Runtime, progress: Progress) -> None:
        super().__init__('ask the agent', runtime, progress)

    def initialise(self) -> None:
        # once per run: an agent that failed deeper in the tree is not asked again here
        self.skip = self.progress.agent_asked
        if not self.skip:
            self.progress.agent_asked = True
            self.runtime.start_agent(self.progress.resume(
                self.progress.reason or f'no learned step passes at step {self.progress.done}'))

    def update(self) -> Status:
        return Status.FAILURE if self.skip else self.runtime.agent_status()


class Subtask(_Leaf):
    """
    Run a subtask step: the tree it calls, in the document, as the cache runs a subtask.

    When it starts, the call's parameters are computed (its bound fields, as a Call's) and
    the subtask's tree is built for them with a runtime of its own
    (:meth:`Runtime.subtask`): its own steps, checks and bindings, its own hand-off (the
    agent asked for the subtask, from the subtask's steps done). It counts as one step of
    the tree that calls it, done when the subtask succeeded (by its tree or its agent). A
    call the cache would refuse (:func:`~muscle_mem_ros.replay.subtasks.refusal`: a task
    already running, or too deep) fails, saying why; a subtask with no tree in the
    document is asked of the agent, as the cache asks on a miss.
    """

    def __init__(self, node: Node, runtime: Runtime, progress: Progress,
                 tree: BtDocument | None, running: tuple[str, ...],
                 subtrees: dict[str, BtDocument]) -> None:
        # no parameters in the name: a ':' in it breaks the Graphviz source (export --bt dot)
        super().__init__(f'subtask {node.step.tool} (learned step {node.id})', runtime, progress)
        self.node = node
        self.tree = tree
        self.running = running
        self.subtrees = subtrees
        self.inner: Behaviour | None = None
        self.inner_progress = Progress()
        self.why = ''

    def initialise(self) -> None:
        self.inner, self.inner_progress, self.why = None, Progress(), ''
        bound = self.runtime.judge().sending(self.node)
        try:
            call = subtask_call(self.node.step, bound.values if bound is not None else None)
        except MuscleMemError as err:
            self.why = str(err)
            return
        self.why = refusal(self.running, call.task)
        if self.why:
            return
        doc = replace(self.tree, params=call.params) if self.tree is not None else BtDocument(
            task=call.task, params=call.params, variant='', sensors={}, steps=[])
        self.inner = build_tree(doc, self.runtime.subtask(doc), self.inner_progress,
                                running=self.running, subtrees=self.subtrees)

    def update(self) -> Status:
        if self.inner is None:
            self.progress.reason = f'step {self.progress.done}: {self.why}'
            return Status.FAILURE
        self.inner.tick_once()
        status = self.inner.status
        if status is not Status.RUNNING:
            inner = self.inner_progress
            self.progress.subtasks_by_agent += [self.node.step.tool] * inner.agent_asked + \
                inner.subtasks_by_agent
        if status is Status.SUCCESS:
            self.runtime.judge().ran(self.node)
            self.progress.done += 1
            self.progress.tools.append(self.node.step.tool)
            self.progress.last_node = self.node.id
        elif status is Status.FAILURE:
            inner = self.inner_progress
            why = '; '.join(w for w in (inner.reason, 'the agent failed it' * inner.agent_asked)
                            if w)
            self.progress.reason = (f'step {self.progress.done}: subtask {self.node.step.tool} '
                                    f'failed' + (f' ({why})' if why else ''))
        return status

    def terminate(self, new_status: Status) -> None:
        if new_status is Status.INVALID and self.inner is not None and \
                self.inner.status is Status.RUNNING:
            self.inner.stop(Status.INVALID)  # its running call is canceled


def watched(node: Node) -> bool:
    """Return whether ``node`` runs watched: an action recorded with a trace."""
    return node.step.kind is ToolKind.ACTION and node.step.trace is not None


def build_tree(doc: BtDocument, runtime: Runtime, progress: Progress, *,
               running: tuple[str, ...] = (),
               subtrees: dict[str, BtDocument] | None = None) -> Behaviour:
    """
    Return the root of the py_trees tree of ``doc`` (see the module docstring).

    When the document's params do not fit its variant (:meth:`BtDocument.misfit`), the
    cache would not run this tree with them: the root asks the agent from step 0.

    :param running: The tasks running above it (a subtask's callers, outermost first).
    :param subtrees: The trees its subtask steps call (default: ``doc.subtrees``, the top
        document's; a subtree's tree is given its top document's).
    """
    misfit = doc.misfit()
    if misfit:
        progress.reason = f'step 0: {misfit}'
        return AskAgent(runtime, progress)
    nodes = doc.nodes()
    build = _Build(nodes, runtime, progress, (*running, doc.task),
                   doc.subtrees if subtrees is None else subtrees)
    return _choice(build, doc.steps, 0, end=False)


@dataclass
class _Build:
    """What every leaf of one tree is built with."""

    nodes: dict[int, Node]
    runtime: Runtime
    progress: Progress
    running: tuple[str, ...]
    subtrees: dict[str, BtDocument]


def _choice(b: _Build, steps: list[BtStep], depth: int, *, end: bool) -> Behaviour:
    branches: list[Behaviour] = [_branch(b, s, depth) for s in steps]
    if end and not steps:
        return py_trees.behaviours.Success(name='done')
    last = py_trees.behaviours.Success(name='done') if end else AskAgent(b.runtime, b.progress)
    return py_trees.composites.Selector(f'step {depth}', memory=True,
                                        children=[*branches, last])


def _branch(b: _Build, step: BtStep, depth: int) -> Behaviour:
    nodes, runtime, progress = b.nodes, b.runtime, b.progress
    node = nodes[step.id]
    run: list[Behaviour] = [_call(b, step), PostCheck(node, runtime, progress)]
    while len(step.then) == 1 and not step.end:  # one way on: no choice to make, same run
        step, depth = step.then[0], depth + 1
        run += [PreCheck(nodes[step.id], runtime, progress), _call(b, step),
                PostCheck(nodes[step.id], runtime, progress)]
    run.append(_choice(b, step.then, depth + 1, end=step.end))
    then = py_trees.composites.Selector('then', memory=True, children=[
        py_trees.composites.Sequence('run', memory=True, children=run),
        AskAgent(runtime, progress)])
    return py_trees.composites.Sequence(
        f'{node.step.tool} (learned step {node.id})', memory=True,
        children=[PreCheck(node, runtime, progress), then])


def _call(b: _Build, step: BtStep) -> Behaviour:
    """Return the step's Call, in parallel with its Watch when it runs watched (or Subtask)."""
    node, runtime, progress = b.nodes[step.id], b.runtime, b.progress
    if node.step.kind is ToolKind.SUBTASK:
        return Subtask(node, runtime, progress, b.subtrees.get(step.subtree), b.running,
                       b.subtrees)
    call = Call(node, runtime, progress)
    if not watched(node):
        return call
    policy = ParallelPolicy.SuccessOnSelected(children=[call])
    return py_trees.composites.Parallel('watched', policy=policy,
                                        children=[call, Watch(node, runtime, progress)])
