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
Poses as sensor readings: a transform's translation and rotation, compared as a pose.

A TF sensor (``sensors.<name>.frame``) reads one transform, ``T_reference_frame``, as seven
numbers: ``x, y, z`` in metres, then the rotation's quaternion ``qx, qy, qz, qw`` (the order of
``geometry_msgs/Transform``), with ``qw >= 0`` (``q`` and ``-q`` are one rotation; one sign keeps
a still frame's readings one vector). Its tolerance is two numbers: metres and radians.

Why not element by element: the four numbers of a quaternion are not four quantities. A turn
of 3 degrees about z moves ``qz`` by 0.026 and ``qw`` by 0.0003; an element-wise tolerance would
be loose about one axis and tight about another, and would call ``q`` and ``-q`` (the same
rotation) far apart. So a pose is judged by two numbers: how far its origin moved (Euclidean,
against the first tolerance), and the angle of the rotation that takes the recorded rotation
to the current one (``2 atan2(|v|, |w|)`` of ``q_rec* q``, against the second). The score is
the larger of the two ratios, as ``abs`` takes the largest element.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ['canonical', 'coordinate_tolerances', 'pose_coordinates', 'pose_deviations',
           'POSE_SIZE', 'pose_spread', 'relative_turns', 'rotation_vectors', 'turned']

POSE_SIZE = 7
"""Elements of a pose reading: translation (3), then the quaternion x, y, z, w (4)."""


def canonical(q: np.ndarray) -> np.ndarray:
    """Return unit quaternions (rows, or one) with ``w >= 0``: one vector per rotation."""
    q = np.asarray(q, dtype=np.float64)
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    q = q / np.where(norm > 0.0, norm, 1.0)
    return np.where(q[..., 3:4] < 0.0, -q, q)


def _relative(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Return ``a* b`` row by row: the rotation that takes each ``a`` to ``b`` (in a's axes)."""
    ax, ay, az, aw = (a[..., i] for i in range(4))
    bx, by, bz, bw = (b[..., i] for i in range(4))
    return np.stack([aw * bx - ax * bw - ay * bz + az * by,
                     aw * by + ax * bz - ay * bw - az * bx,
                     aw * bz - ax * by + ay * bx - az * bw,
                     aw * bw + ax * bx + ay * by + az * bz], axis=-1)


def pose_deviations(rec: np.ndarray, x: np.ndarray) -> np.ndarray:
    """
    Return, per recorded row, how far the current pose ``x`` is from it: (metres, radians).

    :param rec: (n, 7) recorded poses.
    :param x: (7,) the current pose.
    :return: (n, 2): the distance between the origins, the angle between the rotations
        (``[0, pi]``; NaN where a quaternion has no length).
    """
    rec = np.asarray(rec, dtype=np.float64).reshape(-1, POSE_SIZE)
    x = np.asarray(x, dtype=np.float64).reshape(POSE_SIZE)
    distance = np.linalg.norm(rec[:, :3] - x[:3], axis=1)
    rq, xq = rec[:, 3:], x[3:]
    lengths = np.linalg.norm(rq, axis=1) * float(np.linalg.norm(xq))
    r = _relative(rq, np.broadcast_to(xq, rq.shape))
    with np.errstate(invalid='ignore', divide='ignore'):
        angle = 2.0 * np.arctan2(np.linalg.norm(r[:, :3], axis=1), np.abs(r[:, 3]))
    angle = np.where(lengths > 0.0, angle, math.nan)
    return np.stack([distance, angle], axis=1)


def relative_turns(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Return the angles (radians) between rotations ``a`` and ``b`` (rows of quaternions)."""
    r = _relative(canonical(a), canonical(b))
    return np.asarray(2.0 * np.arctan2(np.linalg.norm(r[..., :3], axis=-1), np.abs(r[..., 3])))


def turned(delta: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Return ``delta q`` (Hamilton product, rows or one): ``q`` turned by ``delta``, canonical."""
    dx, dy, dz, dw = (delta[..., i] for i in range(4))
    qx, qy, qz, qw = (q[..., i] for i in range(4))
    return canonical(np.stack([dw * qx + dx * qw + dy * qz - dz * qy,
                               dw * qy - dx * qz + dy * qw + dz * qx,
                               dw * qz + dx * qy - dy * qx + dz * qw,
                               dw * qw - dx * qx - dy * qy - dz * qz], axis=-1))


def rotation_vectors(reference: np.ndarray, q: np.ndarray) -> np.ndarray:
    """
    Return the rotation vectors (axis times angle, radians) of ``reference* q``, row by row.

    The watch compares rotations in these coordinates: near ``reference`` a rotation vector's
    elements are the small turns about the reference's own axes, so a tolerance in radians
    holds on each, and the path of a turning frame stays continuous (no ``q``/``-q`` jump).
    """
    r = _relative(np.broadcast_to(canonical(reference), np.shape(q)), canonical(q))
    r = np.where(r[..., 3:4] < 0.0, -r, r)
    sine = np.linalg.norm(r[..., :3], axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(sine, r[..., 3:4])
    with np.errstate(invalid='ignore', divide='ignore'):
        scale = np.where(sine > 1e-12, angle / sine, 2.0)
    return np.asarray(r[..., :3] * scale)


def pose_spread(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """
    Return readings' spread as a pose: (rms, widest) of (metres, radians), and a mean pose.

    The rms is of each reading's distance (angle) from the mean origin (rotation, taken as the
    mean rotation vector about the first reading); the widest is the largest distance (angle)
    between two readings. Rotations never averaged element by element.

    :param data: (n, 7) pose readings.
    """
    data = np.asarray(data, dtype=np.float64).reshape(-1, POSE_SIZE)
    origins = data[:, :3]
    offsets = np.linalg.norm(origins - origins.mean(axis=0), axis=1)
    vectors = rotation_vectors(data[0, 3:], data[:, 3:])
    centre = vectors.mean(axis=0)
    spread = np.linalg.norm(vectors - centre, axis=1)
    quats = canonical(data[:, 3:])
    widest_t = float(np.linalg.norm(origins[:, None] - origins[None], axis=2).max())
    widest_r = float(relative_turns(quats[:, None], quats[None]).max())
    angle = float(np.linalg.norm(centre))
    axis = centre / angle if angle > 0.0 else np.zeros(3)
    mean_turn = np.concatenate([axis * math.sin(angle / 2.0), [math.cos(angle / 2.0)]])
    mean = np.concatenate([origins.mean(axis=0), turned(canonical(data[0, 3:]), mean_turn)])
    rms = np.array([math.sqrt(float(np.mean(offsets ** 2))),
                    math.sqrt(float(np.mean(spread ** 2)))])
    return rms, np.array([widest_t, widest_r]), mean


def pose_coordinates(values: np.ndarray, reference: np.ndarray | None = None) -> np.ndarray:
    """
    Return pose readings as six coordinates: the origin, and the rotation vector about a reference.

    What is judged element by element (a sensor at rest, the watch's path) sees a pose so:
    metres, then radians about the reference rotation's axes (the first reading's when none
    is given). Near the reference each coordinate is a small turn about one axis, so a
    tolerance in radians holds on each.

    :param values: (n, 7) pose readings.
    :param reference: A quaternion (x, y, z, w), or None.
    """
    values = np.asarray(values, dtype=np.float64).reshape(-1, POSE_SIZE)
    if len(values) == 0:
        return np.zeros((0, 6))
    ref = values[0, 3:] if reference is None else np.asarray(reference, dtype=np.float64)
    return np.hstack([values[:, :3], rotation_vectors(ref, values[:, 3:])])


def coordinate_tolerances(tolerance: tuple[float, ...] | list[float]) -> np.ndarray:
    """Return the six coordinates' tolerances of a pose's (metres, radians)."""
    t, r = (float(tolerance[0]), float(tolerance[-1]))
    return np.array([t, t, t, r, r, r])
