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
Tasks within tasks on the MuJoCo arm: the demo agent decomposes, the cache runs the skills.

The sim robot, the behavior cache (the demo's config/sim_demo.yaml, in a namespace) and the
demo agent run as real processes. The agent knows ``restock`` and ``tidy`` only as ``pick``
then ``place``, sent to the cache's ``~/execute_subtask`` (the agent's default
``subtask_action``, relative, reaches the cache named ``muscle_mem`` in its namespace).
The tests share one store and run in order: a parent miss learns both skills and the parent
as two subtask steps; the parent again replays whole with no agent call; a second parent
reuses ``pick`` (and ``place``, retargeted by its parameter) without the agent being asked
for them; a skill forgotten goes to the agent alone in the middle of the parent's replay, which
goes on after it; a cancel of the parent stops the subtask running, replayed or done by the
agent.
The simulation judges: where the cube ends, and whether the arm stopped.
"""

from __future__ import annotations

import json
import math

from action_msgs.msg import GoalStatus
from muscle_mem_demo import kinematics
from muscle_mem_demo.physics import OBJECT_START
from muscle_mem_demo.planner import (
    BIN,
    next_pick_step,
    next_place_step,
    next_subtask,
    PickPlaceSpec,
    plan,
    PlanningError,
    SHELF,
    WorldView,
)
from muscle_mem_demo.processes import config_path
from muscle_mem_demo.story import FAR_POSITION
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import Forget, GetTrajectory, ListTasks
from muscle_mem_ros.replay.subtasks import SUBTASK_TYPE
from muscle_mem_ros.ros.rclfix.matching import AgentSeen, wait_for_action_matched
import pytest
import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from sim_helpers import (
    FeedbackClient, namespaced_sensors, NodeProcess, SimClient, tf_remaps, unique_namespace,
)
import yaml

MODE_AGENT = ExecuteTask.Feedback.MODE_AGENT
MODE_REPLAY = ExecuteTask.Feedback.MODE_REPLAY


def _cache_params(namespace: str, store: str) -> dict:
    """Return the demo's cache parameters (bindings included) in ``namespace``."""
    demo = yaml.safe_load(config_path('sim_demo.yaml').read_text())
    params = dict(demo['muscle_mem']['ros__parameters'])
    params['store_path'] = store
    params['agent_action'] = f'{namespace}/demo_agent/execute_task'
    namespaced_sensors(params, namespace)
    for group in ('actions', 'services'):
        for tool in params.get(group, {}).values():
            tool['server'] = namespace + tool['server']
            tool['proxy'] = namespace + tool['proxy']
    return {'/**': {'ros__parameters': params}}


@pytest.fixture(scope='module')
def world(tmp_path_factory):
    namespace = unique_namespace()
    logs = tmp_path_factory.mktemp('logs')
    params_file = logs / 'cache.yaml'
    params_file.write_text(yaml.safe_dump(_cache_params(namespace, str(logs / 'cache.db'))))
    cache_node = f'{namespace}/muscle_mem'
    # rtf 1, as the story's: the cache watches replayed motions against their recording (at
    # rtf 4 a motion takes 0.2 s with arm feedback at 20 Hz); at rtf 4 a replayed subtask
    # was once handed to the agent half-way, on a loaded machine (cause not established)
    robot = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                        params={'rtf': 1.0}, log_dir=logs)
    cache = NodeProcess('muscle_mem_ros.ros.node.main', namespace=namespace, params={},
                        log_dir=logs, ros_args=['--params-file', str(params_file),
                                                *tf_remaps(namespace)])
    # no subtask_action: its relative default must reach this namespace's cache; think
    # 0.3 s per step, so a cancel can land while the agent does a subtask
    agent = NodeProcess('muscle_mem_demo.agent_node', namespace=namespace, params={
        'think_time': 0.3,
        'arm_action': f'{cache_node}/arm/follow_joint_trajectory',
        'pose_action': f'{cache_node}/arm/move_to_pose',
        'gripper_action': f'{cache_node}/gripper/gripper_cmd',
    }, log_dir=logs)
    rclpy.init()
    client = SimClient(namespace)
    group = ReentrantCallbackGroup()
    client.cache = FeedbackClient(client, ExecuteTask, f'{cache_node}/execute_task',
                                  callback_group=group)
    client.list_tasks = client.create_client(ListTasks, f'{cache_node}/list_tasks',
                                             callback_group=group)
    client.get_trajectory = client.create_client(GetTrajectory, f'{cache_node}/get_trajectory',
                                                 callback_group=group)
    client.forget = client.create_client(Forget, f'{cache_node}/forget', callback_group=group)
    client.events = []
    client.create_subscription(CacheEvent, f'{cache_node}/events', client.events.append, 100,
                               callback_group=group)
    cache_sees_agent = AgentSeen(client, cache_node)
    try:
        client.wait_robot()
        client.wait_agent()
        client.wait_for(client.cache.server_is_ready, 60.0, 'the cache')
        assert cache_sees_agent.wait(60.0), \
            f'the cache did not discover the agent:\n{cache.log()}'
        assert wait_for_action_matched(client, client.cache, cache_node, 30.0)
        client.logs = (cache, agent)
        yield client
    finally:
        agent.stop()  # first: no message may arrive while the client is destroyed
        cache.stop()
        robot.stop()
        client.close()
        rclpy.try_shutdown()
        print(agent.log()[-3000:])
        print(cache.log()[-5000:])


class Run:
    """One task sent to the cache: its result, feedback, agent calls and events."""

    def __init__(self, sim, task: str, *, params_json: str = '') -> None:
        self.sim = sim
        self.feedback: list = []
        with sim.lock:
            self.calls_from = len(sim.calls)
        self.events_from = len(sim.events)
        goal = ExecuteTask.Goal(task=task, params_json=params_json)
        self.handle = sim.result_of(sim.cache.send_goal_async(
            goal, feedback_callback=lambda fb: self.feedback.append(fb.feedback)))
        assert self.handle.accepted
        self.response = None

    def wait(self, timeout: float = 120.0):
        self.response = self.sim.result_of(self.handle.get_result_async(), timeout)
        return self.response

    @property
    def result(self):
        return self.response.result

    def calls(self) -> list[dict]:
        """Return the agent's announcements since the run began, once every start ended."""
        def settled() -> bool:
            with self.sim.lock:
                calls = self.sim.calls[self.calls_from:]
            return sum('"end"' in c for c in calls) >= sum('"start"' in c for c in calls)

        self.sim.wait_for(settled, 10.0, "an end for each of the agent's starts")
        with self.sim.lock:
            return [json.loads(c) for c in self.sim.calls[self.calls_from:]]

    def asked(self) -> list[str]:
        """Return the task of each agent call of the run, in order."""
        return [c['task'] for c in self.calls() if c['event'] == 'start']

    def events(self, kind: int, task: str | None = None) -> list:
        return [e for e in self.sim.events[self.events_from:]
                if e.type == kind and (task is None or e.task == task)]

    def why(self) -> str:
        """Return the result message and the run's failed checks and handoffs, for a message."""
        noted = [f'{e.task}@{e.depth} step {e.step}: {e.detail}'
                 for e in self.sim.events[self.events_from:]
                 if e.type in (CacheEvent.CHECK_FAILED, CacheEvent.HANDOFF, CacheEvent.ERROR)]
        return f'{self.response.result.message if self.response else "(running)"}; {noted}'

    def wait_event(self, kind: int, task: str, what: str) -> list:
        self.sim.wait_for(lambda: bool(self.events(kind, task)), 10.0, what)
        return self.events(kind, task)


def learned(sim, task: str) -> list:
    """Return the trajectories the cache learned for ``task``, with their steps."""
    answer = sim.call(sim.list_tasks, ListTasks.Request(task=task, with_steps=True))
    return list(answer.trajectories)


def steps_of(sim, trajectory_id: int) -> list:
    answer = sim.call(sim.get_trajectory, GetTrajectory.Request(trajectory_id=trajectory_id))
    assert answer.success, answer.message
    return list(answer.trajectory.steps)


def off(cube, target) -> float:
    return math.hypot(cube[0] - target[0], cube[1] - target[1])


def placed(sim, target, tolerance: float = 0.03) -> tuple:
    cube = sim.object_position(sim.now_ns())
    assert off(cube, target) < tolerance and cube[2] < 0.035, (cube, target)
    return cube


def assert_arm_still(sim) -> None:
    first = sim.wait_fresh()[0].position[:7]
    second = sim.wait_fresh(sim.now_ns() + 300_000_000)[0].position[:7]
    assert second == pytest.approx(first, abs=0.01)


def run(sim, task: str, **kwargs) -> Run:
    sim.reset()
    r = Run(sim, task, **kwargs)
    response = r.wait()
    assert response.status == GoalStatus.STATUS_SUCCEEDED, response.result.message
    assert response.result.success, response.result.message
    return r


def ensure_restock_learned(sim) -> None:
    """Learn restock (and its skills) unless an earlier test did."""
    if not learned(sim, 'restock'):
        run(sim, 'restock')


# -- over ROS -------------------------------------------------------------------------------


def test_a_parent_miss_asks_the_agent_for_it_and_each_subtask_and_learns_them(world):
    sim = world
    assert not learned(sim, 'restock'), 'the store must start empty'
    r = run(sim, 'restock')
    assert not r.result.cache_hit
    assert r.result.trajectory_id > 0
    # the agent was asked for the parent, then (by the cache) for each subtask
    assert r.asked() == ['restock', 'pick', 'place']
    ends = {c['task']: c for c in r.calls() if c['event'] == 'end'}
    assert ends['pick']['steps'] == 4 and ends['place']['steps'] == 4
    assert ends['restock']['steps'] == 2  # two subtask calls, no arm goal of its own
    placed(sim, SHELF)
    # the parent: one step per subtask call
    steps = steps_of(sim, r.result.trajectory_id)
    assert [(s.tool, s.kind, s.type_name) for s in steps] == [
        ('pick', 'subtask', SUBTASK_TYPE), ('place', 'subtask', SUBTASK_TYPE)]
    assert [json.loads(s.goal_json) for s in steps] == [
        {'params': {}, 'task': 'pick'}, {'params': {'place': list(SHELF)}, 'task': 'place'}]
    # each skill in its own tree, with its own arm and gripper steps
    for task in ('pick', 'place'):
        (trajectory,) = learned(sim, task)
        # (the gripper is a GripperCommand action, as the arm's moves are actions)
        assert [s.kind for s in trajectory.steps] == ['action'] * 4, task
    for task, depth in (('restock', 0), ('pick', 1), ('place', 1)):
        (miss,) = r.wait_event(CacheEvent.MISS, task, f'a miss of {task}')
        assert miss.depth == depth, task
        (branch,) = r.wait_event(CacheEvent.BRANCH_LEARNED, task, f'{task} learned')
        assert branch.depth == depth, task


def test_the_parent_again_replays_whole_with_no_agent_call(world):
    sim = world
    ensure_restock_learned(sim)
    r = run(sim, 'restock')
    assert r.result.cache_hit and r.result.steps_by_agent == 0, r.why()
    assert r.asked() == []
    placed(sim, SHELF)
    (hit,) = r.wait_event(CacheEvent.HIT, 'restock', "the parent's hit")
    assert hit.depth == 0
    for task in ('pick', 'place'):
        (hit,) = r.wait_event(CacheEvent.HIT, task, f'a hit of {task}')
        assert hit.depth == 1, task
    try:
        feedback = sim.wait_feedback(
            r.feedback,
            lambda fbs: {(f.task, f.depth) for f in fbs} >= {('pick', 1), ('place', 1)},
            'feedback of both subtasks at depth 1')
    except AssertionError as err:
        raise AssertionError(f'{err}: {[(f.task, f.depth, f.mode, f.detail) for f in r.feedback]}')
    assert {f.mode for f in feedback} == {MODE_REPLAY}
    assert len(learned(sim, 'pick')) == 1 and len(learned(sim, 'place')) == 1


def test_a_second_parent_reuses_the_skills_without_asking_the_agent_for_them(world):
    sim = world
    ensure_restock_learned(sim)
    r = run(sim, 'tidy')
    assert not r.result.cache_hit
    # asked only to decompose tidy: pick (learned under restock) and place (retargeted to
    # the bin by its parameter) replay from the cache
    assert r.asked() == ['tidy'], r.result.message
    placed(sim, BIN, tolerance=0.005)
    for task in ('pick', 'place'):
        (hit,) = r.wait_event(CacheEvent.HIT, task, f'{task} replayed under tidy')
        assert hit.depth == 1, task
    bound = [s for s in r.events(CacheEvent.STEP_OK, 'place') for s in s.substituted
             if s.source.startswith('param:place')]
    assert any(s.value == pytest.approx(BIN[1]) for s in bound), bound
    (trajectory,) = learned(sim, 'tidy')
    assert [(s.tool, s.kind) for s in trajectory.steps] == [('pick', 'subtask'),
                                                            ('place', 'subtask')]
    assert len(learned(sim, 'pick')) == 1  # nothing new learned for the skill
    # and tidy, learned, replays whole
    again = run(sim, 'tidy')
    assert again.result.cache_hit and again.asked() == [], again.why()
    placed(sim, BIN, tolerance=0.005)


def test_a_skill_missing_mid_replay_goes_to_the_agent_alone_and_the_parent_goes_on(world):
    sim = world
    ensure_restock_learned(sim)
    forgot = sim.call(sim.forget, Forget.Request(task='place'))
    assert forgot.success and forgot.removed == 1, forgot.message
    r = run(sim, 'restock')
    assert not r.result.cache_hit
    assert r.asked() == ['place']  # not restock, not pick: they replayed
    (hit,) = r.wait_event(CacheEvent.HIT, 'pick', 'pick replayed')
    assert hit.depth == 1
    (branch,) = r.wait_event(CacheEvent.BRANCH_LEARNED, 'place', 'place learned again')
    assert branch.depth == 1
    placed(sim, SHELF)
    assert len(learned(sim, 'place')) == 1 and len(learned(sim, 'restock')) == 1


def test_cancel_of_the_parent_cancels_the_subtask_the_cache_replays(world):
    sim = world
    ensure_restock_learned(sim)
    sim.reset()
    r = Run(sim, 'restock')
    sim.wait_for(lambda: any(e.step == 1 and e.depth == 1
                             for e in r.events(CacheEvent.STEP_OK, 'pick')),
                 60.0, 'step 1 of the pick replayed')
    sim.result_of(r.handle.cancel_goal_async())
    response = r.wait(60.0)
    assert response.status == GoalStatus.STATUS_CANCELED, response.result.message
    assert not response.result.success
    assert_arm_still(sim)
    assert r.asked() == []
    assert not r.events(CacheEvent.HIT, 'pick') and not r.events(CacheEvent.HIT, 'restock')
    assert not r.events(CacheEvent.STEP_OK, 'place')  # the parent went no further
    # the cache takes the next task: a full replay again
    again = run(sim, 'restock')
    assert again.result.cache_hit, again.why()
    placed(sim, SHELF)


def test_cancel_of_the_parent_cancels_the_subtask_the_agent_does(world):
    sim = world
    ensure_restock_learned(sim)
    before = {task: len(learned(sim, task)) for task in ('restock', 'pick', 'place')}
    sim.reset()
    # the cube beyond the pick's bindings' range: the pick goes to the agent
    assert sim.move_object(FAR_POSITION).success
    sim.wait_fresh()
    r = Run(sim, 'restock')
    sim.wait_feedback(r.feedback, lambda fbs: any(
        f.mode == MODE_AGENT and 'descend to the object' in f.detail for f in fbs),
        "the agent at the pick's descent", timeout=60.0)
    sim.result_of(r.handle.cancel_goal_async())
    response = r.wait(60.0)
    assert response.status == GoalStatus.STATUS_CANCELED, response.result.message
    assert not response.result.success
    assert_arm_still(sim)
    calls = r.calls()
    assert [c['task'] for c in calls if c['event'] == 'start'][-2:] == ['restock', 'pick']
    ends = {c['task']: c for c in calls if c['event'] == 'end'}
    assert ends['pick']['success'] is False and ends['pick']['steps'] < 4
    assert ends['restock']['success'] is False
    # nothing learned from the canceled run
    assert {task: len(learned(sim, task)) for task in before} == before
    # the agent and the cache take the next task
    again = run(sim, 'restock')
    assert again.result.cache_hit, again.why()
    placed(sim, SHELF)


# -- the decomposition, ROS-free --------------------------------------------------------------


HOME_VIEW = WorldView(joints=tuple(kinematics.HOME), gripper_closed=False,
                      object_position=OBJECT_START)


def _after(view, steps, spec):
    from muscle_mem_demo.planner import _ideal_outcome

    for step in steps:
        view = _ideal_outcome(view, step, spec)
    return view


def test_pick_then_place_is_the_pick_and_place_and_the_parent_asks_for_each_in_turn():
    spec = PickPlaceSpec(place_x=BIN[0], place_y=BIN[1])
    whole = plan(HOME_VIEW, spec)
    assert next_subtask(HOME_VIEW, spec) == 'pick'
    pick = plan(HOME_VIEW, spec, planner=next_pick_step)
    assert [s.label for s in pick] == ['move above the object', 'descend to the object',
                                       'close the gripper', 'lift the object']
    held = _after(HOME_VIEW, pick, spec)
    assert next_subtask(held, spec) == 'place'
    place = plan(held, spec, planner=next_place_step)
    assert [s.label for s in place] == ['move above the place target', 'lower the object',
                                        'open the gripper', 'return home']
    assert pick + place == whole  # the same goals as the task in one piece
    done = _after(held, place, spec)
    assert next_subtask(done, spec) is None
    assert off(done.object_position, BIN) < 1e-9


def test_place_with_nothing_held_fails_and_pick_of_a_held_cube_only_lifts():
    with pytest.raises(PlanningError, match='not held'):
        next_place_step(HOME_VIEW, PickPlaceSpec())
    spec = PickPlaceSpec()
    grasped = _after(HOME_VIEW, plan(HOME_VIEW, spec, planner=next_pick_step)[:3], spec)
    assert [s.label for s in plan(grasped, spec, planner=next_pick_step)] == ['lift the object']
