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
How much a camera's grid varies between frames of one scene: what a tolerance is proposed from.

A camera check (``mode: image``) compares one recorded grid with one current grid, the light
removed, and fails on its worst cell (:func:`~muscle_mem_ros.checks.images.deviations`). So
the variation that matters between frames of an unchanged scene is the same number: the
largest cell deviation, light removed, between two of them. ``muscle-mem init`` measures it
between frames taken at rest, ``muscle-mem calibrate`` between recorded repeats of a step;
both propose a margin over it (:mod:`muscle_mem_ros.cli.initcameras`,
:mod:`.calibration`). Cells that are NaN (masked, no valid depth) count for nothing.

ROS-free: grids are the vectors :meth:`~muscle_mem_ros.checks.images.Grid.vector` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
import math

import numpy as np

from .images import COLOUR_ENCODINGS, DEPTH_ENCODINGS, deviations

__all__ = ['cell_noise', 'channels_of', 'comparable', 'default_cell', 'largest_deviation',
           'MAX_FRAMES']

MAX_FRAMES = 40
"""Most frames compared pairwise (evenly spread over those given): 780 pairs."""


def channels_of(encoding: str, *, compressed: bool = False) -> int:
    """
    Return a camera grid's channels for an encoding: 3 colour, 1 grey, 0 depth (metres).

    :param compressed: A CompressedImage sensor (its encoding is what it decodes to).
    :raises ValueError: an encoding not read here.
    """
    if compressed:
        if encoding not in ('rgb8', 'mono8'):
            raise ValueError(f'a CompressedImage sensor is rgb8 or mono8, not {encoding!r}')
        return 3 if encoding == 'rgb8' else 1
    if encoding in DEPTH_ENCODINGS:
        return 0
    if encoding in COLOUR_ENCODINGS:
        return len(COLOUR_ENCODINGS[encoding][2])
    raise ValueError(f'image encoding {encoding!r} is not read')


def default_cell(width: int, height: int) -> int:
    """Return the cell side the params file defaults to (``imageconfig``): 1/15 of the view."""
    return max(4, min(width, height) // 15)


def comparable(size: int, channels: int) -> bool:
    """Whether a vector of ``size`` elements can be a grid of ``channels`` channels."""
    return size > 0 and size % max(channels, 1) == 0


def largest_deviation(a: np.ndarray, b: np.ndarray, *, channels: int) -> float:
    """
    Return the largest cell deviation of two grids, light removed, NaN cells ignored.

    Infinite when they cannot be compared: other sizes (a camera that changed resolution or
    encoding), or no cell valid on both sides.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or not comparable(a.size, channels):
        return math.inf
    dev = np.abs(deviations(a, b, channels=channels))
    finite = dev[np.isfinite(dev)]
    return float(finite.max()) if finite.size else math.inf


def _spread(vectors: Sequence[np.ndarray]) -> np.ndarray:
    if len(vectors) <= MAX_FRAMES:
        return np.asarray(vectors, dtype=np.float64)
    picks = np.linspace(0, len(vectors) - 1, MAX_FRAMES).round().astype(int)
    return np.asarray([vectors[i] for i in picks], dtype=np.float64)


def cell_noise(vectors: Sequence[np.ndarray], *, channels: int) -> np.ndarray:
    """
    Return, per cell, its largest deviation (light removed) between any two of the grids.

    Over every channel of the cell: one value per cell position (rows x columns, flat). NaN
    where the cell was never valid on both sides of a pair.

    :param vectors: Grids of one size (at least two); at most :data:`MAX_FRAMES` are used.
    :raises ValueError: fewer than two grids, or grids of other sizes.
    """
    if len(vectors) < 2:
        raise ValueError(f'{len(vectors)} frame(s): two are needed to compare')
    sizes = {len(v) for v in vectors}
    if len(sizes) != 1 or not comparable(sizes.pop(), channels):
        raise ValueError('the frames are grids of other sizes: they cannot be compared')
    data = _spread(vectors)
    planes = max(channels, 1)
    worst = np.full(data.shape[1] // planes, np.nan)
    for i in range(1, len(data)):
        dev = np.abs(deviations(data[:i], data[i], channels=channels))
        per_cell = dev.reshape(i, planes, -1)
        with np.errstate(invalid='ignore'):
            found = np.where(np.isfinite(per_cell), per_cell, -np.inf).max(axis=(0, 1))
        found[~np.isfinite(found)] = np.nan
        worst = np.fmax(worst, found)
    return worst
