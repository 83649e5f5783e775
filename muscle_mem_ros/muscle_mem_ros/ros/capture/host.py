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
The hidden node that serves the proxies, spun by a single-threaded executor of its own.

A pass-through goal then never goes through the main pool's thread hand-offs
(measured: about half the added latency). See :mod:`.node`.
"""

from __future__ import annotations

from collections.abc import Iterable
import threading

from muscle_mem_ros.ros.capture.forwarding import ToolProxy
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node as RosNode

__all__ = ['ProxyHost']


class ProxyHost:
    """
    The node ``_<name>_proxies`` beside ``owner``, and the thread that spins it.

    :param owner: The behavior-cache node (its context, name and namespace).
    """

    def __init__(self, owner: RosNode) -> None:
        name = f'_{owner.get_name()}_proxies'
        self.node = rclpy.create_node(
            name, context=owner.context, namespace=owner.get_namespace(),
            cli_args=['--ros-args', '-r', f'__node:={name}'], start_parameter_services=False,
        )
        self._executor = SingleThreadedExecutor(context=owner.context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name=name, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            self._executor.spin()
        except Exception:  # the context was shut down under us: nothing left to serve
            pass

    def stop(self, proxies: Iterable[ToolProxy]) -> None:
        """Stop the executor thread, destroy the proxies and the node."""
        self._executor.shutdown(timeout_sec=2.0)
        self._thread.join(2.0)
        for proxy in proxies:
            proxy.destroy()
        self.node.destroy_node()
