"""
Entry point of the ``behavior_cache`` executable.

Run it with a params file, with or without ``ros2 run``/``launch``::

    behavior_cache --ros-args --params-file config/behavior_cache.yaml
    python -m muscle_mem_ros.ros.main --ros-args -r __node:=cache --params-file my.yaml

Exit codes: 0 after a clean shutdown (SIGINT or SIGTERM), 1 for a bad
configuration (the message, naming the parameter, is logged on stderr before
anything moves), 2 for any other startup failure.
"""

from __future__ import annotations

from collections.abc import Sequence
import sys

from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.ros.shutdown import (
    init_without_signal_handlers,
    ShutdownSignals,
    spin_until_shutdown,
)
import rclpy
from rclpy.executors import MultiThreadedExecutor

__all__ = ['EXECUTOR_THREADS', 'main']

EXECUTOR_THREADS = 3
"""Worker threads. A running task (or Replay call) blocks one while it waits on a
controller or the agent; proxied calls are coroutines and block none (a
recording's post-snapshot wait blocks one briefly). Few threads: every callback
is handed to the pool, and on two cores more threads only add contention."""

_SHUTDOWN_WAIT = 5.0


def main(args: Sequence[str] | None = None) -> int:
    """
    Start the behavior-cache node and spin until shut down; return the exit code.

    SIGINT and SIGTERM, once or many times, end it with 0 (see :mod:`.shutdown`).

    :param args: Command-line arguments (default: ``sys.argv``).
    :return: The exit code.
    """
    from muscle_mem_ros.ros.node import BehaviorCacheNode

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
        executor = MultiThreadedExecutor(num_threads=EXECUTOR_THREADS)
        executor.add_node(node)
        code = 0
        try:
            error = spin_until_shutdown(executor, signals, stop=node.cancel_all,
                                        shutdown_wait=_SHUTDOWN_WAIT)
            if error is not None:
                logger.fatal(f'executor failed: {error!r}')
                code = 2
        finally:
            node.close()
            node.destroy_node()
        return code
    finally:
        rclpy.try_shutdown()
        signals.ignore_further()  # a signal during interpreter exit must not kill it


if __name__ == '__main__':
    sys.exit(main())
