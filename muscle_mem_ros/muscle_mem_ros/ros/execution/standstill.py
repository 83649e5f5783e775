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
A robot that did not stop is remembered until it is seen at rest or a person says it is.

A stop that ends NOT_STOPPED (:mod:`..capture.stopping`: a goal still running, a server
gone, sensors that never showed rest) ends its task ABORTED without asking the agent. That
alone would let the next task, a ``~/replay`` call or the agent's next proxied goal
command a robot that may still be moving. So the node keeps the failure here
(:class:`Standstill`, noted by every proxy whose stop failed) and, while it is kept,
refuses each of those with a message naming the server that did not stop
(:meth:`Standstill.refusal`). It is let go when:

* the node's sensors see the robot at rest: every configured sensor heard and still over
  ``rest_window`` (:class:`~muscle_mem_ros.checks.rest.Rest`), judged from the moment the
  stop failed, by a thread of its own while the node is active; a sensor that says nothing
  is never at rest, so a robot the cache cannot see waits for a person; or
* a person confirms it (``~/confirm_standstill``, ``muscle-mem standstill --who NAME``),
  with a name, which the log and a ``STOPPED`` event keep, as approvals keep who approved.

``/diagnostics`` shows it (``robot``: ``at rest``, or ``not stopped: ...`` at ERROR). It
lives as long as the node process: a deactivate does not forget it (the robot did not
stop because the node was told to stop serving).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
import threading
import time
from typing import Any

from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.checks.rest import DEFAULT_REST_WINDOW, Rest
from muscle_mem_ros.records import SensorSpec
from muscle_mem_ros.ros.execution.events import EventSink
from muscle_mem_ros.ros.node.nodeconfig import StopRule

__all__ = ['Standstill', 'Stuck']

Capture = Callable[[Collection[str]], Any]
"""Returns a snapshot of the named sensors (the sensor hub's ``capture``)."""


@dataclass(frozen=True)
class Stuck:
    """
    One server whose goal the cache could not stop.

    :ivar server: The action (or service) server.
    :ivar reason: Why the stop failed (the stop's report).
    :ivar at: Monotonic time it was noted.
    """

    server: str
    reason: str
    at: float


class Standstill:
    """
    Whether the robot is known to be at rest after the cache's stops (module docstring).

    :param logger: Where each change is logged (a warning).
    :param sink: Publishes each change as a ``STOPPED`` event of no task (the node's).
    """

    def __init__(self, *, logger: Any = None, sink: EventSink | None = None) -> None:
        self._logger = logger
        self._sink = sink
        self._lock = threading.Lock()
        self._stuck: dict[str, Stuck] = {}
        self._capture: Capture | None = None
        self._specs: tuple[SensorSpec, ...] = ()
        self._window = DEFAULT_REST_WINDOW
        self._period = 0.05
        self._watcher: threading.Thread | None = None
        self._wake = threading.Event()

    def watch(self, capture: Capture, rule: StopRule, rate: float) -> None:
        """
        Let the sensors see the rest (activate): a robot stuck is watched from now on.

        :param capture: The sensor hub's ``capture``.
        :param rule: The rest sensors (all the node's) and ``rest_window``.
        :param rate: Looks per second (``watch_rate``).
        """
        with self._lock:
            self._capture, self._specs = capture, tuple(rule.specs)
            self._window, self._period = rule.window, 1.0 / rate
        self._start()

    def unwatch(self) -> None:
        """Stop looking (deactivate: the sensors go); what is stuck stays stuck."""
        with self._lock:
            self._capture = None
            watcher, self._watcher = self._watcher, None
        self._wake.set()
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(2.0)

    def _say(self, text: str) -> None:
        if self._logger is not None:
            self._logger.warning(text)
        if self._sink is not None:
            self._sink(kind=CacheEvent.STOPPED, task='', step=-1, detail=text)

    def handle(self, request: Any, response: Any) -> Any:
        """Serve ``~/confirm_standstill`` (muscle_mem_interfaces/srv/ConfirmStandstill)."""
        response.success, response.message = self.confirm(request.who)
        return response

    def not_stopped(self, server: str, reason: str) -> None:
        """Note that a goal on ``server`` did not stop (``reason``: the stop's report)."""
        with self._lock:
            self._stuck[server] = Stuck(server, reason, time.monotonic())
        if self._logger is not None:
            self._logger.error(f'{self.refusal()}')
        self._wake.set()  # the rest is judged from now
        self._start()

    @property
    def stuck(self) -> tuple[Stuck, ...]:
        """Return the servers whose goals did not stop, oldest first (empty: at rest)."""
        with self._lock:
            return tuple(sorted(self._stuck.values(), key=lambda s: s.at))

    def refusal(self) -> str:
        """Return why nothing may command the robot now ('' when nothing is stuck)."""
        stuck = self.stuck
        if not stuck:
            return ''
        servers = ', '.join(s.server for s in stuck)
        return (f'the robot did not stop ({servers}: {stuck[-1].reason}): nothing is sent '
                'until its sensors see it at rest or a person confirms it '
                '(~/confirm_standstill, muscle-mem standstill --who NAME)')

    def status(self) -> str:
        """Return the ``/diagnostics`` value: 'at rest', or 'not stopped: <servers and why>'."""
        stuck = self.stuck
        if not stuck:
            return 'at rest'
        return 'not stopped: ' + '; '.join(f'{s.server}: {s.reason}' for s in stuck)

    def confirm(self, who: str) -> tuple[bool, str]:
        """
        Let a person confirm the robot at rest; return (done, what to answer).

        :param who: Who confirms (required: kept in the log and the event).
        """
        who = who.strip()
        if not who:
            return False, 'who confirms is required (a name, as an approval has)'
        servers = self._release()
        if not servers:
            return False, 'nothing to confirm: no stop failed (the robot is not held)'
        text = (f'robot confirmed at rest by {who} ({", ".join(servers)} did not stop): '
                'tasks, replays and proxied goals are sent again')
        self._say(text)
        return True, text

    def _release(self) -> list[str]:
        """Forget every stuck server; return their names."""
        with self._lock:
            servers = [s.server for s in sorted(self._stuck.values(), key=lambda s: s.at)]
            self._stuck.clear()
        return servers

    def _start(self) -> None:
        """Start the watcher thread if there is something to watch and nobody watches."""
        with self._lock:
            if self._capture is None or not self._stuck or self._watcher is not None:
                return
            self._watcher = threading.Thread(target=self._watch, name='standstill',
                                             daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        """Judge the rest until it is seen, a person confirms it, or the sensors go."""
        rest: Rest | None = None
        while True:
            with self._lock:
                capture, specs, stuck = self._capture, self._specs, bool(self._stuck)
                if capture is None or not stuck or self._watcher is not threading.current_thread():
                    if self._watcher is threading.current_thread():
                        self._watcher = None
                    return
            if self._wake.is_set() or rest is None:
                self._wake.clear()
                rest = Rest(sensors=specs, since=time.monotonic(), window=self._window) \
                    if specs else None
            if rest is not None:
                try:
                    rest.add(capture(rest.sensors))
                except Exception:  # noqa: BLE001 - a sensor that cannot be read shows no rest
                    pass
                if rest.at_rest(time.monotonic()):
                    servers = self._release()
                    if servers:
                        self._say(f'robot seen at rest ({", ".join(sorted(rest.sensors))} '
                                  f'still for {self._window:g} s) after {", ".join(servers)} '
                                  'did not stop: tasks, replays and proxied goals are sent '
                                  'again')
                    rest = None
            self._wake.wait(self._period)
