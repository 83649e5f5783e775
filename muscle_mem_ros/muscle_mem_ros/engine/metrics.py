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
What an engine counts: decisions (:class:`EngineStats`) and timings (:class:`Metrics`).

``Metrics`` has the shape of the original muscle-mem ``engine.metrics``: off by
default (``enable()`` turns it on); ``report()`` returns the figures and logs
them instead of printing them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
import logging
import threading
import time

__all__ = ['EngineStats', 'Metrics']

_log = logging.getLogger(__name__)


class Metrics:
    """Count and time named phases of engine calls ('lookup', 'capture', 'compare', ...)."""

    def __init__(self) -> None:
        self.enabled = False
        self._lock = threading.Lock()
        self._data: dict[str, list[float]] = {}

    def enable(self) -> None:
        """Start collecting."""
        self.enabled = True

    def disable(self) -> None:
        """Stop collecting (figures so far are kept)."""
        self.enabled = False

    def reset(self) -> None:
        """Forget every figure."""
        with self._lock:
            self._data.clear()

    @contextmanager
    def measure(self, *path: str) -> Iterator[None]:
        """Time the body under the name ``'/'.join(path)`` when enabled."""
        if not self.enabled:
            yield
            return
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            with self._lock:
                entry = self._data.setdefault('/'.join(path), [0.0, 0])
                entry[0] += elapsed
                entry[1] += 1

    def report(self) -> dict[str, dict[str, float]]:
        """Return ``{name: {'total_time', 'count', 'avg_time'}}`` (seconds) and log it."""
        with self._lock:
            out = {name: {'total_time': total, 'count': count,
                          'avg_time': total / count if count else 0.0}
                   for name, (total, count) in sorted(self._data.items())}
        if self.enabled:
            for name, fig in out.items():
                _log.info('%s: %d calls, %.6f s total, %.6f s avg', name, fig['count'],
                          fig['total_time'], fig['avg_time'])
        return out


@dataclass(frozen=True)
class EngineStats:
    """
    Counters of an engine since it was created.

    :ivar calls: Engine calls.
    :ivar hits: Calls fully served from the cache.
    :ivar misses: Calls that needed the agent (including handoffs).
    :ivar handoffs: Misses after at least one replayed step.
    :ivar steps_replayed: Tool calls replayed.
    :ivar steps_recorded: Tool calls recorded while the agent ran.
    :ivar check_errors: Captures or compares that raised (candidate skipped).
    :ivar tool_errors: Replayed tool calls that raised (handed off to the agent).
    :ivar record_errors: Steps that could not be stored (run not learned).
    :ivar steps_rebound: Replayed tool calls with arguments recomputed by bindings
        (what was substituted: :attr:`Engine.substitutions`).
    """

    calls: int = 0
    hits: int = 0
    misses: int = 0
    handoffs: int = 0
    steps_replayed: int = 0
    steps_recorded: int = 0
    check_errors: int = 0
    tool_errors: int = 0
    record_errors: int = 0
    steps_rebound: int = 0
