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
Candidates in the walk's rank order, kept as the tree changes.

A judge whose checks are opaque (the Engine's user ``compare``) cannot index
candidates the way the node's matcher indexes snapshots: it must run the check
of each. It can still avoid running all of them. Among candidates that pass at
the same distance the walk takes the one with the most successes, then the most
recently used, then the lowest id (:func:`rank_key`, the rule's one definition); so a judge that
tries candidates in that order and meets one at the best distance a check can
give (a user ``compare`` returning True) knows no later one can be chosen, and
stops there.

:class:`RankOrder` keeps that order for a store's child lists (keyed by their
:attr:`~..store.base.NodeList.family`) between calls: a new child is inserted,
a child whose counters changed (read from the list's change log) is moved;
nothing else is looked at, so keeping the order costs what changed, not the
size of the tree.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence

from ..records import Node

__all__ = ['rank_key', 'RankKey', 'RankOrder']

RankKey = tuple[float, int, float, int]
"""(distance, -successes, -last used, id): the smallest is replayed."""


def rank_key(node: Node, distance: float = 0.0) -> RankKey:
    """
    Return the sort key of a passing candidate: the smallest key is replayed.

    :param node: The candidate.
    :param distance: How far its pre-check found the world (0 = identical); the default
        ranks candidates at an equal distance.
    :return: Lowest distance first, then most successes, most recently used, lowest id.
    """
    return (distance, -node.success_count, -node.last_used, node.id)


class _Order:
    """One child list's order: sorted keys, where each child sits, what was read."""

    def __init__(self, candidates: Sequence[Node], log: Sequence[int] | None,
                 changed: int) -> None:
        self.keys = sorted(rank_key(n) for n in candidates)
        self.key_of = {k[3]: k for k in self.keys}
        self.pos = {n.id: i for i, n in enumerate(candidates)}
        self.log = log
        self.read = changed

    def update(self, candidates: Sequence[Node], changed: int) -> None:
        """Insert the children appended since, and move those whose counters changed."""
        for i in range(len(self.pos), len(candidates)):
            node = candidates[i]
            self.pos[node.id] = i
            self._put(node)
        assert self.log is not None
        for node_id in self.log[self.read:changed]:
            at = self.pos.get(node_id)
            if at is not None:
                self._put(candidates[at])
        self.read = changed

    def _put(self, node: Node) -> None:
        new = rank_key(node)
        old = self.key_of.get(node.id)
        if old == new:
            return
        if old is not None:
            del self.keys[bisect.bisect_left(self.keys, old)]
        bisect.insort(self.keys, new)
        self.key_of[node.id] = new


class RankOrder:
    """
    Child lists in rank order (most successes, most recent, lowest id first).

    :param size: How many child lists to keep (the least recently asked is dropped).
    :param smallest: Lists shorter than this are sorted on each call, not kept.
    """

    def __init__(self, *, size: int = 256, smallest: int = 32) -> None:
        self._orders: OrderedDict[Hashable, _Order] = OrderedDict()
        self._size = size
        self._smallest = smallest

    def __call__(self, candidates: Sequence[Node]) -> Iterator[Node]:
        """Return ``candidates`` in rank order, one at a time."""
        family = getattr(candidates, 'family', None)
        log = getattr(candidates, 'changes', None)
        if family is None or log is None or len(candidates) < self._smallest:
            return iter(sorted(candidates, key=rank_key))
        changed = getattr(candidates, 'changed', len(log))
        order = self._orders.get(family)
        if order is None or order.log is not log or len(candidates) < len(order.pos):
            order = _Order(candidates, log, changed)
        else:
            order.update(candidates, changed)
        self._orders[family] = order
        self._orders.move_to_end(family)
        while len(self._orders) > self._size:
            self._orders.popitem(last=False)
        return self._walk(order, candidates)

    @staticmethod
    def _walk(order: _Order, candidates: Sequence[Node]) -> Iterator[Node]:
        keys, pos = order.keys, order.pos
        for i in range(len(keys)):
            yield candidates[pos[keys[i][3]]]
