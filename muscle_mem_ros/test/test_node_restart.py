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
Cache process lifecycle: restarts keep the cache, clean exits, startup-time safety rules.

Each test starts and stops the cache subprocess itself (different parameters
or a restart on the same store file).
"""

from __future__ import annotations

from dataclasses import replace
import os
from pathlib import Path
import pickle
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap

from core_helpers import subprocess_env
from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import Forget, Replay, StartRecording
from muscle_mem_ros import Snapshot, SqliteStore, Step, ToolKind
from muscle_mem_ros.store import schema
from node_helpers import (Harness, Names, OBJECT_HOME, params, run_cache_to_exit,
                          wait_until)
import pytest
from rclpy.serialization import deserialize_message


@pytest.fixture(scope='module')
def harness(tmp_path_factory):
    h = Harness(tmp=tmp_path_factory.mktemp('restart'))
    yield h
    h.close()


@pytest.fixture
def world(harness):
    harness.robot.reset()
    yield harness
    if harness.cache is not None:
        harness.stop_cache()


def test_restart_keeps_the_cache(world, tmp_path):
    h = world
    store = tmp_path / 'persist.db'
    h.start_cache(store_path=str(store))
    learned = h.run_task('persist')
    assert learned.result.success and not learned.result.cache_hit
    assert h.stop_cache() == 0  # SIGTERM: clean exit
    h.robot.reset()
    calls = len(h.agent.calls)
    cache = h.start_cache(store_path=str(store))
    # The learned tree's first step is read and indexed at startup, not by the first task.
    warmed = 'store: 1 first step(s) loaded and indexed'
    assert wait_until(lambda: warmed in cache.output(), 10.0), cache.output()
    run = h.run_task('persist')
    assert run.result.cache_hit, run.result.message
    assert run.result.trajectory_id == learned.result.trajectory_id
    assert len(h.agent.calls) == calls
    assert cache.stop(signal.SIGINT) == 0  # Ctrl-C: clean exit too
    h.cache = None
    assert wait_until(lambda: not h.execute_client.server_is_ready(), 10.0)


def test_steps_without_checks_are_not_replayed_blindly(world, tmp_path):
    h = world
    store = str(tmp_path / 'unchecked.db')
    # No sensors: the arm's default stop (the hold) has no joint positions to read, so the
    # node refuses to start without another stop; a stop service is named (never called here).
    stop = {'actions.arm.stop_service': 'estop'}
    h.start_cache(store_path=store, sensors=None, **stop)
    first = h.run_task('blind')
    assert first.result.success and not first.result.cache_hit
    h.robot.reset()
    calls = len(h.agent.calls)
    second = h.run_task('blind')
    assert second.result.success and not second.result.cache_hit
    assert len(h.agent.calls) == calls + 1
    assert 'allow_unchecked_replay' in h.agent.calls[-1].resume_reason
    h.stop_cache()
    h.robot.reset()
    h.start_cache(store_path=store, sensors=None, allow_unchecked_replay=True, **stop)
    calls = len(h.agent.calls)
    third = h.run_task('blind')
    assert third.result.cache_hit, third.result.message
    assert len(h.agent.calls) == calls


def test_tolerance_length_is_checked_at_the_first_message(world, tmp_path):
    h = world
    # 2 tolerances for 3 joint positions: unknown until a JointState arrives.
    h.start_cache(store_path=str(tmp_path / 'len.db'),
                  **{'sensors.joints.tolerance': [0.1, 0.1]})
    cache = h.cache
    assert cache is not None
    # Logged as soon as the first JointState arrives (the ERROR event may precede
    # this test's event subscription, so the log is what is checked).
    assert wait_until(lambda: 'sensors.joints.tolerance: 2 values' in cache.output(), 10.0)
    assert cache.alive()
    first = h.run_task('length')
    assert first.result.success and not first.result.cache_hit
    h.robot.reset()
    calls = len(h.agent.calls)
    second = h.run_task('length')
    assert not second.result.cache_hit
    assert len(h.agent.calls) == calls + 1
    assert 'sensors.joints.tolerance' in h.agent.calls[-1].resume_reason

    def failed():
        return [e for e in h.events_of(CacheEvent.CHECK_FAILED, 'length')
                if e.sensor == 'joints']

    assert wait_until(lambda: bool(failed())), 'no CHECK_FAILED event for the joints'
    assert 'sensors.joints.tolerance' in failed()[-1].detail


def test_missing_agent_is_a_clear_failure(world, tmp_path):
    h = world
    h.start_cache(store_path=str(tmp_path / 'noagent.db'), agent_action='')
    run = h.run_task('no_agent')
    assert not run.result.success
    assert 'no agent configured' in run.result.message
    assert h.cache is not None and h.cache.alive()


def test_crash_during_recording_never_replays_half_a_demonstration(world, tmp_path):
    h = world
    store = str(tmp_path / 'crash.db')
    h.start_cache(store_path=store)
    assert h.call(StartRecording, 'start_recording', task='half', params_json='').success
    assert h.agent.do('arm', [0.3, 0.2, 0.1])
    assert h.stop_cache_with(signal.SIGKILL) == -signal.SIGKILL
    h.robot.reset()
    cache = h.start_cache(store_path=store)
    assert wait_until(lambda: 'never finished' in cache.output(), 10.0)
    response = h.call(Replay, 'replay', task='half', dry_run=True)
    assert not response.success and 'unknown task' in response.message
    run = h.run_task('half')
    assert not run.result.cache_hit  # learned now from the agent, from the start
    assert h.agent.calls[-1].resume_from_step == 0


class _Evil:
    """Unpickling this creates ``marker``: it stands for any code a crafted store could run."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, 'w'))


def _crafted_old_store(path: Path, marker: Path) -> None:
    """Write a schema-2 (pickled) store whose first step's pre snapshot runs code if unpickled."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute('PRAGMA journal_mode = WAL')
    schema.migrate(conn, current=0, target=2)
    evil = pickle.dumps(Snapshot(features={'joints': (0.0,)}, user=_Evil(marker)), protocol=5)
    conn.execute('INSERT INTO nodes (task, variant, parent, depth, tool, kind, type_name,'
                 ' payload, payload_json, pre, post, status, duration, sig, success_count,'
                 " last_used, terminal) VALUES ('evil', '{}', NULL, 0, 'arm', 'action',"
                 " 'x/action/Y', X'00', '{}', ?, NULL, 'succeeded', 0, NULL, 1, 0, 1)", (evil,))
    conn.execute('INSERT INTO trajectories (task, variant, params_json, leaf, node_ids, created,'
                 " last_used, replay_count) VALUES ('evil', '{}', '{}', 1, '[1]', 0, 0, 0)")
    conn.close()


def _crafted_current_store(path: Path, marker: Path) -> None:
    """Write a current-schema store whose first step's pre column is a code-running pickle."""
    with SqliteStore(path=path) as s:
        s.add_trajectory(task='evil', variant='{}', params_json='{}', steps=[
            Step(tool='arm', kind=ToolKind.ACTION, type_name='x/action/Y', payload=b'\0')])
    conn = sqlite3.connect(path)
    conn.execute('UPDATE nodes SET pre = ?', (pickle.dumps(_Evil(marker), protocol=5),))
    conn.commit()
    conn.close()


def test_a_crafted_store_runs_no_code_in_the_node(world, tmp_path):
    h = world
    marker = tmp_path / 'pwned'
    old, current = tmp_path / 'old.db', tmp_path / 'current.db'
    _crafted_old_store(old, marker)
    _crafted_current_store(current, marker)
    cache = h.start_cache(store_path=str(old))
    assert wait_until(lambda: 'first step(s) loaded' in cache.output(), 20.0), cache.output()
    assert not marker.exists()
    assert 'migration dropped 1 node' in cache.output()
    assert (tmp_path / 'old.db.v2.bak').exists()
    assert h.stop_cache() == 0
    cache = h.start_cache(store_path=str(current))
    assert wait_until(lambda: 'could not preload' in cache.output(), 20.0), cache.output()
    assert 'not in the safe format' in cache.output() and cache.alive()
    assert not marker.exists()


_RECORDER = textwrap.dedent("""
    import sys
    from muscle_mem_ros import SqliteStore, Step, ToolKind
    s = SqliteStore(path=sys.argv[1])
    rec = s.begin(task='elsewhere', variant='{}', params_json='{}')
    rec.append(Step(tool='arm', kind=ToolKind.ACTION, type_name='x/action/Y', payload=b'g'))
    print('READY', flush=True)
    sys.stdin.readline()
""")


def _recorder(store: Path) -> subprocess.Popen:
    """Start a process that records into ``store`` and keeps the recording open."""
    proc = subprocess.Popen([sys.executable, '-c', _RECORDER, str(store)], env=subprocess_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == 'READY'
    return proc


def test_live_recordings_elsewhere_are_not_unfinished_and_dead_ones_are_purged(world, tmp_path):
    h = world
    store = tmp_path / 'shared.db'
    recorder = _recorder(store)
    try:
        cache = h.start_cache(store_path=str(store))
        assert wait_until(lambda: 'in progress in another process' in cache.output(), 10.0), \
            cache.output()
        assert f'pid {recorder.pid}' in cache.output()
        assert 'never finished' not in cache.output()
        none = h.call(Forget, 'forget', task='', abandoned_recordings=True)
        assert none.success and none.removed == 0  # a live recording is never purged
    finally:
        recorder.kill()
        recorder.wait(timeout=30)
    purged = h.call(Forget, 'forget', task='', abandoned_recordings=True)
    assert purged.success and purged.removed == 1, purged.message
    bad = h.call(Forget, 'forget', task='x', abandoned_recordings=True)
    assert not bad.success and 'abandoned_recordings' in bad.message
    assert h.stop_cache() == 0
    recorder = _recorder(store)
    recorder.kill()  # crashed mid-recording
    recorder.wait(timeout=30)
    cache = h.start_cache(store_path=str(store), abandoned_recording_retention=0.0)
    assert wait_until(lambda: 'purged 1 abandoned recording' in cache.output(), 10.0), \
        cache.output()
    assert 'never finished' not in cache.output()
    with SqliteStore(path=store) as s:
        assert s.incomplete_recordings() == []


def test_a_healthy_store_in_a_read_only_directory_is_named_as_such(tmp_path):
    directory = tmp_path / 'ro'
    directory.mkdir()
    store = directory / 'cache.db'
    with SqliteStore(path=store) as s:
        s.add_trajectory(task='t', variant='{}', params_json='{}', steps=[
            Step(tool='arm', kind=ToolKind.ACTION, type_name='x/action/Y', payload=b'g')])
    if os.geteuid() == 0:  # root writes anywhere chmod allows: use the immutable flag
        chattr = shutil.which('chattr')
        if chattr is None or subprocess.run([chattr, '+i', str(directory)]).returncode:
            pytest.skip('running as root without chattr: cannot make a read-only directory')
        undo = [chattr, '-i', str(directory)]
    else:
        directory.chmod(0o555)
        undo = ['chmod', '755', str(directory)]
    try:
        names = Names.unique()
        done = run_cache_to_exit(names=names, values=params(names, store=store), tmp=tmp_path)
    finally:
        subprocess.run(undo, check=True)
    assert done.returncode == 1, done.stderr
    assert 'bad configuration: store_path:' in done.stderr
    assert 'is read-only or not writable' in done.stderr and 'corrupt' not in done.stderr
    with SqliteStore(path=store) as s:
        assert len(s.trajectories()) == 1


def test_a_restart_replays_a_bound_step_from_the_plans_it_kept(world, tmp_path):
    h = world
    store = tmp_path / 'kept.db'
    _learn_two_positions(h, store, 'kept_pick')
    first = h.cache
    assert h.stop_cache() == 0  # deactivate keeps what was learned
    output = first.output()
    assert 'learned plans of 1 tree(s) kept for the next start' in output, output
    with SqliteStore(path=store) as opened:
        kept = opened.kept_plans(task='kept_pick', variant='{}')
        assert kept is not None and kept[0] == opened.tally(task='kept_pick', variant='{}')
        assert kept[2] >= 1, kept  # the arm step's target follows the object
    third = (OBJECT_HOME[0] + 0.08, OBJECT_HOME[1] + 0.01, OBJECT_HOME[2])
    h.robot.reset()
    h.robot.move_object(third)
    calls = len(h.agent.calls)
    cache = h.start_cache(store_path=str(store))
    run = h.run_task('kept_pick')
    assert run.result.cache_hit, run.result.message
    assert len(h.agent.calls) == calls
    sent = deserialize_message(h.robot.arm_goals[-1],
                               FollowJointTrajectory.Goal).trajectory.points[0].positions
    assert list(sent[:2]) == pytest.approx(list(third[:2]), abs=1e-3)  # rebound, not literal
    assert "task 'kept_pick': " in cache.output() and 'read from the store' in cache.output(), (
        output + cache.output())


def test_a_restart_over_a_wide_tree_replays_from_first_steps_kept_sorted(world, tmp_path):
    """
    Replay the right first step of 300 after a restart, from first steps kept sorted.

    300 more situations, the recorded one's steps with the arm's joints a radian or more
    away (the goal still follows the object, as the recordings taught), make the tree
    wide enough to keep its first steps as columns; the node tells
    the store its sensors' tolerances, so they are kept sorted (a restart's first lookup
    reads a band of them, :mod:`muscle_mem_ros.checks.banding`). The run after the
    restart is the one the two recordings explain, rebound to a third object position.
    """
    h = world
    store = tmp_path / 'wide.db'
    _learn_two_positions(h, store, 'wide_pick')
    assert h.stop_cache() == 0
    with SqliteStore(path=store) as opened:
        info = opened.trajectories(task='wide_pick', variant='{}')[0]
        steps = [opened.node(i).step for i in info.node_ids]
        with opened.batch():
            for i in range(300):
                far = [_moved(step, 1.0 + 0.01 * i) for step in steps]
                opened.add_trajectory(task='wide_pick', variant='{}', params_json='{}',
                                      steps=far)
    h.start_cache(store_path=str(store))  # its warm-up keeps the 302 first steps, sorted
    assert h.stop_cache() == 0
    with SqliteStore(path=store) as opened:
        kids = opened.children(task='wide_pick', variant='{}', parent=None)
        assert kids.columns is not None and kids.columns.n == 302
        assert kids.columns.key is not None and kids.columns.key[0] == 'joints', kids.columns.key
    third = (OBJECT_HOME[0] + 0.08, OBJECT_HOME[1] + 0.01, OBJECT_HOME[2])
    h.robot.reset()
    h.robot.move_object(third)
    calls = len(h.agent.calls)
    h.start_cache(store_path=str(store))
    run = h.run_task('wide_pick')
    assert run.result.cache_hit, run.result.message
    assert len(h.agent.calls) == calls
    sent = deserialize_message(h.robot.arm_goals[-1],
                               FollowJointTrajectory.Goal).trajectory.points[0].positions
    assert list(sent[:2]) == pytest.approx(list(third[:2]), abs=1e-3)


def _learn_two_positions(h: Harness, store: Path, task: str) -> None:
    """Start the cache on ``store``; let the agent do ``task`` at two object positions."""
    h.start_cache(store_path=str(store))
    for obj in (OBJECT_HOME, (OBJECT_HOME[0] + 0.05, OBJECT_HOME[1] + 0.03, OBJECT_HOME[2])):
        h.robot.reset()
        h.robot.move_object(obj)
        learned = h.run_task(task)
        assert learned.result.success and not learned.result.cache_hit


def _moved(step: Step, dq: float) -> Step:
    """Return ``step`` with every joint ``dq`` further in its snapshots."""
    def shifted(snapshot: Snapshot | None) -> Snapshot | None:
        if snapshot is None:
            return None
        features = dict(snapshot.features)
        features['joints'] = tuple(q + dq for q in features['joints'])
        return Snapshot(features=features, stamps=snapshot.stamps)
    return replace(step, pre=shifted(step.pre), post=shifted(step.post))
