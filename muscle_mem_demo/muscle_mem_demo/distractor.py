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
The camera's distractor: a magenta 6 cm box that is not the cube.

A camera check must tell a change that matters from one that does not, so the world needs
something besides the cube that can appear on the table. The box is a second free body of the
scene (added by :func:`add_distractor`), parked while nobody wants it at :data:`PARK`: above
the camera, which looks down and sees nothing above its own height, and far from the arm and
the table, so it touches nothing and the arm and the cube move as they did without it (to
1e-10 m: the constraint solver's tolerance is scaled by the model's size and mean inertia).
Parked, it is held up against gravity (its gravity compensation on) and at rest, so it stays
there. Put somewhere (:meth:`~muscle_mem_demo.physics.ArmSim.move_distractor`), gravity
applies to it again and it falls from there: dropped over the table it lands on it (or on the
cube). A reset parks it again.

The functions here run inside the simulation's lock; the simulation calls them.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
from typing import Any

import mujoco
import numpy as np

__all__ = ['add_distractor', 'Distractor', 'HALF_SIZE', 'NAME', 'PARK', 'RGBA']

NAME = 'distractor'
"""The box's body and geom name in the scene (its free joint is ``distractor_free``)."""
HALF_SIZE = 0.03
"""Half the box's edge, metres: a 6 cm box, half again as wide as the 4 cm cube."""
PARK: tuple[float, float, float] = (-0.6, 0.9, 1.6)
"""Where the box waits, world frame (m): 0.5 m above the camera, 1.1 m beside the arm's base."""
RGBA = (0.85, 0.1, 0.65, 1.0)
"""Magenta: unlike the blue cube, the brown table, the green place marker and the grey arm."""
_MASS = 0.2


def add_distractor(world: Any) -> None:
    """Add the parked box to a scene's world body (an ``MjSpec`` body)."""
    box = world.add_body(name=NAME, pos=list(PARK), gravcomp=1.0)
    box.add_freejoint(name=f'{NAME}_free')
    box.add_geom(name=NAME, type=mujoco.mjtGeom.mjGEOM_BOX, size=[HALF_SIZE] * 3, mass=_MASS,
                 friction=[1.0, 0.005, 0.0001], rgba=list(RGBA))


class Distractor:
    """
    Move the box of a compiled scene (call with the simulation's lock held).

    :param model: The scene, made with :func:`add_distractor`.
    """

    def __init__(self, model: mujoco.MjModel) -> None:
        self._model = model
        self._body = model.body(NAME).id
        joint = model.joint(f'{NAME}_free')
        self._qpos = int(joint.qposadr[0])
        self._qvel = int(joint.dofadr[0])

    def park(self, data: mujoco.MjData) -> None:
        """Put the box back at :data:`PARK`, at rest and held there; the caller runs mj_forward."""
        self._put(data, PARK, (1.0, 0.0, 0.0, 0.0))
        self._model.body_gravcomp[self._body] = 1.0

    def place(self, data: mujoco.MjData, position: Sequence[float],
              orientation: Sequence[float] = (1.0, 0.0, 0.0, 0.0)) -> None:
        """
        Put the box at ``position`` (world frame, m), at rest; from there it falls.

        The caller runs mj_forward. Orientation is (w, x, y, z), normalized here.

        :raises ValueError: not 3 finite numbers, or not a non-zero quaternion.
        """
        pos = tuple(float(v) for v in position)
        quat = np.array([float(v) for v in orientation])
        if len(pos) != 3 or not all(math.isfinite(v) for v in pos):
            raise ValueError(f'distractor position must be 3 finite numbers, got {pos}')
        norm = float(np.linalg.norm(quat))
        if quat.shape != (4,) or not math.isfinite(norm) or norm < 1e-9:
            raise ValueError(f'distractor orientation must be a non-zero quaternion, got {quat}')
        self._put(data, pos, tuple(float(v) for v in quat / norm))
        self._model.body_gravcomp[self._body] = 0.0

    def position(self, data: mujoco.MjData) -> tuple[float, float, float]:
        """Return the box's centre, world frame (m), as of the last step."""
        x, y, z = (float(v) for v in data.xpos[self._body])
        return (x, y, z)

    def _put(self, data: mujoco.MjData, position: Sequence[float],
             orientation: Sequence[float]) -> None:
        data.qpos[self._qpos:self._qpos + 3] = position
        data.qpos[self._qpos + 3:self._qpos + 7] = orientation
        data.qvel[self._qvel:self._qvel + 6] = 0.0
