"""The launch file is shipped and builds a LaunchDescription.

Building it needs ``launch`` / ``launch_ros``, which are not published as PyPI
wheels; where they are not importable that test skips with the reason. The
launch_testing test is test_node_launch_testing.py. Without launch, the node
is started by its console script (the other test_node_* files run it as a
subprocess).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

LAUNCH_FILE = Path(__file__).resolve().parents[1] / 'launch' / 'behavior_cache.launch.py'
CONFIG = Path(__file__).resolve().parents[1] / 'config' / 'behavior_cache.yaml'


def _importable(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


needs_launch_ros = pytest.mark.skipif(
    not _importable('launch', 'launch_ros'),
    reason='launch_ros not importable (not available as PyPI wheels)')


def _load_launch_module():
    spec = importlib.util.spec_from_file_location('behavior_cache_launch', LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_launch_file_and_config_are_shipped():
    assert LAUNCH_FILE.is_file()
    assert CONFIG.is_file()
    text = LAUNCH_FILE.read_text()
    assert "executable='behavior_cache'" in text
    assert "'params_file'" in text


@needs_launch_ros
def test_launch_description_builds():
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument
    from launch_ros.actions import Node

    description = _load_launch_module().generate_launch_description()
    assert isinstance(description, LaunchDescription)
    arguments = [e for e in description.entities if isinstance(e, DeclareLaunchArgument)]
    assert 'params_file' in [a.name for a in arguments]
    nodes = [e for e in description.entities if isinstance(e, Node)]
    assert len(nodes) == 1
