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
``muscle-mem run-bt`` on a robot unlike the demo arm: the mobile picker (mobile_helpers).

The cache (a real process) learns a fetch from the picker's agent; the task is exported
as a behavior tree and run by ``muscle-mem run-bt`` (a real process, real DDS) against
the picker's own GetPlan and SetBool servers. What is checked: the hand-off's resume
point (``resume_from_step`` and ``steps_done`` both the steps the tree did, as the cache
sends them), one step numbering in the output (ExecuteTask's, learned ids labelled), and
a tampered document refused before the robot moves.
"""

from __future__ import annotations

import json
from pathlib import Path
import re
import subprocess
import sys

from action_msgs.msg import GoalStatus
from core_helpers import subprocess_env
from mobile_helpers import MobileHarness
from muscle_mem_ros.bt.yamlfile import dump, load
from muscle_mem_ros.cli import main
from node_helpers import write_params
import pytest


@pytest.fixture(scope='module')
def h(tmp_path_factory):
    h = MobileHarness(tmp=tmp_path_factory.mktemp('mobile_bt'))
    h.start_cache()
    h.robot.reset()
    result = h.run_task('fetch', json.dumps({'bin': 1}))
    assert result.status == GoalStatus.STATUS_SUCCEEDED, result.result.message
    assert len(h.agent.calls) == 1  # learned: goto the tag, grip, goto the shelf, release
    # run-bt's node is named muscle_mem: the same parameters under that name
    h.bt_params = write_params(h.tmp / 'robot.yaml', 'muscle_mem', h.values())
    h.tree = h.tmp / 'fetch.bt.yaml'
    assert main(['export', str(h.tmp / 'cache.db'), 'fetch', '--bt', 'py_trees', '--out',
                 str(h.tree), '--params', str(h.bt_params)]) == 0
    yield h
    h.close()


def run_bt(h: MobileHarness, tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, '-m', 'muscle_mem_ros.cli', 'run-bt', str(tree), '--ros-args',
         '--params-file', str(h.bt_params)],
        capture_output=True, text=True, env=subprocess_env(), timeout=120)


def learned_ids(tree: Path) -> dict[int, int]:
    """Return the document's learned step id -> its step index in a run."""
    return {step.id: depth for depth, step, _ in load(tree.read_text()).walk()}


def test_a_hand_off_after_two_steps_resumes_from_step_2_with_2_steps_done(h):
    h.robot.reset()
    start, calls = len(h.robot.gotos), len(h.agent.calls)
    h.robot.refuse_at = {start + 1}  # the tree's second goto (step 2) gets an empty plan
    done = run_bt(h, h.tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(h.agent.calls) == calls + 1, done.stdout
    call = h.agent.calls[-1]
    assert (call.resume_from_step, call.steps_done) == (2, 2), (call, done.stdout)
    assert 'done: 2 steps by the tree, then the agent from step 2' in done.stdout, done.stdout
    ids = learned_ids(h.tree)
    # one numbering: every 'step N' is a run's step index; learned ids only as 'learned step'
    for line in done.stdout.splitlines():
        for match in re.finditer(r'(learned )?step (\d+)(?: \(learned step (\d+)\))?', line):
            if match.group(1):
                continue
            assert int(match.group(2)) <= 3, line
            if match.group(3):
                assert ids[int(match.group(3))] == int(match.group(2)), line
    assert re.search(r'^step 0 \(learned step \d+\): /\w+/goto', done.stdout, re.M), done.stdout
    assert re.search(r'^step 2 \(learned step \d+\): /\w+/goto', done.stdout, re.M), done.stdout
    assert 'agent asked from step 2: step 2: ' in done.stdout, done.stdout


def test_a_tampered_goal_is_refused_naming_its_step_before_the_robot_moves(h):
    doc = load(h.tree.read_text())
    (step,) = [s for depth, s, _ in doc.walk() if depth == 2]
    step.goal['tolerance'] = 'seven'
    tampered = h.tmp / 'tampered.bt.yaml'
    tampered.write_text(dump(doc))
    h.robot.reset()
    gotos, calls = len(h.robot.gotos), len(h.agent.calls)
    done = run_bt(h, tampered)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f'muscle-mem run-bt: error: step 2 (learned step {step.id}, {step.tool}): its goal '
        "is not a nav_msgs/srv/GetPlan: tolerance: 'seven' is not a float"], done.stderr
    assert len(h.robot.gotos) == gotos and len(h.agent.calls) == calls  # nothing moved
