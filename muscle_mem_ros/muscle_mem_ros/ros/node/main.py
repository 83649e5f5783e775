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
Entry point of the ``behavior_cache`` executable.

Run it with a params file, with or without ``ros2 run``/``launch``::

    behavior_cache --ros-args --params-file config/behavior_cache.yaml
    python -m muscle_mem_ros.ros.node.main --ros-args -r __node:=cache --params-file my.yaml

The node is a managed (lifecycle) node. With ``autostart`` true (the default)
it is configured and activated here at once; with ``-p autostart:=false`` it
starts unconfigured and waits for a lifecycle manager or
``ros2 lifecycle set /muscle_mem configure`` (then ``activate``).

Exit codes: 0 after a clean shutdown (SIGINT or SIGTERM), 1 for a bad
configuration at autostart (the message, naming the parameter, is logged on
stderr before anything moves), 2 for any other startup failure. Without
autostart a bad configuration fails the ``configure`` transition instead, and
the node stays up, unconfigured.
"""

from __future__ import annotations

from collections.abc import Sequence
import sys

from typing import TYPE_CHECKING

from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.ros.rclfix.shutdown import (
    init_without_signal_handlers,
    ShutdownSignals,
    spin_until_shutdown,
)
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn

if TYPE_CHECKING:
    from muscle_mem_ros.ros.node.cache_node import BehaviorCacheNode

__all__ = ['EXECUTOR_THREADS', 'main']

EXECUTOR_THREADS = 3
"""Worker threads. A running task (or Replay call) blocks one while it waits on a
controller or the agent; proxied calls and subtasks are coroutines and block none (a
recording's post-snapshot wait, and a subtask's run, take a thread of their own). Few
threads: every callback is handed to the pool, and on two cores more threads only add
contention (measured: with 7, a replayed step cost about 0.5 ms more)."""

_SHUTDOWN_WAIT = 5.0


def main(args: Sequence[str] | None = None) -> int:
    """
    Start the behavior-cache node and spin until shut down; return the exit code.

    SIGINT and SIGTERM, once or many times, end it with 0 (see :mod:`..rclfix.shutdown`).

    :param args: Command-line arguments (default: ``sys.argv``).
    :return: The exit code.
    """
    from muscle_mem_ros.ros.node.cache_node import BehaviorCacheNode

    signals = ShutdownSignals()
    signals.install()
    init_without_signal_handlers(list(args) if args is not None else sys.argv)
    logger = rclpy.logging.get_logger('muscle_mem')
    try:
        try:
            node = BehaviorCacheNode()
        except ConfigError as err:
            logger.fatal(f'bad configuration: {err}')
            return 1
        except Exception as err:
            if signals.requested or not rclpy.ok():
                return 0  # SIGINT / SIGTERM while starting
            logger.fatal(f'cannot start: {err!r}')
            return 2
        if node.autostart:
            code = _autostart(node)
            if code is not None:
                node.destroy_node()
                return 0 if signals.requested or not rclpy.ok() else code
        executor = MultiThreadedExecutor(num_threads=EXECUTOR_THREADS)
        executor.add_node(node)
        code = 0
        try:
            error = spin_until_shutdown(executor, signals,
                                        stop=lambda: node.end_goals(_SHUTDOWN_WAIT),
                                        shutdown_wait=_SHUTDOWN_WAIT)
            if error is not None:
                logger.fatal(f'executor failed: {error!r}')
                code = 2
        finally:
            _shut_down(node)
        return code
    finally:
        rclpy.try_shutdown()
        signals.ignore_further()  # a signal during interpreter exit must not kill it


def _autostart(node: BehaviorCacheNode) -> int | None:
    """
    Configure and activate ``node``; return None when active, else the exit code.

    :param node: The freshly created node.
    :return: None (active), 1 (bad configuration, already logged), 2 (other failure).
    """
    if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
        return 1 if isinstance(node.config_error, ConfigError) else 2
    if node.trigger_activate() != TransitionCallbackReturn.SUCCESS:
        node.trigger_shutdown()
        return 2
    return None


def _shut_down(node: BehaviorCacheNode) -> None:
    """Take ``node`` through its shutdown transition (from any state) and destroy it."""
    try:
        node.trigger_shutdown()
    except Exception:  # already finalized (a lifecycle manager shut it down)
        node.close()
    node.destroy_node()


if __name__ == '__main__':
    sys.exit(main())
