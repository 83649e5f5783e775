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
The whole demo story end to end (sim robot + behavior cache + agent), with a short think time.

Runs ``python -m muscle_mem_demo.demo`` as docs/demo.md does, with a short think time at the
demo's real-time factor 1 (the cache watches replayed motions against their recorded timing;
at rtf 4 a motion takes 0.2 s, the arm's feedback comes at 20 Hz, and the story is not
the one the README shows), then checks each run's mode, the agent's calls and where the
simulation says the object ended, from the JSON summary the demo writes: no run but the 9th
is canceled mid-motion, and the 9th (the cube knocked during the approach) is, with the arm
stopped short. The judging logic itself is checked ROS-free below.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
import re
import subprocess
import sys

from types import SimpleNamespace

from muscle_mem_demo.planner import BIN
from muscle_mem_demo.report import (
    describe_substitutions,
    format_row,
    format_skill_row,
    HEADER,
    SKILL_HEADER,
    write_figure,
)
from muscle_mem_demo.robot_node import CUBE_TF_NOISE
from muscle_mem_demo.skill_story import SKILL_STORY, skill_summary
from muscle_mem_demo.story import (
    BOUND_PLACE_TOLERANCE,
    FAR_POSITION,
    judge,
    KnockReport,
    MIN_STOPPED_SHORT,
    MOVED_PLACE_TARGET,
    PLACE_TARGET,
    RunMode,
    RunOutcome,
    SHIFT_POSITION,
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
    ('replay', 8, 0, []),
    ('replay', 8, 0, []),
    ('miss -> agent', 0, 8, [0]),
    ('replay -> agent', 0, 8, [0]),
    ('replay', 8, 0, []),
    ('miss -> agent', 0, 8, [0]),
]

RETARGETED_WITHIN = 5 * math.sqrt(2) * CUBE_TF_NOISE
"""
How near a goal retargeted to the cube is to the cube's true place, per axis, m (7 mm).

The cache reads the cube from TF with the sim's detection noise (``CUBE_TF_NOISE`` per
axis), once in the recording and once now, so the shift it applies is off by the difference
of two draws: about 1.5 mm per axis (the recorded demos' spread), and 3.1 and 3.5 mm at
times, more than the 3 mm this test allowed when the cube was read without noise. Five
standard deviations of that difference; the cube moved 45 and 40 mm, which a goal that was
not retargeted would be off by.
"""


def run_demo(out, *extra: str):
    proc = subprocess.run(
        [sys.executable, '-m', 'muscle_mem_demo.demo', '--think-time', '0.05',
         '--rtf', '1', '--output-dir', str(out), '--skip-eyes', *extra],
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
    assert summary is not None and len(summary) == 11


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
        tx, ty = run['place_target']
        assert run['params'] == {'place': [tx, ty]}
        allowed = BOUND_PLACE_TOLERANCE if run['run'] in (6, 7, 10) else 0.03
        assert math.hypot(x - tx, y - ty) < allowed, run
        assert z < 0.035, run
    assert summary[6]['place_target'] == list(MOVED_PLACE_TARGET)


def test_the_cube_start_of_each_run_is_recorded(story):
    _, summary, _ = story
    assert summary is not None
    starts = {run['run']: run['object_start'] for run in summary}
    assert starts[6] == pytest.approx(list(SHIFT_POSITION), abs=0.002)
    assert starts[8] == pytest.approx(list(FAR_POSITION), abs=0.002)


def test_the_moved_cube_is_a_replay_with_the_grasp_goals_retargeted(story):
    _, summary, _ = story
    assert summary is not None
    run = summary[5]
    assert run['agent_calls'] == [] and run['steps_replayed'] == 8
    cube = {(s['step'], s['field']): s['value'] for s in run['substituted']
            if str(s['source']).startswith('sensor:object')}
    # move above, descend, lift: x and y of each follow the cube to where it is now
    for step in (0, 1, 3):
        assert cube[(step, 'target.pose.position.x')] == pytest.approx(
            SHIFT_POSITION[0], abs=RETARGETED_WITHIN)
        assert cube[(step, 'target.pose.position.y')] == pytest.approx(
            SHIFT_POSITION[1], abs=RETARGETED_WITHIN)


def test_the_new_place_target_is_substituted_from_the_task_parameter(story):
    _, summary, _ = story
    assert summary is not None
    run = summary[6]
    assert run['agent_calls'] == [] and run['steps_replayed'] == 8
    place = {(s['step'], s['field']): s['value'] for s in run['substituted']
             if str(s['source']).startswith('param:place')}
    # above the target and lowering: y is the new parameter's value (x did not change)
    for step in (4, 5):
        assert place[(step, 'target.pose.position.y')] == MOVED_PLACE_TARGET[1]


def test_a_cube_beyond_the_range_goes_to_the_agent(story):
    _, summary, _ = story
    assert summary is not None
    run = summary[7]
    assert run['agent_calls'] == [0] and run['steps_replayed'] == 0
    assert 'object' in run['check_failure']


def test_the_bump_is_noticed_right_after_step_0(story):
    _, summary, _ = story
    assert summary is not None
    assert 'step 0' in summary[3]['check_failure']
    assert 'object' in summary[3]['check_failure']


def test_only_the_knocked_run_is_canceled_mid_motion(story):
    proc, summary, out = story
    assert summary is not None
    assert [r['run'] for r in summary if r['canceled']] == [9], cache_log_tail(out)
    run = summary[8]
    assert [step for step, _ in run['canceled']] == [0]
    assert 'during step 0' in run['check_failure'] and 'object' in run['check_failure']
    knock = run['knock']
    assert knock['outcome'] == 'canceled'
    assert 0.0 < knock['reaction'] < 1.0
    assert knock['stopped_short'] >= MIN_STOPPED_SHORT
    assert 'ms after the knock' in proc.stdout and 'short of the recorded approach' in proc.stdout


def test_the_second_part_shows_pick_learned_under_restock_replayed_under_tidy(story):
    proc, _, out = story
    skills = json.loads((out / 'sim_demo_skills.json').read_text())
    assert [r['task'] for r in skills] == ['restock', 'restock', 'tidy']
    # who the agent was asked for, from its ~/calls: the parent and both skills, then
    # nothing (a full replay), then only the new parent (both skills replayed under it)
    assert [r['agent_tasks'] for r in skills] == [['restock', 'pick', 'place'], [], ['tidy']]
    assert skills[1]['mode'] == 'replay' and skills[1]['from_cache'] == ['pick', 'place']
    assert skills[2]['from_cache'] == ['pick', 'place']
    assert all(r['held'] for r in skills), skills
    assert SKILL_HEADER in proc.stdout
    assert ('pick: learned under restock in run 12 (the agent asked for it); replayed from '
            'the cache under restock (run 13), tidy (run 14), the agent not asked for it'
            in proc.stdout)


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
    # everything else replays from the store (run 8's spot too: it was learned) and still
    # places the object on each run's own target; the knock still cancels run 9's approach
    assert all(run['mode'] == 'replay' for run in summary[:8]), (
        proc.stdout + cache_log_tail(tmp_path))
    assert summary[8]['mode'] == 'replay -> agent' and summary[8]['agent_calls'] == [0]
    assert all(math.hypot(r['final_object'][0] - r['place_target'][0],
                          r['final_object'][1] - r['place_target'][1]) < 0.03 for r in summary)


# -- judging, ROS-free ---------------------------------------------------------------------


KNOCKED = KnockReport(knocked_at=10.0, cancel_at=10.07, outcome='canceled', time_into_goal=0.15,
                      target=(0.4, 0.2, 0.15), at_knock=(0.3, 0.1, 0.3),
                      at_cancel=(0.31, 0.11, 0.29), at_end=(0.32, 0.12, 0.28))


def outcome_like_expected(spec, **changes) -> RunOutcome:
    e = spec.expect
    if e.canceled_step is not None:
        changes = dict({'canceled': ((e.canceled_step, 0.2),), 'knock': KNOCKED}, **changes)
    outcome = RunOutcome(spec=spec, success=True, cache_hit=e.mode is RunMode.REPLAY,
                         replayed=e.replayed, by_agent=e.by_agent,
                         agent_calls=e.agent_calls, wall_time=3.0,
                         final_object=(spec.place[0], spec.place[1], 0.02),
                         substituted=tuple(
                             {'step': 0, 'tool': 'arm_pose', 'field': 'target.pose.position.x',
                              'source': f'{prefix}[0]', 'recorded': 0.4, 'value': 0.45}
                             for prefix in e.substitutes),
                         final_yaw=0.0, check_failure=' '.join(e.noticed))
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


def test_an_unknown_final_position_says_why():
    why = 'no fresh /joint_states and /object_pose from the robot in 5 s (...)'
    outcome = outcome_like_expected(STORY[1], final_object=None, unobserved=why)
    assert not outcome.held
    assert f'object not placed (unknown: {why})' in outcome.failures


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
                                      trace_positions=[(0.0,) * 7, (0.1,) * 7]),
                outcome_like_expected(STORY[1], success=False)]
    path = write_figure(outcomes, tmp_path / 'f.png')
    assert path.read_bytes()[:4] == b'\x89PNG'


def test_the_runs_that_show_bindings_must_place_within_5_mm():
    """A 6 mm miss holds for a literal replay (3 cm allowed) but fails runs 6 and 7."""
    for spec in STORY[5:7]:
        tx, ty = spec.place
        outcome = outcome_like_expected(spec, final_object=(tx + 0.006, ty, 0.02))
        assert not outcome.held
        assert any('6.0 mm from the target' in f for f in outcome.failures), outcome.failures
        assert outcome_like_expected(spec, final_object=(tx + 0.004, ty, 0.02)).held
    assert outcome_like_expected(STORY[1], final_object=(0.406, -0.3, 0.02)).held


def test_placement_is_judged_against_the_runs_own_target():
    run7 = STORY[6]
    assert run7.place == MOVED_PLACE_TARGET
    assert run7.params_json == '{"place": [%r, %r]}' % MOVED_PLACE_TARGET
    old = outcome_like_expected(run7, final_object=(PLACE_TARGET[0], PLACE_TARGET[1], 0.02))
    assert not old.held
    assert old.placement_error == pytest.approx(0.05)


@pytest.mark.parametrize('index, prefix', [(5, 'sensor:object'), (6, 'param:place')])
def test_a_bound_run_without_its_substitution_fails(index, prefix):
    outcome = outcome_like_expected(STORY[index], substituted=())
    assert not outcome.held
    assert any(f'nothing substituted from {prefix}' in f for f in outcome.failures)
    other = ({'step': 4, 'field': 'x', 'source': 'param:other', 'recorded': 1, 'value': 2},)
    assert not outcome_like_expected(STORY[index], substituted=other).held


def test_a_cube_beyond_the_range_that_replays_fails():
    outcome = outcome_like_expected(STORY[7], cache_hit=True, replayed=8, by_agent=0,
                                    agent_calls=())
    assert not outcome.held
    assert any('mode replay, expected miss -> agent' in f for f in outcome.failures)


def test_substitutions_are_described_by_field_and_source_changed_only():
    outcome = outcome_like_expected(STORY[5], substituted=(
        {'step': 0, 'field': 'target.pose.position.x', 'source': 'sensor:object[0]',
         'recorded': 0.4, 'value': 0.355},
        {'step': 1, 'field': 'target.pose.position.x', 'source': 'sensor:object[0]',
         'recorded': 0.4, 'value': 0.355},
        {'step': 4, 'field': 'target.pose.position.x', 'source': 'param:place[0]',
         'recorded': 0.3, 'value': 0.3},
    ))
    assert describe_substitutions(outcome) == (
        'target.pose.position.x = sensor:object[0] at steps 0, 1 (0.400 -> 0.355)')
    assert describe_substitutions(outcome_like_expected(STORY[1])) == 'nothing changed'


def test_a_substitution_message_becomes_a_plain_record():
    from muscle_mem_demo.driver import substitution_record

    msg = SimpleNamespace(step=3, tool='arm_pose', field='target.pose.position.y',
                          source='sensor:object[1]', origin='declared', recorded=0.2,
                          value=0.24, text='y = object[1] + 0.000')
    assert substitution_record(msg) == {
        'step': 3, 'tool': 'arm_pose', 'field': 'target.pose.position.y',
        'source': 'sensor:object[1]', 'origin': 'declared', 'recorded': 0.2, 'value': 0.24}


def test_a_knocked_run_must_be_canceled_at_its_step_and_stop_short():
    run9 = STORY[8]
    assert run9.knock is not None and run9.expect.canceled_step == 0
    assert outcome_like_expected(run9).held
    missed = outcome_like_expected(run9, canceled=(), knock=KnockReport(
        **dict(vars(KNOCKED), outcome='succeeded', cancel_at=math.nan)))
    assert not missed.held
    assert 'steps canceled mid-motion [], expected [0]' in missed.failures
    assert any('was not canceled (robot: succeeded)' in f for f in missed.failures)
    late = outcome_like_expected(run9, knock=KnockReport(
        **dict(vars(KNOCKED), at_end=(0.4, 0.2, 0.16))))
    assert not late.held
    assert any('stopped 1.0 cm from the end' in f for f in late.failures), late.failures


def skill_outcome(spec, **changes) -> RunOutcome:
    e = spec.expect
    outcome = RunOutcome(spec=spec, success=True, cache_hit=e.mode is RunMode.REPLAY,
                         replayed=2 if e.mode is RunMode.REPLAY else 0,
                         by_agent=0 if e.mode is RunMode.REPLAY else 2,
                         agent_tasks=e.asked or (),
                         hits=tuple((task, 1) for task in e.from_cache),
                         final_object=(spec.place[0], spec.place[1], 0.02))
    for key, value in changes.items():
        setattr(outcome, key, value)
    return judge(outcome)


@pytest.mark.parametrize('spec', SKILL_STORY, ids=[s.title for s in SKILL_STORY])
def test_judge_accepts_the_expected_skill_run(spec):
    assert skill_outcome(spec).held


def test_judge_fails_a_skill_run_where_the_agent_was_asked_for_the_skill():
    outcome = skill_outcome(SKILL_STORY[2], agent_tasks=('tidy', 'pick'), hits=(('place', 1),))
    assert not outcome.held
    assert "the agent was asked for ['tidy', 'pick'], expected ['tidy']" in outcome.failures
    assert any('subtask pick not replayed from the cache' in f for f in outcome.failures)
    assert 'FAIL' in format_skill_row(outcome)
    assert 'tidy, pick' in format_skill_row(outcome)


def test_a_skill_run_is_judged_on_its_own_place():
    assert SKILL_STORY[2].place == BIN and SKILL_STORY[2].params_json == ''
    outcome = skill_outcome(SKILL_STORY[2], final_object=(0.3, -0.3, 0.02))
    assert not outcome.held and any('not placed' in f for f in outcome.failures)


def test_the_skill_summary_names_where_it_was_learned_and_where_it_replayed():
    outcomes = [skill_outcome(spec) for spec in SKILL_STORY]
    assert skill_summary(outcomes) == (
        'pick: learned under restock in run 12 (the agent asked for it); replayed from the '
        'cache under restock (run 13), tidy (run 14), the agent not asked for it')
    row = format_skill_row(outcomes[1])
    assert 'none' in row and 'pick, place' in row and 'PASS' in row


def test_any_other_run_canceled_mid_motion_fails():
    outcome = outcome_like_expected(STORY[1], canceled=((4, 0.08),))
    assert not outcome.held
    assert 'step 4 canceled mid-motion, no step expected canceled' in outcome.failures


def test_the_launch_file_and_the_docs_send_the_place_targets_the_demo_uses():
    # a user copying the launch file's or the docs' goal sends the target the story places at
    root = Path(__file__).resolve().parents[2]
    texts = {path.relative_to(root): path.read_text() for path in (
        *sorted((root / 'docs').glob('*.md')),
        root / 'muscle_mem_demo' / 'launch' / 'sim_demo.launch.py')}
    found = {(str(name), (float(x), float(y))) for name, text in texts.items()
             for x, y in re.findall(r'place\\?"?: ?\[(-?[\d.]+), ?(-?[\d.]+)\]', text)}
    assert ('muscle_mem_demo/launch/sim_demo.launch.py', PLACE_TARGET) in found
    assert ('docs/demo.md', PLACE_TARGET) in found
    used = {tuple(round(v, 6) for v in t) for t in (PLACE_TARGET, MOVED_PLACE_TARGET)}
    other = sorted(f for f in found if f[1] not in used)
    assert not other, f'place targets the demo does not use: {other}'


def test_the_turned_runs_place_the_cube_unturned_and_say_the_angle(story):
    """Run 10 (30 deg) replays with the grasp turned; run 11 (45 deg) misses on the angle."""
    _, summary, _ = story
    assert summary is not None
    turned, beyond = summary[9], summary[10]
    assert any(s['source'] == 'sensor:object' and s['field'].startswith(
        'target.pose.orientation') for s in turned['substituted']), turned['substituted']
    for run in (turned, beyond):
        assert abs(math.degrees(run['yaw_error'])) < 3.0, run
    assert 'target.pose.orientation would turn' in beyond['check_failure'], beyond


def test_judge_fails_a_turned_run_whose_cube_lands_turned():
    outcome = outcome_like_expected(STORY[9], final_yaw=math.radians(4.0))
    assert outcome.failures == ('object placed turned 4.0 deg (allowed 3 deg)',)
    # a quarter turn is the same square on the table
    assert outcome_like_expected(STORY[9], final_yaw=math.radians(91.0)).held
