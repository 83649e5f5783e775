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

"""The subtask step and its rules, without ROS (muscle_mem_ros.replay.subtasks)."""

from __future__ import annotations

import json

from muscle_mem_ros.bindings.rules import bindable_leaves, goal_leaves
from muscle_mem_ros.errors import MuscleMemError
from muscle_mem_ros.records import Snapshot, Step, ToolKind
from muscle_mem_ros.replay.subtasks import (
    MAX_DEPTH, refusal, subtask_call, subtask_step, SUBTASK_TYPE,
)
import pytest


def _step(params):
    return subtask_step('place', params, pre=Snapshot({'base': (0.0, 1.0)}), post=None,
                        duration=2.5)


def test_a_call_is_one_step_whose_goal_is_its_name_and_parameters():
    step = _step({'shelf': [1.8, 0.9], 'slot': 'b'})
    assert (step.tool, step.kind, step.type_name) == ('place', ToolKind.SUBTASK, SUBTASK_TYPE)
    assert step.payload == step.payload_json.encode()
    assert json.loads(step.payload_json) == {'params': {'shelf': [1.8, 0.9], 'slot': 'b'},
                                             'task': 'place'}
    assert _step({'slot': 'b', 'shelf': [1.8, 0.9]}).payload == step.payload  # canonical
    assert goal_leaves(step) == {'params.shelf[0]': 1.8, 'params.shelf[1]': 0.9,
                                 'params.slot': 'b', 'task': 'place'}
    assert 'task' not in bindable_leaves(step)  # which skill is called never binds
    assert bindable_leaves(step)['params.shelf[1]'] == 0.9


def test_a_call_runs_its_recorded_parameters_with_bound_leaves_set():
    step = _step({'shelf': [1.8, 0.9], 'n': {'k': 1}})
    call = subtask_call(step)
    assert (call.task, call.params) == ('place', {'shelf': [1.8, 0.9], 'n': {'k': 1}})
    call = subtask_call(step, {'params.shelf[1]': 1.5, 'params.n.k': 2})
    assert call.params == {'shelf': [1.8, 1.5], 'n': {'k': 2}}
    assert call.params_json == '{"n":{"k":2},"shelf":[1.8,1.5]}'
    assert subtask_call(step).params['shelf'][1] == 0.9  # the step itself is unchanged
    for missing in ('params.shelf[2]', 'params.other', 'params.n.k.z', 'nothing'):
        with pytest.raises(MuscleMemError, match='no field'):
            subtask_call(step, {missing: 1})


def test_a_step_that_is_not_a_call_is_refused_with_its_payload():
    bad = Step(tool='place', kind=ToolKind.SUBTASK, type_name=SUBTASK_TYPE, payload=b'\x00\x01')
    with pytest.raises(MuscleMemError, match='not a subtask call'):
        subtask_call(bad)
    listed = Step(tool='place', kind=ToolKind.SUBTASK, type_name=SUBTASK_TYPE,
                  payload=b'{"task": "place", "params": [1]}')
    with pytest.raises(MuscleMemError, match='not a subtask call'):
        subtask_call(listed)


def test_recursion_and_depth_are_refused_naming_the_chain():
    assert refusal(['restock'], 'pick') == ''
    assert 'may not call itself' in refusal(['restock'], 'restock')
    assert 'restock > pick > restock' in refusal(['restock', 'pick'], 'restock')
    chain = [f't{i}' for i in range(MAX_DEPTH)]
    assert refusal(chain, 'last') == ''  # a subtask at depth MAX_DEPTH, the deepest
    assert f'at most {MAX_DEPTH} deep' in refusal([*chain, 'one more'], 'last')
