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
Read, validate and describe ROS parameters: the one validator of the cache node and the sim.

Every read declares the parameter with a full ``ParameterDescriptor``
(description, type, a ``FloatingPointRange`` for numbers, ``read_only``), so
``ros2 param describe`` tells the truth, and every error is a
:class:`~muscle_mem_ros.errors.ConfigError` whose message starts with the
parameter's name.

Parameters given in a params file or on the command line are declared by rclpy
itself when the node is created with
``automatically_declare_parameters_from_overrides`` (the cache's
``NODE_OPTIONS``), with no descriptor. rclpy 9.1.2 has no public way to attach
a descriptor to a declared parameter, nor to read the overrides before they are
declared (only the private ``node._parameter_overrides``). So the reader takes
the declared value through the public API, validates and converts it (an
integer given for a number becomes a float), then undeclares the parameter and
declares it again with its descriptor and the validated value
(``ignore_override=True``: the value read, which may have been set after start,
wins over the file). A parameter already declared with a descriptor (a second
configure of a lifecycle node) is read as it is: read-only parameters cannot be
undeclared, and their value cannot have changed.
"""

from __future__ import annotations

from collections.abc import Callable
import math
from typing import Any

from muscle_mem_ros.errors import ConfigError
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, ParameterType
from rclpy.node import Node as RosNode

__all__ = ['ParameterReader', 'number_range']

_NO_VALUE = object()


def number_range(minimum: float | None, maximum: float | None) -> list[FloatingPointRange]:
    """Return the descriptor range for ``[minimum, maximum]`` (open ends are infinite)."""
    if minimum is None and maximum is None:
        return []
    low = -math.inf if minimum is None else float(minimum)
    high = math.inf if maximum is None else float(maximum)
    return [FloatingPointRange(from_value=low, to_value=high, step=0.0)]


class ParameterReader:
    """
    Declare, read, validate and describe one node's parameters.

    :param node: The node whose parameters are read.
    :param read_only: Default ``read_only`` of the descriptors (one call may override it).
    :param describe: Returns a parameter's description when a read gives none.
    """

    def __init__(self, *, node: RosNode, read_only: bool = True,
                 describe: Callable[[str], str] | None = None) -> None:
        self._node = node
        self._describe_name = describe or (lambda _name: '')
        self._read_only = read_only
        self.declared: set[str] = set()

    # -- raw access ------------------------------------------------------------------------

    def get(self, name: str, default: Any, *, description: str = '',
            read_only: bool | None = None) -> Any:
        """
        Return the value of ``name`` (``default`` when not given), declared with dynamic typing.

        For values whose type varies (one number or a list) or that the caller
        validates itself; the descriptor's type is that of the value.
        """
        value = self._raw(name, default)
        self._describe(name, value, ParameterType.PARAMETER_NOT_SET, description, read_only)
        return default if value is None else value

    def optional(self, name: str, *, description: str = '',
                 read_only: bool | None = None) -> Any:
        """Return the value of ``name`` if it was given, else None (and declare nothing)."""
        if not self._node.has_parameter(name):
            return None
        return self.get(name, None, description=description, read_only=read_only)

    def raw(self, name: str, default: Any) -> Any:
        """Return the value of ``name`` (``default`` when not given), validated by the caller."""
        return self._raw(name, default)

    def describe(self, name: str, value: Any, kind: int, *, description: str = '',
                 minimum: float | None = None, read_only: bool | None = None) -> None:
        """
        Declare ``name`` with its descriptor after the caller validated ``value``.

        :param name: Parameter name.
        :param value: The validated value (as it will be declared).
        :param kind: Its ``ParameterType``.
        :param description: For the descriptor.
        :param minimum: Lower bound of its range (informational for arrays), or None.
        :param read_only: Overrides the reader's default.
        """
        self._describe(name, value, kind, description, read_only,
                       ranges=number_range(minimum, None) if minimum is not None else None)

    # -- typed access ----------------------------------------------------------------------

    def string(self, name: str, default: str | None = None, *, description: str = '',
               read_only: bool | None = None, empty: bool = True) -> str:
        """
        Return a string parameter.

        :param name: Parameter name.
        :param default: Value when not given; None: required.
        :param description: For the descriptor.
        :param read_only: Overrides the reader's default.
        :param empty: False to refuse the empty string.
        :raises ConfigError: missing, not a string, or empty when refused.
        """
        value = self._raw(name, default)
        if value is None:
            raise ConfigError(f'{name}: required')
        if not isinstance(value, str):
            raise ConfigError(f'{name}: must be a string, got {value!r}')
        if not empty and not value:
            raise ConfigError(f'{name}: must be a non-empty string, got {value!r}')
        self._describe(name, value, ParameterType.PARAMETER_STRING, description, read_only)
        return value

    def number(self, name: str, default: float, *, description: str = '',
               minimum: float | None = 0.0, exclusive: bool = True,
               maximum: float | None = None, read_only: bool | None = None) -> float:
        """
        Return a finite floating-point parameter (an integer is accepted) within bounds.

        :param name: Parameter name.
        :param default: Value when not given.
        :param description: For the descriptor.
        :param minimum: Smallest accepted value (None: no bound). Default: > 0.
        :param exclusive: True if ``minimum`` itself is refused.
        :param maximum: Largest accepted value (None: no bound).
        :param read_only: Overrides the reader's default.
        :raises ConfigError: not a finite number in range.
        """
        value = self._raw(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f'{name}: must be a number, got {value!r}')
        number = float(value)
        if not math.isfinite(number):
            raise ConfigError(f'{name}: must be a finite number, got {value!r}')
        if minimum is not None and (number < minimum or (exclusive and number == minimum)):
            bound = f'> {minimum:g}' if exclusive else f'>= {minimum:g}'
            raise ConfigError(f'{name}: must be a finite number {bound}, got {value!r}')
        if maximum is not None and number > maximum:
            raise ConfigError(f'{name}: must be <= {maximum:g}, got {value!r}')
        self._describe(name, number, ParameterType.PARAMETER_DOUBLE, description, read_only,
                       ranges=number_range(minimum, maximum))
        return number

    def integer(self, name: str, default: int, *, description: str = '',
                minimum: int | None = None, read_only: bool | None = None) -> int:
        """Return an integer parameter; ConfigError naming it when not an integer in range."""
        value = self._raw(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f'{name}: must be an integer, got {value!r}')
        if minimum is not None and value < minimum:
            raise ConfigError(f'{name}: must be >= {minimum}, got {value!r}')
        self._describe(name, value, ParameterType.PARAMETER_INTEGER, description, read_only)
        return value

    def boolean(self, name: str, default: bool, *, description: str = '',
                read_only: bool | None = None) -> bool:
        """Return a boolean parameter; ConfigError naming it when not true or false."""
        value = self._raw(name, default)
        if not isinstance(value, bool):
            raise ConfigError(f'{name}: must be true or false, got {value!r}')
        self._describe(name, value, ParameterType.PARAMETER_BOOL, description, read_only)
        return value

    # -- declaration -----------------------------------------------------------------------

    def _raw(self, name: str, default: Any) -> Any:
        """Return the declared value of ``name``, or ``default`` when it was not given."""
        self.declared.add(name)
        if not self._node.has_parameter(name):  # not given, or a node without auto-declaration
            self._node.declare_parameter(
                name, default, ParameterDescriptor(name=name, dynamic_typing=True))
        value = self._node.get_parameter(name).value
        return default if value is None else value

    def _describe(self, name: str, value: Any, kind: int, description: str,
                  read_only: bool | None, *, ranges: list[FloatingPointRange] | None = None,
                  ) -> None:
        """Declare ``name`` with its descriptor and the validated ``value`` (see module doc)."""
        node = self._node
        read_only = self._read_only if read_only is None else read_only
        if node.has_parameter(name):
            current = node.describe_parameter(name)
            if current.read_only or current.description:
                return  # described by an earlier read
            node.undeclare_parameter(name)
        descriptor = ParameterDescriptor(
            name=name, description=description or self._describe_name(name), read_only=read_only,
            dynamic_typing=kind == ParameterType.PARAMETER_NOT_SET,
            floating_point_range=ranges or [],
        )
        if kind != ParameterType.PARAMETER_NOT_SET:
            descriptor.type = kind
        if value is None:
            return  # nothing to declare: an optional parameter that was not given
        node.declare_parameter(name, value, descriptor, ignore_override=True)
