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
Start the demo's three nodes as child processes, without ``ros2 launch``.

Each node runs as ``python -m <module> --ros-args ...`` with the parent's environment, its
output going to ``<log_dir>/<name>.log``. Stopping sends SIGINT (the nodes shut down
cleanly), then SIGTERM, then SIGKILL, each only to the children this object started.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import os
from pathlib import Path
import signal
import subprocess
import sys
from typing import IO

from muscle_mem_ros.errors import MuscleMemError

__all__ = ['ChildProcesses', 'NodeProcessError', 'config_path', 'node_commands']


class NodeProcessError(MuscleMemError, RuntimeError):
    """A child node exited while it was needed; the message holds the end of its log."""


@dataclass
class _Child:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes]


def config_path(file_name: str) -> Path:
    """
    Return an installed config file of muscle_mem_demo, or the source tree's copy.

    :raises FileNotFoundError: neither exists.
    """
    candidates: list[Path] = []
    try:
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory('muscle_mem_demo')) / 'config')
    except Exception:  # noqa: BLE001 - not installed through colcon: use the source tree
        pass
    candidates.append(Path(__file__).resolve().parents[2] / 'config')
    for folder in candidates:
        path = folder / file_name
        if path.is_file():
            return path
    raise FileNotFoundError(f'{file_name} not found in {[str(c) for c in candidates]}')


def node_commands(
    *, rtf: float, think_time: float, store_path: str, params_file: Path,
    camera_rate: float = 0.0,
) -> dict[str, list[str]]:
    """
    Return the command lines of sim robot, behavior cache and demo agent, by name.

    :param camera_rate: The robot's camera, Hz; 0 (the default): no camera, nothing rendered
        (only the story that checks the camera pays for rendering).
    """
    python = sys.executable
    camera = ['-p', f'camera_rate:={float(camera_rate)}'] if camera_rate > 0.0 else []
    return {
        'sim_robot': [
            python, '-m', 'muscle_mem_demo.robot_node', '--ros-args',
            '-p', f'rtf:={float(rtf)}', *camera,
        ],
        'behavior_cache': [
            python, '-m', 'muscle_mem_ros.ros.node.main', '--ros-args',
            '--params-file', str(params_file), '-p', f'store_path:={store_path}',
        ],
        'demo_agent': [
            python, '-m', 'muscle_mem_demo.agent_node', '--ros-args',
            '-p', f'think_time:={float(think_time)}',
            '-p', 'arm_action:=/muscle_mem/arm/follow_joint_trajectory',
            '-p', 'pose_action:=/muscle_mem/arm/move_to_pose',
            '-p', 'gripper_action:=/muscle_mem/gripper/gripper_cmd',
            '-p', 'subtask_action:=/muscle_mem/execute_subtask',
        ],
    }


class ChildProcesses:
    """The demo's child processes; use as a context manager so they always stop."""

    def __init__(self, *, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._children: list[_Child] = []

    def start(self, name: str, command: Sequence[str]) -> None:
        """Start ``command`` as child ``name`` with output to ``<log_dir>/<name>.log``."""
        self._log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self._log_dir / f'{name}.log'
        log = open(log_path, 'wb')  # noqa: SIM115 - closed in stop()
        env = dict(os.environ)
        env.setdefault('PYTHONUNBUFFERED', '1')
        process = subprocess.Popen(
            list(command), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env,
        )
        self._children.append(_Child(name=name, process=process, log_path=log_path, log=log))

    def pid(self, name: str) -> int:
        """Return child ``name``'s process id (a benchmark reads its CPU time)."""
        return next(c.process.pid for c in self._children if c.name == name)

    def check(self) -> None:
        """
        Raise if any child has exited.

        :raises NodeProcessError: naming the child, its exit code and the end of its log.
        """
        for child in self._children:
            code = child.process.poll()
            if code is not None:
                raise NodeProcessError(
                    f'{child.name} exited with code {code}; end of {child.log_path}:\n'
                    + self.tail(child.name)
                )

    def tail(self, name: str, lines: int = 15) -> str:
        """Return the last lines of a child's log."""
        for child in self._children:
            if child.name == name:
                child.log.flush()
                text = child.log_path.read_text(errors='replace').splitlines()
                return '\n'.join(text[-lines:])
        raise KeyError(name)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every child: SIGINT, then SIGTERM, then SIGKILL, waiting ``timeout`` each."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            alive = [c for c in self._children if c.process.poll() is None]
            if not alive:
                break
            for child in alive:
                child.process.send_signal(sig)
            for child in alive:
                try:
                    child.process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    pass
        for child in self._children:
            child.log.close()

    def __enter__(self) -> ChildProcesses:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
