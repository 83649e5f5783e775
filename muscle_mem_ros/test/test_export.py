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
MCAP export read back with the mcap reader and mcap_ros2's decoder: types, counts, order, values.

The store is a real SQLite file with real CDR goals (:mod:`cli_helpers`); the
decoder is mcap_ros2's own CDR implementation, independent of rclpy, so a goal
that decodes to the recorded values shows both the bytes and the schema are right.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import ARM, ARM_TYPE, FIB, fingerprint, REPEATS, \
    ROOT_DIVERGENCES, SENSOR_PARAMS
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_ros.cli import main
from muscle_mem_ros.records import Snapshot, Step, ToolKind
from muscle_mem_ros.ros.messages.msgdefs import message_schema
from muscle_mem_ros.store import SqliteStore
import pytest
from rclpy.serialization import deserialize_message
import yaml

PICK_TRAJECTORIES = REPEATS + ROOT_DIVERGENCES + 1


@pytest.fixture
def params_file(tmp_path: Path) -> Path:
    path = tmp_path / 'params.yaml'
    path.write_text(yaml.safe_dump({'muscle_mem': {'ros__parameters': {
        'store_path': 'x', 'sensors': SENSOR_PARAMS}}}))
    return path


def read(path: Path) -> list[tuple]:
    """Return (topic, schema name, log_time, sequence, raw bytes, decoded) in log-time order."""
    with open(path, 'rb') as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == 'ros2'
        return [(c.topic, s.name, m.log_time, m.sequence, m.data, d)
                for s, c, m, d in reader.iter_decoded_messages(log_time_order=True)]


def export(capsys, *argv: str) -> dict:
    code = main(['export', *argv, '--json'])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_task_export_reads_back_with_types_counts_order_and_values(
        capsys, store, tmp_path, params_file):
    before = fingerprint(store)
    out = tmp_path / 'pick.mcap'
    summary = export(capsys, str(store), 'pick', '--mcap', str(out), '--params',
                     str(params_file))
    assert fingerprint(store) == before
    assert summary['trajectories'] == list(range(1, PICK_TRAJECTORIES + 1))
    messages = read(out)
    schemas = {topic: schema for topic, schema, *_ in messages}
    assert schemas == {
        f'{ARM}/goal': f'{ARM_TYPE}_Goal',
        f'{FIB}/goal': 'test_msgs/action/Fibonacci_Goal',
        '/muscle_mem/pre': 'muscle_mem_interfaces/msg/Snapshot',
        '/muscle_mem/post': 'muscle_mem_interfaces/msg/Snapshot',
    }
    counts = {t: sum(1 for m in messages if m[0] == t) for t in schemas}
    assert counts == {f'{ARM}/goal': PICK_TRAJECTORIES, f'{FIB}/goal': PICK_TRAJECTORIES,
                      '/muscle_mem/pre': 2 * PICK_TRAJECTORIES,
                      '/muscle_mem/post': 2 * PICK_TRAJECTORIES}
    assert summary['messages'] == counts
    # Log times follow the order of writing: per step pre, goal, post; trajectories in turn.
    assert [m[3] for m in messages] == sorted(m[3] for m in messages)
    assert len({m[2] for m in messages}) == len(messages)
    with SqliteStore(path=store, read_only=True) as db:
        expected = []
        for info in db.trajectories(task='pick'):
            for index, node in enumerate(db.path(info.id)):
                expected += [('/muscle_mem/pre', info.id, index, node),
                             (f'{node.step.tool}/goal', info.id, index, node),
                             ('/muscle_mem/post', info.id, index, node)]
        assert [m[0] for m in messages] == [e[0] for e in expected]
        last_post = {}
        for (topic, _, log_time, _, data, decoded), (_, tid, index, node) in zip(
                messages, expected):
            step = node.step
            if topic.endswith('/goal'):
                assert data == bytes(step.payload)
                if step.tool == FIB:
                    assert decoded.order == json.loads(step.payload_json)['order']
                else:
                    goal = deserialize_message(data, FollowJointTrajectory.Goal)
                    positions = list(decoded.trajectory.points[0].positions)
                    assert positions == list(goal.trajectory.points[0].positions)
                    assert decoded.trajectory.joint_names == ['j1', 'j2', 'j3']
                    assert decoded.trajectory.points[0].time_from_start.sec == 1
                continue
            snap = step.pre if topic.endswith('pre') else step.post
            assert (decoded.trajectory_id, decoded.step, decoded.node_id) == (
                tid, index, node.id)
            assert decoded.tool == step.tool and decoded.task == 'pick'
            assert decoded.phase == topic.rsplit('/', 1)[1]
            assert decoded.stamp.sec * 10**9 + decoded.stamp.nanosec == log_time
            features = {f.name: f for f in decoded.features}
            assert list(features) == ['joints', 'object']
            for name, feature in features.items():
                assert tuple(feature.values) == snap.features[name]
                assert list(feature.tolerance) == SENSOR_PARAMS[name]['tolerance']
                assert feature.mode == 'abs'
                assert feature.age == pytest.approx(snap.taken_at - snap.stamps[name])
            if topic.endswith('post'):
                last_post[tid] = log_time
        # Each trajectory ends at its commit time (or later, when it would overlap).
        for info in db.trajectories(task='pick'):
            assert last_post[info.id] >= int(info.created * 10**9) - 1000


def test_one_trajectory_and_a_service_request(capsys, store, tmp_path):
    out = tmp_path / 'one.mcap'
    summary = export(capsys, str(store), 'pick', '--trajectory', '13', '--mcap', str(out))
    assert summary['trajectories'] == [13]
    messages = read(out)
    goals = [m for m in messages if m[0].endswith('/goal')]
    assert [(m[0], m[5].order if m[0] == f'{FIB}/goal' else None) for m in goals] == [
        (f'{ARM}/goal', None), (f'{FIB}/goal', 7)]
    snaps = [m[5] for m in messages if m[0].startswith('/muscle_mem/')]
    assert [(s.step, s.phase) for s in snaps] == [(0, 'pre'), (0, 'post'), (1, 'pre'),
                                                  (1, 'post')]
    assert all(list(f.tolerance) == [] and f.mode == '' for s in snaps for f in s.features)
    out = tmp_path / 'wave.mcap'
    export(capsys, str(store), 'wave', '--mcap', str(out))
    (request,) = [m for m in read(out) if m[0] == '/gripper/request']
    assert request[1] == 'std_srvs/srv/SetBool_Request' and request[5].data is True


def test_schema_text_names_every_nested_type():
    text = message_schema(f'{ARM_TYPE}_Goal')
    for name in ('trajectory_msgs/msg/JointTrajectory', 'trajectory_msgs/msg/JointTrajectoryPoint',
                 'trajectory_msgs/msg/MultiDOFJointTrajectory', 'std_msgs/msg/Header',
                 'builtin_interfaces/msg/Duration', 'geometry_msgs/msg/Transform',
                 'muscle_mem_demo_interfaces/msg/JointTolerance'):
        assert f'\nMSG: {name}\n' in text
    assert text.count('\nMSG: ') == len(set(text.split('\nMSG: ')[1:]))
    assert 'int32 SUCCESSFUL' not in text  # the result section is not part of the goal


def test_a_goal_type_that_is_not_installed_writes_no_file(capsys, tmp_path):
    path = tmp_path / 'cache.db'
    with SqliteStore(path=path) as db:
        db.add_trajectory(task='t', variant='', params_json='{}', steps=[Step(
            tool='/x', kind=ToolKind.ACTION, type_name='no_such_pkg/action/Move',
            payload=b'\0\1\0\0', pre=Snapshot(features={'a': (1.0,)}))])
    before = fingerprint(path)
    out = tmp_path / 'x.mcap'
    code = main(['export', str(path), 't', '--mcap', str(out)])
    _, err = capsys.readouterr()
    assert code == 1 and "'no_such_pkg' is not installed" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists() and not list(tmp_path.glob('*.part'))
    assert fingerprint(path) == before


def test_python_api_steps_export_their_snapshots_only(capsys, tmp_path):
    path = tmp_path / 'cache.db'
    with SqliteStore(path=path) as db:
        db.add_trajectory(task='t', variant='', params_json='{}', steps=[Step(
            tool='grab', kind=ToolKind.FUNCTION, type_name='abc', payload=b'{}',
            pre=Snapshot(features={'a': (1.0, 2.0)}, taken_at=5.0))])
    out = tmp_path / 'f.mcap'
    summary = export(capsys, str(path), 't', '--mcap', str(out))
    assert summary['skipped_goals'] == 1
    ((topic, _, _, _, _, snap),) = read(out)
    assert topic == '/muscle_mem/pre' and list(snap.features[0].values) == [1.0, 2.0]
