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
Sensor inference: which goal field of a group of recordings follows which sensor.

A group is the steps at one depth of the trajectories of one shape (same tools,
types and goal leaves; :mod:`.learning` forms them). A floating-point goal field
follows a source when ``field - source`` stays within the source's tolerance
over every member while both moved, and when no unrelated source would fit as
well by chance (:func:`chance`): with a 360-range scan among the sources, some
range fits any field in a few recordings. :class:`Group` keeps the running
statistics that question needs, so a new member costs the same whatever the
size of the tree.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field as dc_field
import math
from typing import Any

import numpy as np

from .rules import Binding, INFERRED, SourceRule, split_element
from .turns import infer_turns
from ..records import Node

__all__ = ['allowed_sources', 'CHANCE', 'chance', 'Group', 'Observed', 'RESOLUTION', 'Sources',
           'Tolerance']

Tolerance = Callable[[str], float | None]
"""Tolerance of a source element (None: not a source)."""
Sources = Callable[[str, int], bool]
"""``may(sensor, size)``: may a sensor's elements be inferred sources (``sensor_sources``)."""

CHANCE = 1e-3
"""An inferred sensor binding must fit better than chance would, with this probability."""
RESOLUTION = 1e-9
"""Relative: a fit closer than this (float rounding) counts as this close."""


@dataclass
class Observed:
    """One learned step as learning sees it (read once per step)."""

    node: Node
    goal: dict[str, Any]
    pre: dict[str, float]
    post: dict[str, float]
    params: dict[str, Any] = dc_field(default_factory=dict)


class Group:
    """
    The steps at one depth of the trajectories of one shape, as running statistics.

    Sensor bindings of a field need the range of the field, of each source, and of
    their difference over the members, and the mean difference: kept as arrays of
    (numeric fields) x (sources every member has).
    """

    def __init__(self, first: Observed, order: int, tolerance: Tolerance,
                 max_shift: float | None, sources: Sources | None = None) -> None:
        self.order = order
        self.version = 0
        """Bumped by every new member (the offsets change)."""
        self._sources_version = 0
        self._sources_at = 0
        self._max_shift = max_shift
        self._members: list[Observed] = []
        self._ids: set[int] = set()
        self._fields = [f for f in sorted(first.goal) if isinstance(first.goal[f], float)]
        """Floating-point leaves: an integer (a code, an index) never follows a sensor."""
        self._sources = sorted(allowed_sources(first.pre, sources))
        self._poses = sorted(sources.poses) if isinstance(sources, SourceRule) else []
        self._alive = np.ones(len(self._sources), dtype=bool)
        tol = [tolerance(s) for s in self._sources]
        self._tol = np.array([math.nan if t is None else float(t) for t in tol])
        self._tolerance = tolerance
        shape = (len(self._fields), len(self._sources))
        self._smin = np.full(len(self._sources), math.inf)
        self._smax = np.full(len(self._sources), -math.inf)
        self._fmin = np.full(len(self._fields), math.inf)
        self._fmax = np.full(len(self._fields), -math.inf)
        self._dmin = np.full(shape, math.inf)
        self._dmax = np.full(shape, -math.inf)
        self._dsum = np.zeros(shape)
        self._pairs: dict[tuple[str, str], list[float]] = {}
        self._bindings: tuple[int, tuple[Binding, ...]] = (-1, ())
        self._bound_sources: frozenset[tuple[str, float | None]] = frozenset()

    def add(self, o: Observed) -> bool:
        """Take one more step in; False when it is a member already."""
        if o.node.id in self._ids:
            return False
        self._ids.add(o.node.id)
        self._members.append(o)
        pre = np.array([o.pre.get(s, math.nan) for s in self._sources])
        self._alive &= np.array([s in o.pre for s in self._sources], dtype=bool)
        goal = np.array([float(o.goal[f]) for f in self._fields])
        np.minimum(self._smin, pre, out=self._smin)
        np.maximum(self._smax, pre, out=self._smax)
        np.minimum(self._fmin, goal, out=self._fmin)
        np.maximum(self._fmax, goal, out=self._fmax)
        diff = goal[:, None] - pre[None, :]
        np.minimum(self._dmin, diff, out=self._dmin)
        np.maximum(self._dmax, diff, out=self._dmax)
        self._dsum += diff
        for (a, b), span in self._pairs.items():
            d = o.pre[a] - o.pre[b]
            span[0], span[1] = min(span[0], d), max(span[1], d)
        self.version += 1
        return True

    @property
    def sources_version(self) -> int:
        """
        Return a number that changes when the bound sources change (later steps' plans read it).

        Worked out when read, not on every new member: learning a whole tree at start
        then infers each group once, not once per trajectory.
        """
        self._refresh_sources()
        return self._sources_version

    def _refresh_sources(self) -> None:
        if self._sources_at != self.version:
            self._sources_at = self.version
            sources = frozenset((b.source, b.max_shift) for b in self.bindings())
            if sources != self._bound_sources:
                self._bound_sources = sources
                self._sources_version += 1

    def bindings(self) -> tuple[Binding, ...]:
        """Return the sensor bindings the members agree on (none with fewer than two)."""
        if self._bindings[0] == self.version:
            return self._bindings[1]
        found = self._infer() if len(self._members) >= 2 else ()
        self._bindings = (self.version, found)
        return found

    def bound_sources(self) -> frozenset[tuple[str, float | None]]:
        """Return (source, max_shift) of :meth:`bindings`."""
        self._refresh_sources()
        return self._bound_sources

    def _infer(self) -> tuple[Binding, ...]:
        n = len(self._members)
        tol = self._tol
        with np.errstate(invalid='ignore'):
            varies = self._alive & (tol > 0) & ~((self._smax - self._smin) <= tol)
        tried = int(np.count_nonzero(varies))
        out = []
        for fi, path in enumerate(self._fields):
            moved = float(self._fmax[fi] - self._fmin[fi])
            if moved <= 1e-9:
                continue
            spread = self._dmax[fi] - self._dmin[fi]
            with np.errstate(invalid='ignore'):
                ok = np.flatnonzero(varies & (spread <= tol))
            fits = sorted((float(spread[k] / tol[k]), self._sources[k],
                           float(self._dsum[fi, k] / n), float(spread[k])) for k in ok)
            if not fits:
                continue
            # A fit counts when no unrelated source among those tried would fit as well
            # but by chance (:func:`chance`). Two sources that both fit that well (the
            # cube moved as much in x as in y between the recordings) leave the field
            # ambiguous: it is not bound until a further recording tells them apart. A
            # runner-up equal to the best source in every recording (the tool the
            # previous step put above the cube, and the cube) is the same value seen
            # twice, not a rival.
            scale = max(1.0, abs(float(self._fmin[fi])), abs(float(self._fmax[fi])))
            likely = [f for f in fits if chance(f[3], moved, n, tried, scale) < CHANCE]
            if not likely:
                continue
            best = likely[0][1]
            if not any(not self._same_values(best, f[1]) for f in likely[1:]):
                out.append(Binding(path, best, likely[0][2], self._max_shift, INFERRED))
        if self._poses:  # a goal's rotation follows a pose sensor's (.turns)
            out.extend(infer_turns(self._members, self._poses, self._tolerance, chance, CHANCE))
        return tuple(out)

    def _same_values(self, a: str, b: str) -> bool:
        """Return True when sources ``a`` and ``b`` agree within tolerance in every member."""
        tol = min(self._tolerance(a) or 0.0, self._tolerance(b) or 0.0)
        if tol <= 0:
            return False
        span = self._pairs.get((a, b))
        if span is None:  # first asked: read the members once, then keep it up to date
            diffs = [o.pre[a] - o.pre[b] for o in self._members]
            span = self._pairs[(a, b)] = [min(diffs), max(diffs)]
        return abs(span[0]) <= tol and abs(span[1]) <= tol


def chance(fit: float, moved: float, members: int, tried: int, scale: float = 1.0) -> float:
    """
    Return how likely some unrelated source would fit a goal field this well by chance.

    Tolerance alone is not evidence: with many candidate sources (a scan's 360 ranges,
    seven joints) that move between recordings by amounts like the field's, one of
    them fits within tolerance by chance in many pairs of recordings. So the best
    source must fit better than chance. Model: between consecutive recordings an
    unrelated source moves by an amount spread evenly over the field's own steps
    (its range over ``members`` recordings, split in ``members - 1`` steps); each
    step then lands within ``fit`` of the field's by chance with probability
    ``2 fit / step``; ``members - 1`` independent steps, and any of ``tried``
    sources (Bonferroni).

    :param fit: The best source's spread of ``field - source`` over the recordings.
    :param moved: The field's range over the recordings.
    :param members: How many recordings.
    :param tried: How many candidate sources varied (were tried).
    :param scale: The field's magnitude (the float rounding floor of ``fit`` is relative).
    :return: An upper estimate of the probability (may exceed 1).
    """
    if members < 2 or moved <= 0:
        return math.inf
    step = moved / (members - 1)
    near = max(fit, RESOLUTION * scale)
    return tried * min(1.0, 2 * near / step) ** (members - 1)


def allowed_sources(pre: Mapping[str, float], sources: Sources | None) -> list[str]:
    """Return the pre sources inference may bind to (every one when ``sources`` is None)."""
    if sources is None:
        return list(pre)
    sensor = {key: split_element(key)[0] for key in pre}
    sizes = collections.Counter(sensor.values())
    poses = sources.poses if isinstance(sources, SourceRule) else frozenset()
    return [key for key in pre if sources(sensor[key], sizes[sensor[key]])
            and not (sensor[key] in poses and split_element(key)[1] >= 3)]
