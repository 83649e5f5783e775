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
The package's layout: modules small enough to hold one concept, few of them at the top.

A module holds at most :data:`MAX_CODE_LINES` lines of code (docstrings, comments and
blank lines are not counted: a module is not made shorter by saying less about it), and
at most :data:`MAX_TOP_MODULES` modules sit directly in the package folder, shared
vocabulary only; the rest live in the folders named after what they hold.
"""

from __future__ import annotations

import ast
import io
import tokenize

from core_helpers import PACKAGE_ROOT

PACKAGE = PACKAGE_ROOT / 'muscle_mem_ros'
MAX_CODE_LINES = 400
"""Most lines of code in one module."""
MAX_TOP_MODULES = 8
"""Most modules directly in the package folder (``__init__.py`` included)."""
_LAYOUT = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                     tokenize.DEDENT, tokenize.ENDMARKER})


def code_lines(source: str) -> int:
    """Return how many lines of ``source`` hold code: not blank, comment or docstring."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, str):  # a docstring, or a string as a comment
            docstrings.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _LAYOUT:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def test_code_lines_count_code_only():
    source = '\n'.join([
        '"""',
        'A module docstring.',
        '"""',
        '',
        '# a comment',
        'X = 1  # counted: code before a comment',
        '',
        '',
        'def f(a):',
        '    """One line."""',
        '    return (a +',
        '            2)',
    ])
    assert code_lines(source) == 4  # X, def, return and its continuation line


def test_no_module_holds_more_than_400_lines_of_code():
    sizes = {p.relative_to(PACKAGE).as_posix(): code_lines(p.read_text())
             for p in PACKAGE.rglob('*.py')}
    assert sizes['engine/engine.py'] > 100  # the modules are read
    over = {name: n for name, n in sorted(sizes.items()) if n > MAX_CODE_LINES}
    assert not over, f'modules over {MAX_CODE_LINES} lines of code (split by concept): {over}'


def test_at_most_8_modules_sit_at_the_package_top():
    top = sorted(p.name for p in PACKAGE.glob('*.py'))
    assert '__init__.py' in top
    assert len(top) <= MAX_TOP_MODULES, f'{len(top)} modules at the package top: {top}'
