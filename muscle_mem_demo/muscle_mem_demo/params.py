"""
Declare and check the sim nodes' ROS parameters, naming the parameter in every error.

``spin_node`` is the sim nodes' shared ``main``: a bad parameter (a ``ValueError`` from the
declare helpers) becomes exit code 1 with the message logged, like the cache's own main.

Numbers are declared with dynamic typing so ``-p rtf:=2`` (an integer on the command line)
is accepted as 2.0 instead of failing deep inside rclpy with a type exception.
"""

from __future__ import annotations

from collections.abc import Callable
import math
import sys
from typing import Any, TypeVar

from muscle_mem_ros.ros.shutdown import (
    init_without_signal_handlers,
    ShutdownSignals,
    spin_until_shutdown,
)
from rcl_interfaces.msg import ParameterDescriptor
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

__all__ = ['declare_int', 'declare_number', 'declare_string', 'spin_node']

N = TypeVar('N', bound=Node)

_DYNAMIC = ParameterDescriptor(dynamic_typing=True)


def declare_number(
    node: Node, name: str, default: float, *, minimum: float | None = None,
    exclusive: bool = False,
) -> float:
    """
    Declare a numeric parameter and return its value as a float.

    :param node: The node declaring it.
    :param name: Parameter name.
    :param default: Value when not set.
    :param minimum: Smallest accepted value, or None.
    :param exclusive: True if ``minimum`` itself is refused.
    :raises ValueError: not a finite number in range; the message names the parameter.
    """
    value = _declare(node, name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f'parameter {name!r} must be a number, got {value!r}')
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f'parameter {name!r} must be finite, got {value!r}')
    if minimum is not None and (number < minimum or (exclusive and number == minimum)):
        bound = f'> {minimum}' if exclusive else f'>= {minimum}'
        raise ValueError(f'parameter {name!r} must be {bound}, got {value!r}')
    return number


def declare_int(node: Node, name: str, default: int, *, minimum: int | None = None) -> int:
    """Declare an integer parameter; ValueError naming it when not an integer in range."""
    value = _declare(node, name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f'parameter {name!r} must be an integer, got {value!r}')
    if minimum is not None and value < minimum:
        raise ValueError(f'parameter {name!r} must be >= {minimum}, got {value!r}')
    return value


def declare_string(node: Node, name: str, default: str) -> str:
    """Declare a string parameter; ValueError naming it when not a non-empty string."""
    value = _declare(node, name, default)
    if not isinstance(value, str) or not value:
        raise ValueError(f'parameter {name!r} must be a non-empty string, got {value!r}')
    return value


def _declare(node: Node, name: str, default: Any) -> Any:
    return node.declare_parameter(name, default, _DYNAMIC).value


def spin_node(
    make_node: Callable[[], N], *, name: str, args: list[str] | None = None,
    on_exit: Callable[[N], None] | None = None,
) -> int:
    """
    Create a node, spin it on a multi-threaded executor until interrupted, clean up.

    :param make_node: Builds the node (after ``rclpy.init``); raises ValueError on a bad parameter.
    :param name: Logger name for the startup error.
    :param args: Command-line arguments for ``rclpy.init``.
    :param on_exit: Called with the node after a shutdown signal, before the executor stops and
        the node is destroyed: end its running work and stop its threads.
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
        executor = MultiThreadedExecutor(num_threads=4)
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
