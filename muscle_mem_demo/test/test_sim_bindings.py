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
Bindings on the demo arm, end to end: inferred from two agent runs, then a retargeted replay.

The sim robot, the behavior cache and the demo agent run as real processes in one namespace.
The cache has the demo's sensors and tools (config/sim_demo.yaml) but no declared bindings:
that the cube-relative goals' x, y are the cube's position must be inferred from two runs of
the agent with the cube at two spots. Then the cube at a third spot, 6 cm from both, is a
replay with those goals retargeted (placed within 5 mm, the agent not called), and a spot
beyond the inferred bindings' range (``binding_max_shift`` 0.1 m) goes to the agent.

The cache reads the cube from /tf, as a tag detector publishes it. The robot's detector noise
is off here (``cube_tf_noise``, ``cube_tf_yaw_noise`` 0): with its default 1 mm per axis the
offsets of two recordings 4 cm apart differ by about 1.4 mm, which inference's chance rule
(:func:`muscle_mem_ros.bindings.inference.chance`: ``tried * 2 fit / step`` against 1e-3)
cannot tell from a coincidence, so nothing would be inferred from two runs; the demo itself
declares its bindings.
"""

from __future__ import annotations

import json
import math

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
# two spots 4 cm apart along x and y, opposite ways (not on a diagonal), and away from the
# values post elements take (tool heights 0.02/0.15 m, closed jaws 0.35 rad)
DEMOS = ((0.42, 0.23), (0.46, 0.19))
NEW_SPOT = (0.36, 0.25)
FAR_SPOT = (0.25, 0.20)


def _cache_params(namespace: str, store: str) -> dict:
    """Return the demo's cache parameters in ``namespace``, with no declared bindings."""
    demo = yaml.safe_load(config_path('sim_demo.yaml').read_text())
    params = dict(demo['muscle_mem']['ros__parameters'])
    params.pop('bindings', None)
    params['infer_bindings'] = True
    params['store_path'] = store
    params['agent_action'] = f'{namespace}/demo_agent/execute_task'
    namespaced_sensors(params, namespace)
    for group in ('actions', 'services'):
        for tool in params.get(group, {}).values():
            tool['server'] = namespace + tool['server']
            tool['proxy'] = namespace + tool['proxy']
    return {'/**': {'ros__parameters': params}}


@pytest.fixture(scope='module')
def world(tmp_path_factory):
    namespace = unique_namespace()
    logs = tmp_path_factory.mktemp('logs')
    params_file = logs / 'cache.yaml'
    params_file.write_text(yaml.safe_dump(_cache_params(namespace, str(logs / 'cache.db'))))
    proxies = f'{namespace}/muscle_mem'
    robot = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                        params={'rtf': 4.0, 'cube_tf_noise': 0.0, 'cube_tf_yaw_noise': 0.0},
                        log_dir=logs)
    cache = NodeProcess('muscle_mem_ros.ros.node.main', namespace=namespace, params={},
                        log_dir=logs, ros_args=['--params-file', str(params_file),
                                                *tf_remaps(namespace)])
    agent = NodeProcess('muscle_mem_demo.agent_node', namespace=namespace, params={
        'think_time': 0.02,
        'arm_action': f'{proxies}/arm/follow_joint_trajectory',
        'pose_action': f'{proxies}/arm/move_to_pose',
        'gripper_action': f'{proxies}/gripper/gripper_cmd',
    }, log_dir=logs)
    rclpy.init()
    client = SimClient(namespace)
    client.cache = ActionClient(client, ExecuteTask, f'{proxies}/execute_task')
    cache_sees_agent = AgentSeen(client, proxies)
    try:
        client.wait_robot()
        client.wait_agent()
        client.wait_for(client.cache.server_is_ready, 60.0, 'the cache')
        # the first demonstration goes to the agent: the cache must have discovered it
        assert cache_sees_agent.wait(60.0), \
            f'the cache did not discover the agent:\n{cache.log()}'
        yield client
    finally:
        agent.stop()  # first: no message may arrive while the client is destroyed
        cache.stop()
        robot.stop()
        client.close()
        rclpy.try_shutdown()
        print(cache.log()[-3000:])


def run_at(sim, spot) -> tuple:
    """Reset, put the cube at ``spot``, run the task through the cache; return (result, cube)."""
    sim.reset()
    assert sim.move_object((spot[0], spot[1], 0.02)).success
    mark = sim.now_ns()
    sim.wait_fresh(mark)
    goal = ExecuteTask.Goal(task='pick_and_place', params_json=PARAMS)
    handle = sim.result_of(sim.cache.send_goal_async(goal))
    assert handle.accepted
    result = sim.result_of(handle.get_result_async(), 120.0).result
    return result, sim.object_position(sim.now_ns())


def off_target(cube) -> float:
    return math.hypot(cube[0] - PLACE_TARGET[0], cube[1] - PLACE_TARGET[1])


def test_two_demonstrations_then_a_new_spot_is_a_retargeted_replay(world):
    for spot in DEMOS:
        result, cube = run_at(world, spot)
        assert result.success, result.message
        assert (result.steps_replayed, result.steps_by_agent) == (0, 8), result.message
        assert off_target(cube) < 0.005
    result, cube = run_at(world, NEW_SPOT)
    assert result.success, result.message
    assert result.cache_hit and result.steps_by_agent == 0, result.message
    assert result.steps_replayed == 8
    assert off_target(cube) < 0.005, cube
    # Above the cube the source is the cube; down to it and up again the tool (which the
    # previous step put above the cube) reads the same x, y in every recording, so either is
    # the same explanation and the core may bind to either (ties between equal readings).
    cube_bound = {(s.step, s.field): s for s in result.substituted
                  if s.source.startswith(('sensor:object', 'sensor:ee'))}
    for step in (0, 1, 3):  # above the cube, down to it, lift it
        x = cube_bound[(step, 'target.pose.position.x')]
        y = cube_bound[(step, 'target.pose.position.y')]
        assert (x.source[-3:], y.source[-3:]) == ('[0]', '[1]')
        if step == 0:
            assert (x.source, y.source) == ('sensor:object[0]', 'sensor:object[1]')
        assert x.origin == y.origin == 'inferred'
        assert (x.value, y.value) == pytest.approx(NEW_SPOT, abs=0.003)


def test_a_spot_beyond_the_inferred_range_goes_to_the_agent(world):
    result, cube = run_at(world, FAR_SPOT)
    assert result.success, result.message
    assert result.steps_replayed == 0 and result.steps_by_agent == 8, result.message
    assert off_target(cube) < 0.005
