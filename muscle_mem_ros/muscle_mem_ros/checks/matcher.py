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
Choose which recorded step to replay next, vectorized over all candidates.

The children of one tree node are the candidates. They are indexed once
(:mod:`muscle_mem_ros.checks.candidates`: NumPy matrices, and a KD-tree for large
all-ABS sets) and the index is cached, keyed by the candidate set; each lookup
then scores every candidate in a few array operations, or with one Chebyshev
ball query (about log(n), not n) when the KD-tree applies.

Candidates whose step has no pre snapshot fail with 'no pre-check': the matcher
never replays blindly; a caller that allows blind replay decides that itself.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
import math
import threading

import numpy as np

from .banding import band_of
from .candidates import CandidateIndex, IndexBuilder
from .tolerance import Current, ToleranceCheck
from ..errors import StoreError
from ..records import CheckFailure, CheckResult, Node, Snapshot
from ..replay.ranking import rank_key
from ..resume import FailureKind
from ..store.gcpause import gc_paused

__all__ = ['Matcher', 'Selection']

_NO_PRE = CheckResult(False, math.inf, (
    CheckFailure('', math.inf, 0.0, math.inf, 'no pre-check', FailureKind.UNCHECKED),))


@dataclass(frozen=True)
class Selection:
    """
    Outcome of choosing among candidates.

    :ivar node: Best passing candidate, None if none passed.
    :ivar result: Its check result (None when ``node`` is None).
    :ivar rejected: Failing candidates, best (lowest score) first, at most the
        matcher's ``max_rejected`` of them (enough to explain a miss
        without building a result per candidate at large fan-out). Empty
        when a candidate passed, unless the matcher was built with
        ``rejected_on_hit=True``.
    """

    node: Node | None
    result: CheckResult | None
    rejected: tuple[tuple[Node, CheckResult], ...] = ()


class Matcher:
    """
    Select the best candidate whose recorded pre snapshot matches now.

    Thread-safe: the cache is guarded by a lock and cached blocks are immutable.

    :param check: The tolerance check that scores candidates.
    :param max_rejected: How many failing candidates ``Selection.rejected`` keeps.
    :param kdtree_min: Fan-out from which an all-ABS check uses a KD-tree.
    :param cache_size: Candidate sets kept in the LRU cache.
    :param rejected_on_hit: Also explain the failing candidates when one passed.
    """

    def __init__(
        self,
        *,
        check: ToleranceCheck,
        max_rejected: int = 8,
        kdtree_min: int = 64,
        cache_size: int = 256,
        rejected_on_hit: bool = False,
    ) -> None:
        if not isinstance(check, ToleranceCheck):
            raise TypeError(f'check must be a ToleranceCheck, got {type(check).__name__}')
        if max_rejected < 0 or kdtree_min < 1 or cache_size < 1:
            raise ValueError('max_rejected >= 0, kdtree_min >= 1 and cache_size >= 1 required')
        self.check = check
        self._max_rejected = max_rejected
        self._cache_size = cache_size
        self._rejected_on_hit = rejected_on_hit
        self._cache: OrderedDict[Hashable, CandidateIndex] = OrderedDict()
        self._families: OrderedDict[Hashable, CandidateIndex] = OrderedDict()
        self._band_once: OrderedDict[Hashable, None] = OrderedDict()  # sets a band answered once
        self._lock = threading.Lock()
        self._builder = IndexBuilder(sensors=check.compiled, kdtree_min=kdtree_min)

    def select(
        self,
        candidates: Sequence[Node],
        now: Snapshot,
        *,
        now_time: float | None = None,
        tools: Collection[str] | None = None,
    ) -> Selection:
        """
        Return the best passing candidate and the closest failing ones.

        Ranking among passing candidates: the walk's (:func:`~..replay.ranking.rank_key`),
        with the score as the distance: lowest score, then highest
        ``success_count``, then latest ``last_used``, then lowest id.

        :param candidates: Children of one tree node. A store's ``children()``
            result carries a ``key`` that identifies the set cheaply; any
            other sequence is keyed by its node ids.
        :param now: Fresh snapshot.
        :param now_time: Clock for staleness (same clock as ``now.stamps``).
        :param tools: If given, only candidates whose ``step.tool`` is one of these
            are considered (neither selected nor listed as rejected); the
            filter is vectorized and cached, so pass the store's list whole
            rather than a filtered copy.
        """
        n = len(candidates)
        if n == 0:
            return Selection(None, None, ())
        current = self.check.current(now, now_time=now_time)
        if not self._rejected_on_hit:
            chosen = self._in_band(candidates, current, tools)
            if chosen is not None:
                return chosen
        block = self._block(candidates)
        scores, tree_used = self._scores(candidates, block, current)
        allowed = None if tools is None else block.allowed(tools)
        if allowed is not None:
            scores[~allowed] = np.inf
        passing = np.flatnonzero(scores <= 1.0)
        node: Node | None = None
        result: CheckResult | None = None
        if passing.size:
            best = self._rank(candidates, passing, scores)
            node = candidates[best]
            result = self._result(node, current)
        rejected: tuple[tuple[Node, CheckResult], ...] = ()
        if node is None or self._rejected_on_hit:
            rejected = self._rejected(candidates, block, scores, current, tree_used, passing.size,
                                      allowed)
        return Selection(node, result, rejected)

    def _in_band(self, candidates: Sequence[Node], current: Current,
                 tools: Collection[str] | None) -> Selection | None:
        """
        Choose among a few of the kept candidates, the first time a set is looked up.

        :mod:`.banding`: only when its first-step columns were kept, opened without their
        vectors; a set's second lookup reads all and builds its KD-tree. None: no choice
        here (no band, a miss, the kept value unreadable), the caller scores every row.
        """
        kept = getattr(candidates, 'columns', None)
        key = getattr(candidates, 'key', None)
        if kept is None or kept.kept is None or key is None:
            return None
        with self._lock:
            if key in self._cache or key in self._band_once:
                return None
        try:
            band = band_of(self.check, candidates, kept, current)
        except StoreError:
            return None
        if band is None:
            return None
        with self._lock:
            self._band_once[key] = None
            while len(self._band_once) > self._cache_size:
                self._band_once.popitem(last=False)
        rows, columns = band
        block = self._builder.kept(columns)
        scores, _ = self._scores(rows, block, current)
        if tools is not None:
            scores[~block.allowed(tools)] = np.inf
        passing = np.flatnonzero(scores <= 1.0)
        if not passing.size:
            return None
        node = rows[self._rank(rows, passing, scores)]
        return Selection(node, self._result(node, current), ())

    def warm(self, candidates: Sequence[Node]) -> None:
        """Build and cache the index of a candidate set now (e.g. at startup), not on first use."""
        if len(candidates) and self._block(candidates).deferred:
            self._block(candidates)

    def clear(self) -> None:
        """Drop every cached candidate matrix."""
        with self._lock:
            self._cache.clear()
            self._families.clear()
            self._band_once.clear()

    def _block(self, candidates: Sequence[Node]) -> CandidateIndex:
        key = getattr(candidates, 'key', None)
        family = getattr(candidates, 'family', None)
        if key is None:
            key = ('ids', tuple(node.id for node in candidates))
        with self._lock:
            block = self._cache.get(key)
            if block is not None and not block.deferred:
                self._cache.move_to_end(key)
                return block
            previous = None if family is None else self._families.get(family)
        if block is not None:  # its second use: the KD-tree the first one went without
            block = self._builder.with_tree(block)
            with self._lock:
                self._cache[key] = block
                if family is not None:
                    self._families[family] = block
            return block
        with gc_paused():
            block = None if previous is None else self._builder.extend(previous, candidates)
            if block is None:
                block = self._builder.build(candidates)
            if block.deferred and key in self._band_once:  # its second use: no third wait
                block = self._builder.with_tree(block)
        with self._lock:
            self._cache[key] = block
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            if family is not None:
                self._families[family] = block
                self._families.move_to_end(family)
                while len(self._families) > self._cache_size:
                    self._families.popitem(last=False)
        return block

    def _scores(
        self,
        candidates: Sequence[Node],
        block: CandidateIndex,
        current: list[tuple[np.ndarray | None, str | None]],
    ) -> tuple[np.ndarray, bool]:
        """Score all candidates; returns (scores, whether the KD-tree produced them)."""
        sensors = self.check.compiled
        usable = all(
            x is not None and column is not None and column.k == x.shape[0]
            for (x, _), column in zip(current, block.columns, strict=True))
        if block.tree is not None and usable:
            return self._tree_scores(candidates, block, current), True
        scores = np.zeros(block.n, dtype=np.float64)
        for sensor, (x, _), column in zip(sensors, current, block.columns, strict=True):
            if column is None:
                continue
            if x is None or column.k != x.shape[0] or sensor.tol_for(column.k) is not None:
                scores[column.has] = np.inf
                continue
            s = sensor.scores(column.rec, x, column.rec_n)
            np.maximum(scores, np.where(column.has, s, 0.0), out=scores)
        scores[block.invalid] = np.inf
        self._rescore_odd(candidates, block, scores, current)
        return scores, False

    def _tree_scores(
        self,
        candidates: Sequence[Node],
        block: CandidateIndex,
        current: list[tuple[np.ndarray | None, str | None]],
    ) -> np.ndarray:
        sensors = self.check.compiled
        x_n = np.concatenate([x / s.safe_tol for s, (x, _) in zip(sensors, current, strict=True)])
        assert block.tree is not None and block.tree_rows is not None
        hits = block.tree.query_ball_point(x_n, r=1.0 + 1e-9, p=math.inf, return_sorted=False)
        scores = np.full(block.n, np.inf)
        rows = block.tree_rows[np.asarray(hits, dtype=np.int64)]
        others = np.ones(block.n, dtype=bool)
        others[block.tree_rows] = False
        others &= ~block.invalid
        others[block.odd_rows] = False
        rows = np.concatenate([rows, np.flatnonzero(others)])
        if rows.size:
            scores[rows] = self._subset_scores(block, rows, current)
        self._rescore_odd(candidates, block, scores, current)
        return scores

    def _subset_scores(
        self,
        block: CandidateIndex,
        rows: np.ndarray,
        current: list[tuple[np.ndarray | None, str | None]],
    ) -> np.ndarray:
        """Exactly score a few rows with the dense kernels."""
        out = np.zeros(rows.size, dtype=np.float64)
        sensors = self.check.compiled
        for sensor, (x, _), column in zip(sensors, current, block.columns, strict=True):
            if column is None:
                continue
            has = column.has[rows]
            if x is None or column.k != x.shape[0] or sensor.tol_for(column.k) is not None:
                out[has] = np.inf
                continue
            s = sensor.scores(column.rec[rows], x, column.rec_n[rows])
            np.maximum(out, np.where(has, s, 0.0), out=out)
        out[block.invalid[rows]] = np.inf
        return out

    def _rescore_odd(
        self, candidates: Sequence[Node], block: CandidateIndex, scores: np.ndarray,
        current: Current,
    ) -> None:
        """Score candidates whose vectors have an unusual length, one by one (rare)."""
        for row in block.odd_rows:
            pre = candidates[int(row)].step.pre
            result = _NO_PRE if pre is None else self.check.evaluate_current(pre, current)
            scores[row] = result.score if result.passed else math.inf

    def _rank(self, candidates: Sequence[Node], passing: np.ndarray, scores: np.ndarray) -> int:
        """Pick the best passing row; only exact ties on score reach the Python tie-break."""
        best_score = scores[passing].min()
        tied = passing[scores[passing] == best_score]
        best_row = int(tied[0])
        if tied.size > 1:
            best_row = min((int(r) for r in tied),
                           key=lambda row: rank_key(candidates[row], float(best_score)))
        return best_row

    def _result(self, node: Node, current: Current) -> CheckResult:
        if node.step.pre is None:
            return _NO_PRE
        return self.check.evaluate_current(node.step.pre, current)

    def _rejected(
        self,
        candidates: Sequence[Node],
        block: CandidateIndex,
        scores: np.ndarray,
        current: Current,
        tree_used: bool,
        n_passing: int,
        allowed: np.ndarray | None,
    ) -> tuple[tuple[Node, CheckResult], ...]:
        want = self._max_rejected
        if want == 0 or n_passing == block.n:
            return ()
        if tree_used:
            rows = self._nearest_failing(block, scores, current, want + n_passing)
            if allowed is not None:
                rows = rows[allowed[rows]]
        else:
            failing = np.flatnonzero(~(scores <= 1.0) if allowed is None
                                     else ~(scores <= 1.0) & allowed)
            if failing.size > want:
                part = np.argpartition(scores[failing], want - 1)[:want]
                failing = failing[part]
            rows = failing[np.argsort(scores[failing], kind='stable')]
        out = []
        for row in rows[:want]:
            node = candidates[int(row)]
            out.append((node, self._result(node, current)))
        out.sort(key=lambda item: item[1].score)
        return tuple(out)

    def _nearest_failing(
        self, block: CandidateIndex, scores: np.ndarray, current: Current, k: int,
    ) -> np.ndarray:
        """Find the closest failing rows with a k-nearest query instead of a full pass."""
        assert block.tree is not None and block.tree_rows is not None
        sensors = self.check.compiled
        x_n = np.concatenate([x / s.safe_tol for s, (x, _) in zip(sensors, current, strict=True)])
        k = min(k, block.tree_rows.size)
        _, idx = block.tree.query(x_n, k=k, p=math.inf)
        idx = np.atleast_1d(idx)
        rows = block.tree_rows[idx[idx < block.tree_rows.size]]
        scores[rows] = self._subset_scores(block, rows, current)
        rows = rows[~(scores[rows] <= 1.0)]
        extra = np.setdiff1d(np.flatnonzero(np.isfinite(scores) & ~(scores <= 1.0)), rows)
        rows = np.concatenate([rows, extra])
        return rows[np.argsort(scores[rows], kind='stable')]
