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
The watch told live: each judged reading of a replayed step on ``~/watch``, for Foxglove.

A replayed action goal is judged on every new reading of a watched sensor and on every
feedback message (:class:`~.watch.StepWatch`). Someone at the robot wants to see that as it
happens: where along the recording the motion is, and per element how much of its
tolerance it uses. :class:`WatchTicks` publishes one ``WatchTick`` per judged reading,
with the tube's :meth:`~muscle_mem_ros.checks.tube.Tube.reading`, and docs/foxglove-layout.json
plots it.

It costs nothing while nobody listens: per judged reading it asks the publisher how many
subscriptions are matched (one call into the middleware), and with none it neither places
the state on the tube a second time nor builds a message. Publishing never touches the
judging: an error here is logged once and the watch goes on (a viewer must not stop a
robot, nor let one go on unwatched).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
import math
import threading
from typing import Any

from muscle_mem_interfaces.msg import WatchedElement, WatchTick
from muscle_mem_ros.checks.tube import Reading
from muscle_mem_ros.records import CheckFailure
from muscle_mem_ros.ros.execution.watch import StepWatch
from rclpy.impl.rcutils_logger import RcutilsLogger

__all__ = ['watch_tick', 'WatchTicks']


def watch_tick(*, stamp: Any, task: str, step: int, tool: str, judged: str, at: float,
               reading: Reading, recorded: float, labels: tuple[str, ...],
               tripped: bool) -> WatchTick:
    """
    Return one WatchTick: where the state sits on the tube, per element.

    :param stamp: When (a ``builtin_interfaces/Time``).
    :param judged: The series whose reading was judged (a sensor, or ``~feedback``).
    :param at: Seconds into the step.
    :param recorded: How long the recorded step took.
    :param labels: The watched elements' labels, in the tube's order.
    :param tripped: This reading tripped the watch.
    """
    r = reading
    ratios = [x for x in r.ratio.tolist() if not math.isnan(x)]
    return WatchTick(
        stamp=stamp, task=task, step=step, tool=tool, time_into_step=float(at),
        progress=r.progress, recorded=recorded, judged=judged, tripped=tripped,
        worst=max(ratios, default=0.0), limit=1.0,
        elements=[WatchedElement(label=label, value=v, expected=e, low=lo, high=hi,
                                 deviation=d, tolerance=t, ratio=q)
                  for label, v, e, lo, hi, d, t, q in zip(
                      labels, r.value.tolist(), r.expected.tolist(), r.low.tolist(),
                      r.high.tolist(), r.deviation.tolist(), r.tolerance.tolist(),
                      r.ratio.tolist())])


class WatchTicks:
    """
    Publish the ticks of the replayed steps' watches (the node's ``~/watch``).

    :param publisher: The ``WatchTick`` publisher (a lifecycle one publishes while active).
    :param stamp: Returns the node clock's time now, as a message.
    :param logger: The node's logger (a failed publish is logged once).
    """

    def __init__(self, *, publisher: Any, stamp: Callable[[], Any],
                 logger: RcutilsLogger) -> None:
        self._publisher = publisher
        self._stamp = stamp
        self._log = logger
        self._lock = threading.Lock()
        self._failed = False

    def listening(self) -> bool:
        """Return whether anyone would receive a tick now (a matched subscription)."""
        publisher = self._publisher
        if not getattr(publisher, 'is_activated', True):
            return False
        return int(publisher.get_subscription_count()) > 0

    def attach(self, watch: StepWatch, *, task: str, step: int, tool: str) -> None:
        """Publish each reading ``watch`` judges, about ``step`` of ``task`` sent to ``tool``."""
        labels = tuple(w.label for w in watch.tube.watched)
        watch.on_judged = partial(self._tick, watch, task, step, tool, labels)

    def _tick(self, watch: StepWatch, task: str, step: int, tool: str,
              labels: tuple[str, ...], series: str, at: float,
              failure: CheckFailure | None) -> None:
        try:
            if not self.listening():
                return
            tube = watch.tube
            self._publisher.publish(watch_tick(
                stamp=self._stamp(), task=task, step=step, tool=tool, judged=series, at=at,
                reading=tube.reading(), recorded=tube.recorded, labels=labels,
                tripped=failure is not None))
        except Exception as err:  # noqa: BLE001 - a viewer never stops the watch
            with self._lock:
                said, self._failed = self._failed, True
            if not said:
                self._log.error(f'~/watch: could not publish a tick of step {step} of '
                                f"'{task}' ({err!r}); the watch goes on (said once)")
