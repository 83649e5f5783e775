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
A tool's success rule: a "no" inside a result is not learned, and fails a replayed step.

Real cache process, fake robot and agent (node_helpers) over DDS. The rule on the
Fibonacci action, ``sequence`` must be ``empty``, makes every Fibonacci result a
refusal, as ``nav_msgs/srv/GetPlan``'s empty plan is one.
"""

from __future__ import annotations

from action_msgs.msg import GoalStatus
from muscle_mem_interfaces.srv import ListTasks
from node_helpers import Harness
import pytest

RULE = {'actions.fib.success_field': 'sequence', 'actions.fib.success_when': 'empty'}


@pytest.fixture(scope='module')
def h(tmp_path_factory):
    h = Harness(tmp=tmp_path_factory.mktemp('success_rule'))
    yield h
    h.close()


def tools_learned(h: Harness, task: str) -> list[str]:
    listing = h.call(ListTasks, 'list_tasks', task=task, with_steps=True)
    (trajectory,) = listing.trajectories
    return [s.tool for s in trajectory.steps]


def test_a_result_that_breaks_the_rule_is_passed_on_but_not_learned(h):
    h.start_cache(**RULE)
    h.robot.reset()
    run = h.run_task('rule_learn')
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message  # transparent
    assert h.robot.fib_goals, 'the agent counted through the proxy'
    assert tools_learned(h, 'rule_learn') == [h.names.arm, h.names.gripper, h.names.arm]
    h.stop_cache()


def test_a_replayed_step_whose_result_breaks_the_rule_hands_off(h):
    h.start_cache()
    h.robot.reset()
    assert not h.run_task('rule_replay').result.cache_hit  # learned without a rule
    assert tools_learned(h, 'rule_replay')[-1] == h.names.fib
    h.stop_cache()
    h.start_cache(**RULE)
    h.robot.reset()
    calls = len(h.agent.calls)
    run = h.run_task('rule_replay')
    assert run.status == GoalStatus.STATUS_SUCCEEDED and not run.result.cache_hit
    assert run.result.steps_replayed == 3
    assert len(h.agent.calls) == calls + 1
    reason = h.agent.calls[-1].resume_reason
    assert h.agent.calls[-1].resume_from_step == 3
    assert 'sequence is not empty' in reason, reason
    h.stop_cache()
