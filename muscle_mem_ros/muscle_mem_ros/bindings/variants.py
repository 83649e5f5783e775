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

from .rules import DECLARED, is_number, parse_path, Plan, Source, SourceKind

__all__ = ['BOUND', 'canonical', 'served', 'Variant']

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

    def with_bound(self, sources: Iterable[str]) -> Variant:
        """
        Return this variant with the parameter leaves ``sources`` name bound as well.

        A source naming a list or an object (``param:place``) binds every leaf under it;
        a source the pattern does not hold, and every sensor source, changes nothing.
        """
        if not isinstance(self.pattern, dict):
            return self
        pattern = json.loads(json.dumps(self.pattern))
        changed = False
        for text in sources:
            source = Source.parse(text)
            if source.kind is not SourceKind.PARAM:
                continue
            parent: Any = None
            key: Any = None
            target: Any = pattern
            for part in parse_path(source.name):
                if not _holds(target, part):
                    break
                parent, key, target = target, part, target[part]
            else:
                if parent is not None and target != BOUND:
                    parent[key] = _bind_all(target)
                    changed = True
        return Variant(canonical(pattern), pattern) if changed else self

    @property
    def has_bound(self) -> bool:
        """Return True when some parameter leaf of the tree is bound."""
        return _any_bound(self.pattern)

    def fits(self, params: Mapping[str, Any]) -> bool:
        """Return True when ``params`` fit (bound leaves match any number or string)."""
        return self.pattern is not None and _fits(self.pattern, dict(params))


def served(variant: str, plans: Iterable[Plan]) -> Variant:
    """
    Return the variant a tree serves: its own, with the leaves its declared bindings follow bound.

    The one rule for a params edit of a value a declared parameter binding follows, used
    by the node (:meth:`~..replay.treeview.Trees.variant_for`), run-bt and an import
    (:meth:`~..bt.document.BtDocument.misfit`, :func:`~..cli.bt.import_variant`): a
    declaration is the evidence that a second recording is for an inferred binding
    (:func:`.filing.witnessed`), so the edit is replayed, as filing binds a new tree's
    declared parameters at once. A parameter that only an inferred binding follows stays
    held literal until a second recording shows goals following it.

    :param variant: The tree's variant as stored.
    :param plans: The tree's plans.
    """
    sources = {b.source for plan in plans for b in plan.bindings
               if b.origin == DECLARED and b.is_param}
    return Variant.parse(variant).with_bound(sources)


def _holds(value: Any, part: str | int) -> bool:
    if isinstance(part, int):
        return isinstance(value, list) and 0 <= part < len(value)
    return isinstance(value, dict) and part in value


def _bind_all(value: Any) -> Any:
    """Return ``value`` with every number or string leaf under it bound."""
    if isinstance(value, dict) and value != BOUND:
        return {k: _bind_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bind_all(v) for v in value]
    return dict(BOUND) if is_number(value) or isinstance(value, str) else value


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
