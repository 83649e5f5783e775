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
Forward the ROS-free core's Python logging to a node's rclpy logger (and so to ``/rosout``).

The core (``muscle_mem_ros.*`` outside ``ros/``) logs with :mod:`logging` under
the ``muscle_mem_ros`` logger; it never imports rclpy. Inside the node,
:class:`LoggingBridge` is installed on that logger when the node is configured
and removed on cleanup, so a core warning (a store problem, a skipped step)
appears in the node's log and on ``/rosout`` like the node's own lines.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rclpy.impl.rcutils_logger import RcutilsLogger

__all__ = ['CORE_LOGGER', 'LoggingBridge']

CORE_LOGGER = 'muscle_mem_ros'
"""The Python logger every core module logs under (``logging.getLogger(__name__)``)."""


class LoggingBridge(logging.Handler):
    """
    A :class:`logging.Handler` that writes each record to an rclpy logger.

    :param ros_logger: The node's logger (``node.get_logger()``).
    :param name: The Python logger to forward (default: the core's).
    """

    def __init__(self, ros_logger: RcutilsLogger, *, name: str = CORE_LOGGER) -> None:
        super().__init__(level=logging.DEBUG)
        self._ros_logger = ros_logger
        self._name = name
        self._previous_level: int | None = None

    def install(self) -> None:
        """Attach to the Python logger; let INFO and above through (ROS filters further)."""
        logger = logging.getLogger(self._name)
        if self not in logger.handlers:
            logger.addHandler(self)
            self._previous_level = logger.level
            if logger.getEffectiveLevel() > logging.INFO:
                logger.setLevel(logging.INFO)

    def remove(self) -> None:
        """Detach from the Python logger and restore its level."""
        logger = logging.getLogger(self._name)
        if self in logger.handlers:
            logger.removeHandler(self)
            if self._previous_level is not None:
                logger.setLevel(self._previous_level)
            self._previous_level = None

    def emit(self, record: logging.LogRecord) -> None:
        """Write one record at the matching rclpy severity, naming the core module."""
        try:
            text = f'[{record.name}] {record.getMessage()}'
            if record.exc_info:
                text += '\n' + logging.Formatter().formatException(record.exc_info)
            if record.levelno >= logging.CRITICAL:
                self._ros_logger.fatal(text)
            elif record.levelno >= logging.ERROR:
                self._ros_logger.error(text)
            elif record.levelno >= logging.WARNING:
                self._ros_logger.warning(text)
            elif record.levelno >= logging.INFO:
                self._ros_logger.info(text)
            else:
                self._ros_logger.debug(text)
        except Exception:  # logging must never raise into the core
            self.handleError(record)
