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
The trust scenarios on a robot unlike the demo: a mobile picker (mobile_helpers).

A Pose in every goal (orientation w = 1), an integer task parameter ``bin``, a
360-range scan allowed as an inferred source, a GetPlan "goto" whose refusal is an
empty plan, and a standoff declared relative to a tag. Real cache process, DDS.
"""

from __future__ import annotations

import json

from action_msgs.msg import GoalStatus
from mobile_helpers import BIN_PITCH, MobileHarness, SHELF_X, STANDOFF, TAG_HOME
from muscle_mem_interfaces.srv import ListTasks
import pytest


@pytest.fixture(scope='module')
def h(tmp_path_factory):
    h = MobileHarness(tmp=tmp_path_factory.mktemp('mobile'))
    h.start_cache()
    yield h
    h.close()


def fetch(h: MobileHarness, task: str, bin_: int, tag=TAG_HOME):
    """Reset the world (tag at ``tag``, another scan) and fetch; return (run, agent called)."""
    h.robot.reset(tag)
    calls = len(h.agent.calls)
    result = h.run_task(task, json.dumps({'bin': bin_}))
    assert result.status == GoalStatus.STATUS_SUCCEEDED, result.result.message
    return result, len(h.agent.calls) > calls


def test_a_parameter_equal_to_a_goal_value_once_never_replays_another_bin(h):
    # bin 1's shelf goal has x = 1.0 and w = 1.0, both equal to the parameter bin = 1
    _, called = fetch(h, 'bins', 1)
    assert called
    result, called = fetch(h, 'bins', 2)
    assert called, f'bin 2 replayed bin 1: {result.result.message}'
    x, y, w, _ = h.robot.gotos[-1]
    assert (x, y, w) == pytest.approx((SHELF_X, 2 * BIN_PITCH, 1.0))  # bin 2's shelf
    result, called = fetch(h, 'bins', 1)
    assert not called and result.result.cache_hit, result.result.message  # its own tree
    assert h.robot.gotos[-1][:3] == pytest.approx((SHELF_X, BIN_PITCH, 1.0))
    assert all(not s.source.startswith('param:') for s in result.result.substituted)
    result, called = fetch(h, 'bins', 3)
    assert called  # x stayed 1.0 for bin 2: nothing ever followed the parameter
    assert h.robot.gotos[-1][:3] == pytest.approx((SHELF_X, 3 * BIN_PITCH, 1.0))


def test_a_standoff_follows_the_tag_within_max_shift_and_not_beyond(h):
    fetch(h, 'standoff', 1)
    moved = (TAG_HOME[0] + 0.06, TAG_HOME[1] - 0.04)
    result, called = fetch(h, 'standoff', 1, tag=moved)
    assert not called, h.agent.calls[-1].resume_reason
    first = [g for g in h.robot.gotos[-2:] if abs(g[0] - (moved[0] - STANDOFF)) < 1e-6]
    assert first and first[0][1] == pytest.approx(moved[1])  # 0.4 m in front of the tag
    _, called = fetch(h, 'standoff', 1, tag=(TAG_HOME[0] + 0.15, TAG_HOME[1]))
    assert called  # beyond max_shift 0.1 although within max_offset 0.5
    assert 'max_shift' in h.agent.calls[-1].resume_reason


def test_a_goal_field_no_sensor_explains_never_binds_to_a_scan_range(h):
    for _ in range(4):  # four recordings, each with another tolerance and another scan
        fetch(h, 'scan', 1)
    listing = h.call(ListTasks, 'list_tasks', task='scan', with_steps=True)
    sources = {b['source'] for t in listing.trajectories for s in t.steps
               for b in json.loads(s.bindings_json or '[]')}
    assert not any(s.startswith('sensor:scan') for s in sources), sources
    assert {'sensor:tag[0]', 'sensor:tag[1]'} <= sources  # the declared ones are there
    result, _ = fetch(h, 'scan', 1)
    assert not any(s.source.startswith('sensor:scan') for s in result.result.substituted)


def test_an_empty_plan_is_a_refusal_not_a_success(h):
    fetch(h, 'refused', 1)
    h.robot.reset()
    h.robot.refuse = True  # the base cannot plan today: every goto answers an empty plan
    calls = len(h.agent.calls)
    result = h.run_task('refused', json.dumps({'bin': 1}))
    assert not result.result.cache_hit
    assert len(h.agent.calls) == calls + 1  # the replayed goto failed: handed to the agent
    assert 'plan.poses' in h.agent.calls[-1].resume_reason, h.agent.calls[-1].resume_reason


def test_a_restart_replays_the_standoff_from_the_plans_it_kept(h):
    _, called = fetch(h, 'kept_standoff', 1)
    assert called  # learned: the declared standoff binds the goto to the tag
    first = h.cache
    assert h.stop_cache() == 0
    assert 'kept for the next start' in first.output(), first.output()
    cache = h.start_cache()  # the same store: its plans are read, not learned again
    moved = (TAG_HOME[0] + 0.05, TAG_HOME[1] + 0.03)
    result, called = fetch(h, 'kept_standoff', 1, tag=moved)
    assert not called, h.agent.calls[-1].resume_reason
    assert any(g[:2] == pytest.approx((moved[0] - STANDOFF, moved[1]))
               for g in h.robot.gotos[-2:]), h.robot.gotos[-2:]  # 0.4 m in front of the tag
    assert "task 'kept_standoff': " in cache.output(), cache.output()
    assert 'read from the store' in cache.output(), cache.output()
