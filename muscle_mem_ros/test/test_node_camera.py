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
Cameras as sensors of a real cache node (issue 44): checked, explained, never a crash.

The harness's arm has no object sensor here: two cameras over its table (one raw rgb8, one
JPEG, :mod:`camera_helpers`) are all the cache sees of the world, besides the joints.
"""

from __future__ import annotations

import threading
import time

from action_msgs.msg import GoalStatus
from camera_helpers import camera_harness, fresh, RAW
from diagnostic_msgs.msg import DiagnosticArray
from muscle_mem_interfaces.msg import CacheEvent
from node_helpers import (
    DESTROYED_WHILE_SPINNING, Harness, Names, OBJECT_HOME, params, run_cache_to_exit, wait_until,
)
import pytest


@pytest.fixture(scope='module')
def harness(tmp_path_factory):
    h = camera_harness(tmp_path_factory.mktemp('camera'))
    yield h
    h.close()


@pytest.fixture
def world(harness):
    harness.robot.reset()
    harness.robot.arm_delay = 0.0
    for camera in harness.cameras.values():
        camera.brightness = 1.0
        camera.corrupt_every = 0
        camera.intruder = None
        camera.resize(320, 240)
    fresh(harness)
    assert harness.cache is not None and harness.cache.alive(), harness.cache.output()
    yield harness
    assert harness.cache is not None and harness.cache.alive(), harness.cache.output()


def learn(h: Harness, task: str, arm_delay: float = 0.0) -> None:
    calls = len(h.agent.calls)
    run = h.run_task(task)
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.success and not run.result.cache_hit, run.result.message
    assert len(h.agent.calls) == calls + 1
    h.robot.reset()
    h.robot.arm_delay = arm_delay
    fresh(h)


def events(h: Harness, task: str, kind: int) -> list[CacheEvent]:
    return [e for e in list(h.events) if e.task == task and e.type == kind]


ARM_DELAY = 1.2
"""Seconds the fake arm takes per trajectory goal in the watch tests."""


def test_a_replayed_motion_is_watched_on_the_camera_and_not_canceled_unchanged(world):
    h = world
    h.robot.arm_delay = ARM_DELAY
    learn(h, 'watch_view', ARM_DELAY)
    canceled = h.robot.arm_canceled
    run = h.run_task('watch_view')
    assert run.result.success and run.result.cache_hit, run.result.message
    assert h.robot.arm_canceled == canceled
    assert wait_until(lambda: len(events(h, 'watch_view', CacheEvent.STEP_OK)) >= 4, 5.0)
    arm = [e for e in events(h, 'watch_view', CacheEvent.STEP_OK) if e.step == 0]
    assert arm and any(w.startswith('camera[') for w in arm[0].watched), arm
    assert any(w.startswith('jpeg[') for w in arm[0].watched)


def test_something_entering_the_view_during_a_motion_stops_it(world):
    h = world
    h.robot.arm_delay = ARM_DELAY
    learn(h, 'watch_intruder', ARM_DELAY)
    calls = len(h.agent.calls)
    canceled = h.robot.arm_canceled

    def intrude() -> None:
        if h.robot.arm_active.wait(10.0):
            time.sleep(0.3)
            for camera in h.cameras.values():
                camera.intruder = (80, 60)  # far from the object: the box alone changed

    thread = threading.Thread(target=intrude, daemon=True)
    thread.start()
    run = h.run_task('watch_intruder')
    thread.join(5.0)
    assert h.robot.arm_canceled == canceled + 1, 'the arm goal was not canceled'
    assert len(h.agent.calls) == calls + 1
    call = h.agent.calls[-1]
    assert call.resume_from_step == 0 and 'during step 0' in call.resume_reason, call
    assert run.result.success, run.result.message
    assert wait_until(lambda: events(h, 'watch_intruder', CacheEvent.CHECK_FAILED), 5.0)
    failed = events(h, 'watch_intruder', CacheEvent.CHECK_FAILED)[0]
    assert failed.sensor in ('camera', 'jpeg') and failed.element >= 0, failed
    assert 0.2 <= failed.time_into_step < ARM_DELAY


def test_an_unchanged_scene_replays_under_noise_and_light(world):
    h = world
    learn(h, 'look')
    calls = len(h.agent.calls)
    run = h.run_task('look')
    assert run.result.success and run.result.cache_hit, run.result.message
    h.robot.reset()
    for camera in h.cameras.values():
        camera.brightness = 1.1  # the room got brighter
    fresh(h)
    run = h.run_task('look')
    assert run.result.success and run.result.cache_hit, run.result.message
    assert len(h.agent.calls) == calls


def test_an_object_moved_two_centimetres_hands_off_saying_where(world):
    h = world
    learn(h, 'look_moved')
    moved = (OBJECT_HOME[0] + 0.02, OBJECT_HOME[1], OBJECT_HOME[2])
    h.robot.bump_after = (2, moved)  # moved once the gripper call (step 1) ended
    calls = len(h.agent.calls)
    run = h.run_task('look_moved')
    assert run.result.success and not run.result.cache_hit, run.result.message
    assert len(h.agent.calls) == calls + 1
    call = h.agent.calls[-1]
    assert call.resume_from_step == 2
    assert 'cell at x' in call.resume_reason, call.resume_reason
    failed = [e for e in h.wait_events(CacheEvent.CHECK_FAILED, 'look_moved')
              if e.sensor in ('camera', 'jpeg')]
    assert failed and failed[-1].deviation > failed[-1].tolerance == pytest.approx(0.1)


def test_corrupt_frames_are_dropped_and_the_replay_goes_on(world):
    h = world
    learn(h, 'look_corrupt')
    h.cameras['jpeg'].corrupt_every = 3  # two JPEGs in three cut short
    fresh(h)
    calls = len(h.agent.calls)
    run = h.run_task('look_corrupt')
    assert run.result.success and run.result.cache_hit, h.agent.calls[calls:]
    assert h.cache is not None
    assert wait_until(lambda: 'jpeg: a frame from' in h.cache.output(), 10.0)
    assert 'dropped' in h.cache.output()
    seen: list = []
    sub = h.client.create_subscription(DiagnosticArray, '/diagnostics', seen.append, 10,
                                       event_callbacks=DESTROYED_WHILE_SPINNING)
    try:  # counted where operators look
        assert wait_until(lambda: any(kv.key == 'frames_dropped' and int(
            kv.value.split('jpeg: ')[1]) >= 2 for a in seen for s in a.status
            if s.name.startswith(h.names.node) for kv in s.values), 10.0)
    finally:
        h.client.destroy_subscription(sub)


def test_a_camera_sending_another_size_is_a_miss_that_says_so(world):
    h = world
    learn(h, 'look_size')
    h.cameras['camera'].resize(160, 120)
    fresh(h)
    calls = len(h.agent.calls)
    run = h.run_task('look_size')
    assert run.result.success and not run.result.cache_hit, run.result.message
    assert len(h.agent.calls) == calls + 1
    reason = h.agent.calls[-1].resume_reason
    assert 'sends 160x120 frames' in reason and '320x240' in reason, reason


@pytest.mark.parametrize('sensor, parameter', [
    ({'encoding': 'rgb9'}, 'sensors.camera.encoding'),
    ({'width': None}, 'sensors.camera.width'),
    ({'roi': [0, 0, 400, 10]}, 'sensors.camera'),
    ({'masks': [1, 2, 3]}, 'sensors.camera.masks'),
    ({'mode': 'abs'}, 'sensors.camera.mode'),
    ({'fields': ['data']}, 'sensors.camera.fields'),
])
def test_a_bad_camera_setting_stops_the_node_naming_it(tmp_path, sensor, parameter):
    names = Names.unique()
    camera = {k: v for k, v in dict(RAW, topic='/camera', **sensor).items() if v is not None}
    values = params(names, store=tmp_path / 'c.db', **{'sensors.camera': camera})
    done = run_cache_to_exit(names=names, values=values, tmp=tmp_path)
    assert done.returncode == 1, done.stderr
    assert f'bad configuration: {parameter}' in done.stderr, done.stderr
