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
The demo's output: the story table, printed a row at a time, and the PNG.

The figure has three panels: each run's wall time (coloured by how it was carried out, with
its speedup over run 1 and its placement error), a top view of the table with each run's
cube start, place target and where the cube ended, and the arm's joint traces of the agent's
first run against its replay, on a common time axis from the moment the task was sent.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
from pathlib import Path
from typing import Any

from muscle_mem_demo.kinematics import ARM_JOINTS
from muscle_mem_demo.story import RunMode, RunOutcome

__all__ = ['HEADER', 'describe_substitutions', 'format_row', 'rule', 'write_figure']

_COLUMNS = (
    ('#', 2, '>'),
    ('run', 36, '<'),
    ('mode', 15, '<'),
    ('replayed', 8, '>'),
    ('by agent', 8, '>'),
    ('agent calls', 12, '<'),
    ('wall s', 7, '>'),
    ('speedup', 7, '>'),
    ('off target', 10, '>'),
    ('result', 6, '<'),
)

HEADER = '  '.join(f'{name:{align}{width}}' for name, width, align in _COLUMNS)
"""The table's header line."""


def rule() -> str:
    """Return a separator line as wide as the table."""
    return '-' * len(HEADER)


def format_row(outcome: RunOutcome, *, baseline: float | None) -> str:
    """Return the table line of one run; ``baseline`` is run 1's wall time."""
    mode = outcome.mode.value if outcome.mode else 'FAILED'
    calls = 'none' if not outcome.agent_calls else ', '.join(
        f'from {k}' for k in outcome.agent_calls
    )
    wall = f'{outcome.wall_time:.1f}' if math.isfinite(outcome.wall_time) else '-'
    speedup = '-'
    if baseline and math.isfinite(outcome.wall_time) and outcome.wall_time > 0:
        speedup = f'{baseline / outcome.wall_time:.1f}x'
    if outcome.final_object is None:
        placed = 'unknown'
    else:
        placed = f'{outcome.placement_error * 1000:.1f} mm'
        placed += '' if outcome.placed else '!'
    values = (
        str(outcome.spec.number), outcome.spec.title, mode, str(outcome.replayed),
        str(outcome.by_agent), calls, wall, speedup, placed,
        'PASS' if outcome.held else 'FAIL',
    )
    return '  '.join(
        f'{value:{align}{width}}' for value, (_, width, align) in zip(values, _COLUMNS,
                                                                      strict=True)
    )


_UNCHANGED = 1e-4
"""Numeric substitutions closer than this to the recorded value are not described."""


def describe_substitutions(outcome: RunOutcome) -> str:
    """
    Return what the cache substituted in a run, one clause per (field, source), changed only.

    A substitution whose value is within 0.1 mm (or equal, for strings) of the recorded one
    (the same situation again) is left out. Example: ``target.pose.position.x = sensor:object[0] at
    steps 0, 1, 3 (0.400 -> 0.355)``.
    """
    groups: dict[tuple[str, str], list[dict[str, object]]] = {}
    for sub in outcome.substituted:
        recorded, value = sub.get('recorded'), sub.get('value')
        try:
            if abs(float(value) - float(recorded)) < _UNCHANGED:  # type: ignore[arg-type]
                continue
        except (TypeError, ValueError):
            if value == recorded:
                continue
        key = (str(sub.get('field', '?')), str(sub.get('source', '?')))
        groups.setdefault(key, []).append(sub)
    clauses = []
    for (field_path, source), subs in groups.items():
        steps = ', '.join(str(s.get('step')) for s in subs)
        first = subs[0]
        try:
            change = f'{float(first["recorded"]):.3f} -> {float(first["value"]):.3f}'
        except (KeyError, TypeError, ValueError):
            change = f'{first.get("recorded")!r} -> {first.get("value")!r}'
        clauses.append(f'{field_path} = {source} at steps {steps} ({change})')
    return '; '.join(clauses) or 'nothing changed'


_MODE_COLOURS = {
    RunMode.MISS: '#d62728',
    RunMode.HANDOFF: '#ff7f0e',
    RunMode.REPLAY: '#2ca02c',
    None: '#7f7f7f',
}


def write_figure(outcomes: Sequence[RunOutcome], path: Path) -> Path:
    """Write the PNG of the runs' timings and joint traces to ``path``; return the path."""
    import matplotlib

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt
    from matplotlib.patches import Patch

    fig = plt.figure(figsize=(11, 12))
    grid = fig.add_gridspec(2, 2, height_ratios=[1, 1.2], width_ratios=[1.6, 1])
    bars = fig.add_subplot(grid[0, 0])
    table = fig.add_subplot(grid[0, 1])
    traces = fig.add_subplot(grid[1, :])
    labels = [f'{o.spec.number}. {o.spec.title}' for o in outcomes]
    times = [o.wall_time if math.isfinite(o.wall_time) else 0.0 for o in outcomes]
    colours = [_MODE_COLOURS[o.mode] for o in outcomes]
    ypos = list(range(len(outcomes)))[::-1]
    bars.barh(ypos, times, color=colours)
    bars.set_yticks(ypos, labels)
    bars.set_xlabel('wall time per run, s')
    baseline = outcomes[0].wall_time if outcomes else math.nan
    for y, outcome, value in zip(ypos, outcomes, times, strict=True):
        text = f'{value:.1f} s'
        if math.isfinite(baseline) and value > 0:
            text += f'  ({baseline / value:.1f}x)'
        if outcome.final_object is not None:
            text += f', {outcome.placement_error * 1000:.1f} mm off'
        text += '' if outcome.held else '  FAIL'
        bars.text(value, y, ' ' + text, va='center', fontsize=9)
    bars.set_xlim(0, max(times + [1.0]) * 1.6)
    bars.legend(handles=[Patch(color=_MODE_COLOURS[m], label=m.value) for m in RunMode],
                loc='upper center', bbox_to_anchor=(0.5, -0.1), ncol=3, fontsize=8)
    bars.set_title('muscle_mem_ros demo: pick-and-place with a behavior cache')
    _top_view(table, outcomes)

    agent = next((o for o in outcomes if o.mode is RunMode.MISS and o.trace_times), None)
    replay = next((o for o in outcomes if o.mode is RunMode.REPLAY and o.trace_times), None)
    cmap = plt.get_cmap('tab10')
    for index, name in enumerate(ARM_JOINTS):
        for outcome, style, who in ((agent, '--', 'agent'), (replay, '-', 'replay')):
            if outcome is None:
                continue
            column = [row[index] for row in outcome.trace_positions]
            traces.plot(outcome.trace_times, column, style, color=cmap(index), linewidth=1.4,
                        label=f'{name} ({who}, run {outcome.spec.number})')
    traces.set_xlabel('seconds since the task was sent')
    traces.set_ylabel('joint position, rad')
    traces.set_title('the same motion: agent run (dashed, thinking between steps) vs replay')
    if agent is not None or replay is not None:
        traces.legend(fontsize=7, ncol=4, loc='upper center', bbox_to_anchor=(0.5, -0.13))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _top_view(axes: Any, outcomes: Sequence[RunOutcome]) -> None:
    """Draw the table from above: each run's cube start (o), target (+) and end (x)."""
    labels: dict[tuple[float, float], list[str]] = {}
    for outcome in outcomes:
        colour = _MODE_COLOURS[outcome.mode]
        if outcome.object_start is not None:
            axes.plot(*outcome.object_start[:2], 'o', color=colour, markersize=6)
            spot = (round(outcome.object_start[0], 3), round(outcome.object_start[1], 3))
            labels.setdefault(spot, []).append(str(outcome.spec.number))
        axes.plot(*outcome.spec.place, '+', color='black', markersize=10)
        if outcome.final_object is not None:
            axes.plot(*outcome.final_object[:2], 'x', color=colour, markersize=7)
    for spot, numbers in labels.items():
        axes.annotate('run ' + ','.join(numbers), spot, fontsize=7, xytext=(5, 4),
                      textcoords='offset points')
    axes.set_aspect('equal', adjustable='datalim')
    axes.set_xlabel('x, m')
    axes.set_ylabel('y, m')
    axes.set_title('top view: cube start (o), target (+), end (x)', fontsize=9)
    axes.grid(True, linewidth=0.3)
