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
The watch seen live on the node: ``~/watch`` ticks while a replayed step runs (Foxglove's view).

On mobile_base_helpers' base, whose goto drives for about 2 s (the fake arm of node_helpers
jumps at its goal's end: nothing would move along the recording while it runs). An unchanged
replay is published tick by tick on its path, its progress rising; a tag knocked while the
base drives publishes the tick that tripped, naming the element over its tolerance.
"""

from __future__ import annotations

from collections.abc import Iterator
import json
import threading
import time

from action_msgs.msg import GoalStatus
from mobile_base_helpers import BaseHarness, fresh_world
from mobile_helpers import TAG_HOME
from muscle_mem_interfaces.msg import CacheEvent, WatchTick
from node_helpers import wait_until
import pytest

PARAMS = json.dumps({'bin': 1})


@pytest.fixture(scope='module')
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BaseHarness]:
    h = BaseHarness(tmp=tmp_path_factory.mktemp('watch_live'))
    h.start_cache()
    h.ticks = []  # type: ignore[attr-defined]
    topic = h.names.cache('watch')
    h.client.create_subscription(WatchTick, topic, h.ticks.append, 500)  # type: ignore
    assert wait_until(lambda: h.client.count_publishers(topic) >= 1, 10.0)
    yield h
    h.close()


@pytest.fixture
def world(harness: BaseHarness) -> Iterator[BaseHarness]:
    yield from fresh_world(harness)


def learn(h: BaseHarness, task: str) -> None:
    run = h.run_task(task, PARAMS)
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert not run.result.cache_hit
    h.robot.reset()


def ticks(h: BaseHarness, task: str, step: int) -> list[WatchTick]:
    return [t for t in list(h.ticks) if t.task == task and t.step == step]  # type: ignore


def test_a_replayed_step_is_published_tick_by_tick_on_its_path(world):
    h = world
    learn(h, 'live_same')
    assert not ticks(h, 'live_same', 0), 'a recording is not watched'
    run = h.run_task('live_same', PARAMS)
    assert run.result.cache_hit, run.result.message
    oks = {e.step: e for e in h.wait_events(CacheEvent.STEP_OK, 'live_same', count=4)}
    seen = ticks(h, 'live_same', 0)
    assert len(seen) >= 20, len(seen)  # 40 Hz sensors and feedback over a 2 s drive
    labels = [e.label for e in seen[-1].elements]
    assert labels == list(oks[0].watched), (labels, list(oks[0].watched))
    assert {'odom[0]', 'tag[0]'} <= set(labels)
    assert len({t.tool for t in seen}) == 1 and seen[0].tool
    assert not any(t.tripped for t in seen)
    assert all(t.worst <= 1.0 and t.limit == 1.0 for t in seen)
    # (nan: a series not read yet in this step)
    assert not any(e.ratio > 1.0 for t in seen for e in t.elements)
    assert all(e.ratio <= 1.0 for e in seen[-1].elements)  # every series read by the end
    assert all(e.tolerance > 0 and e.low <= e.high for e in seen[-1].elements)
    progress = [t.progress for t in seen]
    assert progress[-1] - progress[0] > 0.5 * seen[-1].recorded, progress
    assert progress[-1] <= seen[-1].recorded + 1e-9
    # forward: back by at most the tube's window (BACK, 25 ms) and a sample
    assert all(b >= a - 0.06 for a, b in zip(progress, progress[1:])), progress
    assert ticks(h, 'live_same', 2) and not ticks(h, 'live_same', 1)  # a service: not watched


def test_a_knock_publishes_the_tick_that_tripped_naming_the_element(world):
    h = world
    learn(h, 'live_knock')
    first = len(h.robot.gotos)

    def knock() -> None:
        if h.robot.wait_goto(first, 20.0) is not None:
            time.sleep(0.8)
            h.robot.move_tag((TAG_HOME[0] + 0.3, TAG_HOME[1]))

    thread = threading.Thread(target=knock, daemon=True)
    thread.start()
    h.run_task('live_knock', PARAMS)
    thread.join(10.0)
    (failed,) = h.wait_events(CacheEvent.CHECK_FAILED, 'live_knock')
    assert failed.step == 0 and failed.sensor == 'tag', failed
    assert wait_until(lambda: any(t.tripped for t in ticks(h, 'live_knock', 0)), 5.0)
    seen = ticks(h, 'live_knock', 0)
    tripped = [t for t in seen if t.tripped]
    assert len(tripped) == 1 and tripped[0] is seen[-1], 'judged no further once tripped'
    tick = tripped[0]
    label = f'tag[{failed.element}]'
    element = {e.label: e for e in tick.elements}[label]
    assert element.ratio > 1.0 and tick.worst == pytest.approx(element.ratio)
    assert element.value == pytest.approx(failed.value)
    assert element.expected == pytest.approx(failed.expected)
    assert element.deviation == pytest.approx(failed.deviation)
    assert tick.time_into_step == pytest.approx(failed.time_into_step)
    assert not any(t.worst > 1.0 for t in seen[:-1])  # on the path until the knock
