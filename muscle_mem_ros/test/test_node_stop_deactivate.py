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
A stop is waited for to its end by whoever started it (issue 43, item 5).

* A lifecycle deactivate during a replayed goto whose server brakes for longer than a fixed
  wait (11 s; ``stop_timeout`` 6 s, so the stop may take two of them): the node reports
  inactive only once the goto ended and the base rests, never under a running stop.
* ``muscle-mem run-bt``'s pending call: a stop that raised (its stop service's client
  destroyed under it, as at Ctrl-C) is not a stop: it says the robot did not stop.
"""

from __future__ import annotations

import math
import threading
import time

from action_msgs.msg import GoalStatus
from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState, GetState
from mobile_base_helpers import BaseHarness
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.cli.pendingcall import PendingCall
from muscle_mem_ros.ros.capture.stopping import Stopper
from muscle_mem_ros.ros.node.nodeconfig import StopConfig, StopRule
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
import rclpy
from rclpy.action import ActionServer, CancelResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from std_srvs.srv import Trigger
from test_msgs.action import Fibonacci

PARAMS = '{"bin": 1}'


def test_deactivate_reports_inactive_only_once_the_stop_it_started_is_over(tmp_path):
    h = BaseHarness(tmp=tmp_path)
    try:
        h.start_cache(stop_timeout=6.0)
        done = h.run_task('deactivate_stop', PARAMS)  # learned by the agent
        assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.message
        h.robot.reset()
        h.robot.manners, h.robot.brake, h.robot.duration = 'brake', 11.0, 30.0
        gotos = len(h.robot.gotos)
        handle = h.send_task('deactivate_stop', PARAMS)  # replayed: its goto brakes 11 s
        assert handle.accepted
        goto = h.robot.wait_goto(gotos)
        assert goto is not None
        time.sleep(0.3)
        change = h.call(ChangeState, 'change_state', timeout=90.0,
                        transition=Transition(id=Transition.TRANSITION_DEACTIVATE))
        answered = time.monotonic()
        assert change.success
        assert h.call(GetState, 'get_state').current_state.id == State.PRIMARY_STATE_INACTIVE
        print(f'deactivate answered {answered - goto.canceled_at:.2f} s after the cancel; '
              f'the goto ended {goto.ended - goto.canceled_at:.2f} s after it')
        assert not math.isnan(goto.ended) and goto.ended < answered, 'inactive under a stop'
        wrapped = h.result(handle, 30.0)
        assert not wrapped.result.success
        said = [e.detail for e in h.wait_events(CacheEvent.STOPPED, 'deactivate_stop', 2)]
        assert any('reported the goal CANCELED' in d for d in said), said
        assert any(d.startswith('at rest after') for d in said), said
        assert not h.robot.overlaps
    finally:
        h.close()


def test_run_bt_says_a_stop_that_raised_did_not_stop(tmp_path):
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node(f'stop_raises_{tmp_path.name[-8:]}', context=context)
    name = f'/{node.get_name()}/fib'
    release = threading.Event()

    def execute(goal_handle):  # runs until the test ends; refuses every cancel (the default)
        release.wait(30.0)
        goal_handle.succeed()
        return Fibonacci.Result()

    group = ReentrantCallbackGroup()
    server = ActionServer(node, Fibonacci, name, execute, callback_group=group,
                          cancel_callback=lambda _h: CancelResponse.REJECT)
    client = ActionClient(node, Fibonacci, name, callback_group=group)
    service = node.create_client(Trigger, f'{name}_stop')
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    executor.add_node(node)
    spinner = Spinner(executor)
    try:
        stopper = Stopper(client=client, server=name, capture=lambda _names: None,
                          rule=StopRule(timeout=1.0), service=service,
                          means=StopConfig(service=f'{name}_stop', service_type=Trigger))
        assert client.wait_for_server(timeout_sec=10.0)
        sent = client.send_goal_async(Fibonacci.Goal(order=3))
        deadline = time.monotonic() + 10.0
        while not sent.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        handle = sent.result()
        assert handle is not None and handle.accepted
        node.destroy_client(service)  # torn down under the stop, as at Ctrl-C
        pending = PendingCall(stopper=stopper)
        pending.accepted(handle, handle.get_result_async())
        assert pending.cancel()
        said, why = pending.settle()
        print(f'said: {said!r}; why: {why!r}')
        assert 'did not stop' in why, (said, why)
    finally:
        release.set()
        spinner.stop()
        server.destroy()
        client.destroy()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
