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
docs/foxglove-layout.json opens the node's topics in Foxglove, and its paths exist.

A layout is Foxglove's JSON: ``configById`` (a panel's id is ``<PanelType>!<name>``, its
settings as the panel keeps them), ``layout`` (the split tree of those ids) and a few
document-wide keys. Foxglove shows a path that names no field as an empty plot, without
an error: so every message path here is walked through the message definitions, and a
plotted one must end at a number.
"""

from __future__ import annotations

import json
import re
from typing import Any

from core_helpers import PACKAGE_ROOT
from muscle_mem_interfaces.msg import CacheEvent, WatchTick
import pytest

LAYOUT = PACKAGE_ROOT.parent / 'docs' / 'foxglove-layout.json'
TOPICS = {'/muscle_mem/events': CacheEvent, '/muscle_mem/watch': WatchTick}
"""The node's topics under its default name, and their types."""
PANELS = {'Plot', 'RawMessages', 'StateTransitions'}
NUMBERS = {'float', 'double', 'boolean', 'octet', 'uint8', 'int8', 'uint16', 'int16',
           'uint32', 'int32', 'uint64', 'int64'}
_STEP = re.compile(r'\.(\w+)(?:\[(-?\d+|:)\])?')


def layout() -> dict[str, Any]:
    return json.loads(LAYOUT.read_text())


def leaves(tree: Any) -> list[str]:
    """Return the panel ids of a layout's split tree, in order."""
    if isinstance(tree, str):
        return [tree]
    assert set(tree) >= {'first', 'second', 'direction'}, tree
    assert tree['direction'] in ('row', 'column'), tree
    return leaves(tree['first']) + leaves(tree['second'])


def field_type(path: str) -> str:
    """Return the type a message path ends at ('/topic.field[0].leaf'), or raise KeyError."""
    topic = next(t for t in sorted(TOPICS, key=len, reverse=True) if path.startswith(t))
    rest = path[len(topic):]
    msg: Any = TOPICS[topic]
    kind = msg.__name__
    end = 0
    for step in _STEP.finditer(rest):
        assert step.start() == end, f'{path}: cannot read {rest[end:]!r}'
        end = step.end()
        kind = msg.get_fields_and_field_types()[step.group(1)]  # KeyError: no such field
        if step.group(2) is not None:
            assert kind.startswith('sequence<'), f'{path}: {step.group(1)} is no array'
            if step.group(2) != ':':
                kind = kind[len('sequence<'):-1]
        if '/' in kind:  # a message: descend into it
            package, name = kind.strip('sequence<>').split('/')
            module = __import__(f'{package}.msg', fromlist=[name])
            msg = getattr(module, name)
    assert end == len(rest), f'{path}: cannot read {rest[end:]!r}'
    return kind


def test_the_layout_is_foxglove_json_whose_tree_holds_every_panel():
    data = layout()
    assert set(data) >= {'configById', 'layout', 'globalVariables', 'userNodes'}
    ids = list(data['configById'])
    assert sorted(leaves(data['layout'])) == sorted(ids)
    for panel_id in ids:
        kind, _, name = panel_id.partition('!')
        assert kind in PANELS and name, panel_id
        assert data['configById'][panel_id]['foxglovePanelTitle']


def test_it_opens_the_events_and_the_watch():
    configs = layout()['configById']
    raw = [c['topicPath'] for k, c in configs.items() if k.startswith('RawMessages!')]
    assert '/muscle_mem/events' in raw and '/muscle_mem/watch.elements' in raw
    plotted = [p['value'] for k, c in configs.items() if k.startswith('Plot!')
               for p in c['paths']]
    assert '/muscle_mem/watch.limit' in plotted and '/muscle_mem/watch.progress' in plotted
    assert any(re.fullmatch(r'/muscle_mem/watch\.elements\[\d+\]\.ratio', p) for p in plotted)
    plot = configs['Plot!mm_ratios']
    assert plot['xAxisVal'] == 'timestamp' and plot['minYValue'] == 0
    assert plot['maxYValue'] > 1.0  # the trip line shows


def test_every_path_names_a_field_and_every_plotted_one_a_number():
    for panel_id, config in layout()['configById'].items():
        paths = [config['topicPath']] if 'topicPath' in config else \
            [p['value'] for p in config['paths']]
        for path in paths:
            kind = field_type(path)
            if not panel_id.startswith('RawMessages!'):
                assert kind in NUMBERS, f'{panel_id}: {path} ends at {kind}'


@pytest.mark.parametrize('path', ['/muscle_mem/watch.ratio', '/muscle_mem/watch.elements.x',
                                  '/muscle_mem/watch.progress[0]'])
def test_a_path_that_names_no_field_is_caught(path):
    with pytest.raises((KeyError, AssertionError)):
        field_type(path)
