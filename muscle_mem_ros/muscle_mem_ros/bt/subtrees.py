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
Subtask steps in a behavior tree document: the tree each call runs, in the same document.

A subtask step (kind ``subtask``, :mod:`muscle_mem_ros.replay.subtasks`) calls another
task through the cache: its goal is the subtask's name and parameters (``{"params":
{"x": 0.3}, "task": "pick"}``), with pre and post checks as any step. The document holds
the tree it calls as one of its ``subtrees`` (a document of its own: task, params,
variant, steps) and the step names it (``subtree``). The subtrees of every level are
kept in the top document, each once, as BehaviorTree.CPP keeps every ``BehaviorTree``
of a file at its root; a subtree's subtask steps name trees there too.

Which tree a call runs: the one the cache would choose
(:meth:`~muscle_mem_ros.replay.treeview.Trees.variant_for`) for the call's parameters as
the document runs in the world it was recorded in (the step's parameters with its bound
fields set from the document's params, :func:`~.document.as_run`; the recorded ones when
the document's bindings refuse that world). Its params are those parameters. A subtask
the store has no tree for is a subtree with no steps: the agent is asked for it, as the
cache asks it on a miss. A subtree is named after its task (``pick``; ``pick#2`` for a
second tree of the same task).

A call the cache would refuse when it runs (:func:`~muscle_mem_ros.replay.subtasks.refusal`:
a task already running above it, or deeper than
:data:`~muscle_mem_ros.replay.subtasks.MAX_DEPTH`) still names its subtree (a store may
hold ``a`` calling ``b`` and ``b`` calling ``a``, learned in two separate runs): the
py_trees tree refuses it when it is called (:mod:`.tree`), the BehaviorTree.CPP export
writes it as a failure (:mod:`.btcpp`); neither ever expands a tree into itself.
"""

from __future__ import annotations

from collections.abc import Iterator
import json

import yaml

from .document import as_run, BtDocument, BtStep, build
from ..errors import ConfigError, MuscleMemError
from ..records import ToolKind
from ..replay.subtasks import subtask_call, SubtaskCall
from ..replay.treeview import Trees
from ..store.base import Store

__all__ = ['attach', 'call_of', 'documents', 'key_text', 'subtask_steps']


def call_of(step: BtStep, values: dict[str, object] | None = None) -> SubtaskCall:
    """
    Return what a subtask step calls: its goal's task and params, ``values`` set.

    :param values: Bound goal leaves (``params.x`` -> value), as the binding judge computes.
    :raises ConfigError: the goal is not ``{"params": {...}, "task": TOOL}``, or a value
        names a field it does not have.
    """
    try:
        call = subtask_call(step.node(0, None).step, values)
    except MuscleMemError as err:
        raise ConfigError(f'subtask step {step.id}: {err}') from err
    if call.task != step.tool:
        raise ConfigError(f'subtask step {step.id}: its goal calls task {call.task!r}, '
                          f'its tool is {step.tool!r}')
    return call


def subtask_steps(doc: BtDocument) -> Iterator[BtStep]:
    """Yield the subtask steps of ``doc`` (not of its subtrees), depth first."""
    return (step for _, step, _ in doc.walk() if step.kind is ToolKind.SUBTASK)


def documents(doc: BtDocument) -> list[tuple[str, BtDocument]]:
    """Return ``doc`` (named '') and its subtrees, by name: every tree the document holds."""
    return [('', doc), *doc.subtrees.items()]


def attach(store: Store, doc: BtDocument, trees: Trees) -> None:
    """
    Add to ``doc`` the tree of every subtask its steps call, and theirs (see the module).

    :param store: The cache the document was built from.
    :param doc: The top document (its ``subtrees`` are filled, its subtask steps named).
    :param trees: The store's trees as the node learns them (variants and plans).
    """
    named: dict[tuple[str, str], str] = {}
    todo = [doc]
    while todo:
        current = todo.pop(0)
        try:
            runs = as_run(current)
        except ConfigError:
            runs = {}
        for step in subtask_steps(current):
            run = runs.get(step.id)
            try:
                call = call_of(step, run.values if run is not None else None)
            except ConfigError:
                call = call_of(step)
            variant = trees.variant_for(call.task, call.params, call.params_json)
            name = named.get((call.task, variant))
            if name is None:
                name = named[(call.task, variant)] = _free(doc.subtrees, call.task)
                sub = None
                if variant in store.trees(task=call.task):
                    try:  # only the caller's body's branches (a file records one body)
                        sub = build(store, task=call.task, variant=variant,
                                    plans=trees.plans(call.task, variant), sensors=doc.sensors,
                                    params=call.params, tolerance=trees.tolerance,
                                    body=doc.body or None)
                    except ConfigError:  # none learned on it
                        sub = None
                if sub is None:  # never learned here (or forgotten): the cache would ask the agent
                    sub = BtDocument(task=call.task, params=call.params,
                                     variant=call.params_json, sensors=doc.sensors, steps=[])
                doc.subtrees[name] = sub
                todo.append(sub)
            step.subtree = name


def _free(taken: dict[str, BtDocument], task: str) -> str:
    if task not in taken:
        return task
    n = 2
    while f'{task}#{n}' in taken:
        n += 1
    return f'{task}#{n}'


def key_text(name: str) -> str:
    """Return ``name`` as a YAML mapping key (quoted when YAML would read it otherwise)."""
    try:
        if yaml.safe_load(f'{name}: 1') == {name: 1}:
            return name
    except yaml.YAMLError:
        pass
    return json.dumps(name)
