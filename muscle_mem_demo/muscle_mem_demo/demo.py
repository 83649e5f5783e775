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
``sim_demo``: the end-to-end demo, MuJoCo arm + behavior cache + planning agent.

Starts the three nodes as child processes (no ``ros2 launch`` needed), then runs the story of
:mod:`muscle_mem_demo.story`, printing one table row per run, and writes
``<output-dir>/sim_demo.png`` and ``sim_demo.json``; then its second part,
:mod:`muscle_mem_demo.skill_story` (tasks the agent decomposes into subtasks sent through the
cache), a table of its own and ``sim_demo_skills.json`` (``--skip-subtasks`` leaves it out);
then its third part, :mod:`muscle_mem_demo.eyes_story` (the cache sees the cube through the
robot's camera alone: nodes of its own, the camera on), its rows, ``sim_eyes.json`` and the
frames that matter as PNG files (``--skip-eyes`` leaves it out, ``--eyes-only`` runs it alone).
Exit code 0 only when every run held; 1 when a run did not; 2 when the demo could not run
(a node did not start, bad option).

The ROS environment is inherited (ROS_DOMAIN_ID, RMW); ROS_AUTOMATIC_DISCOVERY_RANGE is set to
LOCALHOST unless already set.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
import json
import math
import os
from pathlib import Path
import sys
import tempfile
import time
from typing import TextIO, TYPE_CHECKING

from muscle_mem_demo.eyes_demo import run_eyes
from muscle_mem_demo.eyes_story import EYES_STORY
from muscle_mem_demo.processes import (
    ChildProcesses,
    config_path,
    node_commands,
    NodeProcessError,
)
from muscle_mem_demo.report import (
    describe_knock,
    describe_substitutions,
    format_row,
    format_skill_row,
    HEADER,
    rule,
    SKILL_HEADER,
    write_figure,
)
from muscle_mem_demo.skill_story import SKILL_STORY, skill_summary
from muscle_mem_demo.story import judge, RunMode, RunOutcome, STORY

if TYPE_CHECKING:
    from muscle_mem_demo.driver import StoryDriver as StoryDriverLike

__all__ = ['main', 'parse_args', 'run_story']


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the demo's command line."""
    parser = argparse.ArgumentParser(
        prog='sim_demo',
        description='MuJoCo arm + behavior cache + planning agent: a scripted story showing '
        'a miss, replays, a nudge within tolerance, a mid-task bump with handoff, the '
        'learned branch replayed, a replay retargeted to a moved cube, one to another place '
        "target, a cube beyond the bindings' range going to the agent, a cube knocked "
        'during a replayed motion, which the cache cancels mid-motion, and a cube turned on '
        'the table (read from /tf: the grasp turned with it, or beyond max_angle the agent '
        'asked); then tasks the agent '
        'decomposes into subtasks through the cache, a skill learned under one replayed '
        "under another; then the task checked through the robot's camera alone (noise, a "
        'moved cube, a box outside the region of interest, a box dropped during a replayed '
        'motion).',
    )
    parser.add_argument('--think-time', type=float, default=1.5,
                        help="the agent's think time per step, seconds (default 1.5)")
    parser.add_argument('--rtf', type=float, default=1.0,
                        help='real-time factor of the simulation (default 1.0)')
    parser.add_argument('--output-dir', type=Path, default=Path('demo_output'),
                        help='where the PNG, the summary JSON and the node logs go '
                        '(default ./demo_output)')
    parser.add_argument('--store', default=None,
                        help="the cache's SQLite file (default: a fresh temporary file, so "
                        'the story starts with a miss)')
    parser.add_argument('--params-file', type=Path, default=None,
                        help="the cache's ROS params file (default: the package's "
                        'config/sim_demo.yaml)')
    parser.add_argument('--skip-subtasks', action='store_true',
                        help="leave out the story's second part (subtasks)")
    parser.add_argument('--skip-eyes', action='store_true',
                        help="leave out the story's third part (the camera alone)")
    parser.add_argument('--eyes-only', action='store_true',
                        help="run only the story's third part (the camera alone)")
    parser.add_argument('--record-bag', action='store_true',
                        help='instead of the story: record a bag of the agent doing '
                        'pick_and_place alone (no cache) with the cube at three positions, to '
                        '<output-dir>/demo.mcap, and print how to learn from it')
    parser.add_argument('--startup-timeout', type=float, default=60.0,
                        help='seconds to wait for the nodes to come up (default 60)')
    args = parser.parse_args(argv)
    if not (math.isfinite(args.think_time) and args.think_time >= 0.0):
        parser.error('--think-time must be >= 0')
    if not (math.isfinite(args.rtf) and args.rtf > 0.0):
        parser.error('--rtf must be > 0')
    if args.skip_eyes and args.eyes_only:
        parser.error('--skip-eyes and --eyes-only exclude each other')
    return args


def run_story(args: argparse.Namespace, *, out: TextIO = sys.stdout) -> list[RunOutcome]:
    """
    Start the nodes, perform the story and return the judged outcomes.

    :raises NodeProcessError: a node exited early.
    :raises DriverError: a node did not come up or stopped answering.
    """
    from muscle_mem_demo.driver import StoryDriver
    import rclpy

    def say(line: str) -> None:
        print(line, file=out, flush=True)

    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    output_dir: Path = args.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    store = args.store
    scratch: tempfile.TemporaryDirectory[str] | None = None
    if store is None:
        scratch = tempfile.TemporaryDirectory(prefix='muscle_mem_demo_')
        store = str(Path(scratch.name) / 'cache.db')
    commands = node_commands(rtf=args.rtf, think_time=args.think_time, store_path=store,
                             params_file=args.params_file or config_path('sim_demo.yaml'))
    say(f'muscle_mem_ros demo: think time {args.think_time} s/step, rtf {args.rtf}, '
        f'store {store}, ROS_DOMAIN_ID {os.environ.get("ROS_DOMAIN_ID", "0")}')
    outcomes: list[RunOutcome] = []
    rclpy.init(args=[])
    try:
        with ChildProcesses(log_dir=output_dir / 'logs') as children:
            for name, command in commands.items():
                children.start(name, command)
            driver = StoryDriver()
            try:
                say('starting sim_robot, behavior_cache, demo_agent ...')
                driver.wait_ready(timeout=args.startup_timeout, alive=children.check)
                say('')
                say(HEADER)
                say(rule())
                run_timeout = 60.0 + 15.0 * (args.think_time + 3.0 / args.rtf)
                for spec in STORY:
                    children.check()
                    driver.prepare(spec)
                    outcome = judge(driver.execute(spec, timeout=run_timeout))
                    outcomes.append(outcome)
                    baseline = outcomes[0].wall_time
                    say(format_row(outcome, baseline=baseline))
                    for failure in outcome.failures:
                        say(f'      ! {failure}')
                    if spec.number == 1 and outcome.mode is RunMode.REPLAY and args.store:
                        say(f'      ! {args.store} already knew the task: the story needs a '
                            'fresh store (omit --store)')
                    if outcome.check_failure:
                        then = (
                            f'agent resumed at step {outcome.agent_calls[0]}'
                            if outcome.agent_calls
                            else 'a learned branch matched, agent not called'
                        )
                        say(f'      cache noticed: {outcome.check_failure}; {then}')
                    if outcome.spec.knock is not None:
                        say(f'      watch: {describe_knock(outcome)}')
                    if outcome.substituted and outcome.spec.expect.substitutes:
                        say(f'      cache substituted: {describe_substitutions(outcome)}')
                    children.check()
                say(rule())
                if not args.skip_subtasks:
                    skills = _run_skills(driver, children, say, timeout=run_timeout)
                    outcomes += skills
                    say(skill_summary(skills))
            finally:
                children.stop()  # first, so no message arrives while the driver closes
                driver.close()
    finally:
        rclpy.try_shutdown()
        if scratch is not None:
            scratch.cleanup()
    return outcomes


def _run_skills(driver: StoryDriverLike, children: ChildProcesses,
                say: Callable[[str], None], *, timeout: float) -> list[RunOutcome]:
    """Perform the story's second part (subtasks), printing its table; return the outcomes."""
    say('')
    say('tasks made of subtasks: the agent decomposes restock and tidy into pick and place, '
        "sent through the cache's ~/execute_subtask")
    say(SKILL_HEADER)
    say(rule(SKILL_HEADER))
    outcomes = []
    for spec in SKILL_STORY:
        children.check()
        driver.prepare(spec)
        outcome = judge(driver.execute(spec, timeout=timeout))
        outcomes.append(outcome)
        say(format_skill_row(outcome))
        for failure in outcome.failures:
            say(f'      ! {failure}')
        if outcome.message and not outcome.held:
            say(f'      cache: {outcome.message}')
    say(rule(SKILL_HEADER))
    return outcomes


def _summary(outcomes: Sequence[RunOutcome]) -> list[dict[str, object]]:
    return [
        {
            'run': o.spec.number,
            'title': o.spec.title,
            'mode': o.mode.value if o.mode else None,
            'steps_replayed': o.replayed,
            'steps_by_agent': o.by_agent,
            'agent_calls': list(o.agent_calls),
            'task': o.spec.task,
            'agent_tasks': list(o.agent_tasks),
            'from_cache': list(o.from_cache),
            'hits': [list(h) for h in o.hits],
            'wall_time': o.wall_time,
            'params': json.loads(o.spec.params_json or '{}'),
            'place_target': list(o.spec.place),
            'object_start': list(o.object_start) if o.object_start else None,
            'final_object': o.final_object,
            'placement_error': o.placement_error if o.final_object else None,
            'final_yaw': o.final_yaw,
            'yaw_error': o.yaw_error,
            'substituted': [dict(s) for s in o.substituted],
            'held': o.held,
            'failures': list(o.failures),
            'check_failure': o.check_failure,
            'canceled': [list(c) for c in o.canceled],
            'knock': None if o.knock is None else dict(
                vars(o.knock), reaction=o.knock.reaction, stopped_short=o.knock.stopped_short,
                after_knock=o.knock.after_knock),
            'message': o.message,
            'motion_started': o.motion_started if math.isfinite(o.motion_started) else None,
            'dropped_at': o.dropped_at if math.isfinite(o.dropped_at) else None,
            'check_failed_at': o.check_failed_at if math.isfinite(o.check_failed_at) else None,
        }
        for o in outcomes
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; return 0 when the story held, 1 when it did not, 2 when it could not run."""
    args = parse_args(argv)
    started = time.monotonic()
    try:
        if args.record_bag:
            from muscle_mem_demo.recordbag import record_bag
            held = record_bag(args, lambda line: print(line, flush=True))
            print(f'sim_demo: recorded in {time.monotonic() - started:.0f} s'
                  + ('' if held else ': a run did NOT place the cube'))
            return 0 if held else 1
        outcomes = [] if args.eyes_only else run_story(args)
        eyes = [] if args.skip_eyes else run_eyes(args, lambda line: print(line, flush=True))
    except NodeProcessError as err:
        print(f'sim_demo: a node failed: {err}', file=sys.stderr)
        return 2
    except (RuntimeError, TimeoutError, FileNotFoundError) as err:
        print(f'sim_demo: {err} (node logs in {args.output_dir / "logs"})', file=sys.stderr)
        return 2
    expected = 0 if args.eyes_only else len(STORY) + (
        0 if args.skip_subtasks else len(SKILL_STORY))
    held = (len(outcomes) == expected and len(eyes) == (0 if args.skip_eyes else len(EYES_STORY))
            and all(o.held for o in outcomes + eyes))
    story, skills = outcomes[:len(STORY)], outcomes[len(STORY):]
    figure = ''
    if not args.eyes_only:
        png = write_figure(story, args.output_dir / 'sim_demo.png')
        figure = f'; figure: {png}'
        (args.output_dir / 'sim_demo.json').write_text(json.dumps(_summary(story), indent=2))
    if not args.skip_subtasks and not args.eyes_only:
        (args.output_dir / 'sim_demo_skills.json').write_text(
            json.dumps(_summary(skills), indent=2))
    if not args.skip_eyes:
        (args.output_dir / 'sim_eyes.json').write_text(json.dumps(_summary(eyes), indent=2))
    total = time.monotonic() - started
    verdict = 'the story held' if held else 'the story did NOT hold'
    print(f'{verdict}; {total:.0f} s in all{figure}')
    return 0 if held else 1


if __name__ == '__main__':
    sys.exit(main())
