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
A rigid transform: a translation and a rotation, as one ``geometry_msgs/Transform`` holds.

A transform from frame ``parent`` to frame ``child`` (what a TF message for that pair says)
is the child frame's pose in the parent frame: it maps a point given in the child frame to
the same point in the parent frame, ``p_parent = T.apply(p_child)``. Composing follows the
chain: ``T_a_b.compose(T_b_c)`` is ``T_a_c``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .rotation import (
    angle_between,
    IDENTITY,
    multiply,
    normalize,
    Quaternion,
    rotate,
    slerp,
    Vector3,
)

__all__ = ['ORIGIN', 'Transform', 'interpolate']

ORIGIN: Vector3 = (0.0, 0.0, 0.0)
"""The point at a frame's origin, and the translation that moves nothing."""


class Transform(NamedTuple):
    """
    A rotation followed by a translation: ``p -> rotation p + translation``.

    A ``NamedTuple`` (immutable, typed, cheap to make: a lookup makes one per link). Its
    rotation is taken to be a unit quaternion; :meth:`checked` makes one from a message's
    numbers, refusing what is not a transform.

    :ivar translation: Metres, ``(x, y, z)``: where the child frame's origin is in the parent
        frame.
    :ivar rotation: A unit quaternion ``(x, y, z, w)``: how the child frame is turned in the
        parent frame.
    """

    translation: Vector3 = ORIGIN
    rotation: Quaternion = IDENTITY

    @classmethod
    def checked(cls, translation: tuple[float, float, float],
                rotation: tuple[float, float, float, float]) -> Transform:
        """
        Return the transform of a message's numbers, its rotation normalized.

        :param translation: ``(x, y, z)`` in metres.
        :param rotation: ``(x, y, z, w)``, within the norm tolerance of a unit quaternion
            (:func:`~muscle_mem_ros.transforms.rotation.normalize`).
        :return: The transform, in floats.
        :raises ValueError: For a NaN or infinite translation, or a quaternion that is not a
            rotation.
        """
        x, y, z = translation
        if not math.isfinite(x + y + z):
            raise ValueError(f'translation {tuple(translation)} is not finite')
        return cls((float(x), float(y), float(z)), normalize(rotation))

    def compose(self, other: Transform) -> Transform:
        """
        Return this transform after ``other``: the chain ``a -> b -> c`` as ``a -> c``.

        ``T_a_b.compose(T_b_c)`` is ``T_a_c``: a point in ``c`` is moved by ``other`` into
        ``b``, then by this transform into ``a``.

        :param other: The inner transform, applied first.
        :return: The composed transform.
        """
        x, y, z = rotate(self.rotation, other.translation)
        tx, ty, tz = self.translation
        return Transform((tx + x, ty + y, tz + z), multiply(self.rotation, other.rotation))

    def inverse(self) -> Transform:
        """Return the transform that undoes this one: ``T_b_a`` of ``T_a_b``."""
        qx, qy, qz, qw = self.rotation
        back = (-qx, -qy, -qz, qw)
        x, y, z = rotate(back, self.translation)
        return Transform((-x, -y, -z), back)

    def apply(self, point: Vector3) -> Vector3:
        """Return ``point``, given in the child frame, in the parent frame."""
        x, y, z = rotate(self.rotation, point)
        tx, ty, tz = self.translation
        return (tx + x, ty + y, tz + z)

    def distance_to(self, other: Transform) -> float:
        """Return the distance in metres between the two translations."""
        ax, ay, az = self.translation
        bx, by, bz = other.translation
        return math.sqrt((ax - bx) ** 2 + (ay - by) ** 2 + (az - bz) ** 2)

    def angle_to(self, other: Transform) -> float:
        """Return the angle in radians between the two rotations, ``q`` and ``-q`` equal."""
        return angle_between(self.rotation, other.rotation)


def interpolate(a: Transform, b: Transform, ratio: float) -> Transform:
    """
    Return the transform a ``ratio`` of the way from ``a`` to ``b``, as tf2 interpolates.

    The translation linearly, the rotation along the shorter arc (slerp): the two parts
    apart, not a screw motion, which is what tf2 does between two stamps of a link.

    :param a: The transform at ratio 0.
    :param b: The transform at ratio 1.
    :param ratio: Where between them, 0 to 1.
    :return: The interpolated transform.
    """
    ax, ay, az = a.translation
    bx, by, bz = b.translation
    return Transform((ax + (bx - ax) * ratio, ay + (by - ay) * ratio, az + (bz - az) * ratio),
                     slerp(a.rotation, b.rotation, ratio))
