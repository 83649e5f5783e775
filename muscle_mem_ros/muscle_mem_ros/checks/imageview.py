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
A camera as it is traced and watched while a step runs: a coarse view, and where it moves.

The checks before and after a step compare a camera's full grid of cells
(:mod:`.images`). A trace keeps every frame of a step, so it keeps a coarse view
(:func:`watch_view`), and the watch (:mod:`.tube`) holds each of its cells to the
recorded path at the step's one progress, as it holds a joint.

A joint moves smoothly, so its value between two recorded samples lies between them. A
cell of a view does not: the arm's edge can cross a block of the view, enter and leave
it, between two frames, and a replay whose frames fall at other moments then sees a
value the recording never saw (measured in the demo's eyes story: a block at 10 Hz read
0.12 and 0.08 at two recorded frames, and 0.39 at a replayed frame between them, with
the joints on their recorded path). So where the recorded view moves (a block or one next
to it changed by more than half its tolerance from one frame to the next) the block's
path is not known between those frames, and the watch does not hold it there
(:func:`moving_cells`). What stays held is the part of the view the recording saw still
at that moment: a box dropped on the table, a hand in the part of the view the arm is
not crossing.
"""

from __future__ import annotations

from collections.abc import Sequence
import math

import numpy as np

from ..records import ImageLayout

__all__ = ['moving_cells', 'QUANTUM', 'WATCH_CELLS', 'watch_view']

WATCH_CELLS = 300
"""Cells per channel, at most, of a camera's view as a replayed motion is watched: 20 x 15 of
a 4:3 view, so a grid of that size or smaller is watched cell by cell. Not fewer: with blocks
of 2 x 2 cells of 16 px (at most 108 cells), a 6 cm box put on the demo's table during a
replayed motion was never seen by the watch, 6 times in 6 (the post-check saw it, its one
cell 0.31 off at tolerance 0.2); cell by cell, the watch stops the motion (bench/eyes.md)."""

QUANTUM = 1.0 / 1024.0
"""A watched view's values are rounded to this (a camera's own grey level is 1/255): a trace
of them compresses four times better in the store (zlib of float64), and no tolerance
notices."""


def _pooled(layout: ImageLayout) -> tuple[int, int, int]:
    """Return (pool, rows, columns): the cells per block side, and the view's blocks."""
    pool = max(1, math.ceil(math.sqrt(layout.rows * layout.columns / WATCH_CELLS)))
    return pool, -(-layout.rows // pool), -(-layout.columns // pool)


def watch_view(values: Sequence[float], layout: ImageLayout) -> tuple[float, ...]:
    """
    Return a camera's grid as it is traced and watched while a step runs: coarse, lit alike.

    A trace keeps every reading of the step (a camera's frame rate), so the view is small:
    blocks of cells averaged into at most :data:`WATCH_CELLS` per channel (NaN where a block
    is all masked), and each channel's median subtracted, so that the light's change
    between recording and replay does not count (the tube compares elements one by one and
    cannot take it out itself); then rounded to :data:`QUANTUM`. The channels stay apart: a
    red cube on a brown table is the table's brightness in grey. Depth is pooled in metres
    and not shifted.
    """
    planes = max(layout.channels, 1)
    grid = np.asarray(values, dtype=np.float64).reshape(planes, layout.rows, layout.columns)
    pool, rows, columns = _pooled(layout)
    padded = np.full((planes, rows * pool, columns * pool), np.nan)
    padded[:, :layout.rows, :layout.columns] = grid
    blocks = padded.reshape(planes, rows, pool, columns, pool).swapaxes(2, 3).reshape(
        planes, rows * columns, -1)
    valid = np.isfinite(blocks)
    counts = valid.sum(axis=2)
    pooled = np.where(counts > 0, np.where(valid, blocks, 0.0).sum(axis=2)
                      / np.maximum(counts, 1), np.nan)
    if layout.channels:
        for plane in pooled:
            finite = np.isfinite(plane)
            if finite.any():
                plane -= np.median(plane[finite])
    return tuple((np.round(pooled.reshape(-1) / QUANTUM) * QUANTUM).tolist())


def moving_cells(views: Sequence[Sequence[float]], layout: ImageLayout,
                 tolerance: float) -> np.ndarray:
    """
    Return, per recorded frame and view cell, whether the view moves there (see the module).

    A cell moves at a frame when it, or a block next to it (the eight around, in any
    channel), changed by more than half ``tolerance`` from the frame before or to the frame
    after. Half: a block the arm's edge crosses between two frames can read anything from
    the table to the arm, and a change of half the tolerance is already a block partly
    crossed.

    :param views: The recorded coarse views (:func:`watch_view`), one row per frame.
    :param layout: The camera's layout.
    :param tolerance: The camera's tolerance.
    :return: Booleans shaped as ``views`` (all False for views of another layout: the
        watch says those differ).
    """
    rows = np.asarray(views, dtype=np.float64)
    frames = rows.shape[0]
    _, height, width = _pooled(layout)
    if frames < 2 or rows.ndim != 2 or rows.shape[1] != max(layout.channels, 1) * height * width:
        return np.zeros(rows.shape, dtype=bool)
    planes = rows.reshape(frames, -1, height, width)
    with np.errstate(invalid='ignore'):
        step = np.nan_to_num(np.abs(np.diff(planes, axis=0)), nan=0.0) > tolerance / 2
    changed = step.any(axis=1)  # any channel
    around = np.zeros((frames, height, width), dtype=bool)
    around[1:] |= changed
    around[:-1] |= changed
    spread = np.pad(around, ((0, 0), (1, 1), (1, 1)))
    near = np.zeros_like(around)
    for dy in range(3):
        for dx in range(3):
            near |= spread[:, dy:dy + height, dx:dx + width]
    return np.repeat(near[:, np.newaxis], planes.shape[1], axis=1).reshape(rows.shape)
