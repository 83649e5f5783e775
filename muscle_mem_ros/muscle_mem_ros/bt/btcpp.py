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
A behavior tree document as BehaviorTree.CPP v4 XML (the format Nav2 and Groot2 read).

The same shape as :mod:`.tree` with BT.CPP's control nodes (``Fallback`` for a
selector, ``Sequence``, ``Parallel``) and five leaf types, declared with their ports in
the ``TreeNodesModel`` so Groot2 shows them and a host program can register them:

* ``MuscleMemPreCheck`` (condition): ``step``, ``expected`` (the recorded pre snapshot,
  ``name=v1;v2;...`` per sensor, ``|`` between sensors), ``tolerance`` (per sensor);
* ``MuscleMemCall`` (action): ``step``, ``tool``, ``kind``, ``type``, ``goal`` (the
  goal as JSON), ``bindings`` (``field<-source+offset`` separated by ``;``; an orientation
  binding ``field<-source*turn(x,y,z,w)``: the goal's quaternion is the source frame's rotation
  times that turn);
* ``MuscleMemPostCheck`` (condition): ``step``, ``expected``, ``tolerance``;
* ``MuscleMemAskAgent`` (action): ``task``, ``params`` (JSON);
* ``MuscleMemWatch`` (action): ``step``, ``sensors`` (the traced sensors, ``;`` between
  them), ``tolerance``, ``trace`` (the recorded trace as JSON, the mapping of
  :mod:`.traces`). RUNNING while the world stays in the recording's tube, FAILURE the
  moment it left it.

An action step recorded with a trace runs its call watched, as in :mod:`.tree`:
``<Parallel success_count="1" failure_count="1">`` over its ``MuscleMemCall`` and its
``MuscleMemWatch`` (BT.CPP v4's ports: the call's success ends it, and halts the watch;
the watch's failure fails it, and halts the call, whose halt must cancel the goal).

A subtask step (:mod:`.subtrees`) calls its subtree: ``<SubTree ID="pick" .../>`` (ports
``step``, ``task``, ``bindings``: literals; its name says the parameters) between its pre-
and post-check, and the file gains ``<BehaviorTree ID="pick">``, the subtask's own tree
(each subtree once; its ask-the-agent leaves ask for the subtask with its parameters).
A subtask the store has no tree for is a ``MuscleMemAskAgent`` of the subtask, as the
cache asks the agent on a miss; a call the cache would refuse (a task already running
above it, or too deep: :func:`~muscle_mem_ros.replay.subtasks.refusal`) is an
``AlwaysFailure`` saying why (a ``SubTree`` of a tree it is in would never end: the
host's factory recurses while it builds the tree).

A leaf's goal and bindings are data for the host's implementation of these five
types: the tree says what to send and check, the host how (over its own ROS node).
The expected snapshots are those of the document as edited
(:func:`~.document.as_run`): an edited goal's consequences are in them. A watch's trace
is what an import keeps of it (:func:`~.traces.imported_trace`: the sensors an edit
moves are left out), so the host judges it as recorded, with no shift to apply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import json
from typing import Any
from xml.etree import ElementTree

from .document import as_run, AsRun, BtDocument, BtStep
from .traces import imported_trace, trace_data
from ..bindings.rules import Binding
from ..records import Snapshot, ToolKind
from ..replay.subtasks import refusal

__all__ = ['LEAVES', 'to_xml']

LEAVES: dict[str, tuple[str, tuple[str, ...]]] = {
    'MuscleMemPreCheck': ('Condition', ('step', 'expected', 'tolerance')),
    'MuscleMemCall': ('Action', ('step', 'tool', 'kind', 'type', 'goal', 'bindings')),
    'MuscleMemPostCheck': ('Condition', ('step', 'expected', 'tolerance')),
    'MuscleMemAskAgent': ('Action', ('task', 'params')),
    'MuscleMemWatch': ('Action', ('step', 'sensors', 'tolerance', 'trace')),
}
"""Leaf ID -> (BT.CPP node category, input ports)."""


def to_xml(doc: BtDocument) -> str:
    """Return the document as BehaviorTree.CPP v4 XML (its subtrees each a ``BehaviorTree``)."""
    tree_id = _identifier(doc.task)
    root = ElementTree.Element('root', BTCPP_format='4', main_tree_to_execute=tree_id)
    _Writer(root, doc.subtrees, tree_id).tree(doc, tree_id, (doc.task,))
    model = ElementTree.SubElement(root, 'TreeNodesModel')
    for leaf, (category, ports) in LEAVES.items():
        element = ElementTree.SubElement(model, category, ID=leaf)
        for port in ports:
            ElementTree.SubElement(element, 'input_port', name=port)
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding='unicode', xml_declaration=True) + '\n'


class _Writer:
    """Writes one ``BehaviorTree`` per tree: the document's, then each subtree it calls."""

    def __init__(self, root: ElementTree.Element, subtrees: dict[str, BtDocument],
                 main: str) -> None:
        self._root = root
        self._subtrees = subtrees
        self._ids: dict[str, str] = {}
        self._used = {main}

    def tree(self, doc: BtDocument, tree_id: str, chain: tuple[str, ...]) -> None:
        """Write ``doc`` as the ``BehaviorTree`` ``tree_id``; ``chain``: the tasks running."""
        behavior = ElementTree.SubElement(self._root, 'BehaviorTree', ID=tree_id)
        runs = as_run(doc)
        behavior.append(_choice(_Tree(doc, runs, lambda s: self._subtask(s, chain)),
                                doc.steps, 0, end=False))

    def _subtask(self, step: BtStep, chain: tuple[str, ...]) -> ElementTree.Element:
        """Return a subtask step's call: a ``SubTree`` of the tree it calls (see the module)."""
        goal = step.goal if isinstance(step.goal, dict) else {}
        params = json.dumps(goal.get('params', {}), separators=(',', ':'))
        why = refusal(chain, step.tool)
        if why:  # the cache refuses it when it runs: never a SubTree of a running tree
            return ElementTree.Element('AlwaysFailure', name=f'subtask {step.tool} refused: {why}')
        sub = self._subtrees.get(step.subtree)
        if sub is None or not sub.steps:  # not learned: the cache asks the agent for it
            return ElementTree.Element('MuscleMemAskAgent', name=f'ask the agent: subtask '
                                       f'{step.tool} (not learned)', task=step.tool,
                                       params=params)
        tree_id = self._ids.get(step.subtree)
        if tree_id is None:
            tree_id = self._ids[step.subtree] = self._free(_identifier(step.subtree))
            self.tree(sub, tree_id, (*chain, step.tool))
        return ElementTree.Element(
            'SubTree', ID=tree_id, name=f'subtask {step.tool} {params} '
                                        f'{_title(step)[len(step.tool) + 1:]}',
            step=str(step.id), task=step.tool,
            bindings=';'.join(_binding_text(b) for b in step.bindings))

    def _free(self, wanted: str) -> str:
        tree_id, n = wanted, 2
        while tree_id in self._used:
            tree_id, n = f'{wanted}_{n}', n + 1
        self._used.add(tree_id)
        return tree_id


@dataclass(frozen=True)
class _Tree:
    """One tree being written: its document, its steps as run, and how a subtask is called."""

    doc: BtDocument
    runs: dict[int, AsRun]
    subtask: Callable[[BtStep], ElementTree.Element]


def _choice(tree: _Tree, steps: list[BtStep], depth: int, *, end: bool) -> ElementTree.Element:
    if end and not steps:
        return ElementTree.Element('AlwaysSuccess', name='done')
    choice = ElementTree.Element('Fallback', name=f'step {depth}')
    for step in steps:
        choice.append(_branch(tree, step, depth))
    choice.append(_ask(tree.doc) if not end else
                  ElementTree.Element('AlwaysSuccess', name='done'))
    return choice


def _branch(tree: _Tree, step: BtStep, depth: int) -> ElementTree.Element:
    branch = ElementTree.Element('Sequence', name=_title(step))
    tolerance = _tolerances(tree.doc)
    runs = tree.runs
    branch.append(_check('MuscleMemPreCheck', 'pre-check', step, _vectors(runs[step.id].pre),
                         tolerance))
    then = ElementTree.SubElement(branch, 'Fallback', name='then')
    run = ElementTree.SubElement(then, 'Sequence', name='run')
    run.extend(_call_and_post(tree, step, tolerance))
    while len(step.then) == 1 and not step.end:  # one way on: the same run (see .tree)
        step, depth = step.then[0], depth + 1
        run.append(_check('MuscleMemPreCheck', 'pre-check', step, _vectors(runs[step.id].pre),
                          tolerance))
        run.extend(_call_and_post(tree, step, tolerance))
    run.append(_choice(tree, step.then, depth + 1, end=step.end))
    then.append(_ask(tree.doc))
    return branch


def _title(step: BtStep) -> str:
    bound = ', '.join(f'{b.field} <- {b.source}' for b in step.bindings)
    return (f'{step.tool} (learned step {step.id}; trajectory '
            f'{",".join(str(t) for t in step.trajectories) or "-"}; succeeded '
            f'{step.successes} times{"; bound " + bound if bound else ""})')


def _check(kind: str, what: str, step: BtStep, vectors: dict[str, list[float]] | None,
           tolerance: str) -> ElementTree.Element:
    return ElementTree.Element(kind, name=f'{what} {step.id}', step=str(step.id),
                               expected=_vector_text(vectors), tolerance=tolerance)


def _vectors(snapshot: Snapshot | None) -> dict[str, list[float]] | None:
    if snapshot is None:
        return None
    return {name: list(vector) for name, vector in snapshot.features.items()}


def _call_and_post(tree: _Tree, step: BtStep, tolerance: str) -> list[ElementTree.Element]:
    runs = tree.runs
    if step.kind is ToolKind.SUBTASK:
        return [tree.subtask(step), _check('MuscleMemPostCheck', 'post-check', step,
                                           _vectors(runs[step.id].post), tolerance)]
    call = ElementTree.Element(
        'MuscleMemCall', name=_title(step), step=str(step.id), tool=step.tool,
        kind=step.kind.value, type=step.type_name,
        goal=json.dumps(step.goal, separators=(',', ':')),
        bindings=';'.join(_binding_text(b) for b in step.bindings))
    trace = imported_trace(step, runs[step.id]) if step.kind is ToolKind.ACTION else None
    if trace is not None:  # the call watched: in parallel with its watch (see the docstring)
        watch = ElementTree.Element(
            'MuscleMemWatch', name=f'watch {step.id}', step=str(step.id),
            sensors=';'.join(trace.sensors), tolerance=tolerance,
            trace=json.dumps(trace_data(trace), separators=(',', ':')))
        parallel = ElementTree.Element('Parallel', name='watched', success_count='1',
                                       failure_count='1')
        parallel.extend([call, watch])
        call = parallel
    return [call, _check('MuscleMemPostCheck', 'post-check', step,
                         _vectors(runs[step.id].post), tolerance)]


def _ask(doc: BtDocument) -> ElementTree.Element:
    return ElementTree.Element('MuscleMemAskAgent', name='ask the agent', task=doc.task,
                               params=json.dumps(doc.params, separators=(',', ':')))


def _vector_text(vectors: dict[str, list[float]] | None) -> str:
    if not vectors:
        return ''
    return '|'.join(f'{name}={";".join(f"{v:.6g}" for v in vector)}'
                    for name, vector in vectors.items())


def _tolerances(doc: BtDocument) -> str:
    return '|'.join(f'{name}={";".join(str(t) for t in _list(spec.get("tolerance")))}'
                    f'/{spec.get("mode", "abs")}' for name, spec in doc.sensors.items())


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _identifier(text: str) -> str:
    """Return ``text`` as a tree ID (letters, digits and _)."""
    out = ''.join(c if c.isalnum() or c == '_' else '_' for c in text)
    return out if out and not out[0].isdigit() else f'task_{out}'


def _binding_text(b: Binding) -> str:
    """Return one binding as a leaf's port holds it (an orientation's: its turn, x y z w)."""
    if b.turn is not None:
        return f'{b.field}<-{b.source}*turn({",".join(f"{v:.9g}" for v in b.turn)})'
    return f'{b.field}<-{b.source}{b.offset:+g}'
