"""
The whole demo story end to end (sim robot + behavior cache + agent), in fast mode.

Runs ``python -m muscle_mem_demo.demo`` as the README does, with a short think time and a
real-time factor above 1, then checks each run's mode, the agent's calls and where the
simulation says the object ended, from the JSON summary the demo writes. The judging logic
itself is checked ROS-free below.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

from muscle_mem_demo.report import format_row, HEADER, write_figure
from muscle_mem_demo.story import (
    judge,
    PLACE_TARGET,
    RunMode,
    RunOutcome,
    STORY,
)
import pytest

EXPECTED = [
    # mode, replayed, by agent, agent calls (resume steps)
    ('miss -> agent', 0, 8, [0]),
    ('replay', 8, 0, []),
    ('replay', 8, 0, []),
    ('replay -> agent', 1, 8, [1]),
    ('replay', 9, 0, []),
]


def run_demo(out, *extra: str):
    proc = subprocess.run(
        [sys.executable, '-m', 'muscle_mem_demo.demo', '--think-time', '0.05',
         '--rtf', '4', '--output-dir', str(out), *extra],
        capture_output=True, text=True, timeout=300)
    summary_path = out / 'sim_demo.json'
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else None
    return proc, summary, out


def cache_log_tail(out, lines: int = 40) -> str:
    """Return the end of the demo's cache log, for an assertion message."""
    log = out / 'logs' / 'behavior_cache.log'
    text = log.read_text(errors='replace') if log.is_file() else '(no cache log)'
    return '\n'.join(text.splitlines()[-lines:])


@pytest.fixture(scope='module')
def store(tmp_path_factory):
    return tmp_path_factory.mktemp('store') / 'cache.db'


@pytest.fixture(scope='module')
def story(tmp_path_factory, store):
    return run_demo(tmp_path_factory.mktemp('demo'), '--store', str(store))


def test_the_story_holds_and_the_demo_exits_0(story):
    proc, summary, _ = story
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert HEADER in proc.stdout
    assert 'the story held' in proc.stdout
    assert summary is not None and len(summary) == 5


def test_each_run_has_the_expected_mode_and_agent_calls(story):
    _, summary, _ = story
    assert summary is not None, 'the demo wrote no summary'
    observed = [(r['mode'], r['steps_replayed'], r['steps_by_agent'], r['agent_calls'])
                for r in summary]
    assert observed == EXPECTED


def test_the_simulation_shows_the_object_placed_after_every_run(story):
    _, summary, _ = story
    assert summary is not None
    for run in summary:
        x, y, z = run['final_object']
        assert math.hypot(x - PLACE_TARGET[0], y - PLACE_TARGET[1]) < 0.03, run
        assert z < 0.035, run


def test_the_bump_is_noticed_right_after_step_0(story):
    _, summary, _ = story
    assert summary is not None
    assert 'step 0' in summary[3]['check_failure']
    assert 'object' in summary[3]['check_failure']


def test_the_figure_is_a_png(story):
    _, _, out = story
    png = out / 'sim_demo.png'
    assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert (out / 'logs' / 'behavior_cache.log').is_file()


def test_the_story_again_on_a_store_that_knows_it_does_not_hold(story, store, tmp_path):
    assert story[0].returncode == 0  # the learned store comes from the first story
    proc, summary, _ = run_demo(tmp_path, '--store', str(store))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'the story did NOT hold' in proc.stdout
    assert 'already knew the task' in proc.stdout
    assert summary is not None
    assert summary[0]['mode'] == 'replay' and not summary[0]['held']
    assert summary[0]['agent_calls'] == []
    # everything else replays from the store and still places the object
    assert all(run['mode'] == 'replay' for run in summary), proc.stdout + cache_log_tail(tmp_path)
    assert all(math.hypot(r['final_object'][0] - PLACE_TARGET[0],
                          r['final_object'][1] - PLACE_TARGET[1]) < 0.03 for r in summary)


# -- judging, ROS-free ---------------------------------------------------------------------


def outcome_like_expected(spec, **changes) -> RunOutcome:
    e = spec.expect
    outcome = RunOutcome(spec=spec, success=True, cache_hit=e.mode is RunMode.REPLAY,
                         replayed=e.replayed, by_agent=e.by_agent,
                         agent_calls=e.agent_calls, wall_time=3.0,
                         final_object=(PLACE_TARGET[0], PLACE_TARGET[1], 0.02))
    for key, value in changes.items():
        setattr(outcome, key, value)
    return judge(outcome)


@pytest.mark.parametrize('spec', STORY, ids=[s.title for s in STORY])
def test_judge_accepts_the_expected_outcome(spec):
    assert outcome_like_expected(spec).held


def test_judge_fails_a_replay_that_leaves_the_object_elsewhere():
    outcome = outcome_like_expected(STORY[1], final_object=(0.4, 0.2, 0.02))
    assert not outcome.held
    assert any('not placed' in f for f in outcome.failures)
    assert 'FAIL' in format_row(outcome, baseline=6.0)


def test_judge_fails_wrong_mode_counts_and_calls():
    outcome = outcome_like_expected(STORY[4], cache_hit=False, replayed=1, by_agent=8,
                                    agent_calls=(1,))
    assert not outcome.held
    text = ' '.join(outcome.failures)
    assert 'mode replay -> agent' in text and 'agent calls' in text and '1 replayed' in text


def test_judge_fails_a_failed_task():
    outcome = outcome_like_expected(STORY[0], success=False, message='agent gave up')
    assert not outcome.held and outcome.mode is None
    assert 'agent gave up' in outcome.failures[0]


def test_figure_is_written_even_for_failed_runs(tmp_path):
    outcomes = [outcome_like_expected(STORY[0], trace_times=[0.0, 1.0],
                                      trace_positions=[(0.0,) * 4, (0.1,) * 4]),
                outcome_like_expected(STORY[1], success=False)]
    path = write_figure(outcomes, tmp_path / 'f.png')
    assert path.read_bytes()[:4] == b'\x89PNG'
