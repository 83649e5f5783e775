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
What an active cache serves: made by activate, undone by deactivate, part by part.

:class:`Serving` holds every part that activate makes (the sensors and their sampler, the
proxies and introspection taps, the replayer, the task runner, the services and the
diagnostics timer) so that deactivate can undo exactly that, in the order that lets each
part finish: the node's services and timer first (nothing new comes in), then the proxies'
calls (their thread still spins, so results go out), the proxy host, the sampler, the
standstill's watch and the sensors last (a stop still running reads them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from muscle_mem_ros.ros.capture.forwarding import ToolProxy
from muscle_mem_ros.ros.capture.host import ProxyHost
from muscle_mem_ros.ros.capture.recorder import Recorder
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.capture.tap import Tap
from muscle_mem_ros.ros.capture.tracing import Sampler
from muscle_mem_ros.ros.execution.replay import Replayer
from muscle_mem_ros.ros.execution.services import CacheServices
from muscle_mem_ros.ros.execution.standstill import Standstill
from muscle_mem_ros.ros.execution.tasks import TaskRunner
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from rclpy.node import Node
from rclpy.service import Service
from rclpy.timer import Timer

__all__ = ['PROXY_END_WAIT', 'Serving']

PROXY_END_WAIT = 2.0
"""Seconds deactivate waits for each proxy's results to go out, once its goals stopped."""


@dataclass
class Serving:
    """What activate made; :meth:`stop` undoes it (module docstring)."""

    hub: SensorHub | None = None
    sampler: Sampler | None = None
    proxies: dict[str, ToolProxy] = field(default_factory=dict)
    taps: list[Tap] = field(default_factory=list)
    replayer: Replayer | None = None
    agent: ActionClient | None = None
    runner: TaskRunner | None = None
    handlers: CacheServices | None = None
    services: list[Service[Any, Any]] = field(default_factory=list)
    diag_timer: Timer | None = None

    def stop(self, *, node: Node, recorder: Recorder | None, host: ProxyHost | None,
             standstill: Standstill) -> None:
        """
        Destroy every part, once what ran has wound down (the caller waited for its stops).

        :param node: The node the services, timer and agent client were made on.
        :param recorder: The recorder the taps settle through, if still configured.
        :param host: The proxies' host, if the node has tools.
        :param standstill: The record of a robot that did not stop (its watch ends here).
        """
        if self.diag_timer is not None:
            node.destroy_timer(self.diag_timer)
        for service in self.services:
            node.destroy_service(service)
        if self.agent is not None:
            self.agent.destroy()
        for tap in self.taps:
            if recorder is not None:
                recorder.remove_settle(tap.settle)
        for proxy in self.proxies.values():  # the proxy thread still spins: they can end
            proxy.end_calls(PROXY_END_WAIT)
        if host is not None:
            host.stop(self.proxies.values())
        if self.sampler is not None:
            self.sampler.close()
        standstill.unwatch()
        if self.hub is not None:
            self.hub.close()
