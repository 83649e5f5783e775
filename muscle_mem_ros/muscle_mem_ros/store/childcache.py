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
The SQL stores' in-memory index: the children of tree nodes, read once and kept current.

A store reads a node's children on first use (:meth:`ChildCache.put`), hands out
the same :class:`~.base.NodeList` until the membership changes
(:meth:`ChildCache.view`), and applies rows it or another writer has just written
(:meth:`ChildCache.place`): a new child is appended (a new list key), a known
one replaced (counters; same key) and its id logged (:attr:`.base.NodeList.changes`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
import itertools
from typing import Any

import numpy as np

from .base import logged, NodeList
from .columns import Columns
from ..records import Node

__all__ = ['ChildCache', 'Key']

Key = tuple[str, str, 'int | None']
"""(task, variant, parent): whose children."""


@dataclass
class _Kids:
    """Cached children of one tree node."""

    nodes: list[Node | None]
    index: dict[int, int] = field(default_factory=dict)
    """Node id -> place; for kept children built when first asked (:meth:`ChildCache.place`)."""
    gen: int = 0
    lineage: int = 0
    """Set when the list is read whole; appends keep it (the NodeList's family)."""
    view: NodeList | None = None
    log: list[int] = field(default_factory=list)
    """Ids of children given new counters (:attr:`.base.NodeList.changes`)."""
    columns: Columns | None = None
    """What matching reads of the first children, kept (their nodes None until read)."""
    load: Callable[[list[Node | None], Sequence[int] | None], None] | None = None


def _index(kids: _Kids) -> dict[int, int]:
    """Return the id -> place of cached children (built on first use for kept ones)."""
    if len(kids.index) < len(kids.nodes):
        kids.index = {n.id: i for i, n in enumerate(kids.nodes) if n is not None}
        if kids.columns is not None:
            kids.index.update(zip(kids.columns.ids.tolist(), range(kids.columns.n)))
    return kids.index


class ChildCache:
    """
    Children lists by (task, variant, parent), and where each cached node sits.

    :param uid: The owning store's id, part of every list key (keys never collide across
        stores).
    """

    def __init__(self, *, uid: int) -> None:
        self._uid = uid
        self._gens = itertools.count(1)
        self._kids: dict[Key, _Kids] = {}
        self._where: dict[int, Key] = {}

    def __bool__(self) -> bool:
        """Return True if anything is cached."""
        return bool(self._kids)

    def has(self, key: Key) -> bool:
        """Return True if the children of ``key`` are cached."""
        return key in self._kids

    def put(self, key: Key, nodes: list[Node]) -> None:
        """Cache ``nodes`` (oldest first) as the children of ``key``."""
        gen = next(self._gens)
        held: list[Node | None] = nodes  # type: ignore[assignment]  # (the list is the cache's)
        self._kids[key] = _Kids(nodes=held, index={n.id: i for i, n in enumerate(nodes)},
                                gen=gen, lineage=gen)
        for n in nodes:
            self._where[n.id] = key

    def put_kept(self, key: Key, columns: Columns, tail: list[Node],
                 load: Callable[[list[Node | None], Sequence[int] | None], None]) -> None:
        """
        Cache the children of ``key`` from their kept columns and the rows after them.

        :param columns: The first children's columns (:mod:`.columns`), nodes unread.
        :param tail: The children after them, read.
        :param load: ``load(nodes, positions)`` reads the unread nodes of ``nodes`` at
            ``positions`` (None: all), under the store's lock (:meth:`fill`).
        """
        gen = next(self._gens)
        nodes: list[Node | None] = [None] * columns.n
        nodes.extend(tail)
        self._kids[key] = _Kids(nodes=nodes, index={}, gen=gen, lineage=gen,
                                columns=columns, load=load)
        for n in tail:
            self._where[n.id] = key

    def fill(self, nodes: list[Node | None], ids: np.ndarray, positions: Sequence[int] | None,
             read: Callable[[Sequence[int]], list[Node]]) -> None:
        """
        Read the unread nodes of a kept list (its ``ids``) at ``positions`` (None: all).

        A node read meanwhile (by another reader, or given new counters) is kept as it is.
        """
        wanted = [i for i in (range(len(ids)) if positions is None else positions)
                  if i < len(ids) and nodes[i] is None]
        if not wanted:
            return
        found = {n.id: n for n in read([int(ids[i]) for i in wanted])}
        for i in wanted:
            node = found.get(int(ids[i]))
            if node is not None and nodes[i] is None:
                nodes[i] = node

    def size(self, key: Key) -> int:
        """Return how many children of ``key`` are cached (it must be cached)."""
        return len(self._kids[key].nodes)

    def view(self, key: Key) -> NodeList:
        """Return the cached children of ``key`` as a NodeList (the same one until they change)."""
        kids = self._kids[key]
        if kids.view is None:
            load, nodes = kids.load, kids.nodes
            kids.view = NodeList(nodes, key=(self._uid, *key, kids.gen),
                                 family=(self._uid, *key, kids.lineage), changes=kids.log,
                                 columns=kids.columns,
                                 load=None if load is None else lambda at: load(nodes, at))
        return kids.view

    def whole(self, key: Key) -> list[Node] | None:
        """Return the cached children of ``key`` when every one is read, else None."""
        kids = self._kids.get(key)
        if kids is None or any(n is None for n in kids.nodes):
            return None
        return kids.nodes  # type: ignore[return-value]

    def kept(self, key: Key) -> Columns | None:
        """Return the kept columns the children of ``key`` were cached from, if any."""
        kids = self._kids.get(key)
        return None if kids is None else kids.columns

    def node(self, node_id: int) -> Node | None:
        """Return a cached node, or None."""
        key = self._where.get(node_id)
        if key is None:
            return None
        kids = self._kids[key]
        return kids.nodes[_index(kids)[node_id]]

    def place(self, rows: Sequence[tuple[Any, ...]], decode: Callable[[tuple[Any, ...]], Node],
              *, leaves: Callable[[Key], bool] = lambda key: False) -> None:
        """
        Apply node rows (``NODE_COLS``) just written: append new children, replace known ones.

        Rows whose parent's children are not cached are skipped (read when first used).

        :param rows: The rows, parents before children.
        :param decode: Row to Node.
        :param leaves: Whether a new node under ``key`` gets an empty cached child list
            (its tree is cached whole).
        """
        for row in rows:
            key = (row[15], row[16], row[1])
            kids = self._kids.get(key)
            if kids is None:
                continue
            node = decode(row)
            pos = _index(kids).get(node.id)
            if pos is None:
                kids.index[node.id] = len(kids.nodes)
                kids.nodes.append(node)
                kids.gen = next(self._gens)
                self._where[node.id] = key
                if leaves(key):
                    gen = next(self._gens)
                    self._kids.setdefault((key[0], key[1], node.id),
                                          _Kids([], gen=gen, lineage=gen))
            else:
                kids.nodes[pos] = node
                kids.log = logged(kids.log, node.id, len(kids.nodes))
            kids.view = None

    def clear(self) -> None:
        """Forget everything."""
        self._kids.clear()
        self._where.clear()

    def drop(self, task: str) -> None:
        """Forget the cached children of every tree of ``task``."""
        for key in [k for k in self._kids if k[0] == task]:
            for node in self._kids.pop(key).nodes:
                if node is not None:
                    self._where.pop(node.id, None)

    def fresh_key(self, key: Key) -> tuple[Any, ...]:
        """Return a list key used once (an uncached answer)."""
        return (self._uid, *key, 'uncached', next(self._gens))

    def keys(self) -> Iterable[Key]:
        """Return the cached keys."""
        return list(self._kids)
