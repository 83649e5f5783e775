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
The demo's "eyes only" story end to end: the cache sees the cube through the camera alone.

Runs ``python -m muscle_mem_demo.demo --eyes-only`` (sim robot with its camera at 10 Hz,
the cache with config/sim_eyes.yaml, the agent; about a minute), then checks each run
from the JSON summary the demo writes: learned, replayed unchanged and under four times the
noise (no false miss, nothing canceled), a 3 cm move of the cube a miss whose failed check
names the camera's cell, the box outside the region of interest a replay, and the box
dropped during the first replayed motion stopping it mid-motion (the agent resumes at step
0); and the pictures it saves: the trip frame shows the magenta box, the recorded frame at
the same time into the motion does not. The judging and the commands are checked ROS-free
below.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

from muscle_mem_demo.eyes_demo import describe_drop
from muscle_mem_demo.eyes_story import CAMERA_RATE, EYES_STORY, ROI
from muscle_mem_demo.processes import config_path, node_commands
from muscle_mem_demo.story import judge, RunMode, RunOutcome
import numpy as np
import pytest

EXPECTED = [
    # run, mode, replayed, by agent, agent calls (resume steps)
    (15, 'miss -> agent', 0, 8, [0]),
    (16, 'replay', 8, 0, []),
    (17, 'replay', 8, 0, []),
    (18, 'miss -> agent', 0, 8, [0]),
    (19, 'replay', 8, 0, []),
    (20, 'replay -> agent', 0, 8, [0]),
]


@pytest.fixture(scope='module')
def eyes(tmp_path_factory):
    out = tmp_path_factory.mktemp('eyes')
    proc = subprocess.run(
        [sys.executable, '-m', 'muscle_mem_demo.demo', '--eyes-only', '--think-time', '0.05',
         '--rtf', '1', '--output-dir', str(out)],
        capture_output=True, text=True, timeout=300)
    path = out / 'sim_eyes.json'
    summary = json.loads(path.read_text()) if path.is_file() else None
    return proc, summary, out


def cache_log(out) -> str:
    log = out / 'logs' / 'eyes' / 'behavior_cache.log'
    return log.read_text(errors='replace')[-4000:] if log.is_file() else '(no cache log)'


def test_the_story_holds_and_the_demo_exits_0(eyes):
    proc, summary, out = eyes
    assert proc.returncode == 0, proc.stdout + proc.stderr + cache_log(out)
    assert 'the story held' in proc.stdout
    assert summary is not None and all(run['held'] for run in summary), summary


def test_each_run_has_the_expected_mode_and_agent_calls(eyes):
    _, summary, out = eyes
    assert summary is not None, 'the demo wrote no summary'
    observed = [(r['run'], r['mode'], r['steps_replayed'], r['steps_by_agent'],
                 r['agent_calls']) for r in summary]
    assert observed == EXPECTED, cache_log(out)


def test_the_replays_fail_no_check_under_noise_nor_with_the_box_outside_the_roi(eyes):
    _, summary, _ = eyes
    assert summary is not None
    for run in summary[1:3] + summary[4:5]:
        assert run['check_failure'] == '' and run['canceled'] == [], run


def test_a_cube_moved_3_cm_is_a_miss_naming_the_cameras_cell(eyes):
    _, summary, _ = eyes
    assert summary is not None
    said = summary[3]['check_failure']
    assert said.startswith('pre-check failed at step 0: sensor camera deviates'), said
    assert 'at the cell at x ' in said


def test_the_box_dropped_during_the_approach_stops_it_mid_motion(eyes):
    proc, summary, _ = eyes
    assert summary is not None
    run = summary[5]
    assert [step for step, _ in run['canceled']] == [0], run
    assert 'during step 0' in run['check_failure'] and 'camera' in run['check_failure']
    assert run['dropped_at'] is not None and run['check_failed_at'] > run['dropped_at']
    assert 'ms after the drop' in proc.stdout
    # only that run was stopped mid-motion
    assert [r['run'] for r in summary if r['canceled']] == [20]


def test_the_noisy_run_had_the_noisier_camera(eyes):
    _, _, out = eyes
    log = (out / 'logs' / 'eyes' / 'sim_robot.log').read_text(errors='replace')
    said = [line.rsplit('camera_noise now ', 1)[1].strip() for line in log.splitlines()
            if 'camera_noise now ' in line]
    # each run sets it: 2 for runs 15 and 16, 8 for run 17, 2 again for the rest
    assert said == ['2.0', '2.0', '8.0', '2.0', '2.0', '2.0'], said


def test_every_run_placed_the_cube(eyes):
    _, summary, _ = eyes
    assert summary is not None
    for run in summary:
        x, y, z = run['final_object']
        tx, ty = run['place_target']
        assert math.hypot(x - tx, y - ty) < 0.03 and z < 0.035, run


def magenta(pixels: np.ndarray) -> int:
    """Count the box's pixels (magenta: red and blue high, green low)."""
    r, g, b = (pixels[:, :, i].astype(int) for i in range(3))
    return int(((r > 150) & (b > 100) & (g < 90)).sum())


def test_the_pictures_show_what_the_cache_saw(eyes):
    from PIL import Image

    proc, _, out = eyes
    names = ['eyes_run15_recorded.png', 'eyes_run18_miss.png', 'eyes_run19_outside_roi.png',
             'eyes_run20_trip.png', 'eyes_run20_trip_recorded.png']
    for name in names:
        assert f'picture: {out / name}' in proc.stdout
        with Image.open(out / name) as image:
            assert image.size == (320, 240) and image.mode == 'RGB'
    pixels = {name: np.asarray(Image.open(out / name)) for name in names}
    # the watch tripped on the box; the recording at that time into the motion had none
    assert magenta(pixels['eyes_run20_trip.png']) > 50
    assert magenta(pixels['eyes_run20_trip_recorded.png']) == 0
    # the cache's store kept its own thumbnails of the recorded views; the first, before
    # step 0, is the scene run 18's pre-check was compared with
    kept = out / 'eyes_store' / 'view-t1-s0-pre-camera.png'
    assert f'picture: {kept}' in proc.stdout
    with Image.open(kept) as image:
        assert image.size == (96, 72)
    # the box of run 19 lies outside the region of interest, right of x 272
    assert magenta(pixels['eyes_run19_outside_roi.png'][:, :272]) == 0
    assert magenta(pixels['eyes_run19_outside_roi.png']) > 50


# -- ROS-free --------------------------------------------------------------------------------


def test_only_the_eyes_story_turns_the_camera_on():
    plain = node_commands(rtf=1.0, think_time=0.1, store_path='x.db',
                          params_file=config_path('sim_demo.yaml'))
    assert not any('camera_rate' in arg for arg in plain['sim_robot'])
    eyes = node_commands(rtf=1.0, think_time=0.1, store_path='x.db',
                         params_file=config_path('sim_eyes.yaml'), camera_rate=CAMERA_RATE)
    assert f'camera_rate:={CAMERA_RATE}' in eyes['sim_robot']


def test_the_eyes_params_have_a_camera_and_no_object_sensor_nor_bindings():
    import yaml

    params = yaml.safe_load(config_path('sim_eyes.yaml').read_text())
    cache = params['muscle_mem']['ros__parameters']
    assert set(cache['sensors']) == {'camera', 'joints', 'jaws'}
    assert cache['sensors']['camera']['type'] == 'sensor_msgs/msg/Image'
    assert cache['sensors']['camera']['roi'] == list(ROI)  # the pictures outline it
    assert 'bindings' not in cache and cache['infer_bindings'] is False


def fine(spec, **changes) -> RunOutcome:
    e = spec.expect
    outcome = RunOutcome(spec=spec, success=True, cache_hit=e.mode is RunMode.REPLAY,
                         replayed=e.replayed, by_agent=e.by_agent, agent_calls=e.agent_calls,
                         final_object=(spec.place[0], spec.place[1], 0.02))
    if e.canceled_step is not None:
        outcome.canceled = ((e.canceled_step, 0.2),)
    outcome.check_failure = ' '.join(e.noticed)
    for key, value in changes.items():
        setattr(outcome, key, value)
    return judge(outcome)


def test_judge_accepts_each_run_as_expected():
    assert all(fine(spec).held for spec in EYES_STORY)


def test_judge_wants_the_miss_to_name_the_cameras_cell():
    moved = EYES_STORY[3]
    said = 'pre-check failed at step 0: sensor jaws deviates 0.01 (tolerance 0.005)'
    outcome = fine(moved, check_failure=said)
    assert not outcome.held
    assert any('does not say camera, cell at' in f for f in outcome.failures)


def test_judge_fails_a_false_trip_on_an_unchanged_replay():
    outcome = fine(EYES_STORY[1], canceled=((0, 0.11),))
    assert outcome.failures == ('step 0 canceled mid-motion, no step expected canceled',)


def test_describe_drop_says_when_the_motion_stopped():
    run = fine(EYES_STORY[5], motion_started=100.0, dropped_at=100.12, check_failed_at=100.25)
    assert describe_drop(run) == (
        'the box was dropped 0.12 s into the motion; step 0 stopped 0.20 s into the motion, '
        f'130 ms after the drop (a frame at {CAMERA_RATE:g} Hz, then the check)')
    assert 'not dropped' in describe_drop(fine(EYES_STORY[5]))
