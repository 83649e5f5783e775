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
Tasks within tasks on the fake arm: an agent calls skills through ``~/execute_subtask``.

The agent decomposes (node_helpers.Subtasks): ``tidy`` is a ``pick`` subtask then a
``place`` subtask, ``stack`` is a ``pick`` subtask then a count of its own. Each test uses
its own names (:func:`family`), so their trees are independent. Real cache process, DDS.
"""

from __future__ import annotations

from dataclasses import dataclass
import json

from action_msgs.msg import GoalStatus
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import Forget, GetTrajectory, ListTasks
from muscle_mem_ros.replay.subtasks import MAX_DEPTH, SUBTASK_TYPE
from muscle_mem_ros.ros.rclfix.matching import wait_for_action_matched
from node_helpers import FeedbackClient, Harness, SUBTASK, wait_feedback, wait_until
import pytest

PICK_OUT = [0.1, 0.2, 0.3]
PLACE_AT = [0.3, -0.2, 0.4]


def pick(obj, params):
    """Arm out, close the gripper, arm to the object."""
    return [('arm', PICK_OUT), ('gripper', True),
            ('arm', [round(obj[0], 3), round(obj[1], 3), 0.5])]


def place(obj, params):
    """Arm to the place, open the gripper."""
    return [('arm', PLACE_AT), ('gripper', False)]


def calls(*steps):
    """Return a plan of subtask calls ``(task, params)`` and own steps ``('fib', n)``."""
    return lambda obj, params: [(SUBTASK, step) if isinstance(step[1], dict) else step
                                for step in steps]


@dataclass(frozen=True)
class Family:
    parent: str
    pick: str
    place: str
    other: str


def family(h: Harness, tag: str) -> Family:
    """Register a test's plans: parent = pick + place, other = pick + a count of 3."""
    f = Family(f'tidy_{tag}', f'pick_{tag}', f'place_{tag}', f'stack_{tag}')
    plans = h.agent.subtasks.plans
    plans[f.pick], plans[f.place] = pick, place
    plans[f.parent] = calls((f.pick, {}), (f.place, {}))
    plans[f.other] = calls((f.pick, {}), ('fib', 3))
    return f


@pytest.fixture(scope='module')
def harness(tmp_path_factory):
    h = Harness(tmp=tmp_path_factory.mktemp('subtasks'), subtasks=True)
    h.start_cache()
    yield h
    h.close()


@pytest.fixture
def world(harness):
    h = harness
    h.robot.reset()
    h.agent.fail_next = False
    h.agent.step_delay = 0.0
    h.agent.subtasks.on_failure = 'abort'
    h.set_mode('learn')
    assert h.cache is not None and h.cache.alive(), h.cache.output()
    yield h
    h.agent.step_delay = 0.0
    h.agent.subtasks.on_failure = 'abort'
    assert h.cache is not None and h.cache.alive(), h.cache.output()


@pytest.fixture(scope='module')
def outsider(harness):
    """Return a client of ``~/execute_subtask`` that is not the agent (closed with the harness)."""
    h = harness
    client = FeedbackClient(h.client, ExecuteTask, h.names.subtask, callback_group=h._group)
    assert wait_for_action_matched(h.client, client, f'/{h.names.node}', 30.0)
    return client


def asked(h: Harness, since: int) -> list[str]:
    """Return the tasks the agent was asked for since call ``since``."""
    return [c.task for c in h.agent.calls[since:]]


def sub_calls(h: Harness, caller: str, since: int = 0):
    return [c for c in h.agent.subtasks.calls[since:] if c.caller == caller]


def learned(h: Harness, task: str):
    return h.call(ListTasks, 'list_tasks', task=task, with_steps=True).trajectories


def steps_of(h: Harness, trajectory_id: int):
    answer = h.call(GetTrajectory, 'get_trajectory', trajectory_id=trajectory_id)
    assert answer.success, answer.message
    return answer.trajectory.steps


def events_since(h: Harness, index: int, kind: int, task: str):
    return [e for e in list(h.events)[index:] if e.type == kind and e.task == task]


def wait_event(h: Harness, index: int, kind: int, task: str, what: str):
    """Return the events of ``kind`` for ``task`` since ``index`` once one arrived."""
    assert wait_until(lambda: events_since(h, index, kind, task)), (
        f'{what}: no event {kind} for {task!r}; events since: '
        f'{[(e.type, e.task, e.depth, e.step, e.detail) for e in list(h.events)[index:]]}')
    return events_since(h, index, kind, task)


def learn(h: Harness, f: Family):
    """Run the parent on a fresh world; the agent does it and each subtask; return the run."""
    h.robot.reset()
    since = len(h.agent.calls)
    run = h.run_task(f.parent)
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.success and not run.result.cache_hit, run.result.message
    assert asked(h, since) == [f.parent, f.pick, f.place]
    h.robot.reset()
    return run


def test_a_parent_miss_asks_for_it_and_each_subtask_and_records_one_step_per_call(world):
    h = world
    f = family(h, 'miss')
    since, calls_since, events = len(h.agent.calls), len(h.agent.subtasks.calls), len(h.events)
    arm = len(h.robot.arm_goals)
    run = h.run_task(f.parent)
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.success and not run.result.cache_hit, run.result.message
    assert run.result.trajectory_id > 0
    assert asked(h, since) == [f.parent, f.pick, f.place]
    assert all(c.resume_from_step == 0 for c in h.agent.calls[since:])
    made = sub_calls(h, f.parent, calls_since)
    assert [(c.task, c.ok) for c in made] == [(f.pick, True), (f.place, True)], [
        c.message for c in made]
    assert not any(c.result.cache_hit for c in made)
    assert len(h.robot.arm_goals) == arm + 3  # the subtasks moved the arm, nobody else
    assert h.robot.joints == PLACE_AT
    # the parent's trajectory: one step per call, kind 'subtask', tool = the subtask's name
    steps = steps_of(h, run.result.trajectory_id)
    assert [(s.tool, s.kind, s.type_name) for s in steps] == [
        (f.pick, 'subtask', SUBTASK_TYPE), (f.place, 'subtask', SUBTASK_TYPE)]
    assert [json.loads(s.goal_json) for s in steps] == [
        {'params': {}, 'task': f.pick}, {'params': {}, 'task': f.place}]
    assert sorted(steps[0].pre_sensors) == ['joints', 'object']
    # each subtask learned in its own tree, with its own steps only
    for task, kinds in ((f.pick, ['action', 'service', 'action']),
                        (f.place, ['action', 'service'])):
        (trajectory,) = learned(h, task)
        assert [s.kind for s in trajectory.steps] == kinds, task
        assert trajectory.id == next(c.result.trajectory_id for c in made if c.task == task)
    # the events name each task at its depth
    for task, depth in ((f.parent, 0), (f.pick, 1), (f.place, 1)):
        (miss,) = wait_event(h, events, CacheEvent.MISS, task, 'a miss per task')
        assert miss.depth == depth, task
        (branch,) = wait_event(h, events, CacheEvent.BRANCH_LEARNED, task, 'learned')
        assert branch.depth == depth, task


def test_a_learned_parent_replays_with_no_agent_call(world):
    h = world
    f = family(h, 'replay')
    first = learn(h, f)
    since, events = len(h.agent.calls), len(h.events)
    arm, grip = len(h.robot.arm_goals), len(h.robot.gripper_requests)
    run = h.run_task(f.parent)
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.success and run.result.cache_hit, run.result.message
    assert run.result.trajectory_id == first.result.trajectory_id
    assert run.result.steps_by_agent == 0
    assert asked(h, since) == []
    assert len(h.robot.arm_goals) == arm + 3
    assert h.robot.gripper_requests[grip:] == [True, False]
    assert h.robot.joints == PLACE_AT
    (hit,) = wait_event(h, events, CacheEvent.HIT, f.parent, "the parent's hit")
    assert hit.depth == 0 and hit.trajectory_id == run.result.trajectory_id
    for task in (f.pick, f.place):
        (hit,) = wait_event(h, events, CacheEvent.HIT, task, "a subtask's hit")
        assert hit.depth == 1, task
        oks = wait_event(h, events, CacheEvent.STEP_OK, task, "a subtask's steps")
        assert {e.depth for e in oks} == {1}, task
    # the feedback names the task and depth each step belongs to
    feedback = wait_feedback(
        run.feedback, lambda fbs: {(fb.task, fb.depth) for fb in fbs} >= {
            (f.pick, 1), (f.place, 1)}, 'feedback of both subtasks at depth 1')
    assert {fb.task for fb in feedback if fb.depth == 0} <= {f.parent}
    assert {fb.depth for fb in feedback} <= {0, 1}
    assert {fb.mode for fb in feedback} == {ExecuteTask.Feedback.MODE_REPLAY}


def test_a_second_parent_reuses_the_subtask_without_asking_the_agent(world):
    h = world
    f = family(h, 'reuse')
    learn(h, f)
    since, calls_since, events = len(h.agent.calls), len(h.agent.subtasks.calls), len(h.events)
    fib = len(h.robot.fib_goals)
    run = h.run_task(f.other)
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.success and not run.result.cache_hit, run.result.message
    assert asked(h, since) == [f.other]  # not the pick: it replayed
    (call,) = sub_calls(h, f.other, calls_since)
    assert call.task == f.pick and call.ok and call.result.cache_hit, call.message
    (hit,) = wait_event(h, events, CacheEvent.HIT, f.pick, 'the pick replayed')
    assert hit.depth == 1
    assert len(h.robot.fib_goals) == fib + 1
    steps = steps_of(h, run.result.trajectory_id)
    assert [(s.tool, s.kind) for s in steps] == [(f.pick, 'subtask'), (h.names.fib, 'action')]
    assert len(learned(h, f.pick)) == 1  # nothing new learned for the pick
    # the second parent, learned, replays whole
    h.robot.reset()
    since = len(h.agent.calls)
    run = h.run_task(f.other)
    assert run.result.success and run.result.cache_hit, run.result.message
    assert asked(h, since) == []


def test_a_subtask_miss_mid_replay_asks_only_for_the_subtask_and_the_parent_goes_on(world):
    h = world
    f = family(h, 'forgot')
    learn(h, f)
    forgot = h.call(Forget, 'forget', task=f.pick)
    assert forgot.success and forgot.removed == 1, forgot.message
    since, events = len(h.agent.calls), len(h.events)
    run = h.run_task(f.parent)
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.success, run.result.message
    assert asked(h, since) == [f.pick]  # not the parent, not the place
    assert h.agent.calls[since].resume_from_step == 0
    (hit,) = wait_event(h, events, CacheEvent.HIT, f.place, 'the place after the pick replayed')
    assert hit.depth == 1
    (miss,) = wait_event(h, events, CacheEvent.MISS, f.pick, "the pick's miss")
    assert miss.depth == 1
    assert not events_since(h, events, CacheEvent.HANDOFF, f.parent)
    assert h.robot.joints == PLACE_AT
    assert len(learned(h, f.parent)) == 1 and len(learned(h, f.pick)) == 1
    h.robot.reset()
    since = len(h.agent.calls)
    again = h.run_task(f.parent)
    assert again.result.success and again.result.cache_hit, again.result.message
    assert asked(h, since) == []
    # the agent was called for a part of the run: not a hit ("the agent was never called")
    assert not run.result.cache_hit, run.result.message


def test_a_fault_half_way_through_a_subtask_hands_only_its_rest_to_the_agent(world):
    h = world
    f = family(h, 'half')
    learn(h, f)
    arm = len(h.robot.arm_goals)
    h.robot.abort_at = {arm + 1}  # the pick's second arm goal (its step 2) is aborted
    since, events = len(h.agent.calls), len(h.events)
    run = h.run_task(f.parent)
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.success, run.result.message
    assert asked(h, since) == [f.pick]
    call = h.agent.calls[since]
    assert (call.resume_from_step, call.steps_done) == (2, 2), call
    assert 'aborted' in call.resume_reason, call.resume_reason
    errors = wait_event(h, events, CacheEvent.ERROR, f.pick, "the pick's fault")
    assert {e.depth for e in errors} == {1}
    (hit,) = wait_event(h, events, CacheEvent.HIT, f.place, 'the place replayed after it')
    assert hit.depth == 1
    assert h.robot.joints == PLACE_AT
    assert not run.result.cache_hit, run.result.message  # the agent did a part of the run
    assert run.result.steps_by_agent == 1  # the pick's last step, its rest


def test_a_fault_in_a_subtask_replay_with_no_agent_fails_the_parent_and_changes_nothing(world):
    h = world
    f = family(h, 'fault_ro')
    learn(h, f)
    before = {t: sorted(x.id for x in learned(h, t)) for t in (f.parent, f.pick, f.place)}
    h.set_mode('replay_only')
    h.robot.abort_at = {len(h.robot.arm_goals)}  # the pick's first arm goal
    since, events = len(h.agent.calls), len(h.events)
    run = h.run_task(f.parent)
    assert not run.result.success, run.result.message
    assert asked(h, since) == []
    errors = wait_event(h, events, CacheEvent.ERROR, f.pick, "the pick's fault")
    assert {e.depth for e in errors} == {1}
    assert not events_since(h, events, CacheEvent.HIT, f.place)  # the parent stopped there
    assert {t: sorted(x.id for x in learned(h, t)) for t in before} == before


def test_a_fault_in_a_subtask_the_agent_does_fails_the_call_and_stores_nothing(world):
    h = world
    plans = h.agent.subtasks.plans
    plans['fsub'] = pick
    plans['fpar'] = calls(('fsub', {}), ('fib', 3))
    h.robot.abort_next = 1  # the subtask's first arm goal, sent by the agent
    since, calls_since = len(h.agent.calls), len(h.agent.subtasks.calls)
    fib = len(h.robot.fib_goals)
    run = h.run_task('fpar')
    assert run.status == GoalStatus.STATUS_ABORTED
    assert not run.result.success
    assert asked(h, since) == ['fpar', 'fsub']
    (call,) = sub_calls(h, 'fpar', calls_since)
    assert call.status == GoalStatus.STATUS_ABORTED and not call.ok, call.message
    assert call.message, 'the failed call says nothing'
    assert len(h.robot.fib_goals) == fib  # the parent's agent stopped there
    assert not learned(h, 'fsub') and not learned(h, 'fpar')


def test_a_subtask_outside_a_task_is_refused(world, outsider):
    h = world
    since = len(h.agent.calls)
    handle = h.wait(outsider.send_goal_async(ExecuteTask.Goal(task='lonely')))
    assert handle.accepted
    wrapped = h.result(handle)
    assert wrapped.status == GoalStatus.STATUS_ABORTED
    assert not wrapped.result.success
    assert 'no task' in wrapped.result.message, wrapped.result.message
    assert asked(h, since) == []
    assert not learned(h, 'lonely')


def test_a_subtask_while_the_cache_replays_is_refused(world, outsider):
    h = world
    f = family(h, 'busy')
    learn(h, f)
    since = len(h.agent.calls)
    h.robot.arm_delay = 1.0
    first = h.send_task(f.parent)
    assert first.accepted
    assert wait_until(h.robot.arm_active.is_set, 10.0)
    handle = h.wait(outsider.send_goal_async(ExecuteTask.Goal(task=f.place)))
    wrapped = h.result(handle)
    assert wrapped.status == GoalStatus.STATUS_ABORTED
    assert not wrapped.result.success
    assert 'replay' in wrapped.result.message, wrapped.result.message
    h.robot.arm_delay = 0.0
    wrapped = h.result(first, 60.0)
    assert wrapped.result.success and wrapped.result.cache_hit, wrapped.result.message
    assert asked(h, since) == []


def test_a_task_calling_itself_is_refused(world):
    h = world
    h.agent.subtasks.plans['recur'] = calls(('recur', {}))
    since, calls_since = len(h.agent.calls), len(h.agent.subtasks.calls)
    run = h.run_task('recur')
    assert not run.result.success
    assert asked(h, since) == ['recur']
    (call,) = sub_calls(h, 'recur', calls_since)
    assert call.status == GoalStatus.STATUS_ABORTED and not call.ok
    assert 'may not call itself' in call.message, call.message
    assert not learned(h, 'recur')


def test_a_task_calling_itself_through_another_is_refused(world):
    h = world
    plans = h.agent.subtasks.plans
    plans['ping'] = calls(('pong', {}))
    plans['pong'] = calls(('ping', {}))
    since, calls_since = len(h.agent.calls), len(h.agent.subtasks.calls)
    run = h.run_task('ping')
    assert not run.result.success
    assert asked(h, since) == ['ping', 'pong']
    (inner,) = sub_calls(h, 'pong', calls_since)
    assert not inner.ok and 'may not call itself' in inner.message, inner.message
    assert 'ping > pong > ping' in inner.message, inner.message
    (outer,) = sub_calls(h, 'ping', calls_since)
    assert not outer.ok
    assert not learned(h, 'ping') and not learned(h, 'pong')


def test_subtasks_nest_to_the_documented_depth_and_no_deeper(world):
    h = world
    chain = [f'deep{i}' for i in range(MAX_DEPTH + 2)]
    for caller, callee in zip(chain, chain[1:]):
        h.agent.subtasks.plans[caller] = calls((callee, {}))
    since, calls_since = len(h.agent.calls), len(h.agent.subtasks.calls)
    run = h.run_task(chain[0])
    assert not run.result.success
    assert asked(h, since) == chain[:-1]  # depth 0 .. MAX_DEPTH ran, one deeper did not
    (refused,) = sub_calls(h, chain[-2], calls_since)
    assert not refused.ok and f'at most {MAX_DEPTH}' in refused.message, refused.message


def test_cancel_of_the_parent_cancels_the_subtask_the_agent_does(world):
    h = world
    plans = h.agent.subtasks.plans
    plans['cpar'] = calls(('csub', {}), ('fib', 3))  # csub: the agent's default plan
    h.agent.step_delay = 0.3
    since, calls_since = len(h.agent.calls), len(h.agent.subtasks.calls)
    arm, fib = len(h.robot.arm_goals), len(h.robot.fib_goals)
    handle = h.send_task('cpar')
    assert handle.accepted
    assert wait_until(lambda: h.agent.subtasks.running('csub') is not None
                      and len(h.robot.arm_goals) > arm, 20.0)
    h.wait(handle.cancel_goal_async())
    wrapped = h.result(handle, 60.0)
    assert wrapped.status == GoalStatus.STATUS_CANCELED, wrapped.result.message
    assert not wrapped.result.success
    assert asked(h, since) == ['cpar', 'csub']
    assert wait_until(lambda: 'csub' in h.agent.canceled_tasks, 20.0), h.agent.canceled_tasks
    (call,) = sub_calls(h, 'cpar', calls_since)
    assert call.done.wait(20.0)
    # its caller did not cancel it (ROS lets only a goal whose client asked end CANCELED):
    # the call ends aborted, saying it was canceled
    assert call.status == GoalStatus.STATUS_ABORTED and not call.ok, (call.status, call.message)
    assert 'cancel' in call.message, call.message
    assert len(h.robot.fib_goals) == fib  # the parent's agent went no further
    assert not learned(h, 'cpar') and not learned(h, 'csub')


def test_cancel_of_the_parent_cancels_the_goal_of_a_replayed_subtask(world):
    h = world
    f = family(h, 'cancel_replay')
    learn(h, f)
    h.robot.arm_delay = 10.0
    canceled, since, events = h.robot.arm_canceled, len(h.agent.calls), len(h.events)
    handle = h.send_task(f.parent)
    assert handle.accepted
    assert wait_until(h.robot.arm_active.is_set, 10.0)  # the pick's first goal, replayed
    h.wait(handle.cancel_goal_async())
    wrapped = h.result(handle, 60.0)
    assert wrapped.status == GoalStatus.STATUS_CANCELED, wrapped.result.message
    assert not wrapped.result.success
    assert wait_until(lambda: h.robot.arm_canceled == canceled + 1)
    assert asked(h, since) == []
    assert not events_since(h, events, CacheEvent.HIT, f.place)  # nothing ran after it
    h.robot.reset()
    run = h.run_task(f.parent)
    assert run.result.success and run.result.cache_hit, run.result.message


def test_cancel_of_the_subtask_alone_returns_canceled_and_the_parent_goes_on(world):
    h = world
    plans = h.agent.subtasks.plans
    plans['cpar2'] = calls(('csub2', {}), ('fib', 3))
    h.agent.step_delay = 0.3
    h.agent.subtasks.on_failure = 'continue'
    since, calls_since = len(h.agent.calls), len(h.agent.subtasks.calls)
    arm, fib = len(h.robot.arm_goals), len(h.robot.fib_goals)
    handle = h.send_task('cpar2')
    assert handle.accepted
    assert wait_until(lambda: h.agent.subtasks.running('csub2') is not None
                      and len(h.robot.arm_goals) > arm, 20.0)
    call = h.agent.subtasks.running('csub2')
    h.wait(call.handle.cancel_goal_async())
    assert call.done.wait(30.0)
    assert call.status == GoalStatus.STATUS_CANCELED and not call.ok, (call.status, call.message)
    wrapped = h.result(handle, 60.0)
    assert wrapped.status == GoalStatus.STATUS_SUCCEEDED, wrapped.result.message
    assert wrapped.result.success  # the agent chose to go on without the subtask
    assert 'csub2' in h.agent.canceled_tasks
    assert asked(h, since) == ['cpar2', 'csub2']
    assert len(h.robot.fib_goals) == fib + 1
    assert [c.task for c in sub_calls(h, 'cpar2', calls_since)] == ['csub2']
    assert not learned(h, 'csub2')
    # what the parent learned: its own count, no trace of the canceled call's steps
    steps = steps_of(h, wrapped.result.trajectory_id)
    assert [(s.tool, s.kind) for s in steps] == [(h.names.fib, 'action')]


def test_the_agent_feedback_of_a_parent_and_its_subtasks_names_each(world):
    h = world
    f = family(h, 'fb')
    since, calls_since = len(h.agent.calls), len(h.agent.subtasks.calls)
    run = h.run_task(f.parent)
    assert run.result.success, run.result.message
    assert asked(h, since) == [f.parent, f.pick, f.place]
    agent = ExecuteTask.Feedback.MODE_AGENT
    feedback = wait_feedback(run.feedback, lambda fbs: {
        (fb.task, fb.depth) for fb in fbs if fb.mode == agent} >= {
        (f.parent, 0), (f.pick, 1), (f.place, 1)}, "the agent's feedback of each task")
    # the pick's agent steps are the pick's, at depth 1 (its steps 0, 1, 2)
    assert sorted(fb.step for fb in feedback if fb.task == f.pick and fb.mode == agent) == [
        0, 1, 2]
    # the caller of a subtask sees that subtask's feedback too
    pick_call = sub_calls(h, f.parent, calls_since)[0]
    wait_feedback(pick_call.feedback, lambda fbs: any(fb.task == f.pick for fb in fbs),
                  "the pick's feedback to its caller")
