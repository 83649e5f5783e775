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
Booking replays, stepping back and folding repeats (issue 30), without ROS.

The rules of muscle_mem_ros.replay.booking and bindings.filing, and the books in every store:
in memory, SQLite (two processes' connections), PostgreSQL (two robots' stores).
"""

from __future__ import annotations

import threading

from muscle_mem_ros.bindings.filing import file_steps
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.records import (
    Approval, CompareMode, ReplayBook, ReplayOutcome, SensorSpec, Snapshot, Step, ToolKind,
)
from muscle_mem_ros.replay.booking import booked, held, outcome_of, RETURN_RUNS, StepBack
from muscle_mem_ros.replay.gates import Gate, gate_tree
from muscle_mem_ros.replay.treeview import Trees
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.store import MemoryStore, open_store, SqliteStore
from pg_server import pg_server  # noqa: F401 (fixture)
import pytest

C, F, W, H = (ReplayOutcome.COMPLETED, ReplayOutcome.FALSE_HIT, ReplayOutcome.CANCELED,
              ReplayOutcome.HANDED_BACK)


def test_a_walk_is_booked_against_the_trajectory_it_was_on():
    assert outcome_of(complete=True, trajectory_id=7, on_trajectory=7, kind=None) == (7, C)
    for kind in (FailureKind.STEP_FAILED, FailureKind.TIMEOUT, FailureKind.SERVER_LOST,
                 FailureKind.POST_CHECK):
        assert outcome_of(complete=False, trajectory_id=0, on_trajectory=3, kind=kind) == (3, F)
    for kind in (FailureKind.DURING_CHECK, FailureKind.NOT_STOPPED):
        assert outcome_of(complete=False, trajectory_id=0, on_trajectory=3, kind=kind) == (3, W)
    for kind in (FailureKind.PRE_CHECK, FailureKind.OUT_OF_TOLERANCE, FailureKind.NO_CANDIDATE,
                 FailureKind.STALE):
        assert outcome_of(complete=False, trajectory_id=0, on_trajectory=3, kind=kind) == (3, H)
    # not replays: a miss before any step, a cancel by the caller
    assert outcome_of(complete=False, trajectory_id=0, on_trajectory=0,
                      kind=FailureKind.PRE_CHECK) is None
    assert outcome_of(complete=False, trajectory_id=0, on_trajectory=3,
                      kind=FailureKind.CANCELED) is None


def _book(outcomes, rule=StepBack(3, 5), agreed=0):
    book = ReplayBook(1, 't')
    for i, outcome in enumerate(outcomes):
        book = booked(book, outcome, rule, now=1000.0 + i, agreed=agreed)
    return book


def test_three_failures_in_the_last_five_replays_step_a_trajectory_back():
    book = _book([C, F, C, W, C, H])
    assert (book.completed, book.false_hits, book.canceled, book.handed_back) == (3, 1, 1, 1)
    assert book.recent == 'fcwch' and not book.stepped_back  # the last five, two failed
    assert book.false_hit_rate == pytest.approx(1 / 6)
    stepped = _book([C, F, C, W, F], agreed=4)
    assert stepped.stepped_back == 1004.0 and stepped.agreed_then == 4
    assert stepped.recent == ''  # its window starts afresh
    assert stepped.why == ('3 of its last 5 replays failed (2 false hits, 1 canceled step): '
                           '60% or more of its last 5 (step_back 60%/5)')
    assert _book([C, F, C, W, F, F]).stepped_back == 1004.0  # one more failure: not yet again
    # failures spread wider than the window do not add up
    assert not _book([F, C, C, C, C, F, C, C, C, C, F]).stepped_back
    off = _book([F, F, F, F], StepBack.parse('off'))
    assert not off.stepped_back and off.false_hits == 4 and off.recent == ''


def test_with_the_default_a_branch_failing_40_percent_steps_back_and_a_rare_failure_does_not():
    rule = StepBack()
    assert str(rule) == '30%/10' and rule.percent == 30.0
    # fail, fail, ok, ok, ok again and again: 40% of its replays fail (3/5 never tripped)
    forty = _book([F, F, C, C, C, F], rule)
    assert forty.stepped_back == 1005.0  # the sixth replay: 3 of 6, 30% of 10 reached
    assert _book([F, F, C, C, C] * 4, rule).stepped_back == 1011.0  # and again after it
    assert forty.why == ('3 of its last 6 replays failed (3 false hits): 30% or more of its '
                         'last 10 (step_back 30%/10)')
    assert _book([W, F, C, C, C] * 2, rule).stepped_back == 1005.0  # a knock counts
    assert not _book([F, F, C, C, C] * 4, StepBack.parse('3/5')).stepped_back  # the old rule
    # one failure in five, or in ten, or a knock now and then: never
    for rare in ([F, C, C, C, C] * 20, [C] * 9 + [F], [C, C, C, W, C] * 20, [H, F, H, C, C] * 20):
        book = _book(rare, rule)
        assert not book.stepped_back and book.replays == len(rare), rare
    assert _book([F, F, F], rule).stepped_back == 1002.0  # a broken branch: at once


def test_step_back_is_parsed_or_refused_naming_the_parameter():
    assert StepBack.parse('30%/10') == StepBack(3, 10) == StepBack()
    assert StepBack.parse(' 25% / 10 ') == StepBack(3, 10)  # R% of N rounded up to replays
    assert StepBack.parse('100%/1') == StepBack(1, 1) and StepBack.parse('1%/5') == StepBack(1, 5)
    assert StepBack.parse('2/4') == StepBack(2, 4) and str(StepBack.parse(' 2/4 ')) == '50%/4'
    assert str(StepBack.parse('2/3')) == '2/3' == str(StepBack.parse(str(StepBack(2, 3))))
    assert not StepBack.parse('off').enabled
    for bad in ('3', '0/5', '6/5', 'x/y', '3/500', '', '0%/10', '120%/10', '30%', '30%/0',
                'nan%/10', '30/10'):
        with pytest.raises(ConfigError, match=r'step_back: .* is not R%/N'):
            StepBack.parse(bad)


def test_a_stepped_back_trajectory_returns_after_agreeing_shadow_runs_or_an_approval():
    book = _book([F, F, F], agreed=5)
    why = held(book, agreed=5, runs=0, approvals=())
    assert why.startswith('trajectory 1 stepped back (') and '3 of its last 3' in why
    assert f'after {RETURN_RUNS} more agreeing shadow runs or an approval' in why
    assert 'after 1 more agreeing shadow run or' in held(book, agreed=6, runs=0, approvals=())
    assert held(book, agreed=5 + RETURN_RUNS, runs=0, approvals=()) == ''
    assert 'after 3 more' in held(book, agreed=6, runs=4, approvals=())  # shadow:4 asks more
    before = Approval('t', 0, 'carol', book.stepped_back - 1, (1,), ())
    after = Approval('t', 1, 'carol', book.stepped_back + 1, (1,), ())
    other = Approval('t', 2, 'carol', book.stepped_back + 1, (2,), ())
    assert held(book, agreed=5, runs=0, approvals=[before, other])
    assert held(book, agreed=5, runs=0, approvals=[before, after]) == ''
    assert held(None, agreed=0, runs=0, approvals=()) == ''
    assert held(_book([C, C]), agreed=0, runs=0, approvals=()) == ''


def _step(name: str, x: float, *, goal: float | None = None) -> Step:
    return Step(tool=name, kind=ToolKind.ACTION, type_name='pkg/action/A',
                payload=f'{name}{goal if goal is not None else x}'.encode(),
                payload_json=f'{{"x": {goal if goal is not None else x}}}',
                pre=Snapshot(features={'q': (x,)}, taken_at=1.0, stamps={'q': 1.0}),
                post=Snapshot(features={'q': (x,)}, taken_at=2.0, stamps={'q': 2.0}))


def _stores(tmp_path, pg_server):  # noqa: F811
    return [('memory', MemoryStore()), ('sqlite', SqliteStore(path=tmp_path / 'c.db')),
            ('postgres', open_store(pg_server.new_url()))]


def test_every_store_books_replays_and_a_fleet_loses_none(tmp_path, pg_server):  # noqa: F811
    rule = StepBack(3, 5)
    for name, store in _stores(tmp_path, pg_server):
        with store:
            info = store.add_trajectory(task='t', variant='', params_json='{}',
                                        steps=[_step('a', 0.0)])
            store.note_shadow(task='t', trajectory_id=info.id, agreed=True)
            for outcome in (C, F, F):
                store.book_replay(task='t', trajectory_id=info.id,
                                  booker=lambda b, agreed, o=outcome: booked(
                                      b, o, rule, now=50.0, agreed=agreed))
            last = store.book_replay(task='t', trajectory_id=info.id, booker=lambda b, agreed:
                                     booked(b, W, rule, now=60.0, agreed=agreed))
            assert last.stepped_back == 60.0 and last.agreed_then == 1, name
            (found,) = store.replay_books(task='t').values()
            assert found == last, name
            assert store.replay_books(task='other') == {}
            assert list(store.replay_books()) == [info.id]
            # concurrent bookings (threads here; robots of a fleet below) lose none
            threads = [threading.Thread(target=lambda: [store.book_replay(
                task='t', trajectory_id=info.id, booker=lambda b, agreed: booked(
                    b, C, rule, now=70.0, agreed=agreed)) for _ in range(10)])
                for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert store.replay_books(task='t')[info.id].completed == 41, name


def test_every_store_steps_back_a_branch_failing_40_percent_not_a_rare_one(
        tmp_path, pg_server):  # noqa: F811
    for name, store in _stores(tmp_path, pg_server):
        with store:
            rare = [C, C, W, C, C, C, C, F, C, C] * 3  # a knock and a false hit in ten
            for task, outcomes, steps_back in (('forty', [F, F, C, C, C] * 3, True),
                                               ('rare', rare, False)):
                info = store.add_trajectory(task=task, variant='', params_json='{}',
                                            steps=[_step('a', 0.0)])
                for i, outcome in enumerate(outcomes):
                    book = store.book_replay(task=task, trajectory_id=info.id,
                                             booker=lambda b, agreed, o=outcome, i=i: booked(
                                                 b, o, StepBack(), now=10.0 + i, agreed=agreed))
                    if book.stepped_back:
                        break
                assert bool(book.stepped_back) is steps_back, (name, task)
                if steps_back:
                    assert (book.stepped_back, book.replays) == (15.0, 6), name
                    assert store.replay_books(task=task)[info.id] == book, name


def test_two_robots_book_into_the_same_rows(pg_server):  # noqa: F811
    url = pg_server.new_url()
    rule = StepBack(0, 0)
    with open_store(url, robot_id='a') as a, open_store(url, robot_id='b') as b:
        info = a.add_trajectory(task='t', variant='', params_json='{}', steps=[_step('a', 0.0)])

        def book(store):
            for _ in range(15):
                store.book_replay(task='t', trajectory_id=info.id, booker=lambda bk, agreed:
                                  booked(bk, F, rule, now=1.0, agreed=agreed))
        threads = [threading.Thread(target=book, args=(s,)) for s in (a, b, a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert b.replay_books(task='t')[info.id].false_hits == 60


def test_the_gate_holds_a_stepped_back_trajectory_whatever_replay_requires(tmp_path):
    with SqliteStore(path=tmp_path / 'c.db') as store:
        one = store.add_trajectory(task='t', variant='', params_json='{}', steps=[_step('a', 0.0)])
        two = store.add_trajectory(task='t', variant='', params_json='{}', steps=[_step('b', 0.0)])
        trees = Trees(store)
        assert gate_tree(Gate(), store, trees.view('t', '')).nodes is None  # reads nothing more
        for _ in range(3):
            store.book_replay(task='t', trajectory_id=one.id, booker=lambda b, agreed: booked(
                b, F, StepBack(3, 5), now=100.0, agreed=agreed))
        for gate in (Gate(), Gate.parse('shadow:1')):
            trust = gate_tree(gate, store, trees.view('t', ''))
            # None would admit every node: the held branch must be left out of a set
            assert trust.nodes is not None and one.node_ids[0] not in trust.nodes, gate
            assert trust.reasons[one.id].startswith(f'trajectory {one.id} stepped back'), gate
        assert gate_tree(Gate(), store, trees.view('t', '')).nodes == frozenset(two.node_ids)
        for _ in range(RETURN_RUNS):
            store.note_shadow(task='t', trajectory_id=one.id, agreed=True)
        assert gate_tree(Gate(), store, trees.view('t', '')).nodes is None  # earned again


def _check():
    return ToleranceCheck(sensors=[SensorSpec('q', (0.02,), CompareMode.ABS)])


def _file(store, steps, *, agreement):
    return file_steps(variant='', parent=None, steps=steps, params={},
                      plans=lambda variant: {},
                      children=lambda tree, at: store.children(task='t', variant=tree, parent=at),
                      check=_check(), tolerance=lambda key: None, infer=False,
                      agreement=lambda tool: agreement)


def test_a_repeat_within_the_tools_agreement_folds_into_its_branch():
    store = MemoryStore()
    first = store.add_trajectory(task='t', variant='', params_json='{}',
                                 steps=[_step('a', 0.100), _step('b', 0.300)])
    # the agent again, goals 0.5 to 3.8 mm off and snapshots 6 mm off (tolerance 20 mm)
    again = [_step('a', 0.106, goal=0.1005), _step('b', 0.294, goal=0.3038)]
    variant, parent, rest = _file(store, again, agreement=0.005)
    assert (variant, parent, rest) == ('', first.node_ids[-1], [])
    # a goal 6 mm off is another goal; with no agreement only equal goals fold
    assert _file(store, [_step('a', 0.1, goal=0.106)], agreement=0.005)[1] is None
    assert _file(store, again, agreement=0.0)[1] is None
    assert _file(store, [_step('a', 0.1)], agreement=0.0)[1] == first.node_ids[0]
    # a pre snapshot out of tolerance is another situation, whatever the goals
    far = [_step('a', 0.15, goal=0.1), _step('b', 0.3)]
    assert _file(store, far, agreement=0.005)[1] is None
    # the fold counts the branch's success; no new trajectory
    info = store.add_trajectory(task='t', variant='', params_json='{}', steps=rest, parent=parent)
    assert info.id == first.id and len(store.trajectories(task='t')) == 1
    assert [n.success_count for n in store.path(first.id)] == [2, 2]
