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
The behavior tree watches as the cache does: the trace in the document, the watch in the tree.

An action step recorded with a trace carries it in the YAML document (so run-bt, with no
store, can watch), through export, load and import; its call runs in parallel with a
Watch leaf in py_trees and a ``MuscleMemWatch`` leaf in BT.CPP (ticked by BT.CPP v4
itself); and the real ``muscle-mem run-bt`` on the fake arm cancels a goal the moment the
cube is knocked and hands the task to the agent from that step.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
import subprocess
import sys
import threading
import time
from xml.etree import ElementTree

from cli_helpers import ARM, arm_goal, ARM_TYPE, GRIPPER, GRIPPER_TYPE
from muscle_mem_ros.bindings.judge import BindingJudge
from muscle_mem_ros.bindings.rules import element_tolerances
from muscle_mem_ros.bt.btcpp import LEAVES, to_xml
from muscle_mem_ros.bt.document import as_run, BtDocument, BtStep
from muscle_mem_ros.bt.traces import imported_trace
from muscle_mem_ros.bt.tree import build_tree, Progress
from muscle_mem_ros.bt.yamlfile import dump, load
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.cli import main
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.records import (
    CheckFailure, CompareMode, SensorSpec, Series, Snapshot, Step, ToolKind, Trace,
)
from muscle_mem_ros.replay.shadow import SnapshotSenses
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.ros.messages.cdr import canonical_cdr
from muscle_mem_ros.store import SqliteStore
from py_trees.common import Status
import py_trees.composites
import py_trees.trees
import pytest
from rclpy.serialization import serialize_message
from std_srvs.srv import SetBool

SENSORS = [SensorSpec('object', (0.02,), CompareMode.ABS)]
CUBE = (0.4, 0.2)


def trace_of(cube: tuple[float, float] = CUBE, seconds: float = 1.0) -> Trace:
    """Return a 40 Hz trace of a cube that stays put, and a feedback leaf going 0 -> 1."""
    times = tuple(i / 40 + 0.0001234 for i in range(int(seconds * 40) + 1))
    return Trace(rate=40.0,
                 sensors={'object': Series(times, tuple((cube[0] + 1.23456789e-7 * i, cube[1])
                                                        for i in range(len(times))))},
                 feedback=Series(times, tuple((t / seconds,) for t in times)),
                 feedback_leaves=('progress',))


def traced_document() -> BtDocument:
    """Move the arm (an action, traced), then close the gripper (a service, never traced)."""
    grip = BtStep(id=2, tool='/gripper', kind=ToolKind.SERVICE, type_name=GRIPPER_TYPE,
                  goal={'data': True}, pre={'object': list(CUBE)}, post={'object': list(CUBE)},
                  trajectories=(1,), successes=1, end=True)
    move = BtStep(id=1, tool='/arm/move', kind=ToolKind.ACTION, type_name='demo/action/Move',
                  goal={'target': {'x': 0.42, 'y': 0.2}}, pre={'object': list(CUBE)},
                  post={'object': list(CUBE)}, trajectories=(1,), successes=1, then=[grip],
                  trace=trace_of())
    return BtDocument(task='pick', params={}, variant='{}',
                      sensors={'object': {'tolerance': [0.02], 'mode': 'abs'}}, steps=[move])


def test_a_trace_round_trips_through_the_yaml_rounded_for_people():
    doc = traced_document()
    text = dump(doc)
    assert 'trace:' in text and 'rate: 40' in text
    assert '- [0.025, 0.4, 0.2]' in text, text  # ms and 6 significant digits
    assert 'feedback_leaves: [progress]' in text
    back = load(text)
    assert dump(back) == text
    move, grip = back.steps[0], back.steps[0].then[0]
    assert grip.trace is None
    trace, recorded = move.trace, doc.steps[0].trace
    assert trace is not None and recorded is not None and trace.rate == 40.0
    series = trace.sensors['object']
    assert len(series.times) == len(recorded.sensors['object'].times) == 41
    assert all(abs(a - b) <= 5e-4 for a, b in zip(series.times, recorded.sensors['object'].times))
    assert all(math.isclose(a, b, rel_tol=1e-5) for row, was in zip(
        series.values, recorded.sensors['object'].values) for a, b in zip(row, was))
    assert trace.feedback_leaves == ('progress',) and trace.feedback is not None
    assert back.nodes()[1].step.trace is trace  # what the tree and run-bt watch


@pytest.mark.parametrize('edit, words', [
    (lambda t: t.replace('- [0.05, 0.4, 0.2]', '- [0.01, 0.4, 0.2]'),
     'steps[0] (id 1): trace: sensors.object[2]: time 0.01 is not after'),
    (lambda t: t.replace('- [0.05, 0.4, 0.2]', '- [0.05, 0.4]'), 'sensors.object[2]: 1 values'),
    (lambda t: t.replace('rate: 40', 'rate: 0'), 'trace: rate'),
    (lambda t: t.replace('feedback_leaves: [progress]', 'feedback_leaves: []'),
     'feedback_leaves: 0 names for 1 values'),
])
def test_a_malformed_trace_is_refused_naming_the_step(edit, words):
    text = dump(traced_document())
    assert edit(text) != text
    with pytest.raises(ConfigError, match=words.replace('[', r'\[').replace(']', r'\]')
                       .replace('(', r'\(').replace(')', r'\)')):
        load(edit(text))


def test_an_import_keeps_what_the_edits_leave_as_recorded():
    """An edit that moves the pushed cube: its series and the feedback are not imported."""
    times = (0.0, 0.5, 1.0)
    trace = Trace(rate=40.0, sensors={
        'object': Series(times, ((0.4, 0.2), (0.45, 0.2), (0.5, 0.2))),
        'joints': Series(times, ((0.1, 0.2), (0.1, 0.2), (0.1, 0.2)))},
        feedback=Series(times, ((0.0,), (0.5,), (1.0,))), feedback_leaves=('progress',))
    push = BtStep(id=1, tool='/arm/push', kind=ToolKind.ACTION, type_name='demo/action/Push',
                  goal={'target': {'x': 0.5, 'y': 0.2}},
                  pre={'object': [0.4, 0.2], 'joints': [0.1, 0.2]},
                  post={'object': [0.5, 0.2], 'joints': [0.1, 0.2]},
                  learned={'target.x': 0.5, 'target.y': 0.2},
                  follows=(('sensor:object[0]', 'target.x'),), trajectories=(1,), end=True,
                  trace=trace)
    doc = BtDocument(task='push', params={}, variant='{}', sensors={
        'object': {'tolerance': [0.02], 'mode': 'abs'},
        'joints': {'tolerance': [0.02], 'mode': 'abs'}}, steps=[push])
    assert imported_trace(push, as_run(doc)[1]) is trace  # as recorded: all of it
    push.goal = {'target': {'x': 0.6, 'y': 0.2}}  # edited: the cube ends 10 cm further
    kept = imported_trace(push, as_run(doc)[1])
    assert kept is not None and set(kept.sensors) == {'joints'}
    assert kept.feedback is None and kept.feedback_leaves == ()
    xml = ElementTree.fromstring(to_xml(doc))
    (watch,) = xml.iter('MuscleMemWatch')
    assert watch.get('sensors') == 'joints'  # the host judges it as recorded


class Robot:
    """The robot side of a tree: a call that runs until told, a watch that trips when told."""

    def __init__(self, doc: BtDocument, trip_at: int | None) -> None:
        self.trip_at = trip_at
        self.polls = 0
        self.calls = 0
        self.canceled = 0
        self.agent = None
        senses = SnapshotSenses(ToleranceCheck(sensors=SENSORS), element_tolerances(SENSORS),
                                doc.params)
        self._senses = senses
        self._judge = BindingJudge(plans=doc.plans(), params=doc.params, senses=senses)

    def judge(self):
        return self._judge

    def look(self):
        self._senses.look(Snapshot(features={'object': CUBE}))

    def start_call(self, node, bound):
        self.calls += 1
        self.polls = 0

    def call_status(self):
        self.polls += 1
        return Status.RUNNING if self.polls < 4 else Status.SUCCESS

    def cancel_call(self):
        self.canceled += 1

    def watch_failure(self):
        if self.trip_at is None or self.polls < self.trip_at:
            return None
        return CheckFailure('object', 0.1, 0.02, 5.0, 'left the tube',
                            FailureKind.OUT_OF_TOLERANCE, element=0, value=0.5, expected=0.4,
                            at=0.3)

    def post_status(self, node, expected):
        return Status.SUCCESS

    def start_agent(self, resume):
        self.agent = resume

    def agent_status(self):
        return Status.SUCCESS


def tick(doc: BtDocument, trip_at: int | None,
         ) -> tuple[Robot, Progress, py_trees.trees.BehaviourTree]:
    robot, progress = Robot(doc, trip_at), Progress()
    tree = py_trees.trees.BehaviourTree(build_tree(doc, robot, progress))
    for _ in range(30):
        tree.tick()
        if tree.root.status is not Status.RUNNING:
            break
    return robot, progress, tree


def test_the_py_trees_call_of_a_traced_action_runs_in_parallel_with_its_watch():
    robot, progress, tree = tick(traced_document(), trip_at=None)
    parallels = [b for b in tree.root.iterate() if isinstance(b, py_trees.composites.Parallel)]
    assert len(parallels) == 1  # the arm; the gripper (a service) keeps its plain Call
    assert [type(c).__name__ for c in parallels[0].children] == ['Call', 'Watch']
    assert tree.root.status is Status.SUCCESS and robot.agent is None
    assert robot.calls == 2 and robot.canceled == 0 and progress.done == 2
    untraced = traced_document()
    untraced.steps[0].trace = None
    _, _, tree = tick(untraced, trip_at=None)
    assert not any(isinstance(b, py_trees.composites.Parallel) for b in tree.root.iterate())


def test_a_watch_that_fails_cancels_the_call_and_hands_the_step_to_the_agent():
    robot, progress, tree = tick(traced_document(), trip_at=2)
    assert robot.canceled == 1, 'the Call was not terminated (its goal not canceled)'
    assert robot.calls == 1 and progress.done == 0
    assert robot.agent is not None and robot.agent.step == 0 and robot.agent.steps_done == 0
    assert robot.agent.reason.startswith('check during step 0 (/arm/move) failed: sensor '
                                         'object[0] was 0.5 at 0.30 s'), robot.agent.reason
    assert tree.root.status is Status.SUCCESS  # the agent did the task


def test_btcpp_runs_the_call_of_a_traced_action_in_parallel_with_a_declared_watch():
    root = ElementTree.fromstring(to_xml(traced_document()))
    model = {e.get('ID'): [p.get('name') for p in e.findall('input_port')]
             for e in root.find('TreeNodesModel')}
    assert model['MuscleMemWatch'] == ['step', 'sensors', 'tolerance', 'trace']
    (parallel,) = root.iter('Parallel')
    assert (parallel.get('success_count'), parallel.get('failure_count')) == ('1', '1')
    assert [c.tag for c in parallel] == ['MuscleMemCall', 'MuscleMemWatch']
    watch = parallel[1]
    assert watch.get('step') == '1' and watch.get('sensors') == 'object'
    data = json.loads(watch.get('trace'))
    assert data['rate'] == 40 and len(data['sensors']['object']) == 41
    assert data['feedback_leaves'] == ['progress']
    calls = list(root.iter('MuscleMemCall'))
    assert len(calls) == 2 and calls[1].get('tool') == '/gripper'  # the service: no watch
    untraced = traced_document()
    untraced.steps[0].trace = None
    assert not list(ElementTree.fromstring(to_xml(untraced)).iter('Parallel'))


@pytest.mark.parametrize('tripped', [False, True])
def test_behaviortree_cpp_ticks_the_watched_call(tripped):
    bt = pytest.importorskip('behaviortreepy', reason='behaviortreepy (BehaviorTree.CPP v4 '
                             'Python bindings) is not installed')
    root = ElementTree.fromstring(to_xml(traced_document()))
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
    polls = {'call': 0, 'watch': 0}

    def running(kind: str, end: object, after: int):
        def tick(node=None):
            polls[kind] += 1
            ticked.append(kind)
            return end if polls[kind] >= after else bt.NodeStatus.RUNNING
        return tick
    factory.register_simple_condition('MuscleMemPreCheck', leaf('pre', bt.NodeStatus.SUCCESS))
    factory.register_simple_condition('MuscleMemPostCheck', leaf('post', bt.NodeStatus.SUCCESS))
    factory.register_simple_action('MuscleMemAskAgent', leaf('agent', bt.NodeStatus.SUCCESS))
    factory.register_simple_stateful_action(
        'MuscleMemCall', leaf('call', bt.NodeStatus.RUNNING),
        running('call', bt.NodeStatus.SUCCESS, 3), lambda node=None: ticked.append('halt call'))
    factory.register_simple_stateful_action(
        'MuscleMemWatch', leaf('watch', bt.NodeStatus.RUNNING),
        running('watch', bt.NodeStatus.FAILURE if tripped else bt.NodeStatus.RUNNING, 2),
        lambda node=None: ticked.append('halt watch'))
    tree = factory.create_tree_from_text(ElementTree.tostring(root, encoding='unicode'))
    assert tree.tick_while_running() == bt.NodeStatus.SUCCESS
    watched = ['pre', 'call', 'watch', 'call', 'watch', 'call', 'watch']  # both run
    if tripped:  # the watch failed: the call halted (its goal canceled), the agent asked
        assert ticked == [*watched, 'halt call', 'agent'], ticked
    else:  # the call succeeded: the watch halted; then the gripper, a plain call
        assert ticked == [*watched, 'call', 'halt watch', 'post', 'pre', 'call', 'call',
                          'post'], ticked


def _store_with_a_traced_step(path: Path) -> Path:
    """Write a real SQLite store: task reach, a traced arm goal, then a gripper call."""
    arm = arm_goal([0.5, 0.2, 0.1])
    grip = SetBool.Request(data=True)
    snap = Snapshot(features={'object': CUBE}, stamps={'object': 1.0}, taken_at=1.0)
    steps = [
        Step(tool=ARM, kind=ToolKind.ACTION, type_name=ARM_TYPE,
             payload=canonical_cdr(bytes(serialize_message(arm)), type(arm)),
             payload_json=json.dumps({'trajectory': {'points': [{'positions': [0.5, 0.2, 0.1]}]}}),
             pre=snap, post=snap, duration=1.0, trace=trace_of()),
        Step(tool=GRIPPER, kind=ToolKind.SERVICE, type_name=GRIPPER_TYPE,
             payload=canonical_cdr(bytes(serialize_message(grip)), type(grip)),
             payload_json=json.dumps({'data': True}), pre=snap, post=snap, duration=0.1),
    ]
    with SqliteStore(path=path) as store:
        store.add_trajectory(task='reach', variant='{}', params_json='{}', steps=steps)
    return path


def test_export_yaml_load_import_keeps_the_trace(tmp_path):
    store = _store_with_a_traced_step(tmp_path / 'cache.db')
    params = tmp_path / 'params.yaml'
    params.write_text(json.dumps({'muscle_mem': {'ros__parameters': {'sensors': {'object': {
        'topic': '/object', 'type': 'geometry_msgs/msg/PointStamped', 'fields': ['point'],
        'tolerance': [0.02], 'mode': 'abs'}}}}}))
    for kind in ('py_trees', 'btcpp'):
        assert main(['export', str(store), 'reach', '--bt', kind, '--out',
                     str(tmp_path / f'reach.{kind}'), '--params', str(params)]) == 0
    xml = ElementTree.fromstring((tmp_path / 'reach.btcpp').read_text())
    assert [p[1].tag for p in xml.iter('Parallel')] == ['MuscleMemWatch']
    doc = load((tmp_path / 'reach.py_trees').read_text())
    assert doc.steps[0].trace is not None and doc.steps[0].then[0].trace is None
    assert main(['import', str(tmp_path / 'new.db'), str(tmp_path / 'reach.py_trees'),
                 '--who', 'alice']) == 0
    with SqliteStore(path=tmp_path / 'new.db') as back:
        (info,) = back.trajectories(task='reach')
        arm, grip = (n.step for n in back.path(info.id))
    assert grip.trace is None
    assert arm.trace is not None and arm.trace.rate == 40.0
    recorded = trace_of()
    assert arm.trace.feedback_leaves == ('progress',)
    assert len(arm.trace.sensors['object'].times) == 41
    assert all(math.isclose(a, b, rel_tol=1e-5) for row, was in zip(
        arm.trace.sensors['object'].values, recorded.sensors['object'].values)
        for a, b in zip(row, was))


ARM_DELAY = 1.2
"""Seconds the fake arm takes per trajectory goal here (long enough to be knocked)."""
KNOCKED_DELAY = 6.0
"""Seconds the knocked goal would take: canceled at once, it must not end first."""


def test_run_bt_on_the_arm_watches_and_cancels_a_knocked_goal(tmp_path):
    """Learned through the cache (traced), exported, run by run-bt: unchanged, then knocked."""
    from node_helpers import Harness, OBJECT_HOME, write_params
    h = Harness(tmp=tmp_path)
    try:
        h.start_cache()
        h.robot.reset()
        h.robot.arm_delay = ARM_DELAY
        learned = h.run_task('bt_watch')
        assert learned.result.success and not learned.result.cache_hit, learned.result.message
        params = write_params(tmp_path / 'run_bt.yaml', '/**', h.values())
        tree = tmp_path / 'bt_watch.bt.yaml'
        assert main(['export', str(tmp_path / 'cache.db'), 'bt_watch', '--bt', 'py_trees',
                     '--out', str(tree), '--params', str(params)]) == 0
        doc = load(tree.read_text())
        traced = [s.tool for _, s, _ in doc.walk() if s.trace is not None]
        assert traced[0].endswith('/arm/follow_joint_trajectory'), traced  # step 0: watched

        def run_bt(knock: bool) -> subprocess.CompletedProcess:
            h.robot.reset()
            # the knocked goal runs long (margin on a loaded machine), the agent's as learned
            h.robot.arm_delay = KNOCKED_DELAY if knock else ARM_DELAY
            knocked: list[float] = []

            def push() -> None:
                if h.robot.arm_active.wait(60.0):
                    time.sleep(0.4)
                    h.robot.arm_delay = ARM_DELAY
                    knocked.append(time.monotonic())
                    x, y, z = OBJECT_HOME
                    h.robot.move_object((x + 0.1, y, z))
            thread = threading.Thread(target=push, daemon=True)
            if knock:
                thread.start()
            done = subprocess.run(
                [sys.executable, '-m', 'muscle_mem_ros.cli', 'run-bt', str(tree),
                 '--ros-args', '--params-file', str(params)],
                capture_output=True, text=True, timeout=120)
            if knock:
                thread.join(5.0)
                assert knocked, 'the arm never moved'
            return done

        canceled, calls = h.robot.arm_canceled, len(h.agent.calls)
        same = run_bt(knock=False)
        assert same.returncode == 0, same.stdout + same.stderr
        assert 'watched on joints[0..2], object[0..2], ' in same.stdout, same.stdout
        assert h.robot.arm_canceled == canceled and len(h.agent.calls) == calls, same.stdout

        knocked = run_bt(knock=True)
        assert h.robot.arm_canceled == canceled + 1, 'the arm goal was not canceled\n' + \
            knocked.stdout + knocked.stderr
        assert len(h.agent.calls) == calls + 1, knocked.stdout
        call = h.agent.calls[-1]
        assert (call.resume_from_step, call.steps_done) == (0, 0), (call, knocked.stdout)
        assert call.resume_reason.startswith('check during step 0 ('), call.resume_reason
        assert 'sensor object[0] was' in call.resume_reason, call.resume_reason
        assert 'goal canceled, the world left its recording: sensor object[0]' in \
            knocked.stdout, knocked.stdout
        assert knocked.returncode == 0, knocked.stdout + knocked.stderr  # the agent did it
        assert 'then the agent from step 0' in knocked.stdout, knocked.stdout
    finally:
        h.close()
