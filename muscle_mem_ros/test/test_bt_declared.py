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
One answer to a params edit of a value a declared binding follows (issue 43 item 16).

The fetch of test_bt_edits is recorded once, before the params file declared that the
standoff goto's x follows ``param:approach``: its tree is literal. With the declaration
the tree's plans bind the field, and a params edit of ``approach`` is put to the three
places that decide whether a tree serves it: run-bt (the py_trees tree of the exported
document), an import of that document, and the tree the node looks up for a task with
those params (``Trees.variant_for``, what ros/execution/tasks.py calls). A declaration is
the evidence a second recording would be, so all three replay it. An inferred binding
alone stays held literal (test_bt_edits covers that).
"""

from __future__ import annotations

import json

from muscle_mem_ros.bindings.rules import Declared
from muscle_mem_ros.bindings.variants import canonical, Variant
from muscle_mem_ros.bt.document import as_run
from muscle_mem_ros.bt.yamlfile import load
from muscle_mem_ros.cli import main
from muscle_mem_ros.replay.treeview import Trees
from muscle_mem_ros.store import SqliteStore
from test_bt_edits import exported, PARAMS, SENSORS, tick

APPROACH_X = Declared('/goto', 'goal.pose.position.x', 'param:approach', None)
EDITED = {**PARAMS, 'approach': 1.35}


def test_a_params_edit_a_declared_binding_follows_is_replayed_by_run_bt_import_and_node(
        tmp_path, capsys):
    text = exported(tmp_path, declared=(APPROACH_X,))
    assert "source: 'param:approach'" in text and 'declared' in text
    edited = text.replace('approach: 1.25', 'approach: 1.35', 1)
    assert edited != text
    doc = load(edited)
    assert doc.misfit() == ''
    # run-bt: the tree runs, the standoff goto sent to the edited value
    world, progress, _ = tick(doc)
    assert world.agent is None and world.failed == [] and progress.done == 4
    assert world.sent[0][1]['goal']['pose']['position']['x'] == 1.35
    assert as_run(doc)[doc.steps[0].id].values == {'goal.pose.position.x': 1.35}
    # the import: filed where runs with other values of approach find it
    (tmp_path / 'edited.yaml').write_text(edited)
    capsys.readouterr()
    assert main(['import', str(tmp_path / 'new.db'), str(tmp_path / 'edited.yaml'),
                 '--who', 'ann']) == 0, capsys.readouterr().err
    bound = Variant.bound(EDITED, {'param:approach'}).text
    with SqliteStore(path=tmp_path / 'new.db') as store:
        assert list(store.trees(task='fetch')) == [bound]
        assert Trees(store).variant_for('fetch', EDITED, canonical(EDITED)) == bound
    # the node, on the store the tree was learned in: the literal tree serves the edit
    with SqliteStore(path=tmp_path / 'cache.db') as store:
        trees = Trees(store, declared=(APPROACH_X,))
        assert trees.variant_for('fetch', EDITED, canonical(EDITED)) == canonical(PARAMS)
        # without the declaration it is held literal: a run with other values asks the agent
        assert Trees(store).variant_for('fetch', EDITED, canonical(EDITED)) == canonical(EDITED)
        # a leaf no declared binding follows is held literal, declared or not
        other = {**PARAMS, 'bin': 3}
        assert trees.variant_for('fetch', other, canonical(other)) == canonical(other)


def test_trust_lists_each_binding_with_its_source(tmp_path, capsys):
    tag_y = Declared('/goto', 'goal.pose.position.y', 'sensor:tag[1]', 0.1, 0.05)
    exported(tmp_path)
    db = str(tmp_path / 'cache.db')
    with SqliteStore(path=tmp_path / 'cache.db') as store:
        (info,) = store.trajectories(task='fetch')
        node = info.node_ids[0]  # the standoff goto: x <- param:approach, y <- sensor:tag[1]
        store.note_shadow(task='fetch', trajectory_id=info.id, agreed=True,
                          bindings=[(node, 'goal.pose.position.x', True),
                                    (node, 'goal.pose.position.y', True)])
    params = tmp_path / 'params.yaml'
    params.write_text(json.dumps({'muscle_mem': {'ros__parameters': {
        'sensors': {s.name: {'topic': f'/{s.name}', 'type': 'geometry_msgs/msg/Point',
                             'tolerance': list(s.tolerance), 'mode': s.mode.value}
                    for s in SENSORS},
        'services': {'goto': {'server': '/goto', 'type': 'nav_msgs/srv/GetPlan'}},
        'bindings': {'tag_y': {'tool': 'goto', 'field': tag_y.field, 'source': tag_y.source,
                               'max_offset': 0.05, 'max_shift': 0.1}}}}}))
    capsys.readouterr()
    assert main(['trust', db, 'fetch', '--json', '--params', str(params)]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert {(b['field'], b['source']) for b in row['bindings']} == {
        ('goal.pose.position.x', 'param:approach'), ('goal.pose.position.y', 'sensor:tag[1]')}
    assert main(['trust', db, 'fetch', '--params', str(params)]) == 0
    out = capsys.readouterr().out
    assert 'goal.pose.position.x <- param:approach' in out, out
    assert 'goal.pose.position.y <- sensor:tag[1]' in out, out
