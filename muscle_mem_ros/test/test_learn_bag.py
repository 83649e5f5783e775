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
``muscle-mem learn`` from a bag recorded live from the test arm, then replayed by the cache.

The bag is recorded as ``ros2 bag record`` would (:class:`bag_helpers.BagRecorder`): the
sensors, and the introspection events (with contents) that the robot's servers and the
agent's ExecuteTask server publish. The agent calls the robot's servers itself; no cache
runs while the bag is recorded. Three tasks, the object at three positions, are learned
from the one bag into an empty store; the cache then replays the task with the object at a
fourth position (a binding inferred across the three) with no agent call, and hands off
where the world differs in what no binding explains.
"""

from __future__ import annotations

import json
from pathlib import Path
import sqlite3
import time

from action_msgs.msg import GoalStatus, GoalStatusArray
from bag_helpers import BagRecorder, write_bag
from geometry_msgs.msg import PoseStamped
from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.cli.app import main
from muscle_mem_ros.ros.bags.reader import read_bag
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.store import SqliteStore
from node_helpers import Harness, OBJECT_HOME, write_params
import pytest
from rclpy.action import ActionServer
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import qos_profile_system_default
from rclpy.serialization import deserialize_message, serialize_message
from rclpy.service_introspection import ServiceIntrospectionState
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool
from test_msgs.action import Fibonacci

POSITIONS = [(0.4, 0.1, 0.05), (0.45, 0.13, 0.05), (0.38, 0.16, 0.05)]
"""Where the object is in the three recorded tasks."""
FOURTH = (0.43, 0.07, 0.05)


def _event_types(h: Harness) -> dict[str, tuple[str, object]]:
    names = h.names
    out: dict[str, tuple[str, object]] = {
        names.joints: ('sensor_msgs/msg/JointState', JointState),
        names.object: ('geometry_msgs/msg/PoseStamped', PoseStamped),
        f'{names.gripper}/_service_event': ('std_srvs/srv/SetBool_Event', SetBool.Event),
    }
    for server, action, type_name in (
            (names.arm, FollowJointTrajectory,
             'muscle_mem_demo_interfaces/action/FollowJointTrajectory'),
            (names.fib, Fibonacci, 'test_msgs/action/Fibonacci'),
            (names.agent, ExecuteTask, 'muscle_mem_interfaces/action/ExecuteTask')):
        impl = action.Impl
        out[f'{server}/_action/send_goal/_service_event'] = (
            f'{type_name}_SendGoal_Event', impl.SendGoalService.Event)
        out[f'{server}/_action/get_result/_service_event'] = (
            f'{type_name}_GetResult_Event', impl.GetResultService.Event)
    for server in (names.arm, names.fib):
        out[f'{server}/_action/status'] = ('action_msgs/msg/GoalStatusArray', GoalStatusArray)
    out[f'{names.arm}/_action/feedback'] = (
        'muscle_mem_demo_interfaces/action/FollowJointTrajectory_FeedbackMessage',
        FollowJointTrajectory.Impl.FeedbackMessage)
    return out


def record_bag(h: Harness, path: Path, positions: list) -> dict[str, int]:
    """Record the agent doing ``pick`` once per object position; return messages per topic."""
    agent, robot, names = h.agent, h.robot, h.names
    group = ReentrantCallbackGroup()
    agent._arm = ActionClient(agent, FollowJointTrajectory, names.arm, callback_group=group)
    agent._fib = ActionClient(agent, Fibonacci, names.fib, callback_group=group)
    agent._gripper = agent.create_client(SetBool, names.gripper, callback_group=group)
    agent.step_delay = 0.1
    servers = [w for w in robot.waitables if isinstance(w, ActionServer)]
    servers += [s for s in robot.services if s.srv_name == names.gripper]
    servers += [w for w in agent.waitables if isinstance(w, ActionServer)]
    for server in servers:
        server.configure_introspection(h.client.get_clock(), qos_profile_system_default,
                                       ServiceIntrospectionState.CONTENTS)
    robot.arm_delay = 0.0
    topics = _event_types(h)
    recorder = BagRecorder(path, topics, context=h.client.context)
    deadline = time.monotonic() + 15.0
    while time.monotonic() < deadline and not all(
            h.client.count_publishers(t) >= 1 for t in topics if 'feedback' not in t):
        time.sleep(0.05)
    time.sleep(0.5)
    client = ActionClient(h.client, ExecuteTask, names.agent, callback_group=group)
    assert client.wait_for_server(timeout_sec=10.0)
    try:
        for obj in positions:
            robot.reset()
            robot.move_object(obj)
            time.sleep(0.2)
            handle = h.wait(client.send_goal_async(ExecuteTask.Goal(task='pick')))
            assert handle.accepted
            wrapped = h.wait(handle.get_result_async(), 30.0)
            assert wrapped.status == GoalStatus.STATUS_SUCCEEDED, wrapped.result.message
            time.sleep(0.3)
    finally:
        time.sleep(0.3)
        recorder.close()
    return recorder.counts


@pytest.fixture(scope='module')
def learned(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('learn_bag')
    h = Harness(tmp=tmp)
    bag = tmp / 'teleop.mcap'
    counts = record_bag(h, bag, POSITIONS)
    params_file = write_params(tmp / 'robot.yaml', 'muscle_mem', h.values())
    yield h, bag, params_file, counts
    h.close()


def test_the_bag_holds_the_sensors_and_the_calls(learned):
    h, _bag, _params, counts = learned
    assert counts[h.names.joints] > 50
    assert counts[f'{h.names.agent}/_action/send_goal/_service_event'] >= 3


def test_learns_three_tasks_then_replays_a_fourth_position_without_the_agent(learned, capsys):
    h, bag, params_file, _ = learned
    store_path = h.tmp / 'cache.db'
    code = main(['learn', str(bag), '--params-file', str(params_file), '--task', 'pick',
                 '--store', str(store_path), '--json'])
    out = capsys.readouterr()
    assert code == 0, out.err
    report = json.loads(out.out)
    assert [t['steps'] for t in report['tasks']] == [4, 4, 4], report
    assert all(t['source'].startswith('ExecuteTask on') for t in report['tasks'])
    with SqliteStore(path=str(store_path), read_only=True) as store:
        infos = store.trajectories(task='pick')
        assert infos
        steps = store.path(infos[0].id)
        arm = deserialize_message(steps[0].step.payload, FollowJointTrajectory.Goal)
        assert list(arm.trajectory.points[0].positions) == pytest.approx([0.1, 0.2, 0.3])
        assert steps[0].step.pre is not None and steps[0].step.post is not None
        assert steps[0].step.trace is not None
        assert steps[0].step.pre.features['object'] == pytest.approx(POSITIONS[0])
    h.start_cache()
    h.robot.reset()
    h.robot.move_object(FOURTH)
    before = len(h.agent.calls)
    run = h.run_task('pick')
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert run.result.cache_hit, (run.result.message, h.cache.output()[-3000:])
    assert len(h.agent.calls) == before
    last = deserialize_message(h.robot.arm_goals[-1], FollowJointTrajectory.Goal)
    assert list(last.trajectory.points[0].positions)[:2] == pytest.approx(FOURTH[:2], abs=1e-3)
    # A world no binding explains (the arm not home): the cache hands the task to the agent.
    h.robot.reset()
    h.robot.set_joints([0.3, -0.2, 0.1])
    run = h.run_task('pick')
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert not run.result.cache_hit
    assert len(h.agent.calls) == before + 1


def test_learned_from_a_bag_is_not_trusted_for_that(learned, capsys):
    """Under replay_requires: approval a branch learned from a bag waits like any other."""
    h, bag, params_file, _ = learned
    store_path = h.tmp / 'gated.db'
    assert main(['learn', str(bag), '--params-file', str(params_file), '--task', 'pick',
                 '--store', str(store_path)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(['tree', str(store_path), 'pick']) == 0
    tree = ' '.join(capsys.readouterr().out.split())
    assert f'learned from {bag} ' in tree, tree
    if h.cache is not None:
        h.stop_cache()
    h.start_cache(replay_requires='approval', store_path=str(store_path))
    h.robot.reset()
    before = len(h.agent.calls)
    run = h.run_task('pick')
    assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    assert not run.result.cache_hit
    assert len(h.agent.calls) == before + 1
    h.stop_cache()


def test_learning_twice_folds_into_the_same_branches(learned, capsys):
    h, bag, params_file, _ = learned
    store_path = h.tmp / 'again.db'
    for _ in range(2):
        assert main(['learn', str(bag), '--params-file', str(params_file), '--task', 'pick',
                     '--store', str(store_path)]) == 0, capsys.readouterr().err
    with SqliteStore(path=str(store_path), read_only=True) as store:
        first = {n.id for t in store.trajectories(task='pick') for n in store.path(t.id)}
        assert len(first) <= 3 * 4


def test_a_range_of_the_bag_is_one_task(learned, capsys):
    h, bag, params_file, _ = learned
    store_path = h.tmp / 'range.db'
    code = main(['learn', str(bag), '--params-file', str(params_file), '--task', 'first',
                 '--store', str(store_path), '--from', '0', '--to', '1.5', '--json'])
    out = capsys.readouterr()
    if code != 0:
        assert 'has no step' in out.err
        return
    (task,) = json.loads(out.out)['tasks']
    assert task['steps'] >= 1 and task['source'].endswith('of the bag')


def test_export_learned_back_gives_the_same_tree(learned, capsys):
    h, bag, params_file, _ = learned
    first, second = h.tmp / 'rt1.db', h.tmp / 'rt2.db'
    assert main(['learn', str(bag), '--params-file', str(params_file), '--task', 'pick',
                 '--store', str(first)]) == 0
    export = h.tmp / 'pick.mcap'
    assert main(['export', str(first), 'pick', '--mcap', str(export)]) == 0
    capsys.readouterr()
    code = main(['learn', str(export), '--params-file', str(params_file), '--task', 'pick',
                 '--store', str(second)])
    assert code == 0, capsys.readouterr().err
    traced = 0
    with SqliteStore(path=str(first), read_only=True) as a, \
            SqliteStore(path=str(second), read_only=True) as b:
        paths_a = [a.path(t.id) for t in a.trajectories(task='pick')]
        paths_b = [b.path(t.id) for t in b.trajectories(task='pick')]
        assert len(paths_a) == len(paths_b)
        for pa, pb in zip(paths_a, paths_b):
            assert [n.step.payload for n in pa] == [n.step.payload for n in pb]
            assert [n.step.tool for n in pa] == [n.step.tool for n in pb]
            for na, nb in zip(pa, pb):
                for snap_a, snap_b in ((na.step.pre, nb.step.pre), (na.step.post, nb.step.post)):
                    assert (snap_a is None) == (snap_b is None)
                    if snap_a is not None and snap_b is not None:
                        assert snap_a.features.keys() == snap_b.features.keys()
                        for name in snap_a.features:
                            assert snap_b.features[name] == pytest.approx(
                                snap_a.features[name], abs=1e-9)
                traced += same_trace(na.step.trace, nb.step.trace)
    assert traced >= 2 * len(paths_a), traced  # the arm's two moves of each pick had a trace


def same_trace(a, b) -> int:
    """Assert two traces equal (times to the export's nanosecond); return 1 for a trace."""
    assert (a is None) == (b is None)
    if a is None:
        return 0
    assert a.rate == b.rate and a.feedback_leaves == b.feedback_leaves
    pairs = [(a.sensors[k], b.sensors[k]) for k in a.sensors]
    assert a.sensors.keys() == b.sensors.keys() and (a.feedback is None) == (b.feedback is None)
    pairs += [(a.feedback, b.feedback)] if a.feedback is not None else []
    for sa, sb in pairs:
        assert sb.values == sa.values  # float64 through CDR: exact
        assert sb.times == pytest.approx(sa.times, abs=1e-9)
    return 1


def status_only(bag: Path, out: Path, servers: tuple[str, ...], *, goals: bool) -> None:
    """
    Rewrite ``bag`` without the servers' introspection: their status and feedback stay.

    With ``goals``, each goal is put on ``<server>/goal`` when its request was sent (what an
    agent publishing its goals beside sending them leaves in a bag).
    """
    types = dict(zip(servers, (FollowJointTrajectory, Fibonacci)))
    read = read_bag(bag)
    messages = []
    for name, topic in read.topics.items():
        server = next((s for s in servers if name.startswith(s + '/_action/')), None)
        if server is None or not name.endswith('_service_event'):
            messages += [(name, topic.type_name, d, t) for t, d in zip(topic.times, topic.data)]
        if goals and server is not None and name.endswith('send_goal/_service_event'):
            impl = types[server].Impl.SendGoalService.Event
            seen = set()
            for when, raw in zip(topic.times, topic.data):
                event = deserialize_message(raw, impl)
                if event.request and bytes(event.request[0].goal_id.uuid) not in seen:
                    seen.add(bytes(event.request[0].goal_id.uuid))
                    messages.append((f'{server}/goal', topic.type_name.replace(
                        '_SendGoal_Event', '_Goal'), bytes(serialize_message(
                            event.request[0].goal)), when))
    write_bag(out, sorted(messages, key=lambda m: m[3]))


def test_a_bag_without_introspection_learns_the_same_goals_from_status_and_goal_topics(
        learned, capsys):
    h, bag, params_file, _ = learned
    servers = (h.names.arm, h.names.fib)
    plain = h.tmp / 'status_only.mcap'
    status_only(bag, plain, servers, goals=True)
    assert not any(t.endswith('_service_event') and t.startswith(servers)
                   for t in read_bag(plain).topics)
    full, light = h.tmp / 'full.db', h.tmp / 'light.db'
    for source, store in ((bag, full), (plain, light)):
        code = main(['learn', str(source), '--params-file', str(params_file), '--task', 'pick',
                     '--store', str(store)])
        assert code == 0, capsys.readouterr().err
    with SqliteStore(path=str(full), read_only=True) as a, \
            SqliteStore(path=str(light), read_only=True) as b:
        paths_a = [a.path(t.id) for t in a.trajectories(task='pick')]
        paths_b = [b.path(t.id) for t in b.trajectories(task='pick')]
    assert len(paths_b) == len(paths_a) >= 1
    for pa, pb in zip(paths_a, paths_b):
        assert [n.step.payload for n in pb] == [n.step.payload for n in pa]
        for na, nb in zip(pa, pb):  # the trace from the same sensors, the same feedback
            assert (na.step.trace is None) == (nb.step.trace is None)
            if na.step.trace is not None:
                assert nb.step.trace.sensors.keys() == na.step.trace.sensors.keys()
                assert (nb.step.trace.feedback is None) == (na.step.trace.feedback is None)


def test_a_bag_with_status_but_no_goals_is_refused_naming_the_topics(learned, capsys):
    h, bag, params_file, _ = learned
    plain = h.tmp / 'no_goals.mcap'
    status_only(bag, plain, (h.names.arm, h.names.fib), goals=False)
    store = h.tmp / 'none.db'
    capsys.readouterr()
    code = main(['learn', str(plain), '--params-file', str(params_file), '--task', 'pick',
                 '--store', str(store)])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert f'{h.names.arm}/_action/status (goals were sent)' in err
    assert f'nor {h.names.arm}/goal' in err and not store.exists()


def test_object_home_is_the_first_position():
    assert POSITIONS[0] == OBJECT_HOME


if __name__ == '__main__':  # record the README's example bag: python test_learn_bag.py DIR
    import sys
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    harness = Harness(tmp=out)
    try:
        record_bag(harness, out / 'teleop.mcap', POSITIONS)
        write_params(out / 'robot.yaml', 'muscle_mem', harness.values())
    finally:
        harness.close()


def test_an_export_is_learned_back_on_the_bodies_it_recorded(learned, capsys):
    """Issue 43 item 9: learn of an export --mcap keeps each trajectory's body."""
    h, bag, params_file, _ = learned
    first, second = h.tmp / 'bodies1.db', h.tmp / 'bodies2.db'
    assert main(['learn', str(bag), '--params-file', str(params_file), '--task', 'pick',
                 '--store', str(first)]) == 0
    panda, ur5e = 'panda@' + '3f2c' * 4, 'ur5e@' + '91ab' * 4
    with SqliteStore(path=str(first)) as store:
        ids = [t.id for t in store.trajectories(task='pick')]
    assert len(ids) >= 2
    conn = sqlite3.connect(first)  # learned on two arms of a fleet
    conn.execute('UPDATE trajectories SET body = ? WHERE id = ?', (panda, ids[0]))
    conn.execute('UPDATE trajectories SET body = ? WHERE id != ?', (ur5e, ids[0]))
    conn.commit()
    conn.close()
    export = h.tmp / 'bodies.mcap'
    assert main(['export', str(first), 'pick', '--mcap', str(export)]) == 0
    capsys.readouterr()
    assert main(['learn', str(export), '--params-file', str(params_file), '--task', 'pick',
                 '--store', str(second)]) == 0, capsys.readouterr().err
    with SqliteStore(path=str(first), read_only=True) as a, \
            SqliteStore(path=str(second), read_only=True) as b:
        sent = {tuple(n.step.payload for n in a.path(t.id)): t.body
                for t in a.trajectories(task='pick')}
        back = {tuple(n.step.payload for n in b.path(t.id)): t.body
                for t in b.trajectories(task='pick')}
    assert back == sent
