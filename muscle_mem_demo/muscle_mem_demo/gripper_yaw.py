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
The gripper's turn: how a MoveToPose orientation reads as "gripper down, turned by a yaw".

The demo arm keeps its gripper pointing straight down. A MoveToPose orientation is the hand's
rotation from its yaw-0 pose (gripper down, fingers closing along the world y axis): the
identity (or the all-zero quaternion, a goal that left it unset) is that pose, and a rotation
about the world z axis by ``yaw`` turns the gripper by ``yaw`` (positive: counter-clockwise
seen from above), as a rotation taken from a turned object's frame reads. Anything tilted by
more than :data:`TILT_TOLERANCE` is a pose the arm does not take.

Quaternions are (x, y, z, w), as geometry_msgs orders them, and are read through scipy's
``Rotation``: the yaw is the twist about z, the tilt the angle the rotation moves the z axis
by, both independent of the quaternion's sign.
"""

from __future__ import annotations

from collections.abc import Sequence
import math

import numpy as np
from scipy.spatial.transform import Rotation

__all__ = ['TILT_TOLERANCE', 'UNIT_TOLERANCE', 'from_yaw', 'tilt', 'wrap', 'yaw_of', 'yaw_of_goal']

TILT_TOLERANCE = math.radians(1.0)
"""Largest tilt of a goal orientation from "gripper down" that is read as its yaw, radians."""

UNIT_TOLERANCE = 1e-3
"""Largest departure of a goal quaternion's length from 1 that is normalized, not refused."""


def wrap(angle: float) -> float:
    """Return ``angle`` wrapped into [-pi, pi), radians."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def from_yaw(yaw: float) -> tuple[float, float, float, float]:
    """Return the quaternion (x, y, z, w) of a turn by ``yaw`` radians about the world z axis."""
    return (0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0))


def yaw_of(quaternion: Sequence[float]) -> float:
    """
    Return the twist about the world z axis of a rotation (x, y, z, w), radians in [-pi, pi).

    For a rotation that is a pure turn about z this is its angle; for a tilted one, the turn
    left once the tilt is taken out (the swing-twist split).
    """
    _x, _y, z, w = (float(v) for v in quaternion)
    return wrap(2.0 * math.atan2(z, w))


def tilt(quaternion: Sequence[float]) -> float:
    """Return the angle by which a rotation (x, y, z, w) moves the z axis, radians."""
    axis = Rotation.from_quat(np.asarray(quaternion, dtype=float)).apply((0.0, 0.0, 1.0))
    return math.atan2(math.hypot(float(axis[0]), float(axis[1])), float(axis[2]))


def yaw_of_goal(quaternion: Sequence[float]) -> float:
    """
    Return the yaw of a MoveToPose orientation (x, y, z, w) that is "gripper down, turned".

    :raises ValueError: A quaternion that is not finite, not of unit length (the all-zero one
        aside: yaw 0), or tilted beyond :data:`TILT_TOLERANCE`; the message says by how much.
    """
    q = np.asarray([float(v) for v in quaternion])
    if q.shape != (4,) or not np.all(np.isfinite(q)):
        raise ValueError(f'target.pose.orientation {tuple(q)} is not a finite quaternion')
    norm = float(np.linalg.norm(q))
    if norm == 0.0:
        return 0.0
    if abs(norm - 1.0) > UNIT_TOLERANCE:
        raise ValueError(f'target.pose.orientation has length {norm:.4f}: not a unit '
                         'quaternion (nor all zeros, which reads as gripper down)')
    q = q / norm
    tilted = tilt(q)
    if tilted > TILT_TOLERANCE:
        raise ValueError(
            f'target.pose.orientation is tilted {math.degrees(tilted):.1f} deg from gripper '
            f'down (at most {math.degrees(TILT_TOLERANCE):g} deg): the demo arm keeps its '
            'gripper pointing down and turns it about the world z axis only')
    return yaw_of(q)
