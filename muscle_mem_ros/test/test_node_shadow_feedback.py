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
A shadow run's verdicts reach a plain ActionClient that reads feedback (real cache, DDS, load).

rclpy's ``ActionClient`` forgets a goal's feedback callback when the goal's result
arrives, and it takes the result before the feedback that waits beside it: feedback
still queued in the client when the result comes is dropped. The readers here are such
clients (rclpy's, with the goal registration fix of ``rclfix``, nothing else changed),
each on a single-threaded executor of its own, while two processes keep both cores busy.

* A healthy reader of the arm (whose agent's own feedback is forwarded too): each
  step's ``MODE_SHADOW`` feedback reaches it; the cache said them in a burst just before
  the result, and the reader lost the last two of four.
* A busy reader (50 ms per feedback message) of the mobile picker, whose base and gripper
  take longer than that per step: each step's feedback reaches it (a burst lost three).
* A busy reader that cannot keep up (the arm's steps are quicker than its two messages a
  step): the feedback it gets is the verdicts in order, and the result says every one.
"""

from __future__ import annotations

from contextlib import contextmanager
import json
import re
import subprocess
import sys
import threading
import time
from typing import Any

from action_msgs.msg import GoalStatus
from mobile_helpers import MobileAgent, MobileHarness, MobileRobot
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.matching import wait_for_action_matched
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
from node_helpers import Harness
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from test_node_bindings import run

_HOG = ('import sys, time\nend = time.monotonic() + float(sys.argv[1])\n'
        'while time.monotonic() < end:\n    pass\n')
"""A process that keeps one core busy for argv[1] seconds."""
_HOG_SECONDS = 240.0
"""Upper bound of the load, should the test be killed before it stops the hogs."""
RUNS = 5
"""Shadow runs per reader."""
BUSY = 0.05
"""Seconds a busy reader's feedback callback takes per message."""
STEP_TIME = 0.15
"""Seconds the mobile picker's base and gripper take per call (more than BUSY)."""


@contextmanager
def cpu_hogs(count: int = 2):
    """Keep ``count`` cores busy (bounded in time); stop the processes on the way out."""
    procs = [subprocess.Popen([sys.executable, '-c', _HOG, str(_HOG_SECONDS)])
             for _ in range(count)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


class Reader:
    """
    A client of the cache's ExecuteTask on a node and single-threaded executor of its own.

    :param h: The harness (its context and names).
    :param name: The node's name (after the harness's prefix).
    :param busy: Seconds its feedback callback takes per message (0: healthy).
    """

    def __init__(self, h: Harness, name: str, busy: float) -> None:
        self.busy = busy
        self.node = Node(f'{h.names.prefix}_{name}', context=h.context)
        self.client = ActionClient(self.node, ExecuteTask, h.names.cache('execute_task'))
        self._spinner = Spinner(SingleThreadedExecutor(context=h.context))
        self._spinner.executor.add_node(self.node)
        if not wait_for_action_matched(self.node, self.client, f'/{h.names.node}', 30.0):
            raise RuntimeError(f'{name}: the cache did not match its ExecuteTask client')

    def run(self, task: str, params_json: str = '',
            timeout: float = 60.0) -> tuple[Any, list[tuple[int, int, str]]]:
        """
        Send ``task`` as the ROS tutorials' client does; return (wrapped result, feedback).

        The result is asked for from the goal response's callback; feedback is
        (mode, step, detail) in the order the callback saw it.
        """
        feedback: list[tuple[int, int, str]] = []
        done = threading.Event()
        wrapped: list[Any] = []

        def on_feedback(msg: Any) -> None:
            fb = msg.feedback
            feedback.append((fb.mode, fb.step, fb.detail))
            if self.busy:
                time.sleep(self.busy)  # a slow consumer: a display, a log written to disk

        def on_result(future: Any) -> None:
            wrapped.append(future.result())
            done.set()

        def on_goal(future: Any) -> None:
            handle = future.result()
            if handle is None or not handle.accepted:
                done.set()
                return
            handle.get_result_async().add_done_callback(on_result)

        sent = self.client.send_goal_async(
            ExecuteTask.Goal(task=task, params_json=params_json), feedback_callback=on_feedback)
        sent.add_done_callback(on_goal)
        assert done.wait(timeout), f'no result for {task} in {timeout} s'
        assert wrapped, f'{task}: goal rejected'
        return wrapped[0], list(feedback)

    def close(self) -> None:
        self._spinner.stop()
        self.client.destroy()
        self.node.destroy_node()


def verdicts(feedback: list[tuple[int, int, str]]) -> list[tuple[int, str]]:
    """Return the (step, detail) of each MODE_SHADOW feedback message, in order."""
    return [(step, detail) for mode, step, detail in feedback
            if mode == ExecuteTask.Feedback.MODE_SHADOW]


def check_result(wrapped: Any, steps: int, said: list[tuple[int, str]]) -> None:
    """Assert the run succeeded and its message says each step's verdict, as feedback did."""
    message = wrapped.result.message
    assert wrapped.status == GoalStatus.STATUS_SUCCEEDED, message
    found = re.search(r'shadow: (\d+) of (\d+) steps agreed with the cache', message)
    assert found and int(found[2]) == steps, message
    agreed = int(found[1])
    learned = re.search(r'agreed with the cache \(as learned steps ([0-9, ]+)\)', message)
    path = [int(n) for n in learned[1].split(', ')] if learned else []
    assert len(path) == agreed, message
    if agreed < steps:
        assert f'; step {agreed}: ' in message, message
    rest = list(range(agreed + 1, steps))
    if rest:
        assert (f'; step {rest[0]}: not predicted' if len(rest) == 1 else
                f'; steps {rest[0]}-{rest[-1]}: not predicted') in message, message
    for step, detail in said:  # the feedback said the same
        node = re.search(r'agreed with learned step (\d+)$', detail)
        assert (node is not None) == (step < agreed), (detail, message)
        assert node is None or int(node[1]) == path[step], (detail, message)


def test_every_verdict_reaches_a_healthy_reader_of_the_arm_under_load(tmp_path):
    h = Harness(tmp=tmp_path)
    reader = None
    try:
        h.start_cache(infer_bindings=False)
        run(h, 'watch')  # learned
        h.set_mode('shadow')
        reader = Reader(h, 'healthy', 0.0)
        with cpu_hogs(2):
            for attempt in range(RUNS):
                h.robot.reset()
                wrapped, feedback = reader.run('watch')
                said = verdicts(feedback)
                assert [step for step, _ in said] == [0, 1, 2, 3], f'run {attempt}: {feedback}'
                check_result(wrapped, 4, said)
                assert 'shadow: 4 of 4 steps agreed' in wrapped.result.message
    finally:
        if reader is not None:
            reader.close()
        h.close()


def test_a_reader_that_cannot_keep_up_gets_the_verdicts_in_order_and_all_in_the_result(
        tmp_path):
    h = Harness(tmp=tmp_path)
    reader = None
    try:
        h.start_cache(infer_bindings=False)
        run(h, 'watch')
        h.set_mode('shadow')
        reader = Reader(h, 'busy', BUSY)
        with cpu_hogs(2):
            for _ in range(RUNS):
                h.robot.reset()
                wrapped, feedback = reader.run('watch')
                said = verdicts(feedback)
                assert [step for step, _ in said] == list(range(len(said))), feedback
                check_result(wrapped, 4, said)
    finally:
        if reader is not None:
            reader.close()
        h.close()


class _SlowPicker(MobileRobot):
    """The mobile picker, whose base and gripper take STEP_TIME per call."""

    def _goto(self, request: Any, response: Any) -> Any:
        time.sleep(STEP_TIME)
        return super()._goto(request, response)

    def _grip(self, request: Any, response: Any) -> Any:
        time.sleep(STEP_TIME)
        return super()._grip(request, response)


class _SlowPickerHarness(MobileHarness):

    def _doubles(self) -> tuple[Any, Any]:
        robot = _SlowPicker(names=self.names, context=self.context)
        return robot, MobileAgent(names=self.names, robot=robot, context=self.context)


def test_every_verdict_reaches_a_busy_reader_of_the_mobile_picker_under_load(tmp_path):
    h = _SlowPickerHarness(tmp=tmp_path)
    reader = None
    params = json.dumps({'bin': 1})
    try:
        h.start_cache()
        h.robot.reset()
        learned = h.run_task('fetch', params)
        assert learned.status == GoalStatus.STATUS_SUCCEEDED, learned.result.message
        h.set_mode('shadow')
        reader = Reader(h, 'busy', BUSY)
        with cpu_hogs(2):
            for attempt in range(RUNS):
                h.robot.reset()
                wrapped, feedback = reader.run('fetch', params)
                said = verdicts(feedback)
                assert [step for step, _ in said] == [0, 1, 2, 3], f'run {attempt}: {feedback}'
                check_result(wrapped, 4, said)
    finally:
        if reader is not None:
            reader.close()
        h.close()
