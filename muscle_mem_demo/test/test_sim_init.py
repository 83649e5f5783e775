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
``muscle-mem init`` on the demo robot: the sim arm and the demo agent, then the cache.

On a ROS domain of their own: the sim robot and the demo agent (its clients pointed at the
proxies ``init`` names: ``/muscle_mem<server>``) start; ``muscle-mem init`` writes the file
from the graph; the cache starts with that file, unedited; pick_and_place is learned from
the agent, then, after a reset, replayed with no agent call.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.matching import AgentSeen
import pytest
import rclpy
from sim_helpers import NodeProcess, SimClient, unique_namespace
import yaml


@pytest.fixture(scope='module')
def world(tmp_path_factory):
    logs = tmp_path_factory.mktemp('init_sim')
    before = os.environ.get('ROS_DOMAIN_ID')
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(120, 200))
    namespace = unique_namespace()
    proxies = f'/muscle_mem{namespace}'
    robot = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                        params={'rtf': 4.0}, log_dir=logs)
    agent = NodeProcess('muscle_mem_demo.agent_node', namespace=namespace, params={
        'think_time': 0.02,
        'arm_action': f'{proxies}/arm/follow_joint_trajectory',
        'pose_action': f'{proxies}/arm/move_to_pose',
        'gripper_action': f'{proxies}/gripper/gripper_cmd',
    }, log_dir=logs)
    rclpy.init()
    client = SimClient(namespace)
    client.logs, client.proxies, client.namespace = logs, proxies, namespace
    client.processes = [agent, robot]
    try:
        client.wait_robot()
        client.wait_agent()
        yield client
    finally:
        for process in client.processes:
            process.stop()
        client.close()
        rclpy.try_shutdown()
        if before is None:
            os.environ.pop('ROS_DOMAIN_ID')
        else:
            os.environ['ROS_DOMAIN_ID'] = before


def test_init_on_the_sim_arm_learns_and_replays_pick_and_place(world):
    world.reset()
    path = world.logs / 'arm.yaml'
    done = subprocess.run(
        [sys.executable, '-m', 'muscle_mem_ros.cli', 'init', str(path),
         '--store', str(world.logs / 'cache.db'), '--duration', '2'],
        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    text = path.read_text()
    params = yaml.safe_load(text)['muscle_mem']['ros__parameters']
    ns = world.namespace
    assert params['agent_action'] == f'{ns}/demo_agent/execute_task', text
    sensors = {s['topic']: s for s in params['sensors'].values() if 'topic' in s}
    assert {f'{ns}/joint_states', f'{ns}/object_pose'} <= set(sensors), text
    assert len(sensors[f'{ns}/joint_states']['joints']) >= 7, text
    servers = {t['server'] for t in params['actions'].values()}
    assert {f'{ns}/arm/follow_joint_trajectory', f'{ns}/arm/move_to_pose',
            f'{ns}/gripper/gripper_cmd'} <= servers, text

    cache = NodeProcess('muscle_mem_ros.ros.node.main', namespace='/', params={},
                        log_dir=world.logs, ros_args=['--params-file', str(path)])
    world.processes.insert(1, cache)
    seen = AgentSeen(world, '/muscle_mem')
    client = ActionClient(world, ExecuteTask, '/muscle_mem/execute_task')
    world.wait_for(client.server_is_ready, 60.0, 'the cache')
    assert seen.wait(60.0), f'the cache did not discover the agent:\n{cache.log()}'

    def run():
        handle = world.result_of(client.send_goal_async(ExecuteTask.Goal(task='pick_and_place')))
        assert handle.accepted
        return world.result_of(handle.get_result_async(), 180.0).result

    learned = run()
    assert learned.success and not learned.cache_hit, learned.message + cache.log()[-3000:]
    assert learned.steps_by_agent >= 6
    world.reset()
    replayed = run()
    assert replayed.success and replayed.cache_hit, replayed.message + cache.log()[-3000:]
    assert replayed.steps_by_agent == 0 and replayed.steps_replayed == learned.steps_by_agent
