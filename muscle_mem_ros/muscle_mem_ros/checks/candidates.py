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
Index a set of candidates once, so that every later lookup is a few array operations.

The recorded pre snapshots of the children of one tree node become one
NumPy matrix per sensor (raw and divided by the tolerance). When every
sensor uses box tolerances (``CompareMode.ABS``) and the set is large, a
``scipy.spatial.cKDTree`` over the normalized features is built as well: a
Chebyshev (p = inf) ball of radius 1 around the current state holds exactly
the candidates within tolerance in every element.

A set that only grew (stores append children) is extended instead of
rebuilt: the old matrices are reused, new rows are scored densely beside the
old tree, and the tree is rebuilt once the unindexed tail is large.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
import logging
import threading

import numpy as np
from scipy.spatial import cKDTree

from .tolerance import CompiledSensor
from ..errors import StoreError
from ..records import CompareMode, Node
from ..store.columns import Columns

__all__ = ['CandidateIndex', 'Column', 'IndexBuilder', 'tool_names']

_log = logging.getLogger(__name__)

_HEADROOM_FROM = 1024
"""Sets at least this large get spare rows when first indexed."""


def _capacity(n: int, headroom: bool) -> int:
    """Return the rows to allocate for ``n`` (25% spare for large sets with ``headroom``)."""
    return n + n // 4 if headroom and n >= _HEADROOM_FROM else n


class _Storage:
    """
    Row storage with spare capacity, shared by successive indexes of a growing set.

    Each index views the first ``n`` rows of every array; rows beyond ``filled`` are
    free. An extension claims rows atomically, so two extensions of the same index
    never write the same rows (the loser copies into fresh storage instead).

    :param arrays: Name -> array whose first axis is the rows.
    :param filled: Rows in use.
    """

    def __init__(self, arrays: dict[str, np.ndarray], filled: int) -> None:
        self.arrays = arrays
        self.filled = filled
        self._lock = threading.Lock()

    def claim(self, start: int, stop: int) -> bool:
        """Reserve rows [start, stop) if ``start`` is the end of the used rows and they fit."""
        with self._lock:
            capacity = next(iter(self.arrays.values())).shape[0]
            if self.filled != start or stop > capacity:
                return False
            self.filled = stop
            return True

    def grown(self, n_old: int, tails: dict[str, np.ndarray],
              ) -> tuple[_Storage, dict[str, np.ndarray]]:
        """Append ``tails`` after the first ``n_old`` rows; return the storage and the views."""
        n = n_old + len(next(iter(tails.values())))
        storage = self
        if not self.claim(n_old, n):
            capacity = max(n, n_old + n_old // 2)
            storage = _Storage({name: np.empty((capacity, *a.shape[1:]), dtype=a.dtype)
                                for name, a in self.arrays.items()}, n)
            for name, a in self.arrays.items():
                storage.arrays[name][:n_old] = a[:n_old]
        for name, tail in tails.items():
            storage.arrays[name][n_old:n] = tail
        return storage, {name: a[:n] for name, a in storage.arrays.items()}


@dataclass(frozen=True, eq=False)
class Column:
    """
    One sensor's recorded vectors for every candidate.

    :ivar k: Vector length.
    :ivar has: Rows that recorded this sensor with length ``k``.
    :ivar rec: (n, k) recorded vectors, raw units (zeros where not ``has``).
    :ivar rec_n: ``rec`` divided by the tolerance.
    :ivar storage: Where ``rec``/``rec_n`` live when they have spare rows to grow into.
    """

    k: int
    has: np.ndarray
    rec: np.ndarray
    rec_n: np.ndarray
    storage: _Storage | None = None

    def grown(self, tail: Column, n_old: int) -> Column:
        """Return this column with ``tail``'s rows appended, in place when storage allows."""
        storage = self.storage or _Storage(
            {'rec': self.rec, 'rec_n': self.rec_n, 'has': self.has}, n_old)
        storage, rows = storage.grown(
            n_old, {'rec': tail.rec, 'rec_n': tail.rec_n, 'has': tail.has})
        return Column(k=self.k, has=rows['has'], rec=rows['rec'], rec_n=rows['rec_n'],
                      storage=storage)


@dataclass(frozen=True, eq=False)
class CandidateIndex:
    """
    Everything about one candidate set that does not depend on the current snapshot.

    Immutable once built, except the cache of tool masks.

    :ivar n: Number of candidates.
    :ivar columns: Per sensor of the check, the recorded vectors (None if no
        candidate recorded that sensor).
    :ivar invalid: Rows that can never pass (no pre snapshot, nothing to compare).
    :ivar odd_rows: Rows scored one by one (unusual vector length or tolerance).
    :ivar tree: KD-tree over the normalized features of ``tree_rows``, or None.
    :ivar tree_rows: Rows indexed by ``tree``.
    :ivar ids: Node id of every row.
    :ivar tools: ``step.tool`` of every row.
    :ivar masks: Cached results of :meth:`allowed`.
    :ivar rows: Where ``ids``, ``tools`` and ``invalid`` live when they have spare rows.
    :ivar deferred: Its KD-tree is built on its second use (:meth:`IndexBuilder.kept`).
    """

    n: int
    columns: tuple[Column | None, ...]
    invalid: np.ndarray
    odd_rows: np.ndarray
    tree: cKDTree | None
    tree_rows: np.ndarray | None
    ids: np.ndarray
    tools: np.ndarray
    masks: dict[frozenset[str], np.ndarray] = field(default_factory=dict)
    rows: _Storage | None = None
    deferred: bool = False

    def allowed(self, tools: Collection[str]) -> np.ndarray:
        """Return (and cache) which rows call one of ``tools``."""
        names = frozenset(tools)
        mask = self.masks.get(names)
        if mask is None:
            mask = np.zeros(self.n, dtype=bool)
            for name in names:
                mask |= self.tools == name
            self.masks[names] = mask
        return mask


def tool_names(candidates: Sequence[Node]) -> np.ndarray:
    """Return the ``step.tool`` of every candidate as an object array."""
    names = np.empty(len(candidates), dtype=object)
    names[:] = [node.step.tool for node in candidates]
    return names


class IndexBuilder:
    """
    Build and extend :class:`CandidateIndex` objects for one check.

    :param sensors: The check's compiled sensors.
    :param kdtree_min: Set size from which an all-ABS check gets a KD-tree.
    """

    def __init__(self, *, sensors: Sequence[CompiledSensor], kdtree_min: int) -> None:
        self._sensors = tuple(sensors)
        self._kdtree_min = kdtree_min
        self._tree_ok = all(
            s.mode is CompareMode.ABS and s.zero_tol is None and bool(np.all(np.isfinite(s.tol)))
            for s in self._sensors)

    def parts(
        self,
        candidates: Sequence[Node],
        ks: Sequence[int | None] | None = None,
        *,
        headroom: bool = False,
    ) -> tuple[list[Column | None], np.ndarray, np.ndarray]:
        """
        Build the per-sensor matrices; returns (columns, invalid rows, odd rows mask).

        ``ks`` forces each sensor's vector length (to append rows to an existing
        block); by default the most common recorded length is used. With
        ``headroom``, large sets get 25% spare rows to grow into.
        """
        n = len(candidates)
        pres = [node.step.pre for node in candidates]
        invalid = np.fromiter((pre is None for pre in pres), dtype=bool, count=n)
        compared = np.zeros(n, dtype=np.int64)
        odd = np.zeros(n, dtype=bool)
        columns: list[Column | None] = []
        for j, sensor in enumerate(self._sensors):
            name = sensor.name
            values = [None if pre is None else pre.features.get(name) for pre in pres]
            lengths = np.fromiter((-1 if v is None else len(v) for v in values), np.int64, n)
            has = lengths >= 0
            compared += has
            k = ks[j] if ks is not None else (
                int(np.bincount(lengths[has]).argmax()) if has.any() else None)
            if k is None:
                odd |= has
                columns.append(None)
                continue
            odd |= has & (lengths != k)
            good = has & (lengths == k)
            capacity = _capacity(n, headroom)
            storage = _Storage({'rec': np.zeros((capacity, k)), 'rec_n': np.zeros((capacity, k)),
                                'has': np.zeros(capacity, dtype=bool)}, n)
            rec = storage.arrays['rec'][:n]
            rows = np.flatnonzero(good)
            if rows.size:
                rec[rows] = np.asarray([values[i] for i in rows], dtype=np.float64).reshape(-1, k)
            if sensor.tol_for(k) is not None:
                odd |= good
            rec_n = storage.arrays['rec_n'][:n]
            rec_n[:] = sensor.normalized(rec)
            has = storage.arrays['has'][:n]
            has[:] = good
            columns.append(Column(k=k, has=has, rec=rec, rec_n=rec_n,
                                  storage=storage if capacity > n else None))
        invalid |= compared == 0
        odd &= ~invalid
        return columns, invalid, odd

    def tree(
        self, columns: Sequence[Column | None], invalid: np.ndarray, odd: np.ndarray,
    ) -> tuple[cKDTree | None, np.ndarray | None]:
        """Build the KD-tree over the rows every sensor can score, when it pays off."""
        n = invalid.size
        if not self._tree_ok or n < self._kdtree_min or any(c is None for c in columns):
            return None, None
        clean = ~invalid & ~odd
        for column in columns:
            assert column is not None
            clean &= column.has & np.all(np.isfinite(column.rec_n), axis=1)
        rows = np.flatnonzero(clean)
        if rows.size < self._kdtree_min:
            return None, None
        data = np.hstack([c.rec_n[rows] for c in columns if c is not None])
        # Unbalanced, uncompacted: built 5x faster (40 ms at 100 000 x 35), queried as fast.
        return cKDTree(data, balanced_tree=False, compact_nodes=False), rows

    def kept(self, kept: Columns) -> CandidateIndex:
        """
        Index the first ``kept.n`` candidates of a set from their kept columns.

        What :meth:`parts` would find from the nodes (:mod:`..store.columns`), without
        reading them. The KD-tree waits for the set's second use (:meth:`with_tree`): the
        first lookup after a restart scores every row (milliseconds), so it does not
        wait for a tree it may not need again.
        """
        n = kept.n
        compared = np.zeros(n, dtype=np.int64)
        odd = np.zeros(n, dtype=bool)
        columns: list[Column | None] = []
        for sensor in self._sensors:
            vectors = kept.sensors.get(sensor.name)
            if vectors is None:
                columns.append(None)
                continue
            assert vectors.rec is not None  # (full)
            compared += vectors.has | vectors.odd
            odd |= vectors.odd
            if sensor.tol_for(vectors.k) is not None:
                odd |= vectors.has
            columns.append(Column(k=vectors.k, has=vectors.has, rec=vectors.rec,
                                  rec_n=sensor.normalized(vectors.rec)))
        invalid = kept.no_pre | (compared == 0)
        odd &= ~invalid
        tools = np.asarray(kept.tools, dtype=object)[kept.tool_of]
        return CandidateIndex(n=n, columns=tuple(columns), invalid=invalid,
                              odd_rows=np.flatnonzero(odd), tree=None, tree_rows=None,
                              ids=kept.ids, tools=tools, deferred=True)

    def with_tree(self, block: CandidateIndex) -> CandidateIndex:
        """Return a deferred block with its KD-tree (:meth:`kept`)."""
        odd = np.zeros(block.n, dtype=bool)
        odd[block.odd_rows] = True
        tree, tree_rows = self.tree(block.columns, block.invalid, odd)
        return replace(block, tree=tree, tree_rows=tree_rows, masks={}, deferred=False)

    def build(self, candidates: Sequence[Node]) -> CandidateIndex:
        """Index a candidate set from scratch (from its kept columns when it has them)."""
        kept: Columns | None = getattr(candidates, 'columns', None)
        try:
            kept = None if kept is None or not kept.n else kept.full()
        except StoreError as err:  # (read from the nodes instead)
            _log.warning('kept first steps could not be read: %s', err)
            kept = None
        if kept is not None:
            block = self.kept(kept)
            if len(candidates) == kept.n:
                return block
            grown = self.extend(block, candidates)
            if grown is not None:
                return grown
        columns, invalid, odd = self.parts(candidates, headroom=True)
        tree, tree_rows = self.tree(columns, invalid, odd)
        n = len(candidates)
        ids = np.fromiter((node.id for node in candidates), np.int64, n)
        rows = _Storage({'ids': ids, 'tools': tool_names(candidates), 'invalid': invalid}, n)
        capacity = _capacity(n, True)
        if capacity > n:
            rows, views = _Storage({name: np.empty(capacity, dtype=a.dtype)
                                    for name, a in rows.arrays.items()}, 0).grown(0, rows.arrays)
            ids, invalid = views['ids'], views['invalid']
        return CandidateIndex(n=n, columns=tuple(columns), invalid=invalid,
                              odd_rows=np.flatnonzero(odd), tree=tree, tree_rows=tree_rows,
                              ids=ids, tools=rows.arrays['tools'][:n],
                              rows=rows if capacity > n else None)

    def extend(self, old: CandidateIndex, candidates: Sequence[Node]) -> CandidateIndex | None:
        """
        Append new children to the block of the same set before it grew, or None.

        Stores only append children between removals, so after a branch is
        learned under a large fan-out the old matrices are reused (grown in
        place into spare rows, 50% headroom), the new rows are scored densely
        beside the old KD-tree, and the tree is rebuilt only once the
        unindexed tail is large.
        """
        n = len(candidates)
        if n <= old.n or (old.n and (candidates[0].id != old.ids[0]
                                     or candidates[old.n - 1].id != old.ids[-1])):
            return None  # (a family only grows: see NodeList; the ends are a cheap guard)
        added = candidates[old.n:]
        ks = [None if c is None else c.k for c in old.columns]
        tail_columns, tail_invalid, tail_odd = self.parts(added, ks)
        rows = old.rows or _Storage({'ids': old.ids, 'tools': old.tools, 'invalid': old.invalid},
                                    old.n)
        rows, views = rows.grown(old.n, {
            'ids': np.fromiter((node.id for node in added), np.int64, len(added)),
            'tools': tool_names(added), 'invalid': tail_invalid})
        ids, invalid, tools = views['ids'], views['invalid'], views['tools']
        columns: list[Column | None] = []
        for was, tail in zip(old.columns, tail_columns, strict=True):
            if was is None or tail is None:
                columns.append(None)
                continue
            columns.append(was.grown(tail, old.n))
        odd_rows = np.concatenate([old.odd_rows, np.flatnonzero(tail_odd) + old.n])
        tree, tree_rows = old.tree, old.tree_rows
        indexed = 0 if tree_rows is None else tree_rows.size
        if not old.deferred and (n - indexed > max(256, n // 8)
                                 or (tree is None and n >= self._kdtree_min)):
            odd = np.zeros(n, dtype=bool)
            odd[odd_rows] = True
            tree, tree_rows = self.tree(columns, invalid, odd)
        return CandidateIndex(n=n, columns=tuple(columns), invalid=invalid, odd_rows=odd_rows,
                              tree=tree, tree_rows=tree_rows, ids=ids, tools=tools, rows=rows,
                              deferred=old.deferred)
