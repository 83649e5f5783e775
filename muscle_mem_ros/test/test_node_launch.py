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
The launch file is shipped and builds a LaunchDescription; the README's commands run.

Building it needs ``launch`` / ``launch_ros``, which are not published as PyPI
wheels; where they are not importable that test skips with the reason. The
launch_testing test is test_node_launch_testing.py. Without launch, the node
is started by its console script, exactly as the README writes it, in the shell
environment that ``. scripts/setup.sh`` gives (the other test_node_* files run
it as ``python -m``).
"""

from __future__ import annotations

import ast
import importlib.util
import os
from pathlib import Path
import signal
import subprocess
import time

import pytest
import yaml

LAUNCH_FILE = Path(__file__).resolve().parents[1] / 'launch' / 'behavior_cache.launch.py'
CONFIG = Path(__file__).resolve().parents[1] / 'config' / 'behavior_cache.yaml'
ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / 'scripts' / 'setup.sh'
COMMANDS = ('behavior_cache',)
"""This package's console scripts (the demo's: muscle_mem_demo's test_sim_launch.py)."""


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


def test_launch_file_shows_both_lifecycle_modes():
    """Without launch installed: the file parses and names both ways to start the node."""
    tree = ast.parse(LAUNCH_FILE.read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert {'LifecycleNode', 'ChangeState', 'OnStateTransition'} <= imported
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)}
    assert {'autostart', 'manage', 'inactive'} <= strings


def test_launch_file_drives_the_lifecycle_only_when_asked_and_once():
    """
    ``autostart:=false`` alone leaves the node to its lifecycle services; ``manage`` acts once.

    The launch_testing test (test_node_launch_lifecycle.py) runs it where launch is installed;
    here the file's arguments and its one event handler are read from its syntax tree.
    """
    tree = ast.parse(LAUNCH_FILE.read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]

    def named(call: ast.Call) -> str:
        return getattr(call.func, 'id', getattr(call.func, 'attr', ''))

    defaults = {c.args[0].value: kw.value.value for c in calls if named(c) ==
                'DeclareLaunchArgument' for kw in c.keywords if kw.arg == 'default_value'
                and isinstance(kw.value, ast.Constant)}
    assert defaults['autostart'] == 'true'
    assert defaults['manage'] == 'false'
    handlers = [c for c in calls if named(c) == 'OnStateTransition']
    assert len(handlers) == 1
    keywords = {kw.arg: kw.value for kw in handlers[0].keywords}
    assert getattr(keywords.get('handle_once'), 'value', None) is True
    assert getattr(keywords.get('start_state'), 'value', None) == 'configuring'


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


def _setup_environment(how: str) -> dict[str, str]:
    """
    Return the caller's environment as a new shell has it before ``. scripts/setup.sh``.

    The package's script directory is taken off PATH, so only setup.sh can put it back;
    ``how`` picks setup.sh's branch: a sourced ROS 2 (``ROS_DISTRO`` set, rclpy
    importable) or the PyPI wheels (a venv).
    """
    if not SETUP.is_file():
        pytest.skip(f'{SETUP} is not there (the package was copied out of its repository)')
    if os.environ.get('MUSCLE_MEM_ROOT') != str(ROOT):
        pytest.skip("these tests do not run in the environment of this checkout's "
                    'scripts/setup.sh (MUSCLE_MEM_ROOT unset or another checkout); sourcing '
                    'it here would build a second workspace inside the sources')
    env = dict(os.environ)
    env['PATH'] = os.pathsep.join(
        p for p in env.get('PATH', '').split(os.pathsep)
        if not p.endswith(('lib/muscle_mem_ros', 'lib/muscle_mem_demo')))
    if how == 'sourced ROS':
        env['ROS_DISTRO'] = env.get('ROS_DISTRO') or 'kilted'
    elif env.pop('ROS_DISTRO', None):
        pytest.skip("a ROS 2 distro is sourced: setup.sh's wheel branch would build a venv")
    return env


@pytest.mark.parametrize('how', ['wheels', 'sourced ROS'])
def test_readme_command_runs_after_sourcing_setup(how, tmp_path):
    """
    Run ``. scripts/setup.sh`` then ``behavior_cache --ros-args --params-file f``, as written.

    The console scripts install to ``lib/muscle_mem_ros``, where only ``ros2 run``
    looks; setup.sh puts that directory on PATH. The node comes up with a tiny
    params file and exits 0 on SIGTERM.
    """
    env = _setup_environment(how)
    params = tmp_path / 'my_robot.yaml'
    params.write_text(yaml.safe_dump({'muscle_mem': {'ros__parameters': {
        'store_path': str(tmp_path / 'cache.db'), 'agent_action': ''}}}))
    log = tmp_path / 'node.log'
    script = (f'. "{SETUP}" >/dev/null && command -v {" ".join(COMMANDS)} && '
              f'exec behavior_cache --ros-args --params-file "{params}"')
    with open(log, 'w') as out:
        proc = subprocess.Popen(['bash', '-c', script], stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120.0
        while proc.poll() is None and 'behavior cache ready' not in log.read_text():
            assert time.monotonic() < deadline, f'the node did not come up:\n{log.read_text()}'
            time.sleep(0.1)
        text = log.read_text()
        assert proc.poll() is None, f'exited {proc.returncode}:\n{text}'
        found = text.splitlines()[:len(COMMANDS)]
        assert [Path(p).name for p in found] == list(COMMANDS), text
        assert all(Path(p).parent == ROOT / 'install' / 'muscle_mem_ros' / 'lib' /
                   'muscle_mem_ros' for p in found), text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30.0) == 0, log.read_text()
        assert (tmp_path / 'cache.db').is_file()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
