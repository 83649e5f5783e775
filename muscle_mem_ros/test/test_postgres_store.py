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

"""PostgresStore beyond the shared contract: versions, sharing, concurrency, faults, secrets."""

from __future__ import annotations

from dataclasses import replace
import logging
import multiprocessing
import time

from muscle_mem_ros import Snapshot, Step, ToolKind
from muscle_mem_ros.errors import (
    StoreCorruptError,
    StoreError,
    StoreUnavailableError,
    StoreVersionError,
    UnknownTrajectoryError,
)
from muscle_mem_ros.store import open_store, PostgresStore, redact
from muscle_mem_ros.store.postgres import schema as pgschema
from pg_server import pg_private, pg_server  # noqa: F401 (fixtures)
import pytest

WAIT = 30.0


def step(name: str, x: float = 0.0) -> Step:
    return Step(tool=name, kind=ToolKind.ACTION, type_name='pkg/action/A',
                payload=name.encode(), payload_json='{}',
                pre=Snapshot(features={'q': (x, 1.0)}), post=Snapshot(features={'q': (x, 2.0)}))


def record(store, steps, *, task='t', parent=None):
    rec = store.begin(task=task, variant='', params_json='{}', parent=parent)
    for s in steps:
        rec.append(s)
    return rec.commit()


def tools(store, parent=None, task='t'):
    return [n.step.tool for n in store.children(task=task, variant='', parent=parent)]


def wait_for(predicate, what):
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f'not seen within {WAIT} s: {what}')
        time.sleep(0.01)


@pytest.fixture
def url(pg_server):  # noqa: F811
    return pg_server.new_url()


def test_open_store_opens_postgres_and_keeps_robot_id(url):
    with open_store(url, robot_id='arm1@host') as store:
        assert isinstance(store, PostgresStore)
        info = record(store, [step('a')])
        assert info.robot_id == 'arm1@host'
        assert store.trajectory(info.id).robot_id == 'arm1@host'
        assert [t.robot_id for t in store.trajectories()] == ['arm1@host']


def test_open_store_refuses_allow_pickle_for_postgres(url):
    with pytest.raises(ValueError, match='allow_pickle'):
        open_store(url, allow_pickle=True)


def test_newer_schema_is_refused_at_open_and_left_untouched(url):
    PostgresStore(url=url).close()
    import psycopg
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'INSERT INTO {pgschema.NAMESPACE}.schema_version (version) VALUES (%s)',
                     (pgschema.SCHEMA_VERSION + 1,))
    with pytest.raises(StoreVersionError, match=r'newer than this muscle_mem_ros understands'):
        PostgresStore(url=url)
    with psycopg.connect(url, autocommit=True) as conn:
        versions = conn.execute(
            f'SELECT version FROM {pgschema.NAMESPACE}.schema_version ORDER BY version').fetchall()
    assert [v[0] for v in versions] == [*range(1, pgschema.SCHEMA_VERSION + 2)]


def test_a_version_1_database_is_upgraded_in_place_and_keeps_its_trees(url):
    with PostgresStore(url=url) as store:
        kept = record(store, [step('a'), step('b')])
    import psycopg
    with psycopg.connect(url, autocommit=True) as conn:  # as the first release left it
        for drop in ('TABLE {}.shadow_trajectories', 'TABLE {}.shadow_bindings',
                     'TABLE {}.approvals', 'INDEX {}.trajectories_tree', 'TABLE {}.tree_tally',
                     'TRIGGER trajectories_tally ON {}.trajectories',
                     'FUNCTION {}.tally_trajectory'):
            conn.execute('DROP ' + drop.format(pgschema.NAMESPACE))
        conn.execute(f'DELETE FROM {pgschema.NAMESPACE}.schema_version WHERE version > 1')
    with PostgresStore(url=url) as store:
        assert store.trajectories(task='t', variant='') == [kept]
        assert store.tally(task='t', variant='') == (1, kept.id)  # counted by the upgrade
        more = record(store, [step('c')])
        assert store.tally(task='t', variant='') == (2, kept.id + more.id)  # by the trigger
    with psycopg.connect(url, autocommit=True) as conn:
        versions = conn.execute(
            f'SELECT version FROM {pgschema.NAMESPACE}.schema_version ORDER BY version').fetchall()
        index = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'trajectories_tree'").fetchone()
    assert [v[0] for v in versions] == [*range(1, pgschema.SCHEMA_VERSION + 1)]
    assert index is not None and '(task, variant, id)' in index[0]


def test_a_version_3_database_keeps_its_approvals_covering_what_existed_then(url):
    with PostgresStore(url=url) as store:
        first = record(store, [step('a')])
        second = record(store, [step('b')])
    import psycopg
    ns = pgschema.NAMESPACE
    with psycopg.connect(url, autocommit=True) as conn:  # as schema 3 left it
        conn.execute(f'ALTER TABLE {ns}.approvals DROP COLUMN covers, DROP COLUMN bindings')
        conn.execute(f'DELETE FROM {ns}.schema_version WHERE version > 3')
        conn.execute(f'UPDATE {ns}.trajectories SET created = %s WHERE id = %s',
                     (first.created + 10.0, second.id))
        conn.execute(f"INSERT INTO {ns}.approvals VALUES ('t', 0, 'carol', %s)",
                     (first.created + 5.0,))  # between the two
    with PostgresStore(url=url) as store:
        first, second = store.trajectories(task='t')
        (old,) = store.approvals(task='t')
        assert (old.who, old.covers, old.bindings, old.declared) == ('carol', None, (), None)
        assert old.covers_trajectory(first) and not old.covers_trajectory(second)
        renewed = store.approve(task='t', who='carol', covers=[first.id, second.id],
                                bindings=[(first.node_ids[0], 'x', 'param:x')])
        assert store.approvals(task='t') == [renewed]
        assert renewed.covers == (first.id, second.id) and renewed.declared == ()
        seen = store.approve(task='t', who='carol', covers=[first.id],
                             declared=[(first.node_ids[0], 'y', 'sensor:q[0]', 0.1)])
        assert store.approvals(task='t') == [seen]  # schema 9: the declared bindings it saw
        assert seen.declared == ((first.node_ids[0], 'y', 'sensor:q[0]', 0.1),)
    with psycopg.connect(url, autocommit=True) as conn:
        versions = conn.execute(f'SELECT version FROM {ns}.schema_version ORDER BY version')
        assert [v[0] for v in versions.fetchall()] == [*range(1, pgschema.SCHEMA_VERSION + 1)]
    assert pgschema.SCHEMA_VERSION == 13


def test_foreign_tables_in_the_namespace_are_refused(url):
    import psycopg
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA {pgschema.NAMESPACE}')
        conn.execute(f'CREATE TABLE {pgschema.NAMESPACE}.nodes (x int)')
    with pytest.raises(StoreCorruptError, match='not a muscle_mem_ros store'):
        PostgresStore(url=url)


def test_many_stores_opening_a_fresh_database_at_once_migrate_once(url):
    stores = []
    errors = []

    def open_one():
        try:
            stores.append(PostgresStore(url=url))
        except Exception as err:  # noqa: BLE001 - collected and asserted below
            errors.append(err)

    import threading
    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    record(stores[0], [step('a')])
    assert all(tools(s) == ['a'] for s in stores)
    for s in stores:
        s.close()


def test_password_is_never_in_messages_or_logs(pg_server, caplog):  # noqa: F811
    assert redact('postgresql://bob:s3cret@h:5/db?password=s3cret&x=1') == \
        'postgresql://bob:***@h:5/db?password=***&x=1'
    wrong = f'postgresql://bob:s3cret@127.0.0.1:{pg_server.port + 1}/db'
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StoreUnavailableError) as err:
        PostgresStore(url=wrong, connect_timeout=1)
    assert 's3cret' not in str(err.value)
    assert 'bob:***@' in str(err.value)
    assert 's3cret' not in caplog.text


def test_a_commit_by_one_robot_reaches_another_robots_cache(url):
    a = PostgresStore(url=url, robot_id='A')
    b = PostgresStore(url=url, robot_id='B')
    try:
        assert b.wait_listening(WAIT)
        first = record(a, [step('a'), step('b')])
        assert tools(b) == ['a']
        key = b.children(task='t', variant='', parent=None).key
        record(a, [step('x')])
        wait_for(lambda: tools(b) == ['a', 'x'], "B's cached root children gain A's new step")
        assert b.children(task='t', variant='', parent=None).key != key
        branch = record(a, [step('c')], parent=first.node_ids[0])
        wait_for(lambda: tools(b, first.node_ids[0]) == ['b', 'c'], 'a branch under a node')
        assert b.trajectory(branch.id).robot_id == 'A'
    finally:
        a.close()
        b.close()


def test_approvals_and_shadow_counts_travel_with_the_fleet_store(url):
    a = PostgresStore(url=url, robot_id='A')
    b = PostgresStore(url=url, robot_id='B')
    try:
        info = record(a, [step('a'), step('b')])
        a.approve(task='t', trajectory_id=info.id, who='ops')
        a.note_shadow(task='t', trajectory_id=info.id, agreed=True,
                      bindings=[(info.node_ids[0], 'x', True)])
        b.note_shadow(task='t', trajectory_id=info.id, agreed=False,
                      bindings=[(info.node_ids[0], 'x', False)])
        (approval,) = b.approvals(task='t')
        assert (approval.trajectory_id, approval.who) == (info.id, 'ops')
        by_trajectory, by_binding = b.agreement(task='t')
        assert (by_trajectory[info.id].runs, by_trajectory[info.id].agreed) == (2, 1)
        assert by_binding[(info.node_ids[0], 'x')].agreed == 1
        with pytest.raises(UnknownTrajectoryError):
            b.approve(task='t', trajectory_id=info.id + 99, who='ops')
        assert b.revoke(task='t', trajectory_id=info.id)
        assert a.approvals() == [] and not a.revoke(task='t', trajectory_id=info.id)
    finally:
        a.close()
        b.close()


def test_forget_on_one_robot_is_seen_by_another(url):
    a = PostgresStore(url=url, robot_id='A')
    b = PostgresStore(url=url, robot_id='B')
    try:
        assert b.wait_listening(WAIT)
        one = record(a, [step('a')])
        record(a, [step('b')])
        assert tools(b) == ['a', 'b']
        a.forget(task='t', trajectory_id=one.id)
        wait_for(lambda: tools(b) == ['b'], "B's cache drops the forgotten step")
        a.forget(task='t')
        wait_for(lambda: tools(b) == [], "B's cache drops the forgotten task")
    finally:
        a.close()
        b.close()


def _learn(url: str, robot: str, count: int, queue) -> None:
    store = PostgresStore(url=url, robot_id=robot)
    ids = []
    for i in range(count):
        ids.append(record(store, [step('shared'), step(f'{robot}-{i}')]).id)
        ids.append(record(store, [step('shared'), step('same-for-all')]).id)
    store.close()
    queue.put((robot, ids))


def test_concurrent_learning_in_processes_keeps_every_branch_and_stores_identical_runs_once(url):
    PostgresStore(url=url).close()
    ctx = multiprocessing.get_context('spawn')
    queue = ctx.Queue()
    robots = [f'r{i}' for i in range(4)]
    procs = [ctx.Process(target=_learn, args=(url, r, 10, queue)) for r in robots]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    with PostgresStore(url=url) as store:
        assert tools(store) == ['shared']
        shared = store.children(task='t', variant='', parent=None)[0]
        names = tools(store, shared.id)
        learned = [f'{r}-{i}' for r in robots for i in range(10)]
        assert sorted(names) == sorted(['same-for-all'] + learned)
        assert len(store.trajectories()) == 41
        same = {ids[1] for ids in results.values()}
        assert len(same) == 1
        assert shared.success_count == 80


def test_server_gone_replay_reads_cache_recording_waits_and_commits_when_back(pg_private):  # noqa: F811,E501
    url = pg_private.new_url()
    store = PostgresStore(url=url, robot_id='A', retry_min=0.1, retry_max=0.5)
    try:
        first = record(store, [step('a'), step('b')])
        assert tools(store) == ['a']  # a replay starts: the tree is loaded
        rec = store.begin(task='t', variant='', params_json='{}', parent=first.node_ids[0])
        rec.append(step('c'))
        pg_private.stop('immediate')
        assert tools(store) == ['a']  # cached: a running replay goes on
        assert tools(store, first.node_ids[0]) == ['b']
        assert tools(store, first.node_ids[1]) == []
        assert store.node(first.node_ids[1]).step.tool == 'b'
        rec.append(step('d'))  # kept in memory, no error
        with pytest.raises(StoreUnavailableError, match='kept in memory'):
            rec.commit()
        assert len(store.pending) == 1
        with pytest.raises(StoreUnavailableError):
            store.trajectories()
        wait_for(lambda: 'unreachable' in store.diagnostics()['store_connection'],
                 'diagnostics say unreachable')
        assert store.diagnostics()['store_pending_recordings'] == '1'
        pg_private.start()
        wait_for(lambda: not store.pending, 'the kept recording is committed')
        assert store.diagnostics()['store_connection'] == 'ok'
        paths = [[n.step.tool for n in store.path(t.id)] for t in store.trajectories()]
        assert sorted(paths) == [['a', 'b'], ['a', 'c', 'd']]
        assert store.incomplete_recordings() == []
    finally:
        store.close()
    assert store.lost == []


def test_recording_still_kept_when_the_store_closes_is_reported_lost(pg_private, caplog):  # noqa: F811,E501
    url = pg_private.new_url()
    store = PostgresStore(url=url, retry_min=0.1, retry_max=0.5)
    rec = store.begin(task='t', variant='', params_json='{}')
    rec.append(step('a'))
    pg_private.stop('immediate')
    with pytest.raises(StoreUnavailableError):
        rec.commit()
    caplog.set_level(logging.ERROR)
    store.close()
    assert len(store.lost) == 1
    assert 'LOST a recording' in caplog.text


def test_a_recording_is_live_while_its_store_is_connected_and_purged_after(url):
    a = PostgresStore(url=url, robot_id='A')
    b = PostgresStore(url=url, robot_id='B')
    try:
        rec = a.begin(task='t', variant='', params_json='{}')
        rec.append(step('a'))
        (info,) = b.incomplete_recordings()
        assert info.live and info.step_count == 1 and "robot 'A'" in info.owner
        assert b.purge_abandoned() == 0
        assert [s.tool for s in b.recording_steps(info.id)] == ['a']
        a.close()  # its server process ends a moment after the connection closes
        wait_for(lambda: not b.incomplete_recordings()[0].live, 'the recording is abandoned')
        assert b.purge_abandoned() == 1
        assert b.incomplete_recordings() == []
    finally:
        b.close()


def test_a_read_only_open_writes_nothing_and_the_cli_reads_through_it(url, capsys):
    from muscle_mem_ros.cli.app import main
    with pytest.raises(StoreCorruptError, match='read-only open creates'):
        open_store(url, read_only=True)  # an empty database: nothing is created in it
    with open_store(url) as writer:
        record(writer, [step('a'), step('b')], task='pick')
    with open_store(url, read_only=True) as reader:
        assert [t.task for t in reader.trajectories()] == ['pick']
        with pytest.raises(StoreError):
            reader.note_outcome(task='pick', hit=True)  # the server refuses the write
        with pytest.raises(StoreError):
            reader.forget(task='pick')
    with open_store(url) as again:
        assert len(again.trajectories(task='pick')) == 1
        assert [s.hits for s in again.tasks() if s.name == 'pick'] == [0]
    assert main(['tasks', url, '--json']) == 0
    assert '"pick"' in capsys.readouterr().out


def traced(shift: float = 0.0):
    """Return a trace of two sensors of different widths and feedback, a sample before t=0."""
    from muscle_mem_ros.records import Series, Trace
    times = (-0.01, 0.015, 0.04)
    return Trace(rate=40.0, sensors={'arm': Series(times, ((shift, 1.0, 2.0), (0.1, 1.1, 2.0),
                                                           (0.2, 1.2, 1.9))),
                                     'grip': Series(times[1:], ((0.0, 1.0), (0.5, 1.0)))},
                 feedback=Series(times[1:], ((3.0,), (4.0,))), feedback_leaves=('partial.x',))


def numbers(trace):
    """Return the trace's numbers, comparable with ==, or None."""
    if trace is None:
        return None
    series = [*trace.sensors.items(), ('feedback', trace.feedback)]
    return (trace.rate, trace.feedback_leaves,
            [(k, s.times, s.values) for k, s in series if s is not None])


def test_a_step_trace_is_shared_by_the_fleet_and_kept_across_a_restart(url):
    a = PostgresStore(url=url, robot_id='A')
    b = PostgresStore(url=url, robot_id='B')
    try:
        assert b.wait_listening(WAIT)
        first = record(a, [replace(step('a'), trace=traced()), step('b')])
        assert [numbers(n.step.trace) for n in b.path(first.id)] == [numbers(traced()), None]
        record(a, [replace(step('x'), trace=traced(5.0))])  # b's cache: NOTIFY
        wait_for(lambda: tools(b) == ['a', 'x'], "B's cached root children gain A's new step")
        assert numbers(b.children(task='t', variant='', parent=None)[1].step.trace) == \
            numbers(traced(5.0))
        rec = a.begin(task='t', variant='', params_json='{}')
        rec.append(replace(step('c'), trace=traced(7.0)))
        assert [numbers(s.trace) for s in b.recording_steps(rec.id)] == [numbers(traced(7.0))]
    finally:
        a.close()
        b.close()
    with PostgresStore(url=url) as again:
        assert [numbers(n.step.trace) for n in again.path(first.id)] == \
            [numbers(traced()), None]


def test_a_version_4_database_gains_the_trace_column_and_keeps_its_steps(url):
    with PostgresStore(url=url) as store:
        old = record(store, [step('a')])
    import psycopg
    ns = pgschema.NAMESPACE
    with psycopg.connect(url, autocommit=True) as conn:  # as schema 4 left it
        conn.execute(f'ALTER TABLE {ns}.nodes DROP COLUMN trace')
        conn.execute(f'ALTER TABLE {ns}.recording_steps DROP COLUMN trace')
        conn.execute(f'DELETE FROM {ns}.schema_version WHERE version > 4')
    with PostgresStore(url=url) as store:
        assert [n.step.trace for n in store.path(old.id)] == [None]
        new = record(store, [replace(step('b'), trace=traced())])
    with PostgresStore(url=url) as store:
        assert numbers(store.path(new.id)[0].step.trace) == numbers(traced())
    with psycopg.connect(url, autocommit=True) as conn:
        versions = conn.execute(f'SELECT version FROM {ns}.schema_version ORDER BY version')
        assert [v[0] for v in versions.fetchall()] == [*range(1, pgschema.SCHEMA_VERSION + 1)]
