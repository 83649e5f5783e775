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
When a server's answer counts as success: the status, and an optional rule on its fields.

A service answer counts as a success unless it has a boolean ``success`` field set to
false (``std_srvs/srv/SetBool``, ``Trigger``); an action result unless its goal did
not succeed. Many interfaces say "no" otherwise: ``nav_msgs/srv/GetPlan`` answers a
goal it cannot reach with an empty plan. A tool's rule says so:

* ``success_field``: a field path of the response (or action result), e.g. ``plan.poses``;
* ``success_when``: ``nonempty`` or ``empty`` (a list or string), ``true`` or ``false``
  (a boolean), or a number the field must equal (``error_code: 0`` is ``0``).

A call whose answer breaks the rule is a failed step: it is not recorded, and a replay
that gets it hands off to the agent. The rule is checked against the interface when
the node configures (a field that does not exist is a startup error).
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass
import math
from typing import Any

from muscle_mem_ros.bindings.rules import parse_path
from muscle_mem_ros.errors import ConfigError

__all__ = ['answered', 'parse_success', 'refusal_reason', 'SuccessRule']

_WORDS = ('nonempty', 'empty', 'true', 'false')


@dataclass(frozen=True)
class SuccessRule:
    """
    A field of the answer and the condition it must meet.

    :ivar field: Field path in the response or result.
    :ivar when: ``nonempty``, ``empty``, ``true``, ``false`` or a number (as text).
    """

    field: str
    when: str

    def broken(self, message: Any) -> str:
        """Return why ``message`` breaks the rule ('' when it meets it)."""
        try:
            value = _follow(message, self.field)
        except (AttributeError, IndexError, TypeError) as err:
            return f'{self.field} cannot be read ({err})'
        if self.when in ('nonempty', 'empty'):
            size = len(value) if isinstance(value, Sized) else None
            if size is None:
                return f'{self.field} is not a list or a string'
            if (size > 0) == (self.when == 'nonempty'):
                return ''
            return f'{self.field} is {"empty" if size == 0 else "not empty"}'
        if self.when in ('true', 'false'):
            return '' if bool(value) == (self.when == 'true') else f'{self.field} is {value!r}'
        try:
            equal = _number(value) == float(self.when)
        except (TypeError, ValueError):
            return f'{self.field} is not a number'
        return '' if equal else f'{self.field} is {value!r}, not {self.when}'


def parse_success(field: str, when: Any, message_class: Any, *, parameter: str) -> SuccessRule:
    """
    Parse and check a tool's rule against its response (or result) type.

    :param field: ``success_field``.
    :param when: ``success_when`` (a word, or a number given as one).
    :param message_class: The response or result message class.
    :param parameter: The tool's parameter prefix, for errors.
    :raises ConfigError: one is given without the other, the field does not exist, or the
        condition is not one of the words or a number.
    """
    if not field or not str(when).strip():
        missing = 'success_when' if field else 'success_field'
        raise ConfigError(f'{parameter}.{missing}: required with '
                          f'{"success_field" if field else "success_when"}')
    when = str(when).strip().lower()
    if when not in _WORDS:
        try:
            if not math.isfinite(float(when)):
                raise ValueError(when)
        except ValueError:
            raise ConfigError(f'{parameter}.success_when: {when!r} is not one of '
                              f'{"|".join(_WORDS)} or a number') from None
    try:
        _follow(message_class(), field, check_only=True)
    except (AttributeError, IndexError, TypeError):
        raise ConfigError(f'{parameter}.success_field: {message_class.__name__} has no field '
                          f'{field!r}') from None
    return SuccessRule(field, when)


def answered(message: Any, rule: SuccessRule | None) -> str:
    """
    Return why a service answer counts as a failure ('' for success).

    Without a rule: a boolean ``success`` field set to false; with one, the rule. (An
    action result is judged by its goal's status, and by the rule when there is one.)
    """
    if rule is not None:
        return rule.broken(message)
    success = getattr(message, 'success', True)
    return 'success=false' if success is False else ''


def refusal_reason(result: Any, rule: SuccessRule | None) -> str:
    """Return why a succeeded goal's result breaks the tool's rule ('' when none, or no rule)."""
    return rule.broken(result) if rule is not None else ''


def _follow(message: Any, field: str, *, check_only: bool = False) -> Any:
    value = message
    for part in parse_path(field):
        if isinstance(part, int):
            if check_only:
                return value  # a default message has empty lists: the index is read live
            value = value[part]
        else:
            if not hasattr(value, 'get_fields_and_field_types') or \
                    part not in value.get_fields_and_field_types():
                raise AttributeError(part)
            value = getattr(value, part)
    return value


def _number(value: Any) -> float:
    if isinstance(value, (bytes, bytearray)) and len(value) == 1:
        return float(value[0])
    return float(value)
