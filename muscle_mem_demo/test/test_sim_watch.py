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
The cache watches a replayed motion on the MuJoCo arm: a knock during the approach cancels it.

The demo's three processes (sim robot at rtf 1, the cache with config/sim_demo.yaml, the
agent) and the story's driver: the agent does the task once (the cache records it, with the
sensors' trace during each motion), then the cache replays it twice: unchanged (nothing may be
canceled), and with the cube knocked 7 cm 0.15 s into the approach (step 0). The robot's
Knock report says when the cancel reached it and where the arm stopped: short of where the
recorded approach ends, and the agent then does the task from step 0. Without the watch the
approach runs to its end (the post-check notices the cube after it, and the agent resumes at
step 1): the second test fails. Both idle and with two CPU hogs on the machine.
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys

from muscle_mem_demo.processes import ChildProcesses, config_path, node_commands
from muscle_mem_demo.story import (
    Expectation,
    judge,
    KNOCK_POSITION,
    MIN_STOPPED_SHORT,
    RunMode,
    RunSpec,
    STORY,
)
import pytest
import rclpy

RTF = 1.0
TIMEOUT = 120.0


_HOG = ('import sys, time\nend = time.monotonic() + float(sys.argv[1])\n'
        'while time.monotonic() < end: pass\n')


@contextlib.contextmanager
def cpu_hogs(count: int):
    """Keep ``count`` cores busy (bounded to 300 s should the test be killed); stop them."""
    procs = [subprocess.Popen([sys.executable, '-c', _HOG, '300']) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


@pytest.fixture(scope='module', params=[0, 2], ids=['idle', 'two CPU hogs'])
def runs(request, tmp_path_factory):
    """Learn the task, then replay it unchanged and with a knock; return the outcomes."""
    with cpu_hogs(request.param):
        return _runs(tmp_path_factory)


def _runs(tmp_path_factory):
    from muscle_mem_demo.driver import StoryDriver

    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    out = tmp_path_factory.mktemp('watch')
    commands = node_commands(rtf=RTF, think_time=0.05, store_path=str(out / 'cache.db'),
                             params_file=config_path('sim_demo.yaml'))
    first, replay = STORY[0], STORY[1]
    knocked = RunSpec(number=3, title='knocked during step 0', knock=KNOCK_POSITION,
                      expect=Expectation(mode=RunMode.HANDOFF, replayed=0, by_agent=8,
                                         agent_calls=(0,), canceled_step=0))
    outcomes = {}
    rclpy.init(args=[])
    try:
        with ChildProcesses(log_dir=out / 'logs') as children:
            for name, command in commands.items():
                children.start(name, command)
            driver = StoryDriver(node_name='watch_test')
            try:
                driver.wait_ready(timeout=60.0, alive=children.check)
                for key, spec in (('first', first), ('replay', replay), ('knocked', knocked)):
                    driver.prepare(spec)
                    outcomes[key] = judge(driver.execute(spec, timeout=TIMEOUT))
            finally:
                children.stop()
                driver.close()
    finally:
        rclpy.try_shutdown()
    log = out / 'logs' / 'behavior_cache.log'
    outcomes['log'] = log.read_text(errors='replace') if log.is_file() else ''
    return outcomes


def test_an_unchanged_replay_is_not_canceled(runs):
    assert runs['first'].held, runs['first'].failures
    replay = runs['replay']
    assert replay.mode is RunMode.REPLAY and replay.replayed == 8, (
        replay.failures, replay.check_failure)
    assert replay.canceled == () and replay.knock is None
    assert replay.held, replay.failures


def test_a_knock_during_the_approach_cancels_it_mid_motion_and_hands_back_step_0(runs):
    run = runs['knocked']
    knock = run.knock
    assert knock is not None, 'the robot reported no knock'
    # the cache canceled step 0 while it moved, and said so in a during-check failure
    assert [step for step, _ in run.canceled] == [0], (run.check_failure, run.canceled)
    assert 'during step 0' in run.check_failure and 'object' in run.check_failure
    assert knock.outcome == 'canceled', knock
    assert math.isfinite(knock.cancel_at) and 0.0 < knock.reaction < 0.5, knock
    # the arm stopped well short of where the recorded approach ends
    assert knock.stopped_short >= MIN_STOPPED_SHORT, knock
    # the agent did the task from step 0, from the world as it is now
    assert run.agent_calls == (0,) and run.replayed == 0 and run.by_agent == 8
    assert run.mode is RunMode.HANDOFF
    assert run.held, (run.failures, run.message)
