"""Declare and check the sim nodes' ROS parameters, naming the parameter in every error.

Numbers are declared with dynamic typing so ``-p rtf:=2`` (an integer on the command line)
is accepted as 2.0 instead of failing deep inside rclpy with a type exception.
"""

from __future__ import annotations

import math
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node

__all__ = ['declare_int', 'declare_number', 'declare_string']

_DYNAMIC = ParameterDescriptor(dynamic_typing=True)


def declare_number(
    node: Node, name: str, default: float, *, minimum: float | None = None,
    exclusive: bool = False,
) -> float:
    """Declare a numeric parameter and return its value as a float.

    Args:
        node: The node declaring it.
        name: Parameter name.
        default: Value when not set.
        minimum: Smallest accepted value, or None.
        exclusive: True if ``minimum`` itself is refused.

    Raises:
        ValueError: not a finite number in range; the message names the parameter.
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
