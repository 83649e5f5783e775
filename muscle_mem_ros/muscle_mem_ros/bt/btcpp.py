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
  goal as JSON), ``bindings`` (``field<-source+offset`` separated by ``;``);
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

A leaf's goal and bindings are data for the host's implementation of these five
types: the tree says what to send and check, the host how (over its own ROS node).
The expected snapshots are those of the document as edited
(:func:`~.document.as_run`): an edited goal's consequences are in them. A watch's trace
is what an import keeps of it (:func:`~.traces.imported_trace`: the sensors an edit
moves are left out), so the host judges it as recorded, with no shift to apply.
"""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree

from .document import as_run, AsRun, BtDocument, BtStep
from .traces import imported_trace, trace_data
from ..records import Snapshot, ToolKind

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
    """Return the document as BehaviorTree.CPP v4 XML."""
    tree_id = _identifier(doc.task)
    root = ElementTree.Element('root', BTCPP_format='4', main_tree_to_execute=tree_id)
    behavior = ElementTree.SubElement(root, 'BehaviorTree', ID=tree_id)
    behavior.append(_choice(doc, doc.steps, 0, end=False, runs=as_run(doc)))
    model = ElementTree.SubElement(root, 'TreeNodesModel')
    for leaf, (category, ports) in LEAVES.items():
        element = ElementTree.SubElement(model, category, ID=leaf)
        for port in ports:
            ElementTree.SubElement(element, 'input_port', name=port)
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding='unicode', xml_declaration=True) + '\n'


def _choice(doc: BtDocument, steps: list[BtStep], depth: int, *, end: bool,
            runs: dict[int, AsRun]) -> ElementTree.Element:
    if end and not steps:
        return ElementTree.Element('AlwaysSuccess', name='done')
    choice = ElementTree.Element('Fallback', name=f'step {depth}')
    for step in steps:
        choice.append(_branch(doc, step, depth, runs))
    choice.append(_ask(doc) if not end else ElementTree.Element('AlwaysSuccess', name='done'))
    return choice


def _branch(doc: BtDocument, step: BtStep, depth: int,
            runs: dict[int, AsRun]) -> ElementTree.Element:
    branch = ElementTree.Element('Sequence', name=_title(step))
    tolerance = _tolerances(doc)
    branch.append(_check('MuscleMemPreCheck', 'pre-check', step, _vectors(runs[step.id].pre),
                         tolerance))
    then = ElementTree.SubElement(branch, 'Fallback', name='then')
    run = ElementTree.SubElement(then, 'Sequence', name='run')
    run.extend(_call_and_post(step, tolerance, runs))
    while len(step.then) == 1 and not step.end:  # one way on: the same run (see .tree)
        step, depth = step.then[0], depth + 1
        run.append(_check('MuscleMemPreCheck', 'pre-check', step, _vectors(runs[step.id].pre),
                          tolerance))
        run.extend(_call_and_post(step, tolerance, runs))
    run.append(_choice(doc, step.then, depth + 1, end=step.end, runs=runs))
    then.append(_ask(doc))
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


def _call_and_post(step: BtStep, tolerance: str,
                   runs: dict[int, AsRun]) -> list[ElementTree.Element]:
    call = ElementTree.Element(
        'MuscleMemCall', name=_title(step), step=str(step.id), tool=step.tool,
        kind=step.kind.value, type=step.type_name,
        goal=json.dumps(step.goal, separators=(',', ':')),
        bindings=';'.join(f'{b.field}<-{b.source}{b.offset:+g}' for b in step.bindings))
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
