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
What a camera saw when a check on it failed, kept by a real cache node (issue 44 item 2).

The harness's arm with two cameras over its table (:mod:`camera_helpers`) learns a task;
then a dark box in view fails a pre-check, or stops a motion, and an object moved after
a step fails its post-check. Each time the store keeps the thumbnail of the frame the check
judged, for the learned step it judged, and ``muscle-mem show --images`` writes it beside
the step's recorded view.
"""

from __future__ import annotations

import io
import json
import threading
import time

from action_msgs.msg import GoalStatus
from camera_helpers import camera_harness, fresh
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from muscle_mem_ros.cli import main
from muscle_mem_ros.records import FailedView, ViewPhase
from muscle_mem_ros.ros.bags.exportformat import failed_view_topic
from muscle_mem_ros.store import SqliteStore
from node_helpers import Harness, OBJECT_HOME, wait_until
import numpy as np
from PIL import Image
import pytest

INTRUDER = (80, 60)
"""Where the dark box enters the 320x240 view: far from the object."""
IN_THUMBNAIL = (24, 18)
"""The box's centre in the 96x72 thumbnail."""
ARM_DELAY = 1.2
"""Seconds the fake arm takes per trajectory goal in the watch test."""


@pytest.fixture(scope='module')
def harness(tmp_path_factory):
    h = camera_harness(tmp_path_factory.mktemp('camera_failed'))
    yield h
    h.close()


@pytest.fixture
def world(harness):
    harness.robot.reset()
    for camera in harness.cameras.values():
        camera.intruder = None
    fresh(harness)
    yield harness
    for camera in harness.cameras.values():
        camera.intruder = None
    assert harness.cache is not None and harness.cache.alive(), harness.cache.output()


def learn(h: Harness, task: str, arm_delay: float = 0.0) -> list:
    """Learn ``task`` through the agent; return its learned steps."""
    h.robot.arm_delay = arm_delay
    run = h.run_task(task)
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.success and not run.result.cache_hit, run.result.message
    h.robot.reset()
    h.robot.arm_delay = arm_delay
    fresh(h)
    with SqliteStore(path=h.tmp / 'cache.db', read_only=True) as store:
        (info,) = store.trajectories(task=task)
        return store.path(info.id)


def failed_views(h: Harness, task: str, phase: ViewPhase) -> list[FailedView]:
    with SqliteStore(path=h.tmp / 'cache.db', read_only=True) as store:
        return [v for v in store.failed_views(task=task) if v.phase is phase]


def kept(h: Harness, task: str, phase: ViewPhase) -> FailedView:
    """Return the failed view kept for ``phase`` (written off the walk's path: waited for)."""
    assert wait_until(lambda: failed_views(h, task, phase), 10.0), h.cache.output()
    (view,) = failed_views(h, task, phase)
    return view


def pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as image:
        assert image.format == 'PNG' and image.size == (96, 72)
        return np.asarray(image.convert('RGB'), dtype=float)


def dark_box(png: bytes) -> bool:
    """Return True when the thumbnail shows the dark box where it entered the view."""
    column, row = IN_THUMBNAIL
    return bool(pixels(png)[row - 2:row + 3, column - 2:column + 3].mean() < 60)


def intrude(h: Harness) -> None:
    for camera in h.cameras.values():
        camera.intruder = INTRUDER


def test_a_pre_check_failed_on_a_camera_keeps_the_view_it_judged_and_show_writes_it(
        world, tmp_path, capsys):
    h = world
    steps = learn(h, 'look_failed')
    first = steps[0]
    intrude(h)
    fresh(h)
    calls = len(h.agent.calls)
    run = h.run_task('look_failed')
    assert run.result.success and not run.result.cache_hit, run.result.message
    assert len(h.agent.calls) == calls + 1
    assert 'pre-check failed at step 0' in h.agent.calls[-1].resume_reason
    view = kept(h, 'look_failed', ViewPhase.PRE)
    assert view.node_id == first.id and view.sensor in ('camera', 'jpeg')
    assert view.sensor in view.reason and 'deviates' in view.reason, view.reason
    assert time.time() - 60 < view.at <= time.time()
    recorded = first.step.pre.images[view.sensor]
    assert dark_box(view.png) and not dark_box(recorded)
    assert np.abs(pixels(view.png) - pixels(recorded)).max() > 50

    db = h.tmp / 'cache.db'
    images = tmp_path / 'views'
    trajectory = next(t['trajectory'] for t in _show_json(db, capsys)
                      if t['steps'][0]['node'] == first.id)
    assert main(['show', str(db), 'look_failed', '--trajectory', str(trajectory),
                 '--images', str(images), '--json']) == 0
    (shown,) = json.loads(capsys.readouterr().out)
    step = shown['steps'][0]
    (entry,) = step['failed']
    assert entry['phase'] == 'pre' and entry['sensor'] == view.sensor
    assert entry['reason'] == view.reason and entry['at'] == view.at
    failed_file = images / f't{trajectory}-s0-failed-pre-{view.sensor}.png'
    recorded_file = images / f't{trajectory}-s0-pre-{view.sensor}.png'
    assert entry['file'] == str(failed_file) and failed_file.read_bytes() == view.png
    assert step['images']['pre'][view.sensor] == str(recorded_file)
    assert recorded_file.read_bytes() == recorded
    assert main(['show', str(db), 'look_failed', '--trajectory', str(trajectory),
                 '--images', str(images)]) == 0
    text = capsys.readouterr().out
    assert '  failed:\n  - {phase: pre, sensor: ' in text and str(failed_file) in text
    assert view.reason in ' '.join(text.split())  # (YAML folds a long reason)


def _show_json(db, capsys) -> list:
    assert main(['show', str(db), 'look_failed', '--json']) == 0
    return json.loads(capsys.readouterr().out)


def test_a_watch_stopped_by_a_camera_keeps_the_view_that_tripped_it(world):
    h = world
    steps = learn(h, 'watch_failed', ARM_DELAY)
    canceled = h.robot.arm_canceled

    def enter() -> None:
        if h.robot.arm_active.wait(10.0):
            time.sleep(0.3)
            intrude(h)

    thread = threading.Thread(target=enter, daemon=True)
    thread.start()
    run = h.run_task('watch_failed')
    thread.join(5.0)
    assert h.robot.arm_canceled == canceled + 1, 'the arm goal was not canceled'
    assert 'during step 0' in h.agent.calls[-1].resume_reason
    assert run.result.success, run.result.message
    view = kept(h, 'watch_failed', ViewPhase.DURING)
    assert view.node_id == steps[0].id and view.sensor in ('camera', 'jpeg')
    assert f'sensor {view.sensor}[' in view.reason, view.reason
    assert dark_box(view.png) and not dark_box(steps[0].step.pre.images[view.sensor])


def test_a_post_check_failed_on_a_camera_keeps_the_view_for_the_step_replayed(world):
    h = world
    steps = learn(h, 'moved_failed')
    h.robot.bump_after = (2, (OBJECT_HOME[0] + 0.02, OBJECT_HOME[1], OBJECT_HOME[2]))
    run = h.run_task('moved_failed')
    assert run.result.success and not run.result.cache_hit, run.result.message
    assert h.agent.calls[-1].resume_from_step == 2
    view = kept(h, 'moved_failed', ViewPhase.POST)
    assert view.node_id == steps[1].id and view.sensor in ('camera', 'jpeg')
    assert 'cell at x' in view.reason, view.reason
    recorded = steps[1].step.post.images[view.sensor]
    assert not np.array_equal(pixels(view.png), pixels(recorded))
    assert failed_views(h, 'moved_failed', ViewPhase.DURING) == []


def test_export_carries_the_failed_views_and_learn_of_the_export_leaves_them(world, tmp_path,
                                                                             capsys):
    h = world
    learn(h, 'export_failed')
    intrude(h)
    fresh(h)
    run = h.run_task('export_failed')
    assert run.result.success and not run.result.cache_hit, run.result.message
    view = kept(h, 'export_failed', ViewPhase.PRE)
    db, export = h.tmp / 'cache.db', tmp_path / 'failed.mcap'
    assert main(['export', str(db), 'export_failed', '--mcap', str(export), '--json']) == 0
    messages = json.loads(capsys.readouterr().out)['messages']
    assert messages[failed_view_topic(view.sensor)] == 1
    assert sum(n for t, n in messages.items() if t.endswith('/failed/compressed')) == 1
    with open(export, 'rb') as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        found = [(m.log_time, bytes(d.data), d.format, d.header.frame_id) for _, _, m, d in
                 reader.iter_decoded_messages(topics=[failed_view_topic(view.sensor)])]
    assert found == [(int(round(view.at * 1e9)), view.png, 'png', view.sensor)]
    learned = tmp_path / 'learned.db'
    code = main(['learn', str(export), '--params-file', str(h.tmp / 'params.yaml'),
                 '--node-name', h.names.node, '--task', 'export_failed', '--store', str(learned)])
    assert code == 0, capsys.readouterr().err
    with SqliteStore(path=db, read_only=True) as a, \
            SqliteStore(path=learned, read_only=True) as b:
        assert len(b.trajectories(task='export_failed')) == \
            len(a.trajectories(task='export_failed')) == 2
        assert b.failed_views(task='export_failed') == []
