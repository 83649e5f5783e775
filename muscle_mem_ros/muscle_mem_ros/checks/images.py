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
Camera frames as features: decoded, cut to a region of interest, reduced to a grid of cells.

A camera frame is too big and too noisy to compare pixel by pixel, and a pixel says
nothing a person can check. What a check needs is "does the scene in this part of the
view look as it did": so a frame becomes the mean of each ``cell`` x ``cell`` block of
pixels inside the region of interest (a :class:`Grid`), and the masked blocks (a screen,
a window, the part of the view the arm sweeps through) become NaN, which no comparison
counts. Averaging a block of n pixels divides independent sensor noise by sqrt(n): a
16 x 16 cell turns a noise of 2 grey levels into one of 0.13, while an object that fills
a third of a cell still moves the cell's mean by a third of its contrast.

Colour and mono frames are read as intensities in [0, 1] (mono16 over 65535); depth
frames (``16UC1`` in millimetres, ``32FC1`` in metres) as metres, with invalid pixels
(0, NaN, inf) left out of their cell's mean and a cell with fewer than half its pixels
valid left out whole (NaN).

Decoding uses what the libraries do: numpy views of the raw buffer (row ``step`` honoured,
big-endian 16-bit data swapped), and Pillow for JPEG and PNG. The comparison of two
grids is :func:`deviations`.
"""

from __future__ import annotations

from dataclasses import dataclass
import io
import math

import numpy as np

from ..errors import ImageError, ImageMismatch
from ..records import ImageLayout

__all__ = ['COLOUR_ENCODINGS', 'DEPTH_ENCODINGS', 'decode_compressed', 'decode_raw',
           'deviations', 'Frame', 'Grid', 'Region', 'thumbnail_png']

COLOUR_ENCODINGS: dict[str, tuple[int, str, tuple[int, ...]]] = {
    'rgb8': (3, 'u1', (0, 1, 2)), 'bgr8': (3, 'u1', (2, 1, 0)),
    'rgba8': (4, 'u1', (0, 1, 2)), 'bgra8': (4, 'u1', (2, 1, 0)),
    'mono8': (1, 'u1', (0,)), 'mono16': (1, 'u2', (0,))}
"""Encoding -> (channels in the buffer, numpy dtype, the channels kept as R, G, B or grey)."""
DEPTH_ENCODINGS = {'16UC1': ('u2', 0.001), '32FC1': ('f4', 1.0)}
"""Depth encoding -> (numpy dtype, metres per unit)."""


@dataclass(frozen=True)
class Frame:
    """
    One decoded frame.

    :ivar pixels: (height, width, channels) intensities: uint8 as the camera sent them
        (8-bit encodings, JPEG, PNG: kept as they are, so a grid is reduced in Pillow's C),
        or float32 in [0, 1] (mono16); or (height, width) float32 metres for depth, with
        NaN where the pixel is invalid.
    :ivar encoding: The encoding it was decoded from ('rgb8', '16UC1', 'jpeg', ...).
    :ivar order: Which of ``pixels``' channels are red, green and blue (or grey): a bgr8 or
        rgba8 frame is kept in the camera's order and only its grid is reordered.
    """

    pixels: np.ndarray
    encoding: str
    order: tuple[int, ...] | None = None

    @property
    def depth(self) -> bool:
        """Whether the frame is a depth image (metres)."""
        return self.pixels.ndim == 2

    def intensities(self) -> np.ndarray:
        """Return the pixels as float32 intensities in [0, 1] (metres for depth)."""
        pixels = self.pixels if self.order is None else self.pixels[:, :, list(self.order)]
        if pixels.dtype == np.uint8:
            return np.asarray(pixels, dtype=np.float32) / np.float32(255.0)
        return pixels

    @property
    def shape(self) -> tuple[int, int]:
        """Return (width, height)."""
        return int(self.pixels.shape[1]), int(self.pixels.shape[0])


@dataclass(frozen=True)
class Region:
    """A rectangle of the view, in pixels: left, top, width and height."""

    x: int
    y: int
    width: int
    height: int

    def __post_init__(self) -> None:
        if min(self.x, self.y) < 0 or min(self.width, self.height) <= 0:
            raise ValueError(f'a region is [x, y, width, height] with x, y >= 0 and a positive '
                             f'size, got {[self.x, self.y, self.width, self.height]}')

    def within(self, width: int, height: int) -> bool:
        """Whether the region lies inside a width x height view."""
        return self.x + self.width <= width and self.y + self.height <= height


@dataclass(frozen=True)
class Grid:
    """
    How a frame becomes a vector: the region of interest, the masks, the cell size.

    :ivar width: The frame width the grid was made for (another size is a miss, not a crash).
    :ivar height: The frame height.
    :ivar cell: Side of a cell in pixels; the region is cut to whole cells.
    :ivar roi: The region of interest, or None for the whole view.
    :ivar masks: Regions left out; a cell they touch is NaN.
    """

    width: int
    height: int
    cell: int = 16
    roi: Region | None = None
    masks: tuple[Region, ...] = ()

    def __post_init__(self) -> None:
        if self.cell <= 0:
            raise ValueError(f'cell must be a positive number of pixels, got {self.cell}')
        area = self.area
        if not area.within(self.width, self.height):
            raise ValueError(f'the region of interest {area} is outside the '
                             f'{self.width}x{self.height} view')
        if area.width < self.cell or area.height < self.cell:
            raise ValueError(f'the region of interest {area} holds no whole {self.cell}-pixel '
                             'cell')

    @property
    def area(self) -> Region:
        """Return the region of interest (the whole view when none was given)."""
        return self.roi or Region(0, 0, self.width, self.height)

    @property
    def cells(self) -> tuple[int, int]:
        """Return (columns, rows) of cells."""
        return self.area.width // self.cell, self.area.height // self.cell

    def cell_region(self, index: int) -> Region:
        """Return the pixels of the cell at flat index ``index`` (over all channels' cells)."""
        columns, rows = self.cells
        index %= columns * rows
        row, column = divmod(index, columns)
        return Region(self.area.x + column * self.cell, self.area.y + row * self.cell,
                      self.cell, self.cell)

    def layout(self, channels: int) -> ImageLayout:
        """Return where each element of this grid's vectors lies (channels: 3, 1, 0 depth)."""
        columns, rows = self.cells
        return ImageLayout(channels, columns, rows, self.cell, self.area.x, self.area.y)

    def vector(self, frame: Frame) -> np.ndarray:
        """
        Return the frame's cell means, flat: channel-major, then row, then column.

        :raises ImageError: The frame's size is not the grid's.
        """
        if frame.shape != (self.width, self.height):
            raise ImageMismatch(f'the camera sends {frame.shape[0]}x{frame.shape[1]} frames, '
                                f'the check was made for {self.width}x{self.height}')
        area = self.area
        columns, rows = self.cells
        c = self.cell
        crop = frame.pixels[area.y:area.y + rows * c, area.x:area.x + columns * c]
        if crop.dtype == np.uint8:
            grid = _reduced(crop, c)
            if frame.order is not None:
                grid = grid[:, :, list(frame.order)]
            grid = grid.transpose(2, 0, 1) / 255.0
        elif frame.depth:
            blocks = crop.reshape(rows, c, columns, c).swapaxes(1, 2).reshape(rows, columns, -1)
            valid = np.isfinite(blocks)
            counts = valid.sum(axis=2)
            sums = np.where(valid, blocks, 0.0).sum(axis=2)
            means = np.where(counts * 2 >= c * c, sums / np.maximum(counts, 1), np.nan)
            grid = means[np.newaxis]
        else:
            grid = crop.reshape(rows, c, columns, c, -1).mean(axis=(1, 3)).transpose(2, 0, 1)
        grid = grid.astype(np.float64)
        for mask in self.masks:
            left = max(0, (mask.x - area.x) // c)
            top = max(0, (mask.y - area.y) // c)
            right = min(columns, -(-(mask.x + mask.width - area.x) // c))
            bottom = min(rows, -(-(mask.y + mask.height - area.y) // c))
            if right > left and bottom > top:
                grid[:, top:bottom, left:right] = np.nan
        return np.asarray(grid.reshape(-1))


def _reduced(pixels: np.ndarray, cell: int) -> np.ndarray:
    """Return the mean of each ``cell`` x ``cell`` block of uint8 pixels, (rows, columns, ch)."""
    from PIL import Image

    height, width, channels = pixels.shape
    mode = {1: 'L', 3: 'RGB', 4: 'RGBX'}[channels]  # four: each reduced alike, alpha too
    data = np.ascontiguousarray(pixels)
    image = Image.frombuffer(mode, (width, height), data, 'raw', mode, 0, 1)
    means = np.asarray(image.reduce(cell), dtype=np.float64)
    return means[:, :, np.newaxis] if channels == 1 else means


def decode_raw(*, data: bytes, width: int, height: int, step: int, encoding: str,
               is_bigendian: bool = False) -> Frame:
    """
    Decode a ``sensor_msgs/msg/Image`` payload.

    :raises ImageError: An encoding not listed in :data:`COLOUR_ENCODINGS` or
        :data:`DEPTH_ENCODINGS`, or a buffer too short for the size it claims.
    """
    keep: tuple[int, ...] = (0,)
    if encoding in DEPTH_ENCODINGS:
        kind, scale = DEPTH_ENCODINGS[encoding]
        channels = 1
    elif encoding in COLOUR_ENCODINGS:
        channels, kind, keep = COLOUR_ENCODINGS[encoding]
    else:
        known = [*COLOUR_ENCODINGS, *DEPTH_ENCODINGS]
        raise ImageError(f'image encoding {encoding!r} is not read (known: {", ".join(known)})')
    dtype = np.dtype(kind).newbyteorder('>' if is_bigendian else '<')
    row = width * channels * dtype.itemsize
    if width <= 0 or height <= 0 or step < row or len(data) < step * (height - 1) + row:
        raise ImageError(f'a {width}x{height} {encoding} image needs rows of {row} bytes '
                         f'(step {step}), got {len(data)} bytes')
    rows = np.frombuffer(data, dtype=np.uint8, count=step * (height - 1) + row)
    rows = np.lib.stride_tricks.as_strided(rows, shape=(height, row), strides=(step, 1))
    values = np.ascontiguousarray(rows).view(dtype).reshape(height, width, channels)
    if encoding in DEPTH_ENCODINGS:
        metres = values[:, :, 0].astype(np.float32) * np.float32(scale)
        metres[~np.isfinite(metres) | (metres <= 0)] = np.nan
        return Frame(metres, encoding)
    if kind == 'u2':
        return Frame(values[:, :, list(keep)].astype(np.float32) / np.float32(65535.0), encoding)
    return Frame(values, encoding, None if keep == tuple(range(channels)) else keep)


def decode_compressed(*, data: bytes, format: str) -> Frame:  # noqa: A002 (the message's field)
    """
    Decode a ``sensor_msgs/msg/CompressedImage`` payload (JPEG or PNG) with Pillow.

    :param format: The message's ``format`` field ('jpeg', 'png', 'rgb8; jpeg compressed bgr8').
    :raises ImageError: A format other than JPEG or PNG, or data Pillow cannot decode.
    """
    from PIL import Image, UnidentifiedImageError

    said = format.lower()
    if not any(word in said for word in ('jpeg', 'jpg', 'png')):
        raise ImageError(f'compressed image format {format!r} is not read (JPEG or PNG)')
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            if image.mode.startswith('I'):  # 16-bit grey PNG
                pixels = np.asarray(image, dtype=np.float32) / np.float32(65535.0)
            elif image.mode in ('1', 'L', 'LA'):
                pixels = np.asarray(image.convert('L'))
            else:
                pixels = np.asarray(image.convert('RGB'))
    except (UnidentifiedImageError, OSError, ValueError) as err:
        raise ImageError(f'a {format} image could not be decoded: {err}') from err
    if pixels.ndim == 2:
        pixels = pixels[:, :, np.newaxis]
    return Frame(pixels, 'png' if 'png' in said else 'jpeg')


def deviations(recorded: np.ndarray, current: np.ndarray, *, channels: int) -> np.ndarray:
    """
    Return each cell's deviation from the recording, the scene's overall brightness change removed.

    A camera's exposure and the room's light move every cell of a colour frame by about the
    same amount; an object that moved changes a few cells. So the median of the per-cell
    differences (per channel) is taken as the light's change and subtracted: a local change
    stands out, a global one does not (and a change over more than half the view, which is no
    longer a change of light, stays). Depth is metres, which light does not move: it is
    compared as read. Cells that are NaN on either side (masked, or too few valid depth
    pixels) are NaN here, and count for nothing.

    :param recorded: A recorded grid vector (:meth:`Grid.vector`), or (n, k) of them.
    :param current: The current grid vector, (k,).
    :param channels: The grid's channels: 3 (colour), 1 (grey), 0 (depth, in metres).
    """
    diff = np.asarray(current, dtype=np.float64) - np.asarray(recorded, dtype=np.float64)
    if channels == 0:
        return diff
    flat = diff.reshape(-1, diff.shape[-1]) if diff.ndim > 1 else diff[np.newaxis]
    out = np.empty_like(flat)
    per = flat.shape[1] // channels
    for ch in range(channels):
        part = flat[:, ch * per:(ch + 1) * per]
        finite = np.isfinite(part)
        if finite.all():  # numpy's nanmedian is ten times slower: only where a cell is NaN
            light = np.median(part, axis=1, keepdims=True) if part.size else np.zeros((1, 1))
        else:
            light = np.array([[np.median(row[ok]) if ok.any() else 0.0]
                              for row, ok in zip(part, finite)])
        out[:, ch * per:(ch + 1) * per] = part - light
    return out.reshape(diff.shape)


def thumbnail_png(frame: Frame, *, side: int = 96) -> bytes:
    """
    Return a small PNG of the frame (longest side ``side`` pixels), for people to look at.

    Depth is shown as grey, near bright, from its nearest to its farthest valid pixel.
    """
    from PIL import Image

    pixels = frame.intensities()
    if frame.depth:
        valid = pixels[np.isfinite(pixels)]
        near, far = (float(valid.min()), float(valid.max())) if valid.size else (0.0, 1.0)
        span = far - near if far > near else 1.0
        grey = np.where(np.isfinite(pixels), 1.0 - (pixels - near) / span, 0.0)
        pixels = grey[:, :, np.newaxis]
    data = np.clip(np.rint(pixels * 255.0), 0, 255).astype(np.uint8)
    image = Image.fromarray(data[:, :, 0] if data.shape[2] == 1 else data)
    width, height = image.size
    scale = side / max(width, height)
    if scale < 1.0:
        size = (max(1, math.floor(width * scale)), max(1, math.floor(height * scale)))
        image = image.resize(size, Image.Resampling.BOX)
    out = io.BytesIO()
    image.save(out, format='PNG', optimize=True)
    return out.getvalue()
