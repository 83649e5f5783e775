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
The stop on every path next to a replayed step's (issue 43, items 1 and 2), on the mobile base.

The base's goto refuses cancels (rclpy's default cancel callback) or ignores every stop
(mobile_base_helpers); its ``base_stop`` service is the goto's stop, ``stop_timeout`` 2 s.

* A task canceled while its agent has it, the agent ignoring the cancel (rclpy's default
  cancel callback) while its goto runs through the proxy: the task is over only once that
  goto went through the stop (the cancel refused, the stop service, the rest), its result
  says so, and the next task never drives the base while the agent's goto runs. The same
  when the goto is a subtask's: the agent sent the subtask to the cache, which handed it
  back to the agent, whose goto runs when the parent is canceled.
* A robot that did not stop is remembered: the node refuses new tasks, ``~/replay`` and
  proxied goals, naming the server, and ``/diagnostics`` says so, until a person confirms
  the robot at rest (``muscle-mem standstill --who``, the name recorded) or its sensors see
  it at rest.
"""

from __future__ import annotations

from collections.abc import Iterator
import json
import math
import os
import subprocess
import sys
import threading
import time

from action_msgs.msg import GoalStatus
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from mobile_base_helpers import BaseHarness, fetch_plan, fresh_world
from mobile_helpers import TAG_HOME
from muscle_mem_demo_interfaces.action import MoveToPose
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import Replay
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from node_helpers import SUBTASK, wait_until
import pytest

PARAMS = json.dumps({'bin': 1})
STOP_TIMEOUT = 2.0
DIAGNOSTICS: list[DiagnosticStatus] = []
"""The cache's statuses on /diagnostics, as they arrive."""


@pytest.fixture(scope='module')
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BaseHarness]:
    h = BaseHarness(tmp=tmp_path_factory.mktemp('stop_paths'), subtasks=True)
    prefix = h.names.prefix
    h.start_cache(stop_timeout=STOP_TIMEOUT,
                  **{'actions.goto.stop_service': f'/{prefix}/base_stop'})
    h.client.create_subscription(DiagnosticArray, '/diagnostics', lambda msg: DIAGNOSTICS.extend(
        st for st in msg.status if st.hardware_id == f'/{h.names.node}'), 10)
    yield h
    h.close()


@pytest.fixture
def world(harness: BaseHarness) -> Iterator[BaseHarness]:
    harness.agent.ignores_cancels = False
    yield from fresh_world(harness)
    harness.agent.ignores_cancels = False


def confirm(h: BaseHarness, *who: str) -> subprocess.CompletedProcess:
    """Run ``muscle-mem standstill`` against the harness's cache (``who``: its --who)."""
    return subprocess.run(
        [sys.executable, '-m', 'muscle_mem_ros.cli', 'standstill', '--node-name',
         h.names.node, *(('--who', who[0]) if who else ())],
        capture_output=True, text=True, timeout=60, env=dict(os.environ))


def not_stopped(h: BaseHarness, task: str, silence: bool = False) -> int:
    """
    Learn ``task``, replay it with a base that ignores every stop; return the goto's index.

    :param silence: The knocked tag says nothing more from then on (the sensors cannot show
        the rest).
    """
    done = h.run_task(task, PARAMS)
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    h.robot.reset()
    # the replayed goto runs on past every wait of the stop, at about 0.25 m/s: 6 cm in a
    # rest_window, more than the odometry's tolerance
    h.robot.duration = 5.0
    gotos = len(h.robot.gotos)

    def knock() -> None:
        goto = h.robot.wait_goto(gotos, 20.0)
        if goto is not None:
            time.sleep(max(0.0, goto.started + 0.3 - time.monotonic()))
            h.robot.move_tag((TAG_HOME[0] + 0.15, TAG_HOME[1]))
            if silence:
                h.robot.show_tag(False)

    h.robot.manners = 'deaf'
    threading.Thread(target=knock, daemon=True).start()
    done = h.run_task(task, PARAMS)
    assert done.status == GoalStatus.STATUS_ABORTED, done.result.message
    assert 'the robot did not stop' in done.result.message, done.result.message
    return gotos


def proxied_goto(h: BaseHarness) -> tuple[int, str]:
    """Send a goto through the cache's proxy; return its status and error_string."""
    client = ActionClient(h.client, MoveToPose, h.names.proxy(f'/{h.names.prefix}/goto'))
    try:
        assert client.wait_for_server(timeout_sec=10.0)
        goal = MoveToPose.Goal()
        goal.target.pose.position.x, goal.target.pose.position.y = 1.0, 0.0
        goal.target.pose.orientation.w = 1.0
        handle = h.wait(client.send_goal_async(goal))
        assert handle.accepted
        wrapped = h.result(handle, 30.0)
        return wrapped.status, wrapped.result.error_string
    finally:
        client.destroy()


def robot_value(h: BaseHarness) -> tuple[int, str]:
    """Return the newest /diagnostics status's level and its ``robot`` value."""
    status = DIAGNOSTICS[-1]
    return status.level, next((kv.value for kv in status.values if kv.key == 'robot'), '')


def test_a_task_canceled_while_its_agent_ignores_the_cancel_ends_once_the_goto_stopped(world):
    h = world
    h.agent.ignores_cancels = True  # rclpy's default: its goal and its goto run on
    h.robot.manners = 'refuse'
    h.robot.duration = 6.0
    gotos = len(h.robot.gotos)
    handle = h.send_task('agent_canceled', PARAMS)
    assert handle.accepted
    goto = h.robot.wait_goto(gotos)
    assert goto is not None
    time.sleep(0.5)
    h.wait(handle.cancel_goal_async())
    wrapped = h.result(handle, 40.0)
    answered = time.monotonic()
    message = wrapped.result.message
    print(f'result: {message}')
    assert not math.isnan(goto.ended) and goto.ended < answered, 'the task ended first'
    assert goto.refused == 1 and h.robot.stops == 1 and goto.short_by() > 0.5, goto
    assert wrapped.status == GoalStatus.STATUS_CANCELED, message
    assert 'refused the cancel' in message and 'base_stop' in message, message
    assert 'at rest after' in message, message
    assert 'the agent was stopped' not in message, message
    done = h.run_task('agent_canceled_next', PARAMS)  # the next task: the base is stopped
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert not h.robot.overlaps, f'two motions at once: {h.robot.overlaps}'


def test_a_task_canceled_while_a_subtasks_agent_drives_ends_once_that_goto_stopped(world):
    h = world
    parent, pick = 'agent_sub_canceled', 'agent_sub_canceled_pick'
    plans = h.agent.subtasks.plans
    plans[pick] = lambda tag, params: fetch_plan(tag, params)[:2]  # standoff, grip
    plans[parent] = lambda tag, params: [(SUBTASK, (pick, {}))] + fetch_plan(tag, params)[2:]
    h.agent.ignores_cancels = True
    h.robot.manners = 'refuse'
    h.robot.duration = 6.0
    gotos = len(h.robot.gotos)
    handle = h.send_task(parent, PARAMS)
    assert handle.accepted
    goto = h.robot.wait_goto(gotos)  # the subtask's agent drives it, through the proxy
    assert goto is not None
    assert [c.task for c in h.agent.calls[-2:]] == [parent, pick]
    time.sleep(0.5)
    h.wait(handle.cancel_goal_async())
    wrapped = h.result(handle, 40.0)
    answered = time.monotonic()
    message = wrapped.result.message
    print(f'result: {message}')
    assert not math.isnan(goto.ended) and goto.ended < answered, 'the task ended first'
    assert goto.refused == 1 and h.robot.stops == 1 and goto.short_by() > 0.5, goto
    assert wrapped.status == GoalStatus.STATUS_CANCELED, message
    assert 'base_stop' in message and 'the agent was stopped' not in message, message
    call = h.agent.subtasks.calls[-1]
    assert call.task == pick and call.done.is_set() and not call.ok, call
    done = h.run_task('agent_sub_canceled_next', PARAMS)
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert not h.robot.overlaps, f'two motions at once: {h.robot.overlaps}'


def test_a_robot_that_did_not_stop_is_refused_until_a_person_confirms_it_at_rest(world):
    h = world
    gotos = not_stopped(h, 'stuck_confirm', silence=True)  # the sensors cannot see the rest
    server = f'/{h.names.prefix}/goto'
    calls, moves = len(h.agent.calls), len(h.robot.gotos)
    refused = h.run_task('stuck_other', PARAMS)
    assert refused.status == GoalStatus.STATUS_ABORTED, refused.result.message
    assert server in refused.result.message and 'did not stop' in refused.result.message
    replay = h.call(Replay, 'replay', task='stuck_confirm', params_json=PARAMS)
    assert not replay.success and server in replay.message, replay.message
    status, why = proxied_goto(h)
    assert status == GoalStatus.STATUS_ABORTED and server in why, why
    assert len(h.agent.calls) == calls and len(h.robot.gotos) == moves, 'the robot was moved'
    assert wait_until(lambda: server in robot_value(h)[1], 5.0), DIAGNOSTICS[-1:]
    assert robot_value(h)[0] == DiagnosticStatus.ERROR
    wait_until(lambda: not math.isnan(h.robot.gotos[gotos].ended), 15.0)
    nameless = confirm(h, '')
    assert nameless.returncode != 0, nameless.stdout
    assert server in h.run_task('stuck_other', PARAMS).result.message  # still refused
    done = confirm(h, 'ann')
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'ann' in done.stdout and server in done.stdout, done.stdout
    said = [e.detail for e in h.wait_events(CacheEvent.STOPPED, '')]
    assert any('ann' in d and 'confirmed' in d for d in said), said
    assert 'ann' in h.cache.output()
    h.robot.reset()  # the tag back, a base that stops
    done = h.run_task('stuck_other', PARAMS)
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert wait_until(lambda: robot_value(h)[1] == 'at rest', 5.0), DIAGNOSTICS[-1:]


def test_a_robot_that_did_not_stop_takes_tasks_again_once_its_sensors_see_it_at_rest(world):
    h = world
    gotos = not_stopped(h, 'stuck_rest')
    server = f'/{h.names.prefix}/goto'
    refused = h.run_task('stuck_rest', PARAMS)
    assert server in refused.result.message, refused.result.message
    assert wait_until(lambda: not math.isnan(h.robot.gotos[gotos].ended), 15.0)
    assert wait_until(lambda: any('seen at rest' in e.detail for e in h.events_of(
        CacheEvent.STOPPED, '')), 15.0), [e.detail for e in h.events_of(CacheEvent.STOPPED)]
    h.robot.reset()
    done = h.run_task('stuck_rest', PARAMS)
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
