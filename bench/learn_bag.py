#!/usr/bin/env python3
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
Learning a one-hour bag: time and peak memory of ``muscle-mem learn``.

The bag is synthesized here, as a robot recorded with ``ros2 bag record`` would hold it
(MCAP, zstd chunks, receive times as log times): a 7-joint ``JointState`` at
``--joint-hz`` (default 100), the object's ``PoseStamped`` at ``--object-hz`` (30), and
every ``--every`` seconds (30) one ExecuteTask of the agent (introspection events of its
goal and result) whose four steps are introspection events as the servers publish them:
the arm's ``FollowJointTrajectory`` (2 s, with feedback at 50 Hz while it runs; the
joints move along it), the gripper's ``SetBool``, the arm to the object, a ``Fibonacci``.
The object sits at one of three positions, by task. Then ``muscle-mem learn`` runs in a
child process on that bag, into an empty SQLite store; its wall time and peak RSS (the
child's ``ru_maxrss``) are the figures, with the time split read from its ``--json``.

With ``--sizes 0.25,0.5,1,2`` it learns instead bags of those sizes (GiB) made mostly of
camera images (640x480 RGB at ``--camera-hz``, never a sensor) beside the joints at
``--joint-hz`` (say 1000): peak RSS against bag size, in ``bench/learn_bag_sizes.md``.

Run: ``. scripts/setup.sh; python bench/learn_bag.py`` (writes ``bench/learn_bag.md``);
``python bench/learn_bag.py --sizes 0.25,0.5,1,2 --joint-hz 1000 --every 10``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
import heapq
import json
import os
from pathlib import Path
import subprocess
import sys
import tempfile
import time

from _common import cpu_name

HERE = Path(__file__).resolve().parent
T0 = 1_700_000_000 * 10**9
SEC = 10**9
JOINTS = [f'panda_joint{i}' for i in range(1, 8)]
HOME = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
POSITIONS = [(0.5, 0.0, 0.02), (0.55, 0.05, 0.02), (0.45, -0.06, 0.02)]
ARM = '/panda/arm/follow_joint_trajectory'
FIB = '/panda/count'
GRIPPER = '/panda/gripper/set'
AGENT = '/agent/execute_task'
IMAGE_BYTES = 640 * 480 * 3


class _Writer:
    """An MCAP file being written (schemas carry the type name)."""

    def __init__(self, path: Path) -> None:
        from mcap.writer import CompressionType, Writer
        self._stream = open(path, 'wb')
        self._writer = Writer(self._stream, compression=CompressionType.ZSTD)
        self._writer.start(profile='ros2', library='bench/learn_bag.py')
        self._channels: dict[str, int] = {}
        self.count = 0

    def add(self, topic: str, type_name: str, data: bytes, when: int) -> None:
        from mcap.well_known import MessageEncoding, SchemaEncoding
        if topic not in self._channels:
            schema = self._writer.register_schema(type_name, SchemaEncoding.ROS2, b'')
            self._channels[topic] = self._writer.register_channel(
                topic, MessageEncoding.CDR, schema)
        self._writer.add_message(self._channels[topic], log_time=when, data=data,
                                 publish_time=when, sequence=self.count)
        self.count += 1

    def close(self) -> None:
        self._writer.finish()
        self._stream.close()


def _events(action: object, server: str, type_name: str, goal: object, result: object,
            start: int, end: int, seq: int) -> list[tuple[str, str, object, int]]:
    from builtin_interfaces.msg import Time
    from service_msgs.msg import ServiceEventInfo
    from unique_identifier_msgs.msg import UUID
    impl = action.Impl  # type: ignore[attr-defined]
    uuid = UUID(uuid=list((seq % 2**32).to_bytes(4, 'big')) * 4)

    def info(kind: int, number: int, when: int) -> ServiceEventInfo:
        return ServiceEventInfo(event_type=kind, sequence_number=number,
                                stamp=Time(sec=when // SEC, nanosec=when % SEC),
                                client_gid=list(range(16)))
    send, get = impl.SendGoalService, impl.GetResultService
    return [
        (f'{server}/_action/send_goal/_service_event', f'{type_name}_SendGoal_Event',
         send.Event(info=info(ServiceEventInfo.REQUEST_RECEIVED, seq, start),
                    request=[send.Request(goal_id=uuid, goal=goal)]), start),
        (f'{server}/_action/send_goal/_service_event', f'{type_name}_SendGoal_Event',
         send.Event(info=info(ServiceEventInfo.RESPONSE_SENT, seq, start + SEC // 1000),
                    response=[send.Response(accepted=True)]), start + SEC // 1000),
        (f'{server}/_action/get_result/_service_event', f'{type_name}_GetResult_Event',
         get.Event(info=info(ServiceEventInfo.REQUEST_RECEIVED, seq, start + 2 * SEC // 1000),
                   request=[get.Request(goal_id=uuid)]), start + 2 * SEC // 1000),
        (f'{server}/_action/get_result/_service_event', f'{type_name}_GetResult_Event',
         get.Event(info=info(ServiceEventInfo.RESPONSE_SENT, seq, end),
                   response=[get.Response(status=4, result=result)]), end),
    ]


def synthesize(path: Path, *, seconds: float, every: float, joint_hz: float,
               object_hz: float, camera_hz: float = 0.0) -> int:
    """Write the bag; return its number of messages."""
    from geometry_msgs.msg import PoseStamped
    from muscle_mem_demo_interfaces.action import FollowJointTrajectory
    from muscle_mem_interfaces.action import ExecuteTask
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState
    from std_srvs.srv import SetBool
    from test_msgs.action import Fibonacci
    from trajectory_msgs.msg import JointTrajectoryPoint

    end = T0 + int(seconds * SEC)
    moves: list[tuple[int, int, list[float], list[float]]] = []
    calls: list[tuple[str, str, object, int]] = []
    seq = 0
    for index in range(int(seconds // every)):
        start = T0 + int((index * every + 1.0) * SEC)
        obj = POSITIONS[index % len(POSITIONS)]
        out = [0.1, -0.5, 0.1, -2.0, 0.0, 1.6, 0.8]
        over = [obj[0], obj[1], 0.0, -2.2, 0.0, 1.7, 0.8]
        at = start + SEC // 10
        plan = [('arm', out), ('gripper', True), ('arm', over), ('fib', 5)]
        joints = list(HOME)
        for kind, arg in plan:
            seq += 1
            if kind == 'arm':
                goal = FollowJointTrajectory.Goal()
                goal.trajectory.joint_names = JOINTS
                goal.trajectory.points = [JointTrajectoryPoint(positions=arg)]
                done = at + 2 * SEC
                calls += _events(FollowJointTrajectory, ARM,
                                 'muscle_mem_demo_interfaces/action/FollowJointTrajectory',
                                 goal, FollowJointTrajectory.Result(), at, done, seq)
                moves.append((at, done, joints, list(arg)))
                joints = list(arg)
            elif kind == 'fib':
                done = at + SEC // 20
                calls += _events(Fibonacci, FIB, 'test_msgs/action/Fibonacci',
                                 Fibonacci.Goal(order=arg), Fibonacci.Result(sequence=[0, 1]),
                                 at, done, seq)
            else:
                done = at + SEC // 20
                from builtin_interfaces.msg import Time
                from service_msgs.msg import ServiceEventInfo
                info = {'client_gid': list(range(16)), 'sequence_number': seq}
                calls.append((f'{GRIPPER}/_service_event', 'std_srvs/srv/SetBool_Event',
                              SetBool.Event(info=ServiceEventInfo(
                                  event_type=ServiceEventInfo.REQUEST_RECEIVED,
                                  stamp=Time(sec=at // SEC, nanosec=at % SEC), **info),
                                  request=[SetBool.Request(data=True)]), at))
                calls.append((f'{GRIPPER}/_service_event', 'std_srvs/srv/SetBool_Event',
                              SetBool.Event(info=ServiceEventInfo(
                                  event_type=ServiceEventInfo.RESPONSE_SENT,
                                  stamp=Time(sec=done // SEC, nanosec=done % SEC), **info),
                                  response=[SetBool.Response(success=True)]), done))
            at = done + SEC // 5
        seq += 1
        calls += _events(ExecuteTask, AGENT, 'muscle_mem_interfaces/action/ExecuteTask',
                         ExecuteTask.Goal(task='pick'), ExecuteTask.Result(success=True),
                         start, at + SEC // 2, seq)
        moves.append((at, at + 1, joints, list(HOME)))
    stream = sorted((when, topic, kind, bytes(serialize_message(msg)))
                    for topic, kind, msg, when in calls)

    def joint_states() -> Iterator[tuple[int, str, str, bytes]]:
        move = 0
        for when in range(T0, end, int(SEC / joint_hz)):
            while move < len(moves) and moves[move][1] <= when:
                move += 1
            if move < len(moves) and moves[move][0] <= when:
                a, b, p, q = moves[move]
                f = (when - a) / (b - a)
                position = [x + (y - x) * f for x, y in zip(p, q)]
            elif move > 0:
                position = moves[move - 1][3]
            else:
                position = HOME
            yield (when, '/panda/joint_states', 'sensor_msgs/msg/JointState',
                   bytes(serialize_message(JointState(name=JOINTS, position=position))))

    def object_poses() -> Iterator[tuple[int, str, str, bytes]]:
        for when in range(T0, end, int(SEC / object_hz)):
            index = max(0, int(((when - T0) / SEC - 1.0) // every))
            pose = PoseStamped()
            pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = \
                POSITIONS[index % len(POSITIONS)]
            pose.pose.orientation.w = 1.0
            yield (when, '/object_pose', 'geometry_msgs/msg/PoseStamped',
                   bytes(serialize_message(pose)))

    out = _Writer(path)
    for when, topic, kind, data in heapq.merge(
            stream, joint_states(), object_poses(), _images(end, camera_hz),
            key=lambda m: m[0]):
        out.add(topic, kind, data, when)
    out.close()
    return out.count


def _images(end: int, hz: float) -> Iterator[tuple[int, str, str, bytes]]:
    """Yield a camera's 640x480 RGB images at ``hz``, each its own noise (incompressible)."""
    if hz <= 0:
        return
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import Image
    size = IMAGE_BYTES
    template = bytes(serialize_message(Image(height=480, width=640, encoding='rgb8',
                                             step=1920, data=bytes(size))))
    head = template[:-size]
    assert template[-size:] == bytes(size)  # the pixels are the message's last bytes
    for when in range(T0, end, int(SEC / hz)):
        yield when, '/camera/image_raw', 'sensor_msgs/msg/Image', head + os.urandom(size)


def params(path: Path, store: Path) -> Path:
    import yaml
    values = {
        'store_path': str(store), 'agent_action': AGENT, 'robot_description_timeout': 0.0,
        'sensors': {
            'joints': {'topic': '/panda/joint_states', 'type': 'sensor_msgs/msg/JointState',
                       'fields': ['position'], 'tolerance': [0.01], 'max_age': 0.5},
            'object': {'topic': '/object_pose', 'type': 'geometry_msgs/msg/PoseStamped',
                       'fields': ['pose.position'], 'tolerance': [0.02], 'mode': 'norm',
                       'max_age': 0.5}},
        'actions': {
            'arm': {'server': ARM,
                    'type': 'muscle_mem_demo_interfaces/action/FollowJointTrajectory'},
            'fib': {'server': FIB, 'type': 'test_msgs/action/Fibonacci'}},
        'services': {'gripper': {'server': GRIPPER, 'type': 'std_srvs/srv/SetBool'}},
    }
    path.write_text(yaml.safe_dump({'muscle_mem': {'ros__parameters': values}}))
    return path


def _learn(bag: Path, params_file: Path,
           tmp: Path) -> tuple[float, float, float, dict] | None:
    """Run ``muscle-mem learn`` on the bag in a child: its wall and CPU time, peak RSS, JSON."""
    out, err = tmp / 'learn.out', tmp / 'learn.err'
    began = time.monotonic()
    with open(out, 'w') as stdout, open(err, 'w') as stderr:
        child = subprocess.Popen(
            [sys.executable, '-m', 'muscle_mem_ros.cli', 'learn', str(bag), '--params-file',
             str(params_file), '--task', 'pick', '--json'], stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
    took = time.monotonic() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        print(err.read_text(), file=sys.stderr)
        return None
    return (took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0,
            json.loads(out.read_text()))


def sizes(args: argparse.Namespace) -> int:
    """Learn bags of growing size (camera images, joints at 1 kHz); write peak RSS per size."""
    rows = []
    began_all = time.monotonic()
    load = os.getloadavg()[0]
    for gib in (float(x) for x in args.sizes.split(',')):
        seconds = gib * 2**30 / (IMAGE_BYTES * args.camera_hz)
        with tempfile.TemporaryDirectory() as tmp_dir:
            tmp = Path(tmp_dir)
            bag = tmp / 'big.mcap'
            began = time.monotonic()
            count = synthesize(bag, seconds=seconds, every=args.every, joint_hz=args.joint_hz,
                               object_hz=args.object_hz, camera_hz=args.camera_hz)
            wrote = time.monotonic() - began
            learned = _learn(bag, params(tmp / 'robot.yaml', tmp / 'cache.db'), tmp)
            if learned is None:
                return 1
            took, cpu, peak, report = learned
            rows.append({'gib': gib, 'bytes': bag.stat().st_size, 'seconds': seconds,
                         'messages': count, 'wrote_s': wrote, 'learn_s': took, 'cpu_s': cpu,
                         'peak_rss_mib': peak, 'tasks': len(report['tasks']),
                         'steps': sum(t['steps'] for t in report['tasks'])})
            print(rows[-1], flush=True)
    total = time.monotonic() - began_all
    command = 'python bench/learn_bag.py ' + ' '.join(sys.argv[1:])
    lines = [
        '# Learning bags of growing size: peak memory against bag size',
        '',
        f'Generated by `{command}`; one run on {cpu_name()}, nproc {os.cpu_count()}, Python '
        f'{sys.version.split()[0]}, load average {load:.2f} at the start (the machine is '
        f'shared); the whole run took {total:.0f} s.',
        '',
        f'Each bag (MCAP, zstd chunks): 640x480 RGB camera images at {args.camera_hz:g} Hz '
        '(each its own noise: incompressible, 0.88 MiB), a 7-joint JointState at '
        f"{args.joint_hz:g} Hz, the object's pose at {args.object_hz:g} Hz, one ExecuteTask "
        f'every {args.every:g} s with four steps (introspection events); its length is what '
        'the size asks for. The params file names the joints and the object as sensors and '
        'not the camera. `muscle-mem learn` runs in a child; its peak RSS is its own '
        '(`wait4`).',
        '',
        '| bag | recording | messages | tasks | steps | learn wall time | its CPU time '
        '| peak RSS |',
        '|---:|---:|---:|---:|---:|---:|---:|---:|',
        *(f"| {r['bytes'] / 2**30:.2f} GiB | {r['seconds']:.0f} s | {r['messages']} | "
          f"{r['tasks']} | {r['steps']} | {r['learn_s']:.1f} s | {r['cpu_s']:.1f} s | "
          f"{r['peak_rss_mib']:.0f} MiB |" for r in rows),
        '',
        '## Reading the results',
        '',
        "- Learn reads the bag once and keeps only the calls' events, the tasks' and the "
        "description: the images are read and dropped, each sensor's last message is held "
        '(its last 200 for one read by name), and each step keeps its snapshots and trace. '
        "Peak memory follows what is kept (the steps), not the bag's size.",
    ]
    out = Path(args.out or HERE / 'learn_bag_sizes.md')
    out.write_text('\n'.join(lines) + '\n')
    out.with_suffix('.json').write_text(json.dumps({'command': command, 'rows': rows},
                                                   indent=1) + '\n')
    print('\n'.join(lines))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[1])
    parser.add_argument('--seconds', type=float, default=3600.0)
    parser.add_argument('--every', type=float, default=30.0)
    parser.add_argument('--joint-hz', type=float, default=100.0)
    parser.add_argument('--object-hz', type=float, default=30.0)
    parser.add_argument('--out', default=None, help='default bench/learn_bag.md, or '
                        'bench/learn_bag_sizes.md with --sizes')
    parser.add_argument('--sizes', default='', metavar='GIB,...',
                        help='instead: bags of these sizes (GiB) of camera images at '
                        '--camera-hz beside the joints at --joint-hz (say 1000), learned one '
                        'by one: peak RSS against bag size')
    parser.add_argument('--camera-hz', type=float, default=10.0)
    args = parser.parse_args()
    if args.sizes:
        return sizes(args)
    args.out = args.out or str(HERE / 'learn_bag.md')
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        bag = tmp / 'hour.mcap'
        began = time.monotonic()
        count = synthesize(bag, seconds=args.seconds, every=args.every,
                           joint_hz=args.joint_hz, object_hz=args.object_hz)
        wrote = time.monotonic() - began
        store = tmp / 'cache.db'
        params_file = params(tmp / 'robot.yaml', store)
        load = os.getloadavg()[0]
        learned = _learn(bag, params_file, tmp)
        if learned is None:
            return 1
        took, cpu, peak, report = learned
        size = bag.stat().st_size / 2**20
    tasks = report['tasks']
    filed = sorted({t['trajectory'] for t in tasks if t['trajectory']})
    lines = [
        '# Learning a one-hour bag',
        '',
        f'Generated by `bench/learn_bag.py`; one run on {cpu_name()}, nproc {os.cpu_count()}, '
        f'Python {sys.version.split()[0]}, load average {load:.2f} at the start (the machine '
        'is shared).',
        '',
        f'The bag: {args.seconds:g} s, {count} messages, {size:.1f} MiB (MCAP, zstd): '
        f'JointState (7 joints) at {args.joint_hz:g} Hz, PoseStamped at {args.object_hz:g} '
        f'Hz, one ExecuteTask every {args.every:g} s with four steps each (two 2 s arm goals '
        'with the joints moving, a gripper call, a count), the object at one of three '
        f'positions; written in {wrote:.1f} s.',
        '',
        '| figure | value |',
        '|---|---:|',
        f'| `muscle-mem learn` wall time (process start to exit) | {took:.1f} s |',
        f'| its CPU time (user and system) | {cpu:.1f} s |',
        f'| peak RSS of that process | {peak:.0f} MiB |',
        f'| tasks found (ExecuteTask calls) | {len(tasks)} |',
        f'| steps built | {sum(t["steps"] for t in tasks)} |',
        f'| tasks skipped (stale sensors) | {sum(1 for t in tasks if t["skipped"])} |',
        f'| trajectories in the store after | {len(filed)} |',
        f'| per hour of recording: learn time / recording time | {took / args.seconds:.4f} |',
        '',
        '## Reading the results',
        '',
        "- The bag is read once, in one pass: the calls' events and the tasks' are kept, "
        "each sensor's last message is held and decoded only where a snapshot or a trace "
        "sample needs one (pre, post, and the watch's rate during action steps); memory is "
        'the interpreter, rclpy and the interfaces (about 110 MiB) and the steps kept, not '
        'the bag (`--sizes` learns bags of growing size: bench/learn_bag_sizes.md).',

        '- Repeats fold into their branch (the filer), so the store holds a trajectory per '
        'situation the bindings cannot explain, not one per task in the bag.',
    ]
    Path(args.out).write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))
    return 0


if __name__ == '__main__':
    sys.exit(main())
