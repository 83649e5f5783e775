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
SIGINT and SIGTERM, once or many times, end every executable cleanly with exit code 0.

``ros2 launch`` signals the whole process group and then sends a second SIGINT
while the nodes tear down; ``timeout -s INT`` and scripts do the same. Each
executable runs here in its own process group, outside a terminal, and gets
its signal again and again until it has exited.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

from action_msgs.msg import GoalStatus
from muscle_mem_interfaces.action import ExecuteTask
import pytest
import rclpy
from sim_helpers import NodeProcess, SimClient, unique_namespace

READY = {
    'sim_robot': 'sim robot up',
    'demo_agent': 'demo agent up',
}
"""The demo's executables and what each logs when it is up (the cache's: muscle_mem_ros)."""
FORBIDDEN = ('Traceback', 'KeyboardInterrupt', 'context is invalid')


def command(executable: str) -> list[str]:
    """Return the executable's command line (``python -m`` of its console script's main)."""
    namespace = f'/t{uuid.uuid4().hex[:8]}'
    module = {'sim_robot': 'muscle_mem_demo.robot_node',
              'demo_agent': 'muscle_mem_demo.agent_node'}[executable]
    return [sys.executable, '-m', module, '--ros-args', '-r', f'__ns:={namespace}']


def wait_until(predicate, timeout: float) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def signal_group(process: subprocess.Popen, sig: int) -> None:
    """Signal the process's group (its own: started in a new session), if it still exists."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
@pytest.mark.parametrize('executable', sorted(READY))
def test_repeated_signal_to_the_process_group_exits_cleanly(executable, sig, tmp_path):
    log_path = tmp_path / f'{executable}.log'
    with open(log_path, 'wb') as log:
        process = subprocess.Popen(
            command(executable), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
            env=dict(os.environ, PYTHONUNBUFFERED='1'),
        )
        try:
            ready = wait_until(lambda: READY[executable] in log_path.read_text(errors='replace')
                               or process.poll() is not None, 60.0)
            assert ready and process.poll() is None, log_path.read_text(errors='replace')
            # Twice in quick succession, as launch does, then again and again until the
            # process is gone: every repeat lands somewhere in the teardown.
            deadline = time.monotonic() + 30.0
            while process.poll() is None and time.monotonic() < deadline:
                for _ in range(2):
                    signal_group(process, sig)
                    time.sleep(0.02)  # the gap between two signals, not a synchronization
                try:
                    process.wait(0.1)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    output = log_path.read_text(errors='replace')
    assert process.returncode == 0, output
    for text in FORBIDDEN:
        assert text not in output, output


def test_ctrl_c_mid_task_gives_the_agents_client_a_result(tmp_path):
    """Two SIGINTs to the agent while it works: its client gets an aborted result, reasoned."""
    namespace = unique_namespace()
    robot = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                        params={'rtf': 1.0}, log_dir=tmp_path)
    agent = NodeProcess('muscle_mem_demo.agent_node', namespace=namespace,
                        params={'think_time': 0.5}, log_dir=tmp_path)
    rclpy.init()
    client = SimClient(namespace)
    try:
        client.wait_robot()
        client.wait_agent()
        handle = client.result_of(client.agent.send_goal_async(
            ExecuteTask.Goal(task='pick_and_place')))
        assert handle.accepted
        result = handle.get_result_async()
        assert wait_until(lambda: 'step 1:' in agent.log(), 30.0), agent.log()
        for _ in range(2):
            agent.process.send_signal(signal.SIGINT)
        response = client.result_of(result, 20.0)
        assert response.status == GoalStatus.STATUS_ABORTED, agent.log()
        assert 'shutting down' in response.result.message
        assert agent.process.wait(20.0) == 0
        output = agent.log()
        for text in (*FORBIDDEN, 'never retrieved', 'was not sent'):
            assert text not in output, output
    finally:
        agent.stop()
        robot.stop()
        client.close()
        rclpy.try_shutdown()
