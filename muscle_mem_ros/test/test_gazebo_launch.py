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
launch/gazebo_arm.launch.py and config/gazebo_arm.yaml: the cache in front of a Gazebo arm.

Gazebo, ros_gz, gz_ros2_control and control_msgs cannot be installed here, so nothing in this
module runs Gazebo. What runs: the launch description is built (where ``launch`` and
``launch_ros`` are importable; they are not published as PyPI wheels, so that test skips
naming them otherwise) and its structure checked, and the real cache node starts with the
launch file's params file, control_msgs' FollowJointTrajectory swapped for its mirror
(muscle_mem_demo_interfaces, same fields) where control_msgs is not installed, and comes up
ready: the file passes the node's validation.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
import signal
import subprocess
import sys

from node_helpers import wait_until
import pytest
import yaml

PACKAGE = Path(__file__).resolve().parents[1]
LAUNCH_FILE = PACKAGE / 'launch' / 'gazebo_arm.launch.py'
PARAMS_FILE = PACKAGE / 'config' / 'gazebo_arm.yaml'


def _missing(*modules: str) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def _load_launch_module():
    spec = importlib.util.spec_from_file_location('gazebo_arm_launch', LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _params() -> dict:
    return yaml.safe_load(PARAMS_FILE.read_text())['muscle_mem']['ros__parameters']


def test_params_file_runs_on_sim_time_with_joints_by_name_and_the_controller():
    params = _params()
    assert params['use_sim_time'] is True
    joints = params['sensors']['joints']
    assert joints['topic'] == '/joint_states'
    assert joints['type'] == 'sensor_msgs/msg/JointState'
    assert len(joints['joints']) == len(set(joints['joints'])) > 0
    arm = params['actions']['arm']
    assert arm['type'] == 'control_msgs/action/FollowJointTrajectory'
    assert arm['server'] == '/joint_trajectory_controller/follow_joint_trajectory'


def test_launch_file_starts_what_a_gazebo_user_starts():
    text = LAUNCH_FILE.read_text()
    for needle in ("FindPackageShare('ros_gz_sim'), 'launch', 'gz_sim.launch.py'",
                   "'/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock'",
                   "executable='robot_state_publisher'", "executable='create'",
                   "executable='spawner'", "'joint_state_broadcaster'",
                   "executable='behavior_cache'", "'gazebo_arm.yaml'"):
        assert needle in text, needle


def test_launch_description_builds():
    missing = _missing('launch', 'launch_ros')
    if missing:
        pytest.skip(f'{" and ".join(missing)} not importable (not available as PyPI wheels)')
    from launch import LaunchDescription
    from launch.actions import (
        DeclareLaunchArgument, IncludeLaunchDescription, RegisterEventHandler)
    from launch_ros.actions import Node

    description = _load_launch_module().generate_launch_description()
    assert isinstance(description, LaunchDescription)
    entities = description.entities
    arguments = {e.name for e in entities if isinstance(e, DeclareLaunchArgument)}
    assert arguments == {'urdf', 'world', 'robot_name', 'arm_controller', 'params_file'}
    assert sum(isinstance(e, IncludeLaunchDescription) for e in entities) == 1
    nodes = [e for e in entities if isinstance(e, Node)]
    assert len(nodes) == 3  # clock bridge, robot_state_publisher, spawn into the world
    # the two controller spawners and the cache, each started when the one before has exited
    assert sum(isinstance(e, RegisterEventHandler) for e in entities) == 3


def runnable_here(tmp_path: Path, text: str | None = None) -> Path:
    """Return a copy of the params file with control_msgs' type swapped where not installed."""
    text = PARAMS_FILE.read_text() if text is None else text
    if _missing('control_msgs'):
        text = text.replace('control_msgs/action/FollowJointTrajectory',
                            'muscle_mem_demo_interfaces/action/FollowJointTrajectory')
    copy = tmp_path / PARAMS_FILE.name
    copy.write_text(text)
    return copy


def start_cache(params_file: Path, tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """Start the cache node as the launch file does: node name muscle_mem, the params file."""
    log_path = tmp_path / 'cache.log'
    with open(log_path, 'w') as log:
        proc = subprocess.Popen(
            [sys.executable, '-m', 'muscle_mem_ros.ros.node.main', '--ros-args',
             '--params-file', str(params_file), '-p', f'store_path:={tmp_path / "cache.db"}'],
            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED='1'))
    return proc, log_path


def test_params_file_passes_the_nodes_validation(tmp_path):
    proc, log_path = start_cache(runnable_here(tmp_path), tmp_path)
    try:
        assert wait_until(lambda: 'behavior cache ready' in log_path.read_text()
                          or proc.poll() is not None, 60.0), log_path.read_text()
        assert proc.poll() is None, log_path.read_text()
        # the file's keys reached the node (its top key matches the launch file's node name)
        assert '1 sensors, 1 tools, agent /my_agent/execute_task' in log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(30.0)
    assert code == 0, log_path.read_text()


def test_a_broken_copy_of_the_params_file_is_refused(tmp_path):
    """The check above is the node's validation: the same file with one bad value fails it."""
    text = PARAMS_FILE.read_text().replace('tolerance: [0.05]', 'tolerance: [-0.05]')
    proc, log_path = start_cache(runnable_here(tmp_path, text), tmp_path)
    assert proc.wait(60.0) == 1, log_path.read_text()
    assert 'sensors.joints.tolerance' in log_path.read_text()
