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
``muscle-mem calibrate``: propose tolerances from a task's recordings, or live from a node.

``muscle-mem calibrate STORE TASK`` reads the store (never writes it): per step
the spread of the recorded pre snapshots, per sensor a what-if table, and a
params-file snippet. ``muscle-mem calibrate --live NODE`` calls the node's
``~/calibrate`` service (rclpy is imported only then) while the robot rests.
"""

from __future__ import annotations

import argparse
import math
from typing import Any, TYPE_CHECKING

from .inventory import open_cli_store, task_trajectories
from .output import Output
from .paramsfile import read_sensor_settings
from ..checks import calibration
from ..errors import MuscleMemError
from ..records import CompareMode

if TYPE_CHECKING:
    from rclpy.client import Client

__all__ = ['add_parser', 'run', 'run_live', 'run_store']

LIVE_WAIT = 10.0
"""Seconds to wait for the node's calibrate service to appear."""
WIDE = 16
"""A sensor of more elements and one proposed tolerance (a camera) is one row, its largest."""


def add_parser(cmd: argparse.ArgumentParser) -> None:
    """Add the calibrate options to its subparser."""
    cmd.add_argument('store', metavar='STORE', nargs='?', help='store file or URL')
    cmd.add_argument('task', metavar='TASK', nargs='?', help='task name')
    cmd.add_argument('--live', metavar='NODE',
                     help='sample the sensors of this running node instead (its ~/calibrate)')
    cmd.add_argument('--duration', type=float, default=5.0, metavar='S',
                     help='--live: seconds to sample (default 5)')
    cmd.add_argument('--k', type=float, default=calibration.DEFAULT_K,
                     help='standard deviations a tolerance covers (default %(default)s)')
    cmd.add_argument('--margin', type=float, default=calibration.DEFAULT_MARGIN,
                     help='safety factor (default %(default)s)')
    cmd.add_argument('--sensor', action='append', metavar='NAME',
                     help='what-if table for this sensor only (repeatable)')
    cmd.add_argument('--tolerance', action='append', type=float, metavar='X',
                     help='what-if at this tolerance (repeatable; default: every change)')
    cmd.add_argument('--params', metavar='FILE',
                     help="the node's params file: compare modes of the sensors")
    cmd.add_argument('--node-name', default='muscle_mem',
                     help='top key of the params file and of the snippet (default muscle_mem)')
    cmd.set_defaults(run=run)


def run(args: argparse.Namespace, out: Output) -> int:
    """Run from the store or live, as the arguments say."""
    if args.live:
        if args.store or args.task:
            raise ValueError('give either --live NODE or STORE TASK, not both')
        return run_live(args, out)
    if not (args.store and args.task):
        raise ValueError('give STORE and TASK (or --live NODE)')
    return run_store(args, out)


def _top(values: Any) -> str:
    values = [v for v in values if math.isfinite(v)]
    return f'{max(values):.4g}' if values else '-'


def run_store(args: argparse.Namespace, out: Output) -> int:
    """Calibrate from the recorded runs of a task."""
    settings = read_sensor_settings(args.params, args.node_name) if args.params else {}
    modes = {n: s.mode for n, s in settings.items()}
    cameras = {n: s.image for n, s in settings.items()
               if s.image is not None and s.mode is CompareMode.IMAGE}
    with open_cli_store(args.store) as store:
        task_trajectories(store, args.task)
        found = calibration.from_store(
            store, args.task, modes=modes, k=args.k, margin=args.margin,
            channels={n: c.channels for n, c in cameras.items()},
            sizes={n: c.size for n, c in cameras.items()})
    sensors = args.sensor or sorted(found.modes)
    tables = {}
    for sensor in sensors:
        try:
            tables[sensor] = calibration.what_if(found, sensor, args.tolerance)
        except KeyError as err:
            raise MuscleMemError(err.args[0]) from err
    snippet = calibration.params_snippet(found.proposed, node_name=args.node_name)
    if out.json_mode:
        out.json({
            'task': found.task,
            'steps': [{'step': s.depth, 'tool': s.tool, 'repeats': s.repeats,
                       'divergences': s.divergences,
                       'sensors': {n: {'samples': x.samples, 'std': x.std,
                                       'peak_to_peak': x.peak_to_peak,
                                       'proposed': x.proposed} for n, x in s.noise.items()}}
                      for s in found.steps],
            'proposed': found.proposed,
            'what_if': {n: [vars(r) for r in rows] for n, rows in tables.items()},
            'params_yaml': snippet,
            'notes': list(found.notes),
        })
        return 0
    out.table(('step', 'tool', 'repeats', 'divergences', 'sensor', 'std', 'peak-peak',
               'proposed'),
              ([s.depth, s.tool, s.repeats, s.divergences, name, _top(x.std),
                _top(x.peak_to_peak), _top(x.proposed)]
               for s in found.steps for name, x in sorted(s.noise.items()) if name in tables),
              title=f'task {found.task!r}: spread of the recorded pre snapshots per step '
                    '(largest element)',
              right=('repeats', 'divergences', 'std', 'peak-peak', 'proposed'))
    for sensor, rows in tables.items():
        proposed = max(found.proposed.get(sensor, (math.nan,)))
        out.table(('tolerance', 'replayed', 'wrongly replayed divergences'),
                  ([f'{r.tolerance:.4g}' + ('  (proposed)' if r.tolerance == proposed else ''),
                    f'{r.replayed}/{r.repeats}', f'{r.wrong}/{r.divergences}'] for r in rows),
                  title=f'what if sensor {sensor!r} had tolerance x (mode '
                        f'{found.modes[sensor].value}; other sensors ignored)',
                  right=('replayed', 'wrongly replayed divergences'))
    for note in found.notes:
        out.print(note)
    out.print('params-file snippet (proposed tolerances):')
    out.print(snippet.rstrip())
    return 0


def run_live(args: argparse.Namespace, out: Output) -> int:
    """Call a running node's ~/calibrate service and print what it measured."""
    if not args.duration > 0 or not math.isfinite(args.duration):
        raise ValueError(f'--duration must be > 0, got {args.duration}')
    import rclpy
    from rclpy.node import Node as RosNode

    from muscle_mem_interfaces.srv import Calibrate

    service = args.live.rstrip('/') + '/calibrate'
    if not service.startswith('/'):
        service = '/' + service
    rclpy.init()
    try:
        node = RosNode('muscle_mem_cli_calibrate')
        client: Client[Any, Any] = node.create_client(Calibrate, service)
        if not client.wait_for_service(timeout_sec=LIVE_WAIT):
            raise MuscleMemError(f'no service {service} after {LIVE_WAIT:.0f} s (is the node '
                                 'running and active, in this ROS_DOMAIN_ID?)')
        request = Calibrate.Request(duration=float(args.duration), k=float(args.k),
                                    margin=float(args.margin))
        future = client.call_async(request)
        with out.progress(f'sampling {args.live} for {args.duration:g} s', 1):
            rclpy.spin_until_future_complete(node, future, timeout_sec=args.duration + 30.0)
        if not future.done():
            raise MuscleMemError(f'{service} did not answer within {args.duration + 30.0:.0f} s')
        response: Any = future.result()
    finally:
        rclpy.try_shutdown()
    if not response.success:
        raise MuscleMemError(f'{service}: {response.message}')
    if out.json_mode:
        out.json({'message': response.message, 'params_yaml': response.params_yaml,
                  'sensors': [{'sensor': s.sensor, 'samples': s.samples, 'mean': list(s.mean),
                               'std': list(s.std), 'peak_to_peak': list(s.peak_to_peak),
                               'proposed': list(s.proposed_tolerance),
                               'current': list(s.current_tolerance)}
                              for s in response.sensors]})
        return 0
    rows: list[list[Any]] = []
    for s in response.sensors:
        current = list(s.current_tolerance)
        if len(s.std) > WIDE and len(s.proposed_tolerance) == 1:  # a camera: one row
            rows.append([s.sensor, f'all {len(s.std)}', s.samples, '-', _top(s.std),
                         _top(s.peak_to_peak), f'{s.proposed_tolerance[0]:.3g}',
                         f'{current[0]:.3g}' if current else '-'])
            continue
        for i, std in enumerate(s.std):
            now = current[i] if len(current) > 1 else (current[0] if current else math.nan)
            proposed = list(s.proposed_tolerance)
            tol = proposed[i] if len(proposed) > 1 else proposed[0]
            rows.append([s.sensor, i, s.samples, f'{s.mean[i]:.6g}', f'{std:.3g}',
                         f'{s.peak_to_peak[i]:.3g}', f'{tol:.3g}', f'{now:.3g}'])
    out.table(('sensor', 'element', 'samples', 'mean', 'std', 'peak to peak', 'proposed',
               'current'), rows, title=response.message,
              right=('element', 'samples', 'mean', 'std', 'peak to peak', 'proposed',
                     'current'))
    out.print('params-file snippet (proposed tolerances):')
    out.print(response.params_yaml.rstrip())
    return 0
