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
``muscle-mem learn`` on bags as other tools write them (issue 43 items 14 and 15).

A bag written by another MCAP writer, whose receive order across topics is not publish
order; a bag that lacks every topic of a tool the params file names; rosbag2's sqlite3
storage and a file-compressed ``.mcap.zstd``; goals without introspection that cannot be
told apart; and a bag mostly made of camera images, read in memory bounded by what learn
keeps.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tracemalloc

from action_msgs.msg import GoalInfo, GoalStatus, GoalStatusArray
from bag_helpers import write_bag
from builtin_interfaces.msg import Time
from mcap.well_known import MessageEncoding, SchemaEncoding
from mcap.writer import CompressionType, Writer
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.cli.app import main
from muscle_mem_ros.ros.bags.command import prepare, read_config
from muscle_mem_ros.store import SqliteStore
from node_helpers import write_params
import pytest
from rclpy.serialization import serialize_message
from sensor_msgs.msg import Image
from service_msgs.msg import ServiceEventInfo
from std_srvs.srv import SetBool
from test_learn_bag_errors import FIB, good_bag, joints, MS, params_file, run, T0
from test_msgs.action import Fibonacci
from unique_identifier_msgs.msg import UUID
import yaml

AGENT = '/base_agent/execute_task'
DOCK = '/base/dock'


def _stamp(ns: int) -> Time:
    return Time(sec=ns // 10**9, nanosec=ns % 10**9)


def _info(kind: int, seq: int, stamp: int) -> ServiceEventInfo:
    return ServiceEventInfo(event_type=kind, sequence_number=seq, stamp=_stamp(stamp),
                            client_gid=list(range(16)))


def _action(action, server: str, type_name: str, goal, result, goal_id: int,
            times: tuple[tuple[int, int], ...]) -> list[tuple[str, str, bytes, int, int]]:
    """Return an action's four server events as (topic, type, data, stamp, received)."""
    impl = action.Impl
    uuid = UUID(uuid=[goal_id] * 16)
    send, get = impl.SendGoalService, impl.GetResultService
    events = [
        ('send_goal', send.Event(info=_info(ServiceEventInfo.REQUEST_RECEIVED, goal_id, 0),
                                 request=[send.Request(goal_id=uuid, goal=goal)])),
        ('send_goal', send.Event(info=_info(ServiceEventInfo.RESPONSE_SENT, goal_id, 0),
                                 response=[send.Response(accepted=True)])),
        ('get_result', get.Event(info=_info(ServiceEventInfo.REQUEST_RECEIVED, 50 + goal_id, 0),
                                 request=[get.Request(goal_id=uuid)])),
        ('get_result', get.Event(info=_info(ServiceEventInfo.RESPONSE_SENT, 50 + goal_id, 0),
                                 response=[get.Response(status=4, result=result)])),
    ]
    out = []
    for (name, event), (stamp, received) in zip(events, times):
        event.info.stamp = _stamp(stamp)
        kind = 'SendGoal' if name == 'send_goal' else 'GetResult'
        out.append((f'{server}/_action/{name}/_service_event', f'{type_name}_{kind}_Event',
                    bytes(serialize_message(event)), stamp, received))
    return out


def _service(server: str, seq: int, times: tuple[tuple[int, int], ...]) -> list:
    request = SetBool.Event(info=_info(ServiceEventInfo.REQUEST_RECEIVED, seq, times[0][0]),
                            request=[SetBool.Request(data=True)])
    response = SetBool.Event(info=_info(ServiceEventInfo.RESPONSE_SENT, seq, times[1][0]),
                             response=[SetBool.Response(success=True)])
    return [(f'{server}/_service_event', 'std_srvs/srv/SetBool_Event',
             bytes(serialize_message(event)), stamp, received)
            for event, (stamp, received) in zip((request, response), times)]


def _ms(value: float) -> int:
    return T0 + int(round(value * MS))


def _other_writer(path, messages) -> None:
    """Write with the mcap library's own writer: publish time the stamp, log time received."""
    with open(path, 'wb') as stream:
        writer = Writer(stream, compression=CompressionType.LZ4, chunk_size=4096)
        writer.start(profile='ros2', library='another writer')
        channels: dict[str, int] = {}
        for topic, type_name, data, stamp, received in sorted(messages, key=lambda m: m[4]):
            if topic not in channels:
                schema = writer.register_schema(type_name, SchemaEncoding.ROS2, b'')
                channels[topic] = writer.register_channel(topic, MessageEncoding.CDR, schema)
            writer.add_message(channels[topic], log_time=received, data=data,
                               publish_time=stamp)
        writer.finish()


def _base_params(tmp, **tools) -> object:
    values = {
        'store_path': str(tmp / 'default.db'), 'robot_description_timeout': 0.0,
        'agent_action': AGENT,
        'sensors': {'joints': {'topic': '/arm/joint_states', 'type': 'sensor_msgs/msg/JointState',
                               'fields': ['position'], 'tolerance': [0.01], 'max_age': 0.5}},
        'actions': {'fib': {'server': FIB, 'type': 'test_msgs/action/Fibonacci'}},
        'services': {'dock': {'server': DOCK, 'type': 'std_srvs/srv/SetBool'}},
        **tools,
    }
    return write_params(tmp / 'base.yaml', 'muscle_mem', values)


def _patrol_bag() -> list:
    """Return a patrol: two counts and a dock, its events received after the task's result."""
    sensor = [(topic, kind, data, when, when) for topic, kind, data, when in
              (joints(at, 0.1 * (at // 1000)) for at in range(0, 7000, 20))]
    task = _action(ExecuteTask, AGENT, 'muscle_mem_interfaces/action/ExecuteTask',
                   ExecuteTask.Goal(task='patrol'), ExecuteTask.Result(success=True), 9,
                   ((_ms(1000), _ms(1001)), (_ms(1002), _ms(1003)), (_ms(1004), _ms(1005)),
                    (_ms(5466), _ms(5467))))
    steps = _action(Fibonacci, FIB, 'test_msgs/action/Fibonacci', Fibonacci.Goal(order=3),
                    Fibonacci.Result(), 1,
                    ((_ms(1500), _ms(1501)), (_ms(1502), _ms(1503)), (_ms(1504), _ms(1505)),
                     (_ms(2500), _ms(2501))))
    steps += _action(Fibonacci, FIB, 'test_msgs/action/Fibonacci', Fibonacci.Goal(order=4),
                     Fibonacci.Result(), 2,
                     ((_ms(3000), _ms(3001)), (_ms(3002), _ms(3003)), (_ms(3004), _ms(3005)),
                      (_ms(4000), _ms(4001))))
    dock = _service(DOCK, 7, ((_ms(5464), _ms(5468)), (_ms(5465), _ms(5469))))
    return sensor + task + steps + dock


def test_a_step_received_after_the_tasks_result_is_the_tasks_last(tmp_path, capsys):
    _other_writer(tmp_path / 'patrol.mcap', _patrol_bag())
    code = main(['learn', str(tmp_path / 'patrol.mcap'), '--params-file',
                 str(_base_params(tmp_path)), '--task', 'patrol', '--store',
                 str(tmp_path / 'cache.db'), '--json'])
    out = capsys.readouterr()
    assert code == 0, out.err
    (task,) = json.loads(out.out)['tasks']
    assert task['steps'] == 3, task
    with SqliteStore(path=str(tmp_path / 'cache.db'), read_only=True) as store:
        (info,) = store.trajectories(task='patrol')
        assert [n.step.tool for n in store.path(info.id)] == [FIB, FIB, DOCK]


def test_a_bag_lacking_every_topic_of_a_tool_is_refused_naming_them(tmp_path, capsys):
    messages = [m for m in _patrol_bag() if not m[0].startswith(DOCK)]
    _other_writer(tmp_path / 'patrol.mcap', messages)
    code = main(['learn', str(tmp_path / 'patrol.mcap'), '--params-file',
                 str(_base_params(tmp_path)), '--task', 'patrol', '--store',
                 str(tmp_path / 'cache.db')])
    err = ' '.join(capsys.readouterr().err.split())
    assert code == 1, err
    assert f'dock ({DOCK})' in err and f'{DOCK}/_service_event' in err, err
    assert not (tmp_path / 'cache.db').exists()


def _db3(path, messages) -> None:
    """Write rosbag2's sqlite3 storage (the schema Humble writes)."""
    db = sqlite3.connect(path)
    db.executescript(
        'CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL, '
        'serialization_format TEXT NOT NULL, offered_qos_profiles TEXT NOT NULL);'
        'CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL, '
        'timestamp INTEGER NOT NULL, data BLOB NOT NULL);')
    ids: dict[str, int] = {}
    for topic, type_name, data, when in messages:
        if topic not in ids:
            ids[topic] = len(ids) + 1
            db.execute('INSERT INTO topics VALUES (?, ?, ?, ?, ?)',
                       (ids[topic], topic, type_name, 'cdr', ''))
        db.execute('INSERT INTO messages(topic_id, timestamp, data) VALUES (?, ?, ?)',
                   (ids[topic], when, data))
    db.commit()
    db.close()


def _learned_one_step(tmp_path, capsys, bag) -> None:
    code, out, err = run(tmp_path, bag, capsys)
    assert code == 0, err
    (task,) = json.loads(out)['tasks']
    assert task['steps'] == 1, task
    with SqliteStore(path=str(tmp_path / 'cache.db'), read_only=True) as store:
        (info,) = store.trajectories(task='t')
        step = store.path(info.id)[0].step
        assert json.loads(step.payload_json) == {'order': 5}
        assert step.post.features['joints'] == (0.1,)
    (tmp_path / 'cache.db').unlink()


def test_sqlite3_storage_is_read_as_a_file_and_as_a_folder(tmp_path, capsys):
    _db3(tmp_path / 'b.db3', good_bag())
    _learned_one_step(tmp_path, capsys, tmp_path / 'b.db3')
    folder = tmp_path / 'bag'
    folder.mkdir()
    _db3(folder / 'bag_0.db3', good_bag())
    meta = {'rosbag2_bagfile_information': {'version': 5, 'storage_identifier': 'sqlite3',
                                            'relative_file_paths': ['bag_0.db3']}}
    (folder / 'metadata.yaml').write_text(yaml.safe_dump(meta))
    _learned_one_step(tmp_path, capsys, folder)
    import zstandard  # compression_mode MESSAGE: each message is zstd
    pack = zstandard.ZstdCompressor().compress
    (folder / 'bag_0.db3').unlink()
    _db3(folder / 'bag_0.db3', [(t, k, pack(d), w) for t, k, d, w in good_bag()])
    meta['rosbag2_bagfile_information'].update(compression_format='zstd',
                                               compression_mode='MESSAGE')
    (folder / 'metadata.yaml').write_text(yaml.safe_dump(meta))
    _learned_one_step(tmp_path, capsys, folder)


def test_a_file_compressed_bag_is_read(tmp_path, capsys):
    import zstandard
    write_bag(tmp_path / 'b.mcap', good_bag())
    packed = zstandard.ZstdCompressor().compress((tmp_path / 'b.mcap').read_bytes())
    (tmp_path / 'b.mcap.zstd').write_bytes(packed)
    _learned_one_step(tmp_path, capsys, tmp_path / 'b.mcap.zstd')
    folder = tmp_path / 'bag'
    folder.mkdir()
    (folder / 'bag_0.mcap.zstd').write_bytes(packed)
    meta = {'rosbag2_bagfile_information': {
        'version': 9, 'storage_identifier': 'mcap', 'compression_format': 'zstd',
        'compression_mode': 'FILE', 'relative_file_paths': ['bag_0.mcap.zstd']}}
    (folder / 'metadata.yaml').write_text(yaml.safe_dump(meta))
    _learned_one_step(tmp_path, capsys, folder)
    pack = zstandard.ZstdCompressor().compress  # compression_mode MESSAGE: each message
    (folder / 'bag_0.mcap.zstd').unlink()
    write_bag(folder / 'bag_0.mcap', [(t, k, pack(d), w) for t, k, d, w in good_bag()])
    meta['rosbag2_bagfile_information'].update(compression_mode='MESSAGE',
                                               relative_file_paths=['bag_0.mcap'])
    (folder / 'metadata.yaml').write_text(yaml.safe_dump(meta))
    _learned_one_step(tmp_path, capsys, folder)


def _status(goals: list[tuple[int, int]], when: int) -> tuple[str, str, bytes, int]:
    msg = GoalStatusArray(status_list=[
        GoalStatus(goal_info=GoalInfo(goal_id=UUID(uuid=[gid] * 16)), status=code)
        for gid, code in goals])
    return (f'{FIB}/_action/status', 'action_msgs/msg/GoalStatusArray',
            bytes(serialize_message(msg)), T0 + when * MS)


def _goal(order: int, when: int) -> tuple[str, str, bytes, int]:
    return (f'{FIB}/goal', 'test_msgs/action/Fibonacci_Goal',
            bytes(serialize_message(Fibonacci.Goal(order=order))), T0 + when * MS)


def test_goals_without_introspection_that_cannot_be_told_apart_are_refused(tmp_path, capsys):
    executing, done = GoalStatus.STATUS_EXECUTING, GoalStatus.STATUS_SUCCEEDED
    messages = [joints(t) for t in range(0, 2000, 20)] + [
        _goal(5, 500), _goal(6, 505),
        _status([(1, executing)], 510), _status([(1, executing), (2, executing)], 520),
        _status([(1, done), (2, executing)], 800), _status([(1, done), (2, done)], 900)]
    write_bag(tmp_path / 'b.mcap', sorted(messages, key=lambda m: m[3]))
    code, _out, err = run(tmp_path, tmp_path / 'b.mcap', capsys)
    err = ' '.join(err.split())
    assert code == 1, err
    assert bytes([1] * 16).hex() in err and bytes([2] * 16).hex() in err, err
    assert not (tmp_path / 'cache.db').exists()
    alone = [joints(t) for t in range(0, 2000, 20)] + [
        _goal(5, 500), _status([(1, executing)], 510), _status([(1, done)], 800),
        _goal(6, 1000), _status([(2, executing)], 1010), _status([(2, done)], 1300)]
    write_bag(tmp_path / 'c.mcap', sorted(alone, key=lambda m: m[3]))
    code, out, err = run(tmp_path, tmp_path / 'c.mcap', capsys)
    assert code == 0, err
    assert json.loads(out)['tasks'][0]['steps'] == 2


@pytest.mark.parametrize('seconds', [10])
def test_a_bag_of_camera_images_is_read_in_memory_bounded_by_what_learn_keeps(
        tmp_path, seconds):
    def image() -> bytes:  # noise: every image its own, as a camera's, not compressible
        return bytes(serialize_message(Image(height=240, width=320, encoding='rgb8', step=960,
                                             data=os.urandom(240 * 960))))
    messages = [joints(t, 0.1 if t > 800 else 0.0) for t in range(0, seconds * 1000)]
    messages += [('/camera/image_raw', 'sensor_msgs/msg/Image', image(), T0 + t * MS)
                 for t in range(0, seconds * 1000, 33)]  # 30 Hz, 230 kB each
    messages += good_bag(until_ms=0)
    write_bag(tmp_path / 'b.mcap', sorted(messages, key=lambda m: m[3]))
    config = read_config(params_file(tmp_path))
    tracemalloc.start()
    try:
        learned = prepare(tmp_path / 'b.mcap', config, task='t')
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(learned.planned) == 1 and len(learned.planned[0].steps) == 1
    size = (tmp_path / 'b.mcap').stat().st_size
    assert size > 60 * 2**20
    assert peak < 16 * 2**20, f'{peak / 2**20:.0f} MiB kept to learn from a ' \
        f'{size / 2**20:.0f} MiB bag'
