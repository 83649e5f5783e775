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
A stop is a stop, on a robot unlike the demo: the mobile base with a real server's manners.

The base's goto server answers a cancel as real servers do (mobile_base_helpers): it
refuses it (rclpy's default cancel callback), or accepts and brakes for a second
before it reports CANCELED, or ignores every stop. The cache configured with the
base's ``base_stop`` service as the goto's stop and a 2 s ``stop_timeout``:

* a knock during a replayed goto whose cancel is refused: the stop service is called,
  the base halts, and only then is the agent handed the task; never two motions at once;
* the same with a braking server: the hand-back waits for the braking and the rest;
* a base that does not stop at all: the task ends ABORTED naming the server, and the
  agent is not asked (the node takes goals again once its sensors see the base at rest);
* a proxied goal the agent cancels on a server that refuses: the proxy stops it with
  the tool's stop and answers the agent only once the base halted;
* a goal whose cancel is refused and whose stop does nothing, ending (SUCCEEDED) within
  ``stop_timeout``: the motion ran to its end, so it is a step that ran, judged by its
  post-check (which fails here: the agent goes on from the next step);
* ``muscle-mem run-bt`` of the exported tree, the same knock and refusal: run-bt stops
  the goal the same way before it asks the agent;
* a subtask the cache replays for its parent, knocked with the cancel refused: the
  subtask is handed to the agent only once the base stopped.

Events say each happening of the stop (STOPPED), stamped when it happened, after the
CHECK_FAILED stamped when the check failed; a hand-back mid-task is no MISS.
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
from mobile_base_helpers import BaseHarness, fetch_plan, fresh_world, Goto
from mobile_helpers import TAG_HOME
from muscle_mem_demo_interfaces.action import MoveToPose
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.cli import main
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from node_helpers import SUBTASK, TaskRun, wait_until
import pytest
import yaml

PARAMS = json.dumps({'bin': 1})
STOP_TIMEOUT = 2.0


@pytest.fixture(scope='module')
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BaseHarness]:
    h = BaseHarness(tmp=tmp_path_factory.mktemp('stop_mobile'), subtasks=True)
    prefix = h.names.prefix
    h.stop_params = {'stop_timeout': STOP_TIMEOUT,
                     'actions.goto.stop_service': f'/{prefix}/base_stop'}
    h.start_cache(**h.stop_params)
    yield h
    h.close()


@pytest.fixture
def world(harness: BaseHarness) -> Iterator[BaseHarness]:
    yield from fresh_world(harness)


def run(h: BaseHarness, task: str) -> tuple[TaskRun, int, int]:
    calls, gotos = len(h.agent.calls), len(h.robot.gotos)
    return h.run_task(task, PARAMS), calls, gotos


def learn(h: BaseHarness, task: str) -> None:
    done, calls, _ = run(h, task)
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert len(h.agent.calls) == calls + 1
    h.wait_events(CacheEvent.MISS, task)  # its own: the first run learned it
    h.robot.reset()


def knock_during(h: BaseHarness, index: int, delay: float, manners: str) -> list[float]:
    """Knock the tag 15 cm ``delay`` s into goto ``index``; the base has ``manners`` then."""
    at: list[float] = []

    def knock() -> None:
        goto = h.robot.wait_goto(index, 20.0)
        if goto is None:
            return
        time.sleep(max(0.0, goto.started + delay - time.monotonic()))
        at.append(h.robot.move_tag((TAG_HOME[0] + 0.15, TAG_HOME[1])))

    h.robot.manners = manners
    threading.Thread(target=knock, daemon=True).start()
    return at


def stops(h: BaseHarness, task: str) -> list[CacheEvent]:
    return h.events_of(CacheEvent.STOPPED, task)


def seconds(stamp: object) -> float:
    return stamp.sec + stamp.nanosec * 1e-9  # type: ignore[attr-defined]


def assert_handed_back_stopped(h: BaseHarness, task: str, done: TaskRun, calls: int,
                               gotos: int) -> tuple[Goto, Goto]:
    """Assert the agent got the task only after the stopped goto ended; return both gotos."""
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert len(h.agent.calls) == calls + 1 and h.agent.calls[-1].resume_from_step == 0
    stopped, after = h.robot.gotos[gotos], h.robot.gotos[gotos + 1]
    assert not h.robot.overlaps, f'two motions at once: {h.robot.overlaps}'
    assert not math.isnan(stopped.ended) and after.started > stopped.ended
    assert len(h.events_of(CacheEvent.MISS, task)) == 1, 'a hand-back mid-task is no MISS'
    return stopped, after


def knocked_replay(h: BaseHarness, task: str, manners: str) -> tuple[Goto, Goto, list[float]]:
    """Learn ``task``, replay it knocked 0.5 s into its first goto; return the gotos, knock."""
    learn(h, task)
    gotos = len(h.robot.gotos)
    knocked = knock_during(h, gotos, 0.5, manners)
    done, calls, _ = run(h, task)
    assert knocked, 'the goto never started'
    return (*assert_handed_back_stopped(h, task, done, calls, gotos), knocked)


def test_a_refused_cancel_gets_the_stop_service_and_the_agent_a_stopped_base(world):
    h = world
    stopped, after, _ = knocked_replay(h, 'stop_refused', 'refuse')
    assert stopped.refused == 1 and h.robot.stops == 1
    assert stopped.short_by() > 0.05, stopped  # halted by the stop, far from its goal
    said = [e.detail for e in h.wait_events(CacheEvent.STOPPED, 'stop_refused', 4)]
    print(f'stop: {said}; hand-back {(after.started - stopped.ended) * 1000:.0f} ms after '
          'the goal ended')
    assert any('refused the cancel' in d for d in said), said
    assert any('base_stop' in d for d in said), said
    assert any('reported the goal ABORTED' in d for d in said), said
    assert any(d.startswith('at rest after') for d in said), said
    failed = h.wait_events(CacheEvent.CHECK_FAILED, 'stop_refused')[0]
    first_stop = min(seconds(e.stamp) for e in stops(h, 'stop_refused'))
    assert seconds(failed.stamp) <= first_stop  # stamped when the check failed
    assert h.wait_events(CacheEvent.HANDOFF, 'stop_refused')[0].step == 0


def test_a_braking_server_is_waited_for_before_the_agent_gets_the_base(world):
    h = world
    stopped, after, knocked = knocked_replay(h, 'stop_brake', 'brake')
    assert stopped.ended - stopped.canceled_at >= h.robot.brake - 0.05  # it braked
    assert h.robot.stops == 0  # the cancel was accepted: no stop needed
    said = [e.detail for e in h.wait_events(CacheEvent.STOPPED, 'stop_brake', 3)]
    print(f'stop: {said}; trip to hand-back {(after.started - knocked[0]) * 1000:.0f} ms')
    assert any('accepted the cancel' in d for d in said), said
    assert any('reported the goal CANCELED' in d for d in said), said
    failed = h.wait_events(CacheEvent.CHECK_FAILED, 'stop_brake')[0]
    # stamped when the check failed: before the braking ended, not when the wait did
    assert seconds(failed.stamp) < seconds(
        next(e for e in stops(h, 'stop_brake') if 'CANCELED' in e.detail).stamp) - 0.5


def test_a_base_that_does_not_stop_ends_the_task_without_the_agent(world):
    h = world
    learn(h, 'stop_never')
    h.robot.duration = 8.0  # the replayed goto is slow: it runs on past every wait
    gotos = len(h.robot.gotos)
    knocked = knock_during(h, gotos, 0.3, 'deaf')
    done, calls, _ = run(h, 'stop_never')
    assert knocked, 'the goto never started'
    assert done.status == GoalStatus.STATUS_ABORTED, done.result.message
    assert len(h.agent.calls) == calls, 'the agent was handed a moving robot'
    assert f'/{h.names.prefix}/goto' in done.result.message
    assert 'the robot did not stop' in done.result.message, done.result.message
    assert 'the agent was not asked' in done.result.message
    said = [e.detail for e in h.wait_events(CacheEvent.STOPPED, 'stop_never', 3)]
    assert any('did not stop' in d for d in said), said
    assert h.wait_events(CacheEvent.CHECK_FAILED, 'stop_never')[0].sensor == 'tag'
    assert len(h.events_of(CacheEvent.HANDOFF, 'stop_never')) == 1  # the learning run's
    assert len(h.events_of(CacheEvent.MISS, 'stop_never')) == 1  # the learning run's
    wait_until(lambda: not math.isnan(h.robot.gotos[gotos].ended), 10.0)
    assert len(h.robot.gotos) == gotos + 1 and not h.robot.overlaps
    # the node refuses every goal until its sensors see the base at rest (issue 43 item 2)
    assert wait_until(lambda: any('seen at rest' in e.detail for e in h.events_of(
        CacheEvent.STOPPED, '')), 10.0), [e.detail for e in h.events_of(CacheEvent.STOPPED)]


def test_a_proxied_goal_the_agent_cancels_ends_only_once_the_base_stopped(world):
    h = world
    h.robot.manners = 'refuse'
    client = ActionClient(h.client, MoveToPose, h.names.proxy(f'/{h.names.prefix}/goto'))
    try:
        assert client.wait_for_server(timeout_sec=10.0)
        gotos = len(h.robot.gotos)
        goal = MoveToPose.Goal()
        goal.target.pose.position.x, goal.target.pose.position.y = 3.0, 0.0
        goal.target.pose.orientation.w = 1.0
        goal.duration.sec = 6
        handle = h.wait(client.send_goal_async(goal))
        assert handle.accepted
        goto = h.robot.wait_goto(gotos)
        assert goto is not None
        time.sleep(0.5)
        canceled_at = time.monotonic()
        h.wait(handle.cancel_goal_async())
        wrapped = h.wait(handle.get_result_async(), 15.0)
        answered = time.monotonic()
        assert goto.refused == 1 and h.robot.stops == 1, goto
        assert wrapped.status == GoalStatus.STATUS_ABORTED  # halted by the stop
        assert not math.isnan(goto.ended) and goto.ended < answered
        assert goto.short_by() > 1.0 and answered - canceled_at < STOP_TIMEOUT * 2
        assert 'proxied goal stopped' in h.cache.output()
    finally:
        client.destroy()


def test_a_goal_that_succeeds_after_its_refused_cancel_is_judged_by_its_post_check(world):
    h = world
    learn(h, 'stop_late')
    gotos = len(h.robot.gotos)
    knocked = knock_during(h, gotos, 0.3, 'deaf')  # refuses the cancel, ignores the stop
    done, calls, _ = run(h, 'stop_late')
    assert knocked, 'the goto never started'
    goto = h.robot.gotos[gotos]
    assert goto.refused == 1 and goto.stopped is None and goto.short_by() == 0.0, goto
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    call = h.agent.calls[-1]
    assert len(h.agent.calls) == calls + 1 and call.steps_done == 1, call
    assert h.robot.gotos[gotos + 1].started > goto.ended and not h.robot.overlaps
    assert 'the goal succeeded before its cancel arrived' in h.cache.output()
    said = [e.detail for e in h.wait_events(CacheEvent.STOPPED, 'stop_late', 4)]
    assert any('reported the goal SUCCEEDED' in d for d in said), said


def test_run_bt_stops_a_refused_goal_before_it_asks_the_agent(world):
    h = world
    learn(h, 'stop_bt')
    tree = h.tmp / 'stop_bt.bt.yaml'
    assert main(['export', str(h.tmp / 'cache.db'), 'stop_bt', '--bt', 'py_trees', '--out',
                 str(tree), '--params', str(h.tmp / 'params.yaml'), '--node-name',
                 h.names.node]) == 0
    params = h.tmp / 'run_bt_stop.yaml'
    params.write_text(yaml.safe_dump({'/**': {'ros__parameters': h.values(**h.stop_params)}}))
    gotos, calls = len(h.robot.gotos), len(h.agent.calls)
    knocked = knock_during(h, gotos, 0.5, 'refuse')
    done = subprocess.run(
        [sys.executable, '-m', 'muscle_mem_ros.cli', 'run-bt', str(tree), '--ros-args',
         '--params-file', str(params)],
        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    out = done.stdout + done.stderr
    assert knocked, out
    assert done.returncode == 0, out
    assert len(h.agent.calls) == calls + 1 and h.agent.calls[-1].resume_from_step == 0, out
    stopped, after = h.robot.gotos[gotos], h.robot.gotos[gotos + 1]
    assert stopped.refused == 1 and h.robot.stops == 1, out
    assert not h.robot.overlaps and after.started > stopped.ended, out
    assert 'refused the cancel' in out and 'at rest after' in out, out


def test_a_knocked_subtask_is_handed_back_only_once_the_base_stopped(world):
    h = world
    pick, parent = 'stop_sub_pick', 'stop_sub'
    plans = h.agent.subtasks.plans
    plans[pick] = lambda tag, params: fetch_plan(tag, params)[:2]  # standoff, grip
    plans[parent] = lambda tag, params: [(SUBTASK, (pick, {}))] + fetch_plan(tag, params)[2:]
    done, calls, _ = run(h, parent)  # learned: the parent, and the pick it calls
    assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
    assert [c.task for c in h.agent.calls[calls:]] == [parent, pick]
    h.robot.reset()
    gotos = len(h.robot.gotos)
    knocked = knock_during(h, gotos, 0.5, 'refuse')  # the pick's replayed goto
    done, calls, _ = run(h, parent)
    assert knocked, 'the goto never started'
    asked = h.agent.calls[calls:]
    assert asked and asked[0].task == pick and asked[0].resume_from_step == 0, asked
    stopped, after = h.robot.gotos[gotos], h.robot.gotos[gotos + 1]
    assert stopped.refused == 1 and h.robot.stops == 1, stopped
    assert not h.robot.overlaps, f'two motions at once: {h.robot.overlaps}'
    assert not math.isnan(stopped.ended) and after.started > stopped.ended
    said = [e.detail for e in h.wait_events(CacheEvent.STOPPED, pick, 4)]
    assert any('refused the cancel' in d for d in said), said
    assert any(d.startswith('at rest after') for d in said), said
    assert len(h.events_of(CacheEvent.MISS, pick)) == 1, 'a hand-back mid-task is no MISS'
