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
Rotations and transforms are composed and compared as rotations, checked against scipy.

The hand-written quaternion algebra of :mod:`muscle_mem_ros.transforms.rotation` (written for
speed: a lookup composes one transform per link) must agree with scipy's ``Rotation``, the
library made for it, on random rotations; and the cases a person can work out say what the
numbers mean: a 90 degree yaw twice is 180, ``q`` and ``-q`` are one rotation, half way
between yaw 0 and 90 is 45.
"""

from __future__ import annotations

import math
import random

from muscle_mem_ros.transforms.rotation import (
    angle_between,
    conjugate,
    from_axis_angle,
    from_yaw,
    IDENTITY,
    inverse,
    multiply,
    normalize,
    Quaternion,
    rotate,
    slerp,
    to_yaw,
)
from muscle_mem_ros.transforms.transform import interpolate, Transform
import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

TIGHT = 1e-12


def neg(q: Quaternion) -> Quaternion:
    return (-q[0], -q[1], -q[2], -q[3])


def random_rotations(n: int, seed: int = 7) -> list[Quaternion]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x, y, z, w = (rng.gauss(0.0, 1.0) for _ in range(4))
        norm = math.sqrt(x * x + y * y + z * z + w * w)
        out.append((x / norm, y / norm, z / norm, w / norm))
    return out


def test_a_90_degree_yaw_twice_is_a_180_degree_yaw():
    quarter = from_yaw(math.pi / 2)
    half = multiply(quarter, quarter)
    assert angle_between(half, from_yaw(math.pi)) == pytest.approx(0.0, abs=TIGHT)
    assert abs(to_yaw(half)) == pytest.approx(math.pi, abs=TIGHT)
    assert angle_between(IDENTITY, half) == pytest.approx(math.pi, abs=TIGHT)
    # four quarter turns are no turn, though the quaternion's elements are then -IDENTITY
    full = multiply(half, half)
    assert full == pytest.approx((0.0, 0.0, 0.0, -1.0), abs=TIGHT)
    assert angle_between(full, IDENTITY) == pytest.approx(0.0, abs=1e-7)


def test_q_and_minus_q_are_the_same_rotation():
    for q in random_rotations(20):
        assert angle_between(q, neg(q)) == pytest.approx(0.0, abs=1e-7)
        assert rotate(neg(q), (0.3, -1.0, 2.0)) == pytest.approx(rotate(q, (0.3, -1.0, 2.0)),
                                                                 abs=TIGHT)
    a = Transform((1.0, 2.0, 3.0), from_yaw(0.4))
    b = Transform((1.0, 2.0, 3.0), neg(from_yaw(0.4)))
    assert a != b  # element by element they differ ...
    assert a.angle_to(b) == pytest.approx(0.0, abs=1e-7)  # ... as rotations they do not
    assert a.distance_to(b) == 0.0


def test_the_angle_between_rotations_is_the_relative_rotations_angle():
    assert angle_between(from_yaw(0.1), from_yaw(-0.2)) == pytest.approx(0.3, abs=TIGHT)
    # 179 degrees one way and 179 the other are 2 degrees apart, not 358
    assert angle_between(from_yaw(math.radians(179)), from_yaw(math.radians(-179))) == \
        pytest.approx(math.radians(2), abs=1e-10)
    tilt = from_axis_angle((1.0, 0.0, 0.0), 0.25)
    assert angle_between(tilt, IDENTITY) == pytest.approx(0.25, abs=TIGHT)
    # precise for tiny angles, where 2 acos(|dot|) is off by about 1e-8
    assert angle_between(from_yaw(1e-9), IDENTITY) == pytest.approx(1e-9, rel=1e-6)


def test_slerp_half_way_between_0_and_90_degrees_of_yaw_is_45():
    mid = slerp(IDENTITY, from_yaw(math.pi / 2), 0.5)
    assert to_yaw(mid) == pytest.approx(math.pi / 4, abs=TIGHT)
    assert angle_between(mid, from_yaw(math.pi / 4)) == pytest.approx(0.0, abs=1e-7)
    quarter = slerp(IDENTITY, from_yaw(math.pi / 2), 0.25)
    assert to_yaw(quarter) == pytest.approx(math.pi / 8, abs=TIGHT)
    assert slerp(IDENTITY, from_yaw(1.0), 0.0) == pytest.approx(IDENTITY, abs=TIGHT)
    assert slerp(IDENTITY, from_yaw(1.0), 1.0) == pytest.approx(from_yaw(1.0), abs=TIGHT)


def test_slerp_takes_the_short_way_round():
    a, b = from_yaw(math.radians(170)), from_yaw(math.radians(-170))
    for other in (b, neg(b)):
        mid = slerp(a, other, 0.5)
        assert abs(to_yaw(mid)) == pytest.approx(math.pi, abs=1e-10)  # through 180, not 0
    # the element-wise average of the two quaternions is no rotation between them
    average = tuple((x + y) / 2 for x, y in zip(a, b))
    assert math.sqrt(sum(v * v for v in average)) < 0.1


def test_slerp_of_nearly_equal_rotations_stays_unit_and_between():
    a = from_yaw(0.3)
    b = from_yaw(0.3 + 1e-10)
    mid = slerp(a, b, 0.5)
    assert math.sqrt(sum(v * v for v in mid)) == pytest.approx(1.0, abs=TIGHT)
    assert to_yaw(mid) == pytest.approx(0.3 + 0.5e-10, abs=1e-14)


def test_the_algebra_agrees_with_scipy_rotation():
    qs = random_rotations(50)
    v = (0.7, -1.3, 2.1)
    for a, b in zip(qs, qs[1:]):
        ra, rb = Rotation.from_quat(a), Rotation.from_quat(b)
        assert Rotation.from_quat(multiply(a, b)).approx_equal(ra * rb, atol=1e-12)
        assert rotate(a, v) == pytest.approx(tuple(ra.apply(v)), abs=1e-12)
        assert Rotation.from_quat(inverse(a)).approx_equal(ra.inv(), atol=1e-12)
        assert conjugate(a) == inverse(a)
        assert angle_between(a, b) == pytest.approx((ra.inv() * rb).magnitude(), abs=1e-12)
        expected = Slerp([0.0, 1.0], Rotation.from_quat([a, b]))([0.3])[0]
        assert Rotation.from_quat(slerp(a, b, 0.3)).approx_equal(expected, atol=1e-12)
        assert to_yaw(a) == pytest.approx(ra.as_euler('ZYX')[0], abs=1e-9)
    axis = (0.2, -0.5, 0.9)
    assert Rotation.from_quat(from_axis_angle(axis, 1.1)).approx_equal(
        Rotation.from_rotvec(1.1 * np.asarray(axis) / np.linalg.norm(axis)), atol=1e-12)


def test_normalize_takes_a_rounded_quaternion_and_refuses_what_is_not_a_rotation():
    q = normalize((0.0, 0.0, 0.7072, 0.7072))
    assert math.sqrt(sum(v * v for v in q)) == pytest.approx(1.0, abs=TIGHT)
    assert angle_between(q, from_yaw(math.pi / 2)) == pytest.approx(0.0, abs=1e-7)
    for bad in ((0.0, 0.0, 0.0, 0.0), (1.0, 1.0, 0.0, 0.0), (math.nan, 0.0, 0.0, 1.0),
                (0.0, 0.0, 0.0, math.inf)):
        with pytest.raises(ValueError, match='is not a rotation'):
            normalize(bad)
    with pytest.raises(ValueError, match='no direction'):
        from_axis_angle((0.0, 0.0, 0.0), 1.0)


def test_a_transform_turns_then_moves_and_composes_along_a_chain():
    turn = Transform((1.0, 0.0, 0.0), from_yaw(math.pi / 2))
    assert turn.apply((1.0, 0.0, 0.0)) == pytest.approx((1.0, 1.0, 0.0), abs=TIGHT)
    assert turn.inverse().apply((1.0, 1.0, 0.0)) == pytest.approx((1.0, 0.0, 0.0), abs=TIGHT)
    step = Transform((0.0, 2.0, 0.5), from_axis_angle((1.0, 0.0, 0.0), 0.3))
    point = (0.1, 0.2, 0.3)
    assert turn.compose(step).apply(point) == pytest.approx(turn.apply(step.apply(point)),
                                                            abs=TIGHT)
    there_and_back = turn.compose(step).compose(step.inverse()).compose(turn.inverse())
    assert there_and_back.distance_to(Transform()) == pytest.approx(0.0, abs=TIGHT)
    assert there_and_back.angle_to(Transform()) == pytest.approx(0.0, abs=1e-7)


def test_checked_refuses_what_is_not_a_transform_and_normalizes_the_rest():
    t = Transform.checked((1, 2, 3), (0.0, 0.0, 0.0, 1.001))
    assert t.rotation == (0.0, 0.0, 0.0, 1.0)
    assert t.translation == (1.0, 2.0, 3.0) and isinstance(t.translation[0], float)
    with pytest.raises(ValueError, match='not finite'):
        Transform.checked((0.0, math.nan, 0.0), IDENTITY)
    with pytest.raises(ValueError, match='not a rotation'):
        Transform.checked((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0))


def test_interpolate_moves_the_translation_linearly_and_the_rotation_by_slerp():
    a = Transform((0.0, 0.0, 0.0), IDENTITY)
    b = Transform((1.0, -2.0, 4.0), from_yaw(math.pi / 2))
    mid = interpolate(a, b, 0.25)
    assert mid.translation == pytest.approx((0.25, -0.5, 1.0), abs=TIGHT)
    assert to_yaw(mid.rotation) == pytest.approx(math.pi / 8, abs=TIGHT)
