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

"""docs/layout.md names every folder and module of the package where they are."""

from __future__ import annotations

import re

from core_helpers import PACKAGE_ROOT

PACKAGE = PACKAGE_ROOT / 'muscle_mem_ros'
LAYOUT = PACKAGE_ROOT.parent / 'docs' / 'layout.md'


def _blocks() -> dict[str, str]:
    """Return the tree's text per folder line (``ros/node/``), its continuation lines joined."""
    tree = LAYOUT.read_text().split('```')[1]
    blocks: dict[str, str] = {}
    path: list[tuple[int, str]] = []
    current = ''
    for line in tree.splitlines():
        match = re.match(r'^( *)(\S+/)\s', line)
        if match and len(match.group(1)) < 29:
            depth = len(match.group(1))
            path = [p for p in path if p[0] < depth] + [(depth, match.group(2))]
            current = ''.join(name for _, name in path)
            blocks[current] = line[29:]
        elif current:
            blocks[current] += ' ' + line.strip()
    return blocks


def test_every_module_is_named_under_its_folder():
    blocks = _blocks()
    top = 'muscle_mem_ros/muscle_mem_ros/'
    assert top in blocks
    missing = []
    for path in sorted(PACKAGE.rglob('*.py')):
        if path.stem in ('__init__', '__main__'):
            continue
        folder = path.parent.relative_to(PACKAGE).as_posix()
        key = top + ('' if folder == '.' else folder + '/')
        text = blocks.get(key)
        if text is None:
            missing.append(f'{key} (the folder)')
        elif not re.search(rf'(?<![\w.]){re.escape(path.stem)}(?!\w)', text):
            missing.append(f'{key}{path.name}')
    assert not missing, 'docs/layout.md does not name: ' + ', '.join(missing)
