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
``muscle-mem learn BAG``: learn a task from a recording, with no agent and no robot.

``muscle-mem learn BAG --params-file robot.yaml --task NAME [--params JSON]
[--store STORE] [--from S --to S] [--node-name NAME]``. BAG is a rosbag2 recording (the
folder with its ``metadata.yaml``, or one file: ``.mcap``, ``.db3``, ``.mcap.zstd``) or the
cache's own ``muscle-mem export --mcap`` file. The params file is the node's: it says which
topics are sensors and which servers are tools, and the learning is the node's
(:mod:`muscle_mem_ros.ros.bags`, where what each form of bag needs is spelled out). The
store is the params file's ``store_path`` unless ``--store`` names another; it is opened
for writing only once the bag has been read and every step built, so a bag that cannot be
learned from changes nothing. Learned trajectories are not approved: under
``replay_requires`` they wait for shadow runs or an approval like any new branch.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .inventory import open_cli_store
from .output import Output

__all__ = ['add_parser', 'run']

_NS = 1e-9


def add_parser(cmd: argparse.ArgumentParser) -> None:
    """Add the learn arguments to its subparser."""
    cmd.add_argument('bag', metavar='BAG',
                     help='a rosbag2 folder (mcap or sqlite3 storage), one of its files '
                     '(.mcap, .db3, .mcap.zstd), or an export')
    cmd.add_argument('--params-file', required=True, metavar='FILE',
                     help="the node's params file (its ros__parameters): sensors and tools")
    cmd.add_argument('--task', required=True, metavar='NAME', help='the task to learn')
    cmd.add_argument('--params', metavar='JSON',
                     help="the task's params (default: each ExecuteTask goal's, else {})")
    cmd.add_argument('--store', metavar='STORE',
                     help="store file or URL (default: the params file's store_path)")
    cmd.add_argument('--from', dest='since', type=float, metavar='S',
                     help="learn one task from S seconds after the bag's first message")
    cmd.add_argument('--to', dest='until', type=float, metavar='S',
                     help="... to S seconds after it (default: the bag's end)")
    cmd.add_argument('--node-name', default='muscle_mem',
                     help='the node whose parameters the file holds (default muscle_mem)')
    cmd.set_defaults(run=run)


def _filed(trajectory: int | None, new: bool) -> str:
    if trajectory is None:
        return 'nothing new'
    return f'{trajectory} (new)' if new else f'{trajectory} (folded in)'


def run(args: argparse.Namespace, out: Output) -> int:
    """Learn as the arguments say; print each task found and what it gave."""
    from ..ros.bags.command import file_learned, prepare, read_config
    config = read_config(args.params_file, args.node_name)
    done = prepare(args.bag, config, task=args.task, node_name=args.node_name,
                   params_json=args.params, since=args.since, until=args.until)
    with open_cli_store(args.store or config.store_path, write=True) as store:
        file_learned(store, config, done)
    rows: list[dict[str, Any]] = []
    for planned, info, fresh in zip(done.planned, done.infos, done.fresh):
        window = planned.window
        rows.append({
            'from': round((window.start - done.bag.start) * _NS, 3) if not done.export else None,
            'to': round((window.end - done.bag.start) * _NS, 3) if not done.export else None,
            'source': window.source, 'params': json.loads(window.params_json),
            'steps': len(planned.steps), 'trajectory': info.id if info is not None else None,
            'skipped': planned.skipped, 'new': fresh})
    if out.json_mode:
        out.json({'bag': str(done.bag.path), 'task': args.task, 'body': str(done.body),
                  'tasks': rows, 'dropped_frames': done.dropped})
        return 0
    out.table(('from s', 'to s', 'source', 'params', 'steps', 'trajectory'), [
        ('' if r['from'] is None else f"{r['from']:.3f}",
         '' if r['to'] is None else f"{r['to']:.3f}", r['source'],
         json.dumps(r['params'], sort_keys=True), str(r['steps']),
         'skipped' if r['skipped'] else _filed(r['trajectory'], r['new']))
        for r in rows], title=f'{done.bag.path}: task {args.task!r} on {done.body}')
    for r in rows:
        if r['skipped']:
            out.note(r['skipped'])
    for sensor, count in sorted(done.dropped.items()):
        out.note(f'sensors.{sensor}: {count} frame(s) did not decode and were dropped, the last '
                 'good frame standing in (as the node does live)')
    out.note('learned from a bag, not approved: under replay_requires these wait for shadow '
             'runs or muscle-mem approve')
    return 0
