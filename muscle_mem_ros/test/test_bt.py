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
Behavior tree export: the document, its py_trees tree, the BehaviorTree.CPP XML, import.

The py_trees tree is ticked against a world in a dict (a test double of the robot side,
:class:`~muscle_mem_ros.bt.tree.Runtime`); its decisions come from the real binding
judge. The XML is checked against the format and parsed and ticked by BehaviorTree.CPP
itself (``behaviortreepy``). The ROS runner on the MuJoCo arm is tested in
muscle_mem_demo (test_sim_behavior_tree.py).
"""

from __future__ import annotations

import json
from pathlib import Path
import sqlite3
from xml.etree import ElementTree

from cli_helpers import build_store, SENSOR_PARAMS
from muscle_mem_ros.bindings.judge import BindingJudge
from muscle_mem_ros.bindings.rules import Binding, DECLARED, element_tolerances
from muscle_mem_ros.body import ANY_BODY
from muscle_mem_ros.bt.btcpp import LEAVES, to_xml as btcpp
from muscle_mem_ros.bt.document import BtDocument, BtStep
from muscle_mem_ros.bt.tree import build_tree, Progress
from muscle_mem_ros.bt.yamlfile import dump, load
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.cli import main
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.records import CompareMode, SensorSpec, Snapshot, ToolKind
from muscle_mem_ros.replay.shadow import SnapshotSenses
from muscle_mem_ros.resume import Resume
from muscle_mem_ros.store import SqliteStore
from node_helpers import Names, params as node_params, write_params
from py_trees.common import Status
import py_trees.trees
import pytest

SENSORS = [SensorSpec('object', (0.02,), CompareMode.ABS)]


def pick_document() -> BtDocument:
    """Move above the cube (x bound to its x + 2 cm), then close the gripper."""
    grip = BtStep(id=2, tool='/gripper', kind=ToolKind.SERVICE, type_name='std_srvs/srv/SetBool',
                  goal={'data': True}, pre={'object': [0.40, 0.20]},
                  post={'object': [0.40, 0.20]}, trajectories=(1,), successes=3, end=True)
    move = BtStep(id=1, tool='/arm/move', kind=ToolKind.ACTION, type_name='demo/action/Move',
                  goal={'target': {'x': 0.42, 'y': 0.2}}, pre={'object': [0.40, 0.20]},
                  post={'object': [0.40, 0.20]},
                  bindings=(Binding('target.x', 'sensor:object[0]', 0.02, 0.1, DECLARED),),
                  trajectories=(1,), successes=3, then=[grip])
    return BtDocument(task='pick', params={}, variant='{}',
                      sensors={'object': {'tolerance': [0.02], 'mode': 'abs'}}, steps=[move])


class World:
    """The robot side of a tree as a dict: the cube, what was sent, whom was asked."""

    def __init__(self, doc: BtDocument, cube: tuple[float, float]) -> None:
        self.cube = cube
        self.sent: list[tuple[int, dict]] = []
        self.agent: tuple[int, str] | None = None
        self.resume: Resume | None = None
        self.failing_post: set[int] = set()
        check = ToleranceCheck(sensors=SENSORS)
        self._senses = SnapshotSenses(check, element_tolerances(SENSORS), doc.params)
        self._judge = BindingJudge(plans=doc.plans(), params=doc.params, senses=self._senses)

    def judge(self):
        return self._judge

    def look(self):
        self._senses.look(Snapshot(features={'object': self.cube}))

    def start_call(self, node, bound):
        self.sent.append((node.id, dict(bound.values) if bound else {}))

    def call_status(self):
        return Status.SUCCESS

    def post_status(self, node, expected):
        return Status.FAILURE if node.id in self.failing_post else Status.SUCCESS

    def start_agent(self, resume):
        self.agent = (resume.step, resume.reason)
        self.resume = resume

    def agent_status(self):
        return Status.SUCCESS


def tick(doc: BtDocument, cube: tuple[float, float],
         failing_post: tuple[int, ...] = ()) -> tuple[World, Progress, Status]:
    world, progress = World(doc, cube), Progress()
    world.failing_post = set(failing_post)
    tree = py_trees.trees.BehaviourTree(build_tree(doc, world, progress))
    for _ in range(20):
        tree.tick()
        if tree.root.status is not Status.RUNNING:
            break
    return world, progress, tree.root.status


def test_the_tree_replays_as_recorded_then_follows_the_cube_then_asks_the_agent():
    doc = pick_document()
    world, progress, status = tick(doc, (0.40, 0.20))
    assert status is Status.SUCCESS and world.agent is None
    assert world.sent == [(1, {}), (2, {})] and progress.done == 2
    world, _, status = tick(doc, (0.45, 0.20))  # 5 cm: the binding moves x, the shift
    assert status is Status.SUCCESS and world.agent is None  # carries to the next check
    assert world.sent[0][0] == 1 and world.sent[0][1]['target.x'] == pytest.approx(0.47)
    world, progress, status = tick(doc, (0.55, 0.20))  # 15 cm: beyond max_shift
    assert world.sent == [] and world.agent is not None
    assert world.agent[0] == 0 and 'max_shift' in world.agent[1], world.agent
    assert progress.agent_asked and status is Status.SUCCESS  # the agent did it


def test_a_deleted_branch_is_not_run_and_an_edited_goal_is_sent():
    text = dump(pick_document())
    doc = load(text[:text.index('  then:\n    # step 1')] + '  then: []\n')  # branch deleted
    assert doc.steps[0].then == [] and not doc.steps[0].end
    world, _, _ = tick(doc, (0.40, 0.20))
    assert [i for i, _ in world.sent] == [1] and world.agent == (
        1, 'no learned step passes at step 1')  # the rest is the agent's


def test_the_document_round_trips_with_a_comment_per_step(tmp_path):
    text = dump(pick_document())
    assert '# step 0: /arm/move, trajectory 1, succeeded 3 times; bound: target.x <- ' \
           'sensor:object[0]' in text
    assert '    # step 1: /gripper' in text
    back = load(text)
    assert dump(back) == text
    assert back.steps[0].bindings == pick_document().steps[0].bindings
    assert [[s.id for s in p] for p in back.paths()] == [[1, 2]]


def test_an_orientation_binding_round_trips_with_its_turn():
    turn = (0.0, 0.0, 0.258819, 0.965926)  # the grasp turned 30 deg from the cube
    doc = pick_document()
    move = doc.steps[0]
    move.bindings = move.bindings + (
        Binding('target.orientation', 'sensor:cube', 0.0, 0.6, DECLARED, turn=turn),)
    move.pre = {**move.pre, 'cube': [0.4, 0.2, 0.0, 0.0, 0.0, 0.0, 1.0]}  # a TF sensor's pose
    move.goal = {'target': {**move.goal['target'],
                            'orientation': {'x': 0.0, 'y': 0.0, 'z': 0.258819, 'w': 0.965926}}}
    doc.sensors['cube'] = {'tolerance': [0.01, 0.05], 'mode': 'pose'}
    back = load(dump(doc))
    assert back.steps[0].bindings == move.bindings
    assert back.steps[0].bindings[-1].turn == pytest.approx(turn)
    xml = btcpp(doc)
    assert 'target.orientation&lt;-sensor:cube*turn(0,0,0.258819,0.965926)' in xml


@pytest.mark.parametrize('edit, words', [
    (lambda t: t.replace('format: muscle_mem_bt/1', 'format: other'), 'not a muscle_mem'),
    (lambda t: t.replace('kind: service', 'kind: teleport'), 'steps[0].then[0] (id 2): kind'),
    (lambda t: t.replace('- id: 2', '- id: 1'), '(id 1): id: used twice'),
    (lambda t: t.replace('tool: /gripper', 'tool: [1]'), 'tool: missing or not a str'),
])
def test_a_malformed_document_is_refused_naming_the_step(edit, words):
    with pytest.raises(ConfigError, match=words.replace('(', r'\(').replace(')', r'\)')
                       .replace('[', r'\[').replace(']', r'\]')):
        load(edit(dump(pick_document())))


def exported(tmp_path: Path, kind: str) -> str:
    store = build_store(tmp_path / 'cache.db')
    params = tmp_path / 'params.yaml'
    params.write_text(json.dumps({'muscle_mem': {'ros__parameters': {'sensors': {
        name: {'topic': f'/{name}', 'type': 'sensor_msgs/msg/JointState',
               'fields': ['position'], **spec} for name, spec in SENSOR_PARAMS.items()}}}}))
    out = tmp_path / f'pick.{kind}'
    assert main(['export', str(store), 'pick', '--bt', kind, '--out', str(out),
                 '--params', str(params)]) == 0
    return out.read_text()


def test_btcpp_xml_follows_the_format(tmp_path):
    root = ElementTree.fromstring(exported(tmp_path, 'btcpp'))
    assert root.tag == 'root' and root.get('BTCPP_format') == '4'
    trees = root.findall('BehaviorTree')
    assert [t.get('ID') for t in trees] == [root.get('main_tree_to_execute')] == ['pick']
    assert len(trees[0]) == 1  # one root node per BehaviorTree
    model = {e.get('ID'): (e.tag, [p.get('name') for p in e.findall('input_port')])
             for e in root.find('TreeNodesModel')}
    assert model == {k: (c, list(ports)) for k, (c, ports) in LEAVES.items()}
    controls = {'Fallback', 'Sequence', 'AlwaysSuccess'}
    calls = []
    for element in trees[0][0].iter():
        assert element.tag in controls | set(LEAVES), element.tag
        if element.tag in LEAVES:  # every port given, nothing else but the name
            assert set(element.attrib) == {'name', *LEAVES[element.tag][1]}, element.attrib
        if element.tag == 'MuscleMemCall':
            calls.append(element)
            json.loads(element.get('goal'))
    with SqliteStore(path=tmp_path / 'cache.db') as store:
        learned = {n for t in store.trajectories(task='pick') for n in t.node_ids}
    assert {int(c.get('step')) for c in calls} == learned and len(calls) == len(learned)
    assert trees[0][0].tag == 'Fallback' and trees[0][0][-1].tag == 'MuscleMemAskAgent'


def test_behaviortree_cpp_parses_and_ticks_the_export(tmp_path):
    bt = pytest.importorskip('behaviortreepy', reason='behaviortreepy (BehaviorTree.CPP v4 '
                             'Python bindings) is not installed')
    root = ElementTree.fromstring(exported(tmp_path, 'btcpp'))
    for element in root.iter():  # the leaves register without ports: drop them
        if element.tag in LEAVES:
            element.attrib = {'name': element.get('name')}
    root.remove(root.find('TreeNodesModel'))
    ticked: list[str] = []
    factory = bt.BehaviorTreeFactory()

    def leaf(kind: str, result: object):
        def tick(node=None):
            ticked.append(kind)
            return result
        return tick
    factory.register_simple_condition('MuscleMemPreCheck', leaf('pre', bt.NodeStatus.SUCCESS))
    factory.register_simple_condition('MuscleMemPostCheck', leaf('post', bt.NodeStatus.SUCCESS))
    factory.register_simple_action('MuscleMemCall', leaf('call', bt.NodeStatus.SUCCESS))
    factory.register_simple_action('MuscleMemAskAgent', leaf('agent', bt.NodeStatus.SUCCESS))
    tree = factory.create_tree_from_text(ElementTree.tostring(root, encoding='unicode'))
    assert tree.tick_while_running() == bt.NodeStatus.SUCCESS
    assert ticked == ['pre', 'call', 'post', 'pre', 'call', 'post']  # the best branch


def test_import_brings_a_reviewed_tree_back_approved_and_refuses_a_bad_goal(tmp_path):
    text = exported(tmp_path, 'py_trees')
    (tmp_path / 'ok.yaml').write_text(text.replace('order: 7', 'order: 8'))
    assert main(['import', str(tmp_path / 'new.db'), str(tmp_path / 'ok.yaml'),
                 '--who', 'alice']) == 0
    with SqliteStore(path=tmp_path / 'cache.db') as store:
        exported_count = len(store.trajectories(task='pick'))
    with SqliteStore(path=tmp_path / 'new.db') as store:
        found = store.trajectories(task='pick')
        assert len(found) == exported_count
        assert {a.who for a in store.approvals(task='pick')} == {'alice'}
        assert {a.trajectory_id for a in store.approvals(task='pick')} == {t.id for t in found}
        orders = {json.loads(store.path(t.id)[-1].step.payload_json).get('order')
                  for t in found}
        assert orders == {5, 8}  # the edit came back
        assert {t.body for t in found} == {ANY_BODY}  # no --body: it replays on any body
    key = 'panda@' + '3f2c' * 4  # --body: for that body only (a full key, as a node logs it)
    assert main(['import', str(tmp_path / 'panda.db'), str(tmp_path / 'ok.yaml'),
                 '--who', 'alice', '--body', key]) == 0
    with SqliteStore(path=tmp_path / 'panda.db') as store:
        assert {t.body for t in store.trajectories(task='pick')} == {key}
    assert main(['import', str(tmp_path / 'panda.db'), str(tmp_path / 'ok.yaml'),
                 '--who', 'alice', '--body', 'ur5e@91ab']) == 1  # names no body of the store
    bad = text.replace('order: 7', 'order: seven')
    (tmp_path / 'bad.yaml').write_text(bad)
    assert main(['import', str(tmp_path / 'bad2.db'), str(tmp_path / 'bad.yaml'),
                 '--who', 'alice']) == 1
    assert not (tmp_path / 'bad2.db').exists()  # refused before anything was written


def test_import_without_who_is_refused_in_one_line_naming_the_flag(tmp_path, capsys):
    (tmp_path / 'ok.yaml').write_text(exported(tmp_path, 'py_trees'))
    capsys.readouterr()
    for who in ([], ['--who', ' ']):
        assert main(['import', str(tmp_path / 'new.db'), str(tmp_path / 'ok.yaml'), *who]) == 1
        err = capsys.readouterr().err
        assert err.count('\n') == 1, err
        assert err.startswith('muscle-mem import: error: --who NAME is required'), err
        assert not (tmp_path / 'new.db').exists()  # nothing approved as user@host


def test_the_agent_is_asked_from_the_steps_done_with_steps_done_set():
    """The hand-off after 1 step: resume_from_step 1 and steps_done 1, as the cache sends."""
    from muscle_mem_ros.ros.messages.convert import resume_goal
    world, progress, _ = tick(pick_document(), (0.40, 0.20), failing_post=(1,))
    assert [i for i, _ in world.sent] == [1] and progress.done == 1
    assert world.agent == (1, 'post-check of step 0 failed'), world.agent
    goal = resume_goal(task='pick', params_json='{}', resume=world.resume)
    assert (goal.resume_from_step, goal.steps_done) == (1, 1)
    assert world.resume.replayed == ('/arm/move',) and world.resume.last_node == 1
    world, progress, _ = tick(pick_document(), (0.40, 0.20), failing_post=(2,))
    assert progress.done == 2 and world.resume.steps_done == world.resume.step == 2


@pytest.mark.parametrize('text, where', [
    ('format: muscle_mem_bt/1\nsteps: [1, 2\ntask: x\n', 'line 3, column 5'),
    ('format: muscle_mem_bt/1\n\tsteps: []\n', 'line 2, column 1'),
    ('task: a: b\n', 'line 1, column 8'),
])
def test_a_file_that_is_not_yaml_is_one_line_with_its_place(text, where):
    with pytest.raises(ConfigError) as info:
        load(text, source='t.yaml')
    message = str(info.value)
    assert '\n' not in message and message.startswith(f't.yaml: not YAML: {where}: '), message


def test_a_shadow_disagreement_prints_4_significant_digits():
    from muscle_mem_ros.replay.shadow import Difference
    text = str(Difference('target.x', 1.100077819352233, 1.2000000000000002, 0.0999222))
    assert text == 'target.x off by 0.09992 (cache 1.1, agent 1.2)', text
    assert str(Difference('mode', 'fast', 'slow')) == "mode: cache 'fast', agent 'slow'"


def test_run_bt_under_a_gate_runs_only_a_file_someone_states_they_reviewed(tmp_path):
    """The mobile picker: learned through the cache, exported, then run with no cache."""
    import subprocess
    import sys

    from mobile_helpers import MobileHarness
    from node_helpers import write_params
    h = MobileHarness(tmp=tmp_path)
    try:
        h.start_cache()
        h.robot.reset()
        assert h.run_task('fetch', json.dumps({'bin': 1})).result.success
        h.stop_cache()
        tree = tmp_path / 'fetch.bt.yaml'

        def run_bt(replay_requires: str, *extra: str) -> tuple[subprocess.CompletedProcess, int]:
            params = write_params(tmp_path / f'{replay_requires}.yaml', '/**',
                                  h.values(replay_requires=replay_requires))
            if not tree.exists():
                assert main(['export', str(tmp_path / 'cache.db'), 'fetch', '--bt',
                             'py_trees', '--out', str(tree), '--params', str(params)]) == 0
            h.robot.reset()
            before = len(h.robot.gotos)
            done = subprocess.run(
                [sys.executable, '-m', 'muscle_mem_ros.cli', 'run-bt', str(tree), *extra,
                 '--ros-args', '--params-file', str(params)],
                capture_output=True, text=True, timeout=120)
            return done, len(h.robot.gotos) - before

        refused, moved = run_bt('approval')
        assert refused.returncode == 1 and moved == 0, refused.stdout + refused.stderr
        assert refused.stderr.count('\n') == 1 and 'replay_requires is approval' in \
            refused.stderr and '--reviewed-by' in refused.stderr, refused.stderr
        refused, moved = run_bt('shadow:2')
        assert refused.returncode == 1 and moved == 0
        assert 'replay_requires is shadow:2' in refused.stderr, refused.stderr
        reviewed, moved = run_bt('approval', '--reviewed-by', 'carol')
        assert reviewed.returncode == 0 and moved == 2, reviewed.stdout + reviewed.stderr
        assert 'reviewed by carol: the file runs as it is (replay_requires: approval)' in \
            reviewed.stdout
        ungated, moved = run_bt('none')
        assert ungated.returncode == 0 and moved == 2, ungated.stdout + ungated.stderr
        assert 'reviewed by' not in ungated.stdout
    finally:
        h.close()


def test_run_bt_has_a_usage_and_a_help(capsys):
    assert main(['run-bt', '--help']) == 0
    out = capsys.readouterr().out
    assert out.startswith('usage: muscle-mem run-bt [-h] ') and \
        out.split('\n')[0].endswith(' FILE [--ros-args ...]'), out
    assert 'resume_from_step' in out and 'learned step N' in out
    assert main(['run-bt']) == 2
    assert 'usage: muscle-mem run-bt' in capsys.readouterr().err
    assert main(['run-bt', 'a.yaml', 'b.yaml', '--ros-args', '-r', '__ns:=/x']) == 2


def test_run_bt_refuses_a_file_that_is_not_yaml_in_one_line(capsys, tmp_path):
    bad = tmp_path / 'bad.bt.yaml'
    bad.write_text(dump(pick_document()).replace('steps:\n', 'steps: [\n', 1))
    assert main(['run-bt', str(bad), '--ros-args', '-r', '__ns:=/nowhere']) == 1
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and err.startswith(
        f'muscle-mem run-bt: error: {bad}: not YAML: line '), err


PANDA_KEY = 'panda@' + '3f2c' * 4
UR5E_KEY = 'ur5e@' + '91ab' * 4


def _learned_on(path: Path, body: str, *, trajectory: int | None = None) -> None:
    """Say in the store that the trajectories of ``pick`` (or one) were learned on ``body``."""
    conn = sqlite3.connect(path)
    where, args = ('task = ?', ('pick',)) if trajectory is None else ('id = ?', (trajectory,))
    conn.execute(f'UPDATE trajectories SET body = ? WHERE {where}', (body, *args))
    conn.commit()
    conn.close()


def test_a_tree_goes_out_and_back_on_the_body_it_was_learned_on(tmp_path, capsys):
    """Issue 43 items 9 and 10: export --bt records the body; import keeps it, or says why not."""
    text = exported(tmp_path, 'py_trees')  # (builds cache.db)
    _learned_on(tmp_path / 'cache.db', PANDA_KEY)
    out = tmp_path / 'pick.yaml'
    assert main(['export', str(tmp_path / 'cache.db'), 'pick', '--bt', 'py_trees',
                 '--out', str(out)]) == 0
    assert load(out.read_text()).body == PANDA_KEY
    capsys.readouterr()
    assert main(['import', str(tmp_path / 'kept.db'), str(out), '--who', 'alice']) == 0
    said = capsys.readouterr().out
    assert 'for body panda@3f2c' in said, said
    with SqliteStore(path=tmp_path / 'kept.db') as store:
        assert {t.body for t in store.trajectories(task='pick')} == {PANDA_KEY}
    # another body stamped on the Panda's branches: refused, naming both; nothing written
    assert main(['import', str(tmp_path / 'stamped.db'), str(out), '--who', 'alice',
                 '--body', UR5E_KEY]) == 1
    err = capsys.readouterr().err
    assert 'learned on panda@3f2c' in err and 'ur5e@91ab' in err, err
    assert not (tmp_path / 'stamped.db').exists()
    # a tree that mixes bodies goes out only for the body chosen
    with SqliteStore(path=tmp_path / 'cache.db') as store:
        pick = store.trajectories(task='pick')
    _learned_on(tmp_path / 'cache.db', UR5E_KEY, trajectory=pick[-1].id)
    assert main(['export', str(tmp_path / 'cache.db'), 'pick', '--bt', 'py_trees',
                 '--out', str(tmp_path / 'mixed.yaml')]) == 1
    err = capsys.readouterr().err
    assert 'mixes bodies' in err and 'panda@3f2c' in err and 'ur5e@91ab' in err, err
    assert main(['export', str(tmp_path / 'cache.db'), 'pick', '--bt', 'py_trees',
                 '--out', str(tmp_path / 'ur5e.yaml'), '--body', 'ur5e@91ab']) == 0
    doc = load((tmp_path / 'ur5e.yaml').read_text())
    assert doc.body == UR5E_KEY and len(doc.paths()) == 1
    # a file that records no body (written before bodies) is imported for any body, said so
    old = '\n'.join(line for line in out.read_text().splitlines()
                    if not line.startswith('body:')) + '\n'
    (tmp_path / 'old.yaml').write_text(old)
    assert load(old).body == ''
    capsys.readouterr()
    assert main(['import', str(tmp_path / 'any.db'), str(tmp_path / 'old.yaml'),
                 '--who', 'alice']) == 0
    said = capsys.readouterr().out
    assert 'for any body' in said, said
    with SqliteStore(path=tmp_path / 'any.db') as store:
        assert {t.body for t in store.trajectories(task='pick')} == {ANY_BODY}
        assert store.bodies() == {ANY_BODY: len(pick)}
    assert main(['bodies', str(tmp_path / 'any.db')]) == 0
    said = capsys.readouterr().out
    assert 'imported for any body' in said and 'learned before' not in said, said
    assert text  # (the first export, without a body chosen, was of a tree of one body)


def test_an_import_of_one_trajectory_says_trajectory(tmp_path, capsys):
    build_store(tmp_path / 'cache.db')
    out = tmp_path / 'wave.yaml'
    assert main(['export', str(tmp_path / 'cache.db'), 'wave', '--bt', 'py_trees',
                 '--out', str(out)]) == 0
    capsys.readouterr()
    assert main(['import', str(tmp_path / 'new.db'), str(out), '--who', 'alice']) == 0
    said = capsys.readouterr().out
    assert said.startswith("imported 1 trajectory of task 'wave'"), said


def test_run_bt_refuses_a_file_learned_on_another_body_before_anything_moves(capsys, tmp_path):
    """Issue 43 item 9: run-bt checks the body the file records against this robot's."""
    names = Names.unique()
    params_file = write_params(tmp_path / 'robot.yaml', '/**',
                               node_params(names, store=tmp_path / 'unused.db'))
    doc = pick_document()
    doc.body = UR5E_KEY
    (tmp_path / 'ur5e.bt.yaml').write_text(dump(doc))
    capsys.readouterr()
    assert main(['run-bt', str(tmp_path / 'ur5e.bt.yaml'), '--ros-args', '-r',
                 f'__ns:=/{names.prefix}', '--params-file', str(params_file)]) == 1
    err = capsys.readouterr().err
    assert "refused: this file's branches were learned on ur5e@91ab, this robot is " in err, err
    assert err.count('\n') == 1, err
