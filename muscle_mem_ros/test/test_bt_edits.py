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
An edited behavior tree runs as edited: the py_trees tree against a mobile base in a dict.

The document is exported from a real SQLite store holding one recording of a mobile
fetch (GetPlan goals built as messages, odometry and tag snapshots), edited as text,
read back, and ticked against a world whose base goes where a goal says; the post-checks
compare what the judge expects with that world. The same recording run through the
real cache and the real ``muscle-mem run-bt`` is in test_bt_edited_mobile.py.
"""

from __future__ import annotations

from dataclasses import replace
import json
from pathlib import Path
import re
from typing import Any

from muscle_mem_ros.bindings.judge import BindingJudge
from muscle_mem_ros.bindings.rules import Declared, element_tolerances, parse_path
from muscle_mem_ros.bindings.variants import canonical, Variant
from muscle_mem_ros.bt.document import as_run, BtDocument, build, unknown_fields
from muscle_mem_ros.bt.tree import build_tree, Progress
from muscle_mem_ros.bt.yamlfile import dump, load
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.cli import main
from muscle_mem_ros.cli.bt import goal_steps, import_variant
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.records import CompareMode, SensorSpec, Snapshot, Step, ToolKind
from muscle_mem_ros.replay.gates import Gate, gate_tree
from muscle_mem_ros.replay.shadow import SnapshotSenses
from muscle_mem_ros.replay.treeview import Trees
from muscle_mem_ros.ros.messages.introspection import message_to_json
from muscle_mem_ros.store import SqliteStore
from nav_msgs.srv import GetPlan
from py_trees.common import Status
import py_trees.trees
import pytest

SENSORS = [SensorSpec('odom', (0.02,), CompareMode.NORM),
           SensorSpec('tag', (0.02,), CompareMode.NORM)]
TAG = (1.65, 0.3)
STANDOFF = (1.25, 0.3)  # 0.4 m in front of the tag: the parameter ``approach`` is its x
SHELF = (1.0, 1.2)
PARAMS = {'approach': 1.25, 'bin': 2}


def goto(start: tuple[float, float], goal: tuple[float, float]) -> str:
    request = GetPlan.Request(tolerance=0.3)
    request.start.pose.position.x, request.start.pose.position.y = start
    request.goal.pose.position.x, request.goal.pose.position.y = goal
    request.start.pose.orientation.w = request.goal.pose.orientation.w = 1.0
    return message_to_json(request)


def snap(base: tuple[float, float]) -> Snapshot:
    return Snapshot(features={'odom': (base[0], base[1], 0.0), 'tag': (*TAG, 0.0)})


def fetch_steps() -> list[Step]:
    """Go to the standoff, grip, go to the shelf, release: as the recording holds them."""
    grip = json.dumps({'data': True})
    release = json.dumps({'data': False})
    spots = [(0.0, 0.0), STANDOFF, STANDOFF, SHELF, SHELF]
    calls = [('/goto', 'nav_msgs/srv/GetPlan', goto(spots[0], STANDOFF)),
             ('/grip', 'std_srvs/srv/SetBool', grip),
             ('/goto', 'nav_msgs/srv/GetPlan', goto(STANDOFF, SHELF)),
             ('/grip', 'std_srvs/srv/SetBool', release)]
    return [Step(tool=tool, kind=ToolKind.SERVICE, type_name=kind, payload=text.encode(),
                 payload_json=text, pre=snap(spots[i]), post=snap(spots[i + 1]))
            for i, (tool, kind, text) in enumerate(calls)]


def exported(tmp_path: Path, *, bound: set[str] = frozenset(),
             params: dict[str, Any] | None = None, declared: tuple[Declared, ...] = ()) -> str:
    """Record the fetch once (its tree bound on ``bound``) and export it as the CLI does."""
    variant = Variant.bound(PARAMS, bound).text if bound else canonical(PARAMS)
    with SqliteStore(path=tmp_path / 'cache.db') as store:
        store.add_trajectory(task='fetch', variant=variant, params_json=canonical(PARAMS),
                             steps=fetch_steps())
        tolerance = element_tolerances(SENSORS)
        trees = Trees(store, tolerance=tolerance, declared=declared)
        doc = build(store, task='fetch', variant=variant, plans=trees.plans('fetch', variant),
                    sensors={s.name: {'tolerance': list(s.tolerance), 'mode': s.mode.value}
                             for s in SENSORS}, params=params, tolerance=tolerance)
    return dump(doc)


class Base:
    """The robot side of a tree: a base that goes where a goto's goal says, and its sensors."""

    def __init__(self, doc: BtDocument) -> None:
        self.base = (0.0, 0.0)
        self.sent: list[tuple[int, dict]] = []
        self.agent: tuple[int, str] | None = None
        self.failed: list[str] = []
        self._check = ToleranceCheck(sensors=SENSORS)
        self._senses = SnapshotSenses(self._check, element_tolerances(SENSORS), doc.params)
        self._judge = BindingJudge(plans=doc.plans(), params=doc.params, senses=self._senses)

    def judge(self) -> BindingJudge:
        return self._judge

    def look(self) -> None:
        self._senses.look(snap(self.base))

    def start_call(self, node, bound) -> None:
        goal = json.loads(node.step.payload_json)
        for path, value in (bound.values if bound else {}).items():
            parts = parse_path(path)
            target = goal
            for part in parts[:-1]:
                target = target[part]
            target[parts[-1]] = value
        self.sent.append((node.id, goal))
        if node.step.tool == '/goto':
            self.base = (goal['goal']['pose']['position']['x'],
                         goal['goal']['pose']['position']['y'])

    def call_status(self) -> Status:
        return Status.SUCCESS

    def post_status(self, node, expected) -> Status:
        result = self._check.evaluate(expected, snap(self.base), now_time=0.0)
        if not result.passed:
            self.failed.append(f'post-check of learned step {node.id}: '
                               f'{result.failures[0].reason}')
        return Status.SUCCESS if result.passed else Status.FAILURE

    def start_agent(self, resume, reason: str | None = None) -> None:
        """Take the hand-off (a Resume record, or the step and the reason)."""
        self.agent = (resume, reason) if reason is not None else (resume.step, resume.reason)

    def agent_status(self) -> Status:
        return Status.SUCCESS


def tick(doc: BtDocument) -> tuple[Base, Progress, Status]:
    world, progress = Base(doc), Progress()
    tree = py_trees.trees.BehaviourTree(build_tree(doc, world, progress))
    for _ in range(40):
        tree.tick()
        if tree.root.status is not Status.RUNNING:
            break
    return world, progress, tree.root.status


def edit_shelf_x(text: str, x: float) -> str:
    """Move the shelf goto's goal x (the third step) in the document's text."""
    start = text.index('# step 2: /goto')
    head, tail = text[:start], text[start:]
    old = 'position: {x: 1.0, y: 1.2'
    assert tail.count(old) == 1, tail[:1500]  # the goal (learned is written flat)
    return head + tail.replace(old, f'position: {{x: {x}, y: 1.2')


def test_the_document_shows_what_depends_on_each_goal_field(tmp_path):
    text = exported(tmp_path)
    doc = load(text)
    shelf = doc.steps[0].then[0].then[0]
    assert shelf.learned['goal.pose.position.x'] == 1.0
    assert dict(shelf.follows)['sensor:odom[0]'] == 'goal.pose.position.x'
    assert dict(shelf.follows)['sensor:odom[1]'] == 'goal.pose.position.y'
    assert shelf.unpredictable == ()  # every odometry element follows a field
    first = doc.steps[0]  # bound to param:approach (one equality): the cache's follows first
    assert dict(first.follows)['sensor:odom[0]'] == 'goal.pose.position.x'
    assert [b.field for b in first.bindings] == ['goal.pose.position.x']
    assert first.plan.follows == (('sensor:odom[0]', 'goal.pose.position.x'),)
    assert '# params: none bound' in text and 'learned:' in text


def test_an_edited_goal_runs_as_edited_and_its_followers_are_expected_moved(tmp_path):
    doc = load(edit_shelf_x(exported(tmp_path), 1.15))
    world, progress, status = tick(doc)
    assert world.failed == [] and world.agent is None, (world.failed, world.agent)
    assert status is Status.SUCCESS and progress.done == 4
    assert world.base == (1.15, 1.2)  # the edited goal was sent
    # and the edit moves the imported snapshots the same way: the shelf's post and after
    runs = as_run(doc)
    shelf, release = doc.steps[0].then[0].then[0], doc.steps[0].then[0].then[0].then[0]
    assert runs[shelf.id].pre.features['odom'][0] == pytest.approx(1.25)
    assert runs[shelf.id].post.features['odom'] == pytest.approx((1.15, 1.2, 0.0))
    assert runs[release.id].pre.features['odom'] == pytest.approx((1.15, 1.2, 0.0))
    assert runs[release.id].post.features['odom'] == pytest.approx((1.15, 1.2, 0.0))
    steps = goal_steps(doc)
    assert json.loads(steps[shelf.id].payload_json)['goal']['pose']['position']['x'] == 1.15
    assert steps[release.id].post.features['odom'][0] == pytest.approx(1.15)


def test_an_edit_beyond_what_follows_the_field_still_fails_its_check(tmp_path):
    text = exported(tmp_path)
    start = text.index('# step 2: /goto')
    tail = re.sub(r" *- {element: 'sensor:odom\[0\]', field: goal.pose.position.x}\n", '',
                  text[start:], count=1)
    assert tail != text[start:]
    doc = load(edit_shelf_x(text[:start] + tail, 1.15))  # the editor deleted the dependency
    world, progress, _ = tick(doc)
    assert world.failed and 'post-check of learned step' in world.failed[0]
    assert world.agent is not None and world.agent[0] == 3


@pytest.mark.parametrize('field, value, words', [
    ('x', 1.3, 'step 0 (learned step 1): goal.pose.position.x is bound to param:approach; '
               'edit params, not the goal'),
])
def test_an_edit_of_a_bound_field_is_refused_naming_the_field_and_binding(
        tmp_path, field, value, words):
    text = exported(tmp_path)
    end = text.index('# step 1: /grip')
    head = text[:end]
    old = 'position: {x: 1.25, y: 0.3'
    assert head.count(old) == 1
    edited = head.replace(old, f'position: {{x: {value}, y: 0.3') + text[end:]
    with pytest.raises(ConfigError, match=words.replace('(', r'\(').replace(')', r'\)')):
        load(edited)
    offset = text.replace("'param:approach', offset: 0.0", "'param:approach', offset: 0.05",
                          1)
    assert offset != text
    with pytest.raises(ConfigError, match='parameter binding sends the parameter'):
        load(offset)


def test_params_the_variant_holds_literal_make_the_tree_ask_the_agent(tmp_path):
    text = exported(tmp_path)
    doc = load(text.replace('approach: 1.25', 'approach: 1.35', 1))
    world, progress, _ = tick(doc)
    assert world.sent == [] and world.agent is not None and world.agent[0] == 0
    assert 'approach is 1.25 in its variant' in world.agent[1], world.agent
    # an import refuses it (the cache would have replayed it where run-bt asks the agent)
    for refused in (as_run, goal_steps):
        with pytest.raises(ConfigError, match=r"task 'fetch': params do not fit the tree: "
                           r'approach is 1.25 in its variant .* run-bt asks the agent'):
            refused(doc)
    # the same edit where a second recording bound the parameter: the tree runs it
    text = exported(tmp_path / 'bound', bound={'param:approach'}) if (
        tmp_path / 'bound').mkdir() is None else ''
    assert '# params: approach bound' in text
    doc = load(text.replace('approach: 1.25', 'approach: 1.35', 1))
    world, progress, status = tick(doc)
    assert world.failed == [] and world.agent is None and progress.done == 4
    assert world.sent[0][1]['goal']['pose']['position']['x'] == 1.35
    assert import_variant(doc) == doc.variant
    runs = as_run(doc)  # imported: the bound value sent, what followed it moved
    assert runs[doc.steps[0].id].values == {'goal.pose.position.x': 1.35}
    assert runs[doc.steps[0].id].post.features['odom'][0] == pytest.approx(1.35)
    doc = load(text.replace('bin: 2', 'bin: 3', 1))  # a leaf the bound tree holds literal
    world, _, _ = tick(doc)
    assert world.sent == [] and world.agent[0] == 0 and 'bin is 2' in world.agent[1]
    with pytest.raises(ConfigError, match='bin is 2 in its variant'):
        goal_steps(doc)


def test_run_bt_and_an_import_decide_the_same_on_a_params_edit(tmp_path, capsys):
    text = exported(tmp_path)
    (tmp_path / 'literal.yaml').write_text(text.replace('approach: 1.25', 'approach: 1.35', 1))
    world, _, _ = tick(load((tmp_path / 'literal.yaml').read_text()))
    assert world.sent == [] and world.agent[0] == 0  # run-bt: the agent, from step 0
    capsys.readouterr()
    assert main(['import', str(tmp_path / 'new.db'), str(tmp_path / 'literal.yaml'),
                 '--who', 'ann']) == 1  # the import: refused, for the same reason
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'approach is 1.25 in its variant' in err, err
    assert not (tmp_path / 'new.db').exists()
    # params that fit (the document's own): both run it, the import files its tree
    (tmp_path / 'same.yaml').write_text(text)
    world, progress, _ = tick(load(text))
    assert world.agent is None and progress.done == 4
    assert main(['import', str(tmp_path / 'new.db'), str(tmp_path / 'same.yaml'),
                 '--who', 'ann']) == 0
    with SqliteStore(path=tmp_path / 'new.db') as store:
        assert list(store.trees(task='fetch')) == [canonical(PARAMS)]


def test_a_sensor_bound_field_is_edited_through_its_offset_not_its_goal(tmp_path):
    # the standoff's y is declared relative to the tag's y (within 5 cm of it)
    text = exported(tmp_path, declared=(Declared('/goto', 'goal.pose.position.y',
                                                 'sensor:tag[1]', 0.1, 0.05),))
    end = text.index('# step 1: /grip')
    old = 'position: {x: 1.25, y: 0.3'
    assert text[:end].count(old) == 1
    with pytest.raises(ConfigError, match=r'step 0 \(learned step 1\): goal.pose.position.y '
                       r"is bound to sensor:tag\[1\]; edit the binding's offset, not the goal"):
        load(text[:end].replace(old, 'position: {x: 1.25, y: 0.35') + text[end:])
    binding = "source: 'sensor:tag[1]', offset: 0.0"
    assert text.count(binding) == 1
    doc = load(text.replace(binding, "source: 'sensor:tag[1]', offset: 0.05"))
    world, progress, status = tick(doc)  # 5 cm beside the tag: sent, and expected there
    assert world.failed == [] and world.agent is None and progress.done == 4
    assert world.sent[0][1]['goal']['pose']['position']['y'] == pytest.approx(0.35)
    runs = as_run(doc)  # imported the same way
    assert runs[1].values['goal.pose.position.y'] == pytest.approx(0.35)
    assert runs[1].post.features['odom'][1] == pytest.approx(0.35)
    assert runs[2].pre.features['odom'][1] == pytest.approx(0.35)


def test_a_misspelt_goal_field_is_reported_as_unknown_naming_it(tmp_path):
    text = exported(tmp_path)
    end = text.index('# step 1: /grip')
    old = 'position: {x: 1.25, y: 0.3'  # the first goto's goal x is bound to param:approach
    assert text[:end].count(old) == 1
    misspelt = text[:end].replace(old, 'positon: {x: 1.25, y: 0.3') + text[end:]
    with pytest.raises(ConfigError, match=r'step 0 \(learned step 1\): unknown field '
                       r'goal.pose.positon.x in its goal: the goal as learned has no such '
                       r'field \(did you mean goal.pose.position.x\?\)$') as err:
        load(misspelt)
    assert 'deleted' not in str(err.value) and 'bound' not in str(err.value)
    start = text.index('# step 2: /goto')  # an unbound field, misspelt: the same
    shelf = text[start:].replace('tolerance: 0.3', 'tolerence: 0.3', 1)
    with pytest.raises(ConfigError, match=r'step 2 \(learned step 3\): unknown field '
                       r'tolerence .*did you mean tolerance'):
        load(text[:start] + shelf)
    # a list edited longer or shorter is no unknown field; a field only added is the type's
    learned = {'points[0].positions[0]': 0.1, 'points[1].positions[0]': 0.2, 'speed': 1.0}
    assert unknown_fields({'points[0].positions[0]': 0.1, 'points[2].positions[0]': 0.3,
                           'speed': 1.0}, learned) == ''
    assert unknown_fields({'points[0].positions[0]': 0.1, 'speed': 1.0}, learned) == ''
    assert unknown_fields({**learned, 'sped': 2.0}, learned) == ''
    assert unknown_fields({'points[0].positions[0]': 0.1, 'points[1].positions[0]': 0.2,
                           'sped': 1.0}, learned).startswith('unknown field sped in its goal')


CARRY = 0.4
"""How far ahead of the base (in x) the gripper holds the object it carries."""


def carry_steps() -> list[Step]:
    """Return the fetch as a base that carries what it gripped: the tag 0.4 m ahead of it."""
    def at(base, tag):
        return Snapshot(features={'odom': (base[0], base[1], 0.0), 'tag': (*tag, 0.0)})
    carried = (SHELF[0] + CARRY, SHELF[1])
    worlds = [at((0.0, 0.0), TAG), at(STANDOFF, TAG), at(STANDOFF, TAG), at(SHELF, carried),
              at(SHELF, carried)]
    return [replace(step, pre=worlds[i], post=worlds[i + 1])
            for i, step in enumerate(fetch_steps())]


class Carrier(Base):
    """A base whose gripper, once closed, carries the tag 0.4 m ahead of it."""

    def __init__(self, doc: BtDocument) -> None:
        super().__init__(doc)
        self.tag = TAG
        self.holding = False

    def snapshot(self) -> Snapshot:
        if self.holding:
            self.tag = (self.base[0] + CARRY, self.base[1])
        return Snapshot(features={'odom': (*self.base, 0.0), 'tag': (*self.tag, 0.0)})

    def look(self) -> None:
        self._senses.look(self.snapshot())

    def start_call(self, node, bound) -> None:
        super().start_call(node, bound)
        if node.step.tool == '/grip':
            self.holding = json.loads(node.step.payload_json)['data']

    def post_status(self, node, expected) -> Status:
        result = self._check.evaluate(expected, self.snapshot(), now_time=0.0)
        if not result.passed:
            self.failed.append(f'post-check of learned step {node.id}: '
                               f'{result.failures[0].reason}')
        return Status.SUCCESS if result.passed else Status.FAILURE


def test_an_edit_moves_what_the_robot_carries_with_the_edited_field(tmp_path):
    # the tag rides ahead of the base: at the shelf its x equals no goal field, yet it moved
    # with the base's x (by the same -0.25 m), so an edit of the goto's x moves it too
    with SqliteStore(path=tmp_path / 'cache.db') as store:
        store.add_trajectory(task='fetch', variant=canonical(PARAMS),
                             params_json=canonical(PARAMS), steps=carry_steps())
        tolerance = element_tolerances(SENSORS)
        doc = build(store, task='fetch', variant=canonical(PARAMS),
                    plans=Trees(store, tolerance=tolerance).plans('fetch', canonical(PARAMS)),
                    sensors={s.name: {'tolerance': list(s.tolerance), 'mode': s.mode.value}
                             for s in SENSORS}, tolerance=tolerance)
    text = dump(doc)
    shelf = load(text).steps[0].then[0].then[0]
    assert ('sensor:tag[0]', 'goal.pose.position.x') in shelf.follows, shelf.follows
    assert shelf.unpredictable == ()
    doc = load(edit_shelf_x(text, 1.15))
    world, progress = Carrier(doc), Progress()
    tree = py_trees.trees.BehaviourTree(build_tree(doc, world, progress))
    for _ in range(40):
        tree.tick()
        if tree.root.status is not Status.RUNNING:
            break
    assert world.failed == [] and world.agent is None, (world.failed, world.agent)
    assert tree.root.status is Status.SUCCESS and progress.done == 4
    assert world.tag == pytest.approx((1.55, 1.2))
    runs = as_run(doc)  # imported: the carried tag expected moved at the shelf and after
    shelf, release = doc.steps[0].then[0].then[0], doc.steps[0].then[0].then[0].then[0]
    assert runs[shelf.id].post.features['tag'] == pytest.approx((1.55, 1.2, 0.0))
    assert runs[release.id].pre.features['tag'] == pytest.approx((1.55, 1.2, 0.0))
    assert runs[doc.steps[0].id].post.features['tag'] == pytest.approx((*TAG, 0.0))


def test_an_import_covers_the_declared_bindings_it_saw_and_a_change_to_them_holds_it(tmp_path):
    tag_y = Declared('/goto', 'goal.pose.position.y', 'sensor:tag[1]', 0.1, 0.05)
    (tmp_path / 'fetch.yaml').write_text(exported(tmp_path, declared=(tag_y,)))
    assert main(['import', str(tmp_path / 'new.db'), str(tmp_path / 'fetch.yaml'),
                 '--who', 'ann']) == 0
    with SqliteStore(path=tmp_path / 'new.db') as store:
        (approval,) = store.approvals(task='fetch')
        assert approval.declared == ((1, 'goal.pose.position.y', 'sensor:tag[1]', 0.1),)

        def gate(*declared):
            trees = Trees(store, tolerance=element_tolerances(SENSORS), declared=declared)
            return gate_tree(Gate.parse('approval'), store,
                             trees.view('fetch', canonical(PARAMS)))
        assert gate(tag_y).reasons == {}  # the cache's params file declares what ann saw
        wider = gate(replace(tag_y, max_shift=0.3))  # then someone widened it
        assert wider.nodes == frozenset() and list(wider.reasons) == [approval.trajectory_id]
        assert wider.reasons[approval.trajectory_id].startswith(
            'the declared binding of goal.pose.position.y on learned step 1 of trajectory 1 '
            'changed after '
            "ann's approval of trajectory 1 of task fetch (")
        assert 'sensor:tag[1] (max_shift 0.1), now sensor:tag[1] (max_shift 0.3)' in \
            wider.reasons[approval.trajectory_id]
        assert 'was removed after' in gate().reasons[approval.trajectory_id]


def test_trust_and_tree_show_an_approval_the_params_file_no_longer_matches(tmp_path, capsys):
    tag_y = Declared('/goto', 'goal.pose.position.y', 'sensor:tag[1]', 0.1, 0.05)
    (tmp_path / 'fetch.yaml').write_text(exported(tmp_path, declared=(tag_y,)))
    db = str(tmp_path / 'new.db')
    assert main(['import', db, str(tmp_path / 'fetch.yaml'), '--who', 'ann']) == 0
    capsys.readouterr()

    def params(max_shift: float) -> str:  # the node's params file, binding tag_y as declared
        path = tmp_path / f'params_{max_shift}.yaml'
        path.write_text(json.dumps({'muscle_mem': {'ros__parameters': {
            'sensors': {s.name: {'topic': f'/{s.name}', 'type': 'geometry_msgs/msg/Point',
                                 'tolerance': list(s.tolerance), 'mode': s.mode.value}
                        for s in SENSORS},
            'services': {'goto': {'server': '/goto', 'type': 'nav_msgs/srv/GetPlan'}},
            'bindings': {'tag_y': {'tool': 'goto', 'field': 'goal.pose.position.y',
                                   'source': 'sensor:tag[1]', 'max_offset': 0.05,
                                   'max_shift': max_shift}}}}}))
        return str(path)

    def trust(*extra: str) -> tuple[list[dict[str, Any]], str]:
        assert main(['trust', db, 'fetch', '--json', *extra]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert main(['trust', db, 'fetch', *extra]) == 0
        out, err = capsys.readouterr()  # the table, then the notes (stderr)
        return rows, ' '.join((out + err).split())

    (row,), text = trust('--params', params(0.1))  # what ann saw: approved, not held
    assert (row['approved_by'], row['approval_held'], row['declared_seen']) == ('ann', '', 1)
    assert '(held)' not in text and 'checked only with --params' not in text
    (row,), text = trust('--params', params(0.3))  # widened since: held, with the gate's reason
    assert row['approved_by'] == 'ann'
    assert row['approval_held'].startswith('the declared binding of goal.pose.position.y on '
                                           'learned step 1 of trajectory 1 changed after ')
    assert 'ann (held)' in text and 'now sensor:tag[1] (max_shift 0.3)' in text
    (row,), text = trust()  # no params file: not compared, and said so
    assert row['approval_held'] is None
    assert 'checked only with --params FILE' in text
    assert main(['tree', db, 'fetch', '--params', params(0.3)]) == 0
    text = ' '.join(''.join(capsys.readouterr()).split())
    assert 'approved by ann, HELD by the approval gate' in text
    assert 'now sensor:tag[1] (max_shift 0.3)' in text
