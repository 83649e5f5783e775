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
Set fields of a ROS message by the leaf paths of :mod:`muscle_mem_ros.bindings.rules`.

A bound replay deserializes the stored goal, sets its bound leaves
(``target.pose.position.x``, ``points[0].positions[2]``) and sends it; every other
field keeps the recorded value, bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from muscle_mem_ros.bindings.rules import parse_path

__all__ = ['set_fields']


def set_fields(message: Any, values: Mapping[str, Any]) -> None:
    """
    Set ``values`` (leaf path -> value) on ``message`` in place, keeping each field's type.

    :param message: A ROS message instance.
    :param values: The new values; an integer field gets the value rounded.
    :raises ValueError: A path that does not name a numeric or string field of the message.
    """
    for path, value in values.items():
        parts = parse_path(path)
        target = message
        try:
            for part in parts[:-1]:
                target = target[part] if isinstance(part, int) else getattr(target, part)
            last = parts[-1]
            old = target[last] if isinstance(last, int) else getattr(target, last)
            if isinstance(old, bool) or not isinstance(old, (int, float, str)) and not hasattr(
                    old, 'dtype'):
                raise ValueError(f'{path} is not a number or a string')
            new = (str(value) if isinstance(old, str) else
                   int(round(value)) if isinstance(old, int) or _integer(old) else float(value))
            if isinstance(last, int):
                target[last] = new
            else:
                setattr(target, last, new)
        except (AttributeError, IndexError, KeyError, TypeError) as err:
            raise ValueError(f'{path}: no such field ({err})') from err


def _integer(value: Any) -> bool:
    """Return True for a NumPy integer scalar (elements of fixed-size integer arrays)."""
    kind = getattr(getattr(value, 'dtype', None), 'kind', '')
    return kind in 'iu' and kind != ''
