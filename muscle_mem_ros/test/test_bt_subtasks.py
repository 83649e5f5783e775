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
Subtask steps as people see them: ``muscle-mem tree``, stats, the behavior tree exports, run-bt.

A real SQLite store, written through the store API, holds task ``pick`` (a Fibonacci goal
then a gripper request), ``tidy`` (a subtask step calling ``pick`` with ``{"n": 5}``, then
a Fibonacci goal), ``stack`` (``pick``, then ``place``, which was never learned, then a
goal) and ``a`` and ``b``, which call each other (each learned as the task sent, in two
runs: the cache would refuse the inner call). Subtask steps are built with
:func:`~muscle_mem_ros.replay.subtasks.subtask_step`, as the node records them. The
BehaviorTree.CPP XML is loaded and ticked by BehaviorTree.CPP itself (``behaviortreepy``);
the py_trees tree is ticked against a world in a list (the robot side,
:class:`~muscle_mem_ros.bt.tree.Runtime`), and run-bt against the fake arm's real servers.
"""

from __future__ import annotations

import json
from pathlib import Path
import sqlite3
import subprocess
import sys
from xml.etree import ElementTree

from muscle_mem_ros.bindings.judge import BindingJudge
from muscle_mem_ros.bindings.rules import Binding, DECLARED, element_tolerances
from muscle_mem_ros.bindings.variants import BOUND, canonical
from muscle_mem_ros.bt.btcpp import LEAVES
from muscle_mem_ros.bt.document import BtDocument, BtStep
from muscle_mem_ros.bt.tree import build_tree, Progress
from muscle_mem_ros.bt.yamlfile import dump, load
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.cli import main
from muscle_mem_ros.cli.bt import export_bt
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.records import CompareMode, SensorSpec, Snapshot, Step, ToolKind
from muscle_mem_ros.replay.shadow import SnapshotSenses
from muscle_mem_ros.replay.subtasks import subtask_step, SUBTASK_TYPE
from muscle_mem_ros.ros.messages.cdr import canonical_cdr
from muscle_mem_ros.store import SqliteStore
from py_trees.common import Status
import py_trees.trees
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from std_srvs.srv import SetBool
from test_msgs.action import Fibonacci

FIB_TYPE = 'test_msgs/action/Fibonacci'
GRIPPER_TYPE = 'std_srvs/srv/SetBool'
HOME = {'joints': (0.0, 0.0, 0.0), 'object': (0.4, 0.1, 0.05)}
"""The fake arm's sensors at rest (node_helpers.FakeRobot): every step's pre and post."""
SENSORS = [SensorSpec('joints', (0.01,), CompareMode.ABS),
           SensorSpec('object', (0.02,), CompareMode.NORM)]


def _snap() -> Snapshot:
    return Snapshot(features=dict(HOME), stamps={'joints': 0.99, 'object': 0.98}, taken_at=1.0)


def fib(server: str, order: int) -> Step:
    goal = Fibonacci.Goal(order=order)
    return Step(tool=server, kind=ToolKind.ACTION, type_name=FIB_TYPE,
                payload=canonical_cdr(bytes(serialize_message(goal)), type(goal)),
                payload_json=json.dumps({'order': order}), pre=_snap(), post=_snap(),
                duration=0.1)


def grip(server: str) -> Step:
    request = SetBool.Request(data=True)
    return Step(tool=server, kind=ToolKind.SERVICE, type_name=GRIPPER_TYPE,
                payload=canonical_cdr(bytes(serialize_message(request)), type(request)),
                payload_json=json.dumps({'data': True}), pre=_snap(), post=_snap(),
                duration=0.1)


def call(task: str, params: dict) -> Step:
    return subtask_step(task, params, pre=_snap(), post=_snap(), duration=0.5)


def build_store(path: Path, fib_server: str = '/fib', gripper: str = '/gripper') -> Path:
    """Write the store of the module docstring; return its path."""
    with SqliteStore(path=path) as store:
        def add(task: str, params: dict, steps: list[Step]) -> None:
            text = json.dumps(params, sort_keys=True, separators=(',', ':'))
            store.add_trajectory(task=task, variant=text, params_json=text, steps=steps)
        add('pick', {'n': 5}, [fib(fib_server, 5), grip(gripper)])
        add('tidy', {}, [call('pick', {'n': 5}), fib(fib_server, 8)])
        add('stack', {}, [call('pick', {'n': 5}), call('place', {'y': 1}), fib(fib_server, 3)])
        add('a', {}, [call('b', {}), fib(fib_server, 1)])
        add('b', {}, [call('a', {}), fib(fib_server, 2)])
        for task, hit in (('pick', True), ('pick', True), ('pick', False), ('tidy', True)):
            store.note_outcome(task=task, hit=hit)
    return path


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return build_store(tmp_path / 'cache.db')


def exported(store: Path, task: str, kind: str) -> str:
    with SqliteStore(path=store, read_only=True, abandoned_retention=None) as opened:
        return export_bt(opened, task, kind=kind, params=None)


def run_cli(capsys, *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_tree_shows_a_subtask_step_with_its_params_and_opens_it(capsys, store):
    text = run_cli(capsys, 'tree', str(store), 'tidy')
    assert '[0] subtask pick {"n":5}  (x1, ' in text, text
    flat = ' '.join(text.split())  # a long store path may wrap the line
    assert f'its tree: muscle-mem tree {store} pick └── [1] /fib order=8' in flat, text
    assert '/fib' not in text.split('[1]')[0]  # pick's own steps are not in tidy's tree
    data = json.loads(run_cli(capsys, 'tree', str(store), 'tidy', '--json'))
    entry = data[0]['steps'][0]
    assert entry['kind'] == 'subtask' and entry['type'] == SUBTASK_TYPE
    assert entry['subtask'] == {'task': 'pick', 'params': {'n': 5}}
    assert entry['children'][0]['subtask'] is None and entry['children'][0]['tool'] == '/fib'
    assert main(['tree', str(store), 'stack', '--subtasks']) == 0
    opened, err = capsys.readouterr()
    assert 'subtask pick  params {"n":5}  (1 trajectories)' in opened, opened
    assert '[0] /fib  order=5' in opened and '[1] /gripper  data=true' in opened, opened
    assert "subtask 'place': not learned (the cache asks the agent for it)" in err, err
    data = json.loads(run_cli(capsys, 'tree', str(store), 'a', '--subtasks', '--json'))
    assert list(data['subtasks']) == ['b']  # b calls a: opened once, not again
    shown = json.loads(run_cli(capsys, 'show', str(store), 'tidy', '--json'))
    assert shown[0]['steps'][0]['kind'] == 'subtask'
    assert shown[0]['steps'][0]['goal'] == {'params': {'n': 5}, 'task': 'pick'}


def test_stats_count_hits_per_task_including_subtasks(capsys, store):
    data = json.loads(run_cli(capsys, 'stats', str(store), '--json'))
    per_task = {t['task']: (t['hits'], t['misses']) for t in data['per_task']}
    assert per_task['pick'] == (2, 1) and per_task['tidy'] == (1, 0), per_task
    assert (data['hits'], data['misses']) == (3, 1)
    rows = json.loads(run_cli(capsys, 'tasks', str(store), '--json'))
    assert {r['task']: r['hits'] for r in rows}['pick'] == 2


def test_btcpp_calls_the_subtask_as_a_subtree_of_its_own_tree(store):
    root = ElementTree.fromstring(exported(store, 'tidy', 'btcpp'))
    trees = {t.get('ID'): t for t in root.findall('BehaviorTree')}
    assert list(trees) == ['tidy', 'pick'] and root.get('main_tree_to_execute') == 'tidy'
    (subtree,) = trees['tidy'].iter('SubTree')
    assert subtree.get('ID') == 'pick' and subtree.get('task') == 'pick'
    assert subtree.get('name').startswith('subtask pick {"n":5} (learned step ')
    calls = [c.get('tool') for c in trees['pick'].iter('MuscleMemCall')]
    assert calls == ['/fib', '/gripper'], calls
    assert [c.get('tool') for c in trees['tidy'].iter('MuscleMemCall')] == ['/fib']
    asks = {(a.get('task'), a.get('params')) for a in trees['pick'].iter('MuscleMemAskAgent')}
    assert asks == {('pick', '{"n":5}')}  # the subtask's hand-off asks for the subtask
    assert ticked(root) == ['pre', 'pre', 'call', 'post', 'pre', 'call', 'post', 'post', 'pre',
                            'call', 'post']


def ticked(root: ElementTree.Element) -> list[str]:
    """Load the XML in BehaviorTree.CPP (leaves registered without ports), tick it."""
    bt = pytest.importorskip('behaviortreepy', reason='behaviortreepy (BehaviorTree.CPP v4 '
                             'Python bindings) is not installed')
    for element in root.iter():
        if element.tag in LEAVES:
            element.attrib = {'name': element.get('name')}
    root.remove(root.find('TreeNodesModel'))
    seen: list[str] = []
    factory = bt.BehaviorTreeFactory()

    def leaf(kind: str):
        def tick(node=None):
            seen.append(kind)
            return bt.NodeStatus.SUCCESS
        return tick
    factory.register_simple_condition('MuscleMemPreCheck', leaf('pre'))
    factory.register_simple_condition('MuscleMemPostCheck', leaf('post'))
    factory.register_simple_action('MuscleMemCall', leaf('call'))
    factory.register_simple_action('MuscleMemAskAgent', leaf('agent'))
    factory.register_simple_action('MuscleMemWatch', lambda node=None: bt.NodeStatus.RUNNING)
    tree = factory.create_tree_from_text(ElementTree.tostring(root, encoding='unicode'))
    assert tree.tick_while_running() == bt.NodeStatus.SUCCESS
    return seen


def test_btcpp_refuses_a_call_of_a_running_task_and_asks_for_an_unlearned_one(store):
    root = ElementTree.fromstring(exported(store, 'a', 'btcpp'))
    trees = {t.get('ID'): t for t in root.findall('BehaviorTree')}
    assert list(trees) == ['a', 'b']
    assert not list(trees['b'].iter('SubTree'))  # b's call of a: never a SubTree of a
    (refused,) = trees['b'].iter('AlwaysFailure')
    assert refused.get('name').startswith("subtask a refused: task 'a' is already running "
                                          '(a > b > a)'), refused.get('name')
    # a: b's pre-check, b's call of a refused, so b's agent; b done; a's own step
    assert ticked(root) == ['pre', 'pre', 'agent', 'post', 'pre', 'call', 'post']
    root = ElementTree.fromstring(exported(store, 'stack', 'btcpp'))
    assert [t.get('ID') for t in root.findall('BehaviorTree')] == ['stack', 'pick']
    main_tree = root.find('BehaviorTree')
    asked = [a for a in main_tree.iter('MuscleMemAskAgent') if a.get('task') == 'place']
    assert len(asked) == 1 and asked[0].get('params') == '{"y":1}'
    assert ticked(root)[:8] == ['pre', 'pre', 'call', 'post', 'pre', 'call', 'post', 'post']


class World:
    """The robot side of one tree: every call, subtask and agent goal logged in order."""

    def __init__(self, doc: BtDocument, log: list, failing: frozenset = frozenset()) -> None:
        self.doc = doc
        self.log = log
        self.failing = failing
        """The tasks whose agent fails."""
        self._senses = SnapshotSenses(ToleranceCheck(sensors=SENSORS),
                                      element_tolerances(SENSORS), doc.params)
        self._judge = BindingJudge(plans=doc.plans(), params=doc.params, senses=self._senses)

    def judge(self):
        return self._judge

    def look(self):
        self._senses.look(_snap())

    def start_call(self, node, bound):
        self.log.append((self.doc.task, node.step.tool))

    def call_status(self):
        return Status.SUCCESS

    def cancel_call(self):
        pass

    def watch_failure(self):
        return None

    def post_status(self, node, expected):
        return Status.SUCCESS

    def start_agent(self, resume):
        self.log.append(('agent', self.doc.task, dict(self.doc.params), resume.step,
                         resume.reason))

    def agent_status(self):
        return Status.FAILURE if self.doc.task in self.failing else Status.SUCCESS

    def subtask(self, doc):
        self.log.append(('subtask', doc.task, dict(doc.params)))
        return World(doc, self.log, self.failing)


def tick(doc: BtDocument, failing: frozenset = frozenset()) -> tuple[list, Progress, Status]:
    log: list = []
    progress = Progress()
    tree = py_trees.trees.BehaviourTree(build_tree(doc, World(doc, log, failing), progress))
    for _ in range(50):
        tree.tick()
        if tree.root.status is not Status.RUNNING:
            break
    return log, progress, tree.root.status


def test_the_document_holds_the_subtask_tree_round_trips_and_runs_it(store):
    text = exported(store, 'tidy', 'py_trees')
    assert '# step 0: subtask pick {"n":5} (its tree: subtrees pick), trajectory' in text
    assert "\nsubtrees:\n  # subtree pick: task 'pick'\n  pick:\n    task: pick\n" in text
    doc = load(text)
    assert dump(doc) == text
    (step,) = doc.steps
    assert step.kind is ToolKind.SUBTASK and step.subtree == 'pick'
    assert step.goal == {'params': {'n': 5}, 'task': 'pick'}
    assert doc.subtrees['pick'].params == {'n': 5}
    assert [s.tool for _, s, _ in doc.subtrees['pick'].walk()] == ['/fib', '/gripper']
    log, progress, status = tick(doc)
    assert status is Status.SUCCESS and progress.done == 2 and not progress.agent_asked
    assert log == [('subtask', 'pick', {'n': 5}), ('pick', '/fib'), ('pick', '/gripper'),
                   ('tidy', '/fib')], log
    assert progress.tools == ['pick', '/fib']  # the subtask is one step of its caller
    dot = exported(store, 'tidy', 'dot')
    assert '\nrun -> "subtask pick (learned step ' in dot, dot  # a leaf of the drawing too


def test_an_unlearned_subtask_is_asked_of_the_agent_and_a_running_task_is_refused(store):
    log, progress, status = tick(load(exported(store, 'stack', 'py_trees')))
    assert status is Status.SUCCESS and progress.done == 3 and not progress.agent_asked
    assert progress.subtasks_by_agent == ['place']
    assert log[3:] == [('subtask', 'place', {'y': 1}),
                       ('agent', 'place', {'y': 1}, 0, 'no learned step passes at step 0'),
                       ('stack', '/fib')], log
    doc = load(exported(store, 'a', 'py_trees'))
    assert set(doc.subtrees) == {'b', 'a'}  # a's tree again, as b calls it: never expanded
    log, progress, status = tick(doc)
    assert status is Status.SUCCESS and progress.done == 2
    assert log[0] == ('subtask', 'b', {}) and log[2] == ('a', '/fib'), log
    agent = log[1]
    assert agent[:4] == ('agent', 'b', {}, 0) and "task 'a' is already running (a > b > a)" in \
        agent[4], agent


def test_a_failed_subtask_hands_its_caller_to_the_agent_from_its_step(store):
    log, progress, status = tick(load(exported(store, 'stack', 'py_trees')),
                                 failing=frozenset({'place'}))
    assert status is Status.SUCCESS and progress.done == 1 and progress.agent_asked
    assert log[-1] == ('agent', 'stack', {}, 1,
                       'step 1: subtask place failed (the agent failed it)'), log
    assert ('stack', '/fib') not in log  # the rest is the agent's


def pick_tree(variant: str) -> BtDocument:
    step = BtStep(id=10, tool='/fib', kind=ToolKind.ACTION, type_name=FIB_TYPE,
                  goal={'order': 5}, pre=None, post=None, trajectories=(1,), successes=1,
                  end=True)
    return BtDocument(task='pick', params={'n': 5}, variant=variant, sensors={}, steps=[step])


@pytest.mark.parametrize('variant, asked', [
    (canonical({'n': BOUND}), False), ('{"n":5}', True)])
def test_a_bound_subtask_parameter_is_sent_and_chooses_as_the_cache(variant, asked):
    """params.n <- param:n: the call sends the parent's n; a literal tree of n=5 does not run."""
    calling = BtStep(id=1, tool='pick', kind=ToolKind.SUBTASK, type_name=SUBTASK_TYPE,
                     goal={'params': {'n': 5}, 'task': 'pick'}, pre=None, post=None,
                     bindings=(Binding('params.n', 'param:n', 0.0, None, DECLARED),),
                     trajectories=(1,), successes=1, end=True, subtree='pick')
    doc = BtDocument(task='tidy', params={'n': 7}, variant=canonical({'n': BOUND}), sensors={},
                     steps=[calling], subtrees={'pick': pick_tree(variant)})
    doc = load(dump(doc))
    log, progress, status = tick(doc)
    assert status is Status.SUCCESS and progress.done == 1
    assert log[0] == ('subtask', 'pick', {'n': 7}), log
    if asked:
        assert log[1][:4] == ('agent', 'pick', {'n': 7}, 0) and 'n is 5 in its variant' in \
            log[1][4], log
    else:
        assert log[1:] == [('pick', '/fib')], log


@pytest.mark.parametrize('edit, words', [
    (lambda t: t.replace('    task: pick\n  learned', '    task: place\n  learned'),
     "step 0 (learned step 3): subtask step 3: its goal calls task 'place', its tool is 'pick'"),
    (lambda t: t.replace('subtree: pick', 'subtree: nowhere'),
     "subtree 'nowhere' is not under subtrees"),
    (lambda t: t.replace('kind: subtask', 'kind: teleport'), 'is not action, service or subtask'),
])
def test_a_bad_subtask_step_is_refused_naming_it(store, edit, words):
    text = exported(store, 'tidy', 'py_trees')
    bad = edit(text)
    assert bad != text
    with pytest.raises(ConfigError, match=words.replace('(', r'\(').replace(')', r'\)')):
        load(bad)


def test_import_brings_back_the_caller_and_its_subtask_tree(capsys, store, tmp_path):
    text = exported(store, 'tidy', 'py_trees')
    edited = tmp_path / 'tidy.bt.yaml'
    assert text.count('goal: {data: true}') == 1
    edited.write_text(text.replace('goal: {data: true}', 'goal: {data: false}'))  # in pick
    out = run_cli(capsys, 'import', str(tmp_path / 'new.db'), str(edited), '--who', 'ann',
                  '--json')
    data = json.loads(out)
    assert len(data['trajectories']) == 1 and list(data['subtasks']) == ['pick']
    with SqliteStore(path=tmp_path / 'new.db') as new:
        (tidy,) = new.trajectories(task='tidy')
        first = new.path(tidy.id)[0].step
        assert first.kind is ToolKind.SUBTASK and first.tool == 'pick'
        assert json.loads(first.payload) == {'params': {'n': 5}, 'task': 'pick'}
        assert first.pre is not None and first.pre.features['object'] == HOME['object']
        (pick,) = new.trajectories(task='pick')
        assert pick.params_json == '{"n":5}'
        assert [json.loads(n.step.payload_json) for n in new.path(pick.id)] == [
            {'order': 5}, {'data': False}]
        assert {a.who for a in new.approvals()} == {'ann'}
        assert {a.task for a in new.approvals()} == {'tidy', 'pick'}


def test_mcap_export_writes_a_subtask_call_as_its_execute_task_goal(capsys, store, tmp_path):
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory
    from muscle_mem_ros.ros.bags.exportformat import SUBTASK_TOPIC
    out = tmp_path / 'stack.mcap'
    summary = json.loads(run_cli(capsys, 'export', str(store), 'stack', '--mcap', str(out),
                                 '--json'))
    assert summary['messages'][SUBTASK_TOPIC] == 2 and summary['skipped_goals'] == 0
    with open(out, 'rb') as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        goals = [(s.name, d.task, json.loads(d.params_json)) for s, c, _, d in
                 reader.iter_decoded_messages(log_time_order=True)
                 if c.topic == SUBTASK_TOPIC]
    assert goals == [('muscle_mem_interfaces/action/ExecuteTask_Goal', 'pick', {'n': 5}),
                     ('muscle_mem_interfaces/action/ExecuteTask_Goal', 'place', {'y': 1})]


def test_run_bt_runs_the_subtask_tree_against_the_servers(tmp_path):
    """The fake arm's servers, no cache: pick's own steps run inside tidy's, then tidy's."""
    from node_helpers import Harness, write_params
    h = Harness(tmp=tmp_path)
    try:
        names = h.names
        build_store(tmp_path / 'cache.db', fib_server=names.fib, gripper=names.gripper)
        params = write_params(tmp_path / 'run_bt.yaml', '/**', h.values())
        h.agent.subtasks.plans['place'] = lambda world, params: []  # nothing to do: done

        def run_bt(task: str) -> subprocess.CompletedProcess:
            tree = tmp_path / f'{task}.bt.yaml'
            assert main(['export', str(tmp_path / 'cache.db'), task, '--bt', 'py_trees',
                         '--out', str(tree), '--params', str(params)]) == 0
            h.robot.reset()
            return subprocess.run(
                [sys.executable, '-m', 'muscle_mem_ros.cli', 'run-bt', str(tree),
                 '--ros-args', '--params-file', str(params)],
                capture_output=True, text=True, timeout=120)

        done = run_bt('tidy')
        assert done.returncode == 0, done.stdout + done.stderr
        orders = [deserialize_message(g, Fibonacci.Goal).order for g in h.robot.fib_goals]
        assert orders == [5, 8] and h.robot.gripper_requests == [True], done.stdout
        assert h.agent.calls == [], done.stdout
        assert 'subtask pick {"n":5}: its tree (2 learned steps)' in done.stdout, done.stdout
        assert '[pick] step 0 (learned step ' in done.stdout, done.stdout
        assert 'done: 2 steps by the tree' in done.stdout, done.stdout

        done = run_bt('stack')
        assert done.returncode == 0, done.stdout + done.stderr
        orders = [deserialize_message(g, Fibonacci.Goal).order for g in h.robot.fib_goals]
        assert orders == [5, 8, 5, 3], done.stdout
        assert [(c.task, json.loads(c.params_json), c.resume_from_step)
                for c in h.agent.calls] == [('place', {'y': 1}, 0)], done.stdout
        assert '[place] agent asked from step 0: no learned step passes at step 0' in \
            done.stdout, done.stdout
        assert 'done: 3 steps by the tree (the agent did subtask place)' in done.stdout, \
            done.stdout
    finally:
        h.close()


def test_learned_through_the_cache_then_shown_exported_and_run_with_no_agent(capsys, tmp_path):
    """The agent decomposes tidy (a pick subtask, then a count); the cache learns both trees."""
    from node_helpers import Harness, SUBTASK, write_params
    h = Harness(tmp=tmp_path, subtasks=True)
    try:
        h.agent.subtasks.plans['pick'] = lambda obj, params: [('gripper', True), ('fib', 4)]
        h.agent.subtasks.plans['tidy'] = lambda obj, params: [(SUBTASK, ('pick', {'n': 4})),
                                                              ('fib', 6)]
        h.start_cache()
        h.robot.reset()
        run = h.run_task('tidy')
        assert run.result.success and not run.result.cache_hit, run.result.message
        h.stop_cache()
        db = str(tmp_path / 'cache.db')
        text = run_cli(capsys, 'tree', db, 'tidy')
        assert '[0] subtask pick {"n":4}  (x1, ' in text and '[1] /' in text, text
        root = ElementTree.fromstring(exported(Path(db), 'tidy', 'btcpp'))
        assert [t.get('ID') for t in root.findall('BehaviorTree')] == ['tidy', 'pick']
        assert ticked(root) == ['pre', 'pre', 'call', 'post', 'pre', 'call', 'post', 'post',
                                'pre', 'call', 'post']
        params = write_params(tmp_path / 'run_bt.yaml', '/**', h.values())
        tree = tmp_path / 'tidy.bt.yaml'
        assert main(['export', db, 'tidy', '--bt', 'py_trees', '--out', str(tree),
                     '--params', str(params)]) == 0
        h.robot.reset()
        asked, fibs, grips = len(h.agent.calls), len(h.robot.fib_goals), \
            len(h.robot.gripper_requests)
        done = subprocess.run(
            [sys.executable, '-m', 'muscle_mem_ros.cli', 'run-bt', str(tree),
             '--ros-args', '--params-file', str(params)],
            capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(h.agent.calls) == asked, done.stdout  # the agent was not asked
        orders = [deserialize_message(g, Fibonacci.Goal).order for g in h.robot.fib_goals[fibs:]]
        assert orders == [4, 6] and h.robot.gripper_requests[grips:] == [True], done.stdout
        assert 'done: 2 steps by the tree' in done.stdout, done.stdout
    finally:
        h.close()


def test_a_subtask_tree_goes_out_only_on_the_callers_body(capsys, store, tmp_path):
    """Issue 43 item 9: an export for one body carries no other body's subtask branches."""
    panda, ur5e = 'panda@' + '3f2c' * 4, 'ur5e@' + '91ab' * 4
    conn = sqlite3.connect(store)
    conn.execute("UPDATE trajectories SET body = ? WHERE task = 'tidy'", (panda,))
    conn.execute("UPDATE trajectories SET body = ? WHERE task = 'pick'", (ur5e,))
    conn.commit()
    conn.close()
    edited = tmp_path / 'tidy.bt.yaml'
    edited.write_text(exported(store, 'tidy', 'py_trees'))
    doc = load(edited.read_text())
    assert doc.body == panda
    assert [sub.steps for sub in doc.subtrees.values()] == [[]]  # asked of the agent
    run_cli(capsys, 'import', str(tmp_path / 'new.db'), str(edited), '--who', 'ann')
    with SqliteStore(path=tmp_path / 'new.db') as new:
        assert new.trajectories(task='pick') == []  # the UR5e's pick is not stamped a Panda's
        assert {t.body for t in new.trajectories(task='tidy')} == {panda}
