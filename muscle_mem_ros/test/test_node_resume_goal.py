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

"""The walk's Resume record to and from the ExecuteTask goal (messages/convert.py, one place)."""

from __future__ import annotations

from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros import FailureKind, Resume
from muscle_mem_ros.ros.messages.convert import resume_goal, resume_of


def test_resume_goal_and_back():
    resume = Resume(2, 'pre-check failed at step 2: sensor object deviates 0.2',
                    ('arm', 'gripper'), FailureKind.PRE_CHECK, 7)
    goal = resume_goal(task='pick', params_json='{"bin": 3}', resume=resume)
    assert (goal.task, goal.params_json) == ('pick', '{"bin": 3}')
    assert (goal.resume_from_step, goal.steps_done) == (2, 2)
    assert goal.resume_reason == resume.reason
    back = resume_of(goal)
    assert back is not None
    assert (back.step, back.reason, back.steps_done) == (2, resume.reason, 2)


def test_a_goal_from_the_beginning_has_no_resume_point():
    assert resume_of(ExecuteTask.Goal(task='pick')) is None
    start = resume_goal(task='pick', params_json='', resume=Resume(0, ''))
    assert (start.resume_from_step, start.steps_done, start.resume_reason) == (0, 0, '')
