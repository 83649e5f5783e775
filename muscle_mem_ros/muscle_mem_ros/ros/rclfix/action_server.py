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
An rclpy ``ActionServer`` that can tell when every result its clients asked for went out.

A node that shuts down with a goal running must end that goal and let its
client have the result before the executor stops: a client whose result never
comes waits forever (rclpy's client has no notion of a server that went away).
Ending the goal is the node's work; the result is then sent by a callback the
executor runs a moment later, which an executor shut down at once never runs.
:meth:`ActionServer.wait_results_sent` waits for exactly that: no goal still
executing, and a response sent for every result request of a known goal.

It counts in the two ``ActionServer`` methods that take a result request and
send its response; everything else is rclpy's.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rclpy.action.server import ActionServer as _RclpyActionServer

__all__ = ['ActionServer']

_POLL = 0.02
"""Seconds between looks at the goals' states (a goal's end notifies nothing here)."""


class ActionServer(_RclpyActionServer[Any, Any, Any]):
    """``rclpy.action.ActionServer`` that knows whether it still owes a client a result."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._owed = 0
        self._owed_changed = threading.Condition()
        super().__init__(*args, **kwargs)

    async def _execute_get_result_request(self, request_header_and_message: Any) -> None:
        _header, request = request_header_and_message
        if bytes(request.goal_id.uuid) in self._goal_handles:  # answered when the goal ends
            with self._owed_changed:
                self._owed += 1
        await super()._execute_get_result_request(request_header_and_message)

    def _send_result_response(self, request_header: Any, future: Any) -> None:
        try:
            super()._send_result_response(request_header, future)
        finally:
            with self._owed_changed:
                self._owed -= 1
                self._owed_changed.notify_all()

    def wait_results_sent(self, timeout: float) -> bool:
        """
        Wait until no goal is executing and every requested result was sent.

        Call it from a thread the executor does not need, while the executor still spins.

        :param timeout: Seconds to wait at most.
        :return: True when nothing is owed, False after ``timeout``.
        """
        deadline = time.monotonic() + timeout
        with self._owed_changed:
            while True:
                running = any(h.is_active for h in list(self._goal_handles.values()))
                if not running and self._owed <= 0:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._owed_changed.wait(min(left, _POLL))
