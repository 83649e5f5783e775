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
The walk's rules (muscle_mem_ros.replay.walk), tested once in the core.

The judge, executor and reporter here are plain Python implementations of the
walk's protocols, the way the Engine and the ROS node implement them (user
checks and Python calls; the sensor hub and the tool proxies): the walk's
other implementations, not mocks of something real. The store is the real
MemoryStore. End to end the same rules run through test_core_engine.py and
the test_node_* modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from muscle_mem_ros import MemoryStore
from muscle_mem_ros.records import CheckFailure, Node, Step, StepStatus, ToolKind
from muscle_mem_ros.replay.walk import choose, Miss, StepEvent, Verdict, walk
from muscle_mem_ros.resume import FailureKind, Resume
import pytest

TASK = 'task'


def step(name: str) -> Step:
    return Step(tool=name, kind=ToolKind.FUNCTION, type_name='t', payload=name.encode())


def learn(store: MemoryStore, *names: str, parent: int | None = None) -> int:
    """Record a trajectory of steps named ``names`` (under ``parent``); return its id."""
    recording = store.begin(task=TASK, variant='', params_json='{}', parent=parent)
    for name in names:
        recording.append(step(name))
    return recording.commit().id


def node_of(store: MemoryStore, *names: str) -> Node:
    """Return the node reached by following ``names`` from the root."""
    parent = None
    for name in names:
        (parent,) = [n for n in store.children(task=TASK, variant='',
                                               parent=None if parent is None else parent.id)
                     if n.step.tool == name]
    assert parent is not None
    return parent


@dataclass
class Ran:
    status: StepStatus
    ended: float
    detail: str = ''
    kind: FailureKind | None = None


@dataclass
class World:
    """Judge, executor and reporter of a world given as sets of step names."""

    far: dict[str, float] = field(default_factory=dict)
    """Pre-check distance per step name (default 0.0: identical)."""
    blocked: set[str] = field(default_factory=set)
    """Steps whose pre-check fails."""
    slips: set[str] = field(default_factory=set)
    """Steps whose post-check fails."""
    breaks: set[str] = field(default_factory=set)
    """Steps that fail when executed."""
    stalls: dict[str, FailureKind] = field(default_factory=dict)
    """Steps whose server times out or goes away, by the kind the executor reports."""
    cancel_at: str = ''
    """The step during which the caller cancels."""
    cancelled: bool = False
    executed: list[str] = field(default_factory=list)
    events: list[tuple[StepEvent, int, str]] = field(default_factory=list)
    prepared: int = 0

    def prepare(self, reporter: object) -> None:
        self.prepared += 1

    def pick(self, candidates: list[Node], index: int) -> Verdict:
        passing = [(n, self.far.get(n.step.tool, 0.0)) for n in candidates
                   if n.step.tool not in self.blocked]
        if passing:
            return Verdict(passing)
        if not candidates:
            return Verdict((), Miss(FailureKind.NO_CANDIDATE, f'nothing at {index}'))
        failure = CheckFailure('obj', 1.0, 0.1, 10.0, 'out of tolerance',
                               FailureKind.OUT_OF_TOLERANCE)
        return Verdict((), Miss(FailureKind.PRE_CHECK, f'pre-check failed at {index}', failure))

    def post_check(self, node: Node, index: int, ended: float) -> Miss | None:
        if node.step.tool in self.slips:
            return Miss(FailureKind.POST_CHECK, f'post-check failed at {index}')
        return None

    def execute(self, node: Node, index: int, cancel: object) -> Ran:
        name = node.step.tool
        self.executed.append(name)
        if name == self.cancel_at:
            self.cancelled = True
            return Ran(StepStatus.CANCELED, 1.0, 'canceled')
        if name in self.breaks:
            return Ran(StepStatus.FAILED, 1.0, 'motor jammed')
        if name in self.stalls:
            return Ran(StepStatus.FAILED, 1.0, 'no answer', self.stalls[name])
        return Ran(StepStatus.SUCCEEDED, 1.0)

    def event(self, *, kind: StepEvent, step: int, trajectory_id: int = 0, detail: str = '',
              failure: CheckFailure | None = None) -> None:
        self.events.append((kind, step, detail))

    def progress(self, *, step: int, total: int, detail: str) -> None:
        pass


def run(store: MemoryStore, world: World, **kwargs: object):
    return walk(store=store, task=TASK, variant='', judge=world, executor=world,
                reporter=world, cancel=world, **kwargs)


def test_ranking_distance_then_successes_then_recency_then_id():
    a = Node(1, None, 0, step('a'), success_count=1, last_used=5.0)
    b = Node(2, None, 0, step('b'), success_count=3, last_used=1.0)
    c = Node(3, None, 0, step('c'), success_count=3, last_used=2.0)
    d = Node(4, None, 0, step('d'), success_count=3, last_used=2.0)
    assert choose(Verdict([(a, 0.5), (b, 0.2)])) is b  # closer wins
    assert choose(Verdict([(a, 0.2), (b, 0.2)])) is b  # then more successes
    assert choose(Verdict([(b, 0.2), (c, 0.2)])) is c  # then more recent
    assert choose(Verdict([(d, 0.2), (c, 0.2)])) is c  # then the lower id
    assert choose(Verdict((), Miss(FailureKind.PRE_CHECK, 'x'))) is None


def test_the_walk_replays_the_closest_branch():
    store = MemoryStore()
    learn(store, 'a', 'b')
    learn(store, 'a', 'c')
    world = World(far={'b': 0.6, 'c': 0.3})
    result = run(store, world)
    assert result.complete and world.executed == ['a', 'c']
    assert result.trajectory_id == store.trajectory_ending_at(node_of(store, 'a', 'c').id).id


def test_terminal_hit_completes_with_an_empty_reason():
    store = MemoryStore()
    tid = learn(store, 'a', 'b')
    world = World()
    result = run(store, world)
    assert result.complete and result.reason == '' and result.kind is None
    assert result.trajectory_id == tid and result.steps_replayed == 2
    assert world.prepared == 1
    assert [e[0] for e in world.events] == [StepEvent.STEP_OK, StepEvent.STEP_OK]


def test_a_longer_learned_trajectory_is_preferred_at_a_terminal_step():
    store = MemoryStore()
    learn(store, 'a')
    long_id = learn(store, 'a', 'b')
    result = run(store, World())
    assert result.complete and result.trajectory_id == long_id


def test_nothing_learned_is_no_candidate_at_step_zero():
    result = run(MemoryStore(), World())
    assert not result.complete
    assert result.resume == Resume(0, 'nothing at 0', (), FailureKind.NO_CANDIDATE, None)
    assert result.failed_step == -1


def test_pre_check_miss_stops_before_the_step_and_reports_it():
    store = MemoryStore()
    learn(store, 'a', 'b', 'c')
    world = World(blocked={'b'})
    result = run(store, world)
    assert world.executed == ['a']
    assert not result.complete and result.kind is FailureKind.PRE_CHECK
    assert result.resume.step == 1 and result.resume.replayed == ('a',)
    assert result.resume.last_node == node_of(store, 'a').id == result.last_node.id
    assert result.failed_step == 1 and result.failure.sensor == 'obj'
    assert world.events[-1][:2] == (StepEvent.CHECK_FAILED, 1)


def test_post_check_failure_then_a_learned_child_replays():
    store = MemoryStore()
    learn(store, 'a', 'b')
    learn(store, 'recover', parent=node_of(store, 'a', 'b').id)  # the agent's recovery
    learn(store, 'a', 'b', 'c')
    world = World(slips={'b'}, blocked={'c'})
    result = run(store, world)
    assert world.executed == ['a', 'b', 'recover']
    assert result.complete and result.kind is None
    assert (StepEvent.CHECK_FAILED, 1, 'post-check failed at 1') in world.events


def test_post_check_failure_then_handoff_at_the_next_step():
    store = MemoryStore()
    learn(store, 'a', 'b', 'c')
    world = World(slips={'a'}, blocked={'b'})
    result = run(store, world)
    assert world.executed == ['a']
    assert not result.complete and result.kind is FailureKind.POST_CHECK
    assert result.resume.step == 1 and result.resume.last_node == node_of(store, 'a').id
    assert result.reason == 'pre-check failed at 1; post-check failed at 0'


def test_post_check_failure_at_a_terminal_step_is_not_a_hit():
    store = MemoryStore()
    learn(store, 'a')
    result = run(store, World(slips={'a'}))
    assert not result.complete and result.kind is FailureKind.POST_CHECK
    assert result.resume.step == 1 and result.resume.replayed == ('a',)
    assert result.failed_step == -1  # nothing learned after it


def test_a_failed_step_stops_the_walk_and_the_agent_redoes_it():
    store = MemoryStore()
    learn(store, 'a', 'b', 'c')
    world = World(breaks={'b'})
    result = run(store, world)
    assert world.executed == ['a', 'b']
    assert not result.complete and result.kind is FailureKind.STEP_FAILED
    assert result.resume.step == 1 and result.resume.last_node == node_of(store, 'a').id
    assert result.reason == 'step 1 (b) failed: motor jammed' and result.failed_step == 1
    assert world.events[-1] == (StepEvent.STEP_FAILED, 1, result.reason)


@pytest.mark.parametrize('kind', [FailureKind.TIMEOUT, FailureKind.SERVER_LOST])
def test_a_step_that_times_out_or_loses_its_server_stops_with_that_kind(kind):
    store = MemoryStore()
    learn(store, 'a', 'b')
    result = run(store, World(stalls={'b': kind}))
    assert not result.complete and result.kind is kind
    assert result.resume.kind is kind and result.resume.step == 1
    assert result.reason == 'step 1 (b) failed: no answer'


def test_cancel_stops_the_walk_as_canceled():
    store = MemoryStore()
    learn(store, 'a', 'b', 'c')
    world = World(cancel_at='b')
    result = run(store, world)
    assert world.executed == ['a', 'b']
    assert result.resume == Resume(1, 'canceled', ('a',), FailureKind.CANCELED,
                                   node_of(store, 'a').id)


def test_a_canceled_step_without_a_cancel_request_is_a_failed_step():
    store = MemoryStore()
    learn(store, 'a')
    world = World(cancel_at='a')
    result = walk(store=store, task=TASK, variant='', judge=world, executor=world,
                  reporter=world)  # the caller did not cancel: the server did
    assert result.kind is FailureKind.STEP_FAILED


def test_path_restricts_the_walk_to_one_trajectory():
    store = MemoryStore()
    learn(store, 'a', 'b')
    learn(store, 'a', 'c')
    world = World(far={'b': 0.0, 'c': 0.5})
    path = [node_of(store, 'a').id, node_of(store, 'a', 'c').id]
    result = run(store, world, path=path)
    assert result.complete and world.executed == ['a', 'c']


def test_resume_keeps_its_public_fields():
    resume = Resume(2, 'why', ('move', 'move'))
    assert (resume.step, resume.reason, resume.replayed) == (2, 'why', ('move', 'move'))
    assert resume.kind is None and resume.last_node is None and resume.steps_done == 2
    assert replace(resume, kind=FailureKind.PRE_CHECK).kind is FailureKind.PRE_CHECK


def test_a_miss_blames_the_candidate_the_walk_would_have_taken():
    from muscle_mem_ros.replay.walk import blamed
    usual = Node(1, None, 0, step('usual'), success_count=9, last_used=5.0)
    rare = Node(2, None, 0, step('rare'), success_count=1, last_used=9.0)
    far = CheckFailure('base', 0.1, 0.02, 5.0, 'out of tolerance', FailureKind.OUT_OF_TOLERANCE)
    near = CheckFailure('', 0.148, 0.1, 1.48, 'x would move 0.148',
                        FailureKind.OUT_OF_TOLERANCE, 'sensor:tag[0]')
    assert blamed([(rare, near), (usual, far)]) == (usual, far)  # not the smallest deviation
    assert blamed([]) is None
