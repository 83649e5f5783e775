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
Behavior-cache node: replay overhead per step, proxy overhead per goal, CPU idle and watching.

Five processes on loopback (real rclpy, Fast DDS, SQLite), all started by this script:

* the controller (``_peers.py server``): a zero-duration
  ``muscle_mem_demo_interfaces/action/FollowJointTrajectory`` server that succeeds every goal at
  once (but holds a goal marked ``hold`` for its last point's ``time_from_start``) and
  notes when each goal request arrives (``time.monotonic_ns``). It keeps finished goals for
  ``--result-timeout`` (1 s; rclpy's default is 10 s): every action status message lists all
  goals the server keeps, and with back-to-back goals a 10 s window makes every client
  deserialize hundreds of entries per message, a cost that grows through the run and
  would swamp what is measured here;
* a minimal relay (``_peers.py relay``), for reference: the least any rclpy action proxy
  costs on the machine;
* the sensors (``_peers.py sensors``): ``JointState`` (7 joints) at 1 kHz and ``LaserScan``
  (1080 beams) at 40 Hz, constant values, so every check passes;
* the cache node (``_node_host.py``): the real ``behavior_cache`` main with two timing
  probes (the post-check sensor wait, and the replayed call); checks on both sensors
  (joints ``abs`` 0.01 rad, scan ``rms`` 0.05 m, max_age 0.5 s), one proxied action, a
  SQLite store in a temporary directory, the check during a step on (``watch``, the default);
* this process: a plain rclpy ``ActionClient`` (``send_goal_async`` + ``get_result_async``,
  each awaited with ``spin_until_future_complete`` on a single-threaded executor), used
  both directly against the controller and through the cache's proxy, plus the service and
  ExecuteTask clients.

Phases, in one run: warm-up; proxy pass-through (direct and proxied goals interleaved);
learning one task of ``--steps`` goals through the proxy (StartRecording, goals,
StopRecording); ``--rounds`` rounds of [``--steps`` direct goals at the replay's pace, one
replay by the ``~/replay`` service, one replay by ``~/execute_task``]; the same ExecuteTask replay
after ``--other`` trajectories of other parameter variants of the same task were written
to the store; a task of one goal held ``--hold`` s, learned through the proxy (so its step
is recorded with a trace) and replayed ``--hold-replays`` times by ExecuteTask while the
node's CPU is measured over the held goal (the replay watches the joints; the scan is
sampled, not watched: more than 16 elements); idle CPU of the node over ``--cpu-seconds``;
then a second node with ``watch: false`` on the same store replays the held task once more,
measured the same way.

Usage: bench/node [--steps 100] [--rounds 5] [--cpu-seconds 10] [--hold 10]
                  [--out bench/node.md]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any
import uuid

from _node_report import render
from _peers import HOLD, HOME, JOINTS
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_demo_interfaces.msg import JointTolerance
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import Replay, StartRecording, StopRecording
from muscle_mem_ros.records import Snapshot, Step, ToolKind
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.store import SqliteStore
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import serialize_message
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
import yaml

HERE = Path(__file__).resolve().parent
TASK = 'inspect_rack'
HOLD_TASK = 'hold_pose'
ARM_TYPE = 'muscle_mem_demo_interfaces/action/FollowJointTrajectory'
WAIT = 30.0


def paced(send: Any, count: int, period: float) -> list[float]:
    """
    Call ``send(i)`` ``count`` times, starting one call per ``period`` s; return the results.

    The direct reference goes at a replay's pace (a replay waits for the slowest
    sensor between steps): the controller's status messages list every goal it
    kept for ``result_timeout``, so back-to-back goals would make them several
    times longer than during a replay and slow the reference down.
    """
    out = []
    start = time.monotonic()
    for i in range(count):
        out.append(send(i))
        delay = start + (i + 1) * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    return out


def make_goal(i: int) -> Any:
    """Goal of step ``i``: 7 joints, 3 waypoints (a typical arm segment)."""
    points = [JointTrajectoryPoint(
        positions=[q + 0.001 * (i + 1) * (p + 1) for q in HOME], velocities=[0.0] * 7,
        time_from_start=Duration(sec=p + 1)) for p in range(3)]
    return FollowJointTrajectory.Goal(
        trajectory=JointTrajectory(joint_names=JOINTS, points=points),
        goal_tolerance=[JointTolerance(name=name, position=0.01) for name in JOINTS])


def make_hold_goal(seconds: int) -> Any:
    """Return a goal the controller holds ``seconds`` s (a motion that long; ``_peers.HOLD``)."""
    goal = make_goal(0)
    goal.trajectory.header.frame_id = HOLD
    goal.trajectory.points[-1].time_from_start = Duration(sec=seconds)
    return goal


class Peer:
    """One child process, its output in a log file (or read line by line)."""

    def __init__(self, name: str, argv: list[str], log: Path, *, env: dict[str, str] | None = None,
                 lines: bool = False) -> None:
        self.name = name
        self.log = log
        self.lines: queue.Queue[str] = queue.Queue()
        self._log_file = open(log, 'w')  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE if lines else self._log_file, stderr=self._log_file,
            env=env or dict(os.environ), text=True)
        if lines:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process (all threads) so far."""
        fields = Path(f'/proc/{self.proc.pid}/stat').read_text().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log_file.close()
        return self.proc.returncode


class Client:
    """
    The benchmark's own ROS side: plain clients, each on its own node and executor.

    Every client gets a node of its own (no parameter services) and a single-threaded
    executor that spins only that node, so a round trip wakes up only for its own
    messages: the leanest plain rclpy client, the same for the direct and proxied goals.
    """

    def __init__(self, *, prefix: str, cache: str) -> None:
        self._executors: dict[int, SingleThreadedExecutor] = {}
        server = f'/{prefix}/arm/follow_joint_trajectory'
        self.direct = self._action(FollowJointTrajectory, server, 'direct')
        self.proxy = self._action(FollowJointTrajectory, f'{cache}/arm', 'proxied')
        self.relay = self._action(FollowJointTrajectory, f'/{prefix}/relay', 'relayed')
        self.execute = self._action(ExecuteTask, f'{cache}/execute_task', 'task')
        services = self._node('services')
        self.replay = services.create_client(Replay, f'{cache}/replay')
        self.start = services.create_client(StartRecording, f'{cache}/start_recording')
        self.stop = services.create_client(StopRecording, f'{cache}/stop_recording')
        self.arrivals = services.create_client(Trigger, f'/{prefix}/arrivals')
        self._services = services

    def _node(self, name: str) -> Node:
        node = Node(f'bench_{name}', start_parameter_services=False)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        self._executors[id(node)] = executor
        return node

    def _action(self, action_type: Any, name: str, role: str) -> ActionClient:
        node = self._node(role)
        client = ActionClient(node, action_type, name)
        self._executors[id(client)] = self._executors[id(node)]
        return client

    def executor_of(self, owner: Any) -> SingleThreadedExecutor:
        return self._executors[id(owner)]

    def wait(self, future: Any, timeout: float = WAIT, owner: Any = None) -> Any:
        executor = self.executor_of(owner if owner is not None else self._services)
        executor.spin_until_future_complete(future, timeout_sec=timeout)
        if not future.done():
            raise TimeoutError(f'no answer in {timeout} s')
        return future.result()

    def ready(self, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        for action in (self.direct, self.proxy, self.relay, self.execute):
            while not action.server_is_ready():
                if time.monotonic() > deadline:
                    raise TimeoutError('action servers not discovered (is the node running?)')
                self.executor_of(action).spin_once(timeout_sec=0.05)
        for srv in (self.replay, self.start, self.stop, self.arrivals):
            if not srv.wait_for_service(timeout_sec=max(0.1, deadline - time.monotonic())):
                raise TimeoutError(f'service {srv.srv_name} not discovered')

    def destroy(self) -> None:
        for executor in set(self._executors.values()):
            for node in executor.get_nodes():
                node.destroy_node()
            executor.shutdown()

    def round_trip(self, client: ActionClient, goal: Any) -> float:
        """Send one goal and wait for its result; return the seconds it took."""
        t0 = time.perf_counter()
        handle = self.wait(client.send_goal_async(goal), owner=client)
        if handle is None or not handle.accepted:
            raise RuntimeError('goal rejected')
        wrapped = self.wait(handle.get_result_async(), owner=client)
        elapsed = time.perf_counter() - t0
        if wrapped.status != GoalStatus.STATUS_SUCCEEDED:
            raise RuntimeError(f'goal ended with status {wrapped.status}')
        return elapsed

    def call(self, srv: Any, request: Any, timeout: float = WAIT) -> Any:
        return self.wait(srv.call_async(request), timeout)

    def take_arrivals(self) -> list[int]:
        return json.loads(self.call(self.arrivals, Trigger.Request()).message)

    def execute_task(self) -> Any:
        handle = self.wait(self.execute.send_goal_async(ExecuteTask.Goal(task=TASK)),
                           owner=self.execute)
        if handle is None or not handle.accepted:
            raise RuntimeError('ExecuteTask goal rejected')
        return self.wait(handle.get_result_async(), 120.0, owner=self.execute).result

    def execute_of(self, cache: str, role: str) -> ActionClient:
        """Return an ExecuteTask client of the node ``cache``, discovered."""
        action = self._action(ExecuteTask, f'{cache}/execute_task', role)
        deadline = time.monotonic() + 90.0
        while not action.server_is_ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f'{cache}/execute_task not discovered')
            self.executor_of(action).spin_once(timeout_sec=0.05)
        return action

    def events_of(self, cache: str, role: str) -> EventLog:
        """Start keeping the events of the node ``cache`` (taken by :meth:`EventLog.take`)."""
        node = self._node(role)
        return EventLog(node, self.executor_of(node), f'{cache}/events')


class EventLog:
    """The cache's ``~/events``, kept by the subscription until taken (nothing spins between)."""

    def __init__(self, node: Node, executor: SingleThreadedExecutor, topic: str) -> None:
        self._executor = executor
        self._events: list[Any] = []
        qos = QoSProfile(depth=2000, history=HistoryPolicy.KEEP_LAST,
                         reliability=ReliabilityPolicy.RELIABLE)
        node.create_subscription(CacheEvent, topic, self._events.append, qos)

    def take(self, settle: float = 0.3) -> list[Any]:
        """Return the events received so far (waiting ``settle`` s for the last ones)."""
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline:
            self._executor.spin_once(timeout_sec=0.05)
        taken, self._events[:] = self._events[:], []
        return taken


def node_params(*, prefix: str, node: str, store: Path, watch: bool = True,
                step_timeout: float = 5.0) -> dict[str, Any]:
    return {node: {'ros__parameters': {
        'store_path': str(store), 'agent_action': '', 'cache_mode': 'learn',
        'step_timeout': step_timeout, 'post_check_timeout': 1.0, 'agent_timeout': 30.0,
        'watch': watch,
        # no robot_description here: the body is the joint names and tools (without this the
        # node waits 2 s for one, then refuses to replay until it comes)
        'robot_description_timeout': 0.0,
        'sensors': {
            'joints': {'topic': f'/{prefix}/joint_states', 'type': 'sensor_msgs/msg/JointState',
                       'fields': ['position'], 'tolerance': [0.01], 'mode': 'abs',
                       'max_age': 0.5},
            'scan': {'topic': f'/{prefix}/scan', 'type': 'sensor_msgs/msg/LaserScan',
                     'fields': ['ranges'], 'tolerance': [0.05], 'mode': 'rms', 'max_age': 0.5},
        },
        'actions': {'arm': {'server': f'/{prefix}/arm/follow_joint_trajectory',
                            'type': ARM_TYPE, 'proxy': f'/{node}/arm'}},
    }}}


Watches = list[tuple[int, int, int, int]]
"""Watches made: start_ns, end_ns, elements watched (-1: none), trace samples (-1: no trace)."""


def read_timings(path: Path) -> tuple[dict[str, bool], list[tuple[str, int, int]], Watches]:
    """
    Return the probes present, the timed records and the watches made.

    A watch made: (start_ns, end_ns, elements watched or -1 when unwatched, the most
    samples one sensor of the step's trace holds or -1 when it has no trace).
    """
    probes: dict[str, bool] = {}
    records = []
    watches = []
    for line in path.read_text().splitlines():
        item = json.loads(line)
        if item[0] == 'probes':
            probes = item[1]
        elif item[0] == 'whatif':
            probes['whatif: ' + ', '.join(item[1])] = False
        else:
            records.append((item[0], int(item[1]), int(item[2])))
            if item[0] == 'watch':
                watches.append((int(item[1]), int(item[2]), int(item[3]), int(item[4])))
    return probes, records, watches


def analyse_replay(arrivals: list[int], window: tuple[int, int],
                   records: list[tuple[str, int, int]]) -> dict[str, list[float]]:
    """
    Per-step figures of one replay, in seconds.

    interval: from one goal's arrival at the controller to the next one's; wait: the
    post-check sensor waits (probe) that started inside that interval; call / rest: from the
    node's side, the replayed call (send + result) and everything else between two calls
    except the sensor wait.
    """
    lo, hi = window
    waits = [(s, e) for k, s, e in records if k == 'wait' and lo <= s <= hi]
    calls = sorted((s, e) for k, s, e in records if k == 'call' and lo <= s <= hi)
    out: dict[str, list[float]] = {'interval': [], 'wait': [], 'call': [], 'rest': []}
    for a, b in zip(arrivals, arrivals[1:], strict=False):
        wait = sum(e - s for s, e in waits if a <= s < b)
        out['interval'].append((b - a) / 1e9)
        out['wait'].append(wait / 1e9)
    for (s0, e0), (s1, _e1) in zip(calls, calls[1:], strict=False):
        wait = sum(e - s for s, e in waits if e0 <= s < s1)
        out['call'].append((e0 - s0) / 1e9)
        out['rest'].append((s1 - s0 - (e0 - s0) - wait) / 1e9)
    return out


def add_other_variants(store_path: Path, count: int, steps: int, server: str) -> float:
    """Write ``count`` trajectories of TASK under other params into the node's store."""
    payload = bytes(serialize_message(make_goal(0)))
    snap = Snapshot(features={'joints': tuple(HOME)}, stamps={'joints': 0.0})
    t0 = time.perf_counter()
    with SqliteStore(path=store_path) as store, store.batch():
        for v in range(count):
            params = json.dumps({'rack': v + 1})
            store.add_trajectory(task=TASK, variant=params, params_json=params, steps=[
                Step(tool=server, kind=ToolKind.ACTION, type_name=ARM_TYPE, payload=payload,
                     payload_json='{}', pre=snap, post=snap, duration=0.001)
                for _ in range(steps)])
    return time.perf_counter() - t0


def learn_hold(client: Client, hold: int) -> float:
    """Learn HOLD_TASK through the proxy: one goal held ``hold`` s; return its round trip."""
    answer = client.call(client.start, StartRecording.Request(task=HOLD_TASK))
    if not answer.success:
        raise RuntimeError(f'start_recording ({HOLD_TASK}): {answer.message}')
    took = client.round_trip(client.proxy, make_hold_goal(hold))
    answer = client.call(client.stop, StopRecording.Request(save=True))
    if not answer.success or answer.steps != 1:
        raise RuntimeError(f'stop_recording ({HOLD_TASK}): {answer.message}')
    client.take_arrivals()
    return took


def hold_replay(client: Client, action: ActionClient, *, cache: Peer, sensors: Peer,
                events: EventLog, hold: int, margin: float) -> dict[str, Any]:
    """
    Replay HOLD_TASK once by ExecuteTask; measure the node's CPU while its goal is held.

    The window opens ``margin`` s after the ExecuteTask goal was accepted and closes
    ``margin`` s before ``hold`` s after that; ``inside`` says whether it lay within the
    controller's hold (from the goal's arrival there). Nothing in this process spins
    during the window. The sensors report their counts at both ends (achieved rates).
    """
    handle = client.wait(action.send_goal_async(ExecuteTask.Goal(task=HOLD_TASK)), owner=action)
    if handle is None or not handle.accepted:
        raise RuntimeError(f'ExecuteTask goal ({HOLD_TASK}) rejected')
    accepted = time.monotonic()
    time.sleep(margin)
    os.kill(sensors.proc.pid, signal.SIGUSR1)
    c0, w0 = cache.cpu_seconds(), time.monotonic_ns()
    time.sleep(max(0.0, accepted + hold - margin - time.monotonic()))
    c1, w1 = cache.cpu_seconds(), time.monotonic_ns()
    os.kill(sensors.proc.pid, signal.SIGUSR1)
    result = client.wait(handle.get_result_async(), hold + 60.0, owner=action).result
    arrivals = client.take_arrivals()
    first = json.loads(sensors.lines.get(timeout=5))
    last = json.loads(sensors.lines.get(timeout=5))
    span = last['t'] - first['t']
    seen = events.take()
    step_ok = [e for e in seen if e.type == CacheEvent.STEP_OK and e.step == 0]
    failed = [e for e in seen if e.type == CacheEvent.CHECK_FAILED]
    return {
        'ok': bool(result.success and result.cache_hit and result.steps_replayed == 1),
        'message': result.message, 'cpu': (c1 - c0) / ((w1 - w0) / 1e9),
        'window': (w0, w1), 'seconds': (w1 - w0) / 1e9,
        'inside': len(arrivals) == 1 and arrivals[0] <= w0 <= w1 <= arrivals[0] + hold * 1e9,
        'joint_hz': (last['joint_states'] - first['joint_states']) / span,
        'scan_hz': (last['scan'] - first['scan']) / span,
        'watched': list(step_ok[0].watched) if step_ok else None,
        'unwatched': list(step_ok[0].unwatched) if step_ok else None,
        'failed': [e.detail for e in failed],
    }


def _cpu_all(cache: Peer, server: Peer) -> dict[str, float]:
    """CPU seconds so far of the node, the controller and this process, and the time."""
    own = os.times()
    return {'node': cache.cpu_seconds(), 'server': server.cpu_seconds(),
            'bench': own.user + own.system, 'wall': time.monotonic()}


def _cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in before}


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    prefix, node_name = f'nb{tag}', f'mm_bench_{tag}'
    store = work / 'cache.db'
    params_file = work / 'params.yaml'
    step_timeout = max(5.0, args.hold + 10.0)  # the held goal must not time out
    params_file.write_text(yaml.safe_dump(node_params(
        prefix=prefix, node=node_name, store=store, step_timeout=step_timeout)))
    timings = work / 'timings.jsonl'
    timings_off = work / 'timings_off.jsonl'
    py = sys.executable
    peers = HERE / '_peers.py'
    res: dict[str, Any] = {'loadavg_start': os.getloadavg()}
    server = Peer('controller', [py, str(peers), 'server', '--prefix', prefix, '--result-timeout',
                                 str(args.result_timeout)], work / 'server.log')
    relay = Peer('relay', [py, str(peers), 'relay', '--prefix', prefix, '--result-timeout',
                           str(args.result_timeout)], work / 'relay.log')
    sensors = Peer('sensors', [py, str(peers), 'sensors', '--prefix', prefix, '--joint-hz',
                               str(args.joint_hz), '--scan-hz', str(args.scan_hz)],
                   work / 'sensors.log', lines=True)
    cache = Peer('cache', [py, str(HERE / '_node_host.py'), '--ros-args', '-r',
                           f'__node:={node_name}', '--params-file', str(params_file)],
                 work / 'cache.log', env={**os.environ, 'MM_BENCH_TIMINGS': str(timings)})
    peers_all = (server, relay, sensors, cache)
    cache_off: Peer | None = None
    rclpy.init()
    client = Client(prefix=prefix, cache=f'/{node_name}')
    try:
        for peer in peers_all:
            if not peer.alive():
                raise RuntimeError(f'{peer.name} exited: {peer.log.read_text()[-2000:]}')
        client.ready(timeout=90.0)
        for peer in peers_all:
            if not peer.alive():
                raise RuntimeError(f'{peer.name} exited: {peer.log.read_text()[-2000:]}')
        # The node's own client must have discovered the controller too.
        deadline = time.monotonic() + 90.0
        while True:
            try:
                client.round_trip(client.proxy, make_goal(0))
                client.round_trip(client.relay, make_goal(0))
                break
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        # Warm-up: discovery, first-use allocations, the node's first sensor messages.
        for i in range(args.warmup):
            client.round_trip(client.direct, make_goal(i))
            client.round_trip(client.proxy, make_goal(i))
            client.round_trip(client.relay, make_goal(i))
        time.sleep(1.0)

        # Proxy pass-through, interleaved in alternating order: at a replay's pace (the
        # figures judged against the target), then back to back (shown for comparison).
        order = ((client.direct, 'direct'), (client.proxy, 'proxied'), (client.relay, 'relayed'))

        def passthrough(count: int, period: float) -> dict[str, Any]:
            times: dict[str, list[float]] = {'direct': [], 'proxied': [], 'relayed': []}
            own_cpu: dict[str, list[float]] = {'direct': [], 'proxied': [], 'relayed': []}

            def send(j: int) -> float:
                i, k = divmod(j, 3)  # rotate the order: each kind goes first, second, third
                cl, kind = order[(i + k) % 3]
                c0 = time.process_time()
                times[kind].append(client.round_trip(cl, make_goal(i)))
                own_cpu[kind].append(time.process_time() - c0)
                return 0.0

            cpu0 = _cpu_all(cache, server)
            r0 = relay.cpu_seconds()
            paced(send, 3 * count, period)
            cpu = _cpu_delta(cpu0, _cpu_all(cache, server))
            cpu['relay'] = relay.cpu_seconds() - r0
            return {'times': times, 'client_cpu': own_cpu, 'cpu': cpu}

        paced_run = passthrough(args.passthrough, 1.0 / args.scan_hz)
        times = paced_run['times']
        direct, proxied, relayed = times['direct'], times['proxied'], times['relayed']
        res['pass_client_cpu'] = paced_run['client_cpu']
        res['pass_direct'], res['pass_proxy'], res['pass_relay'] = direct, proxied, relayed
        res['pass_paired'] = [p - d for d, p in zip(direct, proxied, strict=True)]
        res['pass_relay_paired'] = [p - d for d, p in zip(direct, relayed, strict=True)]
        res['pass_cpu'] = paced_run['cpu']
        res['pass_b2b'] = passthrough(args.passthrough_b2b, 0.0)['times']

        # Learn one long task through the proxy (teach: start, goals, stop).
        answer = client.call(client.start, StartRecording.Request(task=TASK))
        if not answer.success:
            raise RuntimeError(f'start_recording: {answer.message}')
        learn = [client.round_trip(client.proxy, make_goal(i)) for i in range(args.steps)]
        answer = client.call(client.stop, StopRecording.Request(save=True))
        if not answer.success or answer.steps != args.steps:
            raise RuntimeError(f'stop_recording: {answer.message}')
        res['learn'] = learn
        client.take_arrivals()

        # Replays, each round next to a burst of direct goals.
        res['direct'], res['replays'] = [], {'service': [], 'execute': []}
        res['direct_cpu'] = []
        time.sleep(0.5)
        for _round in range(args.rounds):
            cpu0 = _cpu_all(cache, server)
            res['direct'] += paced(lambda i: client.round_trip(client.direct, make_goal(i)),
                                   args.steps, 1.0 / args.scan_hz)
            res['direct_cpu'].append(_cpu_delta(cpu0, _cpu_all(cache, server)))
            client.take_arrivals()
            for path in ('service', 'execute'):
                cpu0 = _cpu_all(cache, server)
                t0 = time.monotonic_ns()
                if path == 'service':
                    r = client.call(client.replay, Replay.Request(task=TASK), 120.0)
                    ok, steps, msg = r.success, r.steps_executed, r.message
                else:
                    r = client.execute_task()
                    ok, steps, msg = r.success and r.cache_hit, r.steps_replayed, r.message
                t1 = time.monotonic_ns()
                arrivals = client.take_arrivals()
                if not ok or steps != args.steps or len(arrivals) != args.steps:
                    raise RuntimeError(f'{path} replay: success={ok} steps={steps} '
                                       f'goals={len(arrivals)}: {msg}')
                res['replays'][path].append({'arrivals': arrivals, 'window': (t0, t1),
                                             'cpu': _cpu_delta(cpu0, _cpu_all(cache, server))})

        # The same ExecuteTask replay once the task has many other learned variants.
        res['other_write_s'] = add_other_variants(
            store, args.other, args.other_steps, f'/{prefix}/arm/follow_joint_trajectory')
        res['replays']['execute_other'] = []
        for _round in range(max(1, args.rounds // 2)):
            cpu0 = _cpu_all(cache, server)
            t0 = time.monotonic_ns()
            r = client.execute_task()
            t1 = time.monotonic_ns()
            arrivals = client.take_arrivals()
            if not (r.success and r.cache_hit) or len(arrivals) != args.steps:
                raise RuntimeError(f'replay with other variants: {r.message}')
            res['replays']['execute_other'].append({
                'arrivals': arrivals, 'window': (t0, t1),
                'cpu': _cpu_delta(cpu0, _cpu_all(cache, server))})

        # A watched motion: one goal held --hold s, learned through the proxy (traced), then
        # replayed while the node's CPU is measured over the held goal.
        events = client.events_of(f'/{node_name}', 'events')
        res['hold'] = {'learn': learn_hold(client, args.hold), 'watch': [], 'off': []}
        events.take()
        for _round in range(args.hold_replays):
            res['hold']['watch'].append(hold_replay(
                client, client.execute, cache=cache, sensors=sensors, events=events,
                hold=args.hold, margin=args.hold_margin))

        # Idle CPU: nothing runs; the node only receives the sensor streams. A listener that
        # never takes a message gives the floor (DDS receive threads) in the same window.
        listen = Peer('listen', [py, str(peers), 'listen', '--prefix', prefix],
                      work / 'listen.log')
        time.sleep(args.cpu_warmup)
        os.kill(sensors.proc.pid, signal.SIGUSR1)
        c0, w0 = cache.cpu_seconds(), time.monotonic()
        s0, l0 = sensors.cpu_seconds(), listen.cpu_seconds()
        time.sleep(args.cpu_seconds)
        c1, w1 = cache.cpu_seconds(), time.monotonic()
        s1, l1 = sensors.cpu_seconds(), listen.cpu_seconds()
        listen.stop()
        os.kill(sensors.proc.pid, signal.SIGUSR1)
        first = json.loads(sensors.lines.get(timeout=5))
        last = json.loads(sensors.lines.get(timeout=5))
        span = last['t'] - first['t']
        res['cpu'] = {'node': (c1 - c0) / (w1 - w0), 'window': w1 - w0,
                      'publisher': (s1 - s0) / (w1 - w0), 'floor': (l1 - l0) / (w1 - w0),
                      'joint_hz': (last['joint_states'] - first['joint_states']) / span,
                      'scan_hz': (last['scan'] - first['scan']) / span}
        for peer in peers_all:
            if not peer.alive():
                raise RuntimeError(f'{peer.name} exited during the run')

        # The same held replay on a node with the watch off (same store, same peers).
        cache.stop()
        off_name = f'{node_name}_off'
        off_params = work / 'params_off.yaml'
        off_params.write_text(yaml.safe_dump(node_params(
            prefix=prefix, node=off_name, store=store, watch=False, step_timeout=step_timeout)))
        cache_off = Peer('cache, watch off', [
            py, str(HERE / '_node_host.py'), '--ros-args', '-r', f'__node:={off_name}',
            '--params-file', str(off_params)], work / 'cache_off.log',
            env={**os.environ, 'MM_BENCH_TIMINGS': str(timings_off)})
        execute_off = client.execute_of(f'/{off_name}', 'task_off')
        events_off = client.events_of(f'/{off_name}', 'events_off')
        time.sleep(args.cpu_warmup)  # discovery of the controller, first sensor data
        for _round in range(args.hold_replays_off):
            res['hold']['off'].append(hold_replay(
                client, execute_off, cache=cache_off, sensors=sensors, events=events_off,
                hold=args.hold, margin=args.hold_margin))
    finally:
        client.destroy()
        rclpy.try_shutdown()
        for peer in (cache, *([cache_off] if cache_off else []), sensors, relay, server):
            peer.stop()
    time.sleep(0.3)
    if args.keep_timings is not None:
        args.keep_timings.write_bytes(timings.read_bytes())
    res['probes'], records, watches = read_timings(timings)
    res['windows'] = [one['window'] for runs in res['replays'].values() for one in runs]
    res['watching'] = {path: watching([one['window'] for one in runs], records, watches)
                       for path, runs in res['replays'].items()}
    for one in res['hold']['watch']:
        one.update(watching([one['window']], records, watches, made_before=True))
    _, records_off, _ = read_timings(timings_off)
    for one in res['hold']['off']:
        one.update(watching([one['window']], records_off, [], made_before=True))
    for path, runs in res['replays'].items():
        merged: dict[str, list[float]] = {}
        for one in runs:
            for key, values in analyse_replay(one['arrivals'], one['window'], records).items():
                merged.setdefault(key, []).extend(values)
        merged['total'] = [(one['window'][1] - one['window'][0]) / 1e9 for one in runs]
        merged['cpu'] = [one['cpu'] for one in runs]
        res['replays'][path] = merged
    res['parts'] = step_parts(res['windows'], records)
    res['loadavg_end'] = os.getloadavg()
    return res


def watching(windows: list[tuple[int, int]], records: list[tuple[str, int, int]],
             watches: Watches, *,
             made_before: bool = False) -> dict[str, Any]:
    """
    Return what the watch did inside the windows: watches made, polls, polls judged.

    :param made_before: Count the watches made in the 5 s before a window too (the held
        goal's watch is made before its CPU window opens).
    """
    def inside(start: int, before: float = 0.0) -> bool:
        return any(lo - before <= start <= hi for lo, hi in windows)

    made = [w for w in watches if inside(w[0], 5e9 if made_before else 0.0)]
    span = sum(hi - lo for lo, hi in windows) / 1e9
    polls = [(e - s) / 1e9 for k, s, e in records if k == 'poll' and inside(s)]
    judged = [(e - s) / 1e9 for k, s, e in records if k == 'judge' and inside(s)]
    return {'made': len(made), 'watched_steps': sum(1 for w in made if w[2] >= 0),
            'elements': [w[2] for w in made if w[2] >= 0],
            'samples': [w[3] for w in made], 'polls': len(polls), 'judged': len(judged),
            'poll_s': polls, 'judge_s': judged, 'span': span}


def step_parts(windows: list[tuple[int, int]],
               records: list[tuple[str, int, int]]) -> dict[str, list[float]]:
    """
    Durations (s) of the node's parts of a replayed step, inside the replay windows.

    ``post_logic`` is a post-check minus the sensor wait inside it.
    """
    inside = [(k, s, e) for k, s, e in records if any(lo <= s <= hi for lo, hi in windows)]
    waits = [(s, e) for k, s, e in inside if k == 'wait']
    parts: dict[str, list[float]] = {}
    for kind, s, e in inside:
        if kind in ('capture', 'choose', 'candidates', 'event', 'watch', 'poll', 'judge'):
            parts.setdefault(kind, []).append((e - s) / 1e9)
        elif kind == 'post':
            wait = sum(we - ws for ws, we in waits if s <= ws <= e)
            parts.setdefault('post_logic', []).append((e - s - wait) / 1e9)
    return parts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=100, help='steps of the learned task')
    parser.add_argument('--rounds', type=int, default=5, help='replays per path')
    parser.add_argument('--passthrough', type=int, default=500,
                        help="goals per path at a replay's pace")
    parser.add_argument('--passthrough-b2b', type=int, default=200,
                        help='goals per path back to back (for comparison)')
    parser.add_argument('--warmup', type=int, default=50)
    parser.add_argument('--other', type=int, default=200,
                        help='trajectories of other params written before the last replays')
    parser.add_argument('--other-steps', type=int, default=20)
    parser.add_argument('--joint-hz', type=float, default=1000.0)
    parser.add_argument('--scan-hz', type=float, default=40.0)
    parser.add_argument('--result-timeout', type=int, default=1,
                        help="the controller's result_timeout, s (see the docstring)")
    parser.add_argument('--cpu-seconds', type=float, default=10.0)
    parser.add_argument('--cpu-warmup', type=float, default=3.0)
    parser.add_argument('--hold', type=int, default=10,
                        help='seconds the controller holds the goal of the watched replay (<= 25)')
    parser.add_argument('--hold-margin', type=float, default=1.0,
                        help='seconds left out of the CPU window at each end of the held goal')
    parser.add_argument('--hold-replays', type=int, default=2,
                        help='replays of the held task with the watch on')
    parser.add_argument('--hold-replays-off', type=int, default=1,
                        help='replays of the held task by a second node with the watch off')
    parser.add_argument('--out', type=Path, default=HERE / 'node.md')
    parser.add_argument('--keep-timings', type=Path, default=None,
                        help="copy the node's probe records (JSON lines) here")
    parser.add_argument('--keep-results', type=Path, default=None,
                        help='write the raw results (JSON) here before rendering them')
    args = parser.parse_args()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix='mm_bench_node_') as tmp:
        try:
            res = run(args, Path(tmp))
        except Exception:
            for log in sorted(Path(tmp).glob('*.log')):
                sys.stderr.write(f'--- {log.name}\n{log.read_text()[-3000:]}\n')
            raise
    if args.keep_results is not None:
        args.keep_results.write_text(json.dumps(res))
    text = render(res, args, time.monotonic() - t0)
    args.out.write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
