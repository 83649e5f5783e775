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
A step's recorded trace as plots: server-side SVG, one per watched series, with the tube.

A trace (:class:`~..records.Trace`) holds, per watched sensor, the vector it read while the
step ran, against seconds since the goal was accepted; and the action's numeric feedback.
Each series becomes one plot: a polyline per element, and where the element's tolerance is
known (the node's params file, ``serve --params``) the tube a replay is judged against, the
recording plus and minus the tolerance (:mod:`..checks.tube` aligns a replay with it by
progress, so the band is drawn against the recording's own time). A moment can be marked
(a live trip's progress, for the page attached to a node).

The plot says how it maps numbers to pixels in ``data-`` attributes of the ``<svg>``
(``data-t0``/``t1``: the time range, ``data-v0``/``v1``: the value range, ``data-left``,
``data-top``, ``data-width``, ``data-height``: the plot area), so a reader (a test) can turn
the polyline's points back into the trace's numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape
import math

from ..records import Series

__all__ = ['MAX_ELEMENTS', 'series_svg']

MAX_ELEMENTS = 12
"""Elements drawn at most per series (an image sensor's grid has hundreds)."""

_COLOURS = ('#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b',
            '#e377c2', '#7f7f7f', '#bcbd22', '#393b79', '#637939')
_W, _H = 560, 180
_LEFT, _TOP, _RIGHT, _BOTTOM = 64, 14, 150, 30


def _span(low: float, high: float) -> tuple[float, float]:
    if not (math.isfinite(low) and math.isfinite(high)):
        return 0.0, 1.0
    if high - low < 1e-12:
        pad = max(abs(low) * 0.05, 1e-3)
        return low - pad, high + pad
    pad = (high - low) * 0.05
    return low - pad, high + pad


def series_svg(name: str, series: Series, *, labels: Sequence[str] = (),
               tolerance: Callable[[int], float | None] | None = None,
               mark: float | None = None) -> str:
    """
    Return one series as an ``<svg>`` plot: a polyline per element, the tube where known.

    :param name: What the series is (a sensor's name, ``feedback``).
    :param series: Its times and vectors.
    :param labels: Each element's name (default ``name[i]``).
    :param tolerance: An element's tolerance by index (None: unknown, no tube).
    :param mark: A time to mark with a vertical line (seconds since the goal's acceptance).
    """
    width = len(series.values[0]) if series.values else 0
    shown = min(width, MAX_ELEMENTS)
    times = [float(t) for t in series.times]
    tols = [tolerance(i) if tolerance is not None else None for i in range(shown)]
    finite = [(v[i] - (tols[i] or 0.0), v[i] + (tols[i] or 0.0))
              for v in series.values for i in range(shown) if math.isfinite(v[i])]
    v0, v1 = _span(min((lo for lo, _ in finite), default=0.0),
                   max((hi for _, hi in finite), default=1.0))
    t0, t1 = (times[0], times[-1]) if times else (0.0, 1.0)
    if t1 - t0 < 1e-9:
        t1 = t0 + 1.0
    area_w, area_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def x(t: float) -> float:
        return _LEFT + (t - t0) / (t1 - t0) * area_w

    def y(v: float) -> float:
        return _TOP + area_h - (v - v0) / (v1 - v0) * area_h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{_W}" '
             f'height="{_H}" viewBox="0 0 {_W} {_H}" data-series="{escape(name)}" '
             f'data-t0="{t0!r}" data-t1="{t1!r}" data-v0="{v0!r}" data-v1="{v1!r}" '
             f'data-left="{_LEFT}" data-top="{_TOP}" data-width="{area_w}" '
             f'data-height="{area_h}" role="img" aria-label="trace of {escape(name)}">',
             f'<rect class="area" x="{_LEFT}" y="{_TOP}" width="{area_w}" height="{area_h}"/>',
             f'<text class="axis" x="{_LEFT - 4}" y="{_TOP + 10}" text-anchor="end">'
             f'{v1:.4g}</text>',
             f'<text class="axis" x="{_LEFT - 4}" y="{_TOP + area_h}" text-anchor="end">'
             f'{v0:.4g}</text>',
             f'<text class="axis" x="{_LEFT}" y="{_H - 10}">{t0:.3g} s</text>',
             f'<text class="axis" x="{_LEFT + area_w}" y="{_H - 10}" text-anchor="end">'
             f'{t1:.3g} s</text>']
    for i in range(shown):
        colour = _COLOURS[i % len(_COLOURS)]
        rows = [(t, v[i]) for t, v in zip(times, series.values) if math.isfinite(v[i])]
        tol = tols[i]
        if tol is not None and rows:
            upper = ' '.join(f'{x(t):.2f},{y(v + tol):.2f}' for t, v in rows)
            lower = ' '.join(f'{x(t):.2f},{y(v - tol):.2f}' for t, v in reversed(rows))
            parts.append(f'<polygon class="tube" data-element="{i}" data-tolerance="{tol!r}" '
                         f'fill="{colour}" points="{upper} {lower}"/>')
        points = ' '.join(f'{x(t):.2f},{y(v):.2f}' for t, v in rows)
        parts.append(f'<polyline class="trace" data-element="{i}" stroke="{colour}" '
                     f'points="{points}"/>')
        label = labels[i] if i < len(labels) else f'{name}[{i}]'
        extra = f' \u00b1{tol:.3g}' if tol is not None else ''
        parts.append(f'<text class="legend" x="{_W - _RIGHT + 8}" y="{_TOP + 10 + 13 * i}" '
                     f'fill="{colour}">{escape(label[:20])}{extra}</text>')
    if mark is not None and t0 <= mark <= t1:
        parts.append(f'<line class="mark" x1="{x(mark):.2f}" x2="{x(mark):.2f}" y1="{_TOP}" '
                     f'y2="{_TOP + area_h}"><title>{mark:.3f} s</title></line>')
    if width > shown:
        parts.append(f'<text class="more" x="{_LEFT}" y="{_H - 1}">{width - shown} more '
                     f'elements not drawn</text>')
    parts.append('</svg>')
    return ''.join(parts)
