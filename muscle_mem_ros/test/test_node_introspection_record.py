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
record_from: introspection: the cache learns from service and action introspection events.

The agent here has no idea the cache exists: its clients call the robot's real
servers (no proxy, no remap). Introspection with contents is switched on on
the agent's clients, on the robot's servers, or on both; the cache subscribes to
the event topics, records the agent's calls as steps, and replays them to the
real servers through its own clients, with the agent out of the loop.
"""

from __future__ import annotations

from action_msgs.msg import GoalStatus
from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_interfaces.srv import ListTasks, Replay, StartRecording, StopRecording
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.store import SqliteStore
from node_helpers import (
    Harness, Names, OBJECT_HOME, params, plan, run_cache_to_exit, wait_until,
)
import pytest
from rclpy.action import ActionServer
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import qos_profile_system_default
from rclpy.serialization import deserialize_message
from rclpy.service_introspection import ServiceIntrospectionState
from std_srvs.srv import SetBool
from test_msgs.action import Fibonacci

INTROSPECTION = {'record_from': 'introspection'}
STEP_DELAY = 0.2
"""The agent's think time before each step: the sensors (50 Hz) report between its calls."""


def tools(h: Harness) -> dict:
    """Return the cache's parameter overrides: every tool recorded from introspection."""
    names = h.names
    return {
        'actions.arm': {'server': names.arm, **INTROSPECTION,
                        'type': 'muscle_mem_demo_interfaces/action/FollowJointTrajectory'},
        'actions.fib': {'server': names.fib, 'type': 'test_msgs/action/Fibonacci',
                        **INTROSPECTION},
        'services.gripper': {'server': names.gripper, 'type': 'std_srvs/srv/SetBool',
                             **INTROSPECTION},
    }


def event_topics(h: Harness) -> list[str]:
    names = h.names
    return [f'{names.arm}/_action/send_goal/_service_event',
            f'{names.arm}/_action/get_result/_service_event',
            f'{names.fib}/_action/send_goal/_service_event',
            f'{names.fib}/_action/get_result/_service_event',
            f'{names.gripper}/_service_event']


def unaware_agent(h: Harness) -> None:
    """Point the fake agent's clients at the robot's real servers (it knows of no cache)."""
    agent, names = h.agent, h.names
    group = ReentrantCallbackGroup()
    agent._arm = ActionClient(agent, FollowJointTrajectory, names.arm, callback_group=group)
    agent._fib = ActionClient(agent, Fibonacci, names.fib, callback_group=group)
    agent._gripper = agent.create_client(SetBool, names.gripper, callback_group=group)
    agent.step_delay = STEP_DELAY


def introspect(h: Harness, side: str) -> None:
    """Publish events with contents from the agent's clients, the robot's servers, or both."""
    on, off = ServiceIntrospectionState.CONTENTS, ServiceIntrospectionState.OFF
    agent, robot = h.agent, h.robot
    for client in (agent._arm, agent._fib, agent._gripper):
        client.configure_introspection(agent.get_clock(), qos_profile_system_default,
                                       on if side in ('client', 'both') else off)
    servers = [w for w in robot.waitables if isinstance(w, ActionServer)]
    servers += [s for s in robot.services if s.srv_name == h.names.gripper]
    assert len(servers) == 3
    for server in servers:
        server.configure_introspection(robot.get_clock(), qos_profile_system_default,
                                       on if side in ('server', 'both') else off)
    # The cache's tap must hear the new publishers before the first call.
    for topic in event_topics(h):
        assert wait_until(lambda t=topic: h.client.count_publishers(t) >= 1
                          and h.client.count_subscribers(t) >= 1, 15.0), topic


@pytest.fixture(scope='module')
def harness(tmp_path_factory):
    h = Harness(tmp=tmp_path_factory.mktemp('introspection'))
    unaware_agent(h)
    h.start_cache(**tools(h))
    yield h
    h.close()


@pytest.fixture
def world(harness):
    harness.robot.reset()
    harness.set_mode('learn')
    assert harness.cache is not None and harness.cache.alive(), harness.cache.output()
    yield harness
    assert harness.cache is not None and harness.cache.alive(), harness.cache.output()


def steps_of(h: Harness, task: str) -> list:
    listing = h.call(ListTasks, 'list_tasks', task=task, with_steps=True)
    assert listing.success, listing.message
    (traj,) = listing.trajectories
    return list(traj.steps)


def test_nothing_is_served_for_the_agent(world):
    """With record_from introspection the cache serves no proxy: the agent must call the robot."""
    h = world
    for server in (h.names.arm, h.names.fib):
        assert h.client.count_services(f'{server}/_action/send_goal') == 1
        assert h.client.count_services(f'{h.names.proxy(server)}/_action/send_goal') == 0
    assert h.client.count_services(h.names.gripper) == 1
    assert h.client.count_services(h.names.proxy(h.names.gripper)) == 0
    assert 'recorded from its introspection events' in h.cache.output()


@pytest.mark.parametrize('side', ['client', 'server', 'both'])
def test_learns_from_events_then_replays_without_the_agent(world, side):
    h = world
    introspect(h, side)
    task = f'pick_{side}'
    calls = len(h.agent.calls)
    arm, fib, grip = len(h.robot.arm_goals), len(h.robot.fib_goals), len(h.robot.gripper_requests)
    run = h.run_task(task)
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.success and not run.result.cache_hit
    assert len(h.agent.calls) == calls + 1
    # Each call reached the robot once (no proxy in between) and became one step, also when
    # both sides publish the events.
    assert (len(h.robot.arm_goals), len(h.robot.fib_goals), len(h.robot.gripper_requests)) == (
        arm + 2, fib + 1, grip + 1)
    assert run.result.steps_by_agent == 4, h.cache.output()
    steps = steps_of(h, task)
    assert [s.tool for s in steps] == [h.names.arm, h.names.gripper, h.names.arm, h.names.fib]
    assert [s.kind for s in steps] == ['action', 'service', 'action', 'action']
    assert '"order":5' in steps[3].goal_json
    assert all(sorted(s.pre_sensors) == ['joints', 'object'] for s in steps)
    # An action step seen in the events is traced as a proxied one (sensors, no feedback:
    # the events carry none), from its pre to its post snapshot.
    with SqliteStore(path=h.tmp / 'cache.db', read_only=True) as store:
        traced = [n.step for n in store.path(run.result.trajectory_id)]
    assert [s.trace is not None for s in traced] == [True, False, True, True]
    first = traced[0]
    assert set(first.trace.sensors) == {'joints', 'object'} and first.trace.feedback is None
    assert first.trace.sensors['joints'].values[-1] == first.post.features['joints']
    recorded_arm = h.robot.arm_goals[arm:]
    recorded_grip = h.robot.gripper_requests[grip:]
    recorded_fib = h.robot.fib_goals[fib:]

    h.robot.reset()
    arm, fib, grip = len(h.robot.arm_goals), len(h.robot.fib_goals), len(h.robot.gripper_requests)
    run = h.run_task(task)
    assert run.result.success and run.result.cache_hit, run.result.message
    assert run.result.steps_replayed == 4
    assert len(h.agent.calls) == calls + 1  # the agent was not called again
    decode = deserialize_message
    assert [decode(g, FollowJointTrajectory.Goal) for g in h.robot.arm_goals[arm:]] == [
        decode(g, FollowJointTrajectory.Goal) for g in recorded_arm]
    assert h.robot.gripper_requests[grip:] == recorded_grip
    assert [decode(g, Fibonacci.Goal) for g in h.robot.fib_goals[fib:]] == [
        decode(g, Fibonacci.Goal) for g in recorded_fib]
    assert h.robot.joints == [OBJECT_HOME[0], OBJECT_HOME[1], 0.5]
    # The replay's own calls published events too (server side): none became a step.
    assert len(steps_of(h, task)) == 4


def test_divergence_learns_only_the_agents_branch(world):
    """
    A replay that diverges hands off; only the agent's calls become the branch.

    The robot's servers publish the events, so the replay's own calls (just before
    the recording of the agent's part starts) are in the event stream too.
    """
    h = world
    introspect(h, 'server')
    run = h.run_task('pick_diverge')
    assert run.result.success and run.result.steps_by_agent == 4, run.result.message
    h.robot.reset()
    bumped = (OBJECT_HOME[0] + 0.2, OBJECT_HOME[1] - 0.1, OBJECT_HOME[2])
    h.robot.bump_after = (2, bumped)  # when the gripper call (step 1) finishes
    calls = len(h.agent.calls)
    run = h.run_task('pick_diverge')
    assert run.result.success and not run.result.cache_hit, run.result.message
    assert (run.result.steps_replayed, run.result.steps_by_agent) == (2, 2), h.cache.output()
    assert h.agent.calls[-1].resume_from_step == 2
    branch = run.result.trajectory_id
    h.robot.reset()
    h.robot.bump_after = (2, bumped)
    run = h.run_task('pick_diverge')
    assert run.result.success and run.result.cache_hit, run.result.message
    assert run.result.trajectory_id == branch
    assert len(h.agent.calls) == calls + 1


def test_an_agent_faster_than_the_sensors_still_learns_a_replayable_task(world):
    """
    Check that each step's pre snapshot shows the world after the step before, however fast.

    The agent sends each call as soon as the previous one's result is in, before the
    sensors (50 Hz) reported the arm's new position, and nothing holds it back (no
    proxy). The arm takes 0.3 s per goal. A pre snapshot taken when the call's request
    event arrives would still show the arm before the previous goal ended; the cache
    uses the previous call's post snapshot instead, so the replay's checks pass.
    """
    h = world
    introspect(h, 'client')
    h.agent.step_delay = 0.0
    try:
        h.robot.arm_delay = 0.3
        calls = len(h.agent.calls)
        run = h.run_task('pick_fast')
        assert run.result.success and not run.result.cache_hit, run.result.message
        assert run.result.steps_by_agent == 4, h.cache.output()
        h.robot.reset()
        h.robot.arm_delay = 0.3
        run = h.run_task('pick_fast')
        assert run.result.success and run.result.cache_hit, run.result.message
        assert len(h.agent.calls) == calls + 1
    finally:
        h.agent.step_delay = STEP_DELAY


def test_manual_recording_of_an_agent_that_never_heard_of_the_cache(world):
    """Teach by demonstration: start recording, let the agent work on its own, stop, replay."""
    h = world
    introspect(h, 'client')
    task = 'teach_direct'
    started = h.call(StartRecording, 'start_recording', task=task)
    assert started.success, started.message
    arm = len(h.robot.arm_goals)
    for kind, arg in plan(OBJECT_HOME):
        assert h.agent.do(kind, arg), kind
        h.robot.settle()  # the operator's pace: the sensors report between two commands
    stopped = h.call(StopRecording, 'stop_recording', save=True)
    assert stopped.success and stopped.steps == 4, (stopped.message, h.cache.output())
    taught = h.robot.arm_goals[arm:]

    h.robot.reset()
    arm = len(h.robot.arm_goals)
    replay = h.call(Replay, 'replay', task=task)
    assert replay.success, replay.message
    assert replay.steps_executed == 4
    assert [deserialize_message(g, FollowJointTrajectory.Goal) for g in h.robot.arm_goals[arm:]
            ] == [deserialize_message(g, FollowJointTrajectory.Goal) for g in taught]


def test_failed_and_unrecorded_calls_are_not_steps(world):
    """An aborted goal and a call outside any recording leave nothing behind."""
    h = world
    introspect(h, 'server')
    assert h.agent.do('gripper', True)  # outside a recording: not a step
    started = h.call(StartRecording, 'start_recording', task='teach_abort')
    assert started.success, started.message
    h.robot.abort_next = 1
    assert not h.agent.do('arm', [0.3, 0.2, 0.1])
    h.robot.settle()
    assert h.agent.do('fib', 3)
    stopped = h.call(StopRecording, 'stop_recording', save=True)
    assert stopped.success and stopped.steps == 1, (stopped.message, h.cache.output())
    assert [s.tool for s in steps_of(h, 'teach_abort')] == [h.names.fib]


@pytest.mark.parametrize(('group', 'tool', 'keys', 'expected'), [
    ('services', 'gripper', {'record_from': 'bag'},
     "services.gripper.record_from: 'bag' is not one of proxy|introspection"),
    ('actions', 'arm', {'record_from': 7}, 'actions.arm.record_from: must be a string'),
    ('actions', 'arm', {'record_form': 'introspection'},
     'actions.arm.record_form: unknown parameter, did you mean record_from?'),
    ('actions', 'arm', {'record_from': 'introspection', 'proxy': '/elsewhere'},
     'actions.arm.proxy: nothing is served with record_from introspection'),
])
def test_bad_record_from_stops_the_node_naming_the_parameter(tmp_path, group, tool, keys,
                                                             expected):
    names = Names.unique()
    values = params(names, store=tmp_path / 'cache.db')
    values[group][tool].update(keys)
    done = run_cache_to_exit(names=names, values=values, tmp=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert expected in done.stdout + done.stderr
