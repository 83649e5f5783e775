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
The node benchmark's peers, each run as its own process by ``bench/node.py``.

``server``: a zero-duration controller. Serves
``muscle_mem_demo_interfaces/action/FollowJointTrajectory`` (shaped like control_msgs') at
``/<prefix>/arm/follow_joint_trajectory``
and succeeds every goal at once, except a goal whose trajectory's ``header.frame_id`` is
:data:`HOLD`: that one it holds for its last point's ``time_from_start`` (a motion that
takes that long, for a watched replay), then succeeds; a cancel ends the hold. It notes the
``time.monotonic_ns()`` at which each goal request reaches its goal callback
(CLOCK_MONOTONIC is one clock for every process on the machine, so the benchmark can line
these up with its own and the node's times) and hands them over, then forgets them, on
each ``std_srvs/srv/Trigger`` call to ``/<prefix>/arrivals`` (JSON list in the response's
message).

``sensors``: publishes ``sensor_msgs/msg/JointState`` (7 joints) on ``/<prefix>/joint_states``
and ``sensor_msgs/msg/LaserScan`` (1080 beams) on ``/<prefix>/scan`` from one loop on an
absolute schedule (best-effort sensor QoS). The values never change; only the header stamps
do, so every check of the benchmark passes. On SIGUSR1 it prints one JSON line with the
message counts so far and the monotonic time, from which the benchmark computes the achieved
rates over its measurement window.

``relay``: the least a Python action proxy does, for reference: serves the same type at
``/<prefix>/relay`` and forwards each goal to the controller from an ``async`` execute
callback on a single-threaded executor, keeping finished goals ``--result-timeout`` s.

``listen``: subscribes to the two sensor topics (depth 1, best effort) and never takes a
message, for reference: the CPU floor of a process receiving these streams (DDS threads only).

Usage: _peers.py server|relay|listen --prefix P [--result-timeout 1]
       _peers.py sensors --prefix P [--joint-hz 1000] [--scan-hz 40]
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import time
from typing import Any

from action_msgs.msg import GoalStatus
from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
import rclpy
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, qos_profile_sensor_data, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from sensor_msgs.msg import JointState, LaserScan
from std_srvs.srv import Trigger

JOINTS = [f'joint_{i}' for i in range(1, 8)]
HOME = [0.0, -0.4, 0.0, -1.8, 0.0, 1.4, 0.8]
BEAMS = 1080
HOLD = 'hold'
"""A goal whose trajectory's frame_id is this is held for its last point's time_from_start."""


def hold_seconds(goal: Any) -> float:
    """Return how long the controller holds ``goal`` (0: it succeeds at once)."""
    trajectory = goal.trajectory
    if trajectory.header.frame_id != HOLD or not trajectory.points:
        return 0.0
    end = trajectory.points[-1].time_from_start
    return float(end.sec) + 1e-9 * end.nanosec


def run_server(prefix: str, result_timeout: int) -> None:
    node = Node('bench_controller', start_parameter_services=False)
    arrivals: list[int] = []

    def on_goal(_goal: Any) -> GoalResponse:
        arrivals.append(time.monotonic_ns())
        return GoalResponse.ACCEPT

    async def execute(goal_handle: Any) -> Any:
        hold = hold_seconds(goal_handle.request)
        if hold > 0.0 and not await held(goal_handle, hold):
            goal_handle.canceled()
            return FollowJointTrajectory.Result(error_string='canceled during the hold')
        goal_handle.succeed()
        return FollowJointTrajectory.Result(error_code=FollowJointTrajectory.Result.SUCCESSFUL)

    async def held(goal_handle: Any, seconds: float) -> bool:
        """Wait ``seconds`` without blocking the executor; False when canceled first."""
        done: Future = Future()
        end = time.monotonic() + seconds

        def tick() -> None:
            if goal_handle.is_cancel_requested:
                done.set_result(False)
            elif time.monotonic() >= end:
                done.set_result(True)

        timer = node.create_timer(0.02, lambda: None if done.done() else tick())
        try:
            return bool(await done)
        finally:
            node.destroy_timer(timer)

    def dump(_request: Any, response: Any) -> Any:
        taken = arrivals[:]
        del arrivals[:len(taken)]
        response.success = True
        response.message = json.dumps(taken)
        return response

    ActionServer(node, FollowJointTrajectory, f'/{prefix}/arm/follow_joint_trajectory', execute,
                 goal_callback=on_goal, cancel_callback=lambda _h: CancelResponse.ACCEPT,
                 result_timeout=result_timeout)
    node.create_service(Trigger, f'/{prefix}/arrivals', dump)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass


def run_relay(prefix: str, result_timeout: int) -> None:
    """Forward goals from ``/<prefix>/relay`` to the controller: the least a Python proxy does."""
    node = Node('bench_relay', start_parameter_services=False)
    client = ActionClient(node, FollowJointTrajectory, f'/{prefix}/arm/follow_joint_trajectory')

    async def execute(goal_handle: Any) -> Any:
        handle = await client.send_goal_async(goal_handle.request)
        if handle is None or not handle.accepted:
            goal_handle.abort()
            return FollowJointTrajectory.Result()
        wrapped = await handle.get_result_async()
        if wrapped.status == GoalStatus.STATUS_SUCCEEDED:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return wrapped.result

    ActionServer(node, FollowJointTrajectory, f'/{prefix}/relay', execute,
                 result_timeout=result_timeout)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass


def run_listen(prefix: str) -> None:
    """Subscribe to the sensor topics and never take a message: the floor of receiving them."""
    node = Node('bench_listen', start_parameter_services=False)
    qos = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                     reliability=ReliabilityPolicy.BEST_EFFORT)
    node.create_subscription(JointState, f'/{prefix}/joint_states', lambda _m: None, qos,
                             raw=True)
    node.create_subscription(LaserScan, f'/{prefix}/scan', lambda _m: None, qos, raw=True)
    while rclpy.ok():
        time.sleep(0.2)


def run_sensors(prefix: str, joint_hz: float, scan_hz: float) -> None:
    node = Node('bench_sensors', start_parameter_services=False)
    joints_pub = node.create_publisher(JointState, f'/{prefix}/joint_states',
                                       qos_profile_sensor_data)
    scan_pub = node.create_publisher(LaserScan, f'/{prefix}/scan', qos_profile_sensor_data)
    joints = JointState(name=JOINTS, position=HOME, velocity=[0.0] * 7, effort=[0.0] * 7)
    joints.header.frame_id = 'base_link'
    scan = LaserScan(angle_min=-math.radians(135), angle_max=math.radians(135),
                     angle_increment=math.radians(270) / (BEAMS - 1), time_increment=0.0,
                     scan_time=1.0 / scan_hz, range_min=0.05, range_max=30.0,
                     ranges=[2.0 + 0.5 * math.sin(i / 40.0) for i in range(BEAMS)],
                     intensities=[100.0] * BEAMS)
    scan.header.frame_id = 'laser'
    counts = {'joint_states': 0, 'scan': 0}

    def report(_sig: int, _frame: Any) -> None:
        print(json.dumps({'t': time.monotonic(), **counts}), flush=True)

    signal.signal(signal.SIGUSR1, report)
    clock = node.get_clock()
    periods = {'joint_states': 1.0 / joint_hz, 'scan': 1.0 / scan_hz}
    start = time.monotonic()
    due = {'joint_states': start, 'scan': start}
    try:
        while rclpy.ok():
            name = min(due, key=due.__getitem__)
            delay = due[name] - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            stamp = clock.now().to_msg()
            if name == 'joint_states':
                joints.header.stamp = stamp
                joints_pub.publish(joints)
            else:
                scan.header.stamp = stamp
                scan_pub.publish(scan)
            counts[name] += 1
            due[name] += periods[name]
            late = time.monotonic() - due[name]
            if late > 0.5:  # far behind (machine stalled): skip instead of bursting
                due[name] += periods[name] * math.floor(late / periods[name])
    except Exception:
        if rclpy.ok():  # a publish failing after SIGTERM/SIGINT is the normal way out
            raise


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('role', choices=('server', 'relay', 'sensors', 'listen'))
    parser.add_argument('--prefix', required=True)
    parser.add_argument('--joint-hz', type=float, default=1000.0)
    parser.add_argument('--scan-hz', type=float, default=40.0)
    parser.add_argument('--result-timeout', type=int, default=1)
    args = parser.parse_args()
    rclpy.init()
    try:
        if args.role == 'server':
            run_server(args.prefix, args.result_timeout)
        elif args.role == 'relay':
            run_relay(args.prefix, args.result_timeout)
        elif args.role == 'listen':
            run_listen(args.prefix)
        else:
            run_sensors(args.prefix, args.joint_hz, args.scan_hz)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
