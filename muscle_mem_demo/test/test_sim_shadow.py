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
Shadow runs with the demo agent on the MuJoCo arm.

The cache learns pick_and_place once with bindings off, then runs in ``cache_mode:
shadow``: the agent does every task and the cache compares each of its goals with what
it would have sent. On an unchanged world all 8 steps agree; with the cube 1.5 cm away
(within the object's 2 cm tolerance, so a literal replay would pass its checks) the
cache would have sent the recorded x to the first move, and the disagreement names that
field and the difference.
"""

from __future__ import annotations

import json
import re

from muscle_mem_demo.story import PLACE_TARGET
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.matching import AgentSeen
from muscle_mem_ros.store import SqliteStore
import pytest
import rclpy
from sim_helpers import NodeProcess, SimClient, unique_namespace
from test_sim_bindings import _cache_params
import yaml

PARAMS = json.dumps({'place': list(PLACE_TARGET)})
HOME = (0.40, 0.20)


@pytest.fixture(scope='module')
def world(tmp_path_factory):
    namespace = unique_namespace()
    logs = tmp_path_factory.mktemp('logs')
    params = _cache_params(namespace, str(logs / 'cache.db'))
    params['/**']['ros__parameters']['infer_bindings'] = False
    params_file = logs / 'cache.yaml'
    params_file.write_text(yaml.safe_dump(params))
    proxies = f'{namespace}/muscle_mem'
    robot = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                        params={'rtf': 4.0}, log_dir=logs)
    cache = NodeProcess('muscle_mem_ros.ros.node.main', namespace=namespace, params={},
                        log_dir=logs, ros_args=['--params-file', str(params_file)])
    agent = NodeProcess('muscle_mem_demo.agent_node', namespace=namespace, params={
        'think_time': 0.02,
        'arm_action': f'{proxies}/arm/follow_joint_trajectory',
        'pose_action': f'{proxies}/arm/move_to_pose',
        'gripper_action': f'{proxies}/gripper/gripper_cmd',
    }, log_dir=logs)
    rclpy.init()
    client = SimClient(namespace)
    client.cache = ActionClient(client, ExecuteTask, f'{proxies}/execute_task')
    client.proxies, client.store = proxies, logs / 'cache.db'
    cache_sees_agent = AgentSeen(client, proxies)
    try:
        client.wait_robot()
        client.wait_agent()
        client.wait_for(client.cache.server_is_ready, 60.0, 'the cache')
        assert cache_sees_agent.wait(60.0), f'the cache did not discover the agent:\n{cache.log()}'
        yield client
    finally:
        agent.stop()
        cache.stop()
        robot.stop()
        client.close()
        rclpy.try_shutdown()


def run_at(sim, spot):
    sim.reset()
    assert sim.move_object((spot[0], spot[1], 0.02)).success
    sim.wait_fresh(sim.now_ns())
    goal = ExecuteTask.Goal(task='pick_and_place', params_json=PARAMS)
    handle = sim.result_of(sim.cache.send_goal_async(goal))
    assert handle.accepted
    return sim.result_of(handle.get_result_async(), 120.0).result


def set_mode(sim, mode: str) -> None:
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    client = sim.create_client(SetParameters, f'{sim.proxies}/set_parameters')
    value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=mode)
    answer = sim.call(client, SetParameters.Request(
        parameters=[Parameter(name='cache_mode', value=value)]))
    assert answer.results[0].successful, answer.results[0].reason


def test_shadow_agrees_on_an_unchanged_world_and_names_the_field_when_the_cube_moved(world):
    learned = run_at(world, HOME)
    assert learned.success and learned.steps_by_agent == 8, learned.message
    set_mode(world, 'shadow')
    same = run_at(world, HOME)
    assert same.success and not same.cache_hit and same.steps_by_agent == 8, same.message
    assert 'shadow: 8 of 8 steps agreed' in same.message, same.message
    moved = run_at(world, (HOME[0] + 0.015, HOME[1]))
    assert moved.success and not moved.cache_hit, moved.message
    found = re.search(r'step 0: target\.pose\.position\.x off by ([0-9.e-]+)', moved.message)
    assert found, moved.message
    assert float(found[1]) == pytest.approx(0.015, abs=0.002)
    # each shadow run counts once, for the trajectory the cache would have followed (the
    # agent's runs are learned too: which one that is depends on how the sim settled)
    with SqliteStore(path=world.store) as store:
        counts = store.agreement(task='pick_and_place')[0].values()
    assert (sum(c.runs for c in counts), sum(c.agreed for c in counts)) == (2, 1)
