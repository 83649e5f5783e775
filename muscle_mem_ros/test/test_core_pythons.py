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
The ROS-free core on the Pythons of the ROS distros users have: 3.10 (Humble), 3.12 (Jazzy).

The node is tested on Kilted (Python 3.11, the rest of the suite). Here, for each of 3.10
and 3.12 found on the machine (pyenv's ``/root/.pyenv/versions/3.X.*``, else ``python3.X``
on PATH; missing: skipped, naming it), a venv with the core's dependencies (numpy, scipy,
pyyaml, rich for the CLI, pytest; pip from the configured index) is made once under
``build/pythons/`` (git-ignored) and reused. With ``PYTHONPATH`` at the package source and
no rclpy anywhere, it runs: a muscle-mem example on the ``Engine`` with a SQLite store (a
miss calls the agent, the repeat is a cache hit), the CLI's store commands on that store
(``tasks``, ``tree``, ``stats``), and ``test_core_walk.py`` (the one walk).
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
import shutil
import subprocess
import textwrap

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
VENVS = PACKAGE.parent / 'build' / 'pythons'
PACKAGES = ('numpy', 'scipy', 'pyyaml', 'rich', 'pytest')

SCRIPT = textwrap.dedent("""
    import json, subprocess, sys
    from muscle_mem_ros import Check, Engine
    assert 'rclpy' not in sys.modules

    engine = Engine(store=sys.argv[1])
    world = {'x': 1.0}
    calls = []

    @engine.function(pre_check=Check(lambda *_a, **_k: dict(world), lambda a, b: a == b))
    def move(to):
        world['x'] = to

    def agent(task):
        calls.append(task)
        move(2.0)

    engine.set_agent(agent).finalize()
    assert engine('go') is False and calls == ['go']
    world['x'] = 1.0
    assert engine('go') is True and calls == ['go']
    cli = [sys.executable, '-m', 'muscle_mem_ros.cli']
    listed = subprocess.run([*cli, 'tasks', '--json', sys.argv[1]], capture_output=True,
                            text=True, check=True)
    (task,) = json.loads(listed.stdout)
    assert task['trajectories'] == 1 and task['hits'] == 1, task
    for command in (['tree', sys.argv[1], task['task']], ['stats', sys.argv[1]]):
        out = subprocess.run([*cli, *command], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    assert 'rclpy' not in sys.modules
    print('core ok on', sys.version.split()[0])
""")


def interpreter(version: str) -> str | None:
    """Return a Python ``version`` interpreter on this machine, or None."""
    found = sorted(glob.glob(f'/root/.pyenv/versions/{version}.*/bin/python'))
    return found[-1] if found else shutil.which(f'python{version}')


def venv(version: str, python: str) -> Path:
    """Return the venv's python for ``version``, made once (a partial one is redone)."""
    home = VENVS / f'py{version}'
    ready = home / 'ready'
    if not ready.exists():
        shutil.rmtree(home, ignore_errors=True)
        subprocess.run([python, '-m', 'venv', str(home)], check=True, timeout=300)
        subprocess.run([str(home / 'bin' / 'python'), '-m', 'pip', 'install', '-q',
                        *PACKAGES], check=True, timeout=1200, capture_output=True)
        ready.write_text(' '.join(PACKAGES) + '\n')
    return home / 'bin' / 'python'


@pytest.mark.parametrize('version', ['3.10', '3.12'])
def test_the_core_runs_on(version, tmp_path):
    python = interpreter(version)
    if python is None:
        pytest.skip(f'Python {version} not found on this machine (pyenv or PATH)')
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('PYTHON', 'AMENT', 'ROS', 'COLCON', 'VIRTUAL_ENV'))
           and k not in ('LD_LIBRARY_PATH', 'CMAKE_PREFIX_PATH')}
    env.update(PYTHONPATH=f'{PACKAGE}{os.pathsep}{PACKAGE / "test"}', PYTHONNOUSERSITE='1')
    here = venv(version, python)
    script = tmp_path / 'probe.py'
    script.write_text(SCRIPT)
    done = subprocess.run([str(here), str(script), str(tmp_path / 'cache.db')], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f'core ok on {version}.' in done.stdout, done.stdout
    tests = subprocess.run(
        [str(here), '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '--noconftest',
         str(PACKAGE / 'test' / 'test_core_walk.py')],
        env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert ' passed' in tests.stdout and 'failed' not in tests.stdout
