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
What the agent's goals cost with each way of recording: proxy, introspection, none.

Processes on loopback (real rclpy, Fast DDS, SQLite), all started by this script:

* two zero-duration controllers (``_peers.py server``, prefixes ``P`` and ``I``), the same
  program: ``muscle_mem_demo_interfaces/action/FollowJointTrajectory``, every goal
  succeeds at once;
* the sensors (``_peers.py sensors``): ``JointState`` (7 joints) at ``--joint-hz``;
* the cache node (the real ``behavior_cache`` main) with one sensor (joints, ``abs``)
  and two tools: controller ``P`` behind a proxy (``record_from: proxy``), controller
  ``I`` with ``record_from: introspection`` (nothing served; the node listens to its
  goal and result event topics);
* this process, the agent: plain rclpy action clients, each on a node and
  single-threaded executor of its own: ``proxy`` (to the cache's proxy of ``P``),
  ``introspection`` (straight to ``I``, introspection ``CONTENTS`` configured on the
  client, so the events are published from the agent's process), ``direct`` (straight
  to ``I``, no introspection, so no events: the floor).

Per goal the agent's latency is ``send_goal_async`` to the result, each awaited with
``spin_until_future_complete``. The three paths go interleaved goal by goal (order
rotating), one goal per ``--period`` s, in two phases: outside any recording (the cache
only forwards or ignores), then inside a manual recording (StartRecording, the goals,
StopRecording with save): the proxy then holds each result until the post snapshot
(sensor data newer than the goal's end), the tap records beside the agent's path.
The recording's step count is checked against the goals sent.

Usage: bench/introspection [--goals 300] [--period 0.025] [--joint-hz 200]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
import platform
import sys
import tempfile
import time
from typing import Any
import uuid

from _common import cpu_name, ms, pct
from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_interfaces.srv import StartRecording, StopRecording
from node import ARM_TYPE, Client, make_goal, paced, Peer
import rclpy
from rclpy.qos import qos_profile_system_default
from rclpy.service_introspection import ServiceIntrospectionState
import yaml

HERE = Path(__file__).resolve().parent
PATHS = ('direct', 'introspection', 'proxy')


class Agent(Client):
    """The agent's clients: through the proxy, straight with events, straight without."""

    def __init__(self, *, server_p: str, server_i: str, cache: str) -> None:
        self._executors = {}
        self.clients = {
            'proxy': self._action(FollowJointTrajectory, f'{cache}/arm_p', 'proxy'),
            'introspection': self._action(FollowJointTrajectory, server_i, 'introspection'),
            'direct': self._action(FollowJointTrajectory, server_i, 'direct'),
        }
        node = self.clients['introspection']._node
        self.clients['introspection'].configure_introspection(
            node.get_clock(), qos_profile_system_default, ServiceIntrospectionState.CONTENTS)
        services = self._node('services')
        self.start = services.create_client(StartRecording, f'{cache}/start_recording')
        self.stop = services.create_client(StopRecording, f'{cache}/stop_recording')
        self._services = services

    def ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        for action in self.clients.values():
            while not action.server_is_ready():
                if time.monotonic() > deadline:
                    raise TimeoutError('action servers not discovered (is the node running?)')
                self.executor_of(action).spin_once(timeout_sec=0.05)
        for srv in (self.start, self.stop):
            if not srv.wait_for_service(timeout_sec=max(0.1, deadline - time.monotonic())):
                raise TimeoutError(f'service {srv.srv_name} not discovered')


def cache_params(*, node: str, sensors: str, server_p: str, server_i: str,
                 store: Path) -> dict[str, Any]:
    return {node: {'ros__parameters': {
        'store_path': str(store), 'agent_action': '', 'cache_mode': 'learn',
        'step_timeout': 5.0, 'post_check_timeout': 1.0,
        'sensors': {'joints': {'topic': f'/{sensors}/joint_states',
                               'type': 'sensor_msgs/msg/JointState', 'fields': ['position'],
                               'tolerance': [0.01], 'mode': 'abs', 'max_age': 0.5}},
        'actions': {
            'arm_p': {'server': server_p, 'type': ARM_TYPE, 'proxy': f'/{node}/arm_p'},
            'arm_i': {'server': server_i, 'type': ARM_TYPE, 'record_from': 'introspection'},
        },
    }}}


def interleaved(agent: Agent, goals: int, period: float) -> dict[str, dict[str, list[float]]]:
    """Send ``goals`` goals per path, interleaved, order rotating; latency and thread CPU."""
    out = {p: {'latency': [], 'cpu': []} for p in PATHS}

    def send(i: int) -> None:
        k = i // len(PATHS)
        path = PATHS[(i + k) % len(PATHS)]
        cpu = time.thread_time()
        out[path]['latency'].append(agent.round_trip(agent.clients[path], make_goal(k)))
        out[path]['cpu'].append(time.thread_time() - cpu)

    paced(send, goals * len(PATHS), period)
    return out


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    node_name = f'mm_ib_{tag}'
    prefix_p, prefix_i, sensors = f'ibp{tag}', f'ibi{tag}', f'ibs{tag}'
    server_p = f'/{prefix_p}/arm/follow_joint_trajectory'
    server_i = f'/{prefix_i}/arm/follow_joint_trajectory'
    params_file = work / 'params.yaml'
    params_file.write_text(yaml.safe_dump(cache_params(
        node=node_name, sensors=sensors, server_p=server_p, server_i=server_i,
        store=work / 'cache.db')))
    py, peers = sys.executable, str(HERE / '_peers.py')
    res: dict[str, Any] = {'loadavg_start': os.getloadavg(), 'started': time.monotonic()}
    procs = [
        Peer('controller P', [py, peers, 'server', '--prefix', prefix_p], work / 'p.log'),
        Peer('controller I', [py, peers, 'server', '--prefix', prefix_i], work / 'i.log'),
        Peer('sensors', [py, peers, 'sensors', '--prefix', sensors, '--joint-hz',
                         str(args.joint_hz), '--scan-hz', '1'], work / 'sensors.log'),
    ]
    cache = Peer('cache', [py, '-m', 'muscle_mem_ros.ros.node.main', '--ros-args', '-r',
                           f'__node:={node_name}', '--params-file', str(params_file)],
                 work / 'cache.log')
    procs.append(cache)
    rclpy.init()
    agent = None
    try:
        deadline = time.monotonic() + 60
        while 'behavior cache ready' not in cache.log.read_text():
            if not cache.alive() or time.monotonic() > deadline:
                raise RuntimeError(f'cache did not start:\n{cache.log.read_text()}')
            time.sleep(0.1)
        agent = Agent(server_p=server_p, server_i=server_i, cache=f'/{node_name}')
        agent.ready()
        interleaved(agent, args.warmup, args.period)
        res['outside'] = interleaved(agent, args.goals, args.period)
        started = agent.call(agent.start, StartRecording.Request(task='bench_teach'))
        if not started.success:
            raise RuntimeError(started.message)
        res['recording'] = interleaved(agent, args.goals, args.period)
        stopped = agent.call(agent.stop, StopRecording.Request(save=True), timeout=60.0)
        res['recorded'] = (stopped.steps, 2 * args.goals, stopped.message)
        res['loadavg_end'] = os.getloadavg()
        res['took'] = time.monotonic() - res['started']
        return res
    finally:
        if agent is not None:
            agent.destroy()
        rclpy.try_shutdown()
        for proc in procs:
            proc.stop()


def added(res: dict[str, Any], phase: str, path: str) -> str:
    """Return p50(path) - p50(direct) in ``phase``, in ms."""
    data = res[phase]
    return ms(pct(data[path]['latency'], 50) - pct(data['direct']['latency'], 50))


def render(res: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        '# Recording without a proxy: latency the agent sees',
        '',
        'Generated by `bench/introspection` (`bench/introspection.py`); every figure below is '
        'from one run on:',
        f'{cpu_name()}, nproc {os.cpu_count()}, Python {platform.python_version()}, ROS 2 Kilted '
        'from PyPI wheels, RMW rmw_fastrtps_cpp, DDS on loopback. Load average '
        f"{res['loadavg_start'][0]:.2f} at the start, {res['loadavg_end'][0]:.2f} at the end "
        f"(the machine is shared); the run took {res['took']:.0f} s.",
        '',
        f'{args.goals} goals per path and phase, interleaved goal by goal, one goal per '
        f'{args.period * 1e3:g} ms; {args.warmup} per path of warm-up first. Goals: '
        'FollowJointTrajectory, 7 joints, 3 waypoints; the controllers succeed at once. The '
        f'cache checks one sensor, JointState at {args.joint_hz:g} Hz. Paths: **direct**, the '
        'agent calls the controller with no introspection (no cache involved: the floor); '
        '**introspection**, the agent calls the controller with introspection CONTENTS on its '
        'client and the cache learns from the events (`record_from: introspection`); '
        "**proxy**, the agent calls the cache's proxy (`record_from: proxy`).",
        '',
    ]
    for phase, title in (('outside', 'Outside a recording (the cache forwards or ignores)'),
                         ('recording', 'Inside a recording (every goal becomes a step)')):
        data = res[phase]
        floor = pct(data['direct']['latency'], 50)
        lines += [f'## {title}', '',
                  '| path | p50 ms | p90 ms | p99 ms | N | p50 - direct p50, ms | '
                  'agent thread CPU per goal, ms |',
                  '|---|---:|---:|---:|---:|---:|---:|']
        for path in PATHS:
            xs = data[path]['latency']
            lines.append(
                f'| {path} | {ms(pct(xs, 50))} | {ms(pct(xs, 90))} | {ms(pct(xs, 99))} | '
                f'{len(xs)} | {ms(pct(xs, 50) - floor)} | '
                f"{ms(sum(data[path]['cpu']) / len(xs))} |")
        lines.append('')
    steps, expected, message = res['recorded']
    lines += [
        f'Steps in the saved recording: {steps} of the {expected} goals sent through the proxy '
        f'and with introspection ({message}).',
        '',
        '## Reading the results',
        '',
        "- Added to the agent's p50 over direct: introspection "
        f"{added(res, 'outside', 'introspection')} ms outside a recording and "
        f"{added(res, 'recording', 'introspection')} ms inside one; the proxy "
        f"{added(res, 'outside', 'proxy')} ms and {added(res, 'recording', 'proxy')} ms.",
        "- With introspection the agent's path is the direct one plus publishing the events "
        '(two event messages per service call, for the goal and the result services: four per '
        "goal, serialized on the agent's side); the cache never holds the agent. Through the "
        'proxy every goal pays the extra hop, and while recording also the post-snapshot wait '
        "(until the sensor reports after the goal's end) and the step's write to the store, "
        "which the proxy does before it answers so that the next step's pre snapshot never "
        "precedes this one's post.",
        '- What introspection gives up for that is in docs/robots.md ("Recording '
        'without a proxy"): the pre snapshot is taken when the request event arrives, and a '
        "call sent before the sensors reported the previous call's end gets that call's post "
        "snapshot as its pre. The p90 and p99 columns show the machine's load (see the load "
        'average above) more than any path.',
        '',
    ]
    return '\n'.join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument('--goals', type=int, default=300)
    parser.add_argument('--warmup', type=int, default=30)
    parser.add_argument('--period', type=float, default=0.025)
    parser.add_argument('--joint-hz', type=float, default=200.0)
    parser.add_argument('--out', type=Path, default=HERE / 'introspection.md')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix='mm_bench_intro_') as tmp:
        res = run(args, Path(tmp))
    text = render(res, args)
    args.out.write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
