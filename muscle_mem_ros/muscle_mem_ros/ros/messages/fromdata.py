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
Build a ROS message from data (a goal as a behavior tree document writes it).

The inverse of :func:`~.introspection.message_to_json`: nested maps become nested
messages, lists of maps sequences of messages, ``'nan'``/``'inf'`` floats again.
A field the type does not have, or a value of the wrong kind, is an error naming
the field's path, never a silently default field.
"""

from __future__ import annotations

import re
from typing import Any

from muscle_mem_ros.ros.messages.introspection import _message_class

__all__ = ['message_from_data']

_NESTED = re.compile(r'^(?:sequence<)?([a-z][a-z0-9_]*/(?:msg/)?[A-Z][A-Za-z0-9]*)')


def message_from_data(cls: Any, data: Any, *, path: str = '') -> Any:
    """
    Return a ``cls`` message with the fields in ``data`` set (others keep their defaults).

    :raises ValueError: a field ``cls`` does not have, or a value it cannot hold (the
        message names the field's path).
    """
    if not isinstance(data, dict):
        raise ValueError(f'{path or "the goal"}: not a map of fields')
    fields = cls.get_fields_and_field_types()
    message = cls()
    for key, value in data.items():
        where = f'{path}.{key}' if path else str(key)
        if key not in fields:
            raise ValueError(f'{where}: {cls.__name__} has no such field')
        type_str = fields[key]
        try:
            setattr(message, key, _value(type_str, value, where))
        except (AssertionError, TypeError, ValueError, OverflowError) as err:
            if isinstance(err, ValueError) and str(err).startswith(where):
                raise
            raise ValueError(f'{where}: {value!r} is not a {type_str} ({err})') from err
    return message


def _value(type_str: str, value: Any, where: str) -> Any:
    nested = _NESTED.match(type_str)
    if nested is not None:
        sub = _message_class(nested.group(1))
        if isinstance(value, list):
            return [message_from_data(sub, v, path=f'{where}[{i}]') for i, v in enumerate(value)]
        return message_from_data(sub, value, path=where)
    base = _BASE.sub('', type_str.replace('sequence<', '').rstrip('>'))
    many = type_str.startswith('sequence<') or type_str.endswith(']')
    if many != isinstance(value, list):
        raise ValueError(f'{where}: {value!r} is not a {type_str}')
    if many:
        return [_scalar(base, v, f'{where}[{i}]') for i, v in enumerate(value)]
    return _scalar(base, value, where)


_BASE = re.compile(r'(\[\d*\]|<=\d+|, ?\d+)$')
_FLOATS = frozenset({'float', 'double', 'float32', 'float64'})
_INTEGERS = frozenset({'int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'uint64',
                       'byte', 'char', 'octet'})


def _scalar(base: str, value: Any, where: str) -> Any:
    if base in _FLOATS:
        if isinstance(value, str) and value in ('nan', 'inf', '-inf'):
            return float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif base in _INTEGERS:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif base == 'boolean':
        if isinstance(value, bool):
            return value
    elif base.startswith(('string', 'wstring')):
        if isinstance(value, str):
            return value
    else:
        return value  # a type this reader does not know: left to the serializer
    raise ValueError(f'{where}: {value!r} is not a {base}')
