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

"""The demo agent against the sim robot directly (no cache), over real DDS."""

from __future__ import annotations

import json
import math

from action_msgs.msg import GoalStatus
from muscle_mem_demo.physics import OBJECT_START
from muscle_mem_demo.story import PLACE_TARGET
from muscle_mem_interfaces.action import ExecuteTask
import pytest
import rclpy
from sim_helpers import assert_bad_parameter, NodeProcess, SimClient, unique_namespace


@pytest.fixture(scope='module')
def world(tmp_path_factory):
    namespace = unique_namespace()
    logs = tmp_path_factory.mktemp('logs')
    robot = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                        params={'rtf': 4.0}, log_dir=logs)
    agent = NodeProcess('muscle_mem_demo.agent_node', namespace=namespace,
                        params={'think_time': 0.02}, log_dir=logs)
    rclpy.init()
    client = SimClient(namespace)
    try:
        client.wait_robot()
        client.wait_agent()
        yield client
    finally:
        agent.stop()  # first: no message may arrive while the client is destroyed
        robot.stop()
        client.close()
        rclpy.try_shutdown()
        print(agent.log())


@pytest.fixture
def sim(world):
    world.reset()
    with world.lock:
        world.calls.clear()
    return world


def placed_at(position, target, tolerance=0.02) -> bool:
    return math.hypot(position[0] - target[0], position[1] - target[1]) <= tolerance and (
        position[2] < 0.03)


def announced(sim) -> list[dict]:
    sim.wait_for(lambda: sum('"end"' in c for c in sim.calls) >= 1, 5.0, 'the end announcement')
    with sim.lock:
        return [json.loads(c) for c in sim.calls]


def test_pick_and_place_from_home_is_eight_steps_and_places_the_object(sim):
    feedback: list = []
    result = sim.run_task(feedback=feedback)
    assert result.success, result.message
    assert result.steps_by_agent == 8 and result.steps_replayed == 0
    assert not result.cache_hit
    assert placed_at(sim.object_position(), PLACE_TARGET)
    # feedback travels on a topic, the result on a service: the last ones may trail the result
    feedback = sim.wait_feedback(feedback, lambda fbs: {f.step for f in fbs} >= set(range(8)),
                                 'feedback for steps 0-7')
    assert sorted({f.step for f in feedback}) == list(range(8))
    assert all(f.mode == f.MODE_AGENT and f.total == -1 for f in feedback)
    calls = announced(sim)
    assert [c['event'] for c in calls] == ['start', 'end']
    assert calls[0]['resume_from_step'] == 0 and calls[1]['steps'] == 8
    assert calls[1]['success'] is True


def test_resume_numbers_steps_from_the_resume_point_and_plans_from_the_state(sim):
    feedback: list = []
    result = sim.run_task(resume_from_step=3, feedback=feedback)
    assert result.success, result.message
    # the arm is at home and the object at its start: the whole task is still to do
    assert result.steps_by_agent == 8
    feedback = sim.wait_feedback(feedback, lambda fbs: 10 in {f.step for f in fbs},
                                 'feedback for the last step')
    assert sorted({f.step for f in feedback}) == list(range(3, 11))
    assert announced(sim)[0]['resume_from_step'] == 3


def test_an_object_bumped_mid_task_is_followed(sim):
    assert sim.move_object((0.45, 0.02, 0.02), after_goals=1).success
    result = sim.run_task()
    assert result.success, result.message
    assert result.steps_by_agent == 9  # above the old spot, then above the new one, ...
    assert placed_at(sim.object_position(), PLACE_TARGET)


def test_place_target_from_the_task_params(sim):
    result = sim.run_task(params_json='{"place": [0.45, 0.1]}')
    assert result.success, result.message
    assert placed_at(sim.object_position(), (0.45, 0.1))


@pytest.mark.parametrize('task, params, match', [
    ('fly_to_the_moon', '', 'unknown task'),
    ('pick_and_place', '{not json', 'not JSON'),
    ('pick_and_place', '[1, 2]', 'JSON object'),
    ('pick_and_place', '{"place": [3.0, 0.0]}', 'within reach'),
    ('place', '{"place": [0.4, -0.3]}', 'not held'),
])
def test_bad_tasks_fail_with_a_reason_and_move_nothing(sim, task, params, match):
    result = sim.run_task(task, params_json=params)
    assert not result.success
    assert match in result.message
    assert result.steps_by_agent == 0
    assert sim.object_position() == pytest.approx(OBJECT_START, abs=2e-3)


def test_pick_then_place_are_the_pick_and_place_in_two_tasks(sim):
    result = sim.run_task('pick')
    assert result.success, result.message
    assert result.steps_by_agent == 4
    x, y, z = sim.object_position()
    assert math.hypot(x - OBJECT_START[0], y - OBJECT_START[1]) < 0.02 and z > 0.12  # held up
    result = sim.run_task('place', params_json='{"place": [0.45, 0.1]}')
    assert result.success, result.message
    assert result.steps_by_agent == 4
    assert placed_at(sim.object_position(), (0.45, 0.1))
    calls = announced(sim)
    assert [(c['event'], c['task']) for c in calls] == [
        ('start', 'pick'), ('end', 'pick'), ('start', 'place'), ('end', 'place')]


def test_a_second_task_while_one_runs_and_waits_for_no_subtask_is_rejected(sim):
    first = sim.result_of(sim.agent.send_goal_async(ExecuteTask.Goal(task='pick_and_place')))
    assert first.accepted
    second = sim.result_of(sim.agent.send_goal_async(ExecuteTask.Goal(task='pick')))
    assert not second.accepted
    assert sim.result_of(first.get_result_async(), 60.0).result.success


@pytest.mark.parametrize('param, value', [('think_time', '-1.0'), ('max_steps', '0'),
                                          ('place_x', '5.0'), ('arm_action', "''"),
                                          ('pose_action', "''")])
def test_bad_agent_parameters_stop_it_naming_the_parameter(param, value):
    assert_bad_parameter('muscle_mem_demo.agent_node', param, value)


def test_cancel_stops_the_task_and_the_arm(sim):
    feedback: list = []
    handle = sim.result_of(sim.agent.send_goal_async(
        ExecuteTask.Goal(task='pick_and_place'),
        feedback_callback=lambda fb: feedback.append(fb.feedback)))
    assert handle.accepted
    sim.wait_for(lambda: any(f.detail.startswith('step 1: descend') for f in feedback),
                 what='the agent to start step 1')
    sim.result_of(handle.cancel_goal_async())
    response = sim.result_of(handle.get_result_async())
    assert response.status == GoalStatus.STATUS_CANCELED
    assert response.result.steps_by_agent < 8
    first = sim.wait_fresh()[0].position[:7]
    second = sim.wait_fresh(sim.now_ns() + 300_000_000)[0].position[:7]
    assert second == pytest.approx(first, abs=0.01)
    # the agent takes the next task
    sim.reset()
    assert sim.run_task().success
