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
ExecuteTask end to end: miss -> agent -> learned, replay, tolerance, branch, faults.

The cache node runs in a subprocess; the fake robot, sensors and agent run in
this process (node_helpers). Each test uses its own task name, so their trees
are independent; the robot is reset before each test.
"""

from __future__ import annotations

from action_msgs.msg import GoalStatus
from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import ListTasks
from muscle_mem_ros.ros.messages.cdr import canonical_cdr
from node_helpers import Harness, HOME, OBJECT_HOME, wait_feedback, wait_until
import pytest
from rclpy.serialization import deserialize_message
from test_msgs.action import Fibonacci


def decode(payloads, msg_type):
    return [deserialize_message(p, msg_type) for p in payloads]


@pytest.fixture(scope='module')
def harness(tmp_path_factory):
    h = Harness(tmp=tmp_path_factory.mktemp('execute'))
    h.start_cache()
    yield h
    h.close()


@pytest.fixture
def world(harness):
    harness.robot.reset()
    harness.agent.fail_next = False
    harness.set_mode('learn')
    assert harness.cache is not None and harness.cache.alive(), harness.cache.output()
    yield harness
    assert harness.cache is not None and harness.cache.alive(), harness.cache.output()


def learn(h: Harness, task: str, params_json: str = ''):
    """Run ``task`` on a fresh world; it must miss and be learned from the agent."""
    h.robot.reset()
    calls = len(h.agent.calls)
    run = h.run_task(task, params_json)
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.success and not run.result.cache_hit
    assert len(h.agent.calls) == calls + 1
    assert run.result.trajectory_id > 0
    h.robot.reset()
    return run


def test_miss_calls_agent_and_records(world):
    h = world
    calls = len(h.agent.calls)
    arm, fib, grip = len(h.robot.arm_goals), len(h.robot.fib_goals), len(h.robot.gripper_requests)
    run = h.run_task('pick_a')
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.success
    assert not run.result.cache_hit
    assert run.result.steps_by_agent == 4
    assert run.result.steps_replayed == 0
    assert run.result.trajectory_id > 0
    assert len(h.agent.calls) == calls + 1
    call = h.agent.calls[-1]
    assert (call.task, call.resume_from_step, call.steps_done) == ('pick_a', 0, 0)
    # The proxies forwarded every call to the real servers.
    assert len(h.robot.arm_goals) == arm + 2
    assert len(h.robot.fib_goals) == fib + 1
    assert len(h.robot.gripper_requests) == grip + 1
    wait_feedback(run.feedback, lambda fbs: any(fb.mode == fb.MODE_AGENT for fb in fbs),
                  "the agent's feedback")
    h.wait_events(CacheEvent.BRANCH_LEARNED, 'pick_a')
    h.wait_events(CacheEvent.MISS, 'pick_a')
    listing = h.call(ListTasks, 'list_tasks', task='pick_a', with_steps=True)
    assert listing.success, listing.message
    (traj,) = listing.trajectories
    assert traj.id == run.result.trajectory_id
    assert [s.tool for s in traj.steps] == [h.names.arm, h.names.gripper, h.names.arm,
                                            h.names.fib]
    assert [s.kind for s in traj.steps] == ['action', 'service', 'action', 'action']
    assert traj.steps[3].type_name == 'test_msgs/action/Fibonacci'
    assert '"order":5' in traj.steps[3].goal_json
    assert sorted(traj.steps[0].pre_sensors) == ['joints', 'object']


def test_repeat_replays_byte_identical_without_agent(world):
    h = world
    learn(h, 'pick_b')
    recorded_arm = h.robot.arm_goals[-2:]
    recorded_fib = h.robot.fib_goals[-1:]
    recorded_grip = h.robot.gripper_requests[-1:]
    calls = len(h.agent.calls)
    arm, fib = len(h.robot.arm_goals), len(h.robot.fib_goals)
    grip = len(h.robot.gripper_requests)
    run = h.run_task('pick_b')
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.success and run.result.cache_hit, run.result.message
    assert run.result.steps_replayed == 4
    assert run.result.steps_by_agent == 0
    assert len(h.agent.calls) == calls
    # The same goals, field for field and bit for bit (CDR alignment padding aside).
    assert decode(h.robot.arm_goals[arm:], FollowJointTrajectory.Goal) == decode(
        recorded_arm, FollowJointTrajectory.Goal)
    assert decode(h.robot.fib_goals[fib:], Fibonacci.Goal) == decode(recorded_fib, Fibonacci.Goal)
    assert [canonical_cdr(g, FollowJointTrajectory.Goal) for g in h.robot.arm_goals[arm:]] == [
        canonical_cdr(g, FollowJointTrajectory.Goal) for g in recorded_arm]
    assert h.robot.gripper_requests[grip:] == recorded_grip  # the service tool replayed
    assert h.robot.joints == [OBJECT_HOME[0], OBJECT_HOME[1], 0.5]
    feedback = wait_feedback(run.feedback, lambda fbs: len(fbs) >= 4, 'feedback of 4 steps')
    assert {fb.mode for fb in feedback} == {feedback[0].MODE_REPLAY}
    assert sorted(fb.step for fb in feedback) == [0, 1, 2, 3]
    assert {fb.total for fb in feedback} == {4}
    (hit,) = h.wait_events(CacheEvent.HIT, 'pick_b')
    assert hit.trajectory_id == run.result.trajectory_id
    # Each step's event names the trajectory being replayed (the only one of the task).
    steps_ok = h.wait_events(CacheEvent.STEP_OK, 'pick_b', count=4)
    assert sorted(e.step for e in steps_ok) == [0, 1, 2, 3]
    assert {e.trajectory_id for e in steps_ok} == {run.result.trajectory_id}


def test_within_tolerance_is_still_a_hit(world):
    h = world
    learn(h, 'pick_c')
    calls = len(h.agent.calls)
    h.robot.move_object((OBJECT_HOME[0] + 0.01, OBJECT_HOME[1], OBJECT_HOME[2]))
    run = h.run_task('pick_c')
    assert run.result.success and run.result.cache_hit, run.result.message
    assert len(h.agent.calls) == calls


def test_divergence_hands_off_learns_branch_then_replays_it(world):
    h = world
    learn(h, 'pick_d')
    bumped = (OBJECT_HOME[0] + 0.2, OBJECT_HOME[1] - 0.1, OBJECT_HOME[2])
    # The object is bumped when the gripper call (step 1) finishes.
    h.robot.bump_after = (2, bumped)
    calls = len(h.agent.calls)
    run = h.run_task('pick_d')
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.success and not run.result.cache_hit
    assert run.result.steps_replayed == 2
    assert run.result.steps_by_agent == 2
    assert len(h.agent.calls) == calls + 1
    call = h.agent.calls[-1]
    assert call.resume_from_step == 2
    assert call.steps_done == 2
    assert 'object' in call.resume_reason
    assert h.robot.joints == [round(bumped[0], 3), round(bumped[1], 3), 0.5]
    failed = h.wait_events(CacheEvent.CHECK_FAILED, 'pick_d')
    assert failed[-1].sensor == 'object'
    assert failed[-1].deviation > failed[-1].tolerance
    assert wait_until(lambda: [e for e in h.events_of(CacheEvent.HANDOFF, 'pick_d')
                               if e.step == 2])
    branch_id = run.result.trajectory_id
    # Same change again: the branch replays, the agent is not called.
    h.robot.reset()
    h.robot.bump_after = (2, bumped)
    run = h.run_task('pick_d')
    assert run.result.success and run.result.cache_hit, run.result.message
    assert run.result.trajectory_id == branch_id
    assert run.result.steps_replayed == 4
    assert len(h.agent.calls) == calls + 1
    # Steps 2 and 3 exist only on the branch (the run before handed off at step 2): the
    # events of those steps name the branch.

    def branch_steps():
        return [e for e in h.events_of(CacheEvent.STEP_OK, 'pick_d') if e.step >= 2]

    assert wait_until(lambda: len(branch_steps()) >= 2)
    assert sorted(e.step for e in branch_steps()) == [2, 3]
    assert {e.trajectory_id for e in branch_steps()} == {branch_id}
    # Without the change, the original trajectory still replays.
    h.robot.reset()
    run = h.run_task('pick_d')
    assert run.result.cache_hit and run.result.trajectory_id != branch_id
    listing = h.call(ListTasks, 'list_tasks', task='pick_d', with_steps=False)
    assert len(listing.trajectories) == 2
    assert sorted(t.step_count for t in listing.trajectories) == [4, 4]


def test_a_failed_post_check_on_the_last_step_is_not_a_hit(world):
    h = world
    learn(h, 'pick_last')
    bumped = (OBJECT_HOME[0] + 0.2, OBJECT_HOME[1] - 0.1, OBJECT_HOME[2])
    h.robot.bump_after = (4, bumped)  # the object moves when the last step (count) ends
    calls = len(h.agent.calls)
    run = h.run_task('pick_last')
    assert run.result.success and not run.result.cache_hit, run.result.message
    assert run.result.steps_replayed == 4
    assert len(h.agent.calls) == calls + 1
    call = h.agent.calls[-1]
    assert (call.resume_from_step, call.steps_done) == (4, 4)
    assert 'post-check failed at step 3' in call.resume_reason


def test_stale_sensor_never_replays(world):
    h = world
    learn(h, 'pick_e')
    h.robot.publish_object = False
    stale_since = len(h.events)
    calls = len(h.agent.calls)
    arm = len(h.robot.arm_goals)
    h.set_mode('replay_only')
    import time
    time.sleep(0.7)  # older than max_age (0.5 s): the data is stale, not a timing assertion
    run = h.run_task('pick_e')
    assert not run.result.success
    assert 'stale' in run.result.message
    assert len(h.robot.arm_goals) == arm
    assert len(h.agent.calls) == calls
    assert wait_until(lambda: [e for e in h.events[stale_since:]
                               if e.type == CacheEvent.CHECK_FAILED])
    failed = [e for e in h.events[stale_since:] if e.type == CacheEvent.CHECK_FAILED]
    assert failed[0].sensor == 'object'


def test_controller_abort_hands_off_and_node_survives(world):
    h = world
    learn(h, 'pick_f')
    h.robot.abort_next = 1
    calls = len(h.agent.calls)
    run = h.run_task('pick_f')
    assert run.result.success and not run.result.cache_hit, run.result.message
    assert len(h.agent.calls) == calls + 1
    assert h.agent.calls[-1].resume_from_step == 0
    assert 'aborted' in h.agent.calls[-1].resume_reason
    errors = h.wait_events(CacheEvent.ERROR, 'pick_f')
    assert 'aborted' in errors[-1].detail
    h.robot.reset()
    run = h.run_task('pick_f')
    assert run.result.cache_hit, run.result.message


def test_cancel_mid_replay_cancels_controller_goal(world):
    h = world
    learn(h, 'pick_g')
    h.robot.arm_delay = 10.0
    canceled = h.robot.arm_canceled
    handle = h.send_task('pick_g')
    assert handle.accepted
    assert wait_until(h.robot.arm_active.is_set, 10.0)
    h.wait(handle.cancel_goal_async())
    wrapped = h.wait(handle.get_result_async())
    assert wrapped.status == GoalStatus.STATUS_CANCELED
    assert not wrapped.result.success
    assert wait_until(lambda: h.robot.arm_canceled == canceled + 1)
    h.robot.reset()
    run = h.run_task('pick_g')
    assert run.result.cache_hit, run.result.message


def test_second_task_while_one_runs_is_rejected(world):
    h = world
    learn(h, 'pick_h')
    h.robot.arm_delay = 1.0
    first = h.send_task('pick_h')
    assert wait_until(h.robot.arm_active.is_set, 10.0)
    second = h.send_task('pick_other')
    wrapped = h.wait(second.get_result_async())
    assert wrapped.status == GoalStatus.STATUS_ABORTED
    assert not wrapped.result.success
    assert 'already running' in wrapped.result.message
    assert 'pick_h' in wrapped.result.message
    h.robot.arm_delay = 0.0
    wrapped = h.wait(first.get_result_async())
    assert wrapped.result.success and wrapped.result.cache_hit, wrapped.result.message


def test_agent_failure_stores_nothing(world):
    h = world
    h.agent.fail_next = True
    run = h.run_task('pick_fail')
    assert run.status == GoalStatus.STATUS_ABORTED
    assert not run.result.success
    assert 'agent failed on purpose' in run.result.message
    listing = h.call(ListTasks, 'list_tasks', task='pick_fail', with_steps=False)
    assert not listing.trajectories


@pytest.mark.parametrize('task, params_json, expected', [
    ('', '', 'task name is empty'),
    ('   ', '', 'task name is empty'),
    ('pick_bad', '{not json', 'not valid JSON'),
    ('pick_bad', '[1, 2]', 'JSON object'),
])
def test_bad_goal_is_refused_and_nothing_changes(world, task, params_json, expected):
    h = world
    before = h.call(ListTasks, 'list_tasks', task='', with_steps=True)
    calls = len(h.agent.calls)
    run = h.run_task(task, params_json)
    assert run.status == GoalStatus.STATUS_ABORTED
    assert not run.result.success
    assert expected in run.result.message
    assert len(h.agent.calls) == calls
    after = h.call(ListTasks, 'list_tasks', task='', with_steps=True)
    assert [t.id for t in after.trajectories] == [t.id for t in before.trajectories]


def test_params_select_separate_trees(world):
    h = world
    learn(h, 'pick_p', '{"bin": 1}')
    calls = len(h.agent.calls)
    # Same parameters written differently: same tree, a hit.
    run = h.run_task('pick_p', ' {"bin":1} ')
    assert run.result.cache_hit, run.result.message
    run = h.run_task('pick_p', '{"bin": 2}')
    assert not run.result.cache_hit
    assert len(h.agent.calls) == calls + 1
    assert h.agent.calls[-1].params_json == '{"bin": 2}'


def test_joint_state_start_mismatch_misses(world):
    h = world
    learn(h, 'pick_j')
    h.robot.set_joints([HOME[0] + 0.05, HOME[1], HOME[2]])
    calls = len(h.agent.calls)
    run = h.run_task('pick_j')
    assert not run.result.cache_hit
    assert len(h.agent.calls) == calls + 1
    assert 'joints' in h.agent.calls[-1].resume_reason


def test_cancel_while_agent_in_control_cancels_agent_goal(world):
    h = world
    h.agent.step_delay = 0.3
    try:
        before = snapshot(h, 'pick_k')
        canceled = h.agent.canceled
        feedback: list = []
        handle = h.send_task('pick_k', feedback=feedback)
        assert handle.accepted
        assert wait_until(lambda: any(fb.mode == fb.MODE_AGENT for fb in feedback), 10.0)
        h.wait(handle.cancel_goal_async())
        wrapped = h.wait(handle.get_result_async())
        assert wrapped.status == GoalStatus.STATUS_CANCELED
        assert not wrapped.result.success
        assert 'canceled' in wrapped.result.message
        assert wait_until(lambda: h.agent.canceled == canceled + 1)
    finally:
        h.agent.step_delay = 0.0
    assert snapshot(h, 'pick_k') == before  # the partial recording was discarded


def snapshot(h: Harness, task: str):
    listing = h.call(ListTasks, 'list_tasks', task='', with_steps=False)
    return sorted(t.id for t in listing.trajectories if t.task == task)
