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
The ``muscle-mem`` command: look at, export, tune and prune what a cache learned.

Works on a store file (or URL) without a running node, read-only unless a
command must write (``forget``). Every command prints a table for people, or
JSON with ``--json``. Bad input (an unknown task, a file that is not a store,
a newer schema) prints one line on stderr and exits 1; the store is untouched.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from functools import partial
import getpass
from pathlib import Path
import shlex
import socket
import sys
from typing import Any

from rich.tree import Tree
import yaml

from . import bodies, bt, calibrate, export, init, learn, prune, runtask, serve, standstill
from .inventory import (
    binding_trust_rows,
    cli_trees,
    open_cli_store,
    show_task,
    store_stats,
    task_rows,
    task_trajectories,
    task_tree,
    trust_rows,
)
from .output import Output, when
from .paramsfile import BindingSettings, read_binding_settings
from ..errors import MuscleMemError, UnknownTrajectoryError
from ..replay.gates import approve, covered
from ..store import Store

__all__ = ['build_parser', 'main']

EXIT_ERROR = 1
"""Exit status of a command that failed (argparse's usage errors exit 2)."""


def _cmd_tasks(args: argparse.Namespace, out: Output) -> int:
    with open_cli_store(args.store) as store:
        rows = task_rows(store)
    if out.json_mode:
        out.json(rows)
        return 0
    out.table(
        ('task', 'params', 'trajectories', 'steps', 'hits', 'misses', 'last used'),
        ([r['task'], '\n'.join(r['params']), r['trajectories'], r['steps'], r['hits'],
          r['misses'], when(r['last_used'])] for r in rows),
        right=('trajectories', 'steps', 'hits', 'misses'))
    return 0


def _tree_label(entry: dict[str, Any], trust: dict[int, str], store: str) -> str:
    goal = entry['goal'] if len(entry['goal']) <= 50 else entry['goal'][:47] + '...'
    ends = entry['ends_trajectory']
    end = f"  -> trajectory {ends}{trust.get(ends, '')}" if ends else ''
    bound = ', '.join(f"{b['field']}<-{b['source']}" for b in entry['bindings'])
    bound = f'  bound: {bound}' if bound else ''
    what = f"{entry['tool']}  {goal}"
    opens = ''
    if entry.get('subtask'):
        what = f"subtask {entry['subtask']['task']} {goal}"
        opens = '  its tree: muscle-mem tree ' + shlex.quote(store) + ' ' + \
            shlex.quote(entry['subtask']['task'])
    return (f"[{entry['step']}] {what}  "
            f"(x{entry['successes']}, {when(entry['last_success'])}){bound}{end}{opens}")


def _subtasks(trees: list[dict[str, Any]]) -> list[str]:
    """Return the tasks the subtask steps of ``trees`` call, in order, each once."""
    found: list[str] = []
    stack = [e for tree in trees for e in reversed(tree['steps'])]
    while stack:
        entry = stack.pop()
        if entry.get('subtask') and entry['subtask']['task'] not in found:
            found.append(entry['subtask']['task'])
        stack.extend(reversed(entry['children']))
    return found


def _opened(store: Store, task: str, trees: list[dict[str, Any]],
            bindings: BindingSettings | None) -> dict[str, list[dict[str, Any]] | None]:
    """Return the trees of every subtask ``trees`` call, theirs too, each once (None: unknown)."""
    opened: dict[str, list[dict[str, Any]] | None] = {}
    todo = _subtasks(trees)
    while todo:
        name = todo.pop(0)
        if name in opened or name == task:
            continue
        try:
            opened[name] = task_tree(store, name, bindings)
        except UnknownTrajectoryError:
            opened[name] = None
            continue
        todo.extend(_subtasks(opened[name] or []))
    return opened


def _params_file(args: argparse.Namespace) -> BindingSettings | None:
    """Return the binding settings of ``--params`` (None: not given)."""
    return read_binding_settings(args.params, args.node_name) if args.params else None


def _add_params_file(cmd: argparse.ArgumentParser, what: str) -> None:
    """Add ``--params FILE`` (the node's params file, for ``what``) and its ``--node-name``."""
    cmd.add_argument('--params', metavar='FILE', help=f"the node's params file: {what}")
    cmd.add_argument('--node-name', default='muscle_mem',
                     help='top key of the params file (default muscle_mem)')


def _cmd_tree(args: argparse.Namespace, out: Output) -> int:
    bindings = _params_file(args)
    with open_cli_store(args.store) as store:
        trees = task_tree(store, args.task, bindings)
        shown = [(args.task, trees, trust_rows(store, args.task, bindings))]
        opened = _opened(store, args.task, trees, bindings) if args.subtasks else {}
        shown += [(name, sub, trust_rows(store, name, bindings)) for name, sub in opened.items()
                  if sub is not None]
        sources = {name: store.sources(task=name) for name, _, _ in shown}  # muscle-mem learn
    if out.json_mode:
        out.json({'tree': trees, 'subtasks': opened} if args.subtasks else trees)
        return 0
    for task, task_trees, rows in shown:
        learned = {i: f', learned from {text}' for i, text in sources[task].items()}
        trust = {r['trajectory']: f" on {r['body']}{learned.get(r['trajectory'], '')}"
                 f'{_trust_text(r)}' for r in rows}
        for tree in task_trees:
            root = Tree(f"{'subtask ' if task != args.task else ''}{task}  params "
                        f"{tree['params']}  ({len(tree['trajectories'])} trajectories)")
            stack = [(root, entry) for entry in reversed(tree['steps'])]
            while stack:
                branch, entry = stack.pop()
                node = branch.add(_tree_label(entry, trust, args.store))
                stack.extend((node, child) for child in reversed(entry['children']))
            out.print(root)
        for why in (r['approval_held'] for r in rows if r['approval_held']):
            out.note(why)
    _unchecked_declared([r for _, _, rows in shown for r in rows], out)
    for name in (n for n, sub in opened.items() if sub is None):
        out.note(f'subtask {name!r}: not learned (the cache asks the agent for it)')
    return 0


def _cmd_show(args: argparse.Namespace, out: Output) -> int:
    with open_cli_store(args.store) as store:
        shown = show_task(store, args.task, args.trajectory,
                          Path(args.images) if args.images else None)
    if out.json_mode:
        out.json(shown)
        return 0
    for traj in shown:
        out.print(f"trajectory {traj['trajectory']}  task {traj['task']}  params "
                  f"{traj['params']}  body {traj['body']}  created {when(traj['created'])}  "
                  f"replays {traj['replays']}")
        for step in traj['steps']:
            body = {'goal': step['goal'], 'pre': step['pre'], 'post': step['post']}
            if step.get('images'):
                body['images'] = step['images']
            if step.get('failed'):
                body['failed'] = [{'phase': f['phase'], 'sensor': f['sensor'],
                                   'when': when(f['at']), 'reason': f['reason'],
                                   **({'file': f['file']} if 'file' in f else {})}
                                  for f in step['failed']]
            text = yaml.safe_dump(body, sort_keys=False, default_flow_style=None, width=96)
            out.print(f"- step {step['step']}: {step['tool']} ({step['kind']} {step['type']}, "
                      f"{step['status']}, {step['duration']:.3f} s)")
            out.print('  ' + text.rstrip().replace('\n', '\n  '))
    return 0


def _cmd_stats(args: argparse.Namespace, out: Output) -> int:
    with open_cli_store(args.store) as store:
        data = store_stats(store, args.store)
    if out.json_mode:
        out.json(data)
        return 0
    rate = data['hit_rate']
    out.table(('what', 'value'), [
        ('store', data['store']),
        ('size', f"{data['file_bytes']} bytes" if 'file_bytes' in data else '-'),
        ('tasks', data['tasks']), ('trajectories', data['trajectories']),
        ('steps', data['steps']), ('hits', data['hits']), ('misses', data['misses']),
        ('hit rate', '-' if rate is None else f'{rate:.1%}'), ('replays', data['replays']),
        ('incomplete recordings', f"{data['incomplete_recordings']} "
         f"({data['abandoned_recordings']} abandoned)"),
        ('shadow runs (agreed)', f"{data['shadow_runs']} ({data['shadow_agreed']})"),
        ('approvals', data['approvals']),
        ('replays booked', _book_text(data)),
        ('false-hit rate', _share(data['false_hit_rate'])),
        ('stepped back', data['stepped_back']),
        ('bodies', ', '.join(f"{b['body']}: {b['trajectories']}" for b in data['bodies'])
         or '-'),
        ('bodies declared compatible', data['compatible_bodies']),
    ], right=('value',))
    if data['per_task']:
        out.table(('task', 'hits', 'misses', 'hit rate', 'replays booked', 'false-hit rate'),
                  ([t['task'], t['hits'], t['misses'], _share(t['hit_rate']), _book_text(t),
                    _share(t['false_hit_rate'])] for t in data['per_task']),
                  title='per task', right=('hits', 'misses', 'hit rate', 'false-hit rate'))
    return 0


def _book_text(row: dict[str, Any]) -> str:
    """Return "12: 9 completed, 1 false hit, 1 canceled, 1 handed back" ('-': none booked)."""
    keys = (('completed', 'completed'), ('false_hits', 'false hits'),
            ('canceled', 'canceled'), ('handed_back', 'handed back'))
    total = sum(row[k] for k, _ in keys)
    if not total:
        return '-'
    return f'{total}: ' + ', '.join(f'{row[k]} {name}' for k, name in keys if row[k])


def _share(rate: float | None) -> str:
    return '-' if rate is None else f'{rate:.1%}'


def _trust_text(row: dict[str, Any]) -> str:
    parts = []
    if row['shadow_runs']:
        parts.append(f"shadow {row['shadow_agreed']}/{row['shadow_runs']} agreed")
    if row['approved_by']:
        parts.append(f"approved by {row['approved_by']}"
                     f"{', HELD by the approval gate' if row['approval_held'] else ''}")
    if row['false_hits'] + row['completed'] + row['canceled'] + row['handed_back']:
        parts.append(f'replays {_book_text(row)}')
    if row['held']:
        parts.append('STEPPED BACK')
    return f" ({', '.join(parts)})" if parts else ''


def _cmd_trust(args: argparse.Namespace, out: Output) -> int:
    settings = _params_file(args)
    with open_cli_store(args.store) as store:
        task_trajectories(store, args.task)  # raises for an unknown task
        rows = trust_rows(store, args.task, settings)
        bound = binding_trust_rows(store, args.task, settings)
    if out.json_mode:  # each trajectory with the counts of the inferred bindings on it
        keys = ('step', 'node', 'field', 'source', 'shadow_runs', 'shadow_agreed')
        out.json([{**r, 'bindings': [{k: b[k] for k in keys} for b in bound
                                     if r['trajectory'] in b['trajectories']]} for r in rows])
        return 0
    out.table(('trajectory', 'body', 'shadow runs', 'agreed', 'rate', 'approved by',
               'approved', 'replays', 'false hits'),
              ([r['trajectory'], r['body'], r['shadow_runs'], r['shadow_agreed'],
                _rate(r['shadow_agreed'], r['shadow_runs']),
                (r['approved_by'] + (' (held)' if r['approval_held'] else '')) or '-',
                when(r['approved_at']) if r['approved_at'] else '-',
                _book_text(r), _share(r['false_hit_rate'])]
               for r in rows), right=('trajectory', 'shadow runs', 'agreed', 'rate'))
    for r in rows:
        for why in (r['held'], r['approval_held']):
            if why:
                out.note(why)
    _unchecked_declared(rows, out)
    if bound:
        out.table(('step', 'learned step', 'binding', 'trajectories', 'shadow runs', 'agreed',
                   'rate'),
                  ([b['step'], b['node'],
                    f"{b['field']} <- {b['source']}" if b['source'] else b['field'],
                    ', '.join(map(str, b['trajectories'])),
                    b['shadow_runs'], b['shadow_agreed'],
                    _rate(b['shadow_agreed'], b['shadow_runs'])] for b in bound),
                  title='inferred bindings (shadow runs that predicted them)',
                  right=('step', 'learned step', 'shadow runs', 'agreed', 'rate'))
    return 0


def _unchecked_declared(rows: list[dict[str, Any]], out: Output) -> None:
    """Say that approvals saw declared bindings no one compared with the params file now."""
    if any(r['declared_seen'] and r['approval_held'] is None for r in rows):
        out.note("approvals here saw declared bindings; whether the node's params file still "
                 'declares them (else the approval gate holds the trajectory) is checked only '
                 'with --params FILE')


def _rate(agreed: int, runs: int) -> str:
    return '-' if not runs else f'{agreed / runs:.0%}'


def _cmd_approve(args: argparse.Namespace, out: Output) -> int:
    trajectory = args.trajectory or 0
    settings = BindingSettings()
    if args.command == 'approve' and args.params:  # a bad file: refused before any write
        settings = read_binding_settings(args.params, args.node_name)
    with open_cli_store(args.store) as store:
        found = task_trajectories(store, args.task)
        if trajectory and trajectory not in {t.id for t in found}:
            raise MuscleMemError(f'task {args.task!r} has no trajectory {trajectory}')
    what = f'trajectory {trajectory} of task {args.task!r}' if trajectory else \
        f'task {args.task!r}'
    data: dict[str, Any] = {'task': args.task, 'trajectory': trajectory,
                            'command': args.command}
    with open_cli_store(args.store, write=True) as store:
        if args.command == 'revoke':
            if not store.revoke(task=args.task, trajectory_id=trajectory):
                raise MuscleMemError(f'{what} was not approved')
            text = f'revoked the approval of {what}'
        else:
            who = args.who or f'{getpass.getuser()}@{socket.gethostname()}'
            approval = approve(store, task=args.task, trajectory_id=trajectory, who=who,
                               plans=partial(cli_trees(store, settings).plans, args.task))
            text = f'{what} approved by {who}: {covered(approval)}'
            data.update(who=who, covers=list(approval.covers or ()),
                        bindings=[list(b) for b in approval.bindings])
    if out.json_mode:
        out.json(data)
    else:
        out.print(text)
    return 0


def _cmd_forget(args: argparse.Namespace, out: Output) -> int:
    with open_cli_store(args.store) as store:
        found = task_trajectories(store, args.task)
        if args.trajectory is not None and args.trajectory not in {t.id for t in found}:
            raise MuscleMemError(f'task {args.task!r} has no trajectory {args.trajectory}')
        what = (f'trajectory {args.trajectory} of task {args.task!r}'
                if args.trajectory is not None else
                f'task {args.task!r} ({len(found)} trajectories)')
        if not args.yes:
            if not sys.stdin.isatty():
                raise MuscleMemError(f'forget {what}: pass --yes (no terminal to ask on)')
            answer = input(f'forget {what} from {args.store}? [y/N] ')
            if answer.strip().lower() not in ('y', 'yes'):
                out.note('nothing forgotten')
                return EXIT_ERROR
    # Only now, asked and answered, is the store opened for writing.
    with open_cli_store(args.store, write=True) as store:
        removed = store.forget(task=args.task, trajectory_id=args.trajectory)
    if out.json_mode:
        out.json({'task': args.task, 'trajectory': args.trajectory, 'removed': removed})
    else:
        out.print(f'forgot {removed} trajectories of task {args.task!r}')
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``muscle-mem`` and its subcommands."""
    parser = argparse.ArgumentParser(
        prog='muscle-mem',
        description='Look at, export, tune and prune what a muscle_mem_ros cache learned. '
                    'STORE is the SQLite file (store_path) or a store URL; it is opened '
                    'read-only unless the command must write.')
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument('--json', action='store_true', help='print JSON for scripts')
    sub = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')

    def add(name: str, text: str, *, task: bool = True, trajectory: bool = False,
            store: bool = True) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, parents=[common], help=text, description=text)
        if store:
            cmd.add_argument('store', metavar='STORE', help='store file or URL')
        if task:
            cmd.add_argument('task', metavar='TASK', help='task name')
        if trajectory:
            cmd.add_argument('--trajectory', type=int, metavar='ID',
                             help='only this trajectory')
        return cmd

    add('tasks', 'list the tasks: params, trajectories, steps, hits, last use',
        task=False).set_defaults(run=_cmd_tasks)
    cmd = add('tree', "a task's branches as a tree: step, tool, goal, successes, last success, "
              'bindings')
    _add_params_file(cmd, 'declared bindings, sensor tolerances')
    cmd.add_argument('--subtasks', action='store_true',
                     help="open the subtasks: after the task's trees, the trees of every "
                          'task its subtask steps call (theirs too, each once)')
    cmd.set_defaults(run=_cmd_tree)
    cmd = add('show', "a task's trajectories with goals (YAML) and pre/post snapshots",
              trajectory=True)
    cmd.add_argument('--images', metavar='DIR',
                     help="write the cameras' recorded views, and those a check failed on "
                          '(PNG thumbnails), into DIR and name the files')
    cmd.set_defaults(run=_cmd_show)
    add('stats', 'store-wide counters: trajectories, steps, hit rate, incomplete recordings',
        task=False).set_defaults(run=_cmd_stats)
    cmd = add('forget', 'remove a task (or one trajectory of it) from the store',
              trajectory=True)
    cmd.add_argument('--yes', action='store_true', help='do not ask for confirmation')
    cmd.set_defaults(run=_cmd_forget)
    cmd = add('prune', 'remove trajectories unused for DAYS days, or all but the N most '
              'recently used of each task (of TASK, or of every task)', task=False)
    cmd.add_argument('task', metavar='TASK', nargs='?', help='only this task')
    prune.add_parser(cmd)
    cmd = add('trust', "a task's trajectories: body, shadow runs, agreement, approvals, "
              'replays booked')
    _add_params_file(cmd, 'an approved trajectory the approval gate would hold (its declared '
                     'bindings changed, a binding inferred since) is shown held, with the reason')
    cmd.set_defaults(run=_cmd_trust)
    bodies.add_parser(add('bodies', 'the bodies branches were learned on (trajectories each); '
                          '--compatible A B --who NAME declares two one for the cache',
                          task=False))
    cmd = add('approve', 'approve a task (or one trajectory) for replay (replay_requires: '
              'approval): who, when and what it covers (the trajectories and inferred '
              'bindings now; what is learned later needs its own approval) are stored',
              trajectory=True)
    cmd.add_argument('--who', help='who approves (default: user@host)')
    _add_params_file(cmd, 'the approval covers the inferred bindings the node learns with it '
                     '(without it: those found with no sensor tolerances, i.e. parameter '
                     'bindings only)')
    cmd.set_defaults(run=_cmd_approve)
    add('revoke', 'withdraw the approval of a task (or one trajectory)',
        trajectory=True).set_defaults(run=_cmd_approve)
    export.add_parser(add('export', 'write a task or a trajectory to an MCAP file (goals as '
                          'their ROS types, snapshots as muscle_mem_interfaces/msg/Snapshot), '
                          'or a learned tree as a behavior tree (--bt)', trajectory=True))
    bt.add_import_parser(add('import', 'bring a reviewed behavior tree (export --bt py_trees) '
                             'back into the store as trajectories approved by --who',
                             task=False))
    sub.add_parser('run-bt', help='tick an exported behavior tree against the robot, no '
                   'cache: muscle-mem run-bt FILE --ros-args --params-file PARAMS',
                   add_help=False)
    learn.add_parser(add('learn', 'learn a task from a recording (rosbag2 MCAP, or an export) '
                         'as the node would have learned it live', task=False, store=False))
    calibrate.add_parser(add('calibrate', 'propose sensor tolerances: from the recorded runs '
                             'of a task, or live from a running node (--live NODE)',
                             task=False, store=False))
    init.add_parser(add('init', 'write a params file for the robot running now: its servers, '
                        'its sensors, tolerances from their noise at rest', task=False,
                        store=False))
    runtask.add_parser(add('run', "send a task to a running cache's ~/execute_task and say "
                           'what it did: replayed, learned, or handed to the agent', task=False,
                           store=False))
    serve.add_parser(add('serve', 'a local web page on the store: every task, its tree as a '
                         'picture, trust, traces with their tubes, thumbnails; approve and '
                         'revoke from it (loopback unless --token)', task=False))
    standstill.add_parser(add('standstill', 'confirm that a robot that did not stop is at rest '
                              "(a running cache's ~/confirm_standstill, with --who): it takes "
                              'tasks again', task=False, store=False))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """
    Run ``muscle-mem``; return the exit status.

    :param argv: Arguments (default: the process's).
    :return: 0 on success, 1 on an error (one line on stderr), 2 on a usage error.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ['run-bt']:  # its own arguments end in --ros-args ...
        from .runbt import main as run_bt
        return run_bt(argv[1:])
    args = build_parser().parse_args(argv)
    out = Output(json_mode=args.json)
    try:
        return int(args.run(args, out) or 0)
    except (MuscleMemError, OSError, ValueError) as err:
        message = ' '.join(str(err).split()) or type(err).__name__
        print(f'muscle-mem {args.command}: error: {message}', file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f'muscle-mem {args.command}: interrupted', file=sys.stderr)
        return 130
