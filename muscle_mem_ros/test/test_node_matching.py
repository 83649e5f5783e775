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
The matching probe waits for its own request's answer, not a late answer to the one before.

CI once failed a module's setup with 'the demo agent did not match the feedback reader':
the probe had returned False at once. A probe attempt's done callback set the attempt's
event through a closure over the loop variable, and rclpy runs a done callback later, as
an executor task: a late answer to an attempt that had timed out woke the next attempt,
whose own request was still pending, and the probe took that as 'no answer'. A stress
against a real node (GetParameters over DDS, 3-thread executor) failed within 20 to 110
probes in each of 5 runs before the fix and passed 800 after. This test makes the same
order of events with a stand-in client whose answers come when the test says (a real
server cannot be told to answer late), and the real rclpy Future.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from muscle_mem_ros.ros.rclfix import matching
import pytest
from rclpy.task import Future


class _LateServer:
    """Stand-in for a probe client: answer n comes ``delays[n]`` seconds after its request."""

    def __init__(self, delays: list[float]) -> None:
        self.delays = delays
        self.sent: list[Future] = []

    def wait_for_service(self, timeout_sec: float) -> bool:
        return True

    def call_async(self, request: Any) -> Future:
        future: Future = Future()
        delay = self.delays[min(len(self.sent), len(self.delays) - 1)]
        self.sent.append(future)
        timer = threading.Timer(delay, future.set_result, args=(object(),))
        timer.daemon = True
        timer.start()
        return future

    def remove_pending_request(self, future: Future) -> None:
        """Nothing: an answer already on its way still completes the future (as in rclpy)."""


class _Node:
    """Stand-in for the node that owns the probe client."""

    def __init__(self, server: _LateServer) -> None:
        self.server = server
        self.destroyed = False

    def create_client(self, *args: Any) -> _LateServer:
        return self.server

    def destroy_client(self, client: Any) -> None:
        self.destroyed = True


def test_a_late_answer_to_the_attempt_before_does_not_end_the_probe(monkeypatch):
    monkeypatch.setattr(matching, '_ATTEMPT', 0.2)
    # The first answer comes 0.3 s after its request, 0.1 s into the second attempt, whose
    # own answer comes 0.2 s after it was asked, just before that attempt gives up.
    server = _LateServer([0.3, 0.18])
    node = _Node(server)
    started = time.monotonic()
    assert matching._probe(node, '/ns/agent', time.monotonic() + 5.0)
    assert len(server.sent) >= 2 and server.sent[-1].done()
    assert time.monotonic() - started >= 0.3
    assert node.destroyed


def test_no_answer_is_false_at_the_deadline(monkeypatch):
    monkeypatch.setattr(matching, '_ATTEMPT', 0.05)
    server = _LateServer([60.0])
    node = _Node(server)
    started = time.monotonic()
    assert not matching._probe(node, '/ns/agent', time.monotonic() + 0.3)
    assert time.monotonic() - started == pytest.approx(0.3, abs=0.25)
    assert len(server.sent) >= 3 and node.destroyed
