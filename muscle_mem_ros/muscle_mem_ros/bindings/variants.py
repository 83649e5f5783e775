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
Variants: which tree of a task a run with given parameters uses.

A task's runs are kept in one tree per *variant*: the canonical JSON of their
parameters, so ``{"place": [0.3, -0.3]}`` and ``{"place": [0.1, -0.3]}`` are two
trees. When a recording's goals follow a parameter (a binding), the tree is filed
under a *bound* variant instead, where that parameter leaf is the marker
:data:`BOUND`; any run whose parameters fit the pattern can use the tree, the
bound leaf taking its value from the run.

The text is what the store keys trees by; :class:`Variant` is parsed from it once
at the edge and answers the questions asked of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
import json
from typing import Any

from .rules import is_number, parse_path, Source

__all__ = ['BOUND', 'canonical', 'Variant']

BOUND = {'$bound': True}
"""What a bound parameter leaf becomes in a tree's variant (its params JSON pattern)."""


def canonical(params: Mapping[str, Any]) -> str:
    """Return the canonical JSON of a run's parameters: the variant of its literal tree."""
    return json.dumps(dict(params), sort_keys=True, separators=(',', ':'))


@dataclass(frozen=True)
class Variant:
    """
    A tree's key, parsed.

    :ivar text: The variant as stored (canonical JSON, '' for the Engine's trees).
    :ivar pattern: Its parsed JSON (None when it is '' or not JSON).
    """

    text: str
    pattern: Any = None

    @classmethod
    def parse(cls, text: str) -> Variant:
        """Parse a stored variant (one that is not JSON fits nothing but itself)."""
        try:
            pattern = json.loads(text) if text else None
        except ValueError:
            pattern = None
        return cls(text, pattern)

    @classmethod
    def bound(cls, params: Mapping[str, Any], sources: Iterable[str]) -> Variant:
        """
        Return the variant of a tree whose ``sources`` parameter leaves are bound.

        :param params: The run's parameters.
        :param sources: Sources ``param:<path>`` of the bound leaves.
        :return: The canonical params JSON with each bound leaf replaced by :data:`BOUND`.
        """
        pattern = json.loads(json.dumps(dict(params)))
        for source in sources:
            path = parse_path(Source.parse(source).name)
            target: Any = pattern
            for part in path[:-1]:
                target = target[part]
            target[path[-1]] = dict(BOUND)
        return cls(canonical(pattern), pattern)

    @property
    def has_bound(self) -> bool:
        """Return True when some parameter leaf of the tree is bound."""
        return _any_bound(self.pattern)

    def fits(self, params: Mapping[str, Any]) -> bool:
        """Return True when ``params`` fit (bound leaves match any number or string)."""
        return self.pattern is not None and _fits(self.pattern, dict(params))


def _any_bound(pattern: Any) -> bool:
    if pattern == BOUND:
        return True
    if isinstance(pattern, dict):
        return any(_any_bound(v) for v in pattern.values())
    if isinstance(pattern, list):
        return any(_any_bound(v) for v in pattern)
    return False


def _fits(pattern: Any, value: Any) -> bool:
    if pattern == BOUND:
        return is_number(value) or isinstance(value, str)
    if isinstance(pattern, dict):
        return (isinstance(value, dict) and pattern.keys() == value.keys()
                and all(_fits(pattern[k], value[k]) for k in pattern))
    if isinstance(pattern, list):
        return (isinstance(value, list) and len(pattern) == len(value)
                and all(_fits(p, v) for p, v in zip(pattern, value)))
    return pattern == value and type(pattern) is type(value)
