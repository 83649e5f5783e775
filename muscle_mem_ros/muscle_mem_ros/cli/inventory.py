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
What a store has learned, as plain data: tasks, trees, trajectories, counters.

The command line prints these as tables or JSON; nothing here prints or writes.
Every function takes an open :class:`~muscle_mem_ros.store.Store`, so a
PostgreSQL store (``open_store`` with a URL) works as an SQLite file does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
import json
import os
from pathlib import Path
from typing import Any

from .paramsfile import BindingSettings
from .thumbnails import failed_data, write_thumbnails
from ..bindings.learning import learn
from ..bindings.rules import element_tolerances, sensor_sources
from ..body import shown
from ..errors import MuscleMemError, UnknownTrajectoryError
from ..records import (
    Approval, FailedView, Node, ReplayBook, Snapshot, ToolKind, TrajectoryInfo)
from ..replay.booking import held
from ..replay.gates import Gate, GateKind, trusted
from ..replay.subtasks import subtask_call
from ..replay.treeview import Trees
from ..store import open_store, SqliteStore, Store

__all__ = [
    'binding_trust_rows',
    'body_rows',
    'cli_trees',
    'covering_approval',
    'goal_data',
    'goal_summary',
    'open_cli_store',
    'show_task',
    'snapshot_data',
    'store_stats',
    'subtask_of',
    'task_rows',
    'task_trajectories',
    'task_tree',
    'trust_rows',
]


def open_cli_store(spec: str, *, write: bool = False) -> Store:
    """
    Open the store a command names, read-only unless it must write.

    :param spec: An SQLite file path, or a URL that :func:`~muscle_mem_ros.store.open_store`
        understands (PostgreSQL).
    :param write: Open for writing (``forget``). A read-only open never changes the store:
        no migration, no purge of abandoned recordings, nothing created (a PostgreSQL
        session is READ ONLY: the server refuses writes).
    :return: The store.
    :raises StoreError: not a store, a newer schema, unreadable (the store is untouched).
    """
    if '://' in spec:
        return open_store(spec, read_only=not write)
    return SqliteStore(path=spec, read_only=not write, abandoned_retention=None)


def task_trajectories(store: Store, task: str) -> list[TrajectoryInfo]:
    """
    Return a task's trajectories, oldest first.

    :param store: The store.
    :param task: Task name.
    :return: Its trajectories (at least one).
    :raises UnknownTrajectoryError: the store has no trajectory of that task; the message
        lists the tasks it has.
    """
    found = store.trajectories(task=task)
    if not found:
        known = sorted({t.name for t in store.tasks() if t.trajectory_count})
        listed = ', '.join(known[:10]) + (' ...' if len(known) > 10 else '') if known else \
            'none'
        raise UnknownTrajectoryError(f'unknown task {task!r} (tasks in this store: {listed})')
    return found


def _pick(store: Store, task: str, trajectory_id: int | None) -> list[TrajectoryInfo]:
    found = task_trajectories(store, task)
    if trajectory_id is None:
        return found
    chosen = [t for t in found if t.id == trajectory_id]
    if not chosen:
        ids = ', '.join(str(t.id) for t in found)
        raise UnknownTrajectoryError(
            f'task {task!r} has no trajectory {trajectory_id} (its trajectories: {ids})')
    return chosen


def task_rows(store: Store) -> list[dict[str, Any]]:
    """
    Return one row per task: params sets, trajectories, distinct steps, hits, last use.

    :param store: The store.
    :return: Rows sorted by task name.
    """
    rows = []
    for stats in store.tasks():
        trajectories = store.trajectories(task=stats.name)
        params = sorted({t.params_json for t in trajectories})
        nodes = {n for t in trajectories for n in t.node_ids}
        rows.append({
            'task': stats.name,
            'params': params,
            'trajectories': len(trajectories),
            'steps': len(nodes),
            'hits': stats.hits,
            'misses': stats.misses,
            'replays': sum(t.replay_count for t in trajectories),
            'last_used': stats.last_used,
        })
    return rows


def goal_data(node: Node) -> Any:
    """Return a step's goal (or request) as data, from its readable JSON (text if not JSON)."""
    text = node.step.payload_json
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _leaves(value: Any, name: str, into: list[tuple[str, Any]]) -> None:
    """Collect (field name, value) of the scalars and scalar lists that are not empty or 0."""
    if isinstance(value, dict) and set(value) == {'sec', 'nanosec'}:
        seconds = value['sec'] + value['nanosec'] / 1e9
        if seconds:
            into.append((name, round(seconds, 3)))
    elif isinstance(value, dict):
        for key, item in value.items():
            _leaves(item, key, into)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for item in value:
            _leaves(item, name, into)
    elif isinstance(value, list):
        if any(v not in (0, 0.0, '', False) for v in value):
            into.append((name, [round(v, 3) if isinstance(v, float) else v for v in value]))
    elif value not in (0, 0.0, '', None) or isinstance(value, bool):
        into.append((name, round(value, 3) if isinstance(value, float) else value))


def goal_summary(node: Node, width: int = 72) -> str:
    """
    Return a one-line summary of a step's goal, cut to ``width`` characters.

    The goal's fields as ``name=value``, numbers first: empty and zero fields (stamps,
    unused tolerances) are left out, times (``sec``, ``nanosec``) shown in seconds and
    floats rounded to 3 decimals, so what is left is what the agent chose
    (``positions=[0.464, 0.951] time_from_start=0.8``).
    """
    data = goal_data(node)
    if not isinstance(data, (dict, list)):
        text = str(data or '')
    else:
        leaves: list[tuple[str, Any]] = []
        _leaves(data, 'value', leaves)
        leaves.sort(key=lambda leaf: isinstance(leaf[1], str) or (
            isinstance(leaf[1], list) and any(isinstance(v, str) for v in leaf[1])))
        text = ' '.join(f'{k}={json.dumps(v)}' for k, v in leaves) or '{}'
    text = ' '.join(text.split())
    return text if len(text) <= width else text[:width - 3] + '...'


def snapshot_data(snapshot: Snapshot | None) -> dict[str, list[float]] | None:
    """Return a snapshot's features as lists, or None when the step had none."""
    if snapshot is None:
        return None
    return {name: [float(v) for v in values] for name, values in
            sorted(snapshot.features.items())}


def subtask_of(node: Node) -> dict[str, Any] | None:
    """Return what a subtask step calls, ``{'task': ..., 'params': {...}}`` (None: not one)."""
    if node.step.kind is not ToolKind.SUBTASK:
        return None
    try:
        call = subtask_call(node.step)
    except MuscleMemError:
        return None
    return {'task': call.task, 'params': call.params}


def _node_entry(store: Store, node: Node, plans: dict[int, Any]) -> dict[str, Any]:
    ending = store.trajectory_ending_at(node.id) if node.terminal else None
    plan = plans.get(node.id)
    subtask = subtask_of(node)
    return {
        'node': node.id,
        'step': node.depth,
        'tool': node.step.tool,
        'kind': node.step.kind.value,
        'type': node.step.type_name,
        'goal': goal_summary(node) if subtask is None else
        json.dumps(subtask['params'], sort_keys=True, separators=(',', ':')),
        'subtask': subtask,
        'successes': node.success_count,
        'last_success': node.last_used,
        'ends_trajectory': ending.id if ending is not None else None,
        'bindings': [b.to_json() for b in plan.bindings] if plan is not None else [],
        'children': [],
    }


def _plans(store: Store, infos: list[TrajectoryInfo],
           settings: BindingSettings) -> dict[int, Any]:
    """Return the bindings of a tree's steps, learned as the node learns them."""
    if not settings.infer and not settings.declared:
        return {}
    paths = []
    for info in infos:
        try:
            params = json.loads(info.params_json) if info.params_json else {}
        except ValueError:
            params = {}
        paths.append((store.path(info.id), params if isinstance(params, dict) else {}))
    return learn(paths, declared=settings.declared, infer=settings.infer,
                 max_shift=settings.max_shift, tolerance=element_tolerances(settings.sensors),
                 sources=sensor_sources(settings.sensors))


def cli_trees(store: Store, settings: BindingSettings) -> Trees:
    """Return the store's trees as a node with these binding settings learns them."""
    return Trees(store, declared=settings.declared, infer=settings.infer,
                 max_shift=settings.max_shift, tolerance=element_tolerances(settings.sensors),
                 sources=sensor_sources(settings.sensors))


def task_tree(
    store: Store, task: str, bindings: BindingSettings | None = None,
) -> list[dict[str, Any]]:
    """
    Return a task's trees, one per parameter set, each a nested list of step entries.

    :param store: The store.
    :param task: Task name.
    :param bindings: How the node finds bindings (its params file); default: inferred
        from the recordings with the node's defaults and no sensor tolerances (so only
        parameter bindings are found).
    :return: ``[{'params': ..., 'trajectories': [ids], 'steps': [entry, ...]}]``; an entry
        has ``children`` (the branches after it), ``ends_trajectory`` (the id of the
        trajectory that ends there, or None), ``bindings`` (its goal fields bound to
        parameters or sensors: field, source, offset, max_shift, origin) and ``subtask``
        (a subtask step: the task it calls and its params, whose ``goal`` is those params
        as JSON; else None).
    :raises UnknownTrajectoryError: unknown task.
    """
    settings = bindings or BindingSettings()
    trees = []
    variants: dict[str, list[TrajectoryInfo]] = {}
    for info in task_trajectories(store, task):
        variants.setdefault(info.variant, []).append(info)
    for variant, infos in variants.items():
        plans = _plans(store, infos, settings)
        roots: list[dict[str, Any]] = []
        stack: list[tuple[int | None, list[dict[str, Any]]]] = [(None, roots)]
        while stack:
            parent, into = stack.pop()
            for child in store.children(task=task, variant=variant, parent=parent):
                entry = _node_entry(store, child, plans)
                into.append(entry)
                stack.append((child.id, entry['children']))
        trees.append({'params': infos[0].params_json, 'trajectories': [i.id for i in infos],
                      'bodies': {i.id: shown(i.body) for i in infos}, 'steps': roots})
    return trees


def show_task(store: Store, task: str, trajectory_id: int | None = None,
              images: Path | None = None) -> list[dict[str, Any]]:
    """
    Return a task's trajectories (or one) with every step's goal and snapshots.

    :param store: The store.
    :param task: Task name.
    :param trajectory_id: Only this trajectory.
    :param images: Write the cameras' thumbnails into this directory (:mod:`.thumbnails`); each
        step then has ``images``: phase -> sensor -> file, and each of its failed views a
        ``file``.
    :return: One dict per trajectory with its ``steps``; a step a camera's check failed on
        has ``failed``: what the camera saw then (:func:`.thumbnails.failed_data`).
    :raises UnknownTrajectoryError: unknown task, or a trajectory not in it.
    """
    out = []
    failed: dict[int, list[FailedView]] = {}
    for view in store.failed_views(task=task):
        failed.setdefault(view.node_id, []).append(view)
    for info in _pick(store, task, trajectory_id):
        steps = []
        for index, node in enumerate(store.path(info.id)):
            step = node.step
            steps.append({
                'step': index,
                'node': node.id,
                'tool': step.tool,
                'kind': step.kind.value,
                'type': step.type_name,
                'status': step.status.value,
                'duration': round(step.duration, 6),
                'goal': goal_data(node),
                'pre': snapshot_data(step.pre),
                'post': snapshot_data(step.post),
            })
            if images is not None:
                steps[-1]['images'] = write_thumbnails(images, info.id, index,
                                                       {'pre': step.pre, 'post': step.post})
            if node.id in failed:
                steps[-1]['failed'] = failed_data(images, info.id, index, failed[node.id])
        out.append({'trajectory': info.id, 'task': info.task, 'params': info.params_json,
                    'body': shown(info.body), 'created': info.created, 'last_used': info.last_used,
                    'replays': info.replay_count, 'steps': steps})
    return out


def store_stats(store: Store, spec: str) -> dict[str, Any]:
    """
    Return store-wide counters: tasks, trajectories, steps, hit rate, incomplete recordings.

    :param store: The store.
    :param spec: What the store was opened from (a file's size is added).
    :return: The counters, with a ``tasks`` list of per-task hit rates.
    """
    tasks = store.tasks()
    trajectories = store.trajectories()
    nodes = {n for t in trajectories for n in t.node_ids}
    hits = sum(t.hits for t in tasks)
    misses = sum(t.misses for t in tasks)
    incomplete = store.incomplete_recordings()
    data: dict[str, Any] = {
        'store': spec,
        'tasks': len(tasks),
        'trajectories': len(trajectories),
        'steps': len(nodes),
        'hits': hits,
        'misses': misses,
        'hit_rate': round(hits / (hits + misses), 4) if hits + misses else None,
        'replays': sum(t.replay_count for t in trajectories),
        'incomplete_recordings': len(incomplete),
        'abandoned_recordings': sum(1 for r in incomplete if not r.live),
    }
    shadow = [a for t in tasks for a in store.agreement(task=t.name)[0].values()]
    data['shadow_runs'] = sum(a.runs for a in shadow)
    data['shadow_agreed'] = sum(a.agreed for a in shadow)
    data['approvals'] = len(store.approvals())
    books = store.replay_books()
    data.update(_booked(books.values()))
    data['stepped_back'] = sum(1 for b in books.values() if b.stepped_back)
    data['bodies'] = body_rows(store.bodies())
    data['compatible_bodies'] = len(store.compatible_bodies())
    if '://' not in spec and os.path.isfile(Path(spec).expanduser()):
        data['file_bytes'] = os.path.getsize(Path(spec).expanduser())
    data['per_task'] = [
        {'task': t.name, 'hits': t.hits, 'misses': t.misses,
         'hit_rate': round(t.hits / (t.hits + t.misses), 4) if t.hits + t.misses else None,
         **_booked(b for b in books.values() if b.task == t.name)}
        for t in tasks]
    return data


def body_rows(counts: dict[str, int]) -> list[dict[str, Any]]:
    """Return one row per body: shown name, key, trajectories (the unknown body last)."""
    return [{'body': shown(key), 'key': key, 'trajectories': n}
            for key, n in sorted(counts.items(), key=lambda kv: (not kv[0], kv[0]))]


def _booked(books: Iterable[ReplayBook]) -> dict[str, Any]:
    """Return replays booked by outcome, and the false-hit rate (None: none booked)."""
    found = list(books)
    out = {key: sum(getattr(b, key) for b in found)
           for key in ('completed', 'false_hits', 'canceled', 'handed_back')}
    replays = sum(out.values())
    out['false_hit_rate'] = round(out['false_hits'] / replays, 4) if replays else None
    return out


def covering_approval(info: TrajectoryInfo, approvals: Sequence[Approval]) -> Approval | None:
    """Return a trajectory's own approval, else the latest that covers it, else None."""
    return next((a for a in approvals if a.trajectory_id == info.id), None) or next(
        (a for a in reversed(approvals) if a.covers_trajectory(info)), None)


def trust_rows(store: Store, task: str,
               settings: BindingSettings | None = None) -> list[dict[str, Any]]:
    """
    Return per trajectory of ``task``: shadow runs, agreements, and its approval (or the task's).

    A task's approval counts only for the trajectories it covers: one learned after it is
    not listed approved (:meth:`~muscle_mem_ros.records.Approval.covers_trajectory`).
    An approval also names the bindings it saw; whether the node's params file still
    declares those, and what the node infers with it, is known only with that file, so
    ``approval_held`` (why the approval gate holds an approved trajectory, as the node would
    say it) is filled in only with ``settings``, and is None without them.

    :param store: The store.
    :param task: Task name.
    :param settings: The node's binding settings (its params file), or None.
    """
    by_trajectory, _ = store.agreement(task=task)
    approvals = store.approvals(task=task)
    books = store.replay_books(task=task)
    trees = cli_trees(store, settings) if settings is not None else None
    approval_gate = Gate(GateKind.APPROVAL)
    rows = []
    for info in store.trajectories(task=task):
        counts = by_trajectory.get(info.id)
        approval = covering_approval(info, approvals)
        approval_held = None
        if trees is not None:
            approval_held = '' if approval is None else trusted(
                approval_gate, [info], plans=trees.plans(task, info.variant),
                agreement=({}, {}), approvals=approvals).reasons.get(info.id, '')
        rows.append({'trajectory': info.id, 'body': shown(info.body), 'body_key': info.body,
                     'shadow_runs': counts.runs if counts else 0,
                     'shadow_agreed': counts.agreed if counts else 0,
                     'approved_by': approval.who if approval else '',
                     'approved_at': approval.at if approval else None,
                     'whole_task': bool(approval and approval.trajectory_id == 0),
                     'declared_seen': len(approval.declared or ()) if approval else 0,
                     'approval_held': approval_held,
                     **_booked([books[info.id]] if info.id in books else []),
                     'held': held(books.get(info.id), agreed=counts.agreed if counts else 0,
                                  runs=0, approvals=approvals)})
    return rows


def binding_trust_rows(store: Store, task: str,
                       settings: BindingSettings | None = None) -> list[dict[str, Any]]:
    """
    Return per inferred binding of ``task`` that shadow runs compared: its counts.

    One row per (learned step, field), as the store counts them: ``step`` (its index in a
    run, as ExecuteTask counts steps), ``node`` (the learned step), ``field``, ``source``
    (``sensor:tag[0]``: what the node learns it from with ``settings``, else what an
    approval recorded, else ''), the ``trajectories`` it is on, ``shadow_runs`` and
    ``shadow_agreed``. A step no longer in the store (forgotten) is left out.

    :param store: The store.
    :param task: Task name.
    :param settings: How the node finds bindings (its params file); default: parameter
        bindings only, as :func:`task_tree` says.
    """
    _, by_binding = store.agreement(task=task)
    on: dict[int, list[int]] = {}
    infos = store.trajectories(task=task)
    for info in infos:
        for node_id in info.node_ids:
            on.setdefault(node_id, []).append(info.id)
    sources = {(node, field): source for approval in store.approvals(task=task)
               for node, field, source in approval.bindings}
    variants: dict[str, list[TrajectoryInfo]] = {}
    for info in infos:
        variants.setdefault(info.variant, []).append(info)
    if by_binding:
        for listing in variants.values():
            for node_id, plan in _plans(store, listing, settings or BindingSettings()).items():
                sources.update(((node_id, b.field), b.source) for b in plan.bindings)
    rows = []
    for (node_id, field), counts in sorted(by_binding.items()):
        if node_id not in on:
            continue
        rows.append({'step': store.node(node_id).depth, 'node': node_id, 'field': field,
                     'source': sources.get((node_id, field), ''),
                     'trajectories': on[node_id], 'shadow_runs': counts.runs,
                     'shadow_agreed': counts.agreed})
    return rows
