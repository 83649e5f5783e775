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
A newcomer follows only the README, "In front of your robot", to a replay on the mobile base.

The commands are read out of the README's block, not written here, and run as a shell
would run them, in an empty directory and with an empty home (so ``init``'s default store
lands there), on a ROS domain holding only the mobile base and its agent. Nothing else is
written by hand: no YAML, no name. What the test adds is what the README says around the
block: the robot is running and still, and before the last command the robot is back
where the task started (the base is homed, as a person would drive it back).
"""

from __future__ import annotations

import os
from pathlib import Path
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys

from mobile_base_helpers import BaseHarness
from node_helpers import Names
import pytest

REPO = Path(__file__).resolve().parents[2]
SECTION = '## In front of your robot'


def readme_commands() -> list[str]:
    """Return the command lines of the README's first bash block under :data:`SECTION`."""
    text = (REPO / 'README.md').read_text()
    assert SECTION in text, f'README has no {SECTION!r} section'
    block = re.search(r'```bash\n(.*?)```', text.split(SECTION, 1)[1], re.DOTALL)
    assert block, f'no bash block under {SECTION!r}'
    lines = [re.sub(r'\s+#.*$', '', line).strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith('#')]


def bin_dirs() -> list[str]:
    """
    Return where the console scripts are, for a shell that has not put them on PATH.

    ament_python installs them to ``lib/muscle_mem_ros`` of its prefix; scripts/setup.sh
    puts that on PATH, colcon test does not.
    """
    prefixes = os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep)
    return [str(Path(p) / 'lib' / 'muscle_mem_ros') for p in prefixes
            if p and (Path(p) / 'lib' / 'muscle_mem_ros' / 'muscle-mem').exists()]


def test_the_readme_commands_are_init_a_cache_and_a_task_twice():
    commands = readme_commands()
    assert len(commands) == 4, commands
    assert commands[0].startswith('muscle-mem init ')
    assert commands[1].startswith('behavior_cache ') and commands[1].endswith('&')
    assert commands[2] == commands[3] and commands[2].startswith('muscle-mem run ')


def test_a_newcomer_reaches_a_replay_on_the_mobile_base(tmp_path):
    init, cache, learn, replay = readme_commands()
    env = dict(os.environ, HOME=str(tmp_path / 'home'), ROS_DOMAIN_ID=str(random.randint(
        120, 200)))
    env['PATH'] = os.pathsep.join([*bin_dirs(), env.get('PATH', '')])
    if shutil.which('muscle-mem', path=env['PATH']) is None:
        pytest.skip('the muscle-mem console script is not installed (colcon build it)')
    (tmp_path / 'home').mkdir()
    work = tmp_path / 'work'
    work.mkdir()
    h = BaseHarness(tmp=tmp_path, names=Names(prefix=f'nb{random.randint(0, 9999)}',
                                              node='muscle_mem'),
                    domain_id=int(env['ROS_DOMAIN_ID']))
    node = None
    try:
        h.robot.reset()

        def shell(line: str) -> subprocess.CompletedProcess:
            return subprocess.run(['bash', '-c', line], cwd=work, env=env, text=True,
                                  capture_output=True, timeout=120)

        done = shell(init)
        assert done.returncode == 0, done.stderr
        written = list(work.iterdir())
        assert [p.name for p in written] == [shlex.split(init)[2]], written
        log = (tmp_path / 'cache.log').open('w')
        node = subprocess.Popen(['bash', '-c', f'exec {cache.rstrip("&").strip()}'], cwd=work,
                                env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        first = shell(learn)
        assert first.returncode == 0, (first.stdout + first.stderr
                                       + (tmp_path / 'cache.log').read_text())
        assert 'done by the agent: 4 step(s) learned' in first.stdout, first.stdout
        assert len(h.agent.calls) == 1
        h.robot.reset()  # the README: the robot back where the task started
        gotos = len(h.robot.gotos)
        second = shell(replay)
        assert second.returncode == 0, second.stdout + second.stderr
        assert 'replayed from the cache: 4 step(s), no agent call' in second.stdout, (
            second.stdout)
        # each step named once: '[replay] step 3: /nb../gripper', not 'step 3: step 3: ...'
        assert re.search(r'^\[replay\] step 3: /', second.stdout, re.M), second.stdout
        assert not re.search(r'step (\d+): step \1', second.stdout), second.stdout
        assert len(h.agent.calls) == 1 and len(h.robot.gotos) == gotos + 2
        assert (tmp_path / 'home' / '.ros' / 'muscle_mem' / 'cache.db').exists()
    finally:
        if node is not None:
            os.killpg(node.pid, signal.SIGINT)
            try:
                node.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        h.close()


def test_run_says_clearly_when_no_cache_answers(tmp_path):
    env = dict(os.environ, ROS_DOMAIN_ID='202', HOME=str(tmp_path))
    done = subprocess.run([sys.executable, '-m', 'muscle_mem_ros.cli', 'run', 'fetch',
                           '--wait', '1'], env=env, text=True, capture_output=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        'muscle-mem run: error: no cache answers at /muscle_mem/execute_task after 1 s: is '
        'behavior_cache running (--node-name), in this ROS domain?'), done.stderr


@pytest.mark.parametrize('args, said', [
    (['--params', '[1]'], '--params must be a JSON object'),
    (['--params', '{bin'], '--params is not JSON'),
    (['--wait', '0'], '--wait must be > 0'),
])
def test_run_refuses_bad_arguments_in_one_line(args, said, tmp_path):
    done = subprocess.run([sys.executable, '-m', 'muscle_mem_ros.cli', 'run', 'fetch', *args],
                          env=dict(os.environ, HOME=str(tmp_path)), text=True,
                          capture_output=True, timeout=60)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert said in done.stderr
