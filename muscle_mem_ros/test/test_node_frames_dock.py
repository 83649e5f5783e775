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
Issue 45 item 6: a mobile base whose world is in TF docks at a station that moved and turned.

dock_helpers' base is localized on ``/tf`` (``map -> odom -> base_link``) and sees its dock as
a tag frame (``camera -> dock_tag``, published only while in view). The cache reads both as TF
sensors and binds the docking goals' position and orientation to the dock. Learned once, the
task replays without the agent; with the dock moved 20 cm and turned 15 deg, the replayed
docking goals are sent turned, in front of the dock where it is now, and the base ends 0.2 m
in front of it, facing it; turned 30 deg, beyond ``max_angle``, the replay misses saying the
angle, and the agent docks.
"""

from __future__ import annotations

from collections.abc import Iterator
import math
import re

from action_msgs.msg import GoalStatus
from dock_helpers import DOCK_HOME, DockHarness, FINAL, in_front, PATROL, STANDOFF, wrap
from mobile_base_helpers import fresh_world
from muscle_mem_interfaces.msg import CacheEvent
from node_helpers import TaskRun
import pytest

ORIENTATION = tuple(f'target.pose.orientation.{a}' for a in 'xyzw')
POSITION = ('target.pose.position.x', 'target.pose.position.y')


@pytest.fixture(scope='module')
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockHarness]:
    h = DockHarness(tmp=tmp_path_factory.mktemp('frames_dock'))
    h.start_cache()
    yield h
    h.close()


@pytest.fixture
def world(harness: DockHarness) -> Iterator[DockHarness]:
    yield from fresh_world(harness)


def run(h: DockHarness, task: str) -> tuple[TaskRun, int, int]:
    """Dock; return (the run, agent calls before it, gotos before it)."""
    calls, gotos = len(h.agent.calls), len(h.robot.gotos)
    return h.run_task(task, ''), calls, gotos


def learn(h: DockHarness, task: str) -> None:
    """Let the agent dock once (recorded), and check it ended where it meant to."""
    done, calls, _ = run(h, task)
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert not done.result.cache_hit and len(h.agent.calls) == calls + 1
    assert_docked(h, DOCK_HOME)
    h.robot.reset()


def assert_docked(h: DockHarness, dock: tuple[float, float, float]) -> None:
    """Assert the base is 0.2 m in front of ``dock``, facing it (3 cm, 3 deg)."""
    x, y, yaw = h.robot.pose()
    want = in_front(dock, FINAL)
    print(f'base at ({x:.3f}, {y:.3f}, {math.degrees(yaw):.2f} deg); 0.2 m in front of the '
          f'dock: ({want[0]:.3f}, {want[1]:.3f}, {math.degrees(want[2]):.2f} deg)')
    assert math.dist((x, y), want[:2]) < 0.03
    assert abs(math.degrees(wrap(yaw - want[2]))) < 3.0


def diagnosis(h: DockHarness, task: str) -> str:
    failed = [f'step {e.step}: {e.sensor} {e.detail}'
              for e in h.events_of(CacheEvent.CHECK_FAILED, task)]
    return f'{failed}; agent calls: {h.agent.calls[-2:]}'


def test_learned_once_an_unchanged_dock_replays_without_the_agent(world):
    h = world
    learn(h, 'dock_same')
    done, calls, gotos = run(h, 'dock_same')
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert done.result.cache_hit, diagnosis(h, 'dock_same')
    assert len(h.agent.calls) == calls
    sent = h.robot.gotos[gotos:]
    assert len(sent) == 3 and not any(g.canceled for g in sent), sent
    assert sent[0].target == pytest.approx(PATROL[:2])
    assert not h.events_of(CacheEvent.CHECK_FAILED, 'dock_same')
    assert_docked(h, DOCK_HOME)


def test_a_dock_moved_20_cm_and_turned_15_deg_is_docked_at_from_its_new_front(world):
    h = world
    learn(h, 'dock_moved')
    turn = math.radians(15.0)
    dock = (DOCK_HOME[0] + 0.12, DOCK_HOME[1] + 0.16, wrap(DOCK_HOME[2] + turn))  # 20 cm
    h.robot.move_dock(dock)
    done, calls, gotos = run(h, 'dock_moved')
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert done.result.cache_hit, diagnosis(h, 'dock_moved')
    assert len(h.agent.calls) == calls
    patrol, standoff, final = h.robot.gotos[gotos:]
    assert not any(g.canceled for g in (patrol, standoff, final))
    assert patrol.target == pytest.approx(PATROL[:2], abs=1e-9)  # far from the dock: as recorded
    for goto, metres in ((standoff, STANDOFF), (final, FINAL)):
        want = in_front(dock, metres)
        assert math.dist(goto.target, want[:2]) < 0.02, (goto.target, want)
    assert_docked(h, dock)
    subs = list(done.result.substituted)
    print('substituted: ' + '; '.join(f'step {s.step} {s.field} <- {s.source}' for s in subs))
    for step in (1, 2):
        fields = {s.field for s in subs if s.step == step}
        assert set(POSITION) <= fields and {ORIENTATION[2], ORIENTATION[3]} <= fields, fields
        sources = {s.source for s in subs if s.step == step}
        assert sources <= {'sensor:dock', 'sensor:dock[0]', 'sensor:dock[1]'}, sources
    assert not [s for s in subs if s.step == 0]


def test_a_dock_turned_30_deg_is_beyond_max_angle_and_the_agent_is_asked(world):
    h = world
    learn(h, 'dock_turned')
    dock = (DOCK_HOME[0], DOCK_HOME[1], wrap(DOCK_HOME[2] + math.radians(30.0)))
    h.robot.move_dock(dock)
    done, calls, gotos = run(h, 'dock_turned')
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert not done.result.cache_hit
    assert len(h.agent.calls) == calls + 1
    reason = h.agent.calls[-1].resume_reason
    print(f'the miss: {reason}')
    # said at the first step, which checks the docking steps' binding ahead ('sensor:dock
    # turned'), or at the docking step itself ('target.pose.orientation would turn')
    found = re.search(r'turn(?:ed)? (\S+) deg from the recording \(max_angle 20\.1 deg', reason)
    assert found and 29.0 < float(found[1]) < 31.0, reason  # 30 deg, give or take the noise
    assert 'sensor:dock' in reason, reason
    assert_docked(h, dock)  # the agent docked at the turned dock
