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
The cache node's services and modes, against a real node, robot and agent.

Replay (dry run, full, by trajectory id, failure report), ListTasks,
GetTrajectory, Forget, Start/StopRecording (teach by teleop), bad requests,
and the four cache modes switched at run time through the parameter service.
"""

from __future__ import annotations

from action_msgs.msg import GoalStatus
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import (
    Forget,
    GetTrajectory,
    ListTasks,
    Replay,
    StartRecording,
    StopRecording,
)
from node_helpers import DESTROYED_WHILE_SPINNING, Harness, OBJECT_HOME, wait_until
import pytest

FAR = (OBJECT_HOME[0] + 0.3, OBJECT_HOME[1], OBJECT_HOME[2])


@pytest.fixture(scope='module')
def harness(tmp_path_factory):
    h = Harness(tmp=tmp_path_factory.mktemp('services'))
    h.start_cache()
    yield h
    h.close()


@pytest.fixture
def world(harness):
    harness.robot.reset()
    harness.agent.fail_next = False
    harness.set_mode('learn')
    yield harness
    assert harness.cache is not None and harness.cache.alive(), harness.cache.output()


def learn(h: Harness, task: str, params_json: str = '') -> int:
    h.robot.reset()
    run = h.run_task(task, params_json)
    assert run.result.success and not run.result.cache_hit, run.result.message
    h.robot.reset()
    return run.result.trajectory_id


def ensure_learned(h: Harness, task: str) -> None:
    h.robot.reset()
    assert h.run_task(task).result.success
    h.robot.reset()


def snapshot_store(h: Harness):
    listing = h.call(ListTasks, 'list_tasks', task='', with_steps=True)
    assert listing.success, listing.message
    return ([(t.name, t.trajectory_count) for t in listing.tasks],
            [(t.id, t.task, t.step_count, [s.goal_json for s in t.steps])
             for t in listing.trajectories])


def test_replay_dry_run_moves_nothing(world):
    h = world
    tid = learn(h, 'svc_dry')
    arm = len(h.robot.arm_goals)
    ok = h.call(Replay, 'replay', task='svc_dry', dry_run=True)
    assert ok.success, ok.message
    assert ok.failed_step == -1
    assert ok.trajectory_id == tid  # the trajectory that would be replayed
    h.robot.move_object(FAR)
    no = h.call(Replay, 'replay', task='svc_dry', dry_run=True)
    assert not no.success
    assert no.failed_step == 0
    assert no.trajectory_id == 0  # nothing would be replayed
    assert no.failed_sensor == 'object'
    assert no.deviation == pytest.approx(0.3, abs=1e-6)
    assert no.tolerance == pytest.approx(0.02)
    assert 'object' in no.message and '0.3' in no.message
    assert len(h.robot.arm_goals) == arm
    by_id = h.call(Replay, 'replay', task='svc_dry', trajectory_id=tid, dry_run=True)
    assert not by_id.success and by_id.failed_sensor == 'object'
    assert by_id.trajectory_id == tid


def test_replay_runs_without_agent_and_reports_failures(world):
    h = world
    tid = learn(h, 'svc_run')
    calls = len(h.agent.calls)
    arm, grip = len(h.robot.arm_goals), len(h.robot.gripper_requests)
    done = h.call(Replay, 'replay', task='svc_run')
    assert done.success, done.message
    assert done.steps_executed == 4
    assert done.trajectory_id == tid
    assert len(h.robot.arm_goals) == arm + 2
    assert len(h.robot.gripper_requests) == grip + 1
    # The object is bumped while step 1 runs: step 2's pre-check fails; no agent.
    h.robot.reset()
    h.robot.bump_after = (2, FAR)
    failed = h.call(Replay, 'replay', task='svc_run', trajectory_id=tid)
    assert not failed.success
    assert failed.steps_executed == 2
    assert failed.failed_step == 2
    assert failed.failed_sensor == 'object'
    assert failed.deviation > failed.tolerance
    assert 'step 2' in failed.message and 'object' in failed.message
    assert len(h.agent.calls) == calls
    # Replay counts show in the listing.
    info = h.call(GetTrajectory, 'get_trajectory', trajectory_id=tid)
    assert info.success and info.trajectory.replay_count >= 1


@pytest.mark.parametrize('fields, expected', [
    ({'task': ''}, 'task name is empty'),
    ({'task': 'svc_bad', 'params_json': '{oops'}, 'not valid JSON'),
    ({'task': 'never_learned'}, "unknown task 'never_learned'"),
    ({'task': 'svc_bad', 'trajectory_id': 987654}, 'unknown trajectory'),
])
def test_replay_bad_requests_change_nothing(world, fields, expected):
    h = world
    ensure_learned(h, 'svc_bad')
    before = snapshot_store(h)
    arm = len(h.robot.arm_goals)
    for dry_run in (False, True):
        response = h.call(Replay, 'replay', dry_run=dry_run, **fields)
        assert not response.success
        assert expected in response.message
    assert snapshot_store(h) == before
    assert len(h.robot.arm_goals) == arm


def test_odd_ids_are_answered_not_fatal(world):
    h = world
    for tid in (-1, -(2 ** 62), 2 ** 62):
        got = h.call(GetTrajectory, 'get_trajectory', trajectory_id=tid)
        assert not got.success and got.message
        replay = h.call(Replay, 'replay', task='svc_odd', trajectory_id=tid, dry_run=True)
        assert not replay.success and replay.message
        forget = h.call(Forget, 'forget', task='svc_odd', trajectory_id=tid)
        assert not forget.success and forget.message
    assert h.call(ListTasks, 'list_tasks', task='', with_steps=False).success


def test_replay_trajectory_of_other_task_is_refused(world):
    h = world
    tid = learn(h, 'svc_owner')
    response = h.call(Replay, 'replay', task='svc_other', trajectory_id=tid)
    assert not response.success
    assert 'belongs to task' in response.message


def test_list_get_and_forget(world):
    h = world
    first = learn(h, 'svc_forget', '{"n": 1}')
    second = learn(h, 'svc_forget', '{"n": 2}')
    assert first != second
    listing = h.call(ListTasks, 'list_tasks', task='svc_forget', with_steps=False)
    assert listing.success
    assert {t.id for t in listing.trajectories} == {first, second}
    assert all(not t.steps for t in listing.trajectories)
    (task,) = listing.tasks
    assert task.trajectory_count == 2 and task.misses >= 2
    got = h.call(GetTrajectory, 'get_trajectory', trajectory_id=first)
    assert got.success
    assert got.trajectory.params_json in ('{"n":1}', '{"n": 1}')
    assert [s.index for s in got.trajectory.steps] == [0, 1, 2, 3]
    missing = h.call(GetTrajectory, 'get_trajectory', trajectory_id=123456)
    assert not missing.success and 'unknown trajectory' in missing.message
    assert not h.call(ListTasks, 'list_tasks', task='nope_task', with_steps=False).success
    before = snapshot_store(h)
    for fields, expected in (({'task': ''}, 'empty'), ({'task': 'nope_task'}, 'unknown task'),
                             ({'task': 'svc_forget', 'trajectory_id': 123456},
                              'unknown trajectory')):
        response = h.call(Forget, 'forget', **fields)
        assert not response.success and expected in response.message
    assert snapshot_store(h) == before
    one = h.call(Forget, 'forget', task='svc_forget', trajectory_id=first)
    assert one.success and one.removed == 1
    listing = h.call(ListTasks, 'list_tasks', task='svc_forget', with_steps=False)
    assert [t.id for t in listing.trajectories] == [second]
    # The forgotten one misses again; the other still replays.
    run = h.run_task('svc_forget', '{"n": 2}')
    assert run.result.cache_hit, run.result.message
    h.robot.reset()
    run = h.run_task('svc_forget', '{"n": 1}')
    assert not run.result.cache_hit
    everything = h.call(Forget, 'forget', task='svc_forget')
    assert everything.success and everything.removed == 2
    assert not h.call(Replay, 'replay', task='svc_forget', dry_run=True).success


def test_manual_recording_teaches_a_task(world):
    h = world
    assert not h.call(StopRecording, 'stop_recording', save=True).success
    assert not h.call(StartRecording, 'start_recording', task='', params_json='').success
    started = h.call(StartRecording, 'start_recording', task='svc_teach', params_json='')
    assert started.success, started.message
    again = h.call(StartRecording, 'start_recording', task='svc_teach2', params_json='')
    assert not again.success and 'busy' in again.message
    busy = h.run_task('svc_teach')
    assert not busy.result.success and 'already running' in busy.result.message
    # Teleop: goals sent through the proxies by hand (here: by the agent node's clients).
    assert h.agent.do('arm', [0.3, 0.3, 0.3])
    assert h.agent.do('gripper', False)
    stopped = h.call(StopRecording, 'stop_recording', save=True)
    assert stopped.success, stopped.message
    assert stopped.steps == 2
    assert stopped.trajectory_id > 0
    assert wait_until(lambda: h.events_of(CacheEvent.RECORDING_STOPPED, 'svc_teach'))
    h.robot.reset()
    calls = len(h.agent.calls)
    run = h.run_task('svc_teach')
    assert run.result.cache_hit, run.result.message
    assert run.result.trajectory_id == stopped.trajectory_id
    assert len(h.agent.calls) == calls
    assert h.robot.joints == [0.3, 0.3, 0.3]
    # A discarded recording stores nothing.
    before = snapshot_store(h)
    assert h.call(StartRecording, 'start_recording', task='svc_discard', params_json='').success
    assert h.agent.do('arm', [0.2, 0.2, 0.2])
    discarded = h.call(StopRecording, 'stop_recording', save=False)
    assert discarded.success and discarded.trajectory_id == 0 and discarded.steps == 1
    assert snapshot_store(h) == before


def test_replay_only_mode_never_calls_agent(world):
    h = world
    learn(h, 'svc_modes')
    assert h.set_mode('replay_only').successful
    calls = len(h.agent.calls)
    hit = h.run_task('svc_modes')
    assert hit.result.cache_hit, hit.result.message
    miss = h.run_task('svc_modes_unknown')
    assert miss.status == GoalStatus.STATUS_ABORTED
    assert not miss.result.success
    assert 'replay_only' in miss.result.message
    h.robot.reset()
    h.robot.move_object(FAR)
    diverged = h.run_task('svc_modes')
    assert not diverged.result.success and 'object' in diverged.result.message
    assert len(h.agent.calls) == calls


def test_record_only_mode_always_calls_agent(world):
    h = world
    tid = learn(h, 'svc_record')
    assert h.set_mode('record_only').successful
    calls = len(h.agent.calls)
    run = h.run_task('svc_record')
    assert run.result.success and not run.result.cache_hit
    assert run.result.steps_by_agent == 4
    assert len(h.agent.calls) == calls + 1
    assert h.agent.calls[-1].resume_from_step == 0
    # Recording the same execution again does not add a trajectory.
    assert run.result.trajectory_id == tid


def test_off_mode_passes_through_and_stores_nothing(world):
    h = world
    assert h.set_mode('off').successful
    before = snapshot_store(h)
    calls = len(h.agent.calls)
    arm = len(h.robot.arm_goals)
    run = h.run_task('svc_off')
    assert run.result.success and not run.result.cache_hit
    assert len(h.agent.calls) == calls + 1
    assert h.agent.calls[-1].resume_from_step == 0
    assert len(h.robot.arm_goals) == arm + 2
    assert snapshot_store(h) == before
    refused = h.call(Replay, 'replay', task='svc_off')
    assert not refused.success and 'off' in refused.message
    refused = h.call(StartRecording, 'start_recording', task='svc_off', params_json='')
    assert not refused.success and 'off' in refused.message


def test_bad_mode_is_refused(world):
    h = world
    result = h.set_mode('sometimes')
    assert not result.successful
    assert 'cache_mode' in result.reason
    learn(h, 'svc_mode_kept')
    run = h.run_task('svc_mode_kept')
    assert run.result.cache_hit


def test_diagnostics_report_hit_rate(world):
    from diagnostic_msgs.msg import DiagnosticArray
    h = world
    learn(h, 'svc_diag')
    assert h.run_task('svc_diag').result.cache_hit
    seen: list = []
    sub = h.client.create_subscription(DiagnosticArray, '/diagnostics', seen.append, 10,
                                       event_callbacks=DESTROYED_WHILE_SPINNING)
    try:
        assert wait_until(lambda: any(
            s.name.startswith(h.names.node) for a in seen for s in a.status), 5.0)
        status = next(s for a in seen for s in a.status if s.name.startswith(h.names.node))
        values = {kv.key: kv.value for kv in status.values}
        assert values['store'] == 'ok'
        assert float(values['hit_rate']) > 0.0
        assert int(values['steps_saved']) >= 4
        assert values['cache_mode'] == 'learn'
    finally:
        h.client.destroy_subscription(sub)
