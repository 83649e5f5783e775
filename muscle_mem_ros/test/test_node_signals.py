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
its signal again and again until it has exited. And an executor thread that an error
ended says so (rclfix.shutdown.Spinner).
"""

from __future__ import annotations

import os
from pathlib import Path
import signal
import subprocess
import sys
import time
import uuid

from muscle_mem_ros.ros.rclfix.shutdown import Spinner
from node_helpers import wait_until
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
import yaml

READY = {
    'behavior_cache': 'behavior cache ready',
}
"""Each executable and what it logs when it is up (the demo's are in muscle_mem_demo's tests)."""
FORBIDDEN = ('Traceback', 'KeyboardInterrupt', 'context is invalid')


def command(executable: str, tmp: Path) -> list[str]:
    """Return the executable's command line (``python -m`` of its console script's main)."""
    assert executable == 'behavior_cache'
    namespace = f'/t{uuid.uuid4().hex[:8]}'
    params = tmp / 'params.yaml'
    params.write_text(yaml.safe_dump({'/**': {'ros__parameters': {
        'store_path': str(tmp / 'cache.db'),
        'sensors': {'joints': {'topic': 'joint_states', 'type': 'sensor_msgs/msg/JointState',
                               'fields': ['position'], 'tolerance': [0.01]}},
        'actions': {'fib': {'server': 'fibonacci', 'type': 'test_msgs/action/Fibonacci'}},
    }}}))
    return [sys.executable, '-m', 'muscle_mem_ros.ros.node.main', '--ros-args',
            '-r', f'__ns:={namespace}', '--params-file', str(params)]


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
            command(executable, tmp_path), stdout=log, stderr=subprocess.STDOUT,
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


def test_an_executor_thread_ended_by_an_error_says_so(capsys):
    """
    A Spinner's thread that a callback's error ended prints the error.

    An agent or a driver spins with a Spinner and no ``on_exit``; when its executor died
    (an rclpy error in a worker), it answered nothing from then on and said nothing.
    """
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node('ended_by_an_error', context=context,
                                 start_parameter_services=False)

        def fail() -> None:
            raise RuntimeError('a callback failed')
        node.create_timer(0.01, fail)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        spinner = Spinner(executor)
        spinner._thread.join(10.0)
        assert not spinner._thread.is_alive(), 'the error did not end the thread'
        spinner.stop()
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
    said = capsys.readouterr().err
    assert "the executor thread ended: RuntimeError('a callback failed')" in said, said
    assert 'Traceback' in said, said
