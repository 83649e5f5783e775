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
Tasks within tasks on a robot unlike the demo: the mobile picker (mobile_helpers).

The agent decomposes: ``fetch`` {bin} is a ``pick`` subtask (to the tag's standoff, grip:
its goto bound to the tag) then a ``place`` subtask {bin} (to the shelf, release);
``restock`` {shelf} picks the same way and places on a shelf named by x, y. Services, not
actions, an integer parameter passed on to a subtask. Real cache process, DDS.
"""

from __future__ import annotations

from dataclasses import dataclass
import json

from action_msgs.msg import GoalStatus
from mobile_helpers import BIN_PITCH, MobileHarness, pick, place, SHELF_X, STANDOFF, TAG_HOME
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import GetTrajectory, ListTasks
from muscle_mem_ros.replay.subtasks import SUBTASK_TYPE
from node_helpers import SUBTASK, wait_until
import pytest


@dataclass(frozen=True)
class Family:
    parent: str
    pick: str
    place: str
    other: str


def family(h: MobileHarness, tag: str) -> Family:
    """Register a test's plans: fetch = pick + place {bin}; restock = pick + place {shelf}."""
    f = Family(f'fetch_{tag}', f'pick_{tag}', f'place_{tag}', f'restock_{tag}')
    plans = h.agent.subtasks.plans
    plans[f.pick], plans[f.place] = pick, place
    plans[f.parent] = lambda tag, params: [
        (SUBTASK, (f.pick, {})), (SUBTASK, (f.place, {'bin': params['bin']}))]
    plans[f.other] = lambda tag, params: [
        (SUBTASK, (f.pick, {})), (SUBTASK, (f.place, {'shelf': params['shelf']}))]
    return f


@pytest.fixture(scope='module')
def h(tmp_path_factory):
    h = MobileHarness(tmp=tmp_path_factory.mktemp('subtasks_mobile'), subtasks=True)
    h.start_cache()
    yield h
    h.close()


@pytest.fixture
def world(h):
    h.robot.reset()
    h.agent.subtasks.on_failure = 'abort'
    h.set_mode('learn')
    assert h.cache is not None and h.cache.alive(), h.cache.output()
    yield h
    assert h.cache is not None and h.cache.alive(), h.cache.output()


def asked(h: MobileHarness, since: int) -> list[str]:
    return [c.task for c in h.agent.calls[since:]]


def sub_calls(h: MobileHarness, caller: str, since: int = 0):
    return [c for c in h.agent.subtasks.calls[since:] if c.caller == caller]


def learned(h: MobileHarness, task: str):
    return h.call(ListTasks, 'list_tasks', task=task, with_steps=True).trajectories


def events_since(h: MobileHarness, index: int, kind: int, task: str):
    return [e for e in list(h.events)[index:] if e.type == kind and e.task == task]


def wait_event(h: MobileHarness, index: int, kind: int, task: str, what: str):
    assert wait_until(lambda: events_since(h, index, kind, task)), (
        f'{what}: no event {kind} for {task!r}; events since: '
        f'{[(e.type, e.task, e.depth, e.step, e.detail) for e in list(h.events)[index:]]}')
    return events_since(h, index, kind, task)


def run(h: MobileHarness, task: str, tag=TAG_HOME, **params):
    """Reset the world (tag at ``tag``) and run ``task``; return (run, tasks the agent did)."""
    h.robot.reset(tag)
    since = len(h.agent.calls)
    result = h.run_task(task, json.dumps(params))
    return result, asked(h, since)


def shelf_of(bin_: int):
    return (SHELF_X, BIN_PITCH * bin_)


def learn(h: MobileHarness, f: Family, bin_: int = 1):
    result, did = run(h, f.parent, bin=bin_)
    assert result.status == GoalStatus.STATUS_SUCCEEDED, result.result.message
    assert did == [f.parent, f.pick, f.place]
    return result


def test_a_parent_miss_asks_for_each_subtask_then_the_parent_replays_with_no_agent_call(world):
    h = world
    f = family(h, 'miss')
    events, calls_since = len(h.events), len(h.agent.subtasks.calls)
    gotos = len(h.robot.gotos)
    first, did = run(h, f.parent, bin=2)
    assert first.status == GoalStatus.STATUS_SUCCEEDED, first.result.message
    assert first.result.success and not first.result.cache_hit
    assert did == [f.parent, f.pick, f.place]
    made = sub_calls(h, f.parent, calls_since)
    assert [(c.task, json.loads(c.params_json), c.ok) for c in made] == [
        (f.pick, {}, True), (f.place, {'bin': 2}, True)], [c.message for c in made]
    goals = [g[:2] for g in h.robot.gotos[gotos:]]
    assert goals == [pytest.approx((TAG_HOME[0] - STANDOFF, TAG_HOME[1])),
                     pytest.approx(shelf_of(2))]
    answer = h.call(GetTrajectory, 'get_trajectory', trajectory_id=first.result.trajectory_id)
    assert answer.success, answer.message
    steps = answer.trajectory.steps
    assert [(s.tool, s.kind, s.type_name) for s in steps] == [
        (f.pick, 'subtask', SUBTASK_TYPE), (f.place, 'subtask', SUBTASK_TYPE)]
    assert [json.loads(s.goal_json) for s in steps] == [
        {'params': {}, 'task': f.pick}, {'params': {'bin': 2}, 'task': f.place}]
    assert sorted(steps[0].pre_sensors) == ['odom', 'scan', 'tag']
    (place_tree,) = learned(h, f.place)
    assert json.loads(place_tree.params_json or '{}') == {'bin': 2}
    assert [s.kind for s in place_tree.steps] == ['service', 'service']
    for task, depth in ((f.parent, 0), (f.pick, 1), (f.place, 1)):
        (branch,) = wait_event(h, events, CacheEvent.BRANCH_LEARNED, task, 'learned')
        assert branch.depth == depth, task
    # the same parent again: the cache replays it and both subtasks, nobody asks the agent
    events, gotos = len(h.events), len(h.robot.gotos)
    again, did = run(h, f.parent, bin=2)
    assert again.result.success and again.result.cache_hit, again.result.message
    assert did == []
    assert again.result.trajectory_id == first.result.trajectory_id
    assert [g[:2] for g in h.robot.gotos[gotos:]] == goals
    for task, depth in ((f.parent, 0), (f.pick, 1), (f.place, 1)):
        (hit,) = wait_event(h, events, CacheEvent.HIT, task, 'replayed')
        assert hit.depth == depth, task
    feedback = list(again.feedback)
    assert wait_until(lambda: {(fb.task, fb.depth) for fb in again.feedback} >= {
        (f.pick, 1), (f.place, 1)}), [(fb.task, fb.depth) for fb in feedback]


def test_a_second_parent_reuses_the_pick_without_asking_the_agent_for_it(world):
    h = world
    f = family(h, 'reuse')
    learn(h, f)
    events, calls_since = len(h.events), len(h.agent.subtasks.calls)
    result, did = run(h, f.other, shelf=[1.8, 1.2])
    assert result.status == GoalStatus.STATUS_SUCCEEDED, result.result.message
    assert did == [f.other, f.place]  # a place on another shelf is new; the pick is not
    made = sub_calls(h, f.other, calls_since)
    assert [c.task for c in made] == [f.pick, f.place]
    assert made[0].ok and made[0].result.cache_hit, made[0].message
    (hit,) = wait_event(h, events, CacheEvent.HIT, f.pick, 'the pick replayed')
    assert hit.depth == 1
    assert h.robot.gotos[-1][:2] == pytest.approx((1.8, 1.2))
    assert len(learned(h, f.pick)) == 1
    assert len(learned(h, f.place)) == 2  # one tree per parameters: bin 1, shelf (1.8, 1.2)
    result, did = run(h, f.other, shelf=[1.8, 1.2])
    assert result.result.success and result.result.cache_hit, result.result.message
    assert did == []


def test_a_subtask_step_refused_mid_replay_asks_only_for_the_subtask_and_the_parent_goes_on(
        world):
    h = world
    f = family(h, 'refused')
    learn(h, f)
    h.robot.reset()
    h.robot.refuse_at = {len(h.robot.gotos)}  # the pick's replayed goto gets an empty plan
    events, since = len(h.events), len(h.agent.calls)
    result = h.run_task(f.parent, json.dumps({'bin': 1}))
    assert result.status == GoalStatus.STATUS_SUCCEEDED, result.result.message
    assert result.result.success, result.result.message
    assert asked(h, since) == [f.pick]
    call = h.agent.calls[since]
    assert call.resume_from_step == 0
    assert 'plan.poses' in call.resume_reason, call.resume_reason
    (hit,) = wait_event(h, events, CacheEvent.HIT, f.place, 'the place replayed after it')
    assert hit.depth == 1
    assert not events_since(h, events, CacheEvent.HANDOFF, f.parent)
    assert h.robot.gotos[-1][:2] == pytest.approx(shelf_of(1))


def test_a_moved_tag_is_followed_by_the_picks_own_binding(world):
    h = world
    f = family(h, 'moved')
    learn(h, f)
    moved = (TAG_HOME[0] + 0.06, TAG_HOME[1] - 0.04)  # within max_shift of the tag binding
    gotos, calls_since = len(h.robot.gotos), len(h.agent.subtasks.calls)
    result, did = run(h, f.parent, tag=moved, bin=1)
    assert result.status == GoalStatus.STATUS_SUCCEEDED, result.result.message
    # whoever runs the pick (the parent's replay, or its agent if the parent's check of the
    # tag failed), the pick replays, its goto recomputed from the tag; the place, started
    # from another base pose than its recording, is the cache's call
    assert f.pick not in did, did
    assert all(c.ok and c.result.cache_hit for c in h.agent.subtasks.calls[calls_since:]
               if c.task == f.pick)
    goals = [g[:2] for g in h.robot.gotos[gotos:]]
    assert goals == [pytest.approx((moved[0] - STANDOFF, moved[1])),
                     pytest.approx(shelf_of(1))], goals


def test_a_task_calling_itself_is_refused(world):
    h = world
    h.agent.subtasks.plans['again'] = lambda tag, params: [(SUBTASK, ('again', params))]
    calls_since = len(h.agent.subtasks.calls)
    result, did = run(h, 'again', bin=1)
    assert not result.result.success
    assert did == ['again']
    (call,) = sub_calls(h, 'again', calls_since)
    assert call.status == GoalStatus.STATUS_ABORTED and not call.ok
    assert 'may not call itself' in call.message, call.message
    assert not learned(h, 'again')


def test_a_subtask_parameter_binds_to_the_parents_like_a_goal_field(world):
    h = world
    f = family(h, 'bound')
    first, did = run(h, f.other, shelf=[1.8, 0.9])
    assert first.result.success and did == [f.other, f.pick, f.place], did
    second, did = run(h, f.other, shelf=[1.8, 1.2])  # a second value: the place's followed it
    assert second.result.success and did == [f.other, f.place], (did, second.result.message)
    events = len(h.events)
    result, did = run(h, f.other, shelf=[1.8, 1.5])
    assert result.status == GoalStatus.STATUS_SUCCEEDED, result.result.message
    # the parent replays its tree with the call's parameter recomputed (and the place its own,
    # its goal bound to its parameter the same way): nobody asks the agent
    assert did == [], did
    assert result.result.cache_hit, result.result.message
    assert ('params.shelf[1]', 'param:shelf[1]', pytest.approx(1.5)) in [
        (s.field, s.source, s.value) for s in result.result.substituted], result.result.substituted
    (ok,) = [e for e in events_since(h, events, CacheEvent.STEP_OK, f.other) if e.step == 1]
    assert ok.depth == 0 and [s.field for s in ok.substituted] == ['params.shelf[1]']
    assert h.robot.gotos[-1][:2] == pytest.approx((1.8, 1.5))
