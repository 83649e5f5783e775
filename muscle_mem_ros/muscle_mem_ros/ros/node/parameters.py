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

Which parameters the cache node has (names, layout, descriptions) is
:mod:`.paramnames`, the cache's alone; this reader serves any node's parameters.
"""

from __future__ import annotations

from collections.abc import Callable
import math
from typing import Any

from muscle_mem_ros.settings import Kind, SettingsReader
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, ParameterType
from rclpy.node import Node as RosNode

__all__ = ['ParameterReader', 'number_range']


def number_range(minimum: float | None, maximum: float | None) -> list[FloatingPointRange]:
    """Return the descriptor range for ``[minimum, maximum]`` (open ends are infinite)."""
    if minimum is None and maximum is None:
        return []
    low = -math.inf if minimum is None else float(minimum)
    high = math.inf if maximum is None else float(maximum)
    return [FloatingPointRange(from_value=low, to_value=high, step=0.0)]


_KINDS = {
    Kind.ANY: ParameterType.PARAMETER_NOT_SET,
    Kind.STRING: ParameterType.PARAMETER_STRING,
    Kind.DOUBLE: ParameterType.PARAMETER_DOUBLE,
    Kind.INTEGER: ParameterType.PARAMETER_INTEGER,
    Kind.BOOL: ParameterType.PARAMETER_BOOL,
    Kind.DOUBLE_ARRAY: ParameterType.PARAMETER_DOUBLE_ARRAY,
}
"""The ROS parameter type each kind of setting is declared with."""


class ParameterReader(SettingsReader):
    """
    Declare, read, validate and describe one node's parameters.

    The validation is the settings schema's (:class:`~muscle_mem_ros.settings.SettingsReader`,
    shared with the ``muscle-mem`` command); this class reads the values from the node and
    declares each parameter with its descriptor.

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

    def given(self, name: str) -> bool:
        """Return True when the parameter has a value from the overrides (is declared)."""
        return bool(self._node.has_parameter(name))

    def _raw(self, name: str, default: Any) -> Any:
        """Return the declared value of ``name``, or ``default`` when it was not given."""
        self.declared.add(name)
        if not self._node.has_parameter(name):  # not given, or a node without auto-declaration
            self._node.declare_parameter(
                name, default, ParameterDescriptor(name=name, dynamic_typing=True))
        value = self._node.get_parameter(name).value
        return default if value is None else value

    def _describe(self, name: str, value: Any, kind: Kind, description: str,
                  read_only: bool | None, minimum: float | None = None,
                  maximum: float | None = None) -> None:
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
            dynamic_typing=kind is Kind.ANY,
            floating_point_range=number_range(minimum, maximum),
        )
        if kind is not Kind.ANY:
            descriptor.type = _KINDS[kind]
        if value is None:
            return  # nothing to declare: an optional parameter that was not given
        node.declare_parameter(name, value, descriptor, ignore_override=True)
