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
A gate holds on every path that sends learned goals, on the mobile picker (mobile_helpers).

``replay_requires: approval``: the Replay service and its dry run ask the same gate as
ExecuteTask; ``cache_mode: shadow`` replays nothing, not through Replay either; an
approval covers what its approver could see, so a trajectory learned after it, or a
binding inferred on an approved trajectory after it, is held back and the reason names
it. Real cache process, DDS; the base moves only when a goto reaches the robot
(``MobileRobot.gotos``).
"""

from __future__ import annotations

import json
import re

from action_msgs.msg import GoalStatus
from mobile_helpers import MobileHarness, TAG_HOME
from muscle_mem_interfaces.srv import Approve, Replay
from muscle_mem_ros.cli import main
import pytest


@pytest.fixture(scope='module')
def h(tmp_path_factory):
    h = MobileHarness(tmp=tmp_path_factory.mktemp('gates'))
    h.start_cache(replay_requires='approval')
    yield h
    h.close()


def fetch(h: MobileHarness, task: str, bin_: int):
    """Reset the world and fetch; return (the result, whether the agent was called)."""
    h.robot.reset()
    calls = len(h.agent.calls)
    run = h.run_task(task, json.dumps({'bin': bin_}))
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    return run.result, len(h.agent.calls) > calls


def replay(h: MobileHarness, task: str, *, dry_run: bool, **fields):
    """Call ~/replay from the learned world; return (the response, gotos it sent)."""
    h.robot.reset()
    before = len(h.robot.gotos)
    response = h.call(Replay, 'replay', task=task, params_json=json.dumps({'bin': 1}),
                      dry_run=dry_run, **fields)
    return response, len(h.robot.gotos) - before


def test_replay_and_its_dry_run_ask_the_gate_and_move_nothing_unapproved(h):
    learned, called = fetch(h, 'held', 1)
    assert called
    tid = learned.trajectory_id
    held = f'gate: trajectory {tid} is not approved (replay_requires: approval)'
    dry, moved = replay(h, 'held', dry_run=True)
    assert not dry.success and dry.message == held and moved == 0
    done, moved = replay(h, 'held', dry_run=False)
    assert not done.success and done.message == held, done.message
    assert moved == 0 and done.steps_executed == 0  # the base never left
    by_id, moved = replay(h, 'held', dry_run=False, trajectory_id=tid)
    assert not by_id.success and by_id.message == held and moved == 0
    ok = h.call(Approve, 'approve', task='held', who='ops')
    assert ok.success and f'covers trajectory {tid}' in ok.message, ok.message
    dry, _ = replay(h, 'held', dry_run=True)
    assert dry.success, dry.message
    done, moved = replay(h, 'held', dry_run=False)
    assert done.success and moved == 2, done.message  # approved: the same call replays


def test_in_shadow_mode_replay_moves_nothing_even_approved(h):
    _, called = fetch(h, 'shadowed', 1)
    assert called
    assert h.call(Approve, 'approve', task='shadowed', who='ops').success
    assert h.set_mode('shadow').successful
    try:
        for dry_run in (True, False):
            response, moved = replay(h, 'shadowed', dry_run=dry_run)
            assert not response.success and moved == 0
            assert response.message.startswith('cache_mode is shadow: nothing is replayed'), \
                response.message
    finally:
        assert h.set_mode('learn').successful
    response, moved = replay(h, 'shadowed', dry_run=False)
    assert response.success and moved == 2, response.message


def test_a_trajectory_learned_after_the_task_was_approved_is_held_naming_it(h, capsys):
    store = str(h.tmp / 'cache.db')
    first, _ = fetch(h, 'grows', 1)
    approved = h.call(Approve, 'approve', task='grows', who='carol')
    assert approved.success, approved.message
    result, called = fetch(h, 'grows', 1)
    assert not called and result.cache_hit, result.message
    later, called = fetch(h, 'grows', 2)  # another shelf: a trajectory nobody reviewed
    assert called and later.trajectory_id != first.trajectory_id
    tid = later.trajectory_id
    result, called = fetch(h, 'grows', 2)
    assert called and not result.cache_hit, 'replayed a trajectory learned after the approval'
    reason = h.agent.calls[-1].resume_reason
    assert f"gate: trajectory {tid} was learned after carol's approval of task grows (" \
        in reason, reason
    assert '); approve it' in reason
    by_id = h.call(Replay, 'replay', task='grows', trajectory_id=tid, dry_run=True)
    assert not by_id.success and f'trajectory {tid} was learned after carol' in by_id.message
    assert main(['trust', store, 'grows', '--json']) == 0
    rows = {r['trajectory']: r for r in json.loads(capsys.readouterr().out)}
    assert rows[first.trajectory_id]['approved_by'] == 'carol'
    assert rows[tid]['approved_by'] == ''  # not shown approved by carol's earlier approval
    # the command records coverage as the service does: this trajectory, nothing else; it
    # sees the declared bindings (the standoff's, on the tag) only in the params file
    assert main(['approve', store, 'grows', '--trajectory', str(tid), '--who', 'dave',
                 '--json']) == 0
    own = json.loads(capsys.readouterr().out)
    assert (own['who'], own['covers']) == ('dave', [tid])
    result, called = fetch(h, 'grows', 2)
    assert called and not result.cache_hit, 'replayed declared bindings nobody saw'
    reason = h.agent.calls[-1].resume_reason
    assert re.search(r'the declared binding goal.pose.position.x <- sensor:tag\[0\] \(max_shift '
                     rf'0.1\) on learned step \d+ of trajectory {tid} is not among those '
                     r"dave's approval", reason), reason
    assert main(['approve', store, 'grows', '--trajectory', str(tid), '--who', 'dave',
                 '--params', str(h.tmp / 'params.yaml'), '--node-name', h.names.node]) == 0
    result, called = fetch(h, 'grows', 2)
    assert not called and result.cache_hit, result.message


def test_a_binding_inferred_on_an_approved_trajectory_after_the_approval_is_held(tmp_path):
    """No declared bindings: the standoff's x and y follow the tag from the second recording."""
    h = MobileHarness(tmp=tmp_path)
    try:
        h.start_cache(replay_requires='approval', bindings=None)

        def standoff(tag):
            h.robot.reset(tag)
            calls = len(h.agent.calls)
            run = h.run_task('standoff', json.dumps({'bin': 1}))
            assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
            return run.result, len(h.agent.calls) > calls
        first, _ = standoff(TAG_HOME)
        approved = h.call(Approve, 'approve', task='standoff', who='carol')
        assert approved.success and 'sensor:tag' not in approved.message, approved.message
        standoff((TAG_HOME[0] + 0.06, TAG_HOME[1] - 0.04))  # a second recording: the tag
        result, called = standoff(TAG_HOME)  # the world of the approved trajectory
        assert called and not result.cache_hit, 'replayed a binding nobody approved'
        reason = h.agent.calls[-1].resume_reason
        assert (f'the inferred binding goal.pose.position.x <- sensor:tag[0] of trajectory '
                f"{first.trajectory_id} was learned after carol's approval of task standoff (") \
            in reason, reason
        again = h.call(Approve, 'approve', task='standoff', who='carol')
        assert 'goal.pose.position.x <- sensor:tag[0]' in again.message, again.message
        result, called = standoff(TAG_HOME)
        assert not called and result.cache_hit, h.agent.calls[-1].resume_reason  # reviewed
    finally:
        h.close()
