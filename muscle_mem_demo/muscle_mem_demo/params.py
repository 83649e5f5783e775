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
Declare and check the sim nodes' ROS parameters, naming the parameter in every error.

The validation is the cache's own (:class:`muscle_mem_ros.ros.node.parameters.ParameterReader`):
one validator, and every sim parameter gets a descriptor (type, range, read-only) too.

``spin_node`` is the sim nodes' shared ``main``: a bad parameter (a ``ValueError`` from the
declare helpers) becomes exit code 1 with the message logged, like the cache's own main.

An integer given for a number (``-p rtf:=2`` on the command line) is accepted as 2.0
instead of failing deep inside rclpy with a type exception.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
import sys
from typing import TypeVar

from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.ros.node.parameters import ParameterReader
from muscle_mem_ros.ros.rclfix.shutdown import (
    init_without_signal_handlers,
    ShutdownSignals,
    spin_until_shutdown,
)
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

__all__ = ['declare_int', 'declare_number', 'declare_string', 'spin_node']

N = TypeVar('N', bound=Node)


def declare_number(
    node: Node, name: str, default: float, *, minimum: float | None = None,
    exclusive: bool = False, description: str = '', read_only: bool = True,
) -> float:
    """
    Declare a numeric parameter (read-only, with its range) and return its value as a float.

    :param node: The node declaring it.
    :param name: Parameter name.
    :param default: Value when not set.
    :param minimum: Smallest accepted value, or None.
    :param exclusive: True if ``minimum`` itself is refused.
    :param description: For the parameter's descriptor.
    :param read_only: False: one the node may be given while it runs (it applies it itself).
    :raises ValueError: not a finite number in range; the message names the parameter.
    """
    with _as_value_error(name):
        return ParameterReader(node=node, read_only=read_only).number(
            name, default, minimum=minimum, exclusive=exclusive, description=description)


def declare_int(node: Node, name: str, default: int, *, minimum: int | None = None,
                description: str = '') -> int:
    """Declare an integer parameter; ValueError naming it when not an integer in range."""
    with _as_value_error(name):
        return ParameterReader(node=node).integer(
            name, default, minimum=minimum, description=description)


def declare_string(node: Node, name: str, default: str, *, description: str = '') -> str:
    """Declare a string parameter; ValueError naming it when not a non-empty string."""
    with _as_value_error(name):
        return ParameterReader(node=node).string(
            name, default, empty=False, description=description)


def declare_bool(node: Node, name: str, default: bool, *, description: str = '') -> bool:
    """Declare a boolean parameter; ValueError naming it when not a boolean."""
    with _as_value_error(name):
        return ParameterReader(node=node).boolean(name, default, description=description)


@contextmanager
def _as_value_error(name: str) -> Iterator[None]:
    """Turn the shared validator's ConfigError into the ValueError :func:`spin_node` expects."""
    try:
        yield
    except ConfigError as err:
        reason = str(err).removeprefix(f'{name}: ')
        raise ValueError(f'parameter {name!r} {reason}') from err


def spin_node(
    make_node: Callable[[], N], *, name: str, args: list[str] | None = None,
    on_exit: Callable[[N], None] | None = None, num_threads: int = 4,
) -> int:
    """
    Create a node, spin it on a multi-threaded executor until interrupted, clean up.

    :param make_node: Builds the node (after ``rclpy.init``); raises ValueError on a bad parameter.
    :param name: Logger name for the startup error.
    :param args: Command-line arguments for ``rclpy.init``.
    :param on_exit: Called with the node after a shutdown signal, before the executor stops and
        the node is destroyed: end its running work and stop its threads.
    :param num_threads: Threads of the executor.
    :return: The exit code: 0 (also after SIGINT or SIGTERM, however often they come), 1 for a bad
        parameter, 2 if the executor failed.
    """
    signals = ShutdownSignals()
    signals.install()
    init_without_signal_handlers(args if args is not None else sys.argv)
    node: N | None = None
    code = 0
    try:
        node = make_node()
        executor = MultiThreadedExecutor(num_threads=num_threads)
        executor.add_node(node)
        built = node

        def stop() -> None:
            if on_exit is not None:
                on_exit(built)

        error = spin_until_shutdown(executor, signals, stop=stop)
        if error is not None:
            rclpy.logging.get_logger(name).error(f'executor failed: {error!r}')
            code = 2
    except ValueError as err:
        rclpy.logging.get_logger(name).error(str(err))
        code = 1
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
        signals.ignore_further()  # a signal during interpreter exit must not kill it
    return code
