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
``muscle-mem export --bt`` and ``muscle-mem import``: a learned task as a behavior tree and back.

Export writes one learned tree of a task (its variant chosen by ``--params-json``, as a
run with those parameters would choose it) as the YAML document of
:mod:`muscle_mem_ros.bt.yamlfile` (``--bt py_trees``, run by ``muscle-mem run-bt``), as
BehaviorTree.CPP v4 XML (``--bt btcpp``), or as the py_trees tree's Graphviz source
(``--bt dot``). Import reads a reviewed document back into a store: each of its paths a
trajectory, approved by ``--who`` (``replay_requires: approval``; required, since an
approval names who reviewed the file, not the account that ran the import); every goal must build
a message of its type first, else nothing is written and the error names the step.

What is imported is what the document runs as in the world it was recorded in
(:func:`~muscle_mem_ros.bt.document.as_run`): goals as edited with their bound fields
set from its params, and the snapshots moved by its edits (the post elements that
followed an edited field, at that step and after), so the cache's replays of the
imported tree expect what the edits do. A document whose params do not fit its
variant (a leaf it holds literal edited) is refused, as run-bt asks the agent for it
instead of running it: the cache and run-bt decide the same on a params edit. It is
filed as a run with its params looks trees up: under the document's variant. Each
action step keeps its trace (what
the cache's replays of it are watched against), less the sensors the document's edits
move (:func:`~muscle_mem_ros.bt.traces.imported_trace`).
"""

from __future__ import annotations

import argparse
from collections import Counter
import json
from pathlib import Path
from typing import Any

from .inventory import open_cli_store, task_trajectories
from .output import Output
from .paramsfile import BindingSettings, read_binding_settings
from ..bindings.rules import element_tolerances, sensor_sources
from ..bindings.variants import canonical, served
from ..body import ANY_BODY, Body, resolve, shown
from ..bt.btcpp import to_xml
from ..bt.document import as_run, BtDocument, build
from ..bt.subtrees import attach, call_of, documents
from ..bt.traces import imported_trace
from ..bt.yamlfile import dump, load
from ..errors import ConfigError, MuscleMemError
from ..records import Step, StepStatus, ToolKind
from ..replay.gates import approve
from ..replay.subtasks import subtask_step
from ..replay.treeview import Trees
from ..store import Store

__all__ = ['add_import_parser', 'export_bt', 'exported_body', 'goal_steps', 'import_bt',
           'import_variant', 'imported_body', 'run_export', 'run_import']

SUFFIX = {'py_trees': '.bt.yaml', 'btcpp': '.xml', 'dot': '.dot'}


def export_bt(store: Store, task: str, *, kind: str, params: dict[str, Any] | None,
              params_file: str | None = None, node_name: str = 'muscle_mem',
              body: str = '') -> str:
    """
    Return one learned tree of ``task`` as a behavior tree of ``kind``.

    :param params: The run's parameters (choose the tree as a run would); None: the
        task's only tree.
    :param params_file: The node's params file: sensor tolerances and declared bindings.
    :param body: The body whose trajectories go out (as a person names it); '': the
        tree's only one (:func:`exported_body`).
    :raises ConfigError: no such task, several trees and no ``params``, or a tree that
        mixes bodies and no ``body``.
    """
    settings = read_binding_settings(params_file, node_name) if params_file else \
        BindingSettings()
    trees = Trees(store, declared=settings.declared, infer=settings.infer,
                  max_shift=settings.max_shift, tolerance=element_tolerances(settings.sensors),
                  sources=sensor_sources(settings.sensors))
    task_trajectories(store, task)  # raises, listing the tasks, when there is none
    found = store.trees(task=task)
    if params is not None:
        variant = trees.variant_for(task, params, canonical(params))
        if variant not in found:
            raise ConfigError(f'task {task!r} has no tree for params {canonical(params)}')
    elif len(found) == 1:
        variant = next(iter(found))
    else:
        raise ConfigError(f'task {task!r} has {len(found)} trees ({", ".join(sorted(found))}):'
                          ' choose one with --params-json')
    sensors = {s.name: {'tolerance': list(s.tolerance), 'mode': s.mode.value}
               for s in settings.sensors}
    doc = build(store, task=task, variant=variant, plans=trees.plans(task, variant),
                sensors=sensors, params=params, tolerance=trees.tolerance,
                body=exported_body(store, task, variant, body))
    attach(store, doc, trees)
    if kind == 'py_trees':
        return dump(doc)
    if kind == 'btcpp':
        return to_xml(doc)
    return dot(doc)


def exported_body(store: Store, task: str, variant: str, wanted: str) -> str:
    """
    Return the key of the body a tree goes out for: the one chosen, else its only one.

    A file records one body, so that an import keeps it: a tree whose trajectories were
    learned on several bodies goes out only for the one ``wanted`` names.

    :raises ConfigError: ``wanted`` names no body of the tree, or the tree mixes bodies
        and none is chosen (naming them, with their trajectories).
    """
    counts = Counter(t.body for t in store.trajectories(task=task, variant=variant))
    if wanted:
        try:
            key = resolve(wanted, [k for k in counts if Body.parse(k) is not None])
        except ValueError as err:
            raise ConfigError(f'--body: {err}') from err
        if key not in counts:
            raise ConfigError(f'--body: task {task!r} has no trajectory learned on {shown(key)}')
        return key
    if len(counts) > 1:
        listed = ', '.join(f'{shown(k)}: {n}' for k, n in sorted(counts.items()))
        raise ConfigError(f'task {task!r}: its tree mixes bodies (trajectories: {listed}), '
                          'and a file records one: choose it with --body')
    return next(iter(counts))


def dot(doc: BtDocument) -> str:
    """Return the py_trees tree of ``doc`` as Graphviz source (render with ``dot -Tpng``)."""
    import py_trees

    from ..bt.tree import build_tree, Progress
    root = build_tree(doc, None, Progress())  # type: ignore[arg-type]  # shape only
    return str(py_trees.display.dot_tree(root, with_blackboard_variables=False).to_string())


def add_export_options(cmd: argparse.ArgumentParser) -> None:
    """Add ``--bt``, ``--out`` and ``--params-json`` to the export subcommand."""
    cmd.add_argument('--bt', choices=sorted(SUFFIX), metavar='KIND',
                     help='write a behavior tree instead: py_trees (the YAML document '
                          'muscle-mem run-bt ticks), btcpp (BehaviorTree.CPP v4 XML) or dot '
                          '(the py_trees tree as Graphviz source)')
    cmd.add_argument('--out', metavar='FILE', help='with --bt: file to write '
                     '(default TASK.bt.yaml, TASK.xml, TASK.dot)')
    cmd.add_argument('--params-json', metavar='JSON',
                     help='with --bt: the parameters the tree runs with (chooses the tree '
                          "as a run would; default the tree's own)")
    cmd.add_argument('--body', metavar='BODY', default='',
                     help='with --bt: the body whose branches go out (panda@3f2c, as '
                          'muscle-mem bodies lists it), recorded in the file; required when '
                          "the tree mixes bodies (default: the tree's only body)")


def run_export(args: argparse.Namespace, out: Output) -> int:
    """Write the behavior tree the arguments ask for."""
    params = _params(args.params_json)
    with open_cli_store(args.store) as store:
        text = export_bt(store, args.task, kind=args.bt, params=params,
                         params_file=args.params, node_name=args.node_name, body=args.body)
    path = Path(args.out or f'{args.task}{SUFFIX[args.bt]}')
    path.write_text(text, encoding='utf-8')
    if out.json_mode:
        out.json({'path': str(path), 'bt': args.bt})
    else:
        out.print(f'wrote {path} ({args.bt}) of task {args.task!r}')
    return 0


def _params(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as err:
        raise ConfigError(f'--params-json: not JSON: {err}') from err
    if not isinstance(value, dict):
        raise ConfigError('--params-json: not a JSON object')
    return value


def goal_steps(doc: BtDocument) -> dict[int, Step]:
    """
    Return every step of ``doc`` as a store step, as the document runs it (:func:`as_run`).

    Its goal is built as a message of its type with the bound fields set from the
    document's params; its snapshots are moved by the document's edits, and its trace
    keeps what they leave as recorded.

    :raises ConfigError: a goal that does not deserialize to its type, or a step whose
        bindings refuse the recorded world under the document's params (naming the step).
    """
    from rclpy.serialization import serialize_message

    from ..ros.messages.fromdata import message_from_data
    from ..ros.messages.goalfields import set_fields
    from ..ros.messages.introspection import message_to_json, resolve_type
    runs = as_run(doc)
    built: dict[int, Step] = {}
    for _, step, _ in doc.walk():
        kind = 'action' if step.kind is ToolKind.ACTION else 'srv'
        run = runs[step.id]
        if step.kind is ToolKind.SUBTASK:  # its goal is the call: task and params, as JSON
            call = call_of(step, dict(run.values))
            built[step.id] = subtask_step(call.task, call.params, pre=run.pre, post=run.post,
                                          duration=0.0)
            continue
        try:
            interface = resolve_type(step.type_name, kind=kind)
            cls = interface.Goal if step.kind is ToolKind.ACTION else interface.Request
            message = message_from_data(cls, step.goal)
            set_fields(message, run.values)
            payload = bytes(serialize_message(message))
        except (MuscleMemError, ValueError, TypeError) as err:
            raise ConfigError(f'step {step.id} ({step.tool}): its goal is not a '
                              f'{step.type_name}: {err}') from err
        built[step.id] = Step(tool=step.tool, kind=step.kind, type_name=step.type_name,
                              payload=payload, payload_json=message_to_json(message),
                              pre=run.pre, post=run.post, status=StepStatus.SUCCEEDED,
                              trace=imported_trace(step, run))
    return built


def import_variant(doc: BtDocument) -> str:
    """
    Return the tree an imported document is filed under: where a run with its params looks.

    The document's variant, with the leaves its declared bindings follow bound
    (:func:`~muscle_mem_ros.bindings.variants.served`), when it binds parameters (its
    params fit it: one that does not is refused before,
    :func:`~muscle_mem_ros.bt.document.as_run`, as run-bt does not run it); else the
    params' literal tree, the variant itself.
    """
    variant = served(doc.variant, [p for _, s, _ in doc.walk() if (p := s.plan)])
    if variant.has_bound and variant.fits(doc.params):
        return variant.text
    return canonical(doc.params)


def import_bt(store: Store, doc: BtDocument, steps: dict[int, Step], *, who: str,
              body: str = '') -> list[int]:
    """
    Add every path of ``doc`` to ``store`` as a trajectory approved by ``who``.

    :param steps: The document's steps, built by :func:`goal_steps` (so a goal that does
        not fit its type stopped the import before anything was opened for writing).
    :param body: Key of the body the trajectories are for ('': unknown, any body).
    :return: The trajectory ids.
    """
    ids = []
    params_json = canonical(doc.params)
    reviewed: dict[int, int] = {}  # learned step id -> the document's step id
    with store.batch():
        for path in doc.paths():
            info = store.add_trajectory(task=doc.task, variant=import_variant(doc),
                                        params_json=params_json,
                                        steps=[steps[s.id] for s in path], body=body)
            ids.append(info.id)
            reviewed.update(zip(info.node_ids, (s.id for s in path)))
    # the approval covers the bindings the reviewer read in the document, nothing inferred later
    shown = doc.plans()
    plans = {node: plan for node, step in reviewed.items()
             if (plan := shown.get(step)) is not None}
    for trajectory_id in ids:
        approve(store, task=doc.task, trajectory_id=trajectory_id, who=who,
                plans=lambda _variant: plans)
    return ids


def add_import_parser(cmd: argparse.ArgumentParser) -> None:
    """Add the import arguments."""
    cmd.add_argument('file', metavar='FILE', help='a behavior tree document (--bt py_trees)')
    cmd.add_argument('--who', metavar='NAME',
                     help='who reviewed it (required: an import approves what it brings, and '
                          'an approval names a person); stored as the approval of every '
                          'trajectory imported')
    cmd.add_argument('--body', metavar='BODY', default='',
                     help='the body the imported trajectories replay on (panda@3f2c, as '
                          'muscle-mem bodies lists it, or the key a node logs), for a file '
                          'that records none; a file that records a body is imported for '
                          'it, and another body given is refused. Default: the body the '
                          'file records, else any body')
    cmd.set_defaults(run=run_import)


def run_import(args: argparse.Namespace, out: Output) -> int:
    """Import a reviewed document, approved."""
    who = (args.who or '').strip()
    if not who:  # an approval names who reviewed the file, never the account that ran this
        raise ConfigError('--who NAME is required: who reviewed this file (an import approves '
                          'every trajectory it brings)')
    path = Path(args.file)
    doc = load(path.read_text(encoding='utf-8'), source=str(path))
    # every tree's goals are built before the store is opened: a bad one writes nothing
    trees = [(tree, goal_steps(tree)) for name, tree in documents(doc) if not name or tree.steps]
    recorded = imported_body(doc, args.body)  # another body than the file's: nothing opened
    subtasks: dict[str, list[int]] = {}
    with open_cli_store(args.store, write=True) as store:
        try:
            body = recorded or resolve(args.body, [k for k in store.bodies()
                                                   if Body.parse(k) is not None])
        except ValueError as err:
            raise ConfigError(f'--body: {err}') from err
        ids = import_bt(store, doc, trees[0][1], who=who, body=body)
        for tree, steps in trees[1:]:  # each subtree as its own task's trajectories
            subtasks.setdefault(tree.task, []).extend(
                import_bt(store, tree, steps, who=who, body=body))
    if out.json_mode:
        out.json({'task': doc.task, 'trajectories': ids, 'approved_by': who,
                  'subtasks': subtasks, 'body': body})
    else:
        also = '; '.join(f'subtask {t!r}: {", ".join(map(str, i))}' for t, i in subtasks.items())
        out.print(f'imported {len(ids)} trajector{"y" if len(ids) == 1 else "ies"} of task '
                  f'{doc.task!r} ({", ".join(map(str, ids))})'
                  f'{" and " + also if also else ""}, approved by {who}, for '
                  f'{"any body" if Body.parse(body) is None else f"body {shown(body)}"}')
    return 0


def imported_body(doc: BtDocument, wanted: str) -> str:
    """
    Return the key of the body a document is imported for, when it is settled without a store.

    The body the file records (its branches were learned there): ``wanted`` may name
    only it. A file that records none: :data:`~..body.ANY_BODY` without ``wanted``, ''
    with it (the store resolves the name).

    :raises ConfigError: ``wanted`` names another body than the one the file records.
    """
    if Body.parse(doc.body) is None:
        return '' if wanted else (doc.body or ANY_BODY)
    if not wanted:
        return doc.body
    try:
        if resolve(wanted, [doc.body]) == doc.body:
            return doc.body
    except ValueError:
        pass
    raise ConfigError(f'--body {wanted}: the branches of this file were learned on '
                      f'{shown(doc.body)}; stamping another body on them would replay them '
                      'where they were not learned (if the two are one for the cache, '
                      'declare it: muscle-mem bodies --compatible)')
