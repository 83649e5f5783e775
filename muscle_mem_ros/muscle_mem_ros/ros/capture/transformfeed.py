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
``/tf`` and ``/tf_static`` into a :class:`~muscle_mem_ros.transforms.buffer.TransformBuffer`.

The subscriptions are those of tf2_ros's ``TransformListener``: ``tf2_msgs/msg/TFMessage``
(the real type, so DDS matches robot_state_publisher and every broadcaster; on the PyPI wheel
setup scripts/setup.sh builds it, see docs/ros_on_pip.md), reliable, keep-last 100, and
transient local for ``/tf_static`` so that static transforms sent before the cache started
still arrive. Unlike tf2_ros they are raw (CDR bytes) and live on a hidden helper node
(``_<node>_tf``) that no executor spins, as :mod:`.sensors` does it: one thread waits on them
through :mod:`..rclfix.waitset`, and after each wake-up it sleeps :data:`DRAIN_PERIOD` before
the next, so the messages of a 1 kHz ``/tf`` are taken in batches of about 30, with one
Python wake-up per batch instead of one per message. Idle, the thread blocks.

Reading the bytes is :mod:`.tfcdr`'s: a TFMessage's layout (frames, string lengths, padding) is
learned once and each message of that layout is read with one ``struct`` call, since a
robot_state_publisher sends the same frames in the same order every time.

Each transform goes to ``buffer.set(parent, child, stamp, transform, static)``, stamped with
its header stamp in seconds: ROS time as the publisher's clock gave it (simulated time under
``use_sim_time``). A transform the buffer refuses (NaN, a quaternion that is not a rotation,
a second parent) is reported once per link through ``on_error`` and skipped; the rest of the
message is kept. :meth:`TransformFeed.received` tells, per child frame, when its newest
transform arrived (``time.monotonic()``, the middleware's reception time), so a sensor can
wait for data newer than a step's end; ``on_data`` is called after each batch that set
something.

Where the private wait-set API is unavailable (:func:`..rclfix.waitset.unavailable`), the
helper node's subscriptions get plain callbacks, spun by a single-threaded executor in the
same thread: every message is taken and decoded on arrival; the buffer ends the same.
"""

from __future__ import annotations

from collections.abc import Callable
import math
import threading
import time
from typing import Any

from muscle_mem_ros.ros.capture.tfcdr import Decoded, TFReader
from muscle_mem_ros.ros.rclfix import waitset
from muscle_mem_ros.transforms.buffer import TransformBuffer
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.guard_condition import GuardCondition
from rclpy.node import Node as RosNode
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerGuardCondition
from rclpy.subscription import Subscription
from tf2_msgs.msg import TFMessage

__all__ = ['DRAIN_PERIOD', 'STATIC_QOS', 'TF_QOS', 'TransformFeed']

DRAIN_PERIOD = 0.03
"""Seconds the receive thread sleeps after taking a batch: 30 messages of a 1 kHz ``/tf``,
well inside the subscriptions' keep-last 100."""

TF_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                    reliability=ReliabilityPolicy.RELIABLE,
                    durability=DurabilityPolicy.VOLATILE)
"""``/tf``: tf2_ros's ``DynamicListenerQoS``."""

STATIC_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                        reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.TRANSIENT_LOCAL)
"""``/tf_static``: tf2_ros's ``StaticListenerQoS`` (late joiners get what was sent)."""

_RESTART_PAUSE = 0.1
"""Seconds the receive loop pauses before it restarts after an unexpected error."""


class TransformFeed:
    """
    Fill a transform buffer from ``/tf`` and ``/tf_static`` (module docstring).

    :param node: The cache node (its context, name and namespace are used).
    :param buffer: The buffer to fill.
    :param on_data: Called, from the receive thread, after each batch that set a transform.
    :param on_error: Called with a message for a transform the buffer refused (once per
        link) or a message that does not decode (once per topic).
    """

    def __init__(self, node: RosNode, buffer: TransformBuffer, *,
                 on_data: Callable[[], None] | None = None,
                 on_error: Callable[[str], None] | None = None) -> None:
        self._buffer = buffer
        self._on_data = on_data
        self._on_error = on_error or (lambda _m: None)
        self._received: dict[str, float] = {}
        self._reported: set[str] = set()
        self._readers = {False: TFReader(), True: TFReader()}
        self._take_lock = threading.Lock()
        self._context = node.context
        self._stopping = False
        self._stop_event = threading.Event()
        self._stop = GuardCondition(callback=None, callback_group=None, context=node.context)
        self.fallback = waitset.unavailable()
        """Why plain subscriptions are used instead of the wait set, or None."""
        name = f'_{node.get_name()}_tf'
        self._node: RosNode | None = rclpy.create_node(
            name, context=node.context, namespace=node.get_namespace(),
            cli_args=['--ros-args', '-r', f'__node:={name}'], start_parameter_services=False)
        self._subs: list[tuple[Subscription[Any], bool]] = [
            (self._node.create_subscription(TFMessage, topic, self._callback(static), qos,
                                            raw=True), static)
            for topic, qos, static in (('/tf', TF_QOS, False), ('/tf_static', STATIC_QOS, True))]
        self._executor: SingleThreadedExecutor | None = None
        if self.fallback is not None:
            self._executor = SingleThreadedExecutor(context=node.context)
            self._executor.add_node(self._node)
        self._thread: threading.Thread | None = threading.Thread(
            target=self._receive, name=name, daemon=True)
        self._thread.start()

    def received(self, child: str) -> float:
        """
        Return when the newest transform of ``child`` arrived, -inf when none has.

        :param child: A child frame (``child_frame_id``), without a leading ``/``.
        :return: ``time.monotonic()`` seconds: the middleware's reception time.
        """
        return self._received.get(child, -math.inf)

    def close(self) -> None:
        """Stop the receive thread and destroy the helper node and its subscriptions."""
        self._stopping = True
        self._stop_event.set()
        try:
            self._stop.trigger()
        except Exception:  # the context is shut down: the thread has ended
            pass
        if self._thread is not None:
            self._thread.join(2.0)
            if self._thread.is_alive():
                return  # a daemon thread; process exit ends it
        if self._executor is not None:
            self._executor.shutdown(timeout_sec=1.0)
            self._executor = None
        with self._take_lock:  # no catch_up takes from a destroyed subscription
            if self._node is not None:
                self._node.destroy_node()
            self._node = None
        try:
            self._stop.destroy()
        except Exception:  # the context is gone already
            pass
        self._thread = self._node = None

    def _callback(self, static: bool) -> Callable[[bytes], None]:
        """Return a subscription's callback; it runs with plain subscriptions only."""
        def on_message(raw: bytes) -> None:
            if self._apply(raw, static, time.monotonic()):
                self._notify()
        return on_message

    def _receive(self) -> None:
        """Run the receive loop until closed; report and restart it after an error."""
        while not self._stopping and self._context.ok():
            try:
                if self._executor is not None:
                    while not self._stopping and self._context.ok():
                        self._executor.spin_once(timeout_sec=0.2)
                else:
                    self._wait_loop()
            except Exception as err:
                if self._stopping or not self._context.ok():
                    return  # closing, or the context was shut down under us
                self._on_error(f'tf: receiving failed: {err!r}; restarted')
                self._stop_event.wait(_RESTART_PAUSE)

    def _wait_loop(self) -> None:
        """Wait until a message is pending, take every pending one, sleep a period; again."""
        context = self._context
        sigint = SignalHandlerGuardCondition(context=context)
        guards = [self._stop, sigint]
        subs = [sub for sub, _static in self._subs]
        try:
            wait_set = waitset.RawWaitSet(context, subscriptions=len(subs), guards=len(guards))
            while not self._stopping and context.ok():
                if wait_set.wait(subs, guards, -1) and self._drain():
                    self._notify()
                self._stop_event.wait(DRAIN_PERIOD)
        finally:
            try:
                sigint.destroy()
            except Exception:  # the context is gone already
                pass

    def catch_up(self) -> None:
        """
        Take every pending message now, before a lookup (the receive thread's batch may wait).

        A snapshot reads topic sensors from the middleware as it is taken; this makes TF as
        fresh, whatever the receive thread's turn: on a busy machine a process's thread may
        wait long for the interpreter. With plain subscriptions (the fallback) every message
        is taken on arrival already.
        """
        if self._executor is None and not self._stopping and self._drain():
            self._notify()

    def _drain(self) -> bool:
        """Take and apply every pending message; return True when a transform was set."""
        changed = False
        with self._take_lock:  # the receive thread, and a snapshot's catch_up
            if self._node is None:
                return False  # closed
            for sub, static in self._subs:
                while True:
                    taken = waitset.take(sub)
                    if taken is None:
                        break
                    changed = self._apply(taken[0], static,
                                          waitset.arrival(taken[1])) or changed
        return changed

    def _notify(self) -> None:
        if self._on_data is not None:
            self._on_data()

    def _apply(self, raw: bytes, static: bool, arrived: float) -> bool:
        """Set every transform of one message; return True when one was set."""
        try:
            decoded = self._readers[static].decode(raw)
        except ValueError as err:
            self._report('/tf_static' if static else '/tf',
                         f'tf: a message on {"/tf_static" if static else "/tf"} does not '
                         f'decode ({err}); dropped')
            return False
        return self._set(decoded, static, arrived)

    def _set(self, decoded: Decoded, static: bool, arrived: float) -> bool:
        """Give the buffer the transforms of a decoded message; report what it refuses."""
        layout, values = decoded
        refused = self._buffer.set_many(layout.links, values, static)
        received = self._received
        if not refused:
            for child in layout.children:
                received[child] = arrived
            return bool(layout.links)
        skipped = set()
        for index, err in refused:
            parent, child = layout.links[index]
            skipped.add(index)
            self._report(f'{parent}->{child}', f'tf: {err}; that transform is skipped')
        for index, child in enumerate(layout.children):
            if index not in skipped:
                received[child] = arrived
        return len(skipped) < len(layout.links)

    def _report(self, key: str, message: str) -> None:
        """Call ``on_error`` once per ``key`` (a link, a topic)."""
        if key not in self._reported:
            self._reported.add(key)
            self._on_error(message)
