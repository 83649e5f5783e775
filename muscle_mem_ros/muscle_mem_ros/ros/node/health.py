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
Store health: a write that failed degrades the store, the next one that succeeds heals it.

A task must not fail because the cache could not write down what happened:
a replay that moved the robot correctly is a success even when its counters
cannot be stored (a full disk, a read-only file), and a new task still goes
to the agent when its steps cannot be recorded. Those writes go through
:meth:`StoreHealth.bookkeep`: a failure is logged, reported by the caller as
"not stored" (result message and an ``ERROR`` event), and shown on
``/diagnostics`` as a degraded store, with the error, until a later write
succeeds (space is back).
"""

from __future__ import annotations

from collections.abc import Callable
import threading
from typing import Protocol, TypeVar

from muscle_mem_ros.errors import MuscleMemError
from muscle_mem_ros.store import Store
from rclpy.impl.rcutils_logger import RcutilsLogger

__all__ = ['HealthLog', 'report_incomplete', 'StoreHealth']

T = TypeVar('T')


class HealthLog(Protocol):
    """Where store health is logged: the node's rclpy logger, or a :class:`logging.Logger`."""

    def info(self, message: str, /) -> object:
        """Log ``message`` at INFO."""

    def error(self, message: str, /) -> object:
        """Log ``message`` at ERROR."""


class StoreHealth:
    """
    Whether the last store write failed, and why (thread-safe).

    :param logger: Where failures and the recovery are logged (an rclpy logger).
    """

    def __init__(self, *, logger: HealthLog) -> None:
        self._lock = threading.Lock()
        self._error = ''
        self._log = logger

    @property
    def error(self) -> str:
        """Return the last write's error while degraded, '' while healthy."""
        return self._error

    def failed(self, what: str, err: Exception) -> str:
        """
        Note a failed write.

        :param what: What was being written, for the log ('replay counters').
        :param err: The store's error.
        :return: The error text.
        """
        text = str(err)
        with self._lock:
            self._error = text
        self._log.error(f'store degraded: {what} not stored: {text}')
        return text

    def succeeded(self) -> None:
        """Note a successful write: the store is healthy again."""
        with self._lock:
            error, self._error = self._error, ''
        if error:
            self._log.info('store healthy again: a write succeeded')

    def bookkeep(self, what: str, write: Callable[[], T]) -> tuple[T | None, str]:
        """
        Run a write that must not fail the task.

        :param what: What is written, for the log.
        :param write: The write.
        :return: Its result and '' on success, else None and '<what>: <error>'.
        """
        try:
            value = write()
        except MuscleMemError as err:
            return None, f'{what}: {self.failed(what, err)}'
        self.succeeded()
        return value, ''


def report_incomplete(store: Store, logger: RcutilsLogger, *, retention: float) -> None:
    """
    Log the recordings an earlier run abandoned (never replayed), and note live ones.

    :param store: The store just opened.
    :param logger: The node's logger.
    :param retention: ``abandoned_recording_retention``, for the purge message.
    """
    purged = getattr(store, 'purged', 0)
    if purged:
        logger.info(f'store: purged {purged} abandoned recording(s) older than '
                    f'{retention:g} s')
    try:
        unfinished = store.incomplete_recordings()
    except (MuscleMemError, AttributeError):
        return
    for info in unfinished:
        if info.live:
            logger.info(f"recording {info.id} of task '{info.task}' is in progress in another "
                        f'process ({info.owner})')
            continue
        logger.warning(
            f"recording {info.id} of task '{info.task}' ({info.step_count} steps) was "
            f'never finished (the process stopped during it: {info.owner}); it is never '
            'replayed, and purged after abandoned_recording_retention or by the forget '
            'service (abandoned_recordings: true)'
        )
