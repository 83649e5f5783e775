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
The demo agent idles while it waits with a task in flight (issue 43 item 18).

On a 2-core machine an agent that spins a core while it "thinks" starves the simulation.
The measure is the agent process's CPU time over a wall-time window in which it only waits:
a ratio with a generous bound, not a speed assertion.
"""

from __future__ import annotations

import os
import time

from muscle_mem_interfaces.action import ExecuteTask
import pytest
import rclpy
from sim_helpers import NodeProcess, SimClient, unique_namespace

_IDLE_BOUND = 0.3
"""Fraction of one core the waiting agent may use (a busy executor loop uses about 1.0)."""


def _cpu_seconds(pid: int) -> float:
    """Return the user plus system CPU time the process ``pid`` used so far (all threads)."""
    with open(f'/proc/{pid}/stat') as stat:
        fields = stat.read().rsplit(')', 1)[1].split()
    # after the command's closing parenthesis: state is field 3, utime 14, stime 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


@pytest.mark.parametrize('params, waiting', [
    ({'think_time': 30.0}, 'thinking about'),  # its own think time
    # the robot's goal of step 0
    ({'think_time': 0.0, 'move_time': 30.0}, 'step 0: move above the object'),
], ids=['thinking', 'a step in flight'])
def test_the_agent_idles_while_it_waits_with_a_task_in_flight(tmp_path, params, waiting):
    namespace = unique_namespace()
    robot = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                        params={'rtf': 1.0}, log_dir=tmp_path)
    agent = NodeProcess('muscle_mem_demo.agent_node', namespace=namespace,
                        params=params, log_dir=tmp_path)
    rclpy.init()
    client = SimClient(namespace)
    try:
        client.wait_robot()
        client.wait_agent()
        feedback: list = []
        handle = client.result_of(client.agent.send_goal_async(
            ExecuteTask.Goal(task='pick_and_place'),
            feedback_callback=lambda fb: feedback.append(fb.feedback)))
        assert handle.accepted
        result = handle.get_result_async()  # a client waiting for the result, as the cache does
        client.wait_for(lambda: any(waiting in f.detail for f in feedback), 20.0,
                        f'the agent at step 0: {waiting}')
        time.sleep(0.5)  # past the start: logging, the first plan
        wall_start, cpu_start = time.monotonic(), _cpu_seconds(agent.process.pid)
        time.sleep(2.0)
        wall, cpu = time.monotonic() - wall_start, _cpu_seconds(agent.process.pid) - cpu_start
        assert not result.done(), 'the task ended before the idle window did'
        print(f'agent CPU while waiting: {cpu:.2f} s in {wall:.2f} s')
        assert cpu / wall < _IDLE_BOUND, (
            f'the agent used {cpu:.2f} s of CPU in {wall:.2f} s while it only waited')
        client.result_of(handle.cancel_goal_async())
        client.result_of(result)
    finally:
        agent.stop()
        robot.stop()
        client.close()
        rclpy.try_shutdown()
        print(agent.log())
