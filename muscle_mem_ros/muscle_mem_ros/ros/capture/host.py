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
(measured: about half the added latency). See :mod:`muscle_mem_ros.ros.node.cache_node`.
The host makes what lives on it: a proxy per configured tool (:mod:`.proxies`), and for a
tool with ``record_from: introspection`` a tap on its introspection events (:mod:`.tap`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
import threading

from muscle_mem_ros.ros.capture.forwarding import Held, ToolProxy
from muscle_mem_ros.ros.capture.proxies import make_proxy
from muscle_mem_ros.ros.capture.recorder import Recorder
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.capture.tap import Ledger, make_tap, Tap
from muscle_mem_ros.ros.capture.tracing import Sampler
from muscle_mem_ros.ros.node.nodeconfig import RecordFrom, StopRule, ToolConfig
import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.impl.rcutils_logger import RcutilsLogger
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

    def proxies(self, *, tools: Sequence[ToolConfig], hub: SensorHub, recorder: Recorder,
                post_timeout: float, timeout: float, logger: RcutilsLogger,
                sampler: Sampler | None = None,
                traced: Collection[str] = (),
                stop_rule: StopRule = StopRule(),
                held: Held | None = None) -> dict[str, ToolProxy]:
        """
        Make a proxy of each tool on this node, each in a reentrant callback group of its own.

        :param tools: The configured actions and services.
        :param hub: Sensor capture (a recorded call's snapshots).
        :param recorder: Records the proxied calls.
        :param post_timeout: Max seconds a recording's post snapshot waits for fresh data.
        :param timeout: Seconds one replayed step may take.
        :param logger: The node's logger.
        :param sampler: Polls the sensors while an action step runs (None: no trace, no watch).
        :param traced: The sensors a recorded action step's trace keeps.
        :param stop_rule: What a goal the cache stops is held to (:mod:`.stopping`).
        :param held: Told of the stops that fail; while it refuses, nothing is sent.
        :return: The proxies by server name.
        """
        return {
            tool.server: make_proxy(
                node=self.node, tool=tool, hub=hub, recorder=recorder,
                callback_group=ReentrantCallbackGroup(), post_timeout=post_timeout,
                logger=logger, timeout=timeout, sampler=sampler, traced=traced,
                stop_rule=stop_rule, held=held,
            )
            for tool in tools
        }

    def taps(self, *, proxies: dict[str, ToolProxy], tools: Sequence[ToolConfig],
             hub: SensorHub, recorder: Recorder, post_timeout: float,
             logger: RcutilsLogger) -> list[Tap]:
        """
        Make a tap for each tool recorded from its introspection events; the recorder settles it.

        :param proxies: The tools' proxies by server name (:meth:`proxies`).
        :return: The taps (:meth:`Recorder.remove_settle` undoes each one's settle).
        """
        ledger = Ledger()
        taps = [
            make_tap(node=self.node, proxy=proxies[tool.server], hub=hub, recorder=recorder,
                     post_timeout=post_timeout, logger=logger, ledger=ledger)
            for tool in tools if tool.record_from is RecordFrom.INTROSPECTION
        ]
        for tap in taps:
            recorder.add_settle(tap.settle)
            logger.info(
                f'{tap.tool.server}: recorded from its introspection events '
                f"({', '.join(tap.topics)}); the agent calls it directly")
        return taps

    def stop(self, proxies: Iterable[ToolProxy]) -> None:
        """Stop the executor thread, destroy the proxies and the node."""
        self._executor.shutdown(timeout_sec=2.0)
        self._thread.join(2.0)
        for proxy in proxies:
            proxy.destroy()
        self.node.destroy_node()
