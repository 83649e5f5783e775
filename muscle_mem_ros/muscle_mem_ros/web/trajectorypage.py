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
A trajectory's page: its trust, the approvals that cover it, its bindings, and every step.

Per step: the tool and its goal, the bindings on it with their sources, the camera
thumbnails its recorded pre and post snapshots kept (and what a camera saw when a check on
the step failed), and its trace as plots (:mod:`.plotsvg`) with the tube where the node's
params file gives the tolerances. Thumbnails are small PNGs (longest side 96 px) written
into the page as ``data:`` URLs: nothing else is fetched.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from html import escape
import json
from typing import Any

from .pages import approval_form, FormTokens, layout, stamp, task_url, trust_cells, TRUST_HEAD
from .plotsvg import series_svg
from ..records import Trace

__all__ = ['trajectory_page', 'Tolerance']

Tolerance = Callable[[str], float | None]
"""An element's tolerance by key (``sensor:joints[1]``), as the node's params file says."""


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode('ascii')
    return (f'<figure class="thumb"><img class="thumb" alt="{escape(alt)}" '
            f'title="{escape(alt)}" src="data:image/png;base64,{data}">'
            f'<figcaption>{escape(alt)}</figcaption></figure>')


def _plots(index: int, trace: Trace | None, tolerance: Tolerance | None,
           mark: float | None) -> str:
    if trace is None:
        return '<p class="note">no trace recorded (the step was not watched)</p>'
    out = []
    for name, series in trace.sensors.items():
        def tol(i: int, name: str = name) -> float | None:
            return tolerance(f'sensor:{name}[{i}]') if tolerance is not None else None
        out.append(f'<figure class="series" id="step-{index}-{escape(name)}">'
                   f'{series_svg(name, series, tolerance=tol, mark=mark)}'
                   f'<figcaption>{escape(name)}, {len(series.times)} samples at '
                   f'{trace.rate:g} Hz</figcaption></figure>')
    if trace.feedback is not None:
        out.append(f'<figure class="series" id="step-{index}-feedback">'
                   f'{series_svg("feedback", trace.feedback, labels=trace.feedback_leaves)}'
                   "<figcaption>the action's feedback</figcaption></figure>")
    return ''.join(out)


def _binding(b: dict[str, Any]) -> str:
    rest = {k: v for k, v in b.items() if k not in ('field', 'source', 'origin')}
    return (f'<li class="binding">{escape(b["field"])} &lt;- {escape(b["source"])} '
            f'<span class="note">({escape(b["origin"])}, {escape(json.dumps(rest))})</span>'
            '</li>')


def _step(step: dict[str, Any], tolerance: Tolerance | None, mark: float | None) -> str:
    index = step['step']
    parts = [f'<section class="step" id="step-{index}"><h3>step {index}: '
             f'{escape(step["tool"])} <span class="note">({escape(step["kind"])} '
             f'{escape(step["type"])}, {escape(step["status"])}, {step["duration"]:.3f} s, '
             f'learned step {step["node"]})</span></h3>'
             f'<p class="goal"><code>{escape(step["goal"])}</code></p>']
    if step['bindings']:
        parts.append('<ul class="bindings">' + ''.join(map(_binding, step['bindings']))
                     + '</ul>')
    thumbs = [_img(png, f'{phase} {sensor}') for phase, views in step['images'].items()
              for sensor, png in views.items()]
    if thumbs:
        parts.append('<div class="thumbs">' + ''.join(thumbs) + '</div>')
    for view in step['failed']:
        parts.append(f'<div class="failed">{escape(view.phase.value)} check failed on '
                     f'{escape(view.sensor)} at {stamp(view.at)}: {escape(view.reason)} '
                     f'{_img(view.png, f"failed {view.phase.value} {view.sensor}")}</div>')
    parts.append(_plots(index, step['trace'], tolerance, mark))
    parts.append('</section>')
    return ''.join(parts)


def trajectory_page(data: dict[str, Any], tokens: FormTokens | None, *,
                    tolerance: Tolerance | None, mark: float | None = None,
                    events: str | None = None, recent: Sequence[dict[str, Any]] = ()) -> str:
    """
    Return a trajectory's page.

    :param data: :func:`.views.trajectory_view`.
    :param tokens: Makes the forms' CSRF tokens (None: read-only, no forms).
    :param tolerance: The elements' tolerances (None: no params file, no tube).
    :param mark: A moment to mark on the plots (seconds into a step).
    """
    info, row = data['info'], data['row']
    parts = [f'<h1>trajectory {info.id} of task <a href="{escape(task_url(info.task))}">'
             f'{escape(info.task)}</a></h1>'
             f'<p>params <code>{escape(info.params_json)}</code>, body '
             f'<b class="body">{escape(data["body"])}</b>, created {stamp(info.created)}, '
             f'last used {stamp(info.last_used)}, replayed to the end {info.replay_count} '
             f'times{", learned from " + escape(data["source"]) if data["source"] else ""}'
             f'</p><table id="trust">{TRUST_HEAD}<tr>{trust_cells(row)}</tr></table>']
    for why in (row['held'], row['approval_held']):
        if why:
            parts.append(f'<p class="held">{escape(why)}</p>')
    parts.append('<h2>approvals covering it</h2>' + (''.join(
        f'<p class="approval">{escape(a["who"])} approved '
        f'{"this trajectory" if a["trajectory"] else "the task"} at {stamp(a["at"])}: '
        f'{escape(a["covers"])}</p>' for a in data['covering']) or '<p class="note">none</p>'))
    parts.append(approval_form(tokens, data['prospect'], approved=data['own_approval'],
                               back=f'/trajectory?id={info.id}'))
    if tolerance is None:
        parts.append('<p class="note">no tube: the tolerances are in the node\'s params file '
                     '(serve --params FILE)</p>')
    parts.append('<h2>steps</h2>' + ''.join(_step(s, tolerance, mark) for s in data['steps']))
    return layout(f'trajectory {info.id}', ''.join(parts), events=events, recent=recent)
