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
A pose sensor (a TF sensor's reading) is judged as a pose: metres and radians.

Never by its quaternion's elements; and the watch, the rest test and calibration read it so too.
"""

from __future__ import annotations

import math

from muscle_mem_ros.checks.calibration import noise
from muscle_mem_ros.checks.poses import pose_coordinates, pose_deviations
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.checks.tube import Tube, Watched
from muscle_mem_ros.records import CompareMode, SensorSpec, Series, Snapshot, Trace
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

TOL = (0.01, math.radians(3.0))


def pose(x: float = 0.0, y: float = 0.0, yaw_deg: float = 0.0, tilt_deg: float = 0.0,
         sign: float = 1.0) -> tuple[float, ...]:
    q = Rotation.from_euler('zx', [yaw_deg, tilt_deg], degrees=True).as_quat()
    return (x, y, 0.0, *(sign * q).tolist())


def check() -> ToleranceCheck:
    return ToleranceCheck(sensors=[SensorSpec('dock', TOL, CompareMode.POSE, max_age=None)])


def judge(recorded: tuple[float, ...], now: tuple[float, ...]):
    return check().evaluate(Snapshot(features={'dock': recorded}),
                            Snapshot(features={'dock': now}))


def test_q_and_minus_q_are_one_pose() -> None:
    result = judge(pose(0.5, 0.2, 120.0), pose(0.5, 0.2, 120.0, sign=-1.0))
    assert result.passed and result.score < 1e-6


def test_a_turn_is_judged_by_its_angle_about_any_axis() -> None:
    # 2.5 degrees about z and about x pass; 3.5 about either fails, however the elements move
    for tilt, yaw in ((0.0, 32.5), (2.5, 30.0)):
        assert judge(pose(yaw_deg=30.0), pose(yaw_deg=yaw, tilt_deg=tilt)).passed
    for tilt, yaw in ((0.0, 33.5), (3.5, 30.0)):
        result = judge(pose(yaw_deg=30.0), pose(yaw_deg=yaw, tilt_deg=tilt))
        assert not result.passed
        failure = result.failures[0]
        assert 'turned 3.5 deg' in failure.reason, failure.reason
        assert failure.deviation == pytest.approx(math.radians(3.5), abs=1e-6)
        assert failure.tolerance == pytest.approx(TOL[1])


def test_a_move_is_judged_by_its_distance() -> None:
    assert judge(pose(0.5, 0.2), pose(0.5 + 0.006, 0.2 + 0.006)).passed  # 8.5 mm
    result = judge(pose(0.5, 0.2), pose(0.5 + 0.008, 0.2 + 0.008))  # 11.3 mm
    assert not result.passed
    assert 'moved 0.01131 m' in result.failures[0].reason
    assert result.failures[0].tolerance == pytest.approx(0.01)


def test_pose_tolerance_needs_two_numbers() -> None:
    with pytest.raises(ValueError, match='two tolerances'):
        ToleranceCheck(sensors=[SensorSpec('dock', (0.01,), CompareMode.POSE)])


def test_deviations_agree_with_scipy_on_random_rotations() -> None:
    rng = np.random.default_rng(3)
    a, b = Rotation.random(50, random_state=4), Rotation.random(50, random_state=5)
    for i in range(50):
        rec = np.r_[rng.normal(size=3), a[i].as_quat()]
        now = np.r_[rng.normal(size=3), b[i].as_quat()]
        dev = pose_deviations(rec[None], now)[0]
        assert dev[0] == pytest.approx(np.linalg.norm(rec[:3] - now[:3]))
        assert dev[1] == pytest.approx((a[i].inv() * b[i]).magnitude(), abs=1e-9)


def test_noise_of_a_pose_in_metres_and_radians() -> None:
    rng = np.random.default_rng(7)
    readings = [pose(1.0 + rng.normal(0, 0.001), 2.0 + rng.normal(0, 0.001),
                     170.0 + rng.normal(0, 0.5), sign=rng.choice([-1.0, 1.0]))
                for _ in range(200)]
    found = noise('dock', readings, mode=CompareMode.POSE)
    assert len(found.proposed) == 2
    assert 0.0005 < found.std[0] < 0.003  # metres: about 1.4 mm of 2D noise
    assert math.radians(0.3) < found.std[1] < math.radians(0.8)  # the yaw's 0.5 degree
    assert found.peak_to_peak[1] < math.radians(5.0)  # the sign flips are no turn


def _trace(yaws: list[float]) -> Trace:
    times = tuple(0.05 * i for i in range(len(yaws)))
    return Trace(rate=20.0, sensors={'dock': Series(times, tuple(pose(yaw_deg=y) for y in yaws))})


def test_the_watch_follows_a_turning_frame_through_the_sign_flip() -> None:
    # the frame turns from 170 to 190 degrees: its quaternion's w crosses 0 and the canonical
    # reading flips sign at 180, which the watch must not take for a jump
    yaws = [170.0 + i for i in range(21)]
    watched = [Watched('dock', i, TOL[0] if i < 3 else TOL[1]) for i in range(6)]
    reference = np.asarray(pose(yaw_deg=170.0)[3:])
    tube = Tube(_trace(yaws), watched, poses={'dock': reference})
    for i, yaw in enumerate(yaws):
        reading = pose(yaw_deg=yaw + 0.5)
        if reading[6] < 0:
            reading = tuple(-v if j >= 3 else v for j, v in enumerate(reading))
        assert tube.judge('dock', 0.05 * i, reading) is None, yaw
    failure = tube.judge('dock', 1.0, pose(yaw_deg=197.0))  # 7 degrees past the end
    assert failure is not None and failure.element == 5


def test_coordinates_of_a_pose_are_turns_about_the_reference() -> None:
    values = np.array([pose(yaw_deg=30.0), pose(yaw_deg=40.0, tilt_deg=5.0)])
    coords = pose_coordinates(values)
    assert coords[0, 3:] == pytest.approx([0.0, 0.0, 0.0])
    expected = (Rotation.from_quat(values[0, 3:]).inv() * Rotation.from_quat(values[1, 3:]))
    assert coords[1, 3:] == pytest.approx(expected.as_rotvec())
