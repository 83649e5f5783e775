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
A restart's first lookup reads only the kept first steps a tolerance can let through.

A tree's kept first steps keep their vectors sorted by one element
(:mod:`..store.columns`). Under a box (``abs``) or ``norm`` tolerance a candidate
passes only if that element is within its tolerance of the current value, so the
rows outside that band fail whatever their other elements are: the lookup reads and
scores the band (and the rows the sort could not place), and chooses exactly what
scoring every row would. Its misses are not answered here: a miss explains itself
with the nearest failing candidates of the whole set, so the caller reads it whole.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .tolerance import Current, ToleranceCheck
from ..records import CompareMode, Node, SensorSpec
from ..store.columns import Columns, columns_of, joined

__all__ = ['band_of', 'band_tolerances', 'Rows']

_BANDED = (CompareMode.ABS, CompareMode.NORM)
"""Modes under which one element's deviation is at most the score (in tolerances)."""


class Rows(Sequence[Node]):
    """Some of a candidate list's nodes, by their place in it (read when asked)."""

    def __init__(self, nodes: Sequence[Node], rows: np.ndarray) -> None:
        self._nodes = nodes
        self.rows = rows

    def __len__(self) -> int:
        return int(self.rows.size)

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        return self._nodes[int(self.rows[i])]


def band_of(check: ToleranceCheck, candidates: Sequence[Node], kept: Columns,
            current: Current) -> tuple[Rows, Columns] | None:
    """
    Return the candidates that may pass now and their columns, or None to score all.

    None: the kept vectors are not sorted by an element this check bounds on its own,
    the current value of that element is unknown, or the band is not small.

    :param candidates: The list ``kept`` belongs to (its first ``kept.n``; the rest,
        first steps added after them, are always in the band).
    :raises StoreError: the kept vectors cannot be read.
    """
    if kept.key is None:
        return None
    name, element = kept.key
    for sensor, (x, _) in zip(check.compiled, current, strict=True):
        if sensor.name == name:
            break
    else:
        return None
    vectors = kept.sensors.get(name)
    if (x is None or sensor.mode not in _BANDED or vectors is None or vectors.k != x.shape[0]
            or element >= x.shape[0] or sensor.tol_for(x.shape[0]) is not None):
        return None
    tol = float(sensor.tol[element] if sensor.tol.size > 1 else sensor.tol[0])
    at = float(x[element])
    margin = tol * 1e-6 + 1e-9 * (1.0 + abs(at))  # far above the rounding of a score
    band = kept.band(at - tol - margin, at + tol + margin)
    if band is None:
        return None
    rows, columns = band
    if len(candidates) > kept.n:
        tail = columns_of([candidates[i] for i in range(kept.n, len(candidates))])
        both = joined(columns, tail)
        if both is None:
            return None
        rows, columns = np.concatenate([rows, np.arange(kept.n, len(candidates))]), both
    return Rows(candidates, rows), columns


def band_tolerances(sensors: Sequence[SensorSpec]) -> dict[str, np.ndarray]:
    """Return what a store sorts kept first steps by (``Store.order_first_steps``)."""
    if not sensors:  # (a node without sensors replays nothing it has not been told to)
        return {}
    check = ToleranceCheck(sensors=sensors)
    return {s.name: s.tol for s in check.compiled if s.mode in _BANDED}
