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

The figure has four panels: each run's wall time (coloured by how it was carried out, with
its speedup over run 1 and its placement error), a top view of the table with each run's
cube start, place target and where the cube ended, the arm's joint traces of the agent's
first run against its replay, on a common time axis from the moment the task was sent, and
the grasp point's distance from where the recorded approach ends, in a replay and in the
run whose cube is knocked during the approach: the arm stops short when the cache cancels.

The second part (tasks made of subtasks) has its own table (:data:`SKILL_HEADER`,
:func:`format_skill_row`): which tasks the agent was asked for, counted from its ``~/calls``,
and which the cache replayed in full, from its HIT events.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
from pathlib import Path
from typing import Any

from muscle_mem_demo.kinematics import ARM_JOINTS, forward
from muscle_mem_demo.story import RunMode, RunOutcome

__all__ = ['HEADER', 'SKILL_HEADER', 'describe_hand_back', 'describe_knock',
           'describe_substitutions', 'format_row',
           'format_skill_row', 'rule', 'write_figure']

_COLUMNS = (
    ('#', 2, '>'),
    ('run', 36, '<'),
    ('mode', 15, '<'),
    ('replayed', 8, '>'),
    ('by agent', 8, '>'),
    ('agent calls', 12, '<'),
    ('wall s', 7, '>'),
    ('speedup', 7, '>'),
    ('off target', 15, '>'),
    ('result', 6, '<'),
)

HEADER = '  '.join(f'{name:{align}{width}}' for name, width, align in _COLUMNS)
"""The table's header line."""


_SKILL_COLUMNS = (
    ('#', 2, '>'),
    ('run', 30, '<'),
    ('mode', 15, '<'),
    ('agent asked for', 22, '<'),
    ('replayed by the cache', 24, '<'),
    ('wall s', 7, '>'),
    ('off target', 10, '>'),
    ('result', 6, '<'),
)

SKILL_HEADER = '  '.join(f'{name:{align}{width}}' for name, width, align in _SKILL_COLUMNS)
"""The header line of the second part's table."""


def rule(header: str = HEADER) -> str:
    """Return a separator line as wide as the table of ``header``."""
    return '-' * len(header)


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
        if outcome.spec.expect.yaw_tolerance is not None:  # a turned run: the cube's turn too
            placed += f' {math.degrees(outcome.yaw_error):.1f} deg'
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


def format_skill_row(outcome: RunOutcome) -> str:
    """
    Return the second part's table line of one run.

    'agent asked for' lists the task of each agent call in order ('none': not called);
    'replayed by the cache' the tasks replayed in full: the run's own task, then in
    parentheses the subtasks (``restock (pick, place)``), or the subtasks alone.
    """
    mode = outcome.mode.value if outcome.mode else 'FAILED'
    asked = ', '.join(outcome.agent_tasks) or 'none'
    own = [task for task, depth in outcome.hits if depth == 0]
    subtasks = ', '.join(outcome.from_cache)
    if own:
        replayed = own[0] + (f' ({subtasks})' if subtasks else '')
    else:
        replayed = subtasks or 'none'
    wall = f'{outcome.wall_time:.1f}' if math.isfinite(outcome.wall_time) else '-'
    if outcome.final_object is None:
        placed = 'unknown'
    else:
        placed = f'{outcome.placement_error * 1000:.1f} mm' + ('' if outcome.placed else '!')
    values = (str(outcome.spec.number), outcome.spec.title, mode, asked, replayed, wall,
              placed, 'PASS' if outcome.held else 'FAIL')
    return '  '.join(
        f'{value:{align}{width}}' for value, (_, width, align) in zip(values, _SKILL_COLUMNS,
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


def describe_knock(outcome: RunOutcome) -> str:
    """
    Return what the cache did about a knock during a step, from the robot's report.

    Example: ``step 0 canceled 0.23 s into the motion, 78 ms after the knock (robot's clock);
    the arm stopped 16.9 cm short of the recorded approach (moved 1.2 cm after the knock);
    at rest 260 ms after the cancel, then handed to the agent``: the last clause from the
    cache's STOPPED events, when it sent them.
    """
    knock = outcome.knock
    if knock is None:
        return 'the robot reported no knock'
    moved = f'moved {knock.after_knock * 100:.1f} cm after the knock'
    if knock.outcome != 'canceled':
        return (f'the goal was not canceled ({knock.outcome}); the arm ended '
                f'{knock.stopped_short * 100:.1f} cm from its target ({moved})')
    into = ', '.join(f'step {step} canceled {at:.2f} s into the motion'
                     for step, at in outcome.canceled) or 'the goal canceled'
    return (f"{into}, {knock.reaction * 1000:.0f} ms after the knock (robot's clock); the arm "
            f'stopped {knock.stopped_short * 100:.1f} cm short of the recorded approach '
            f'({moved}){describe_hand_back(outcome)}')


def describe_hand_back(outcome: RunOutcome) -> str:
    """Return how long the hand-back waited for the robot to rest ('' without STOPPED events)."""
    if any('did not stop' in detail for _, detail in outcome.stops):
        return '; the robot did not stop: the task ended, the agent not asked'
    rest = outcome.rest_after
    if math.isnan(rest):
        return ''
    return f'; at rest {rest * 1000:.0f} ms after the cancel, then handed to the agent'


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

    fig = plt.figure(figsize=(11, 16))
    grid = fig.add_gridspec(3, 2, height_ratios=[1, 1.2, 0.9], width_ratios=[1.6, 1])
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
    _stopping_short(fig.add_subplot(grid[2, :]), outcomes, replay)
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


def _stopping_short(axes: Any, outcomes: Sequence[RunOutcome],
                    replay: RunOutcome | None) -> None:
    """Draw the grasp point's distance from the recorded approach's end: replay vs knocked."""
    knocked = next((o for o in outcomes if o.knock is not None and o.trace_times), None)
    axes.set_title('watched replay: the cube knocked during the approach, the arm stops short',
                   fontsize=9)
    if knocked is None or knocked.knock is None:
        axes.text(0.5, 0.5, 'no knocked run', ha='center', transform=axes.transAxes)
        return
    knock = knocked.knock
    end, top = 0.0, 1.0
    for outcome, style, who in ((replay, '-', 'replay'), (knocked, '-', 'knocked')):
        if outcome is None:
            continue
        distance = [100.0 * _distance(forward(row), knock.target)
                    for row in outcome.trace_positions]
        axes.plot(outcome.trace_times, distance, style, linewidth=1.6,
                  label=f'run {outcome.spec.number}: {outcome.spec.title} ({who})')
        end = max(end, outcome.trace_times[-1] if outcome.trace_times else 0.0)
        top = max(top, distance[0] * 1.3 if distance else 0.0)
    axes.set_ylim(0.0, top)
    marks = [('knock', knock.knocked_at, 'tab:red')]
    if math.isfinite(knock.cancel_at):
        marks.append(('cancel reaches the arm', knock.cancel_at, 'black'))
    for what, at, colour in marks:
        if math.isfinite(knock.sent_at):
            axes.axvline(at - knock.sent_at, color=colour, linestyle=':', linewidth=1.2,
                         label=f'{what} ({at - knock.sent_at:.2f} s)')
    axes.axhline(100.0 * knock.stopped_short, color='grey', linewidth=0.6)
    axes.set_xlim(0.0, min(end, (knock.knocked_at - knock.sent_at) + 3.0)
                  if math.isfinite(knock.sent_at) else end)
    axes.set_xlabel('seconds since the task was sent')
    axes.set_ylabel('cm from the end of the recorded approach')
    axes.legend(fontsize=7, loc='upper right')


def _distance(point: Any, target: Sequence[float]) -> float:
    return math.dist((point.x, point.y, point.z), target)
