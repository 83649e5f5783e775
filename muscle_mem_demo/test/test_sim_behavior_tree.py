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
From cache to code on the demo arm: a learned task exported as a behavior tree, run with no cache.

The sim robot, the behavior cache and the demo agent run as real processes. The cache
learns pick_and_place once (the demo's params file: the cube goals and the place target
are declared bindings). Then the cache is stopped, the task exported
(``muscle-mem export --bt py_trees``) and run by ``muscle-mem run-bt`` against the
robot's own servers: at the learned spot, at a spot 6 cm away (bindings), with the place
target edited in the file, and beyond the bindings' range, where the tree hands the task
to the agent (now talking to the robot directly) from the step it reached.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
import subprocess
import sys

from muscle_mem_demo.processes import config_path
from muscle_mem_demo.story import PLACE_TARGET
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.matching import AgentSeen
import pytest
import rclpy
from sim_helpers import (
    namespaced_sensors, NodeProcess, SimClient, tf_remaps, unique_namespace,
)
import yaml

PARAMS = json.dumps({'place': list(PLACE_TARGET)})
LEARNED = (0.40, 0.20)
NEAR = (0.44, 0.245)  # 6 cm away
FAR = (0.25, 0.20)  # 15 cm in x: beyond max_shift 0.1
EDITED_PLACE = (0.32, -0.26)


def _params(namespace: str, store: str) -> dict:
    """Return the demo's cache parameters in ``namespace``: its sensors, tools and bindings."""
    demo = yaml.safe_load(config_path('sim_demo.yaml').read_text())
    params = dict(demo['muscle_mem']['ros__parameters'])
    params['store_path'] = store
    params['agent_action'] = f'{namespace}/demo_agent/execute_task'
    namespaced_sensors(params, namespace)
    for group in ('actions', 'services'):
        for tool in params.get(group, {}).values():
            tool['server'] = namespace + tool['server']
            tool['proxy'] = namespace + tool['proxy']
    return {'/**': {'ros__parameters': params}}


def _agent(namespace: str, logs: Path, prefix: str) -> NodeProcess:
    return NodeProcess('muscle_mem_demo.agent_node', namespace=namespace, params={
        'think_time': 0.02,
        'arm_action': f'{prefix}/arm/follow_joint_trajectory',
        'pose_action': f'{prefix}/arm/move_to_pose',
        'gripper_action': f'{prefix}/gripper/gripper_cmd',
    }, log_dir=logs)


@pytest.fixture(scope='module')
def world(tmp_path_factory):
    namespace = unique_namespace()
    logs = tmp_path_factory.mktemp('logs')
    params_file = logs / 'robot.yaml'
    params_file.write_text(yaml.safe_dump(_params(namespace, str(logs / 'cache.db'))))
    proxies = f'{namespace}/muscle_mem'
    robot = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                        params={'rtf': 4.0}, log_dir=logs)
    cache = NodeProcess('muscle_mem_ros.ros.node.main', namespace=namespace, params={},
                        log_dir=logs, ros_args=['--params-file', str(params_file),
                                                *tf_remaps(namespace)])
    agent = _agent(namespace, logs, proxies)
    rclpy.init()
    client = SimClient(namespace)
    client.cache = ActionClient(client, ExecuteTask, f'{proxies}/execute_task')
    cache_sees_agent = AgentSeen(client, proxies)
    try:
        client.wait_robot()
        client.wait_agent()
        client.wait_for(client.cache.server_is_ready, 60.0, 'the cache')
        assert cache_sees_agent.wait(60.0), f'the cache did not discover the agent:\n{cache.log()}'
        put(client, LEARNED)
        goal = ExecuteTask.Goal(task='pick_and_place', params_json=PARAMS)
        handle = client.result_of(client.cache.send_goal_async(goal))
        result = client.result_of(handle.get_result_async(), 120.0).result
        assert result.success and result.steps_by_agent == 8, result.message
        cache.stop()  # from here on: no cache, no proxies
        agent.stop()
        agent = _agent(namespace, logs, namespace)  # the agent now calls the robot itself
        client.wait_agent()
        client.namespace, client.logs, client.params_file = namespace, logs, params_file
        tree = logs / 'pick_and_place.bt.yaml'
        done = subprocess.run(
            [sys.executable, '-m', 'muscle_mem_ros.cli', 'export', str(logs / 'cache.db'),
             'pick_and_place', '--bt', 'py_trees', '--out', str(tree),
             '--params', str(params_file)],
            capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        client.tree = tree
        yield client
    finally:
        agent.stop()
        cache.stop()
        robot.stop()
        client.close()
        rclpy.try_shutdown()


def put(sim, spot) -> None:
    sim.reset()
    assert sim.move_object((spot[0], spot[1], 0.02)).success
    sim.wait_fresh(sim.now_ns())


def run_bt(sim, tree: Path, spot) -> tuple[subprocess.CompletedProcess, tuple]:
    """Put the cube at ``spot`` and run the tree with no cache; return (the run, the cube)."""
    put(sim, spot)
    done = subprocess.run(
        [sys.executable, '-m', 'muscle_mem_ros.cli', 'run-bt', str(tree), '--ros-args',
         '-r', f'__ns:={sim.namespace}', *tf_remaps(sim.namespace), '--params-file',
         str(sim.params_file)],
        capture_output=True, text=True, timeout=180)
    return done, sim.object_position(sim.now_ns())


def off(cube, target=PLACE_TARGET) -> float:
    return math.hypot(cube[0] - target[0], cube[1] - target[1])


def test_the_exported_tree_places_the_cube_at_the_learned_spot_and_6_cm_away(world):
    text = world.tree.read_text()
    assert '# step 0: ' in text and 'sensor:object[0]' in text and 'param:place[0]' in text
    for spot in (LEARNED, NEAR):
        done, cube = run_bt(world, world.tree, spot)
        assert done.returncode == 0, done.stdout + done.stderr
        assert 'done: 8 steps by the tree' in done.stdout, done.stdout
        assert off(cube) < 0.005, (spot, cube)


def test_an_edited_place_target_is_where_the_cube_ends(world):
    edited = world.logs / 'edited.bt.yaml'
    text = world.tree.read_text()
    old = f'params:\n  place: [{PLACE_TARGET[0]}, {PLACE_TARGET[1]}]'
    assert old in text, text[:400]
    edited.write_text(text.replace(old, f'params:\n  place: [{EDITED_PLACE[0]}, '
                                        f'{EDITED_PLACE[1]}]'))
    done, cube = run_bt(world, edited, LEARNED)
    assert done.returncode == 0, done.stdout + done.stderr
    assert off(cube, EDITED_PLACE) < 0.005, cube


def test_beyond_the_bindings_range_the_tree_hands_off_to_the_agent(world):
    done, cube = run_bt(world, world.tree, FAR)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'then the agent from step 0' in done.stdout, done.stdout
    assert 'max_shift' in done.stdout
    assert off(cube) < 0.005, cube
