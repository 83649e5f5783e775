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
Learn pick_and_place from a bag of the demo robot, then replay it on the robot.

``sim_demo --record-bag`` records the MuJoCo Panda and the demo agent alone (no cache),
three pick_and_places with the cube at three positions; ``muscle-mem learn`` files them
into an empty store with the demo's own params file (its declared bindings; the cube, a TF
sensor, read from the bag's /tf and /tf_static, which the recording keeps for it).
Then the robot, the agent (pointed at the proxies) and the cache on that store start: with
the cube at a fourth position the task replays with no agent call and the cube lands on the
place target; with the cube beyond the bindings' range the agent is asked.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys

from muscle_mem_demo.processes import config_path
from muscle_mem_demo.recordbag import RECORDED_POSITIONS
from muscle_mem_demo.story import FAR_POSITION, OBJECT_START, PLACE_TARGET
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.cli.app import main
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.matching import AgentSeen
from muscle_mem_ros.store import SqliteStore
import pytest
import rclpy
from sim_helpers import NodeProcess, SimClient

FOURTH = (OBJECT_START[0] + 0.02, OBJECT_START[1] + 0.03, OBJECT_START[2])
PARAMS = json.dumps({'place': list(PLACE_TARGET)})


@pytest.fixture(scope='module')
def world(tmp_path_factory):
    out = tmp_path_factory.mktemp('learn_sim')
    before = os.environ.get('ROS_DOMAIN_ID')
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(120, 200))
    try:
        recorded = subprocess.run(
            [sys.executable, '-m', 'muscle_mem_demo.demo', '--record-bag', '--output-dir',
             str(out), '--rtf', '1', '--think-time', '0.02'],
            capture_output=True, text=True, timeout=300, env=dict(os.environ))
        assert recorded.returncode == 0, recorded.stdout + recorded.stderr
        yield out, recorded.stdout
    finally:
        if before is None:
            os.environ.pop('ROS_DOMAIN_ID')
        else:
            os.environ['ROS_DOMAIN_ID'] = before


def test_the_recording_placed_the_cube_three_times(world):
    out, said = world
    assert said.count(': PASS') == len(RECORDED_POSITIONS) == 3, said
    assert (out / 'demo.mcap').stat().st_size > 0
    assert f'muscle-mem learn {out / "demo.mcap"}' in said


def test_learned_from_the_bag_the_cache_replays_on_the_arm_and_hands_off(world, capsys):
    out, _ = world
    params_file = config_path('sim_demo.yaml')
    store = out / 'learned.db'
    code = main(['learn', str(out / 'demo.mcap'), '--params-file', str(params_file), '--task',
                 'pick_and_place', '--store', str(store), '--json'])
    report = capsys.readouterr()
    assert code == 0, report.err
    tasks = json.loads(report.out)['tasks']
    assert [t['steps'] for t in tasks] == [8, 8, 8], tasks
    with SqliteStore(path=str(store), read_only=True) as s:
        assert len(s.trajectories(task='pick_and_place')) >= 1

    robot = NodeProcess('muscle_mem_demo.robot_node', namespace='/', params={'rtf': 1.0},
                        log_dir=out)
    agent = NodeProcess('muscle_mem_demo.agent_node', namespace='/', params={
        'think_time': 0.02,
        'arm_action': '/muscle_mem/arm/follow_joint_trajectory',
        'pose_action': '/muscle_mem/arm/move_to_pose',
        'gripper_action': '/muscle_mem/gripper/gripper_cmd'}, log_dir=out)
    cache = NodeProcess('muscle_mem_ros.ros.node.main', namespace='/',
                        params={'store_path': str(store)}, log_dir=out,
                        ros_args=['--params-file', str(params_file)])
    rclpy.init()
    client = SimClient('')
    try:
        client.wait_robot(60.0)
        client.wait_agent(60.0)
        events: list = []
        client.create_subscription(CacheEvent, '/muscle_mem/events', events.append, 100)
        seen = AgentSeen(client, '/muscle_mem')
        execute = ActionClient(client, ExecuteTask, '/muscle_mem/execute_task')
        client.wait_for(execute.server_is_ready, 60.0, 'the cache')
        assert seen.wait(60.0), f'the cache did not discover the agent:\n{cache.log()}'

        def run(position):
            client.reset()
            client.move_object(position)
            client.wait_fresh(client.now_ns())
            calls = len(client.calls)
            handle = client.result_of(execute.send_goal_async(
                ExecuteTask.Goal(task='pick_and_place', params_json=PARAMS)))
            assert handle.accepted
            result = client.result_of(handle.get_result_async(), 180.0).result
            agent_calls = len([c for c in client.calls[calls:] if '"start"' in c])
            said = '; '.join(f'{e.type}:{e.step}:{e.detail}' for e in events)
            events.clear()
            return result, agent_calls, client.object_position(client.now_ns()), said

        replayed, asked, cube, said = run(FOURTH)
        assert replayed.success and replayed.cache_hit, f'{replayed.message}: {said}'

        assert replayed.steps_replayed == 8 and asked == 0
        assert math.hypot(cube[0] - PLACE_TARGET[0], cube[1] - PLACE_TARGET[1]) < 0.03, cube
        assert any(s.source.startswith('sensor:object') for s in replayed.substituted), (
            'the grasp followed the cube, read from /tf: a bound goal', replayed.substituted)

        far, asked, _, said = run(FAR_POSITION)
        assert far.success and not far.cache_hit, far.message
        assert asked == 1 and far.steps_by_agent == 8, f'{far.message}: {said}'
    finally:
        for process in (agent, cache, robot):
            process.stop()
        client.close()
        rclpy.try_shutdown()
