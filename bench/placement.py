#!/usr/bin/env python3
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
Placement benchmark (issue 45): where a replay puts a cube that was turned, on real processes.

The demo's three processes, started here (real rclpy, Fast DDS on loopback, SQLite, MuJoCo),
with the demo's params file (``config/sim_demo.yaml``: the cube read from ``/tf`` as the
frame ``cube`` in ``world``, its grasp goals bound to it by position, ``max_shift`` 0.1 m, and
by orientation, ``cube_turn``, ``max_angle`` 0.6 rad). The pick-and-place is learned once, the
cube at its start and yaw 0 (the agent: a miss); its placement, where the cube rests after that
run (the simulation's ``/object_pose``), is the reference. Then ``--trials`` runs, each from a
reset world with the cube turned by a yaw drawn uniformly within +-``max_angle`` and shifted by
a random offset uniform within +-``--shift`` m per axis (well within ``max_shift``). Per trial:
whether it replayed every step without the agent, and the cube's placement error once at rest
after the place, against the reference: the horizontal distance (mm) and the turn about the
world z axis (degrees, modulo a quarter turn: the cube looks the same every 90 degrees).
Target: under 5 mm and 3 degrees in every trial.

Usage: bench/placement [--trials 20] [--shift 0.03] [--seed 45]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
import json
import math
import os
from pathlib import Path
import platform
import random
import signal
import statistics
import sys
import tempfile
import time
from typing import Any

from _common import cpu_name
import yaml

HERE = Path(__file__).resolve().parent
MAX_MM, MAX_DEG = 5.0, 3.0
"""The targets: placement error under these in every trial."""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--trials', type=int, default=20, help='turned replays')
    p.add_argument('--shift', type=float, default=0.03,
                   help='largest shift of the cube per axis, m (default 0.03)')
    p.add_argument('--seed', type=int, default=45)
    p.add_argument('--think-time', type=float, default=1.5,
                   help="the agent's think time per step (the demo's), s: the learning run's")
    p.add_argument('--out', type=Path, default=HERE / 'placement.md')
    p.add_argument('--json', type=Path, default=HERE / 'placement.json')
    p.add_argument('--render', type=Path, default=None,
                   help='write the report from a saved JSON instead of running')
    return p.parse_args()


def quarter(angle: float) -> float:
    """Return ``angle`` folded to the nearest quarter turn, radians in [-pi/4, pi/4)."""
    q = 0.5 * math.pi
    return (angle + 0.5 * q) % q - 0.5 * q


def demo_params(store: str) -> tuple[dict[str, Any], float, float]:
    """Return the demo's params file on ``store``, its cube_turn max_angle and cube_x max_shift."""
    from muscle_mem_demo.processes import config_path

    doc = yaml.safe_load(config_path('sim_demo.yaml').read_text())
    params = doc['muscle_mem']['ros__parameters']
    params['store_path'] = store
    params['robot_description_timeout'] = 30.0
    bindings = params['bindings']
    return doc, float(bindings['cube_turn']['max_angle']), float(bindings['cube_x']['max_shift'])


def main() -> int:
    args = parse_args()
    if args.render is not None:
        args.out.write_text(render(json.loads(args.render.read_text())))
        print(f'wrote {args.out}')
        return 0
    import rclpy
    from rclpy.signals import SignalHandlerOptions
    from muscle_mem_demo.driver import StoryDriver
    from muscle_mem_demo.physics import OBJECT_START
    from muscle_mem_demo.processes import ChildProcesses, node_commands
    from muscle_mem_demo.story import (
        BOUND_PLACE_TOLERANCE,
        Expectation,
        judge,
        RunMode,
        STORY,
        TURNED_YAW_TOLERANCE,
    )

    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    rng = random.Random(args.seed)
    saved: dict[str, Any] = {
        'info': {'date': time.strftime('%Y-%m-%d %H:%M %Z'), 'cpu': cpu_name(),
                 'nproc': os.cpu_count(), 'python': platform.python_version(),
                 'load_start': os.getloadavg()[0], 'command': command_line(sys.argv[1:]),
                 'shift': args.shift, 'seed': args.seed, 'think_time': args.think_time},
        'runs': []}

    def save() -> None:
        args.json.write_text(json.dumps(saved, indent=1, default=str))

    learn = STORY[0]
    expect = Expectation(mode=RunMode.REPLAY, replayed=8, by_agent=0, agent_calls=(),
                         substitutes=('sensor:object',),
                         place_tolerance=BOUND_PLACE_TOLERANCE,
                         yaw_tolerance=TURNED_YAW_TOLERANCE)
    rclpy.init(args=[], signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix='mm_bench_placement_') as tmp:
            scratch = Path(tmp)
            doc, max_angle, max_shift = demo_params(str(scratch / 'cache.db'))
            if not 0.0 <= args.shift <= max_shift:
                raise SystemExit(f'--shift must lie within max_shift {max_shift}')
            saved['info'].update(max_angle=max_angle, max_shift=max_shift)
            params_file = scratch / 'sim_demo.yaml'
            params_file.write_text(yaml.safe_dump(doc))
            commands = node_commands(rtf=1.0, think_time=args.think_time,
                                     store_path=str(scratch / 'cache.db'),
                                     params_file=params_file)
            trials = []
            for number in range(1, args.trials + 1):
                yaw = rng.uniform(-max_angle, max_angle)
                dx = rng.uniform(-args.shift, args.shift)
                dy = rng.uniform(-args.shift, args.shift)
                trials.append(replace(
                    learn, number=number + 1, title=f'turned {math.degrees(yaw):+.1f} deg',
                    nudge=(OBJECT_START[0] + dx, OBJECT_START[1] + dy, OBJECT_START[2]),
                    turn=yaw, expect=expect))
            with ChildProcesses(log_dir=scratch / 'logs') as children:
                for name, command in commands.items():
                    children.start(name, command)
                driver = StoryDriver(node_name='bench_placement')
                try:
                    driver.wait_ready(timeout=120.0, alive=children.check)
                    timeout = 60.0 + 15.0 * (args.think_time + 3.0)
                    reference: tuple[float, float, float] | None = None
                    for kind, spec in [('learn', learn)] + [('turned', t) for t in trials]:
                        children.check()
                        driver.prepare(spec)
                        outcome = judge(driver.execute(spec, timeout=timeout))
                        row = trial_row(kind, spec, outcome, reference)
                        if kind == 'learn':
                            if outcome.final_object is None or not outcome.held:
                                raise SystemExit(f'the learning run failed: {outcome.failures}')
                            reference = (*outcome.final_object[:2], outcome.final_yaw)
                            saved['reference'] = {'x': reference[0], 'y': reference[1],
                                                  'yaw': reference[2]}
                        saved['runs'].append(row)
                        save()
                        print(f"{kind:6s} {spec.number:3d} yaw {row['turn_deg']:+6.1f} deg "
                              f"shift {row['shift_mm']:5.1f} mm {row['mode']:16s} "
                              f"err {row['error_mm']:.2f} mm {row['yaw_error_deg']:.2f} deg "
                              f'{outcome.check_failure[:80]}', flush=True)
                finally:
                    children.stop()
                    driver.close()
    finally:
        rclpy.try_shutdown()
    saved['info']['seconds'] = time.monotonic() - started
    saved['info']['load_end'] = os.getloadavg()[0]
    save()
    args.out.write_text(render(saved))
    print(f'wrote {args.out}')
    return 0 if met(saved) else 1


def trial_row(kind: str, spec: Any, outcome: Any,
              reference: tuple[float, float, float] | None) -> dict[str, Any]:
    """Return one run's record: how it ran and where the cube came to rest."""
    from muscle_mem_demo.physics import OBJECT_START

    nudge = spec.nudge or OBJECT_START
    error_mm = yaw_deg = math.nan
    if outcome.final_object is not None and reference is not None:
        error_mm = 1000.0 * math.hypot(outcome.final_object[0] - reference[0],
                                       outcome.final_object[1] - reference[1])
        yaw_deg = abs(math.degrees(quarter(outcome.final_yaw - reference[2])))
    turned = [s for s in outcome.substituted
              if str(s.get('field', '')).startswith('target.pose.orientation')]
    return {
        'kind': kind, 'number': spec.number, 'turn_deg': math.degrees(spec.turn),
        'shift_mm': 1000.0 * math.hypot(nudge[0] - OBJECT_START[0], nudge[1] - OBJECT_START[1]),
        'mode': outcome.mode.value if outcome.mode else 'none',
        'replayed': outcome.replayed, 'by_agent': outcome.by_agent,
        'agent_calls': list(outcome.agent_calls),
        'without_agent': outcome.mode is not None and outcome.by_agent == 0
        and not outcome.agent_calls,
        'orientation_substituted': sorted({int(s['step']) for s in turned}),
        'final_object': outcome.final_object, 'final_yaw': outcome.final_yaw,
        'error_mm': error_mm, 'yaw_error_deg': yaw_deg,
        'target_error_mm': 1000.0 * outcome.placement_error
        if outcome.final_object is not None else math.nan,
        'wall': outcome.wall_time, 'check_failure': outcome.check_failure,
        'message': outcome.message, 'failures': list(outcome.failures),
    }


def command_line(argv: list[str]) -> str:
    """Return the arguments as a person gives them: without the wrapper's --out and --json."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ('--out', '--json'):
            skip = True
        else:
            out.append(arg)
    return ' '.join(out)


def figures(saved: dict[str, Any]) -> dict[str, Any]:
    """Return the figures the targets are judged on, over the turned trials."""
    trials = [r for r in saved['runs'] if r['kind'] == 'turned']
    mm = [r['error_mm'] for r in trials]
    deg = [r['yaw_error_deg'] for r in trials]
    known = [v for v in mm if math.isfinite(v)], [v for v in deg if math.isfinite(v)]
    return {
        'trials': len(trials),
        'without_agent': sum(1 for r in trials if r['without_agent']),
        'mm_p50': statistics.median(known[0]) if known[0] else math.nan,
        'mm_max': max(mm) if mm and len(known[0]) == len(mm) else math.inf,
        'deg_p50': statistics.median(known[1]) if known[1] else math.nan,
        'deg_max': max(deg) if deg and len(known[1]) == len(deg) else math.inf,
        'yaw_span': (min(r['turn_deg'] for r in trials), max(r['turn_deg'] for r in trials))
        if trials else (math.nan, math.nan),
    }


def met(saved: dict[str, Any]) -> bool:
    f = figures(saved)
    return (f['trials'] > 0 and f['without_agent'] == f['trials'] and f['mm_max'] < MAX_MM
            and f['deg_max'] < MAX_DEG)


def render(saved: dict[str, Any]) -> str:
    f = figures(saved)
    info = saved['info']
    ref = saved.get('reference', {})
    ok = {True: 'pass', False: 'FAIL'}
    lines = [
        '# Placement benchmark',
        '',
        f"Generated by `bench/placement` (`bench/placement.py`) on {info['date']}; one run on "
        f"{info['cpu']}, nproc {info['nproc']}, Python {info['python']}, DDS on loopback; load "
        f"average {info['load_start']:.2f} at the start, "
        f"{info.get('load_end', math.nan):.2f} at the end; the run took "
        f"{info.get('seconds', math.nan):.0f} s.",
        '',
        f"Command: `{' '.join(['bench/placement', info['command']]).strip()}`",
        '',
        "The demo's processes and params file (`config/sim_demo.yaml`: the cube a TF sensor, "
        f"`cube_turn` max_angle {info.get('max_angle', math.nan):g} rad, max_shift "
        f"{info.get('max_shift', math.nan):g} m), think time {info['think_time']:g} s, rtf 1. "
        'The task learned once by the agent, the cube at its start, yaw 0; its placement '
        f"(the reference: x {ref.get('x', math.nan):.4f}, y {ref.get('y', math.nan):.4f} m, yaw "
        f"{math.degrees(ref.get('yaw', math.nan)):+.2f} deg) is what each trial is measured "
        f"against. {f['trials']} trials, the cube turned uniformly within +-max_angle (drawn: "
        f"{f['yaw_span'][0]:+.1f} to {f['yaw_span'][1]:+.1f} deg) and shifted within "
        f"+-{info['shift'] * 100:g} cm per axis (seed {info['seed']}). Errors are the cube's "
        "at rest after the place (the simulation's `/object_pose`): horizontal distance, and "
        'its turn about z modulo a quarter turn.',
        '',
        '## Targets',
        '',
        '| target | measured | result |',
        '|---|---|---|',
        f"| every trial replayed without the agent | {f['without_agent']} of {f['trials']} | "
        f"{ok[f['trials'] > 0 and f['without_agent'] == f['trials']]} |",
        f"| placement under {MAX_MM:g} mm in every trial | p50 {f['mm_p50']:.2f} mm, max "
        f"{f['mm_max']:.2f} mm | {ok[f['mm_max'] < MAX_MM]} |",
        f"| placement under {MAX_DEG:g} deg in every trial | p50 {f['deg_p50']:.2f} deg, max "
        f"{f['deg_max']:.2f} deg | {ok[f['deg_max'] < MAX_DEG]} |",
        '',
        '## Trials',
        '',
        '| # | cube turned deg | shifted mm | mode | orientation sent turned at steps | '
        'error mm | error deg | from the target mm | wall s |',
        '|---|---|---|---|---|---|---|---|---|',
    ]
    for r in saved['runs']:
        steps = ', '.join(str(s) for s in r['orientation_substituted']) or 'none'
        lines.append(
            f"| {'learn' if r['kind'] == 'learn' else r['number'] - 1} | {r['turn_deg']:+.1f} | "
            f"{r['shift_mm']:.1f} | {r['mode']} | {steps} | {r['error_mm']:.2f} | "
            f"{r['yaw_error_deg']:.2f} | {r['target_error_mm']:.2f} | {r['wall']:.1f} |")
    odd = [r for r in saved['runs'] if r['kind'] == 'turned' and (r['failures'] or not (
        r['error_mm'] < MAX_MM and r['yaw_error_deg'] < MAX_DEG))]
    lines += ['', '## Every trial that did not go as expected', '']
    lines += [f"- {r['number'] - 1}: {'; '.join(r['failures']) or 'off the reference'}"
              + (f" (cache: {r['check_failure']})" if r['check_failure'] else '')
              for r in odd] or ['- none']
    if info.get('notes'):  # added to the JSON by hand, then --render
        lines += ['', '## Notes', '', *info['notes']]
    lines.append('')
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.exit(main())
