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
Wait until an action server will deliver its feedback and status to a client.

Action feedback and status are topics. A server's writer sends only to the
readers it has matched, and matching follows discovery, which runs on its own
in each process: ``ActionClient.wait_for_server`` (``server_is_ready``) tells
that *this* process has discovered the server's endpoints (and so matched its
writers), not that the server has discovered the client's readers. A goal sent
at once can have its first feedback published to nobody; ROS promises nothing
more, and a test that counts every feedback message of a module's first goal
then fails now and then, however long it waits afterwards.

:func:`wait_for_action_matched` closes that gap with a round trip (and
:func:`wait_for_service_matched` the same gap for a service's response reader). A process
announces its readers in the order it creates them, and a peer learns of them
in that order (the discovery data is sent reliably and in sequence). A new
service client created *after* the action client announces its response reader
later than the action client's feedback and status readers; once the server's
process has answered a request of that client, it has matched that response
reader, and so it had already matched the earlier feedback and status readers.
The request is a harmless one: ``get_parameters`` with no names, on the node
that serves the action (every rclpy node serves it unless told not to).

:class:`AgentSeen` answers the other question a client of a freshly started cache
has: has the cache discovered its agent yet (a task sent before that fails with
"agent ... is not available")? The cache says so in its ``/diagnostics``.
"""

from __future__ import annotations

from collections.abc import Callable
import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.srv import GetParameters
from rclpy.action.client import ActionClient
from rclpy.client import Client
from rclpy.node import Node

__all__ = ['AgentSeen', 'wait_for_action_matched', 'wait_for_node_matched',
           'wait_for_service_matched']

_ATTEMPT = 1.0
"""Seconds one probe request may take before it is sent again (a lost request)."""


def wait_for_action_matched(node: Node, client: ActionClient[Any, Any, Any], server_node: str,
                            timeout: float) -> bool:
    """
    Wait until ``client``'s server has matched the client's feedback and status readers.

    ``node`` must be spinning in another thread (the probe's response is a callback).

    :param node: The node that owns ``client``.
    :param client: An ``rclpy.action.ActionClient``.
    :param server_node: Fully qualified name of the node serving the action
        (``/ns/demo_agent``); its ``get_parameters`` service is the probe.
    :param timeout: Seconds to wait at most.
    :return: True once matched both ways, False after ``timeout``.
    """
    deadline = time.monotonic() + timeout
    if not client.wait_for_server(timeout_sec=timeout):
        return False
    return _probe(node, server_node, deadline)


def wait_for_service_matched(node: Node, client: Client[Any, Any], server_node: str,
                             timeout: float) -> bool:
    """
    Wait until ``client``'s server has matched the client's response reader.

    A server that answers a request before that sends the response to nobody (Fast DDS
    logs "failed to send response (timeout)"): the first request to a server that has
    just started can go unanswered. Same round trip as :func:`wait_for_action_matched`.

    :param node: The node that owns ``client``; spinning in another thread.
    :param client: An ``rclpy`` service client.
    :param server_node: Fully qualified name of the node serving the service.
    :param timeout: Seconds to wait at most.
    :return: True once matched both ways, False after ``timeout``.
    """
    deadline = time.monotonic() + timeout
    if not client.wait_for_service(timeout_sec=timeout):
        return False
    return _probe(node, server_node, deadline)


def wait_for_node_matched(node: Node, peer_node: str, timeout: float) -> bool:
    """
    Wait until ``peer_node``'s process has matched every reader ``node`` created so far.

    The same round trip, for subscriptions (a recorder's): what the peer publishes before
    it matched them is sent to nobody.

    :param node: The node that owns the readers; spinning in another thread.
    :param peer_node: Fully qualified name of a node in the publishing process.
    :param timeout: Seconds to wait at most.
    :return: True once matched, False after ``timeout``.
    """
    return _probe(node, peer_node, time.monotonic() + timeout)


def _probe(node: Node, server_node: str, deadline: float) -> bool:
    """Ask ``server_node`` for no parameters until it answers (a new client's round trip)."""
    probe: Client[Any, Any] = node.create_client(
        GetParameters, f'{server_node.rstrip("/")}/get_parameters')
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not probe.wait_for_service(timeout_sec=left):
                return False
            future = probe.call_async(GetParameters.Request())
            answered = threading.Event()
            # Bound now: a done callback runs later, as an executor task, and a late answer to
            # the attempt before must not wake this one (it did, as a closure over the name).
            future.add_done_callback(_setter(answered))
            answered.wait(min(_ATTEMPT, max(0.0, deadline - time.monotonic())))
            if future.done():
                return future.result() is not None
            probe.remove_pending_request(future)
    finally:
        node.destroy_client(probe)


def _setter(event: threading.Event) -> Callable[[object], None]:
    """Return a done callback that sets ``event``."""
    return lambda _future: event.set()


class AgentSeen:
    """
    Follow a cache node's ``/diagnostics`` to learn when it discovered its agent.

    :param node: A node that spins in another thread; the subscription is made on it.
    :param cache_node: Fully qualified name of the cache node (its diagnostics'
        ``hardware_id``).
    """

    def __init__(self, node: Node, cache_node: str) -> None:
        self._cache = cache_node
        self._seen = threading.Event()
        self._heard = 0
        self._last = ''
        node.create_subscription(DiagnosticArray, '/diagnostics', self._on_diagnostics, 10)

    def _on_diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if status.hardware_id != self._cache:
                continue
            agent = next((kv.value for kv in status.values if kv.key == 'agent'), '')
            self._heard += 1
            self._last = agent
            if agent == 'available':
                self._seen.set()

    @property
    def heard(self) -> str:
        """Say what the cache's diagnostics said of its agent so far (for a timeout's error)."""
        if not self._heard:
            return f'no /diagnostics from {self._cache} reached this node'
        return f'{self._heard} /diagnostics from {self._cache}, the last: agent {self._last!r}'

    def wait(self, timeout: float) -> bool:
        """Return True once the cache reported its agent available, False after ``timeout``."""
        return self._seen.wait(timeout)
