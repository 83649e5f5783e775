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
Earning trust: shadow runs, the shadow:N and approval gates (real cache process, real DDS).

The test agent moves the arm to the object's x, y at step 2, so a moved object
changes its goal; the cache's object tolerance is 2 cm.
"""

from __future__ import annotations

import json

from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import Approve
from muscle_mem_ros.store import SqliteStore
from node_helpers import Harness, OBJECT_HOME, wait_feedback
from test_node_bindings import run, X


def _shadow_feedback(feedback: list) -> list[int]:
    return [f.step for f in feedback if f.mode == ExecuteTask.Feedback.MODE_SHADOW]


def _shadow_steps(h: Harness, task: str, count: int) -> list[CacheEvent]:
    return h.wait_events(CacheEvent.SHADOW_STEP, task, count=count)


def test_shadow_runs_agree_on_an_unchanged_world_and_name_the_field_when_not(tmp_path):
    h = Harness(tmp=tmp_path)
    try:
        h.start_cache(infer_bindings=False)
        run(h, 'watch')  # learned
        h.set_mode('shadow')
        result, called = run(h, 'watch')
        assert called and not result.result.cache_hit  # shadow never replays
        steps = _shadow_steps(h, 'watch', 4)
        assert 'shadow: 4 of 4 steps agreed' in result.result.message, result.result.message
        assert all('agreed with learned step' in e.detail for e in steps)
        shadowed = wait_feedback(  # feedback may arrive after the result
            result.feedback, lambda got: len(_shadow_feedback(got)) == 4, 'shadow feedback')
        assert _shadow_feedback(shadowed) == [0, 1, 2, 3]
        # the cube 1.2 cm away: within the check's tolerance, so a literal replay would pass,
        # and it would send the recorded x while the agent goes 1.2 cm further
        moved = (OBJECT_HOME[0] + 0.012, OBJECT_HOME[1], OBJECT_HOME[2])
        result, called = run(h, 'watch', obj=moved)
        assert called
        assert 'shadow: 2 of 4 steps agreed' in result.result.message, result.result.message
        assert f'step 2: {X} off by 0.012' in result.result.message
        events = _shadow_steps(h, 'watch', 8)[4:]
        assert 'went its own way at step 2' in events[3].detail
    finally:
        h.close()
    with SqliteStore(path=tmp_path / 'cache.db') as store:
        counts = store.agreement(task='watch')[0].values()  # per trajectory it followed
        assert (sum(c.runs for c in counts), sum(c.agreed for c in counts)) == (2, 1)


def test_shadow_gate_runs_in_shadow_until_enough_runs_agreed(tmp_path):
    h = Harness(tmp=tmp_path)
    try:
        h.start_cache(replay_requires='shadow:2')
        run(h, 'gated')
        for more in (2, 1):
            result, called = run(h, 'gated')
            assert called, 'a gated trajectory never replays'
            assert f'needs {more} more agreeing shadow run' in h.agent.calls[-1].resume_reason
            assert 'steps agreed' in result.result.message
        result, called = run(h, 'gated')
        assert not called and result.result.cache_hit, result.result.message
    finally:
        h.close()


def test_approval_gate_through_the_service_across_a_restart(tmp_path):
    h = Harness(tmp=tmp_path)
    try:
        h.start_cache(replay_requires='approval')
        run(h, 'approve_me')
        _, called = run(h, 'approve_me')
        assert called and 'is not approved' in h.agent.calls[-1].resume_reason
        bad = h.call(Approve, 'approve', task='approve_me')
        assert not bad.success and 'who' in bad.message
        unknown = h.call(Approve, 'approve', task='nothing', who='ops')
        assert not unknown.success and 'unknown task' in unknown.message
        ok = h.call(Approve, 'approve', task='approve_me', who='ops')
        assert ok.success, ok.message
        h.stop_cache()
        h.start_cache(replay_requires='approval')
        result, called = run(h, 'approve_me')
        assert not called and result.result.cache_hit, result.result.message
        gone = h.call(Approve, 'approve', task='approve_me', revoke=True)
        assert gone.success, gone.message
        _, called = run(h, 'approve_me')
        assert called
    finally:
        h.close()
    with SqliteStore(path=tmp_path / 'cache.db') as store:
        assert store.approvals(task='approve_me') == []


def test_approval_through_the_command_and_what_tree_and_trust_show(tmp_path, capsys):
    from muscle_mem_ros.cli import main
    h = Harness(tmp=tmp_path)
    store = str(tmp_path / 'cache.db')
    try:
        h.start_cache(replay_requires='approval')
        run(h, 'by_cli')
        h.stop_cache()
        assert main(['approve', store, 'by_cli', '--trajectory', '99']) == 1
        assert main(['approve', store, 'by_cli', '--who', 'alice']) == 0
        assert main(['trust', store, 'by_cli']) == 0
        assert 'alice' in capsys.readouterr().out
        h.start_cache(replay_requires='approval')
        result, called = run(h, 'by_cli')
        assert not called and result.result.cache_hit, result.result.message
        h.set_mode('shadow')
        run(h, 'by_cli')
        h.stop_cache()
        assert main(['tree', store, 'by_cli']) == 0
        assert 'shadow 1/1 agreed, approved by alice' in capsys.readouterr().out
        assert main(['stats', store, '--json']) == 0
        stats = json.loads(capsys.readouterr().out)
        assert (stats['shadow_runs'], stats['shadow_agreed'], stats['approvals']) == (1, 1, 1)
        assert main(['revoke', store, 'by_cli']) == 0
        assert main(['revoke', store, 'by_cli']) == 1  # nothing left to revoke
    finally:
        h.close()
