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
A stop is a stop on the MuJoCo arm: the agent gets the arm only once it is at rest.

The demo's three processes (sim robot at rtf 1, the cache with config/sim_demo.yaml plus the
test's own params, the agent); the agent does the task once, then the cube is knocked 7 cm
0.15 s into the replay's approach (step 0, a MoveToPose), and the sim robot's action servers
answer the cache's cancel with a real controller's manners (robot_node ``cancel_manners``):

* ``refuse`` with the tool's ``stop_goal: '{}'`` (the demo's all-zero MoveToPose hold): the
  cache sends the hold, the arm stops where it is, the agent gets the task only after the arm
  is at rest, and the robot never runs two motions at once;
* ``brake``: the cancel is accepted and the arm decelerates for ``brake_time``; the hand-back
  waits for the braking and the rest;
* ``refuse`` with no stop configured and an approach (4 s) longer than ``stop_timeout``: the
  task ends ABORTED naming the server and saying the robot did not stop; the agent is not
  asked.

Before the stop was a stop (73abcf3) the cache waited up to 2 s for a canceled goal's result
and then handed the task back whatever the server said: with a refusing server the agent's
first goal started while the approach still ran (the first test's overlap check, and no
STOPPED events at all), the braking arm was handed over with no rest wait reported, and the
third case handed a moving arm to the agent instead of ending the task.
"""

from __future__ import annotations

import os
from pathlib import Path

from muscle_mem_demo.processes import ChildProcesses, config_path, node_commands
from muscle_mem_demo.story import (
    Expectation,
    judge,
    KNOCK_POSITION,
    RunMode,
    RunOutcome,
    RunSpec,
    STORY,
)
import pytest
import rclpy

RTF = 1.0
TIMEOUT = 120.0
BRAKE_TIME = 0.6
SERVER = '/arm/move_to_pose'

KNOCKED = RunSpec(number=2, title='knocked during step 0', knock=KNOCK_POSITION,
                  expect=Expectation(mode=RunMode.HANDOFF, replayed=0, by_agent=8,
                                     agent_calls=(0,), canceled_step=0))


def _params_file(path: Path, values: dict[str, object]) -> Path:
    """Write the cache's extra parameters (node ``muscle_mem``) as a params file."""
    lines = ['muscle_mem:', '  ros__parameters:']
    for key, value in values.items():
        text = f"'{value}'" if isinstance(value, str) else repr(value)
        lines.append(f'    {key}: {text}')
    path.write_text('\n'.join(lines) + '\n')
    return path


def _story(tmp: Path, *, robot: dict[str, object], cache: dict[str, object],
           agent: dict[str, object] | None = None) -> dict[str, RunOutcome]:
    """Learn the task, then replay it with the cube knocked during step 0; return both."""
    from muscle_mem_demo.driver import StoryDriver

    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    commands = node_commands(rtf=RTF, think_time=0.05, store_path=str(tmp / 'cache.db'),
                             params_file=config_path('sim_demo.yaml'))
    if cache:
        commands['behavior_cache'] += ['--params-file',
                                       str(_params_file(tmp / 'stop.yaml', cache))]
    for name, values in (('sim_robot', robot), ('demo_agent', agent or {})):
        for key, value in values.items():
            commands[name] += ['-p', f'{key}:={value}']
    outcomes = {}
    rclpy.init(args=[])
    try:
        with ChildProcesses(log_dir=tmp / 'logs') as children:
            for name, command in commands.items():
                children.start(name, command)
            driver = StoryDriver(node_name='stop_test')
            try:
                driver.wait_ready(timeout=60.0, alive=children.check)
                for key, spec in (('first', STORY[0]), ('knocked', KNOCKED)):
                    driver.prepare(spec)
                    outcomes[key] = judge(driver.execute(spec, timeout=TIMEOUT))
            finally:
                children.stop()
                driver.close()
    finally:
        rclpy.try_shutdown()
    log = tmp / 'logs' / 'behavior_cache.log'
    print(log.read_text(errors='replace')[-3000:] if log.is_file() else 'no cache log')
    return outcomes


def _knocked_goal(run: RunOutcome) -> dict[str, object]:
    goals = sorted(run.goals, key=lambda g: g['started'])
    assert goals and goals[0]['action'] == 'move_to_pose', goals
    return goals[0]


def _assert_handed_back_at_rest(run: RunOutcome) -> tuple[dict, dict]:
    """Assert the agent did the task from step 0, its first goal after the knocked one ended."""
    assert run.success and run.agent_calls == (0,) and run.by_agent == 8, (
        run.message, run.agent_calls)
    assert run.mode is RunMode.HANDOFF
    assert [step for step, _ in run.canceled] == [0], (run.check_failure, run.canceled)
    assert not run.overlaps, f'two motions at once: {run.goals}'
    motions = sorted((g for g in run.goals if not g['hold']), key=lambda g: g['started'])
    knocked, after = motions[0], motions[1]
    assert after['started'] > knocked['ended'], (knocked, after)
    said = [detail for _, detail in run.stops]
    assert any(d.startswith('at rest after') for d in said), said
    rest_at = next(at for at, d in run.stops if d.startswith('at rest after'))
    # the CHECK_FAILED is stamped at the trip, before the stop's happenings
    assert run.check_failed_at <= run.stops[0][0] <= rest_at, (run.check_failed_at, run.stops)
    return knocked, after


@pytest.fixture(scope='module')
def refused(tmp_path_factory):
    return _story(tmp_path_factory.mktemp('refused'), robot={'cancel_manners': 'refuse'},
                  cache={'actions.arm_pose.stop_goal': '{}'})  # the arm: its default hold


@pytest.fixture(scope='module')
def braked(tmp_path_factory):
    return _story(tmp_path_factory.mktemp('braked'),
                  robot={'cancel_manners': 'brake', 'brake_time': BRAKE_TIME}, cache={})


@pytest.fixture(scope='module')
def never(tmp_path_factory):
    # sim_demo.yaml gives the arm's tools their stop (aac9243): this case has none
    return _story(tmp_path_factory.mktemp('never'), robot={'cancel_manners': 'refuse'},
                  cache={'stop_timeout': 1.5, 'actions.arm_pose.stop_goal': ''},
                  agent={'move_time': 4.0})


def test_a_refused_cancel_gets_the_hold_goal_and_the_agent_an_arm_at_rest(refused):
    assert refused['first'].held, refused['first'].failures
    run = refused['knocked']
    knocked, after = _assert_handed_back_at_rest(run)
    assert knocked['cancel'] == 'refused', knocked
    holds = [g for g in run.goals if g['hold']]
    assert len(holds) == 1 and holds[0]['status'] == 'succeeded', run.goals
    # the hold ended the approach (ABORTED: preempted by a hold), mid-motion
    assert knocked['status'] == 'aborted' and knocked['ended'] >= holds[0]['started'], run.goals
    assert run.knock is not None and run.knock.stopped_short >= 0.03, run.knock
    said = [detail for _, detail in run.stops]
    print(f'stop: {said}; at rest {run.rest_after * 1000:.0f} ms after the cancel; '
          f"agent's first goal {(after['started'] - knocked['ended']) * 1000:.0f} ms after "
          'the approach ended')
    assert any(f'{SERVER} refused the cancel' in d for d in said), said
    assert any(f'stop goal sent to {SERVER}' in d for d in said), said
    assert any(f'{SERVER} reported the goal ABORTED' in d for d in said), said


def test_a_braking_arm_is_waited_for_before_the_agent_gets_it(braked):
    assert braked['first'].held, braked['first'].failures
    run = braked['knocked']
    knocked, after = _assert_handed_back_at_rest(run)
    assert knocked['cancel'] == 'accepted' and knocked['status'] == 'canceled', knocked
    assert knocked['ended'] - knocked['cancel_at'] >= BRAKE_TIME - 0.05, knocked  # it braked
    assert not any(g['hold'] for g in run.goals), run.goals  # accepted: no stop needed
    said = [detail for _, detail in run.stops]
    print(f'stop: {said}; braked {(knocked["ended"] - knocked["cancel_at"]) * 1000:.0f} ms, '
          f'at rest {run.rest_after * 1000:.0f} ms after the cancel')
    assert any(f'{SERVER} accepted the cancel' in d for d in said), said
    assert any(f'{SERVER} reported the goal CANCELED' in d for d in said), said
    assert run.rest_after >= BRAKE_TIME - 0.05, run.stops  # the hand-back waited for it


def test_an_arm_that_does_not_stop_ends_the_task_without_the_agent(never):
    assert never['first'].held, never['first'].failures
    run = never['knocked']
    assert not run.success, run.message
    assert run.agent_calls == (), 'the agent was handed a moving arm'
    assert SERVER in run.message and 'the robot did not stop' in run.message, run.message
    assert 'step 0' in run.message and 'the agent was not asked' in run.message, run.message
    said = [detail for _, detail in run.stops]
    print(f'result: {run.message}; stop: {said}; check failed: {run.check_failure!r} '
          f'{run.canceled}')
    assert any(f'{SERVER} refused the cancel' in d for d in said), said
    assert any('did not stop' in d for d in said), said
    assert not run.overlaps, run.goals
