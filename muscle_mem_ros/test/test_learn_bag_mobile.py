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
``muscle-mem learn`` on a robot unlike the demo: the mobile base, from a bag recorded live.

The base's agent (its clients pointed at the real ``goto`` and ``gripper``, no cache
running) fetches once while a recorder writes the odometry, the tag, the scan and the
introspection events to an MCAP file. Learned from the bag into an empty store, the cache
then fetches with the tag moved 8 cm (the params file's declared binding) with no agent
call, each 2 s goto watched against the trace the bag gave; with the scan showing another
room, it hands the task to the agent.
"""

from __future__ import annotations

import json
import time

from action_msgs.msg import GoalStatus
from bag_helpers import BagRecorder
from geometry_msgs.msg import PoseStamped
from mobile_base_helpers import BaseHarness
from mobile_helpers import TAG_HOME
from muscle_mem_demo_interfaces.action import MoveToPose
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.cli.app import main
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.store import SqliteStore
from nav_msgs.msg import Odometry
from node_helpers import write_params
import numpy as np
import pytest
from rclpy.action import ActionServer
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import qos_profile_system_default
from rclpy.service_introspection import ServiceIntrospectionState
from sensor_msgs.msg import LaserScan
from std_srvs.srv import SetBool


@pytest.fixture(scope='module')
def base(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('learn_bag_mobile')
    h = BaseHarness(tmp=tmp)
    prefix, robot, agent = h.names.prefix, h.robot, h.agent
    group = ReentrantCallbackGroup()
    agent._goto = ActionClient(agent, MoveToPose, f'/{prefix}/goto', callback_group=group)
    agent._gripper = agent.create_client(SetBool, f'/{prefix}/gripper', callback_group=group)
    servers = [w for w in robot.waitables if isinstance(w, ActionServer)]
    servers += [s for s in robot.services if s.srv_name == f'/{prefix}/gripper']
    servers += [w for w in agent.waitables if isinstance(w, ActionServer)]
    for server in servers:
        server.configure_introspection(h.client.get_clock(), qos_profile_system_default,
                                       ServiceIntrospectionState.CONTENTS)
    goto_type = 'muscle_mem_demo_interfaces/action/MoveToPose'
    task_type = 'muscle_mem_interfaces/action/ExecuteTask'
    topics = {
        f'/{prefix}/odom': ('nav_msgs/msg/Odometry', Odometry),
        f'/{prefix}/tag': ('geometry_msgs/msg/PoseStamped', PoseStamped),
        f'/{prefix}/scan': ('sensor_msgs/msg/LaserScan', LaserScan),
        f'/{prefix}/gripper/_service_event': ('std_srvs/srv/SetBool_Event', SetBool.Event),
        f'/{prefix}/goto/_action/send_goal/_service_event': (
            f'{goto_type}_SendGoal_Event', MoveToPose.Impl.SendGoalService.Event),
        f'/{prefix}/goto/_action/get_result/_service_event': (
            f'{goto_type}_GetResult_Event', MoveToPose.Impl.GetResultService.Event),
        f'/{prefix}/goto/_action/feedback': (
            f'{goto_type}_FeedbackMessage', MoveToPose.Impl.FeedbackMessage),
        f'{h.names.agent}/_action/send_goal/_service_event': (
            f'{task_type}_SendGoal_Event', ExecuteTask.Impl.SendGoalService.Event),
        f'{h.names.agent}/_action/get_result/_service_event': (
            f'{task_type}_GetResult_Event', ExecuteTask.Impl.GetResultService.Event),
    }
    bag = tmp / 'fetch.mcap'
    recorder = BagRecorder(bag, topics, context=h.client.context)
    deadline = time.monotonic() + 15.0
    while time.monotonic() < deadline and not all(
            h.client.count_publishers(t) >= 1 for t in topics if 'feedback' not in t):
        time.sleep(0.05)
    time.sleep(0.5)
    client = ActionClient(h.client, ExecuteTask, h.names.agent, callback_group=group)
    try:
        assert client.wait_for_server(timeout_sec=10.0)
        robot.reset()
        time.sleep(0.3)
        handle = h.wait(client.send_goal_async(ExecuteTask.Goal(
            task='fetch', params_json='{"bin": 1}')))
        assert handle.accepted
        wrapped = h.wait(handle.get_result_async(), 30.0)
        assert wrapped.status == GoalStatus.STATUS_SUCCEEDED, wrapped.result.message
        time.sleep(0.3)
    finally:
        recorder.close()
    params_file = write_params(tmp / 'base.yaml', 'muscle_mem', h.values())
    yield h, bag, params_file
    h.close()


def test_learns_the_fetch_then_replays_it_with_the_tag_moved_and_hands_off(base, capsys):
    h, bag, params_file = base
    code = main(['learn', str(bag), '--params-file', str(params_file), '--task', 'fetch',
                 '--json'])
    out = capsys.readouterr()
    assert code == 0, out.err
    (task,) = json.loads(out.out)['tasks']
    assert task['steps'] == 4 and task['params'] == {'bin': 1}, task
    with SqliteStore(path=str(h.tmp / 'cache.db'), read_only=True) as store:
        (info,) = store.trajectories(task='fetch')
        goto = store.path(info.id)[0].step
        trace = goto.trace
        assert trace is not None and len(trace.sensors['odom'].times) > 20
        assert 'scan' not in trace.sensors  # 360 elements: never traced
        assert trace.feedback is not None
    h.start_cache()
    h.robot.reset()
    h.robot.move_tag((TAG_HOME[0] + 0.08, TAG_HOME[1]))
    before = len(h.agent.calls)
    run = h.run_task('fetch', '{"bin": 1}')
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.cache_hit, (run.result.message, h.cache.output()[-3000:])
    assert len(h.agent.calls) == before
    approach = h.robot.gotos[-2].target  # the approach, retargeted to the moved tag
    assert approach[0] == pytest.approx(TAG_HOME[0] + 0.08 - 0.4, abs=1e-3)
    h.robot.reset()
    h.robot.set_ranges(np.full(360, 0.4))  # another room
    time.sleep(0.3)
    run = h.run_task('fetch', '{"bin": 1}')
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert not run.result.cache_hit
    assert len(h.agent.calls) == before + 1
