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
Joint-space paths: waypoints with times, interpolated the way joint_trajectory_controller does.

Between waypoints that carry velocities the interpolation is a cubic Hermite spline;
without velocities it is linear. The path starts from the joints' positions when the goal
is accepted (time 0), like a ros2_control controller with a first waypoint after time 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ['JointPath']


class JointPath:
    """Waypoints for some joints, sampled at a time since the start of the motion."""

    def __init__(
        self,
        *,
        times: Sequence[float],
        positions: Sequence[Sequence[float]],
        velocities: Sequence[Sequence[float]] | None = None,
    ) -> None:
        """
        Validate and store the waypoints.

        :param times: seconds from the start, strictly increasing, the first > 0 unless the path
            was anchored.
        :param positions: one row of joint positions per time.
        :param velocities: one row per time, or None for linear interpolation.
        :raises ValueError: empty, ragged, non-finite or non-increasing input.
        """
        t = np.asarray(times, dtype=float)
        p = np.asarray(positions, dtype=float)
        if t.ndim != 1 or t.size == 0:
            raise ValueError('a trajectory needs at least one waypoint')
        if p.ndim != 2 or p.shape[0] != t.size or p.shape[1] == 0:
            raise ValueError(
                f'each of the {t.size} waypoints needs one position per joint, '
                f'got shape {p.shape}'
            )
        if not (np.all(np.isfinite(t)) and np.all(np.isfinite(p))):
            raise ValueError('waypoint times and positions must be finite')
        if t[0] < 0.0 or np.any(np.diff(t) <= 0.0):
            raise ValueError(f'waypoint times must be >= 0 and strictly increasing: {t}')
        v: np.ndarray | None = None
        if velocities is not None:
            v = np.asarray(velocities, dtype=float)
            if v.shape != p.shape or not np.all(np.isfinite(v)):
                raise ValueError(f'velocities must be finite and shaped like positions {p.shape}')
        self._t = t
        self._p = p
        self._v = v

    @property
    def width(self) -> int:
        """Return number of joints."""
        return int(self._p.shape[1])

    @property
    def duration(self) -> float:
        """Time of the last waypoint, seconds."""
        return float(self._t[-1])

    @property
    def final(self) -> np.ndarray:
        """Positions of the last waypoint."""
        return self._p[-1].copy()

    def anchored(self, start: Sequence[float]) -> JointPath:
        """Return this path preceded by ``start`` at time 0 (at rest if velocities are used)."""
        s = np.asarray(start, dtype=float).reshape(1, -1)
        if s.shape[1] != self.width:
            raise ValueError(f'start has {s.shape[1]} joints, path has {self.width}')
        if self._t[0] <= 0.0:
            return self
        times = np.concatenate([[0.0], self._t])
        positions = np.concatenate([s, self._p])
        velocities = None
        if self._v is not None:
            velocities = np.concatenate([np.zeros_like(s), self._v])
        return JointPath(times=times, positions=positions, velocities=velocities)

    def sample(self, t: float) -> np.ndarray:
        """Return the positions at ``t`` seconds (clamped to the path's ends)."""
        times = self._t
        if t <= times[0]:
            return self._p[0].copy()
        if t >= times[-1]:
            return self._p[-1].copy()
        i = int(np.searchsorted(times, t, side='right')) - 1
        t0, t1 = float(times[i]), float(times[i + 1])
        h = t1 - t0
        s = (t - t0) / h
        p0, p1 = self._p[i], self._p[i + 1]
        if self._v is None:
            return p0 + (p1 - p0) * s
        v0, v1 = self._v[i], self._v[i + 1]
        h00 = 2 * s**3 - 3 * s**2 + 1
        h10 = s**3 - 2 * s**2 + s
        h01 = -2 * s**3 + 3 * s**2
        h11 = s**3 - s**2
        return h00 * p0 + h10 * h * v0 + h01 * p1 + h11 * h * v1

    def __repr__(self) -> str:
        kind = 'cubic' if self._v is not None else 'linear'
        return f'JointPath({self._t.size} waypoints, {self.duration:.3g} s, {kind})'
