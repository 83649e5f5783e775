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
Draw a behavior tree written by ``muscle-mem export --bt py_trees``: docs/behavior-trees.md's picture.

Usage: ``python3 docs/plot_bt.py TASK.bt.yaml OUT.png``. Builds the py_trees tree
``muscle-mem run-bt`` would tick and draws it top down, one row per behaviour, as
py_trees' own dot export does (``muscle-mem export --bt dot`` writes that; rendering it
needs Graphviz, which this machine does not have).
"""

from __future__ import annotations

import sys

from matplotlib.figure import Figure
from muscle_mem_ros.bt.tree import build_tree, Progress
from muscle_mem_ros.bt.yamlfile import load
import py_trees

COLOURS = {'Selector': '#9fd3e6', 'Sequence': '#f5c26b', 'AskAgent': '#e58c8c'}


def main(argv: list[str]) -> int:
    """Draw the picture; return the exit status."""
    if len(argv) != 2:
        print('usage: plot_bt.py TASK.bt.yaml OUT.png', file=sys.stderr)
        return 2
    with open(argv[0], encoding='utf-8') as file:
        doc = load(file.read(), source=argv[0])
    root = build_tree(doc, None, Progress())  # the shape only: nothing is ticked
    rows: list[tuple[int, py_trees.behaviour.Behaviour, int | None]] = []

    def visit(node: py_trees.behaviour.Behaviour, depth: int, parent: int | None) -> None:
        rows.append((depth, node, parent))
        here = len(rows) - 1
        for child in node.children:
            visit(child, depth + 1, here)
    visit(root, 0, None)
    figure = Figure(figsize=(9, 0.32 * len(rows) + 0.6))
    axes = figure.add_subplot()
    axes.set_xlim(0, 10)
    axes.set_ylim(len(rows), -1)
    axes.axis('off')
    for row, (depth, node, parent) in enumerate(rows):
        kind = type(node).__name__
        label = {'Selector': '? ', 'Sequence': '-> '}.get(kind, '') + node.name
        axes.text(0.3 + 0.55 * depth, row, label, va='center', fontsize=8, family='monospace',
                  bbox={'boxstyle': 'round,pad=0.25', 'fc': COLOURS.get(kind, '#d9e8c4'),
                        'ec': '#555555', 'lw': 0.6})
        if parent is not None:
            x = 0.3 + 0.55 * rows[parent][0] + 0.12
            axes.plot([x, x, 0.3 + 0.55 * depth], [parent + 0.3, row, row], color='#777777',
                      lw=0.6, zorder=0)
    axes.set_title(f'{doc.task}: the learned task as a behavior tree (muscle-mem export '
                   '--bt py_trees)', fontsize=9)
    figure.savefig(argv[1], dpi=110, bbox_inches='tight')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
