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
An rclpy ``ActionClient`` that does not slow down with every goal it sends.

rclpy 9.1.2 (the Kilted release on PyPI) registers two futures with the
client for each ``send_goal_async`` and only ever completes the second one
(ros2/rclpy#1532, fixed upstream in October 2025, after this release). The
first one stays in the client's future list for good, and the executor walks
that list every time the client has data (a goal response, a result, every
status message). A client that sent N goals therefore pays O(N) per message:
in the node benchmark that list walk was the single largest cost of the
proxy thread after a few thousand goals, and it is a memory leak for a
long-running node.

:class:`ActionClient` drops the orphaned future right after the goal is sent.
It uses only ``add_future``/``remove_future``, the public ``Waitable`` hooks,
so on an rclpy without the bug it finds nothing to drop and changes nothing.

A second fault of the same release: ``ActionClient.__init__`` registers the
client with its node (``add_waitable``) before it creates ``self._lock``. A
node already spinning in another thread wakes up, calls the new client's
``add_to_wait_set``, and dies with ``AttributeError: ... no attribute
'_lock'``: that executor thread is gone and every later answer to the node
times out. :class:`ActionClient` makes its lock before registering and keeps
that one lock, so a client can be created while its node spins.
"""

from __future__ import annotations

import threading
from typing import Any

from rclpy.action import ActionClient as _RclpyActionClient

__all__ = ['ActionClient']


class ActionClient(_RclpyActionClient):
    """``rclpy.action.ActionClient`` without the per-goal future leak of rclpy 9.1.2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._sending = threading.local()
        self._early_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    @property
    def _lock(self) -> threading.Lock:
        """Return the client's lock, made before the client was registered with its node."""
        return self._early_lock

    @_lock.setter
    def _lock(self, value: threading.Lock) -> None:
        """Keep the early lock: rclpy assigns a new one after registering the client."""

    def add_future(self, future: Any) -> None:
        """Register ``future`` with the executor; note it if a goal is being sent."""
        added = getattr(self._sending, 'added', None)
        if added is not None:
            added.append(future)
        super().add_future(future)

    def send_goal_async(self, goal: Any, feedback_callback: Any = None,
                        goal_uuid: Any = None) -> Any:
        """Send ``goal`` as rclpy does, then unregister any future it will never complete."""
        added: list[Any] = []
        self._sending.added = added
        try:
            future = super().send_goal_async(goal, feedback_callback, goal_uuid)
        finally:
            self._sending.added = None
        for orphan in added:
            if orphan is not future:
                try:
                    self.remove_future(orphan)
                except ValueError:  # already gone: nothing to drop
                    pass
        return future
