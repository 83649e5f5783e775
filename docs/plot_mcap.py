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
Plot a file written by ``muscle-mem export``: docs/operating.md's figure of an exported task.

Usage: ``python3 docs/plot_mcap.py TASK.mcap OUT.png``. Reads the file with the
mcap reader and mcap_ros2's decoder (no ROS needed), and draws per sensor the
recorded pre snapshots (one line per element and trajectory) over the export's
time axis, with a tick per goal and its topic, and a band of +-tolerance around
the first snapshot where the snapshots carry tolerances.
"""

from __future__ import annotations

import sys

from matplotlib.figure import Figure
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory


def main(argv: list[str]) -> int:
    """Draw the figure; return the exit status."""
    if len(argv) != 2:
        print('usage: plot_mcap.py TASK.mcap OUT.png', file=sys.stderr)
        return 2
    source, target = argv
    snaps: dict[str, list[tuple[float, int, list[float], list[float]]]] = {}
    goals: list[tuple[float, str]] = []
    start = None
    with open(source, 'rb') as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for _, channel, message, decoded in reader.iter_decoded_messages():
            t = message.log_time / 1e9
            start = t if start is None else start
            if channel.topic == '/muscle_mem/pre':
                for feature in decoded.features:
                    snaps.setdefault(feature.name, []).append(
                        (t - start, decoded.trajectory_id, list(feature.values),
                         list(feature.tolerance)))
            elif channel.topic.endswith(('/goal', '/request')):
                goals.append((t - start, channel.topic))
    names = sorted(snaps)
    fig = Figure(figsize=(10, 2.4 * len(names) + 1.6))
    axes = fig.subplots(len(names) + 1, 1, sharex=True, height_ratios=[3] * len(names) + [1])
    for ax, name in zip(axes, names):
        rows = snaps[name]
        width = max(len(r[2]) for r in rows)
        trajectories = sorted({r[1] for r in rows})
        for i in range(width):
            color = f'C{i % 10}'
            for n, tid in enumerate(trajectories):
                points = [(t, v[i]) for t, k, v, _ in rows if k == tid and len(v) > i]
                ax.plot([p[0] for p in points], [p[1] for p in points], '.-', lw=0.8, ms=3,
                        color=color, label=f'{name}[{i}]' if n == 0 else None)
            tol = rows[0][3]
            if tol:
                band = tol[i] if len(tol) > 1 else tol[0]
                ax.axhspan(rows[0][2][i] - band, rows[0][2][i] + band, color=color,
                           alpha=0.08)
        ax.set_ylabel(f'{name}\n(pre snapshots)')
        ax.legend(loc='upper right', fontsize=7, ncol=min(width, 6))
        ax.grid(alpha=0.3)
    topics = sorted({topic for _, topic in goals})
    ax = axes[-1]
    for t, topic in goals:
        ax.plot([t, t], [topics.index(topic) - 0.3, topics.index(topic) + 0.3], 'k-', lw=1)
    ax.set_yticks(range(len(topics)), topics, fontsize=7)
    ax.set_ylim(-0.6, len(topics) - 0.4)
    ax.set_xlabel('seconds (export time axis: trajectories oldest first)')
    fig.suptitle(f'{source.rsplit("/", 1)[-1]}: {len(goals)} goals, '
                 f'{sum(len(v) for v in snaps.values())} pre features', fontsize=10)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
