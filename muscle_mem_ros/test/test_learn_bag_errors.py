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
``muscle-mem learn`` on bags written by hand: what each form needs, and bad bags refused.

A bad bag gets one clear line on stderr (exit 1) and leaves the store as it was (not even
created): a truncated or corrupt file, a topic whose type is not the params file's, a
task with no step, a clock going backwards, goals whose contents are not in the bag.
"""

from __future__ import annotations

import json
from pathlib import Path

from action_msgs.msg import GoalStatusArray
from bag_helpers import write_bag
from builtin_interfaces.msg import Time
from muscle_mem_ros.cli.app import main
from muscle_mem_ros.store import SqliteStore
from node_helpers import write_params
from pg_server import pg_server  # noqa: F401 (fixture)
import pytest
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState
from service_msgs.msg import ServiceEventInfo
from test_msgs.action import Fibonacci
from unique_identifier_msgs.msg import UUID
import yaml

T0 = 1_700_000_000 * 10**9
MS = 10**6
FIB = '/arm/fibonacci'
JOINTS = '/arm/joint_states'
SENDGOAL = f'{FIB}/_action/send_goal/_service_event'
RESULT = f'{FIB}/_action/get_result/_service_event'


def params_file(tmp: Path, **extra) -> Path:
    values = {
        'store_path': str(tmp / 'default.db'),
        'robot_description_timeout': 0.0,
        'sensors': {'joints': {'topic': JOINTS, 'type': 'sensor_msgs/msg/JointState',
                               'fields': ['position'], 'tolerance': [0.01], 'max_age': 0.5}},
        'actions': {'fib': {'server': FIB, 'type': 'test_msgs/action/Fibonacci'}},
        **extra,
    }
    return write_params(tmp / 'robot.yaml', 'muscle_mem', values)


def joints(at_ms: int, value: float = 0.0) -> tuple[str, str, bytes, int]:
    msg = JointState(name=['j1'], position=[value])
    return JOINTS, 'sensor_msgs/msg/JointState', bytes(serialize_message(msg)), T0 + at_ms * MS


def _info(kind: int, seq: int) -> ServiceEventInfo:
    info = ServiceEventInfo(event_type=kind, sequence_number=seq, stamp=Time(sec=1))
    info.client_gid = list(range(16))
    return info


def fib_call(start_ms: int, end_ms: int, order: int = 5, goal_id: int = 1, contents: bool = True,
             ) -> list[tuple[str, str, bytes, int]]:
    """Return the introspection events (server side) of one Fibonacci goal that succeeded."""
    impl = Fibonacci.Impl
    uuid = [goal_id] * 16
    send = impl.SendGoalService
    request = send.Event(info=_info(ServiceEventInfo.REQUEST_RECEIVED, goal_id))
    if contents:
        request.request = [send.Request(goal_id=UUID(uuid=uuid), goal=Fibonacci.Goal(order=order))]
    response = send.Event(info=_info(ServiceEventInfo.RESPONSE_SENT, goal_id),
                          response=[send.Response(accepted=True)])
    result = impl.GetResultService
    ask = result.Event(info=_info(ServiceEventInfo.REQUEST_RECEIVED, 100 + goal_id),
                       request=[result.Request(goal_id=UUID(uuid=uuid))])
    done = result.Event(info=_info(ServiceEventInfo.RESPONSE_SENT, 100 + goal_id),
                        response=[result.Response(status=4, result=Fibonacci.Result(
                            sequence=[0, 1, 1, 2, 3]))])
    send_type = 'test_msgs/action/Fibonacci_SendGoal_Event'
    result_type = 'test_msgs/action/Fibonacci_GetResult_Event'
    return [
        (SENDGOAL, send_type, bytes(serialize_message(request)), T0 + start_ms * MS),
        (SENDGOAL, send_type, bytes(serialize_message(response)), T0 + (start_ms + 2) * MS),
        (RESULT, result_type, bytes(serialize_message(ask)), T0 + (start_ms + 3) * MS),
        (RESULT, result_type, bytes(serialize_message(done)), T0 + end_ms * MS),
    ]


def good_bag(*, until_ms: int = 2000, calls=((500, 800, 5, 1),)) -> list:
    messages = [joints(t, 0.1 if t > 800 else 0.0) for t in range(0, until_ms, 20)]
    for start, end, order, goal_id in calls:
        messages += fib_call(start, end, order, goal_id)
    messages.sort(key=lambda m: m[3])
    return messages


def run(tmp, bag, capsys, *extra):
    code = main(['learn', str(bag), '--params-file', str(params_file(tmp)), '--task', 't',
                 '--store', str(tmp / 'cache.db'), '--json', *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_good_bag_is_one_task_with_its_step(tmp_path, capsys):
    write_bag(tmp_path / 'b.mcap', good_bag())
    code, out, err = run(tmp_path, tmp_path / 'b.mcap', capsys)
    assert code == 0, err
    (task,) = json.loads(out)['tasks']
    assert task['steps'] == 1 and task['source'] == 'the whole bag'
    with SqliteStore(path=str(tmp_path / 'cache.db'), read_only=True) as store:
        (info,) = store.trajectories(task='t')
        (node,) = store.path(info.id)
        step = node.step
        assert step.tool == FIB and json.loads(step.payload_json) == {'order': 5}
        assert step.pre.features['joints'] == (0.0,)
        assert step.post.features['joints'] == (0.1,)
        assert step.pre.taken_at == pytest.approx(T0 * 1e-9 + 0.5)
        assert step.duration == pytest.approx(0.3)
        assert step.trace is not None and step.trace.sensors['joints'].values[-1] == (0.1,)
        bag = (tmp_path / 'b.mcap').resolve()
        assert store.sources(task='t') == {info.id: f'{bag} 0.000-1.980 s'}
        assert store.approvals(task='t') == []


def test_the_memory_store_keeps_sources_too():
    from muscle_mem_ros.records import Step, ToolKind
    from muscle_mem_ros.store import MemoryStore
    store = MemoryStore()
    info = store.add_trajectory(task='t', variant='{}', params_json='{}', steps=[
        Step(tool='/a', kind=ToolKind.ACTION, type_name='test_msgs/action/Fibonacci',
             payload=b'x')])
    store.note_source(trajectory_id=info.id, source='bag.mcap 0-1 s')
    store.note_source(trajectory_id=info.id, source='another')
    assert store.sources(task='t') == {info.id: 'bag.mcap 0-1 s'}
    assert store.sources(task='u') == {}


def test_ranges_split_a_bag(tmp_path, capsys):
    write_bag(tmp_path / 'b.mcap', good_bag(calls=((300, 400, 5, 1), (1300, 1400, 6, 2))))
    code, out, err = run(tmp_path, tmp_path / 'b.mcap', capsys, '--from', '1', '--to', '2')
    assert code == 0, err
    (task,) = json.loads(out)['tasks']
    assert task['steps'] == 1
    with SqliteStore(path=str(tmp_path / 'cache.db'), read_only=True) as store:
        (info,) = store.trajectories(task='t')
        assert json.loads(store.path(info.id)[0].step.payload_json) == {'order': 6}


def test_a_rosbag2_folder_is_read_through_its_metadata(tmp_path, capsys):
    folder = tmp_path / 'bag'
    folder.mkdir()
    write_bag(folder / 'bag_0.mcap', good_bag())
    meta = {'rosbag2_bagfile_information': {'version': 9, 'storage_identifier': 'mcap',
                                            'relative_file_paths': ['bag_0.mcap']}}
    (folder / 'metadata.yaml').write_text(yaml.safe_dump(meta))
    code, _out, err = run(tmp_path, folder, capsys)
    assert code == 0, err
    meta['rosbag2_bagfile_information']['storage_identifier'] = 'sqlite3'
    (folder / 'metadata.yaml').write_text(yaml.safe_dump(meta))
    code, _out, err = run(tmp_path, folder, capsys)
    assert code == 1 and 'bag_0.mcap: not a readable rosbag2 sqlite3 file' in err
    meta['rosbag2_bagfile_information']['storage_identifier'] = 'rosbag_v2'
    (folder / 'metadata.yaml').write_text(yaml.safe_dump(meta))
    code, _out, err = run(tmp_path, folder, capsys)
    assert code == 1 and "storage 'rosbag_v2' is not read; only mcap and sqlite3" in err


def _refused(tmp_path, capsys, bag: Path, match: str) -> None:
    code, _out, err = run(tmp_path, bag, capsys)
    assert code == 1, err
    assert match in ' '.join(err.split()), err
    assert not (tmp_path / 'cache.db').exists()  # nothing changed: not even created


def test_a_truncated_bag_is_refused(tmp_path, capsys):
    write_bag(tmp_path / 'b.mcap', good_bag())
    data = (tmp_path / 'b.mcap').read_bytes()
    (tmp_path / 'cut.mcap').write_bytes(data[:len(data) // 2])
    _refused(tmp_path, capsys, tmp_path / 'cut.mcap', 'truncated or corrupt')


def test_a_corrupt_bag_is_refused(tmp_path, capsys):
    write_bag(tmp_path / 'b.mcap', good_bag())
    data = bytearray((tmp_path / 'b.mcap').read_bytes())
    for i in range(200, 260):
        data[i] ^= 0x5A
    (tmp_path / 'bad.mcap').write_bytes(bytes(data))
    _refused(tmp_path, capsys, tmp_path / 'bad.mcap', 'truncated or corrupt')
    (tmp_path / 'text.mcap').write_text('not a bag')
    _refused(tmp_path, capsys, tmp_path / 'text.mcap', 'not a readable MCAP file')


def test_a_sensor_of_another_type_is_refused(tmp_path, capsys):
    messages = [(JOINTS, 'sensor_msgs/msg/Imu', data, when) if topic == JOINTS
                else (topic, kind, data, when) for topic, kind, data, when in good_bag()]
    write_bag(tmp_path / 'b.mcap', messages)
    _refused(tmp_path, capsys, tmp_path / 'b.mcap',
             f'{JOINTS}: recorded as sensor_msgs/msg/Imu, but sensors.joints.type is '
             'sensor_msgs/msg/JointState')


def test_an_event_of_an_unknown_type_is_refused(tmp_path, capsys):
    messages = [(topic, 'nobody/action/Unknown_SendGoal_Event' if topic == SENDGOAL else kind,
                 data, when) for topic, kind, data, when in good_bag()]
    write_bag(tmp_path / 'b.mcap', messages)
    _refused(tmp_path, capsys, tmp_path / 'b.mcap',
             f'{SENDGOAL}: recorded as nobody/action/Unknown_SendGoal_Event')


def test_a_task_with_no_step_is_refused(tmp_path, capsys):
    write_bag(tmp_path / 'b.mcap', [joints(t) for t in range(0, 1000, 20)])
    _refused(tmp_path, capsys, tmp_path / 'b.mcap', 'has no step')


def test_a_clock_going_backwards_is_refused(tmp_path, capsys):
    messages = good_bag()
    messages.append(joints(100))
    write_bag(tmp_path / 'b.mcap', messages)
    _refused(tmp_path, capsys, tmp_path / 'b.mcap', f'clock goes backwards on {JOINTS}')


def test_goals_without_contents_are_refused_naming_the_topic(tmp_path, capsys):
    messages = [joints(t) for t in range(0, 2000, 20)] + fib_call(500, 800, contents=False)
    write_bag(tmp_path / 'b.mcap', sorted(messages, key=lambda m: m[3]))
    _refused(tmp_path, capsys, tmp_path / 'b.mcap', f'{SENDGOAL}: an event without contents')


def test_status_without_introspection_is_refused_naming_what_is_missing(tmp_path, capsys):
    status = bytes(serialize_message(GoalStatusArray()))
    messages = [joints(t) for t in range(0, 2000, 20)] + [
        (f'{FIB}/_action/status', 'action_msgs/msg/GoalStatusArray', status, T0 + 500 * MS)]
    write_bag(tmp_path / 'b.mcap', sorted(messages, key=lambda m: m[3]))
    _refused(tmp_path, capsys, tmp_path / 'b.mcap',
             f'the bag has {FIB}/_action/status (goals were sent) but not {SENDGOAL}, '
             f'{FIB}/_action/get_result/_service_event nor {FIB}/goal')


def test_a_stale_sensor_skips_the_task_and_says_so(tmp_path, capsys):
    messages = [joints(t) for t in range(0, 200, 20)] + fib_call(1500, 1600)
    write_bag(tmp_path / 'b.mcap', sorted(messages, key=lambda m: m[3]))
    code, out, err = run(tmp_path, tmp_path / 'b.mcap', capsys)
    assert code == 0, err
    (task,) = json.loads(out)['tasks']
    assert task['trajectory'] is None
    assert 'stale sensors: pre: joints (1.320 s old, max_age 0.5 s)' in task['skipped']
    with SqliteStore(path=str(tmp_path / 'cache.db'), read_only=True) as store:
        assert store.trajectories(task='t') == []


def test_a_missing_params_file_is_refused(tmp_path, capsys):
    write_bag(tmp_path / 'b.mcap', good_bag())
    code = main(['learn', str(tmp_path / 'b.mcap'), '--params-file', str(tmp_path / 'no.yaml'),
                 '--task', 't', '--store', str(tmp_path / 'cache.db')])
    assert code == 1 and 'no such file' in capsys.readouterr().err


def test_a_fleet_store_keeps_the_source(tmp_path, capsys, pg_server):  # noqa: F811
    write_bag(tmp_path / 'b.mcap', good_bag())
    url = pg_server.new_url()
    code = main(['learn', str(tmp_path / 'b.mcap'), '--params-file', str(params_file(tmp_path)),
                 '--task', 't', '--store', url])
    assert code == 0, capsys.readouterr().err
    from muscle_mem_ros.store import open_store
    with open_store(url, read_only=True) as store:
        (info,) = store.trajectories(task='t')
        assert store.sources(task='t') == {
            info.id: f'{(tmp_path / "b.mcap").resolve()} 0.000-1.980 s'}
