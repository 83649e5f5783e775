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
The check during a step on a robot unlike the demo: a mobile base whose goto takes seconds.

mobile_base_helpers' base drives each ``goto`` (a MoveToPose action) in about 2 s.
Without the watch a replayed goto would run to its end whatever the world did on
the way, and only the post-check would look: here a tag knocked, or gone quiet,
while the base drives must cancel the goal at the robot the moment the cache sees
it (the base stops short of its goal), say CHECK_FAILED with the sensor, element and
time into the step, and hand the task to the agent from that step. An unchanged
replay, a retargeted one (the tag moved before the run, within ``max_shift``) and a
replay on a machine whose two cores are busy must not be canceled. The 360-range
scan is checked before and after each step, never while one runs.
"""

from __future__ import annotations

from collections.abc import Iterator
import json
import math
import os
import random
import subprocess
import sys
import threading
import time

from action_msgs.msg import GoalStatus
from mobile_base_helpers import BaseHarness, fresh_world, Goto
from mobile_helpers import STANDOFF, TAG_HOME
from muscle_mem_interfaces.msg import CacheEvent
from node_helpers import TaskRun
import pytest

GOTO_STEPS = (0, 2)
"""The plan's goto steps (1 and 3 are the gripper, a service)."""
PARAMS = json.dumps({'bin': 1})
SEED = int(os.environ.get('WATCH_MOBILE_SEED', '0')) or random.randrange(1, 1 << 30)
"""The knocks' moments, sizes and directions (set WATCH_MOBILE_SEED to repeat a run's)."""
RNG = random.Random(SEED)


@pytest.fixture(scope='module')
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BaseHarness]:
    h = BaseHarness(tmp=tmp_path_factory.mktemp('watch_mobile'))
    h.start_cache()
    yield h
    h.close()


@pytest.fixture
def world(harness: BaseHarness) -> Iterator[BaseHarness]:
    yield from fresh_world(harness)


class Hogs:
    """Busy loops in subprocesses, one per core of this machine (two), until stopped."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, count: int = 2) -> None:
        for _ in range(count):
            self.procs.append(subprocess.Popen([sys.executable, '-c', 'while True: pass']))

    def stop(self) -> None:
        for proc in self.procs:  # only these, by their own handles
            proc.kill()
            proc.wait(10.0)
        self.procs.clear()


@pytest.fixture
def hogs() -> Iterator[Hogs]:
    hogs = Hogs()
    try:
        yield hogs
    finally:
        hogs.stop()


def run(h: BaseHarness, task: str) -> tuple[TaskRun, int, int]:
    """Fetch to bin 1; return (the run, agent calls before it, gotos before it)."""
    calls, gotos = len(h.agent.calls), len(h.robot.gotos)
    return h.run_task(task, PARAMS), calls, gotos


def learn(h: BaseHarness, task: str) -> None:
    done, calls, _ = run(h, task)
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert not done.result.cache_hit and len(h.agent.calls) == calls + 1
    h.robot.reset()


def events(h: BaseHarness, task: str, kind: int) -> list[CacheEvent]:
    return [e for e in list(h.events) if e.task == task and e.type == kind]


def step_oks(h: BaseHarness, task: str, count: int) -> dict[int, CacheEvent]:
    """Return the STEP_OK events of ``task`` by step, once ``count`` arrived."""
    h.wait_events(CacheEvent.STEP_OK, task, count)
    return {e.step: e for e in events(h, task, CacheEvent.STEP_OK)}


def assert_replayed_uncanceled(h: BaseHarness, task: str, done: TaskRun, calls: int,
                               gotos: int) -> None:
    """Assert the whole task replayed: the agent not called, no goto canceled."""
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert done.result.cache_hit, diagnosis(h, task)
    assert len(h.agent.calls) == calls
    sent = h.robot.gotos[gotos:]
    assert len(sent) == 2 and not any(g.canceled for g in sent), sent
    assert not events(h, task, CacheEvent.CHECK_FAILED)


def diagnosis(h: BaseHarness, task: str) -> str:
    """Say what the cache found wrong in ``task`` and how late the robot was, for a failure."""
    failed = [f'step {e.step}: {e.detail}' for e in events(h, task, CacheEvent.CHECK_FAILED)]
    recent = h.robot.gotos[-6:]
    gotos = [(round(g.lag, 3), round(g.ended - g.started, 3), g.canceled) for g in recent]
    gap = h.robot.tag_gap(recent[0].started, time.monotonic()) if recent else math.nan
    return (f'{failed}; last gotos (start lag, seconds, canceled): {gotos}; the longest gap '
            f'between tag messages since: {gap:.2f} s; agent calls: {h.agent.calls[-2:]}')


class Knock:
    """Move the tag by ``by`` a random moment into goto ``index`` (of the robot's gotos)."""

    def __init__(self, h: BaseHarness, index: int, by: tuple[float, float],
                 delay: float) -> None:
        self.h, self.index, self.by, self.delay = h, index, by, delay
        self.at = math.nan
        self.goto: Goto | None = None
        self._thread = threading.Thread(target=self._knock, daemon=True)
        self._thread.start()

    def _knock(self) -> None:
        goto = self.h.robot.wait_goto(self.index, 20.0)
        if goto is None:
            return
        self.goto = goto
        time.sleep(max(0.0, goto.started + self.delay - time.monotonic()))
        self.at = self.h.robot.move_tag((TAG_HOME[0] + self.by[0], TAG_HOME[1] + self.by[1]))

    def join(self) -> Goto:
        self._thread.join(10.0)
        assert self.goto is not None and not math.isnan(self.at), 'the goto never started'
        return self.goto


def random_knock(h: BaseHarness, gotos: int, step: int, size: tuple[float, float],
                 ) -> Knock:
    """Knock the tag by ``size`` metres (a random direction), a random moment into ``step``."""
    angle = RNG.uniform(0.0, 2 * math.pi)
    length = RNG.uniform(*size)
    delay = RNG.uniform(0.4, 1.2)
    by = (length * math.cos(angle), length * math.sin(angle))
    print(f'knock (WATCH_MOBILE_SEED={SEED}): step {step}, {delay:.2f} s in, tag moved by '
          f'({by[0]:+.3f}, {by[1]:+.3f})')
    return Knock(h, gotos + GOTO_STEPS.index(step), by, delay)


def assert_caught(h: BaseHarness, task: str, knock: Knock, step: int, done: TaskRun,
                  calls: int) -> float:
    """Assert the knock canceled the goto and handed the task over; return the reaction."""
    goto = knock.join()
    assert goto.canceled, f'the goto ran to its end: {goto}; {diagnosis(h, task)}'
    assert goto.canceled_at - goto.started < goto.duration
    reaction = goto.canceled_at - knock.at
    print(f'reaction (tag moved -> cancel at the robot): {reaction * 1000:.0f} ms; the base '
          f'stopped {goto.short_by():.3f} m short of its goal')
    assert 0.0 < reaction < 1.5
    assert goto.short_by() > 0.005  # stopped where it was, short of the goal
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert done.result.success and not done.result.cache_hit, done.result.message
    assert len(h.agent.calls) == calls + 1
    call = h.agent.calls[-1]
    assert call.resume_from_step == step, call
    assert f'check during step {step} (' in call.resume_reason, call.resume_reason
    found = h.wait_events(CacheEvent.CHECK_FAILED, task)
    assert len(found) == 1, diagnosis(h, task)
    failed = found[0]
    assert failed.step == step and failed.sensor == 'tag', failed
    assert failed.element in (0, 1), failed
    moved = TAG_HOME[failed.element] + knock.by[failed.element]
    assert abs(failed.value - moved) < 1e-6, failed
    assert abs(failed.expected - TAG_HOME[failed.element]) < 0.03, failed
    assert knock.delay - 0.3 < failed.time_into_step < goto.duration, failed
    assert 'tag[0]' in failed.watched and 'odom[0]' in failed.watched, failed
    # the agent went on from where the base stopped, to where the tag is now
    after = h.robot.gotos[knock.index + 1:]
    assert after and not any(g.canceled for g in after), after
    assert after[0].start == pytest.approx(goto.stopped)
    if step == 0:
        assert after[0].target == pytest.approx((TAG_HOME[0] + knock.by[0] - STANDOFF,
                                                 TAG_HOME[1] + knock.by[1]))
    return reaction


def test_an_unchanged_replay_is_watched_on_odom_and_tag_never_the_scan(world):
    h = world
    learn(h, 'base_same')
    # someone walks past the laser while the base drives: the scan is not watched
    ranges, first = h.robot.ranges.copy(), len(h.robot.gotos)

    def walk_past() -> None:
        if h.robot.wait_goto(first, 20.0) is not None:
            time.sleep(0.6)
            h.robot.set_ranges(ranges * 0.5)  # half of every range: 0.25 to 4 m nearer
            time.sleep(0.4)
            h.robot.set_ranges(ranges)

    passer = threading.Thread(target=walk_past, daemon=True)
    passer.start()
    done, calls, gotos = run(h, 'base_same')
    passer.join(10.0)
    assert_replayed_uncanceled(h, 'base_same', done, calls, gotos)
    oks = step_oks(h, 'base_same', 4)
    for step in GOTO_STEPS:
        watched = set(oks[step].watched)
        assert {'odom[0]', 'odom[1]', 'tag[0]', 'tag[1]'} <= watched, oks[step]
        assert not any(w.startswith('scan') for w in watched), watched
        assert 'scan: 360 elements, over 16' in oks[step].unwatched, oks[step].unwatched
    for step in (1, 3):
        assert not oks[step].watched and not oks[step].unwatched, oks[step]
    print(f'watched on the gotos: {sorted(oks[0].watched)}')


def test_a_tag_knocked_while_the_base_drives_cancels_the_goto_and_hands_back(world):
    h = world
    learn(h, 'base_knock')
    step = RNG.choice(GOTO_STEPS)
    knock = random_knock(h, len(h.robot.gotos), step, (0.10, 0.20))
    done, calls, _ = run(h, 'base_knock')
    assert_caught(h, 'base_knock', knock, step, done, calls)


def test_a_retargeted_approach_is_not_canceled_and_says_what_it_watched(world):
    h = world
    learn(h, 'base_moved')
    # 13 cm, within max_shift 0.3; the shelf goto after it then starts 12 cm lower in y
    tag = (TAG_HOME[0] + 0.05, TAG_HOME[1] - 0.12)
    h.robot.move_tag(tag)
    h.robot.settle()
    done, calls, gotos = run(h, 'base_moved')
    assert_replayed_uncanceled(h, 'base_moved', done, calls, gotos)
    fields = {s.field for s in done.result.substituted}
    assert {'target.pose.position.x', 'target.pose.position.y'} <= fields, fields
    approach, shelf = h.robot.gotos[gotos:]
    assert approach.target == pytest.approx((tag[0] - STANDOFF, tag[1]))
    assert shelf.start == pytest.approx(approach.target)  # then to the shelf as recorded
    oks = step_oks(h, 'base_moved', 4)
    first = oks[0]
    print(f'retargeted step 0: watched {list(first.watched)}, unwatched {list(first.unwatched)}')
    print(f'step 2 after it: watched {list(oks[2].watched)}, unwatched {list(oks[2].unwatched)}')
    assert {'tag[0]', 'tag[1]'} <= set(first.watched), first
    # the feedback of a goal sent elsewhere is not the recording's: named, not watched
    unwatched = {u.partition(': ')[0] for u in first.unwatched}
    assert 'feedback:current.pose.position.x' in unwatched, first
    assert not set(first.watched) & unwatched
    traced = {f'{s}[{i}]' for s in ('odom', 'tag') for i in range(3)}
    assert traced <= set(first.watched) | unwatched, first
    # the shelf goto starts where the approach was moved to and ends as recorded: the base's
    # path from there is not the recorded one moved, so odom x, y are named, not watched;
    # the tag it does not move stays watched
    assert {'tag[0]', 'tag[1]'} <= set(oks[2].watched), oks[2]
    assert {'odom[0]', 'odom[1]', 'odom[2]'} <= {u.partition(': ')[0] for u in oks[2].unwatched}


def test_a_tag_gone_quiet_while_the_base_drives_cancels_the_goto_as_stale(world):
    h = world
    learn(h, 'base_quiet')
    done_at: list[float] = []

    def silence() -> None:
        goto = h.robot.wait_goto(gotos, 20.0)
        if goto is None:
            return
        time.sleep(max(0.0, goto.started + 0.3 - time.monotonic()))
        done_at.append(h.robot.show_tag(False))
        wait_until_canceled(goto, 3.0)
        h.robot.show_tag(True)  # seen again: the agent's run records it

    gotos = len(h.robot.gotos)
    thread = threading.Thread(target=silence, daemon=True)
    thread.start()
    done, calls, _ = run(h, 'base_quiet')
    thread.join(10.0)
    assert done_at, 'the goto never started'
    goto = h.robot.gotos[gotos]
    assert goto.canceled, f'the goto ran to its end: {goto}; {diagnosis(h, "base_quiet")}'
    print(f'silenced -> cancel at the robot: {(goto.canceled_at - done_at[0]) * 1000:.0f} ms '
          f'(max_age 0.5 s); stopped {goto.short_by():.3f} m short')
    assert goto.canceled_at - goto.started < goto.duration and goto.short_by() > 0.005
    assert done.status == GoalStatus.STATUS_SUCCEEDED and done.result.success, \
        done.result.message
    call = h.agent.calls[-1]
    assert len(h.agent.calls) == calls + 1 and call.resume_from_step == 0, call
    found = h.wait_events(CacheEvent.CHECK_FAILED, 'base_quiet')
    assert len(found) == 1, diagnosis(h, 'base_quiet')
    failed = found[0]
    assert failed.step == 0 and failed.sensor == 'tag' and failed.element == -1, failed
    assert 'sent nothing' in failed.detail and 'max_age 0.5' in failed.detail, failed.detail
    assert 0.3 + 0.5 - 0.3 < failed.time_into_step < goto.duration, failed
    assert 'sent nothing' in call.resume_reason, call.resume_reason


def wait_until_canceled(goto: Goto, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not goto.canceled and math.isnan(goto.ended) and time.monotonic() < deadline:
        time.sleep(0.01)


def test_on_a_busy_machine_a_replay_is_not_canceled_and_a_knock_still_is(world, hogs):
    h = world
    learn(h, 'base_busy')
    hogs.start()
    done, calls, gotos = run(h, 'base_busy')
    assert_replayed_uncanceled(h, 'base_busy', done, calls, gotos)
    h.robot.reset()
    step = RNG.choice(GOTO_STEPS)
    knock = random_knock(h, len(h.robot.gotos), step, (0.10, 0.20))
    done, calls, _ = run(h, 'base_busy')
    assert_caught(h, 'base_busy', knock, step, done, calls)
