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

"""Store semantics shared by every store (memory, SQLite, PostgreSQL): tree, dedupe, forget."""

from __future__ import annotations

import threading

from muscle_mem_ros import (
    MemoryStore,
    open_store,
    Snapshot,
    SqliteStore,
    Step,
    ToolKind,
    UnknownTrajectoryError,
)
from muscle_mem_ros.bindings.rules import Binding, DECLARED, INFERRED, Plan
from muscle_mem_ros.replay.gates import approve, Gate, trusted
from muscle_mem_ros.store import PostgresStore
from pg_server import pg_server  # noqa: F401 (a fixture)
import pytest


@pytest.fixture(params=['memory', 'sqlite', 'postgres'])
def store(request, tmp_path):
    if request.param == 'memory':
        s = MemoryStore()
    elif request.param == 'sqlite':
        s = SqliteStore(path=tmp_path / 'x' / 's.db')
    else:
        s = PostgresStore(url=request.getfixturevalue('pg_server').new_url(), robot_id='r1')
    yield s
    s.close()


def step(name: str, x: float = 0.0, *, user=None) -> Step:
    return Step(tool=name, kind=ToolKind.ACTION, type_name='pkg/action/A',
                payload=name.encode(), payload_json='{}',
                pre=Snapshot(features={'q': (x, 1.0)}, user=user),
                post=Snapshot(features={'q': (x + 1.0, 1.0)}))


def record(store, steps, *, task='t', parent=None):
    rec = store.begin(task=task, variant='', params_json='{}', parent=parent)
    for s in steps:
        rec.append(s)
    return rec.commit()


def kids(store, parent=None, task='t'):
    return store.children(task=task, variant='', parent=parent)


def test_recording_the_same_path_twice_is_stored_once(store):
    a = record(store, [step('a'), step('b'), step('c')])
    b = record(store, [step('a'), step('b'), step('c')])
    assert a.id == b.id
    assert len(store.trajectories()) == 1
    assert len(kids(store)) == 1
    assert [n.step.tool for n in store.path(a.id)] == ['a', 'b', 'c']
    assert all(n.success_count == 2 for n in store.path(a.id))


def test_pre_snapshot_within_1e_9_dedupes_and_beyond_does_not(store):
    record(store, [step('a', 0.5)])
    record(store, [step('a', 0.5 + 1e-12)])
    assert len(kids(store)) == 1
    record(store, [step('a', 0.5 + 1e-6)])
    assert len(kids(store)) == 2


def test_different_user_capture_is_a_different_node(store):
    record(store, [step('a', user={'screen': 1})])
    record(store, [step('a', user={'screen': 1})])
    record(store, [step('a', user={'screen': 2})])
    assert len(kids(store)) == 2


def test_branch_under_a_replayed_prefix(store):
    first = record(store, [step('a'), step('b'), step('c')])
    a, b, _ = first.node_ids
    branch = record(store, [step('x'), step('y')], parent=b)
    assert branch.node_ids[:2] == (a, b)
    assert [n.step.tool for n in kids(store, b)] == ['c', 'x']
    assert {n.depth for n in kids(store, b)} == {2}
    assert kids(store, b)[1].parent == b
    assert store.trajectory_ending_at(branch.node_ids[-1]) == branch
    assert store.trajectory_ending_at(b) is None


def test_steps_are_invisible_until_commit_and_discard_drops_them(store):
    rec = store.begin(task='t', variant='', params_json='{}')
    rec.append(step('a'))
    rec.append(step('b'))
    assert len(kids(store)) == 0
    assert [r.step_count for r in store.incomplete_recordings()] == [2]
    rec.discard()
    assert len(kids(store)) == 0 and store.trajectories() == []
    assert store.incomplete_recordings() == []
    with pytest.raises(ValueError, match='already committed or discarded'):
        rec.append(step('c'))


def test_empty_commit_marks_parent_terminal(store):
    first = record(store, [step('a'), step('b')])
    a = first.node_ids[0]
    assert not store.node(a).terminal
    short = record(store, [], parent=a)
    assert short.node_ids == (a,)
    assert store.node(a).terminal
    with pytest.raises(ValueError, match='empty trajectory'):
        record(store, [])


def test_begin_validates_parent(store):
    other = record(store, [step('a')], task='other')
    with pytest.raises(UnknownTrajectoryError, match='no node with id 999'):
        store.begin(task='t', variant='', params_json='{}', parent=999)
    with pytest.raises(ValueError, match="belongs to task 'other'"):
        store.begin(task='t', variant='', params_json='{}', parent=other.node_ids[0])


def test_variants_are_separate_trees(store):
    store.add_trajectory(task='t', variant='{"n":1}', params_json='{"n":1}', steps=[step('a')])
    store.add_trajectory(task='t', variant='{"n":2}', params_json='{"n":2}', steps=[step('a')])
    assert len(store.children(task='t', variant='{"n":1}', parent=None)) == 1
    assert len(store.children(task='t', variant='', parent=None)) == 0
    assert len(store.trajectories(task='t')) == 2


def test_forget_one_keeps_shared_prefix(store):
    first = record(store, [step('a'), step('b'), step('c')])
    branch = record(store, [step('x')], parent=first.node_ids[1])
    assert store.forget(task='t', trajectory_id=branch.id) == 1
    assert [n.step.tool for n in kids(store, first.node_ids[1])] == ['c']
    with pytest.raises(UnknownTrajectoryError):
        store.node(branch.node_ids[-1])
    assert store.path(first.id)[0].id == first.node_ids[0]
    assert store.forget(task='t', trajectory_id=first.id) == 1
    assert len(kids(store)) == 0
    with pytest.raises(UnknownTrajectoryError, match='no trajectory'):
        store.trajectory(first.id)


def test_forget_prefix_trajectory_keeps_longer_one(store):
    long = record(store, [step('a'), step('b')])
    short = record(store, [], parent=long.node_ids[0])
    store.forget(task='t', trajectory_id=short.id)
    assert not store.node(long.node_ids[0]).terminal
    assert [n.id for n in store.path(long.id)] == list(long.node_ids)


def test_forget_whole_task_and_wrong_task(store):
    a = record(store, [step('a')])
    record(store, [step('b')])
    record(store, [step('a')], task='keep')
    with pytest.raises(UnknownTrajectoryError):
        store.forget(task='keep', trajectory_id=a.id)
    store.note_outcome(task='t', hit=True)
    assert store.forget(task='t') == 2
    assert [t.task for t in store.trajectories()] == ['keep']
    assert [s.name for s in store.tasks()] == ['keep']  # counters of a forgotten task go too


def test_counters(store):
    traj = record(store, [step('a'), step('b')])
    store.note_replay(trajectory_id=traj.id)
    store.note_replay(trajectory_id=traj.id)
    assert store.trajectory(traj.id).replay_count == 2
    assert [n.success_count for n in store.path(traj.id)] == [3, 3]
    assert kids(store)[0].success_count == 3
    store.note_outcome(task='t', hit=True)
    store.note_outcome(task='t', hit=False)
    store.note_outcome(task='t', hit=False)
    (stats,) = store.tasks()
    assert (stats.name, stats.trajectory_count, stats.hits, stats.misses) == ('t', 1, 1, 2)
    with pytest.raises(UnknownTrajectoryError):
        store.note_replay(trajectory_id=12345)


def test_children_key_changes_with_membership_only(store):
    first = record(store, [step('a')])
    key = kids(store).key
    store.note_replay(trajectory_id=first.id)
    assert kids(store).key == key
    record(store, [step('b')])
    assert kids(store).key != key


def test_append_rejects_non_steps(store):
    rec = store.begin(task='t', variant='', params_json='{}')
    with pytest.raises(TypeError, match='expected a Step'):
        rec.append('nope')


def test_concurrent_commits_from_threads(store):
    errors = []

    def work(i):
        try:
            for j in range(10):
                record(store, [step(f'w{i}'), step(f's{j}')])
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store.trajectories()) == 40
    assert len(kids(store)) == 4


@pytest.mark.parametrize('spec, kind', [(None, MemoryStore), (':memory:', MemoryStore),
                                        ('', MemoryStore), ('s.db', SqliteStore)])
def test_open_store(spec, kind, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = open_store(spec)
    assert isinstance(s, kind)
    s.close()


def test_open_store_expands_home(tmp_path, monkeypatch):
    monkeypatch.setenv('HOME', str(tmp_path))
    s = open_store('~/deep/dir/cache.db')
    s.close()
    assert (tmp_path / 'deep' / 'dir' / 'cache.db').exists()


def test_a_tree_is_listed_after_an_id_and_tallied(store):
    """What learning reads of a tree: its trajectories since the newest it knows, and a tally."""
    first = record(store, [step('a'), step('b')])
    other = store.add_trajectory(task='t', variant='v', params_json='{}', steps=[step('a')])
    elsewhere = record(store, [step('a')], task='u')
    second = record(store, [step('a'), step('c')])
    assert [t.id for t in store.trajectories(task='t', variant='')] == [first.id, second.id]
    assert [t.id for t in store.trajectories(task='t', variant='', after=first.id)] == [second.id]
    assert store.trajectories(task='t', variant='', after=second.id) == []
    assert [t.id for t in store.trajectories(task='t', after=first.id)] == [other.id, second.id]
    assert [t.id for t in store.trajectories(after=second.id)] == []
    assert len(store.trajectories()) == 4 and elsewhere.id in {t.id for t in store.trajectories()}
    assert store.tally(task='t', variant='') == (2, first.id + second.id)
    assert store.tally(task='t', variant='v') == (1, other.id)
    assert store.tally(task='none', variant='') == (0, 0)
    store.forget(task='t', trajectory_id=first.id)
    assert store.tally(task='t', variant='') == (1, second.id)
    third = record(store, [step('d')])
    assert third.id > second.id > first.id  # ids are never handed out twice
    with pytest.raises(ValueError, match='give the task'):
        store.trajectories(variant='')


def test_children_of_one_family_only_grow(store):
    """A matcher extends what it built for a family: a shorter list must be a prefix."""
    seen = {}
    made = [record(store, [step(name)]) for name in 'abc']
    operations = [('add', 'd'), ('forget', 1), ('add', 'e'), ('touch', 0), ('add', 'f'),
                  ('forget', 0), ('add', 'g'), ('add', 'h')]
    for what, arg in operations:
        if what == 'add':
            made.append(record(store, [step(arg)]))
        elif what == 'forget':
            store.forget(task='t', trajectory_id=made.pop(arg).id)
        else:
            store.note_replay(trajectory_id=made[arg].id)
        kids = store.children(task='t', variant='', parent=None)
        ids = [n.id for n in kids]
        before = seen.setdefault(kids.family, ids)
        assert ids[:len(before)] == before, (what, arg)
        seen[kids.family] = ids
    assert len(seen) >= 3  # each removal started a new family


def test_an_approval_covers_what_its_approver_saw_not_what_is_learned_later(store):
    first = record(store, [step('a'), step('b')])
    head = first.node_ids[0]
    saw = {head: Plan((Binding('x', 'param:x', origin=INFERRED),
                       Binding('y', 'sensor:q[0]', origin=DECLARED)))}
    approval = approve(store, task='t', who='carol', plans=lambda variant: saw)
    assert approval.covers == (first.id,)
    assert approval.bindings == ((head, 'x', 'param:x'),)  # a declared binding needs none
    later = record(store, [step('c')])
    (stored,) = store.approvals(task='t')
    assert stored == approval  # what it covers travels with the store
    assert stored.covers_trajectory(first) and not stored.covers_trajectory(later)
    # more recordings, and the approved trajectory's first step has a binding nobody saw
    now = {head: Plan(saw[head].bindings + (Binding('z', 'sensor:q[1]', origin=INFERRED),))}
    gate = Gate.parse('approval')

    def trust(plans):
        return trusted(gate, store.trajectories(task='t'), plans=plans, agreement=({}, {}),
                       approvals=store.approvals(task='t'))
    held = trust(now)
    assert held.nodes == frozenset()
    assert held.reasons[later.id].startswith(
        f"trajectory {later.id} was learned after carol's approval of task t (")
    assert held.reasons[later.id].endswith('); approve it')
    assert held.reasons[first.id].startswith(
        f'the inferred binding z <- sensor:q[1] of trajectory {first.id} was learned after '
        "carol's approval of task t (")
    assert trust(saw).nodes == frozenset(first.node_ids)  # what carol saw still replays
    own = approve(store, task='t', trajectory_id=later.id, who='dave', plans=lambda v: now)
    assert (own.covers, own.bindings) == ((later.id,), ())
    assert set(trust(now).reasons) == {first.id}  # z is still nobody's
    renewed = approve(store, task='t', who='carol', plans=lambda variant: now)
    assert renewed.covers == (first.id, later.id) and len(renewed.bindings) == 2
    assert trust(now).reasons == {} and trust(now).nodes == frozenset(
        first.node_ids + later.node_ids)
    with pytest.raises(UnknownTrajectoryError):
        approve(store, task='t', trajectory_id=later.id + 99, who='dave', plans=lambda v: now)


def test_an_approval_covers_the_declared_bindings_it_saw_and_a_change_holds_it(store):
    first = record(store, [step('a'), step('b')])
    head, tail = first.node_ids
    second = record(store, [step('c')])

    def declared(source='sensor:tag[1]', max_shift=0.1, more=()):
        return {head: Plan((Binding('x', 'param:x', origin=INFERRED),
                            Binding('y', source, 0.02, max_shift, DECLARED), *more))}
    saw = declared()
    approval = approve(store, task='t', who='carol', plans=lambda variant: saw)
    assert approval.declared == ((head, 'y', 'sensor:tag[1]', 0.1),)
    assert approval.bindings == ((head, 'x', 'param:x'),)
    assert store.approvals(task='t') == [approval]  # kept by the store as it was made
    gate = Gate.parse('approval')

    def trust(plans):
        return trusted(gate, store.trajectories(task='t'), plans=plans, agreement=({}, {}),
                       approvals=store.approvals(task='t'))
    assert trust(declared()).reasons == {}  # the params file as approved: replays
    whose = "carol's approval of task t ("
    changes = {  # the params file changed after the approval: each holds the trajectory
        'source': (declared(source='sensor:tag[0]'),
                   f'the declared binding of y on learned step {head} of trajectory '
                   f'{first.id} changed after {whose}'),
        'max_shift': (declared(max_shift=0.3),
                      f'the declared binding of y on learned step {head} of trajectory '
                      f'{first.id} changed after {whose}'),
        'added': (declared(more=(Binding('z', 'param:z', 0.0, None, DECLARED),)),
                  f'the declared binding z <- param:z on learned step {head} of trajectory '
                  f'{first.id} is not among those {whose}'),
        'added later': ({**saw, tail: Plan((Binding('w', 'sensor:q[0]', 0.0, 0.1, DECLARED),))},
                        f'the declared binding w <- sensor:q[0] (max_shift 0.1) on learned '
                        f'step {tail} of trajectory {first.id} is not among those {whose}'),
        'removed': ({head: Plan((Binding('x', 'param:x', origin=INFERRED),))},
                    f'the declared binding y <- sensor:tag[1] (max_shift 0.1) on learned step '
                    f'{head} of trajectory {first.id} was removed after {whose}'),
    }
    for name, (plans, words) in changes.items():
        held = trust(plans)
        assert set(held.reasons) == {first.id}, name
        assert held.reasons[first.id].startswith(words), (name, held.reasons)
        assert 'approve it again' in held.reasons[first.id], (name, held.reasons)
        assert held.nodes == frozenset(second.node_ids), name
    assert '(sensor:tag[1] (max_shift 0.1), now sensor:tag[1] (max_shift 0.3))' in trust(
        changes['max_shift'][0]).reasons[first.id]
    # approved again with the new file: it replays; an approval of the trajectory alone too
    again = approve(store, task='t', trajectory_id=first.id, who='dave',
                    plans=lambda variant: changes['source'][0])
    assert again.declared == ((head, 'y', 'sensor:tag[0]', 0.1),)
    assert trust(changes['source'][0]).reasons == {}
    assert trust(saw).reasons == {}  # carol's still covers the file she saw
