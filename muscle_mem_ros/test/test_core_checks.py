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

"""Built-in tolerance checks and the user Check shape."""

from __future__ import annotations

import math

from muscle_mem_ros import Check, CompareMode, SensorSpec, Snapshot, ToleranceCheck
from muscle_mem_ros.checks.tolerance import user_similarity
import numpy as np
import pytest


def snap(t: float = 0.0, stamps: dict[str, float] | None = None, **features) -> Snapshot:
    return Snapshot(features={k: tuple(v) for k, v in features.items()},
                    stamps=stamps or {}, taken_at=t)


@pytest.mark.parametrize('mode, tol, recorded, now, score', [
    (CompareMode.ABS, (0.1,), (0.0, 0.0), (0.05, -0.02), 0.5),
    (CompareMode.ABS, (0.1, 1.0), (0.0, 0.0), (0.05, -0.9), 0.9),
    (CompareMode.ABS, (0.1,), (0.0, 0.0), (0.0, 0.3), 3.0),
    (CompareMode.NORM, (0.5,), (0.0, 0.0), (0.3, 0.4), 1.0),
    (CompareMode.NORM, (1.0,), (1.0, 1.0), (1.0, 3.0), 2.0),
    (CompareMode.RMS, (1.0,), (0.0, 0.0, 0.0, 0.0), (2.0, 0.0, 0.0, 0.0), 1.0),
    (CompareMode.RMS, (1.0,), (0.0, 0.0), (0.0, 0.0), 0.0),
    (CompareMode.EXACT, (0.0,), (1.0, 2.0), (1.0, 2.0), 0.0),
    (CompareMode.EXACT, (10.0,), (1.0, 2.0), (1.0, 2.5), math.inf),
    (CompareMode.ANGLE, (0.1,), (math.pi - 0.02,), (-math.pi + 0.02,), 0.4),
    (CompareMode.ANGLE, (0.1,), (0.0,), (2 * math.pi,), 0.0),
])
def test_mode_scores(mode, tol, recorded, now, score):
    check = ToleranceCheck(sensors=[SensorSpec('q', tol, mode)])
    result = check.evaluate(snap(q=recorded), snap(q=now))
    assert result.score == pytest.approx(score, abs=1e-9)
    assert result.passed == (score <= 1.0 + 1e-12)
    if not result.passed:
        assert result.failures[0].sensor == 'q'
        assert result.failures[0].reason == 'out of tolerance'


def test_abs_uses_raw_units_for_deviation():
    check = ToleranceCheck(sensors=[SensorSpec('q', (0.1, 2.0))])
    result = check.evaluate(snap(q=(0.0, 0.0)), snap(q=(0.3, 1.0)))
    assert not result.passed
    (failure,) = result.failures
    assert failure.deviation == pytest.approx(1.0)  # largest raw element deviation
    assert failure.tolerance == pytest.approx(2.0)
    assert failure.score == pytest.approx(3.0)


def test_zero_tolerance_means_exact_per_element():
    check = ToleranceCheck(sensors=[SensorSpec('q', (0.0, 1.0))])
    assert check.evaluate(snap(q=(1.0, 0.0)), snap(q=(1.0, 0.5))).passed
    assert not check.evaluate(snap(q=(1.0, 0.0)), snap(q=(1.0 + 1e-12, 0.0))).passed


def test_worst_sensor_decides_and_failures_sorted_worst_first():
    check = ToleranceCheck(sensors=[SensorSpec('a', (1.0,)), SensorSpec('b', (1.0,)),
                                    SensorSpec('c', (1.0,))])
    result = check.evaluate(snap(a=(0.0,), b=(0.0,), c=(0.0,)),
                            snap(a=(2.0,), b=(0.5,), c=(5.0,)))
    assert result.score == pytest.approx(5.0)
    assert [f.sensor for f in result.failures] == ['c', 'a']


def test_missing_sensor_fails():
    check = ToleranceCheck(sensors=[SensorSpec('q', (1.0,)), SensorSpec('p', (1.0,))])
    result = check.evaluate(snap(q=(0.0,), p=(0.0,)), snap(q=(0.0,)))
    assert not result.passed
    assert result.failures[0].sensor == 'p'
    assert result.failures[0].reason == 'missing'
    assert math.isinf(result.failures[0].deviation)


def test_sensor_absent_from_recording_is_ignored():
    check = ToleranceCheck(sensors=[SensorSpec('q', (1.0,)), SensorSpec('p', (1.0,))])
    assert check.evaluate(snap(q=(0.0,)), snap(q=(0.5,), p=(100.0,))).passed


def test_nothing_to_compare_never_passes():
    check = ToleranceCheck(sensors=[SensorSpec('q', (1.0,))])
    result = check.evaluate(snap(other=(0.0,)), snap(q=(0.0,)))
    assert not result.passed
    assert result.failures[0].reason == 'nothing to compare'


@pytest.mark.parametrize('age, passed, reason', [
    (0.1, True, None),
    (0.9, False, 'stale (0.9 s old)'),
])
def test_staleness(age, passed, reason):
    check = ToleranceCheck(sensors=[SensorSpec('q', (1.0,), max_age=0.5)])
    now = snap(t=100.0, stamps={'q': 100.0 - age}, q=(0.0,))
    result = check.evaluate(snap(q=(0.0,)), now)
    assert result.passed is passed
    if reason:
        assert result.failures[0].reason == reason


def test_staleness_uses_now_time_and_requires_a_stamp():
    check = ToleranceCheck(sensors=[SensorSpec('q', (1.0,), max_age=0.5)])
    now = snap(t=100.0, stamps={'q': 100.0}, q=(0.0,))
    assert check.evaluate(snap(q=(0.0,)), now).passed
    assert not check.evaluate(snap(q=(0.0,)), now, now_time=101.0).passed
    unstamped = snap(t=100.0, q=(0.0,))
    assert check.evaluate(snap(q=(0.0,)), unstamped).failures[0].reason.startswith('stale')


def test_shape_change_fails():
    check = ToleranceCheck(sensors=[SensorSpec('q', (1.0,))])
    result = check.evaluate(snap(q=(0.0, 0.0)), snap(q=(0.0, 0.0, 0.0)))
    assert not result.passed
    assert result.failures[0].reason == 'shape changed (2 recorded, 3 now)'


def test_tolerance_length_must_match_feature():
    check = ToleranceCheck(sensors=[SensorSpec('q', (1.0, 1.0))])
    result = check.evaluate(snap(q=(0.0, 0.0, 0.0)), snap(q=(0.0, 0.0, 0.0)))
    assert not result.passed
    assert 'tolerance has 2 elements' in result.failures[0].reason


@pytest.mark.parametrize('sensors, match', [
    ([], 'at least one sensor'),
    ([SensorSpec('q', (-0.1,))], 'must be >= 0'),
    ([SensorSpec('q', (float('nan'),))], 'must be >= 0'),
    ([SensorSpec('q', ())], 'at least one element'),
    ([SensorSpec('q', (1.0,)), SensorSpec('q', (2.0,))], 'duplicate sensor names: q'),
    ([SensorSpec('q', (1.0,), max_age=0.0)], 'max_age must be > 0'),
    ([SensorSpec('', (1.0,))], 'name must not be empty'),
])
def test_bad_specs_raise(sensors, match):
    with pytest.raises(ValueError, match=match):
        ToleranceCheck(sensors=sensors)


def test_scalar_tolerance_is_accepted():
    check = ToleranceCheck(sensors=[SensorSpec('q', 0.5)])  # type: ignore[arg-type]
    assert check.evaluate(snap(q=(0.0,)), snap(q=(0.4,))).passed


@pytest.mark.parametrize('capture, compare', [(1, lambda a, b: True), (lambda: 1, None)])
def test_check_requires_callables(capture, compare):
    with pytest.raises(TypeError, match='must be callable'):
        Check(capture, compare)


def test_check_keeps_callbacks_positionally_and_by_keyword():
    def capture(x):
        return x

    def compare(a, b):
        return a == b

    for check in (Check(capture, compare), Check(capture=capture, compare=compare)):
        assert check.capture is capture and check.compare is compare


@pytest.mark.parametrize('value, similarity', [
    (True, 1.0), (False, 0.0), (0.7, 0.7), (0, 0.0), (-0.5, -0.5), (float('nan'), 0.0),
    (np.bool_(True), 1.0), (np.float32(0.25), 0.25), ('yes', 1.0), (None, 0.0), ([], 0.0),
    (2.5, 1.0), (np.float64(7.0), 1.0),
])
def test_user_compare_results_become_similarities(value, similarity):
    assert user_similarity(value) == pytest.approx(similarity)


def test_failures_carry_their_kind_beside_the_text():
    from muscle_mem_ros import FailureKind, Matcher, Node, Step, ToolKind

    check = ToleranceCheck(sensors=[SensorSpec('q', (0.1,), max_age=0.5)])
    recorded = snap(q=(0.0,))
    far = check.evaluate(recorded, snap(t=1.0, stamps={'q': 1.0}, q=(1.0,)))
    stale = check.evaluate(recorded, snap(t=9.0, stamps={'q': 1.0}, q=(0.0,)))
    missing = check.evaluate(recorded, snap(t=1.0))
    assert far.failures[0].kind is FailureKind.OUT_OF_TOLERANCE
    assert stale.failures[0].kind is FailureKind.STALE
    assert missing.failures[0].kind is FailureKind.MISSING
    blind = Node(1, None, 0, Step(tool='t', kind=ToolKind.FUNCTION, type_name='', payload=b''))
    selection = Matcher(check=check, rejected_on_hit=True).select([blind], recorded)
    assert selection.rejected[0][1].failures[0].kind is FailureKind.UNCHECKED


def test_the_compiled_form_is_public():
    check = ToleranceCheck(sensors=[SensorSpec('q', (0.0, 0.2))])
    (sensor,) = check.compiled
    assert sensor.spec is check.sensors[0]
    assert sensor.tol.tolist() == [0.0, 0.2] and sensor.safe_tol.tolist() == [1.0, 0.2]
