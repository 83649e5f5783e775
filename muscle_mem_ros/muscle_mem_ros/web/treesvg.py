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
A task's tree as a picture: server-side SVG, one per parameter set.

Drawn from the entries :func:`..cli.inventory.task_tree` returns (what ``muscle-mem tree``
prints), left to right: a column per step, a row per leaf, a parent level with the middle
of its children. Each learned step is a circle labelled ``[step] tool``; a step with a
bound goal field is a ring in the binding colour with the bindings written under it (and
in its tooltip); a step that ends a trajectory links to that trajectory's page; a subtask
step is a square. Nothing is computed in the browser.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape
from typing import Any

__all__ = ['tree_svg', 'MAX_LEAVES']

MAX_LEAVES = 400
"""Leaves drawn at most; a larger tree says how many more there are."""

_DX = 190
_DY = 46
_PAD = 24
_R = 8


def _label(text: str, width: int = 26) -> str:
    return text if len(text) <= width else text[:width - 1] + '\u2026'


_Placed = tuple[dict[str, Any], float, dict[str, Any] | None]
"""An entry drawn, its row, and its parent's entry (None: a first step)."""


def _layout(roots: Sequence[dict[str, Any]]) -> tuple[list[_Placed], int]:
    """Return (entry, row, parent) for each drawn entry, and how many leaves were left out."""
    rows: dict[int, float] = {}
    leaves = 0
    left_out = 0
    stack: list[tuple[dict[str, Any], dict[str, Any] | None, bool]] = [
        (e, None, False) for e in reversed(roots)]
    order: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    while stack:
        entry, parent, done = stack.pop()
        if done:
            kids = [rows[id(c)] for c in entry['children'] if id(c) in rows]
            if kids:
                rows[id(entry)] = sum(kids) / len(kids)
                order.append((entry, parent))
            continue
        if not entry['children']:
            if leaves >= MAX_LEAVES:
                left_out += 1
                continue
            rows[id(entry)] = float(leaves)
            leaves += 1
            order.append((entry, parent))
            continue
        stack.append((entry, parent, True))
        stack.extend((c, entry, False) for c in reversed(entry['children']))
    placed = [(e, rows[id(e)], p) for e, p in order]
    return placed, left_out


def tree_svg(tree: dict[str, Any], link: Callable[[int], str]) -> str:
    """
    Return one tree (a :func:`..cli.inventory.task_tree` element) as an ``<svg>`` element.

    :param tree: ``{'params': ..., 'trajectories': [...], 'steps': [entry, ...]}``.
    :param link: The URL of a trajectory's page, by id.
    """
    placed, left_out = _layout(tree['steps'])
    depth = max((e['step'] for e, _, _ in placed), default=0)
    rows = max((r for _, r, _ in placed), default=0.0)
    width = int(_PAD * 2 + (depth + 1) * _DX + 120)
    height = int(_PAD * 2 + (rows + 1) * _DY + (18 if left_out else 0))

    def at(entry: dict[str, Any], row: float) -> tuple[float, float]:
        return _PAD + _R + entry['step'] * _DX, _PAD + row * _DY + _R

    where = {id(e): at(e, r) for e, r, _ in placed}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="tree" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="tree of {len(tree["trajectories"])} trajectories">']
    for entry, _, parent in placed:
        if parent is not None and id(parent) in where:
            (x0, y0), (x1, y1) = where[id(parent)], where[id(entry)]
            parts.append(f'<path class="edge" d="M{x0 + _R:.1f},{y0:.1f} '
                         f'C{x0 + _DX / 2:.1f},{y0:.1f} {x1 - _DX / 2:.1f},{y1:.1f} '
                         f'{x1 - _R:.1f},{y1:.1f}"/>')
    for entry, _, _ in placed:
        parts.append(_node(entry, where[id(entry)], link))
    if left_out:
        parts.append(f'<text class="more" x="{_PAD}" y="{height - 8}">{left_out} more '
                     f'branches not drawn (the first {MAX_LEAVES} are)</text>')
    parts.append('</svg>')
    return ''.join(parts)


def _node(entry: dict[str, Any], xy: tuple[float, float], link: Callable[[int], str]) -> str:
    x, y = xy
    bound = [f"{b['field']} <- {b['source']}" for b in entry['bindings']]
    what = (f"subtask {entry['subtask']['task']}" if entry.get('subtask') else entry['tool'])
    title = (f"[{entry['step']}] {what} {entry['goal']} (x{entry['successes']})"
             + ''.join(f'\nbound: {b}' for b in bound))
    cls = 'node bound' if bound else 'node'
    name = _label(f"[{entry['step']}] {what}")
    shape = (f'<rect x="{x - _R:.1f}" y="{y - _R:.1f}" width="{2 * _R}" height="{2 * _R}"/>'
             if entry.get('subtask') else f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{_R}"/>')
    node, step = entry['node'], entry['step']
    out = [f'<g class="{cls}" data-node="{node}" data-step="{step}">',
           f'<title>{escape(title)}</title>', shape,
           f'<text x="{x + _R + 4:.1f}" y="{y - 2:.1f}">{escape(name)}</text>']
    if bound:
        out.append(f'<text class="binding" x="{x + _R + 4:.1f}" y="{y + 11:.1f}">'
                   f'{escape(_label("bound: " + "; ".join(bound), 30))}</text>')
    ends = entry.get('ends_trajectory')
    if ends:
        out.append(f'<a href="{escape(link(ends))}"><text class="end" x="{x + _R + 4:.1f}" '
                   f'y="{y + (24 if bound else 12):.1f}">\u2192 trajectory {ends}</text></a>')
    out.append('</g>')
    return ''.join(out)
