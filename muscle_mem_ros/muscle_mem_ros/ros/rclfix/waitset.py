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
The one place that uses rclpy's private wait-set API, with a version check.

:class:`~..capture.sensors.SensorHub` waits on its raw subscriptions without taking
their messages (the middleware keeps the newest), which rclpy's public API
cannot do: an executor takes every message as it arrives. That needs rclpy's
C module (``_rclpy.WaitSet`` and ``Subscription.handle.take_message``), which is
private and may change between releases. This module checks, once, that the
installed rclpy is a version it was written against (:data:`TESTED_RCLPY`) and
that the C module has what it uses; :func:`unavailable` says why not
otherwise, and the hub then falls back to plain subscriptions with callbacks
(every message taken on arrival: more CPU, same snapshots).

A message taken here comes with its info: :func:`arrival` puts its reception time on the
monotonic clock the hub stamps with.

``MUSCLE_MEM_PLAIN_SUBSCRIPTIONS=1`` in the environment forces the fallback
(:data:`FORCE_FALLBACK`): for tests, and for users whose rclpy passes the check
but misbehaves.
"""

from __future__ import annotations

from importlib import metadata
import os
import time
from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:
    from rclpy.context import Context
    from rclpy.guard_condition import GuardCondition
    from rclpy.subscription import MessageInfo, Subscription

__all__ = ['arrival', 'FORCE_FALLBACK', 'TESTED_RCLPY', 'RawWaitSet', 'take', 'unavailable']

TESTED_RCLPY = ('9.',)
"""Version prefixes of rclpy whose private wait-set API this module was checked against."""

FORCE_FALLBACK = 'MUSCLE_MEM_PLAIN_SUBSCRIPTIONS'
"""Environment variable: set to 1 to use plain subscriptions whatever the rclpy version."""

_METHODS = ('clear_entities', 'add_subscription', 'add_guard_condition', 'wait',
            'get_ready_entities')


def unavailable() -> str | None:
    """
    Say why the private wait-set API cannot be used here, or None when it can.

    :return: The reason (forced, unknown version, missing C API), or None.
    """
    if os.environ.get(FORCE_FALLBACK, '') not in ('', '0'):
        return f'{FORCE_FALLBACK} is set'
    try:
        version = metadata.version('rclpy')
    except metadata.PackageNotFoundError:
        version = ''
    if not version.startswith(TESTED_RCLPY):
        return f'rclpy {version or "(unknown version)"} is not one of {TESTED_RCLPY}'
    try:
        from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
    except ImportError as err:
        return f'rclpy C module not importable: {err}'
    wait_set = getattr(_rclpy, 'WaitSet', None)
    if wait_set is None or not all(hasattr(wait_set, m) for m in _METHODS):
        return 'rclpy C module has no WaitSet with the methods used'
    return None


class RawWaitSet:
    """
    Wait on raw subscriptions and guard conditions without taking any message.

    :param context: The rclpy context.
    :param subscriptions: How many subscriptions it may hold at most.
    :param guards: How many guard conditions it may hold at most.
    """

    def __init__(self, context: Context, *, subscriptions: int, guards: int) -> None:
        from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
        handle = context.handle
        if handle is None:
            raise RuntimeError('the rclpy context was destroyed')
        self._wait_set = _rclpy.WaitSet(subscriptions, guards, 0, 0, 0, 0, handle)

    def wait(self, subscriptions: list[Subscription[Any]], guards: list[GuardCondition],
             timeout_ns: int) -> bool:
        """
        Block until one of them is ready or ``timeout_ns`` passed (-1: forever).

        :return: True when a subscription has a message.
        """
        wait_set = self._wait_set
        wait_set.clear_entities()
        for sub in subscriptions:
            wait_set.add_subscription(sub.handle)
        for guard in guards:
            wait_set.add_guard_condition(guard.handle)
        wait_set.wait(timeout_ns)
        return bool(wait_set.get_ready_entities('subscription'))


def take(sub: Subscription[Any]) -> tuple[bytes, MessageInfo] | None:
    """
    Take one raw message and its info from ``sub``, or None when there is none.

    :param sub: A subscription created with ``raw=True``.
    :return: (CDR bytes, message info dict) or None (nothing queued, or destroyed).
    """
    try:
        return sub.handle.take_message(sub.msg_type, True)
    except Exception:  # destroyed while closing
        return None


def arrival(info: MessageInfo) -> float:
    """
    When the middleware received a message, on the monotonic clock.

    The rmw reception time (system clock) is moved onto the monotonic clock, so
    a message that arrived before a step ended never counts as newer than the
    step because it was taken late. Without a reception time: now.
    """
    now = time.monotonic()
    received = info.get('received_timestamp', 0) if isinstance(info, dict) else 0
    if not received:
        return now
    return min(now, now - (time.time() - received * 1e-9))
