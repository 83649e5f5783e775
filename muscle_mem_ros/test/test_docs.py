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
The repository's documents point at things that exist.

Every relative link of README.md and docs/*.md names a file or folder of the repository, and
every ``#anchor`` names a heading of its target (GitHub's rule: lower case, punctuation
dropped, spaces to hyphens). The node benchmark's timing probes (bench/_node_host.py) name
methods that still exist.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
import re

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / 'README.md', *sorted((REPO / 'docs').glob('*.md'))]
LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')
FENCE = re.compile(r'^```.*?^```', re.MULTILINE | re.DOTALL)


def anchors(markdown: str) -> set[str]:
    """Return the anchors GitHub makes of ``markdown``'s headings (duplicates numbered)."""
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub('', markdown).splitlines():
        if not line.startswith('#'):
            continue
        title = line.lstrip('#').strip().lower()
        slug = re.sub(r'[^\w\- ]', '', title).replace(' ', '-')
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f'{slug}-{count}')
    return found


def links(path: Path) -> list[str]:
    """Return the relative links of a markdown file (outside code blocks)."""
    text = FENCE.sub('', path.read_text())
    return [t for t in LINK.findall(text) if not re.match(r'[a-z]+:', t)]


def test_anchor_rule_matches_github():
    assert anchors('## Fleet: one cache for many robots (PostgreSQL)\n### Parameters '
                   '(node `muscle_mem`)\n## Setup\n## Setup\n') == {
        'fleet-one-cache-for-many-robots-postgresql', 'parameters-node-muscle_mem', 'setup',
        'setup-1'}


@pytest.mark.parametrize('doc', DOCS, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(doc):
    found = links(doc)
    assert found or doc.name != 'README.md'
    broken = []
    for target in found:
        where, _, anchor = target.partition('#')
        path = (doc.parent / where).resolve() if where else doc
        if not path.exists():
            broken.append(f'{target}: no such file')
        elif anchor and (path.suffix != '.md' or anchor not in anchors(path.read_text())):
            broken.append(f'{target}: no heading #{anchor}')
    assert not broken, f'{doc.name}:\n' + '\n'.join(broken)


def test_node_benchmark_probes_name_what_exists():
    spec = importlib.util.spec_from_file_location('node_host', REPO / 'bench' / '_node_host.py')
    assert spec is not None and spec.loader is not None
    host = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(host)
    missing = [f'{module}.{cls}.{name}'.strip('.') for _kind, module, cls, name in host.PROBES
               if getattr(host.probe_owner(module, cls), name, None) is None]
    assert not missing, missing
