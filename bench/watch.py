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
Watch benchmark: the watch during replayed motions, the new tube against the old, the stop.

Two parts, all processes started here (real rclpy, Fast DDS on loopback, SQLite):

**The MuJoCo demo arm** (issue 36, "Measured"; a Franka Panda since issue 37): the demo's
sim robot (``sim_robot``), and two behavior caches, each with its own demo agent,
configured as config/sim_demo.yaml (its sensors, actions, declared bindings),
``watch: true``, ``step_back: off`` (the bench measures the watch, not the ledger: a
knocked branch would be held after three knocks and then never replayed):

* ``new``: the tube of this tree (checks/tube.py: one progress for the whole step, shared by
  every watched element);
* ``old``: the same cache process with the tube of commit 3b11e2e^ (each element aligned on
  its own, one segment back per reading), loaded in its process from ``git show`` of that
  file before the node starts (a launcher written to the scratch directory; nothing else of
  the cache differs).

Tasks, one at a time, each from a reset world, in phases (the robot restarted with its
real-time factor, the caches restarted on the same stores):

1. rtf 1: the demonstration (the cube at its start: both caches miss, their agents are
   called), ``unchanged`` replays (the cube at its start) and ``retargeted`` ones (the cube
   uniform in the 16 cm square around its start, within the bindings' max_shift) on
   ``new``: none may be canceled; then the disturbances, each task on ``new`` and then the
   same on ``old``;
2. rtf 0.5 and 3. rtf 2: unchanged and retargeted replays on ``new`` (the recording is
   from rtf 1: the replay runs at half or twice its speed).

Disturbances, each at a uniform random time during a random action step (the robot's
MoveObject with a delay, relative to where the cube is then; a moved cube is released
from the gripper):

* ``knock``: 5-20 cm in a random direction, any action step;
* ``near``: 1.2-2x the object's tolerance (2 cm per element in the tube), along x or y
  (the tube's tolerance is per element: a diagonal 1.2x knock would be within it on both
  axes), during a step the cube rests on the table (0, 1, 7; held, any knock drops it);
* ``push``: 3 cm over 1 s (20 moves of 1.5 mm, 50 ms apart, simulated time) in a random
  direction, starting during a step the cube rests on the table (0, 1, 7);
* ``drop``: the cube released during the lift (step 3) where it is: early in the lift a
  missed grasp (the cube stays on the table while the gripper rises), later a drop;
* ``rknock``: a 5-20 cm knock during a retargeted replay (cube in the 16 cm square).

Caught: the cache canceled the disturbed step while it ran (a CHECK_FAILED with
``time_into_step`` >= 0 at that step, and the robot saw the cancel before the goal ended);
a push runs on past its step, so it is caught when a step from its start on is canceled
while the push goes on, and its figure is how far the cube had been pushed at the trip.
Reaction: disturbance -> cancel received by the robot, both on the machine's monotonic
clock. Travel: how far the grasp point moved from the knock to where it stopped.

**The stop, on the mobile base double** (muscle_mem_ros/test/mobile_base_helpers.py, imported
by sys.path as the tests do): its goto server refuses the cancel (``refuse``, the cache
configured with the base's ``base_stop`` Trigger as the goto's ``stop_service``) or accepts
it and decelerates for 1 s before CANCELED (``brake``). The task (goto the tag, grip, goto a
shelf, release) is learned once; each run knocks the tag 15 cm at a random time during the
replayed approach. Overlaps: goals that started on the base while a goal still executed
(the base notes each); trip -> hand-back: the CHECK_FAILED's stamp (the trip) to the agent's
ExecuteTask callback.

Timing drift (unchanged replays on ``new``): each action step's grasp point placed on the
step's time axis from its goal's acceptance and compared with the recorded trace: the
smallest time window around each reading whose recorded envelope (plus the 2 cm
tolerance) contains it. What a tube aligned by time would have to allow.

Usage: bench/watch [--unchanged 12] [--retargeted 12] [--slow 4] [--fast 6] [--knocks 5]
[--near 5] [--pushes 5] [--drops 5] [--rknocks 5] [--stops 6] [--seed 36] [--quick]
[--no-old] [--no-arm]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
import json
import math
import os
from pathlib import Path
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from _common import cpu_name, pct
import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent

ACTION_STEPS = (0, 1, 3, 4, 5, 7)
"""The steps of pick_and_place that are arm goals (2 and 6 are the gripper's
GripperCommand action, which the robot's MoveObject does not count among arm goals)."""
TABLE_STEPS = (0, 1, 7)
"""Action steps during which the cube rests on the table (before the grasp, after the release)."""
LIFT_STEP = 3

SQUARE = 0.16
"""Side of the square the retargeted spots are drawn from, metres, centred on the start."""

TASK = 'pick_and_place'

EE_TOLERANCE = 0.02
"""The ee and object sensors' tolerance in config/sim_demo.yaml, m (per element in the tube)."""
OBJECT_PERIOD = 1.0 / 30.0
"""The sim robot's /object_pose period (object_pose_rate 30 Hz): the sensor a knock shows on."""

PUSH = (0.03, 1.0, 20)
"""A slow push: metres, seconds (simulated), moves."""

OLD_TUBE = '3b11e2e^:muscle_mem_ros/muscle_mem_ros/checks/tube.py'
"""The tube before one progress per step (git object)."""

DISTURBANCES = ('knock', 'near', 'push', 'drop', 'rknock')

LAUNCHER = '''\
"""The cache node with the tube of {rev} (bench/watch): nothing else differs."""
import importlib.util
import sys

import muscle_mem_ros.checks as checks

spec = importlib.util.spec_from_file_location('muscle_mem_ros.checks.tube', {path!r})
tube = importlib.util.module_from_spec(spec)
sys.modules['muscle_mem_ros.checks.tube'] = tube
spec.loader.exec_module(tube)
checks.tube = tube
assert not hasattr(tube, 'BACK'), 'not the old tube'
print('bench/watch: the old tube loaded from {rev}', flush=True)
from muscle_mem_ros.ros.node.main import main  # noqa: E402

sys.exit(main())
'''


@dataclass
class Disturbance:
    """What happens to the cube during a task, and when."""

    kind: str
    step: int
    delay: float
    """Simulated seconds into the step's goal."""
    duration: float
    """The step's planned motion time, simulated seconds."""
    offset: tuple[float, float, float]
    """Metres, relative to where the cube is then (a push: in all)."""
    factor: float = math.nan
    """A near-tolerance knock: its size over the tolerance."""


@dataclass
class TaskResult:
    """One task on one cache, as the bench saw it."""

    index: int
    kind: str
    cache: str
    rtf: float
    spot: tuple[float, float]
    disturbance: Disturbance | None = None
    mode: str = ''
    success: bool = False
    replayed: int = 0
    by_agent: int = 0
    agent_calls: list[int] = field(default_factory=list)
    wall_time: float = math.nan
    check_failure: str = ''
    message: str = ''
    unwatched: list[str] = field(default_factory=list)
    """What the watch left out of the disturbed step (its STEP_OK or CHECK_FAILED event)."""
    checks: list[list[float]] = field(default_factory=list)
    """[step, seconds into the step (< 0: a pre- or post-check), monotonic time] of every
    check that failed."""
    canceled: list[list[float]] = field(default_factory=list)
    """[step, seconds into the step] of each check that failed during a step."""
    trips: list[float] = field(default_factory=list)
    """Monotonic time of each check that failed during a step (its event's stamp)."""
    knock: dict[str, Any] | None = None
    """The robot's Knock report (KnockReport fields plus reaction, after_knock)."""
    window_needed: list[float] = field(default_factory=list)
    """Per action step (unchanged replays on ``new``): the half-width of the smallest time
    window around each reading that explains it, worst reading, s."""

    @property
    def caught(self) -> bool:
        """Return True when the disturbance was caught while its step (a push: itself) ran."""
        d = self.disturbance
        if d is None or not self.canceled:
            return False
        if d.kind == 'push':
            return self.pushed_at_trip() is not None
        return bool(self.knock and self.knock['outcome'] == 'canceled'
                    and any(int(s) == d.step for s, _ in self.canceled))

    def pushed_at_trip(self) -> float | None:
        """
        Return how far a push had moved the cube at its trip (None: not caught).

        The first trip during a step from the push's start on, while it went on.
        """
        d = self.disturbance
        if d is None or d.kind != 'push' or not self.knock:
            return None
        start = self.knock['knocked_at']
        span = PUSH[1] / self.rtf
        for (step, _), trip in zip(self.canceled, self.trips, strict=False):
            if int(step) >= d.step and start - 0.06 <= trip <= start + span + OBJECT_PERIOD:
                return PUSH[0] * min(1.0, max(0.0, (trip - start) / span) + 1.0 / PUSH[2])
        return None

    def pushed_at_check(self) -> float | None:
        """
        Return how far a push had moved the cube at a failed check (None: none).

        The first failed check of any kind (during a step or a post-check) while it went on.
        """
        d = self.disturbance
        if d is None or d.kind != 'push' or not self.knock:
            return None
        start = self.knock['knocked_at']
        span = PUSH[1] / self.rtf
        for step, _, at in self.checks:
            if int(step) >= d.step and start - 0.06 <= at <= start + span + OBJECT_PERIOD:
                return PUSH[0] * min(1.0, max(0.0, (at - start) / span) + 1.0 / PUSH[2])
        return None

    @property
    def reaction(self) -> float:
        """Disturbance -> the robot saw the cancel, s (nan: not caught, or a push)."""
        if not self.caught or not self.knock or self.disturbance is None or \
                self.disturbance.kind == 'push':
            return math.nan
        return float(self.knock['reaction'])


@dataclass
class StopRun:
    """One knocked replay on the mobile base."""

    manners: str
    delay: float
    status: int = -1
    message: str = ''
    tripped: bool = False
    trip: float = math.nan
    """Monotonic time of the CHECK_FAILED (its stamp)."""
    handed_back: float = math.nan
    """Monotonic time the agent's ExecuteTask callback ran."""
    stopped_ended: float = math.nan
    """Monotonic time the stopped goto ended (its server's view)."""
    next_started: float = math.nan
    """Monotonic time the agent's first goto started moving."""
    refused: int = 0
    stop_calls: int = 0
    overlaps: int = 0
    stopped_events: list[str] = field(default_factory=list)

    @property
    def to_hand_back(self) -> float:
        """Return the seconds from the trip to the hand-back."""
        return self.handed_back - self.trip


def parse_args() -> argparse.Namespace:
    """Parse the benchmark's command line."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add = parser.add_argument
    add('--unchanged', type=int, default=12, help='unchanged replays at rtf 1 (12)')
    add('--retargeted', type=int, default=12, help='retargeted replays at rtf 1 (12)')
    add('--slow', type=int, default=4, help='unchanged and as many retargeted at rtf 0.5 (4)')
    add('--fast', type=int, default=6, help='unchanged and as many retargeted at rtf 2 (6)')
    add('--knocks', type=int, default=5, help='5-20 cm knocks (5)')
    add('--near', type=int, default=5, help='near-tolerance knocks, 1.2-2x (5)')
    add('--pushes', type=int, default=5, help='slow pushes, 3 cm over 1 s (5)')
    add('--drops', type=int, default=5, help='drops or missed grasps during the lift (5)')
    add('--rknocks', type=int, default=5, help='knocks during retargeted replays (5)')
    add('--stops', type=int, default=6,
        help='knocked replays per manners (refuse, brake) on the mobile base (6)')
    add('--no-old', action='store_true', help='no cache with the old tube')
    add('--no-arm', action='store_true', help='only the stop part (mobile base)')
    add('--quick', action='store_true', help='a smoke run: 2 of each, 1 at rtf 0.5 and 2')
    add('--seed', type=int, default=36, help='random seed (36)')
    add('--think-time', type=float, default=0.05,
        help="the agents' think time per step, s (0.05)")
    add('--move-time', type=float, default=0.6,
        help="the agents' move time between hover poses, s (0.6)")
    add('--vertical-time', type=float, default=0.4,
        help="the agents' time to descend, lift and lower, s (0.4)")
    add('--out', type=Path, default=Path(__file__).with_name('watch.md'))
    add('--json', type=Path, default=Path(__file__).with_name('watch.json'),
        help='every task and the figures as JSON (bench/watch.json)')
    add('--render', type=Path, default=None,
        help='write the report from such a JSON file instead of running')
    add('--note', default='', help="a paragraph under the report's header")
    args = parser.parse_args()
    if args.quick:
        args.unchanged = args.retargeted = 2
        args.slow = args.fast = 1
        args.knocks = args.near = args.pushes = args.drops = args.rknocks = 2
        args.stops = 2
    return args


Task = tuple[str, tuple[float, float], Disturbance | None]
"""(kind, cube spot, disturbance or None)."""


def task_lists(args: argparse.Namespace) -> list[tuple[float, list[Task]]]:
    """Return the phases: (rtf, tasks in order)."""
    from muscle_mem_demo.physics import OBJECT_START

    rng = np.random.default_rng(args.seed)
    start = (OBJECT_START[0], OBJECT_START[1])
    durations = {0: args.move_time, 1: args.vertical_time, 3: args.vertical_time,
                 4: args.move_time, 5: args.vertical_time, 7: args.move_time}

    def spot() -> tuple[float, float]:
        dx, dy = rng.uniform(-SQUARE / 2, SQUARE / 2, size=2)
        return (float(start[0] + dx), float(start[1] + dy))

    def replays(unchanged: int, retargeted: int) -> list[Task]:
        return [('unchanged', start, None)] * unchanged + \
            [('retargeted', spot(), None) for _ in range(retargeted)]

    def at(kind: str, steps: tuple[int, ...], offset: tuple[float, float, float],
           factor: float = math.nan) -> Disturbance:
        step = int(rng.choice(steps))
        return Disturbance(kind, step, float(rng.uniform(0.0, 1.0) * durations[step]),
                           durations[step], offset, factor)

    def direction(size: float) -> tuple[float, float, float]:
        angle = rng.uniform(0.0, 2 * math.pi)
        return (float(size * math.cos(angle)), float(size * math.sin(angle)), 0.0)

    disturbed: list[Task] = []
    for _ in range(args.knocks):
        disturbed.append(('knock', start, at('knock', ACTION_STEPS,
                                             direction(rng.uniform(0.05, 0.20)))))
    for _ in range(args.near):
        factor = float(rng.uniform(1.2, 2.0))
        axis, sign = int(rng.integers(2)), float(rng.choice((-1.0, 1.0)))
        offset = [0.0, 0.0, 0.0]
        offset[axis] = sign * factor * EE_TOLERANCE
        disturbed.append(('near', start, at('near', TABLE_STEPS, tuple(offset), factor)))
    for _ in range(args.pushes):
        disturbed.append(('push', start, at('push', TABLE_STEPS, direction(PUSH[0]))))
    for _ in range(args.drops):
        disturbed.append(('drop', start, at('drop', (LIFT_STEP,), (0.0, 0.0, 0.0))))
    for _ in range(args.rknocks):
        disturbed.append(('rknock', spot(), at('rknock', ACTION_STEPS,
                                               direction(rng.uniform(0.05, 0.20)))))
    order = rng.permutation(len(disturbed))
    first = [('demo', start, None)] + replays(args.unchanged, args.retargeted) + \
        [disturbed[i] for i in order]
    return [(1.0, first), (0.5, replays(args.slow, args.slow)),
            (2.0, replays(args.fast, args.fast))]


def cache_params(name: str, *, store: str) -> dict[str, Any]:
    """Return the ROS params file content of one cache: the demo's, renamed."""
    from muscle_mem_demo.processes import config_path

    demo = yaml.safe_load(config_path('sim_demo.yaml').read_text())
    params = dict(demo['muscle_mem']['ros__parameters'])
    params['store_path'] = store
    params['watch'] = True
    params['step_back'] = 'off'
    params['agent_action'] = f'/agent_{name}/execute_task'
    for group in ('actions', 'services'):  # the Panda's sim_demo.yaml has no services
        if group not in params:
            continue
        params[group] = {
            tool: dict(spec, proxy=spec['proxy'].replace('/muscle_mem/', f'/{name}/'))
            for tool, spec in params[group].items()
        }
    return {name: {'ros__parameters': params}}


def old_tube_launcher(scratch: Path) -> Path | None:
    """Write the old tube and a launcher of the cache node with it; None: git has no such file."""
    rev = OLD_TUBE.split(':', 1)[0]
    try:
        source = subprocess.run(['git', '-C', str(ROOT), 'show', OLD_TUBE], check=True,
                                capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        print(f'no old tube ({err}): the old cache is left out', flush=True)
        return None
    tube = scratch / 'old_tube.py'
    tube.write_text(source)
    launcher = scratch / 'old_cache.py'
    launcher.write_text(LAUNCHER.format(rev=rev, path=str(tube)))
    return launcher


def commands(args: argparse.Namespace, scratch: Path, rtf: float, caches: list[str],
             launcher: Path | None) -> dict[str, list[str]]:
    """Return the command lines of the robot, the caches and the agents, by name."""
    python = sys.executable
    out: dict[str, list[str]] = {
        'sim_robot': [python, '-m', 'muscle_mem_demo.robot_node', '--ros-args',
                      '-p', f'rtf:={float(rtf)}'],
    }
    for name in caches:
        params_file = scratch / f'{name}.yaml'
        params_file.write_text(yaml.safe_dump(cache_params(
            name, store=str(scratch / f'{name}.db'))))
        start = [python, str(launcher)] if name == 'old' and launcher else \
            [python, '-m', 'muscle_mem_ros.ros.node.main']
        out[name] = start + ['--ros-args', '-r', f'__node:={name}',
                             '--params-file', str(params_file)]
        out[f'agent_{name}'] = [
            python, '-m', 'muscle_mem_demo.agent_node', '--ros-args',
            '-r', f'__node:=agent_{name}',
            '-p', f'think_time:={float(args.think_time)}',
            '-p', f'move_time:={float(args.move_time)}',
            '-p', f'vertical_time:={float(args.vertical_time)}',
            '-p', f'arm_action:=/{name}/arm/follow_joint_trajectory',
            '-p', f'pose_action:=/{name}/arm/move_to_pose',
            '-p', f'gripper_action:=/{name}/gripper/gripper_cmd',
        ]
    return out


class Observer:
    """Keeps the arm goals' acceptance stamps (the action servers' status), ROS time."""

    def __init__(self, node: Any) -> None:
        from action_msgs.msg import GoalStatusArray

        self._lock = threading.Lock()
        self.accepted: dict[bytes, float] = {}
        for action in ('/arm/move_to_pose', '/arm/follow_joint_trajectory'):
            node.create_subscription(GoalStatusArray, f'{action}/_action/status',
                                     self._on_status, 100)

    def _on_status(self, msg: Any) -> None:
        with self._lock:
            for status in msg.status_list:
                key = bytes(status.goal_info.goal_id.uuid)
                self.accepted.setdefault(key, _sec(status.goal_info.stamp))

    def goals(self, start: float, end: float) -> list[float]:
        """Return the acceptance times of the goals accepted in [start, end], in order."""
        with self._lock:
            return sorted(t for t in self.accepted.values() if start <= t <= end)


def _sec(stamp: Any) -> float:
    return int(stamp.sec) + int(stamp.nanosec) * 1e-9


def _monotonic(stamp: Any) -> float:
    """Return a ROS (system clock) stamp on the machine's monotonic clock."""
    return _sec(stamp) - (time.time() - time.monotonic())


def window_needed(recorded: Any, times: np.ndarray, values: np.ndarray) -> float:
    """
    Return the time window a tube aligned by time would need for this replay of a step.

    The smallest half-width around each reading whose recorded envelope (plus the
    tolerance) contains it, the worst reading's (inf: a reading no window explains).

    :param recorded: The step's recorded ee Series (times since acceptance, x y z).
    :param times: The replay's reading times since its goal's acceptance.
    :param values: Its readings, one (x, y, z) row each.
    """
    rec_t = np.asarray(recorded.times, dtype=float)
    rec_v = np.asarray(recorded.values, dtype=float).reshape(len(rec_t), -1)[:, :3]
    worst = 0.0
    for t, v in zip(times, values, strict=True):
        order = np.argsort(np.abs(rec_t - t), kind='stable')
        low = np.minimum.accumulate(rec_v[order], axis=0) - EE_TOLERANCE
        high = np.maximum.accumulate(rec_v[order], axis=0) + EE_TOLERANCE
        inside = np.all((low <= v) & (v <= high), axis=1)
        if not inside.any():
            return math.inf
        first = int(np.argmax(inside))
        worst = max(worst, float(abs(rec_t[order[first]] - t)))
    return worst


def recorded_steps(store_path: str) -> dict[int, tuple[Any, float]]:
    """Return the demonstration's action steps: step -> (its ee Series, its duration)."""
    from muscle_mem_ros.store import SqliteStore

    store = SqliteStore(path=store_path, read_only=True)
    try:
        first = min(store.trajectories(task=TASK), key=lambda t: t.id)
        steps: dict[int, tuple[Any, float]] = {}
        for depth, node_id in enumerate(first.node_ids):
            step = store.node(node_id).step
            if step.trace is not None and 'ee' in step.trace.sensors:
                steps[depth] = (step.trace.sensors['ee'], step.duration)
        return steps
    finally:
        store.close()


def run_arm(args: argparse.Namespace, scratch: Path, results: list[TaskResult],
            info: dict[str, Any], save: Any) -> None:
    """Run every phase on the demo arm; append each task's result as it ends."""
    from muscle_mem_demo.driver import StoryDriver
    from muscle_mem_demo.processes import ChildProcesses
    from muscle_mem_demo.story import Expectation, RunMode, RunSpec

    launcher = None if args.no_old else old_tube_launcher(scratch)
    info['old_tube'] = OLD_TUBE if launcher else 'not run'
    recorded: dict[int, tuple[Any, float]] = {}
    for phase, (rtf, tasks) in enumerate(task_lists(args)):
        if not tasks:
            continue
        caches = ['new', 'old'] if phase == 0 and launcher else ['new']
        phase_started = time.monotonic()
        with ChildProcesses(log_dir=scratch / f'logs_rtf{rtf:g}') as children:
            for name, command in commands(args, scratch, rtf, caches, launcher).items():
                children.start(name, command)
            drivers = {name: StoryDriver(cache_action=f'/{name}/execute_task',
                                         cache_events=f'/{name}/events',
                                         agent=f'/agent_{name}',
                                         node_name=f'bench_{name}_{phase}')
                       for name in caches}
            observer = Observer(drivers['new'])
            try:
                for driver in drivers.values():
                    driver.wait_ready(timeout=90.0, alive=children.check)
                if 'old' in caches:
                    if 'the old tube loaded' not in (scratch / f'logs_rtf{rtf:g}' /
                                                     'old.log').read_text():
                        raise RuntimeError('the old cache did not load the old tube')
                timeout = 60.0 + 10.0 * (args.think_time + 2.0 / rtf)
                expect = Expectation(mode=RunMode.REPLAY, replayed=8, by_agent=0,
                                     agent_calls=())
                for index, (kind, spot, disturbance) in enumerate(tasks):
                    names = caches if kind == 'demo' or disturbance is not None else ['new']
                    for name in names:
                        children.check()
                        driver = drivers[name]
                        result = TaskResult(index=index, kind=kind, cache=name, rtf=rtf,
                                            spot=spot, disturbance=disturbance)
                        spec = RunSpec(number=index, title=kind, expect=expect,
                                       nudge=(spot[0], spot[1], 0.02))
                        driver.prepare(spec)
                        if disturbance is not None:
                            _disturb(driver, disturbance)
                        t0 = driver.get_clock().now().nanoseconds * 1e-9
                        outcome = driver.execute(spec, timeout=timeout)
                        t1 = driver.get_clock().now().nanoseconds * 1e-9
                        _fill(result, outcome, driver)
                        if name == 'new' and kind == 'demo':
                            recorded = recorded_steps(str(scratch / 'new.db'))
                        if name == 'new' and kind == 'unchanged' and recorded:
                            _drift(result, observer, outcome, t0, t1, recorded)
                        results.append(result)
                        _say(result)
                        save()
            finally:
                children.stop()
                for driver in drivers.values():
                    driver.close()
        info.setdefault('phase_seconds', {})[f'{rtf:g}'] = time.monotonic() - phase_started


def _disturb(driver: Any, d: Disturbance) -> None:
    """Ask the robot to move the cube during the task's arm goal of ``d.step``."""
    from muscle_mem_demo_interfaces.srv import MoveObject

    moves = [(d.delay, d.offset)]
    if d.kind == 'push':
        distance, seconds, count = PUSH
        share = [v / count for v in d.offset]
        moves = [(d.delay + i * seconds / count, tuple(share)) for i in range(count)]
    for delay, offset in moves:
        request = MoveObject.Request()
        request.pose.position.x, request.pose.position.y, request.pose.position.z = offset
        request.pose.orientation.w = 1.0
        request.after_goals = ACTION_STEPS.index(d.step)
        request.delay = max(delay, 1e-3)
        request.relative = True
        response = driver._call(driver._move, request, timeout=5.0)
        if not response.success:
            raise RuntimeError(f'move_object refused the disturbance: {response.message}')


def _fill(result: TaskResult, outcome: Any, driver: Any) -> None:
    from muscle_mem_interfaces.msg import CacheEvent

    result.mode = outcome.mode.value if outcome.mode else 'failed'
    result.success = outcome.success
    result.replayed = outcome.replayed
    result.by_agent = outcome.by_agent
    result.agent_calls = list(outcome.agent_calls)
    result.wall_time = outcome.wall_time
    result.check_failure = outcome.check_failure
    result.message = outcome.message
    with driver._lock:  # the run's events, kept until the next execute
        events = list(driver._events)
    every = [e for e in events if e.type == CacheEvent.CHECK_FAILED]
    result.checks = [[int(e.step), float(e.time_into_step), _monotonic(e.stamp)] for e in every]
    failed = [e for e in every if getattr(e, 'time_into_step', -1.0) >= 0.0]
    d = result.disturbance
    if d is not None:
        result.unwatched = next((list(e.unwatched) for e in events if int(e.step) == d.step
                                 and e.type in (CacheEvent.STEP_OK, CacheEvent.CHECK_FAILED)
                                 and e.unwatched), [])
    result.canceled = [[int(e.step), float(e.time_into_step)] for e in failed]
    result.trips = [_monotonic(e.stamp) for e in failed]
    if outcome.knock is not None:
        k = outcome.knock
        result.knock = dict(vars(k), reaction=k.reaction, after_knock=k.after_knock,
                            stopped_short=k.stopped_short)


def _drift(result: TaskResult, observer: Observer, outcome: Any, t0: float, t1: float,
           recorded: dict[int, tuple[Any, float]]) -> None:
    """Fill in, per action step of an unchanged replay, the time window it needed."""
    from muscle_mem_demo.kinematics import forward

    goals = observer.goals(t0, t1 + 0.2)
    if len(goals) != len(ACTION_STEPS) or not outcome.trace_times:
        return
    points = [forward(row) for row in outcome.trace_positions]
    ee = np.column_stack([np.asarray(outcome.trace_times) + outcome.trace_origin,
                          [p.x for p in points], [p.y for p in points],
                          [p.z for p in points]])
    for step, accepted in zip(ACTION_STEPS, goals, strict=True):
        series, duration = recorded[step]
        rows = ee[(ee[:, 0] >= accepted) & (ee[:, 0] <= accepted + duration / result.rtf)]
        result.window_needed.append(window_needed(series, rows[:, 0] - accepted, rows[:, 1:]))


def _say(r: TaskResult) -> None:
    extra = ''
    d = r.disturbance
    if d is not None:
        k = r.knock or {}
        extra = (f' {d.kind} step {d.step} at {d.delay:.2f}/{d.duration:.1f} s: '
                 f'{"CAUGHT" if r.caught else "missed"} ({k.get("outcome", "no report")})'
                 f' reaction {r.reaction * 1000:.0f} ms')
        pushed = r.pushed_at_trip()
        if pushed is not None:
            extra += f' pushed {pushed * 100:.1f} cm at the trip'
        pushed = r.pushed_at_check()
        if pushed is not None:
            extra += f' pushed {pushed * 100:.1f} cm at the first failed check'
        if r.unwatched:
            extra += f' unwatched {r.unwatched}'
        if r.mode == 'failed':
            extra += f' ({r.message[:150]})'
    if r.window_needed:
        extra += f' time window needed {max(r.window_needed):.3f} s'
    print(f'{r.index:3d} rtf {r.rtf:g} {r.kind:10s} {r.cache:4s} {r.mode:16s} '
          f'{r.wall_time:5.1f} s canceled {r.canceled}{extra}  {r.check_failure[:90]}',
          flush=True)


# -- the stop, on the mobile base -------------------------------------------------------------


def run_stops(args: argparse.Namespace, scratch: Path, runs: list[StopRun], save: Any) -> None:
    """Knock the tag during replayed gotos of a base that refuses or brakes; append each run."""
    sys.path.insert(0, str(ROOT / 'muscle_mem_ros' / 'test'))
    from action_msgs.msg import GoalStatus
    from mobile_base_helpers import BaseAgent, BaseHarness, MobileBase
    from mobile_helpers import TAG_HOME
    from muscle_mem_interfaces.msg import CacheEvent

    class TimedAgent(BaseAgent):
        """The base's agent, noting when each task is handed to it (monotonic)."""

        def __init__(self, **kwargs: Any) -> None:  # noqa: D107
            self.handed: list[float] = []
            super().__init__(**kwargs)

        def _execute(self, goal_handle: Any) -> Any:
            self.handed.append(time.monotonic())
            return super()._execute(goal_handle)

    class Harness(BaseHarness):

        def _doubles(self) -> tuple[Any, Any]:
            robot = MobileBase(names=self.names, context=self.context)
            return robot, TimedAgent(names=self.names, robot=robot, context=self.context)

    rng = np.random.default_rng(args.seed + 1)
    tmp = scratch / 'mobile'
    tmp.mkdir()
    h = Harness(tmp=tmp)
    try:
        prefix = h.names.prefix
        h.start_cache(**{'stop_timeout': 2.0, 'step_back': 'off',
                         'actions.goto.stop_service': f'/{prefix}/base_stop'})
        params = json.dumps({'bin': 1})
        h.robot.reset()
        learned = h.run_task('fetch', params)
        if learned.status != GoalStatus.STATUS_SUCCEEDED:
            raise RuntimeError(f'the base did not learn the task: {learned.result.message}')
        h.wait_events(CacheEvent.MISS, 'fetch')
        for i in range(2 * args.stops):
            manners = ('refuse', 'brake')[i % 2]
            h.robot.reset()
            gotos, handed = len(h.robot.gotos), len(h.agent.handed)
            failed_before = len(h.events_of(CacheEvent.CHECK_FAILED, 'fetch'))
            stopped_before = len(h.events_of(CacheEvent.STOPPED, 'fetch'))
            run = StopRun(manners=manners, delay=float(rng.uniform(0.3, 1.5)))
            h.robot.manners = manners

            def knock(run: StopRun = run, index: int = gotos) -> None:
                goto = h.robot.wait_goto(index, 20.0)
                if goto is None:
                    return
                time.sleep(max(0.0, goto.started + run.delay - time.monotonic()))
                h.robot.move_tag((TAG_HOME[0] + 0.15, TAG_HOME[1]))

            thread = threading.Thread(target=knock, daemon=True)
            thread.start()
            done = h.run_task('fetch', params)
            thread.join(5.0)
            run.status, run.message = int(done.status), str(done.result.message)
            failed = h.events_of(CacheEvent.CHECK_FAILED, 'fetch')[failed_before:]
            if not failed and _soon(h, CacheEvent, failed_before):
                failed = h.events_of(CacheEvent.CHECK_FAILED, 'fetch')[failed_before:]
            run.tripped = bool(failed)
            if failed:
                run.trip = _monotonic(failed[0].stamp)
            time.sleep(0.3)  # the STOPPED events travel on a topic
            run.stopped_events = [e.detail for e in
                                  h.events_of(CacheEvent.STOPPED, 'fetch')[stopped_before:]]
            if len(h.agent.handed) > handed:
                run.handed_back = h.agent.handed[handed]
            if len(h.robot.gotos) > gotos:
                stopped = h.robot.gotos[gotos]
                run.stopped_ended, run.refused = stopped.ended, stopped.refused
            if len(h.robot.gotos) > gotos + 1:
                run.next_started = h.robot.gotos[gotos + 1].started
            with h.robot.lock:
                run.stop_calls, run.overlaps = h.robot.stops, len(h.robot.overlaps)
            runs.append(run)
            print(f'stop {i:2d} {manners:6s} knock at {run.delay:.2f} s: status {run.status} '
                  f'tripped {run.tripped} refused {run.refused} stop calls {run.stop_calls} '
                  f'overlaps {run.overlaps} trip -> hand-back '
                  f'{run.to_hand_back * 1000:.0f} ms; {run.stopped_events}', flush=True)
            save()
    finally:
        h.close()


def _soon(h: Any, events: Any, before: int) -> bool:
    """Return True when a CHECK_FAILED of the run arrives within 3 s."""
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        if len(h.events_of(events.CHECK_FAILED, 'fetch')) > before:
            return True
        time.sleep(0.05)
    return False


# -- figures and report -----------------------------------------------------------------------


def _p(xs: list[float], q: float) -> float:
    xs = [x for x in xs if math.isfinite(x)]
    return pct(xs, q) if xs else math.nan


def _max(xs: list[float]) -> float:
    xs = [x for x in xs if math.isfinite(x)]
    return max(xs) if xs else math.nan


def summarize(results: list[TaskResult], stops: list[StopRun]) -> dict[str, Any]:
    """Return the figures: replays by rtf, disturbances by kind and cache, stops by manners."""
    out: dict[str, Any] = {'replays': {}, 'disturbances': {}, 'stops': {}}
    for r in results:
        if r.kind in ('unchanged', 'retargeted') and r.cache == 'new':
            key = f'{r.kind} rtf {r.rtf:g}'
            out['replays'].setdefault(key, []).append(r)
    out['replays'] = {key: {
        'n': len(rs), 'canceled': sum(bool(r.canceled) for r in rs),
        'not_replayed': sum(r.by_agent > 0 or r.mode != 'replay' for r in rs),
        'wall_p50': _p([r.wall_time for r in rs], 50),
        'window_p50': _p([max(r.window_needed) for r in rs if r.window_needed], 50),
        'window_max': _max([max(r.window_needed) for r in rs if r.window_needed]),
    } for key, rs in out['replays'].items()}
    for kind in DISTURBANCES:
        for cache in ('new', 'old'):
            rs = [r for r in results if r.kind == kind and r.cache == cache]
            if not rs:
                continue
            pushed = [r.pushed_at_trip() for r in rs]
            checked = [r.pushed_at_check() for r in rs]
            out['disturbances'][f'{kind} {cache}'] = {
                'n': len(rs), 'caught': sum(r.caught for r in rs),
                'canceled_any': sum(bool(r.canceled) for r in rs),
                'reaction_p50': _p([r.reaction for r in rs], 50),
                'reaction_max': _max([r.reaction for r in rs]),
                # a push's grasp travel (after its first move) says nothing
                'travel_p50': _p([r.knock['after_knock'] for r in rs
                                  if r.knock and kind != 'push'], 50),
                'travel_max': _max([r.knock['after_knock'] for r in rs
                                    if r.knock and kind != 'push']),
                'pushed_p50': _p([x for x in pushed if x is not None], 50),
                'pushed_max': _max([x for x in pushed if x is not None]),
                'checked': sum(x is not None for x in checked),
                'checked_p50': _p([x for x in checked if x is not None], 50),
                'checked_max': _max([x for x in checked if x is not None]),
                'failed_tasks': sum(r.mode == 'failed' for r in rs),
                'early': sum(_early(r) for r in rs),
                'succeeded': sum(r.success for r in rs),
            }
    for manners in ('refuse', 'brake'):
        rs = [s for s in stops if s.manners == manners]
        if rs:
            out['stops'][manners] = {
                'n': len(rs), 'tripped': sum(s.tripped for s in rs),
                'overlaps': sum(s.overlaps for s in rs),
                'handed_back': sum(math.isfinite(s.handed_back) for s in rs),
                'succeeded': sum(s.status == 4 for s in rs),
                'stop_calls': sum(s.stop_calls for s in rs),
                'hand_back_p50': _p([s.to_hand_back for s in rs], 50),
                'hand_back_max': _max([s.to_hand_back for s in rs]),
                'ended_to_hand_back_p50': _p([s.handed_back - s.stopped_ended for s in rs], 50),
                'before_end': sum(s.handed_back < s.stopped_ended for s in rs),
            }
    return out


def _early(r: TaskResult) -> bool:
    """Return True when a step before the disturbance's was canceled (nothing had happened)."""
    d = r.disturbance
    return d is not None and any(int(step) < d.step for step, _ in r.canceled)


def _ms(x: float) -> str:
    return f'{x * 1000:.0f} ms' if math.isfinite(x) else '-'


def _cm(x: float) -> str:
    return f'{x * 100:.1f} cm' if math.isfinite(x) else '-'


def command_line(args: argparse.Namespace) -> str:
    """Return the command that runs what ``args`` ran (kept in the JSON: --render shows it)."""
    return (f'bench/watch --unchanged {args.unchanged} --retargeted {args.retargeted} '
            f'--slow {args.slow} --fast {args.fast} --knocks {args.knocks} --near {args.near} '
            f'--pushes {args.pushes} --drops {args.drops} --rknocks {args.rknocks} '
            f'--stops {args.stops} --seed {args.seed} --think-time {args.think_time:g} '
            f'--move-time {args.move_time:g} --vertical-time {args.vertical_time:g}'
            f"{' --no-old' if args.no_old else ''}{' --no-arm' if args.no_arm else ''}")


def render(args: argparse.Namespace, results: list[TaskResult], stops: list[StopRun],
           info: dict[str, Any]) -> str:
    """Return the Markdown report."""
    f = summarize(results, stops)
    target = 0.100 + OBJECT_PERIOD
    rep, dis, stp = f['replays'], f['disturbances'], f['stops']

    def verdict(ok: bool) -> str:
        return 'pass' if ok else 'FAIL'

    def frac(key: str, what: str = 'caught') -> str:
        d = dis.get(key)
        return f'{d[what]}/{d["n"]}' if d else '-'

    def field_(key: str, name: str, fmt: Any = _ms) -> str:
        d = dis.get(key)
        return fmt(d[name]) if d else '-'

    replays_canceled = sum(v['canceled'] for v in rep.values())
    replays_n = sum(v['n'] for v in rep.values())
    new = [r for r in results if r.cache == 'new' and r.disturbance is not None]
    below = [r for r in new if r.kind == 'near' and r.disturbance.factor < 1.5]
    must = [r for r in new if not (r.kind == 'near' and r.disturbance.factor < 1.5)]
    reactions = [r.reaction for r in new]
    overlaps = sum(v['overlaps'] for v in stp.values())
    lines = [
        '# Watch benchmark',
        '',
        f'Generated by `bench/watch` (`bench/watch.py`) on {info.get("date", "?")}; every '
        'figure below is from one run on:',
        f'{cpu_name()}, nproc {os.cpu_count()}, Python {platform.python_version()}, RMW '
        f'{os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")}, DDS on loopback. Load '
        f'average {info["load_start"]:.2f} at the start, {info.get("load_end", math.nan):.2f} '
        f"at the end (the machine is shared with other engineers' tests); the run took "
        f'{info.get("seconds", math.nan):.0f} s.',
        '',
        f"Command: `{info.get('command') or command_line(args)}`",
        '',
        *([args.note, ''] if args.note else []),
        '**Counts.** Issue 36 asks for 100 unchanged and 100 retargeted replays (also at rtf 0.5 '
        'and 2). A replay of the demo task takes about 6 s of wall time here and a disturbed '
        'one (run on both caches) about 15 s, so the counts above were scaled down to keep '
        'the whole run within about 15 minutes on this 2-core machine: '
        f'{replays_n} replays in all instead of 600, and a handful of each disturbance. '
        'The shares below are over these counts, not over 100; `bench/watch --unchanged 100 '
        '--retargeted 100 --slow 100 --fast 100` measures the full set (about 2 hours).',
        '',
        f'The `old` cache is the same process with the tube of `{info.get("old_tube")}` '
        '(each element aligned on its own, one segment back per reading), loaded from git '
        "inside the run; everything else (the stop included) is this tree's.",
        '',
        '## Targets (this tree: the `new` cache)',
        '',
        '| metric | target | measured | result |',
        '|---|---|---|---|',
        f'| unchanged and retargeted replays canceled (rtf 1, 0.5, 2) | 0 | '
        f'{replays_canceled} of {replays_n} | {verdict(replays_canceled == 0)} |',
        f'| disturbances caught during their step, near-tolerance below 1.5x left out | all '
        f'| {sum(r.caught for r in must)} of {len(must)} | '
        f'{verdict(all(r.caught for r in must))} |',
        f'| near-tolerance knocks below 1.5x caught (reported, no target) | - | '
        f'{sum(r.caught for r in below)} of {len(below)} | - |',
        f'| reaction disturbance -> cancel at the robot, p50 | < {_ms(target)} (100 ms + one '
        f'30 Hz /object_pose period) | {_ms(_p(reactions, 50))} | '
        f'{verdict(_p(reactions, 50) < target)} |',
        f'| reaction, max | - | {_ms(_max(reactions))} | - |',
        "| steps canceled before their task's disturbance happened (false cancels) | 0 | "
        f'{sum(_early(r) for r in new)} in {len(new)} disturbed tasks (old tube: '
        f'{sum(_early(r) for r in results if r.cache == "old")}) | '
        f'{verdict(not any(_early(r) for r in new))} |',
        f'| overlapping motions on a base that refuses or brakes | 0 | {overlaps} in '
        f'{sum(v["n"] for v in stp.values())} runs | {verdict(overlaps == 0 and bool(stp))} |',
        '',
        '## Replays that must not be canceled (`new`)',
        '',
        '| replays | n | canceled | agent called or failed | wall p50 '
        '| time window needed p50 / max |',
        '|---|---|---|---|---|---|',
    ]
    for key, v in rep.items():
        lines.append(f'| {key} | {v["n"]} | {v["canceled"]} | {v["not_replayed"]} | '
                     f'{v["wall_p50"]:.2f} s | {_ms(v["window_p50"])} / '
                     f'{_ms(v["window_max"])} |')
    lines += [
        '',
        'Time window needed (unchanged replays): each grasp-point reading placed from its '
        "goal's acceptance against the recorded trace (recorded at rtf 1): the smallest "
        'time window around it in which the recording comes within the 2 cm tolerance, '
        'worst reading per replay ("inf": no window explains it). What a tube aligned by '
        'time would have to allow; the tube is aligned by progress and needs none.',
        '',
        '## Disturbances: the new tube against the old, same tasks, same run',
        '',
        '| disturbance | caught new | caught old | reaction p50 / max new | '
        'reaction p50 / max old | grasp travel after p50 / max new | old |',
        '|---|---|---|---|---|---|---|',
    ]
    names = {'knock': 'knock 5-20 cm', 'near': 'knock 1.2-2x tolerance',
             'push': 'slow push 3 cm / 1 s', 'drop': 'drop / missed grasp in the lift',
             'rknock': 'knock 5-20 cm, retargeted replay'}
    for kind in DISTURBANCES:
        lines.append(
            f'| {names[kind]} | {frac(kind + " new")} | {frac(kind + " old")} | '
            f'{field_(kind + " new", "reaction_p50")} / {field_(kind + " new", "reaction_max")} | '
            f'{field_(kind + " old", "reaction_p50")} / {field_(kind + " old", "reaction_max")} | '
            f'{field_(kind + " new", "travel_p50", _cm)} / '
            f'{field_(kind + " new", "travel_max", _cm)} | '
            f'{field_(kind + " old", "travel_p50", _cm)} / '
            f'{field_(kind + " old", "travel_max", _cm)} |')
    lines += [
        '',
        f'Slow pushes: pushed at the trip p50 / max: new {field_("push new", "pushed_p50", _cm)}'
        f' / {field_("push new", "pushed_max", _cm)}, old '
        f'{field_("push old", "pushed_p50", _cm)} / {field_("push old", "pushed_max", _cm)} '
        '(a push runs on past the step it started in: caught is a cancel of any step from '
        'its start on, while it goes on). Caught by any check while it went on (a '
        f'post-check included): new {frac("push new", "checked")}, old '
        f'{frac("push old", "checked")}, pushed then p50 / max new '
        f'{field_("push new", "checked_p50", _cm)} / {field_("push new", "checked_max", _cm)}'
        f', old {field_("push old", "checked_p50", _cm)} / '
        f'{field_("push old", "checked_max", _cm)}. Reaction is not given for pushes.',
        '',
        '## The stop: a base that refuses the cancel or brakes for 1 s (mobile base double)',
        '',
        '| manners | runs | tripped | overlapping motions | agent handed the task | '
        'handed back before the stopped goal ended | stop service calls | '
        'trip -> hand-back p50 / max | stopped goal ended -> hand-back p50 |',
        '|---|---|---|---|---|---|---|---|---|',
    ]
    for manners, v in stp.items():
        lines.append(f'| {manners} | {v["n"]} | {v["tripped"]} | {v["overlaps"]} | '
                     f'{v["handed_back"]} | {v["before_end"]} | {v["stop_calls"]} | '
                     f'{_ms(v["hand_back_p50"])} / {_ms(v["hand_back_max"])} | '
                     f'{_ms(v["ended_to_hand_back_p50"])} |')
    if not stp:
        lines.append('| (not run) | | | | | | | | |')
    lines += [
        '',
        'The old stop (before 73abcf3: a refused cancel waited 2 s and handed the task back '
        'anyway) is not run side by side: it lives in the proxies of the old tree, not in '
        'one module a process can swap.',
        '',
        '## Every disturbance',
        '',
        '| # | kind | step | at / motion s | size | new | reaction ms | old | reaction ms '
        '| new: check |',
        '|---|---|---|---|---|---|---|---|---|---|',
    ]
    old = {r.index: r for r in results if r.cache == 'old' and r.disturbance is not None}

    def said(r: TaskResult | None) -> str:
        if r is None:
            return '-'
        if r.caught:
            return 'caught'
        if r.canceled:
            return 'canceled later'
        if r.checks:
            return 'post-check'
        if r.mode == 'failed':
            return 'task failed'
        return (r.knock or {}).get('outcome', 'no report')

    for r in new:
        d = r.disturbance
        o = old.get(r.index)
        size = (f'{d.factor:.2f}x' if d.kind == 'near' else
                f'{math.hypot(*d.offset) * 100:.1f} cm')
        lines.append(
            f'| {r.index} | {d.kind} | {d.step} | {d.delay:.2f} / {d.duration:.1f} | {size} | '
            f'{said(r)} | {r.reaction * 1000:.0f} | {said(o)} | '
            f'{(o.reaction if o else math.nan) * 1000:.0f} | {r.check_failure[:100]} |')
    missed = [r for r in new if not r.caught]
    if missed:
        lines += ['', '## What the watch left out of the steps it missed (`new`)', '']
        lines += [f'- {r.index} ({r.disturbance.kind}, step {r.disturbance.step}): '
                  f'{"; ".join(r.unwatched) or "nothing"}' for r in missed]
    failed = [r for r in results if r.mode == 'failed']
    if failed:
        lines += ['', '## Tasks that failed', '']
        lines += [f'- {r.index} ({r.cache}, rtf {r.rtf:g}, {r.kind}): {r.message[:300]}'
                  for r in failed]
    canceled = [r for r in results if r.kind in ('unchanged', 'retargeted') and r.canceled]
    if canceled:
        lines += ['', '## Canceled replays that should not have been', '']
        lines += [f'- task {r.index} (rtf {r.rtf:g}, {r.kind}, cube {r.spot[0]:.3f}, '
                  f'{r.spot[1]:.3f}): {r.check_failure}' for r in canceled]
    return '\n'.join(lines) + '\n'


def main() -> int:
    """Run the benchmark and write its report; exit 0 when every target was met."""
    args = parse_args()
    results: list[TaskResult] = []
    stops: list[StopRun] = []
    if args.render is not None:
        saved = json.loads(args.render.read_text())
        info = saved['info']
        for r in saved['tasks']:
            d = r.pop('disturbance')
            results.append(TaskResult(**dict(r, spot=tuple(r['spot']),
                                             disturbance=Disturbance(**d) if d else None)))
        stops = [StopRun(**s) for s in saved['stops']]
    else:
        import rclpy
        from rclpy.signals import SignalHandlerOptions

        os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
        info = {'load_start': os.getloadavg()[0], 'date': time.strftime('%Y-%m-%d %H:%M %Z'),
                'command': command_line(args)}
        started = time.monotonic()

        def save() -> None:  # as it goes: a run cut short keeps its tasks
            args.json.write_text(json.dumps(
                {'info': info, 'tasks': [vars(r) for r in results],
                 'stops': [vars(s) for s in stops]}, indent=1, default=_plain))

        rclpy.init(args=[], signal_handler_options=SignalHandlerOptions.NO)
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            with tempfile.TemporaryDirectory(prefix='mm_bench_watch_') as tmp:
                if not args.no_arm:
                    run_arm(args, Path(tmp), results, info, save)
                if args.stops:
                    run_stops(args, Path(tmp), stops, save)
        finally:
            rclpy.try_shutdown()
        info['seconds'] = time.monotonic() - started
        info['load_end'] = os.getloadavg()[0]
        save()
    args.out.write_text(render(args, results, stops, info))
    print(f'wrote {args.out}')
    f = summarize(results, stops)
    new = [r for r in results if r.cache == 'new' and r.disturbance is not None
           and not (r.kind == 'near' and r.disturbance.factor < 1.5)]
    met = (sum(v['canceled'] for v in f['replays'].values()) == 0
           and all(r.caught for r in new)
           and sum(v['overlaps'] for v in f['stops'].values()) == 0)
    return 0 if met else 1


def _plain(value: Any) -> Any:
    return vars(value) if hasattr(value, '__dict__') else str(value)


if __name__ == '__main__':
    sys.exit(main())
