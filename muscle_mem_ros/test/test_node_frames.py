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
Issue 45 items 1 and 3 at the node: TF sensors of the real cache process on a real ``/tf``.

dock_helpers' base publishes ``map -> odom -> base_link`` (localization, 50 Hz), a static
``base_link -> camera`` on ``/tf_static`` (sent once, before the cache starts) and
``camera -> dock_tag`` (a tag detector, 20 Hz, with noise). Here the cache reads three TF
sensors without bindings: ``base``, ``dock`` (a chain of dynamic and static links) and
``cam`` (static links only). The pose check passes a reading that differs by noise and fails
a moved or turned one, saying both; a link gone stale fails closed naming the link; a frame
nobody publishes fails naming the frame; a params file that mixes a TF sensor with a topic,
gives it a bad tolerance or its own frame as ``relative_to`` is refused at start.
"""

from __future__ import annotations

from collections.abc import Iterator
import math
import re
import time

from action_msgs.msg import GoalStatus
from dock_helpers import DOCK_HOME, DockHarness, wrap
from mobile_base_helpers import fresh_world
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import GetTrajectory
from node_helpers import run_cache_to_exit, TaskRun
import pytest

STATIC_BEFORE = 1.0
"""Seconds the static link is out before the cache process starts."""


class FramesHarness(DockHarness):
    """The docking base with TF sensors base, dock and cam, checked literally."""

    def values(self, **overrides: object) -> dict[str, object]:
        values = super().values(**{'bindings': None, **overrides})
        values['sensors']['cam'] = {'frame': 'camera', 'relative_to': 'base_link',
                                    'tolerance': [0.01, 0.02]}
        return values


@pytest.fixture(scope='module')
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FramesHarness]:
    h = FramesHarness(tmp=tmp_path_factory.mktemp('frames'))
    time.sleep(STATIC_BEFORE)  # /tf_static was sent once, before the cache existed
    h.start_cache()
    yield h
    h.close()


@pytest.fixture
def world(harness: FramesHarness) -> Iterator[FramesHarness]:
    yield from fresh_world(harness)


def run(h: FramesHarness, task: str) -> tuple[TaskRun, int]:
    calls = len(h.agent.calls)
    return h.run_task(task, ''), calls


def learn(h: FramesHarness, task: str) -> TaskRun:
    done, calls = run(h, task)
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert not done.result.cache_hit and len(h.agent.calls) == calls + 1
    h.robot.reset()
    return done


def missed(h: FramesHarness, task: str) -> str:
    """
    Run ``task``; assert the cache missed and the agent was asked.

    :return: The miss reason the agent was given, and the details of the task's failed checks.
    """
    before = len(h.events_of(CacheEvent.CHECK_FAILED, task))
    done, calls = run(h, task)
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert not done.result.cache_hit, 'replayed'
    assert len(h.agent.calls) == calls + 1
    reason = h.agent.calls[-1].resume_reason
    failed = h.wait_events(CacheEvent.CHECK_FAILED, task, before + 1)[before:]
    details = ' | '.join(f'{e.sensor}: {e.detail}' for e in failed)
    print(f'{task}: {reason} || {details}')
    return f'{reason} || {details}'


def replayed(h: FramesHarness, task: str) -> None:
    done, calls = run(h, task)
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    failed = [f'{e.step}: {e.sensor} {e.detail}' for e in h.events_of(CacheEvent.CHECK_FAILED,
                                                                      task)]
    assert done.result.cache_hit, (failed, h.agent.calls[-1:])
    assert len(h.agent.calls) == calls


def test_static_links_sent_before_the_cache_started_are_read(world):
    h = world
    done = learn(h, 'frames_static')
    steps = h.call(GetTrajectory, 'get_trajectory',
                   trajectory_id=done.result.trajectory_id).trajectory.steps
    assert len(steps) == 3
    for step in steps:  # cam: static links only; dock: through the static base_link->camera
        assert {'base', 'dock', 'cam'} <= set(step.pre_sensors), step.pre_sensors
    replayed(h, 'frames_static')
    oks = h.wait_events(CacheEvent.STEP_OK, 'frames_static', 3)
    watched = set(oks[0].watched)
    print(f'watched during the patrol: {sorted(watched)}')
    assert {'base.x', 'base.y', 'base.turn_z', 'dock.x', 'dock.y', 'dock.turn_z'} <= watched, \
        oks[0]


def test_the_pose_check_passes_noise_and_fails_a_move_or_a_turn_saying_both(world):
    h = world
    learn(h, 'frames_pose')
    x, y, yaw = DOCK_HOME
    h.robot.move_dock((x + 0.007, y - 0.007, wrap(yaw + math.radians(1.0))))  # 1 cm, 1 deg
    replayed(h, 'frames_pose')
    h.robot.reset()
    h.robot.move_dock((x - 0.05, y, yaw))
    reason = missed(h, 'frames_pose')
    assert re.search(r'dock.*moved 0\.0[456]\d* m and turned \d\.?\d* deg', reason), reason
    h.robot.reset()
    h.robot.move_dock((x, y, wrap(yaw + math.radians(10.0))))
    reason = missed(h, 'frames_pose')
    found = re.search(r'sensor dock .*?moved (\S+) m and turned (\S+) deg', reason)
    assert found and float(found[1]) < 0.03 and 9.0 < float(found[2]) < 11.0, reason


@pytest.mark.parametrize('link', ['localization', 'detector'])
def test_a_link_gone_stale_fails_closed_naming_the_link(world, link):
    h = world
    task = f'frames_stale_{link}'
    learn(h, task)
    if link == 'localization':
        h.robot.localizing = False
    else:
        h.robot.detecting = False
    time.sleep(1.2)  # beyond max_age: 1 s for base, 0.5 s for dock
    reason = missed(h, task)
    if link == 'localization':
        assert 'unusable' in reason or 'stale' in reason, reason
        assert re.search(r'link (map->odom|odom->base_link) is stale', reason), reason
    else:
        assert 'sensors.dock: transform map -> dock_tag: link camera->dock_tag is stale' \
            in reason, reason
    assert 'max_age' in reason, reason


@pytest.mark.parametrize(('extra', 'named'), [
    ({'topic': '/dock_pose'}, 'sensors.dock.topic'),
    ({'tolerance': [0.03]}, 'sensors.dock.tolerance'),
    ({'tolerance': [0.03, -0.1]}, 'sensors.dock.tolerance'),
    ({'relative_to': 'dock_tag'}, 'sensors.dock.relative_to'),
])
def test_a_bad_tf_sensor_is_refused_at_start_naming_the_parameter(harness, extra, named):
    h = harness
    values = h.values()
    values['sensors']['dock'].update(extra)
    proc = run_cache_to_exit(names=h.names, values=values, tmp=h.tmp)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert named in out, out


def test_a_frame_nobody_publishes_fails_the_pre_check_naming_the_frame(harness):
    h = harness
    h.stop_cache()
    h.start_cache(**{'sensors.ghost': {'frame': 'charger_tag', 'relative_to': 'map',
                                       'tolerance': [0.03, 0.05]}})
    h.robot.reset()
    assert h.set_mode('learn').successful
    run(h, 'frames_ghost')  # recorded without it: nothing learned yet, the agent docks
    h.robot.reset()
    reason = missed(h, 'frames_ghost')
    assert 'charger_tag' in reason and 'unknown' in reason, reason
    assert 'sensors.ghost' in reason, reason
    failed = h.wait_events(CacheEvent.CHECK_FAILED, 'frames_ghost')
    assert any(e.sensor == 'ghost' and 'charger_tag' in e.detail for e in failed), failed
