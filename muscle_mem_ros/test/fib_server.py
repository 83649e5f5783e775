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
A ``test_msgs/action/Fibonacci`` server in a process of its own, for fault tests.

Usage: ``python fib_server.py <action name> fast|hang|lose|mute``. ``fast`` answers
every goal at once; ``hang`` accepts a goal and never finishes it (until the process
is killed); ``lose`` is ``fast`` whose answer to every other result request never
leaves the process (the first of each goal's: as Fast DDS drops an answer to a
client it has not matched yet), printing ``lost``; ``mute`` is ``fast`` whose answer
to every goal request (accepted) never leaves it, printing ``muted``. Prints ``ready`` once serving
and ``goal <order>`` when a goal starts executing, so a test can wait for those
lines instead of sleeping.
"""

from __future__ import annotations

import sys
import threading

import rclpy
from rclpy.action import ActionServer, CancelResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import (
    ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor)
from rclpy.node import Node
from test_msgs.action import Fibonacci


class LosingServer(ActionServer):
    """An action server whose answer to every other result request is lost."""

    answers = 0

    def _send_result_response(self, request_header, future):
        LosingServer.answers += 1
        if LosingServer.answers % 2:
            print('lost', flush=True)
            return
        super()._send_result_response(request_header, future)


class _Muted:
    """The server's handle, but its goal responses go nowhere."""

    def __init__(self, handle):
        self._handle = handle

    def send_goal_response(self, request_header, response):
        print('muted', flush=True)

    def __getattr__(self, name):
        return getattr(self._handle, name)


class MutingServer(ActionServer):
    """
    An action server whose answer to every goal request is lost; the goals still run.

    Spun by a single-threaded executor: the goal request's handling does not yield while
    the handle is swapped, so nothing else sees the stand-in.
    """

    async def _execute_goal_request(self, request_header_and_message):
        real = self._handle
        self._handle = _Muted(real)
        try:
            await super()._execute_goal_request(request_header_and_message)
        finally:
            self._handle = real


def main() -> int:
    name, mode = sys.argv[1], sys.argv[2]
    rclpy.init()
    node = Node('fib_server')
    never = threading.Event()

    def execute(goal_handle):
        print(f'goal {goal_handle.request.order}', flush=True)
        if mode == 'hang':
            never.wait()
        seq = [0, 1]
        for _ in range(max(0, goal_handle.request.order - 1)):
            seq.append(seq[-1] + seq[-2])
        goal_handle.succeed()
        return Fibonacci.Result(sequence=seq[: goal_handle.request.order + 1])

    server = {'lose': LosingServer, 'mute': MutingServer}.get(mode, ActionServer)
    server(node, Fibonacci, name, execute, callback_group=ReentrantCallbackGroup(),
           cancel_callback=lambda _h: CancelResponse.ACCEPT)
    executor = SingleThreadedExecutor() if mode == 'mute' else MultiThreadedExecutor(
        num_threads=2)
    executor.add_node(node)
    print('ready', flush=True)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    return 0


if __name__ == '__main__':
    sys.exit(main())
