#!/usr/bin/env python3
"""Behavior-cache node: replay overhead per step, proxy overhead per goal, idle CPU.

Five processes on loopback (real rclpy, Fast DDS, SQLite), all started by this script:

* the controller (``_peers.py server``): a zero-duration
  ``muscle_mem_interfaces/action/FollowJointTrajectory`` server that succeeds every goal at
  once and notes when each goal request arrives (``time.monotonic_ns``). It keeps finished
  goals for ``--result-timeout`` (1 s; rclpy's default is 10 s): every action status message
  lists all goals the server keeps, and with back-to-back goals a 10 s window makes every
  client deserialize hundreds of entries per message, a cost that grows through the run and
  would swamp what is measured here;
* a minimal relay (``_peers.py relay``), for reference: the least any rclpy action proxy
  costs on the machine;
* the sensors (``_peers.py sensors``): ``JointState`` (7 joints) at 1 kHz and ``LaserScan``
  (1080 beams) at 40 Hz, constant values, so every check passes;
* the cache node (``_node_host.py``): the real ``behavior_cache`` main with two timing
  probes (the post-check sensor wait, and the replayed call); checks on both sensors
  (joints ``abs`` 0.01 rad, scan ``rms`` 0.05 m, max_age 0.5 s), one proxied action, a
  SQLite store in a temporary directory;
* this process: a plain rclpy ``ActionClient`` (``send_goal_async`` + ``get_result_async``,
  each awaited with ``spin_until_future_complete`` on a single-threaded executor), used
  both directly against the controller and through the cache's proxy, plus the service and
  ExecuteTask clients.

Phases, in one run: warm-up; proxy pass-through (direct and proxied goals interleaved);
learning one task of ``--steps`` goals through the proxy (StartRecording, goals,
StopRecording); ``--rounds`` rounds of [a burst of ``--steps`` direct goals, one replay by
the ``~/replay`` service, one replay by ``~/execute_task``]; the same ExecuteTask replay
after ``--other`` trajectories of other parameter variants of the same task were written
to the store; idle CPU of the node over ``--cpu-seconds``.

Usage: bench/node [--steps 100] [--rounds 5] [--cpu-seconds 10] [--out bench/node.md]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
import platform
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any
import uuid

from _peers import HOME, JOINTS
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from muscle_mem_ros.records import Snapshot, Step, ToolKind
from muscle_mem_ros.store import SqliteStore
import numpy as np
import rclpy
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.serialization import serialize_message
from rclpy.utilities import get_rmw_implementation_identifier
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
import yaml

from muscle_mem_interfaces.action import ExecuteTask, FollowJointTrajectory
from muscle_mem_interfaces.srv import Replay, StartRecording, StopRecording

HERE = Path(__file__).resolve().parent
TASK = 'inspect_rack'
ARM_TYPE = 'muscle_mem_interfaces/action/FollowJointTrajectory'
WAIT = 30.0


def make_goal(i: int) -> Any:
    """Goal of step ``i``: 7 joints, 3 waypoints (a typical arm segment)."""
    points = [JointTrajectoryPoint(
        positions=[q + 0.001 * (i + 1) * (p + 1) for q in HOME], velocities=[0.0] * 7,
        time_from_start=Duration(sec=p + 1)) for p in range(3)]
    return FollowJointTrajectory.Goal(
        trajectory=JointTrajectory(joint_names=JOINTS, points=points), goal_tolerance=0.01)


def pct(xs: Any, q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=float), q))


def ms(x: float) -> str:
    return f'{x * 1e3:.3f}'


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
    """The benchmark's own ROS side: plain clients, each on its own node and executor.

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


def node_params(*, prefix: str, node: str, store: Path) -> dict[str, Any]:
    return {node: {'ros__parameters': {
        'store_path': str(store), 'agent_action': '', 'cache_mode': 'learn',
        'step_timeout': 5.0, 'post_check_timeout': 1.0, 'agent_timeout': 30.0,
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


def read_timings(path: Path) -> tuple[dict[str, bool], list[tuple[str, int, int]]]:
    probes: dict[str, bool] = {}
    records = []
    for line in path.read_text().splitlines():
        item = json.loads(line)
        if item[0] == 'probes':
            probes = item[1]
        elif item[0] == 'whatif':
            probes['whatif: ' + ', '.join(item[1])] = False
        else:
            records.append((item[0], int(item[1]), int(item[2])))
    return probes, records


def analyse_replay(arrivals: list[int], window: tuple[int, int],
                   records: list[tuple[str, int, int]]) -> dict[str, list[float]]:
    """Per-step figures of one replay, in seconds.

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


def _cpu_all(cache: Peer, server: Peer) -> dict[str, float]:
    """CPU seconds so far of the node, the controller and this process, and the time."""
    own = os.times()
    return {'node': cache.cpu_seconds(), 'server': server.cpu_seconds(),
            'bench': own.user + own.system, 'wall': time.monotonic()}


def _cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in before}


def cpu_name() -> str:
    try:
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            if line.startswith('model name'):
                return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or 'unknown'


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    prefix, node_name = f'nb{tag}', f'mm_bench_{tag}'
    store = work / 'cache.db'
    params_file = work / 'params.yaml'
    params_file.write_text(yaml.safe_dump(node_params(prefix=prefix, node=node_name, store=store)))
    timings = work / 'timings.jsonl'
    py = sys.executable
    peers = HERE / '_peers.py'
    res: dict[str, Any] = {'loadavg_start': os.getloadavg()}
    server = Peer('controller', [py, str(peers), 'server', '--prefix', prefix, '--result-timeout',
                                 str(args.result_timeout)], work / 'server.log')
    relay = Peer('relay', [py, str(peers), 'relay', '--prefix', prefix], work / 'relay.log')
    sensors = Peer('sensors', [py, str(peers), 'sensors', '--prefix', prefix, '--joint-hz',
                               str(args.joint_hz), '--scan-hz', str(args.scan_hz)],
                   work / 'sensors.log', lines=True)
    cache = Peer('cache', [py, str(HERE / '_node_host.py'), '--ros-args', '-r',
                           f'__node:={node_name}', '--params-file', str(params_file)],
                 work / 'cache.log', env={**os.environ, 'MM_BENCH_TIMINGS': str(timings)})
    peers_all = (server, relay, sensors, cache)
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

        # Proxy pass-through, interleaved in alternating order.
        direct, proxied, relayed = [], [], []
        own_cpu: dict[str, list[float]] = {'direct': [], 'proxied': [], 'relayed': []}
        cpu0 = _cpu_all(cache, server)
        r0 = relay.cpu_seconds()
        order = ((client.direct, direct, 'direct'), (client.proxy, proxied, 'proxied'),
                 (client.relay, relayed, 'relayed'))
        for i in range(args.passthrough):
            for k in range(3):  # rotate the order: each kind goes first, second, third
                cl, out, kind = order[(i + k) % 3]
                c0 = time.process_time()
                out.append(client.round_trip(cl, make_goal(i)))
                own_cpu[kind].append(time.process_time() - c0)
        res['pass_client_cpu'] = own_cpu
        res['pass_direct'], res['pass_proxy'], res['pass_relay'] = direct, proxied, relayed
        res['pass_paired'] = [p - d for d, p in zip(direct, proxied, strict=True)]
        res['pass_relay_paired'] = [p - d for d, p in zip(direct, relayed, strict=True)]
        res['pass_cpu'] = _cpu_delta(cpu0, _cpu_all(cache, server))
        res['pass_cpu']['relay'] = relay.cpu_seconds() - r0

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
            res['direct'] += [client.round_trip(client.direct, make_goal(i))
                              for i in range(args.steps)]
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
    finally:
        client.destroy()
        rclpy.try_shutdown()
        for peer in (cache, sensors, relay, server):
            peer.stop()
    time.sleep(0.3)
    if args.keep_timings is not None:
        args.keep_timings.write_bytes(timings.read_bytes())
    res['probes'], records = read_timings(timings)
    for path, runs in res['replays'].items():
        merged: dict[str, list[float]] = {}
        for one in runs:
            for key, values in analyse_replay(one['arrivals'], one['window'], records).items():
                merged.setdefault(key, []).extend(values)
        merged['total'] = [(one['window'][1] - one['window'][0]) / 1e9 for one in runs]
        merged['cpu'] = [one['cpu'] for one in runs]
        res['replays'][path] = merged
    res['loadavg_end'] = os.getloadavg()
    return res


def stats(xs: list[float]) -> str:
    return f'{ms(pct(xs, 50))} | {ms(pct(xs, 90))} | {ms(pct(xs, 99))} | {len(xs)}'


def render(res: dict[str, Any], args: argparse.Namespace, elapsed: float) -> str:
    direct50 = pct(res['direct'], 50)
    rows = []

    def verdict(value: float, limit: float) -> str:
        return 'pass' if value < limit else 'FAIL'

    over: dict[str, list[float]] = {}
    for path, fig in res['replays'].items():
        over[path] = [i - w - direct50 for i, w in zip(fig['interval'], fig['wait'], strict=True)]
    for path, label in (('execute', 'ExecuteTask'), ('service', '`~/replay` service')):
        p50 = pct(over[path], 50)
        rows.append(f'| 1. replay overhead per step, {label} | p50 < 2 ms | {ms(p50)} ms '
                    f'(p90 {ms(pct(over[path], 90))}, p99 {ms(pct(over[path], 99))}, '
                    f'N {len(over[path])}) | {verdict(p50, 2e-3)} |')
    added = pct(res['pass_proxy'], 50) - pct(res['pass_direct'], 50)
    paired = res['pass_paired']
    relay_added = pct(res['pass_relay'], 50) - pct(res['pass_direct'], 50)
    rows.append(f'| 2. proxy pass-through, added per goal | p50 < 1 ms | {ms(added)} ms '
                f'(paired differences: p50 {ms(pct(paired, 50))}, p90 {ms(pct(paired, 90))}, '
                f'p99 {ms(pct(paired, 99))}, N {len(paired)}; a minimal rclpy relay adds '
                f'{ms(relay_added)} ms in the same run) | {verdict(added, 1e-3)} |')
    cpu = res['cpu']
    rows.append(f"| 3. node CPU, idle, 1 kHz JointState + 40 Hz LaserScan | < 10% of one core "
                f"| {100 * cpu['node']:.1f}% (over {cpu['window']:.1f} s) "
                f"| {verdict(cpu['node'], 0.10)} |")
    r = res['replays']
    lines = [
        '# Node benchmark',
        '',
        'Generated by `bench/node` (`bench/node.py`, helpers `bench/_peers.py`, '
        '`bench/_node_host.py`); every figure below is from one run on:',
        f'{cpu_name()}, nproc {os.cpu_count()}, Python {platform.python_version()}, '
        f'ROS 2 Kilted from PyPI wheels (rclpy {_version("ros-rclpy")}), '
        f'RMW {get_rmw_implementation_identifier()}, DDS on loopback '
        f'(ROS_AUTOMATIC_DISCOVERY_RANGE={os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "")}). '
        f"Load average {res['loadavg_start'][0]:.2f} at the start, "
        f"{res['loadavg_end'][0]:.2f} at the end (the machine is shared); "
        f'the run took {elapsed:.0f} s.',
        '',
        '## Targets',
        '',
        '| metric | target | measured | result |',
        '|---|---|---|---|',
        *rows,
        '',
        '## Reading the results',
        '',
        *reading(res),
        '',
        '## Setup',
        '',
        'Five processes on one machine, all started by the benchmark: a zero-duration '
        'controller (`muscle_mem_interfaces/action/FollowJointTrajectory`, succeeds every '
        'goal at once, notes the arrival time of each goal request), a minimal relay '
        '(reference for part 2), a sensor publisher '
        f'(`JointState`, 7 joints, at {args.joint_hz:g} Hz and `LaserScan`, 1080 beams, at '
        f'{args.scan_hz:g} Hz, constant values, best-effort sensor QoS), the cache node (the '
        'real `behavior_cache` main, run through `_node_host.py`, which wraps '
        '`SensorHub.wait_newer` and `ActionProxy.call` with timers and changes nothing else) '
        'and the benchmark itself. The node checks both sensors (joints `abs` 0.01 rad, '
        'scan `rms` 0.05 m, max_age 0.5 s) and proxies the one action; store: SQLite in a '
        'temporary directory. The controller keeps finished goals for '
        f'{args.result_timeout} s (`result_timeout`; rclpy\'s default of 10 s would make every '
        'client parse a status array of hundreds of goals per message at back-to-back rates, '
        'growing through the run). Clients in the benchmark are plain rclpy: `send_goal_async`, '
        'then `get_result_async`, each awaited with `spin_until_future_complete` on a '
        'single-threaded executor. Goals: 7 joints, 3 waypoints. Times: `time.monotonic_ns` '
        '(one clock for all processes) and `perf_counter`.',
        '',
        f"Phases in order: warm-up ({args.warmup} goals each direct, proxied, relayed); "
        f"pass-through ({args.passthrough} goals each direct, proxied, relayed, "
        f"interleaved, order rotating); learning a {args.steps}-step task through the proxy "
        f"(StartRecording, {args.steps} goals, StopRecording); {args.rounds} rounds of "
        f"[{args.steps} direct goals back to back, one replay by `~/replay`, one by "
        f"`~/execute_task`]; {len(r['execute_other']['total'])} ExecuteTask replays after "
        f"{args.other} trajectories of {args.other_steps} steps under other params of the same "
        f"task were written to the store (from this process, while the node ran: "
        f"{res['other_write_s']:.2f} s); then {args.cpu_warmup:g} s of quiet and the CPU "
        'window.',
        '',
        '## 1. Replay: per-step overhead',
        '',
        'A replayed step, seen from the controller, is the interval between the arrivals '
        'of two consecutive goals. It contains one full round trip to the controller (what a '
        'plain client would spend anyway), the post-check wait for sensor data newer than the '
        'step\'s end, and the cache\'s own work (post snapshot and check, store lookup of the '
        'next step\'s candidates, pre snapshot and match, events, feedback). '
        '**Overhead per step = interval - that step\'s sensor wait (measured inside the node by '
        'the `wait_newer` probe, per step) - p50 of the direct round trip '
        f'({ms(direct50)} ms, {len(res["direct"])} goals, measured in the same rounds).** '
        'The sensor wait depends only on the slowest sensor\'s rate (here the 40 Hz scan: '
        'up to 25 ms, about 12.5 ms on average) and is not the cache\'s cost. '
        'Sampled intervals: every step of every replay except the first (the walk\'s '
        'initial fresh-data wait precedes it) and the last (nothing follows it).',
        '',
        '| figure (ms) | p50 | p90 | p99 | N |',
        '|---|---:|---:|---:|---:|',
        f"| direct round trip, plain client -> controller | {stats(res['direct'])} |",
    ]
    for path, label in (('execute', 'ExecuteTask'), ('service', '`~/replay`'),
                        ('execute_other', f'ExecuteTask, {args.other} other variants stored')):
        fig = r[path]
        step = [i - w for i, w in zip(fig['interval'], fig['wait'], strict=True)]
        lines += [
            f"| {label}: interval between goal arrivals | {stats(fig['interval'])} |",
            f"| {label}: sensor wait inside it (subtracted) | {stats(fig['wait'])} |",
            f'| {label}: interval - sensor wait | {stats(step)} |',
            f'| **{label}: overhead = interval - wait - direct p50** | {stats(over[path])} |',
        ]
    lines += [
        '',
        'Inside the node (probes): the replayed call (send, accept, result; the node\'s own '
        'client in its multi-threaded executor) against the direct round trip, and the rest of '
        'each step (time between two calls minus the call and the sensor wait: checks, store, '
        'events, feedback, thread hand-offs).',
        '',
        '| figure (ms) | p50 | p90 | p99 | N |',
        '|---|---:|---:|---:|---:|',
    ]
    for path, label in (('execute', 'ExecuteTask'), ('service', '`~/replay`'),
                        ('execute_other', f'ExecuteTask, {args.other} other variants stored')):
        fig = r[path]
        if fig['call']:
            lines += [f"| {label}: replayed call in the node | {stats(fig['call'])} |",
                      f"| {label}: rest of the step in the node | {stats(fig['rest'])} |"]
    lines += [
        '',
        'Whole replays (wall time of the call, seen by the client), against the same number '
        'of direct goals at the p50 round trip:',
        '',
        '| path | replays | p50 wall time | direct equivalent | p50 sensor wait per replay |',
        '|---|---:|---:|---:|---:|',
    ]
    for path, label in (('execute', 'ExecuteTask'), ('service', '`~/replay`'),
                        ('execute_other', f'ExecuteTask, {args.other} other variants')):
        fig = r[path]
        waits = sum(fig['wait']) / max(1, len(fig['total']))
        lines.append(f"| {label} | {len(fig['total'])} | {pct(fig['total'], 50):.3f} s "
                     f"| {args.steps * direct50:.3f} s | {waits:.3f} s |")
    idle = res['cpu']['node']

    def net_ms(deltas: list[dict[str, float]], count: int, who: str = 'node') -> str:
        spent = sum(d[who] - (idle * d['wall'] if who == 'node' else 0.0) for d in deltas)
        return f'{1e3 * spent / max(1, count):.2f}'

    direct_cpu = res['direct_cpu']
    lines += [
        '',
        'CPU per goal (ms of CPU time, from `/proc/<pid>/stat` and `os.times()` around each '
        'phase; the node\'s figures are net of its idle rate measured in part 3, which covers '
        'receiving the sensor streams). Latency on a loaded machine is CPU plus waiting for a '
        'core; these figures show the work itself.',
        '',
        '| figure | cache node (or relay) | controller | benchmark client |',
        '|---|---:|---:|---:|',
        f"| direct goal (bursts of the rounds) | - "
        f"| {net_ms(direct_cpu, len(res['direct']), 'server')} "
        f"| {net_ms(direct_cpu, len(res['direct']), 'bench')} |",
        f"| pass-through phase, per proxied goal (controller: per goal of any kind) "
        f"| {net_ms([res['pass_cpu']], args.passthrough)} "
        f"| {net_ms([res['pass_cpu']], 3 * args.passthrough, 'server')} "
        f"| {1e3 * np.mean(res['pass_client_cpu']['proxied']):.2f} "
        f"(direct goals: {1e3 * np.mean(res['pass_client_cpu']['direct']):.2f}) |",
        f"| pass-through phase, per relayed goal (minimal relay, for reference) "
        f"| {net_ms([res['pass_cpu']], args.passthrough, 'relay')} | "
        f"| {1e3 * np.mean(res['pass_client_cpu']['relayed']):.2f} |",
    ]
    for path, label in (('execute', 'ExecuteTask'), ('service', '`~/replay`'),
                        ('execute_other', f'ExecuteTask, {args.other} other variants')):
        cpus = r[path]['cpu']
        count = args.steps * len(cpus)
        lines.append(f'| replayed step, {label} | {net_ms(cpus, count)} '
                     f"| {net_ms(cpus, count, 'server')} | - |")
    learn = res['learn']
    lines += [
        '',
        '## 2. Proxy pass-through',
        '',
        'Outside a task (nothing recorded), agent -> proxy -> controller against agent -> '
        'controller, from the same kind of client, interleaved goal by goal (order rotating). '
        'Added = p50(proxied) - p50(direct); the paired rows are per-goal differences. For '
        'reference, the same through a minimal Python relay (`_peers.py relay`: an rclpy '
        'action server whose `async` execute callback forwards to an action client, one '
        'single-threaded executor, nothing else): what any rclpy proxy costs on this machine.',
        '',
        '| figure (ms) | p50 | p90 | p99 | N |',
        '|---|---:|---:|---:|---:|',
        f"| direct | {stats(res['pass_direct'])} |",
        f"| through the cache's proxy | {stats(res['pass_proxy'])} |",
        f"| through the minimal relay | {stats(res['pass_relay'])} |",
        f'| paired difference, proxy - direct | {stats(res["pass_paired"])} |',
        f'| paired difference, relay - direct | {stats(res["pass_relay_paired"])} |',
        f'| while recording (teach): one goal through the proxy, incl. its post-snapshot wait '
        f'| {stats(learn)} |',
        '',
        '## 3. Idle CPU',
        '',
        f"Node process CPU (utime + stime of all its threads, from `/proc/<pid>/stat`) over "
        f"{cpu['window']:.1f} s with no task running, after {args.cpu_warmup:g} s of quiet. "
        f"Publisher (another process) achieved {cpu['joint_hz']:.0f} Hz JointState and "
        f"{cpu['scan_hz']:.1f} Hz LaserScan over the same window "
        f"(targets {args.joint_hz:g} / {args.scan_hz:g} Hz) and used "
        f"{100 * cpu['publisher']:.1f}% of a core.",
        '',
        '| process | CPU, % of one core |',
        '|---|---:|',
        f"| cache node | {100 * cpu['node']:.1f} |",
        f"| publisher | {100 * cpu['publisher']:.1f} |",
        f"| floor: a process subscribed to both topics that never takes a message "
        f"(`_peers.py listen`) | {100 * cpu['floor']:.1f} |",
        '',
        'The benchmark is not a test and asserts nothing about time; the pass/fail column '
        'only compares the figures with the targets of the issue.',
        '',
    ]
    missing = [k for k, v in res['probes'].items() if not v]
    if missing:
        lines.insert(6, f'**Probes missing or node modified: {", ".join(missing)}** '
                        '(a what-if run, or the node changed).\n')
    return '\n'.join(lines)


def reading(res: dict[str, Any]) -> list[str]:
    """A few sentences relating the figures to each other (all from this run)."""
    r = res['replays']
    direct50 = pct(res['direct'], 50)
    out = []
    for path, label in (('execute', 'ExecuteTask'), ('service', '`~/replay`')):
        fig = r[path]
        if not fig['call']:
            continue
        out.append(
            f"- Replay, {label}: between two goals the node's own work (pre and post "
            f"snapshots and checks, store, event, feedback) takes {ms(pct(fig['rest'], 50))} ms "
            f"p50; its replayed call takes {ms(pct(fig['call'], 50))} ms p50 against "
            f"{ms(direct50)} ms for the plain client, i.e. "
            f"{ms(pct(fig['call'], 50) - direct50)} ms more.")
    direct = pct(res['pass_direct'], 50)
    added = pct(res['pass_proxy'], 50) - direct
    relay = pct(res['pass_relay'], 50) - direct
    cpu = res['pass_cpu']
    n = len(res['pass_proxy'])
    idle = res['cpu']['node']
    node_cpu = (cpu['node'] - idle * cpu['wall']) / n
    relay_cpu = cpu['relay'] / n
    client = res['pass_client_cpu']
    out += [
        f"- Pass-through: the cache's proxy adds {ms(added)} ms p50, a minimal rclpy relay "
        f"{ms(relay)} ms ({added / relay:.2f}x); CPU per forwarded goal: node "
        f"{1e3 * node_cpu:.2f} ms, relay {1e3 * relay_cpu:.2f} ms. A plain round trip here is "
        f"{ms(direct)} ms p50, so one more rclpy hop (goal, accept, result request, result, "
        f"status) costs more than the 1 ms target on this machine whatever the proxy does.",
        f"- The agent's own CPU per goal: {1e3 * np.mean(client['direct']):.2f} ms direct, "
        f"{1e3 * np.mean(client['proxied']):.2f} ms through the proxy, "
        f"{1e3 * np.mean(client['relayed']):.2f} ms through the relay. The proxy and the relay "
        f"keep finished goals 10 s (rclpy's default) and every status message lists all of "
        f"them, so at back-to-back rates the agent's cost per goal grows with the rate.",
        f"- Idle: node {100 * idle:.1f}% of a core; a process that only holds the two "
        f"subscriptions (never takes a message) {100 * res['cpu']['floor']:.1f}%.",
    ]
    return out


def _version(dist: str) -> str:
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:  # noqa: BLE001 - informational only
        return 'unknown'


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=100, help='steps of the learned task')
    parser.add_argument('--rounds', type=int, default=5, help='replays per path')
    parser.add_argument('--passthrough', type=int, default=500, help='goals per side')
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
    parser.add_argument('--out', type=Path, default=HERE / 'node.md')
    parser.add_argument('--keep-timings', type=Path, default=None,
                        help="copy the node's probe records (JSON lines) here")
    args = parser.parse_args()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix='mm_bench_node_') as tmp:
        try:
            res = run(args, Path(tmp))
        except Exception:
            for log in sorted(Path(tmp).glob('*.log')):
                sys.stderr.write(f'--- {log.name}\n{log.read_text()[-3000:]}\n')
            raise
    text = render(res, args, time.monotonic() - t0)
    args.out.write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
