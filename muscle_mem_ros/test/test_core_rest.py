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

"""At rest (checks.rest): still within tolerance over the whole window, heard throughout."""

from __future__ import annotations

import math

from muscle_mem_ros.checks.rest import Rest
from muscle_mem_ros.records import CompareMode, SensorSpec, Snapshot
import pytest

ARM = SensorSpec('arm', (0.01,), max_age=0.2)
CUBE = SensorSpec('cube', (0.02, 0.02), max_age=0.2)


def feed(rest: Rest, name: str, readings: list[tuple[float, tuple[float, ...]]]) -> None:
    for stamp, values in readings:
        rest.add(Snapshot(features={name: values}, stamps={name: stamp}, taken_at=stamp))


def test_a_still_robot_is_at_rest_once_heard_for_the_whole_window():
    rest = Rest(sensors=[ARM], since=10.0, window=0.25)
    feed(rest, 'arm', [(10.0 + i * 0.025, (1.0 + 0.003 * (i % 2),)) for i in range(1, 12)])
    assert not rest.at_rest(10.2)  # heard for less than the window since the goal ended
    assert 'not heard for 0.25 s' in rest.why
    assert rest.at_rest(10.275), rest.why
    assert rest.why == ''


def test_an_arm_still_decelerating_is_not_at_rest_and_says_by_how_much():
    rest = Rest(sensors=[ARM], since=0.0, window=0.25)
    # braking: 20 cm/s falling to 0 over 1 s
    times = [i * 0.025 for i in range(1, 41)]
    feed(rest, 'arm', [(t, (0.2 * t - 0.1 * t * t,)) for t in times])
    assert not rest.at_rest(0.5)
    assert rest.why.startswith('arm[0] still moved') and 'tolerance 0.01' in rest.why
    feed(rest, 'arm', [(1.0 + i * 0.025, (0.1,)) for i in range(1, 12)])
    assert rest.at_rest(1.27), rest.why


def test_readings_from_before_the_goal_ended_do_not_count():
    rest = Rest(sensors=[ARM], since=5.0, window=0.25)
    feed(rest, 'arm', [(4.0 + i * 0.025, (0.0,)) for i in range(40)])  # up to 4.975
    assert not rest.at_rest(5.3)
    assert rest.why == 'arm sent nothing since the goal ended'


def test_a_silent_sensor_is_never_at_rest():
    rest = Rest(sensors=[ARM, CUBE], since=0.0, window=0.25)
    feed(rest, 'arm', [(i * 0.025, (0.0,)) for i in range(1, 30)])
    feed(rest, 'cube', [(0.05, (0.3, 0.1)), (0.1, (0.3, 0.1))])  # then nothing
    assert not rest.at_rest(0.72)
    assert rest.why.startswith('cube sent nothing for 0.62 s (max_age 0.2 s)'), rest.why


@pytest.mark.parametrize('moved, at_rest', [(0.015, True), (0.025, False)])
def test_each_element_is_held_to_its_own_tolerance(moved, at_rest):
    rest = Rest(sensors=[CUBE], since=0.0, window=0.25)
    feed(rest, 'cube', [(i * 0.025, (0.3, 0.1 + moved * (i % 2))) for i in range(1, 14)])
    assert rest.at_rest(0.33) is at_rest, rest.why
    if not at_rest:
        assert rest.why.startswith('cube[1] still moved'), rest.why


def test_an_angle_across_the_wrap_is_still():
    yaw = SensorSpec('yaw', (0.01,), CompareMode.ANGLE, max_age=0.2)
    rest = Rest(sensors=[yaw], since=0.0, window=0.25)
    feed(rest, 'yaw', [(i * 0.025, (math.pi - 0.002 if i % 2 else -math.pi + 0.002,))
                       for i in range(1, 14)])
    assert rest.at_rest(0.33), rest.why


def test_the_window_must_be_positive():
    with pytest.raises(ValueError, match='window must be > 0'):
        Rest(sensors=[ARM], since=0.0, window=0.0)


def test_creep_within_tolerance_over_the_window_is_motion():
    """6 cm/s at a 2 cm tolerance moves 1.5 cm in 0.25 s: within the range, a creep still."""
    rest = Rest(sensors=[SensorSpec('base', (0.02,), max_age=0.2)], since=0.0, window=0.25)
    feed(rest, 'base', [(i * 0.025, (0.06 * i * 0.025,)) for i in range(1, 41)])
    assert not rest.at_rest(1.0)
    assert rest.why.startswith('base[0] still creeps'), rest.why
    assert 'tolerance 0.02' in rest.why, rest.why


def test_noise_without_drift_is_at_rest_and_slow_drift_too():
    """A still, noisy sensor rests; a drift under the bound (1 tolerance per second) too."""
    rest = Rest(sensors=[SensorSpec('base', (0.02,), max_age=0.2)], since=0.0, window=0.25)
    noise = [0.004, -0.003, 0.002, -0.004, 0.003, -0.002, 0.004, -0.004, 0.001, -0.001, 0.0]
    feed(rest, 'base', [(i * 0.025, (0.01 * i * 0.025 + noise[i % 11],)) for i in range(1, 41)])
    assert rest.at_rest(1.0), rest.why


def scan(stamp: float, ranges: list[float]) -> Snapshot:
    return Snapshot(features={'scan': tuple(ranges)}, stamps={'scan': stamp}, taken_at=stamp)


SCAN = SensorSpec('scan', (0.3,), CompareMode.RMS, max_age=0.5)


def test_a_large_sensor_that_shifts_as_a_whole_is_not_at_rest():
    rest = Rest(sensors=[SCAN], since=0.0, window=0.25)
    walls = [2.0 + 0.01 * i for i in range(360)]
    for i in range(1, 11):  # the base backs away from every wall at 1 m/s
        rest.add(scan(i * 0.1, [w + 1.0 * i * 0.1 for w in walls]))
    assert not rest.at_rest(1.0)
    assert rest.why.startswith('scan (360 elements) still'), rest.why


def test_a_large_sensor_with_one_flickering_beam_and_dropouts_is_at_rest():
    """One beam of 360 that jumps, and beams out of range (inf, nan), are no motion."""
    rest = Rest(sensors=[SCAN], since=0.0, window=0.25)
    walls = [2.0 + 0.01 * i for i in range(360)]
    for i in range(1, 11):
        ranges = list(walls)
        ranges[7] = 2.0 + (1.5 if i % 2 else 0.0)
        ranges[100] = math.inf if i % 3 else 5.0
        ranges[200] = math.nan
        rest.add(scan(i * 0.1, ranges))
    assert rest.at_rest(1.0), rest.why
