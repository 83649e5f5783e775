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
Camera checks on a robot unlike the demo arm (issue 44 item 6): a mobile base's front camera.

The base (:mod:`mobile_base_helpers`) drives to its tag and to a shelf; its front camera
(:mod:`front_camera`) sees the corridor change with every metre driven. An unchanged fetch
replays, the camera watched on each drive; a box left in the corridor is a miss before the
drive, naming where in the view; a person stepping into the corridor while the base drives
stops the drive, and the agent finishes.
"""

from __future__ import annotations

from collections.abc import Iterator
import json
import threading
import time

from action_msgs.msg import GoalStatus
from front_camera import FrontCamera
from mobile_base_helpers import BaseHarness, fresh_world
from muscle_mem_interfaces.msg import CacheEvent
from node_helpers import wait_until
import pytest

PARAMS = json.dumps({'bin': 1})


@pytest.fixture(scope='module')
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BaseHarness]:
    h = BaseHarness(tmp=tmp_path_factory.mktemp('camera_mobile'))
    topic = f'/{h.names.prefix}/front/image_raw'
    camera = FrontCamera(robot=h.robot, context=h.context, topic=topic,
                         name=f'{h.names.prefix}_front')
    h.executor.add_node(camera)
    h.extra_nodes.append(camera)
    h.camera = camera
    h.start_cache(**{'sensors.front': {
        'topic': topic, 'type': 'sensor_msgs/msg/Image', 'encoding': 'rgb8', 'width': 160,
        'height': 120, 'tolerance': [0.1], 'max_age': 0.5}})
    yield h
    h.close()


@pytest.fixture
def world(harness: BaseHarness) -> Iterator[BaseHarness]:
    harness.camera.obstacle = None
    harness.camera.person = None
    yield from fresh_world(harness)


def fresh(h: BaseHarness) -> None:
    count = h.camera.published
    assert wait_until(lambda: h.camera.published >= count + 3, 10.0)


def events(h: BaseHarness, task: str, kind: int) -> list[CacheEvent]:
    return [e for e in list(h.events) if e.task == task and e.type == kind]


def learn(h: BaseHarness, task: str) -> None:
    calls = len(h.agent.calls)
    done = h.run_task(task, PARAMS)
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert not done.result.cache_hit and len(h.agent.calls) == calls + 1
    h.robot.reset()
    fresh(h)


def test_an_unchanged_fetch_replays_watched_on_the_front_camera(world):
    h = world
    learn(h, 'front_same')
    calls = len(h.agent.calls)
    done = h.run_task('front_same', PARAMS)
    assert done.result.success and done.result.cache_hit, done.result.message
    assert len(h.agent.calls) == calls
    h.wait_events(CacheEvent.STEP_OK, 'front_same', 4)
    drives = [e for e in events(h, 'front_same', CacheEvent.STEP_OK) if e.step in (0, 2)]
    assert drives and all(any(w.startswith('front[') for w in e.watched) for e in drives)


def test_a_box_left_in_the_corridor_is_a_miss_before_the_drive(world):
    h = world
    learn(h, 'front_box')
    h.camera.obstacle = (0.8, -0.2)
    fresh(h)
    calls = len(h.agent.calls)
    done = h.run_task('front_box', PARAMS)
    assert done.result.success and not done.result.cache_hit, done.result.message
    call = h.agent.calls[calls]
    assert call.resume_from_step == 0, call
    assert 'sensor front deviates' in call.resume_reason and 'cell at x' in call.resume_reason


def test_a_person_stepping_in_while_the_base_drives_stops_it(world):
    h = world
    learn(h, 'front_person')
    first = len(h.robot.gotos)
    calls = len(h.agent.calls)
    stepped: list[float] = []

    def step_in() -> None:
        if h.robot.wait_goto(first, 20.0) is not None:
            time.sleep(0.8)
            h.camera.person = (1.2, 0.1)
            stepped.append(time.monotonic())

    walker = threading.Thread(target=step_in, daemon=True)
    walker.start()
    h.run_task('front_person', PARAMS)
    walker.join(10.0)
    assert stepped, 'the base never drove'
    assert len(h.agent.calls) == calls + 1
    call = h.agent.calls[-1]
    assert call.resume_from_step == 0 and 'during step 0' in call.resume_reason, call
    assert wait_until(lambda: events(h, 'front_person', CacheEvent.CHECK_FAILED), 5.0)
    failed = events(h, 'front_person', CacheEvent.CHECK_FAILED)[0]
    assert failed.sensor == 'front' and failed.element >= 0, failed
    goto = h.robot.wait_goto(first, 1.0)
    assert goto is not None and goto.canceled, 'the drive was not stopped'
