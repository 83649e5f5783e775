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
How ``muscle-mem init`` writes a camera (``sensor_msgs/msg/Image``, ``CompressedImage``).

ROS-free: the survey hands each frame received to :func:`hear` (the message is only read by
its fields), and :func:`camera_from` turns what a topic sent while sampled into a sensor
entry, or says why it is left out.

* **What the frames are**: ``encoding``, ``width`` and ``height`` as received (a
  CompressedImage is ``rgb8``, or ``mono8`` when it decodes to grey); ``cell`` by the node's
  default rule, 1/15 of the shorter side, at least 4 pixels.
* **Tolerance**: :data:`MARGIN` (1.5, calibrate's margin) times the largest cell deviation,
  light removed, between any two frames taken at rest (:func:`.imagenoise.cell_noise`: the
  very number a check compares with its tolerance, so its extreme over every pair of frames
  already is the peak to peak of numeric sensors), rounded up to two significant digits; at
  least :data:`FLOORS` (0.05 of full intensity, 13 grey levels; depth 0.01 m): a camera quiet
  at rest (a simulation) would otherwise fail on a change of light the median does not take
  out whole.
* **Region of interest**: none, unless a border row or column of cells varied at rest more
  than :data:`BORDER_FACTOR` times the rest of the view and more than the floor allows (a
  vignetted or flickering edge): such borders are cut off, at most half the rows and half
  the columns, and the file says which and why. Masks are never proposed: what moves in the
  view while a task runs is the user's knowledge, not the noise's.
* **Left out, saying why**: fewer than two frames decoded; an encoding not read here; frames
  that do not decode; a camera whose resolution or encoding changed while sampled (a file
  written for one would fail every check on the other); a depth camera with no valid cell.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
import textwrap
from typing import Any

import numpy as np

from .initrules import max_age
from ..checks import calibration
from ..checks.imagenoise import cell_noise, channels_of, default_cell
from ..checks.images import decode_compressed, decode_raw, Grid
from ..errors import ImageError

__all__ = ['BORDER_FACTOR', 'Camera', 'CAMERA_TYPES', 'camera_from', 'camera_lines',
           'CameraSample', 'FLOORS', 'Heard', 'hear', 'MARGIN']

RAW = 'sensor_msgs/msg/Image'
COMPRESSED = 'sensor_msgs/msg/CompressedImage'
CAMERA_TYPES = (RAW, COMPRESSED)
"""Topic types init writes as camera sensors."""
MARGIN = calibration.DEFAULT_MARGIN
"""A camera's tolerance is this times the largest cell deviation heard at rest."""
FLOORS = {'intensity': 0.05, 'depth': 0.01}
"""Smallest camera tolerance: of full intensity (colour, grey), metres (depth)."""
BORDER_FACTOR = 3.0
"""A border of cells is left out of the region of interest when it varied this many times
more at rest than the rest of the view."""


@dataclass(frozen=True)
class Heard:
    """
    One frame as received.

    :ivar encoding: What a sensor reading it would be configured with ('' when unknown).
    :ivar width: Pixels (0 when unknown).
    :ivar height: Pixels.
    :ivar vector: Its grid vector at the default cell size, None when it did not decode.
    :ivar error: Why it did not decode.
    """

    encoding: str
    width: int
    height: int
    vector: np.ndarray | None = None
    error: str = ''


def hear(msg: Any, *, compressed: bool) -> Heard:
    """Decode one Image or CompressedImage message into its grid vector (or why not)."""
    encoding, width, height = ('', 0, 0) if compressed else \
        (str(msg.encoding), int(msg.width), int(msg.height))
    try:
        if compressed:
            frame = decode_compressed(data=bytes(msg.data), format=str(msg.format))
            grey = frame.pixels.ndim == 3 and frame.pixels.shape[2] == 1
            encoding = 'mono8' if grey else 'rgb8'
        else:
            frame = decode_raw(data=bytes(msg.data), width=width, height=height,
                               step=int(msg.step), encoding=encoding,
                               is_bigendian=bool(msg.is_bigendian))
        width, height = frame.shape
        grid = Grid(width, height, default_cell(width, height))
        return Heard(encoding, width, height, grid.vector(frame))
    except (ImageError, ValueError) as err:
        return Heard(encoding, width, height, None, str(err))


@dataclass(frozen=True)
class CameraSample:
    """
    What one camera topic sent while sampled.

    :ivar topic: The topic.
    :ivar type: Image or CompressedImage.
    :ivar times: Receive times, seconds (monotonic).
    :ivar heard: Each frame, decoded or not.
    """

    topic: str
    type: str  # noqa: A003 (the params file's key)
    times: tuple[float, ...]
    heard: tuple[Heard, ...]


@dataclass(frozen=True)
class Camera:
    """
    A camera entry of the file, with the numbers it was computed from.

    :ivar sample: What was heard.
    :ivar encoding: The frames' encoding.
    :ivar width: Pixels.
    :ivar height: Pixels.
    :ivar cell: Cell side, pixels.
    :ivar roi: x, y, width, height, or None for the whole view.
    :ivar roi_note: Why that region, for the file's comment.
    :ivar tolerance: The one tolerance.
    :ivar rule: ``noise`` or ``floor``.
    :ivar noise: Largest cell deviation at rest inside the region.
    :ivar frames: Frames that decoded.
    :ivar dropped: Frames that did not.
    :ivar max_age: Seconds.
    :ivar rate: Messages per second heard.
    """

    sample: CameraSample
    encoding: str
    width: int
    height: int
    cell: int
    roi: tuple[int, int, int, int] | None
    roi_note: str
    tolerance: float
    rule: str
    noise: float
    frames: int
    dropped: int
    max_age: float
    rate: float

    @property
    def depth(self) -> bool:
        """Whether it is a depth camera (tolerance in metres)."""
        return channels_of(self.encoding, compressed=self.sample.type == COMPRESSED) == 0


def _round_up(value: float) -> float:
    scale = 10 ** (1 - math.floor(math.log10(value)))
    return float(math.ceil(value * scale - 1e-9) / scale)


def _trim(noise: np.ndarray, floor: float) -> tuple[int, int, int, int, list[str]]:
    """Return (top, bottom, left, right) cells kept (end exclusive) and the borders cut."""
    rows, columns = noise.shape
    top, bottom, left, right = 0, rows, 0, columns
    cut: list[str] = []
    while True:
        window = noise[top:bottom, left:right]
        borders = {'top': (window[0], window[1:]), 'bottom': (window[-1], window[:-1]),
                   'left': (window[:, 0], window[:, 1:]), 'right': (window[:, -1], window[:, :-1])}
        best, worst = '', 0.0
        for side, (edge, rest) in borders.items():
            if side in ('top', 'bottom') and bottom - top - 1 < (rows + 1) // 2:
                continue
            if side in ('left', 'right') and right - left - 1 < (columns + 1) // 2:
                continue
            if not np.isfinite(edge).any() or not np.isfinite(rest).any():
                continue
            high, calm = float(np.nanmax(edge)), float(np.nanmax(rest))
            if high > BORDER_FACTOR * calm and high * MARGIN > floor and high > worst:
                best, worst = side, high
        if not best:
            return top, bottom, left, right, cut
        cut.append(best)
        top, bottom = top + (best == 'top'), bottom - (best == 'bottom')
        left, right = left + (best == 'left'), right - (best == 'right')


def _region(camera: Heard, cell: int, noise: np.ndarray,
            floor: float) -> tuple[tuple[int, int, int, int] | None, str, np.ndarray]:
    columns, rows = camera.width // cell, camera.height // cell
    grid = noise.reshape(rows, columns)
    top, bottom, left, right, cut = _trim(grid, floor)
    kept = grid[top:bottom, left:right]
    if not cut:
        return None, ('region of interest: the whole view (no border of cells varied at rest '
                      f'more than {BORDER_FACTOR:g} x the rest); no masks (add them for what '
                      'moves in the view)'), kept
    roi = (left * cell, top * cell, (right - left) * cell, (bottom - top) * cell)
    said = ', '.join(f'{cut.count(s)} {s}' for s in ('top', 'bottom', 'left', 'right')
                     if s in cut)
    return roi, (f'region of interest: border cells cut off ({said}: they varied at rest more '
                 f'than {BORDER_FACTOR:g} x the rest of the view); no masks'), kept


def camera_from(sample: CameraSample) -> Camera | str:
    """Return the camera entry of a sampled topic, or why it is left out (module docstring)."""
    heard = sample.heard
    if not heard:
        return 'sent no frame while sampled'
    good = [h for h in heard if h.vector is not None]
    kinds = sorted({(h.width, h.height, h.encoding) for h in heard
                    if h.vector is not None or (h.width and h.encoding)})
    if len(kinds) > 1:
        seen = ', '.join(f'{w}x{h} {e}' for w, h, e in kinds)
        return (f'its frames changed while sampled ({seen}): a camera sensor is written for '
                'one resolution and encoding; run init again once the camera sends one kind')
    if len(good) < 2:
        why = next((h.error for h in heard if h.error), '')
        return (f'{len(good)} of {len(heard)} frame(s) decoded while sampled' +
                (f' ({why})' if why else '') + ': two are needed to measure its noise')
    first = good[0]
    compressed = sample.type == COMPRESSED
    channels = channels_of(first.encoding, compressed=compressed)
    floor = FLOORS['depth' if channels == 0 else 'intensity']
    cell = default_cell(first.width, first.height)
    per_cell = cell_noise([h.vector for h in good if h.vector is not None], channels=channels)
    if not np.isfinite(per_cell).any():
        return 'no cell of its frames was valid in two frames (depth: every pixel 0 or NaN)'
    roi, note, kept = _region(first, cell, per_cell, floor)
    noise = float(np.nanmax(kept))
    proposed = noise * MARGIN
    rule = 'noise' if proposed > floor else 'floor'
    age, rate = max_age(sample.times)
    return Camera(sample=sample, encoding=first.encoding, width=first.width,
                  height=first.height, cell=cell, roi=roi, roi_note=note,
                  tolerance=_round_up(proposed) if rule == 'noise' else floor, rule=rule,
                  noise=noise, frames=len(good), dropped=len(heard) - len(good),
                  max_age=age, rate=rate)


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def camera_lines(key: str, camera: Camera) -> list[str]:
    """Return the file's lines for one camera, its comments saying where each number came from."""
    unit = 'm' if camera.depth else 'of full intensity'
    removed = 'metres as read' if camera.depth else 'light removed'
    source = (f'{MARGIN:g} x the largest cell deviation at rest ({removed})'
              if camera.rule == 'noise' else
              f'the floor {FLOORS["depth" if camera.depth else "intensity"]:g} (quieter '
              f'than that at rest: {MARGIN:g} x {camera.noise:.2g})')
    dropped = f', {camera.dropped} did not decode' if camera.dropped else ''
    lines = [f'      # {camera.sample.topic}: a camera, {camera.width}x{camera.height} '
             f'{camera.encoding}, compared as {camera.cell}-pixel cells (mode image);',
             f'      # {camera.rate:.3g} Hz heard, {camera.frames} frames{dropped}; largest cell '
             f'deviation at rest {camera.noise:.2g} {unit};',
             f'      # tolerance: {source};',
             *(f'      # {line}' for line in textwrap.wrap(camera.roi_note, 88)),
             f'      {key}:', f'        topic: {_q(camera.sample.topic)}',
             f'        type: {camera.sample.type}', f'        encoding: {camera.encoding}',
             f'        width: {camera.width}', f'        height: {camera.height}',
             f'        cell: {camera.cell}']
    if camera.roi is not None:
        lines.append(f"        roi: [{', '.join(str(v) for v in camera.roi)}]")
    lines += [f'        tolerance: [{camera.tolerance:g}]', '        mode: image',
              f'        max_age: {camera.max_age:g}']
    return lines
