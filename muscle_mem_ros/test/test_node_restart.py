"""Cache process lifecycle: restarts keep the cache, clean exits, startup-time safety rules.

Each test starts and stops the cache subprocess itself (different parameters
or a restart on the same store file).
"""

from __future__ import annotations

import signal

from node_helpers import Harness, wait_until
import pytest

from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import Replay, StartRecording


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
    h.start_cache(store_path=store, sensors=None)
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
    h.start_cache(store_path=store, sensors=None, allow_unchecked_replay=True)
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
