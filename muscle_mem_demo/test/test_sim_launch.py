"""
launch/sim_demo.launch.py and the config files of the demo robot and the real-arm example.

Building the launch description needs ``launch`` / ``launch_ros``, which are not published as
PyPI wheels; where they are not importable that test skips with the reason. The same three
nodes are started without launch by ``sim_demo`` (test_sim_story.py).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

PACKAGE = Path(__file__).resolve().parents[1]
LAUNCH_FILE = PACKAGE / 'launch' / 'sim_demo.launch.py'


def _importable(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def _params(name: str) -> dict:
    return yaml.safe_load((PACKAGE / 'config' / name).read_text())['muscle_mem'][
        'ros__parameters']


@pytest.mark.skipif(not _importable('launch', 'launch_ros'),
                    reason='launch_ros not importable (not available as PyPI wheels)')
def test_launch_description_starts_robot_cache_and_agent():
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument
    from launch_ros.actions import Node

    spec = importlib.util.spec_from_file_location('sim_demo_launch', LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    assert isinstance(description, LaunchDescription)
    arguments = {e.name for e in description.entities if isinstance(e, DeclareLaunchArgument)}
    assert {'rtf', 'think_time', 'params_file', 'store_path'} <= arguments
    nodes = [e for e in description.entities if isinstance(e, Node)]
    assert len(nodes) == 3


def test_launch_file_names_the_three_console_scripts():
    text = LAUNCH_FILE.read_text()
    for executable in ('sim_robot', 'behavior_cache', 'demo_agent'):
        assert f"executable='{executable}'" in text
    assert "'/muscle_mem/arm/follow_joint_trajectory'" in text


def test_sim_config_points_at_the_sim_robot_and_the_agent():
    params = _params('sim_demo.yaml')
    assert params['agent_action'] == '/demo_agent/execute_task'
    assert params['actions']['arm']['server'] == '/arm/follow_joint_trajectory'
    assert params['services']['gripper']['type'] == 'std_srvs/srv/SetBool'
    assert params['sensors']['object']['tolerance'] == [0.02]


def test_real_arm_example_has_the_same_shape_as_the_sim_config():
    sim, real = _params('sim_demo.yaml'), _params('ros2_control_arm.yaml')
    assert set(real['sensors']['joints']) == set(sim['sensors']['joints'])
    assert real['actions']['arm']['type'] == 'control_msgs/action/FollowJointTrajectory'
    for tool in real['actions'].values():
        assert set(tool) == set(sim['actions']['arm'])
