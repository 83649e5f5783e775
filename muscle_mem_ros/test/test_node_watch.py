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
The check during a step on the node: traces recorded, replays watched, knocks caught.

The fake arm (node_helpers) holds each trajectory goal for ``arm_delay`` seconds, so a
replayed arm step runs long enough to be disturbed: the object knocked while the arm
"moves" must cancel the goal at the robot, say CHECK_FAILED with the element, value
and time into the step, and hand the task to the agent from that step.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from action_msgs.msg import GoalStatus
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.store import SqliteStore
from node_helpers import Harness, OBJECT_HOME, wait_until
import pytest

ARM_DELAY = 1.2
"""Seconds the fake arm takes per trajectory goal here."""


@pytest.fixture(scope='module')
def harness(tmp_path_factory):
    h = Harness(tmp=tmp_path_factory.mktemp('watch'))
    h.start_cache()
    yield h
    h.close()


@pytest.fixture
def world(harness):
    harness.robot.reset()
    harness.robot.arm_delay = ARM_DELAY
    harness.set_mode('learn')
    yield harness
    assert harness.cache is not None and harness.cache.alive(), harness.cache.output()


def learn(h: Harness, task: str) -> int:
    run = h.run_task(task)
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert not run.result.cache_hit
    h.robot.reset()
    h.robot.arm_delay = ARM_DELAY
    return int(run.result.trajectory_id)


def events(h: Harness, task: str, kind: int) -> list[CacheEvent]:
    return [e for e in list(h.events) if e.task == task and e.type == kind]


def said(h: Harness, task: str) -> list[str]:
    """Return what the cache said went wrong in ``task`` (for assertion messages)."""
    return [f'{e.step}: {e.detail}' for e in list(h.events)
            if e.task == task and e.type in (CacheEvent.CHECK_FAILED, CacheEvent.ERROR)]


def test_a_recorded_action_step_keeps_a_trace(world):
    h = world
    trajectory_id = learn(h, 'watch_trace')
    with SqliteStore(path=h.tmp / 'cache.db', read_only=True) as store:
        steps = [node.step for node in store.path(trajectory_id)]
    arm, grip, _, fib = steps
    assert grip.trace is None  # a service is not traced
    for step in (arm, fib):
        assert step.trace is not None and step.trace.rate == 40.0
        assert set(step.trace.sensors) == {'joints', 'object'}
        joints = step.trace.sensors['joints']
        # The trace runs from the start of the motion to the post snapshot's end state.
        assert joints.times == tuple(sorted(joints.times)) and len(joints.times) >= 2
        assert joints.values[-1] == step.post.features['joints']
        assert joints.times[-1] >= ARM_DELAY * (step is arm) - 0.05
    assert arm.trace.feedback is not None and arm.trace.feedback_leaves
    # The node's own log says which sensors are watched.
    assert 'watch: joints, object traced' in h.cache.output()


def test_an_unchanged_replay_is_watched_and_not_canceled(world):
    h = world
    learn(h, 'watch_same')
    canceled = h.robot.arm_canceled
    run = h.run_task('watch_same')
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.cache_hit, (run.result.message, said(h, 'watch_same'))
    assert h.robot.arm_canceled == canceled
    assert wait_until(lambda: len(events(h, 'watch_same', CacheEvent.STEP_OK)) >= 4, 5.0)
    oks = events(h, 'watch_same', CacheEvent.STEP_OK)
    arm = [e for e in oks if e.step in (0, 2)]
    assert arm and all('object[0]' in e.watched for e in arm), [list(e.watched) for e in oks]
    grip = [e for e in oks if e.step == 1]
    assert grip and not grip[0].watched  # a service is judged when it returns


def test_a_knock_during_a_replayed_motion_cancels_it_and_hands_back(world):
    h = world
    learn(h, 'watch_knock')
    calls = len(h.agent.calls)
    canceled = h.robot.arm_canceled
    knocked: list[float] = []

    def knock() -> None:
        if not h.robot.arm_active.wait(10.0):
            return
        time.sleep(0.4)
        knocked.append(time.monotonic())
        x, y, z = OBJECT_HOME
        h.robot.move_object((x + 0.1, y, z))

    thread = threading.Thread(target=knock, daemon=True)
    thread.start()
    run = h.run_task('watch_knock')
    thread.join(5.0)
    assert knocked, 'the arm never moved'
    assert h.robot.arm_canceled == canceled + 1, 'the arm goal was not canceled'
    assert len(h.agent.calls) == calls + 1
    call = h.agent.calls[-1]
    assert (call.resume_from_step, call.steps_done) == (0, 0), call
    assert 'during step 0' in call.resume_reason, call.resume_reason
    assert run.result.success, run.result.message
    assert wait_until(lambda: events(h, 'watch_knock', CacheEvent.CHECK_FAILED), 5.0)
    (failed,) = events(h, 'watch_knock', CacheEvent.CHECK_FAILED)
    assert failed.step == 0
    assert failed.sensor == 'object' and failed.element == 0, failed
    assert failed.time_into_step >= 0.3
    assert abs(failed.value - (OBJECT_HOME[0] + 0.1)) < 1e-6
    assert abs(failed.expected - OBJECT_HOME[0]) < 0.03
    assert 'object[0]' in failed.watched
    # Canceled mid-motion: well before the recorded step would have ended.
    assert failed.time_into_step < ARM_DELAY
    # stamped when the check failed: before the stop's own events and the hand-back
    said = wait_until(lambda: len(events(h, 'watch_knock', CacheEvent.STOPPED)) >= 3, 5.0)
    stopped = events(h, 'watch_knock', CacheEvent.STOPPED)
    assert said and any('accepted the cancel' in e.detail for e in stopped), stopped
    handoff = events(h, 'watch_knock', CacheEvent.HANDOFF)[-1]
    assert _seconds(failed.stamp) <= min(_seconds(e.stamp) for e in stopped) <= \
        _seconds(handoff.stamp)


def _seconds(stamp: Any) -> float:
    return float(stamp.sec + stamp.nanosec * 1e-9)
