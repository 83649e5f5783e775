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
The demo's third part, "eyes only" (:mod:`muscle_mem_demo.eyes_story`), run and shown.

Starts its own three nodes (the robot with its camera on, the cache with
``config/sim_eyes.yaml`` and a fresh store, the agent), so the other parts render nothing;
prints a row per run in the story's table, and saves the frames that matter as PNG files in
the output directory: the scene the task was learned in, the scene that made run 18's miss
(the cell the cache named outlined), run 19's box outside the region of interest (the region
outlined), and the frame run 20's watch tripped on beside the recorded frame at the same time
into the motion; and the thumbnails the cache's store kept of every recorded view
(``eyes_store/``, as ``muscle-mem show --images`` writes them).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
import math
import os
from pathlib import Path
import re
import tempfile

from muscle_mem_demo.camera_frames import frame_at
from muscle_mem_demo.eyes_story import CAMERA_RATE, CAMERA_TOPIC, EYES_STORY, ROI
from muscle_mem_demo.processes import ChildProcesses, config_path, node_commands
from muscle_mem_demo.report import format_row, HEADER, rule
from muscle_mem_demo.story import judge, RunOutcome, TASK

__all__ = ['describe_drop', 'run_eyes', 'save_pictures', 'store_views']

_CELL = re.compile(r'cell at x (\d+), y (\d+) \((\d+)x(\d+) px')


def run_eyes(args: argparse.Namespace, say: Callable[[str], None]) -> list[RunOutcome]:
    """
    Start the eyes part's nodes, perform its runs, print its table; return the outcomes.

    :raises NodeProcessError: a node exited early.
    :raises DriverError: a node did not come up or stopped answering.
    """
    from muscle_mem_demo.driver import StoryDriver
    import rclpy

    output_dir: Path = args.output_dir
    outcomes: list[RunOutcome] = []
    with tempfile.TemporaryDirectory(prefix='muscle_mem_eyes_') as scratch:
        commands = node_commands(rtf=args.rtf, think_time=args.think_time,
                                 store_path=str(Path(scratch) / 'cache.db'),
                                 params_file=config_path('sim_eyes.yaml'),
                                 camera_rate=CAMERA_RATE)
        say('')
        say(f'eyes only: the cache sees the cube through the camera alone ({CAMERA_TOPIC}, '
            f'{CAMERA_RATE:g} Hz, config/sim_eyes.yaml): no object sensor, no bindings')
        os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
        rclpy.init(args=[])
        try:
            with ChildProcesses(log_dir=output_dir / 'logs' / 'eyes') as children:
                for name, command in commands.items():
                    children.start(name, command)
                driver = StoryDriver(node_name='sim_eyes', camera=CAMERA_TOPIC)
                try:
                    driver.wait_ready(timeout=args.startup_timeout, alive=children.check)
                    say(HEADER)
                    say(rule())
                    timeout = 60.0 + 15.0 * (args.think_time + 3.0 / args.rtf)
                    for spec in EYES_STORY:
                        children.check()
                        driver.prepare(spec)
                        outcome = judge(driver.execute(spec, timeout=timeout))
                        outcomes.append(outcome)
                        say(format_row(outcome, baseline=outcomes[0].wall_time))
                        for failure in outcome.failures:
                            say(f'      ! {failure}')
                        if outcome.check_failure:
                            then = (f'agent resumed at step {outcome.agent_calls[0]}'
                                    if outcome.agent_calls else 'agent not called')
                            say(f'      cache noticed: {outcome.check_failure}; {then}')
                        if outcome.spec.drop is not None:
                            say(f'      watch: {describe_drop(outcome)}')
                    say(rule())
                finally:
                    children.stop()
                    driver.close()
        finally:
            rclpy.try_shutdown()
        kept = store_views(Path(scratch) / 'cache.db', output_dir / 'eyes_store')
    for path in save_pictures(outcomes, output_dir):
        say(f'picture: {path}')
    if kept:
        first = next((p for p in kept if p.name == 'view-t1-s0-pre-camera.png'), kept[0])
        say(f"picture: {first} (the cache's own {len(kept)} thumbnails of the recorded "
            f'views in {first.parent}: the first recording, step 0, before)')
    return outcomes


def store_views(store_path: Path, directory: Path) -> list[Path]:
    """
    Write the thumbnails the cache's store kept of the recorded camera views; return them.

    The store keeps a small PNG of each camera's recorded pre and post view beside its cells
    (``Snapshot.images``); these are what ``muscle-mem show --images`` writes, named
    ``view-t<trajectory>-s<step>-<pre|post>-camera.png``. None when the store has none.
    """
    from muscle_mem_ros.cli.inventory import open_cli_store, show_task
    from muscle_mem_ros.errors import MuscleMemError

    if not store_path.is_file():
        return []
    try:
        with open_cli_store(str(store_path)) as store:
            shown = show_task(store, TASK, None, directory)
    except MuscleMemError:
        return []
    kept = []
    for trajectory in shown:
        for step in trajectory['steps']:
            for files in step.get('images', {}).values():
                for file in files.values():
                    path = Path(file)
                    kept.append(path.rename(path.with_name('view-' + path.name)))
    return kept


def describe_drop(outcome: RunOutcome) -> str:
    """Return when the box was dropped and when the cache stopped the motion (ROS time)."""
    if math.isnan(outcome.dropped_at):
        return 'the box was not dropped (the arm did not move)'
    after = (f'{outcome.dropped_at - outcome.motion_started:.2f} s into the motion'
             if math.isfinite(outcome.motion_started) else 'during the motion')
    if not outcome.canceled:
        return f'the box was dropped {after}; no step was stopped'
    step, into = outcome.canceled[0]
    late = outcome.check_failed_at - outcome.dropped_at
    return (f'the box was dropped {after}; step {step} stopped {into:.2f} s into the motion, '
            f'{late * 1000:.0f} ms after the drop (a frame at {CAMERA_RATE:g} Hz, then the '
            'check)')


def save_pictures(outcomes: Sequence[RunOutcome], output_dir: Path) -> list[Path]:
    """
    Save the frames that matter as PNG files in ``output_dir``; return their paths.

    The first run's first frame is the scene as recorded; a run whose first check failed
    before it moved (a miss) shows its first frame with the named cell outlined; a run with
    a box outside the region shows the region; a run whose motion was stopped shows the
    frame at the stop and, when that was the first motion, the recorded run's frame at the
    same time into it (the recorded run is the agent's, which thinks between its steps).
    """
    from PIL import Image, ImageDraw

    saved: list[Path] = []
    if not outcomes or not outcomes[0].frames:
        return saved
    recorded = outcomes[0]

    def save(pixels: object, name: str, box: Sequence[int] | None = None,
             colour: str = 'red') -> None:
        image = Image.fromarray(pixels)  # type: ignore[arg-type]
        if box is not None:
            x, y, w, h = box
            ImageDraw.Draw(image).rectangle((x, y, x + w - 1, y + h - 1), outline=colour)
        path = output_dir / name
        image.save(path)
        saved.append(path)

    output_dir.mkdir(parents=True, exist_ok=True)
    save(recorded.frames[0][1], f'eyes_run{recorded.spec.number}_recorded.png')
    for run in outcomes[1:]:
        if not run.frames:
            continue
        number = run.spec.number
        cell = _CELL.search(run.check_failure)
        if cell and not run.canceled:
            x, y, w, h = (int(v) for v in cell.groups())
            save(run.frames[0][1], f'eyes_run{number}_miss.png', (x, y, w, h))
        if run.spec.distractor is not None:
            save(run.frames[0][1], f'eyes_run{number}_outside_roi.png', ROI, 'yellow')
        if run.canceled and math.isfinite(run.check_failed_at):
            tripped = frame_at(run.frames, run.check_failed_at)
            if tripped is not None:
                save(tripped, f'eyes_run{number}_trip.png')
            first = run.canceled[0][0] == 0  # the recorded run thinks between its steps
            if first and math.isfinite(run.motion_started) and math.isfinite(
                    recorded.motion_started):
                same = recorded.motion_started + (run.check_failed_at - run.motion_started)
                then = frame_at(recorded.frames, same)
                if then is not None:
                    save(then, f'eyes_run{number}_trip_recorded.png')
    return saved
