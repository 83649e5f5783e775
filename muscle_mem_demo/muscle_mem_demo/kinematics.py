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
Kinematics of the demo arm on its MuJoCo model: forward, and inverse by damped least squares.

The grasp point is the ``grasp`` site between the finger pads (:mod:`muscle_mem_demo.arms`).
The gripper points straight down, its fingers closing along the world y axis at yaw 0 and
turned about the world z axis by a yaw otherwise (:mod:`.gripper_yaw`), so a grasp point
(x, y, z) and a yaw are a full pose: :func:`inverse` solves position and orientation together
(six equations, seven joints) with damped least squares on MuJoCo's site Jacobians
(``mj_jacSite``), pulls the spare degree of freedom towards the home posture until the error
is below a millimetre (then polishes without it, to 1e-9 m), and clamps every iterate into
the joint limits. It always starts from the home posture, so the same goal always gives the
same joints (a replay sends the same goal and gets the same motion). The last joint
(``panda_joint7``, +-166 deg) turns the hand: a yaw it cannot reach inside its limits (the
solver then ends with joint 7, or a joint it leaned on instead, at its limit) is solved as the
yaw 180 deg apart, the same grasp since the two fingers are symmetric. A goal
it cannot reach within ``POSITION_TOLERANCE`` and ``ANGLE_TOLERANCE`` inside the limits
either way raises :class:`UnreachableError`, naming the point and the joint at its limit.

The module-level names describe the process's arm, the Panda unless :func:`use_arm` chose
another (the demo agent does, from its ``arm`` parameter); :class:`Kinematics` serves any arm
of :data:`arms.ARMS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import functools
import math
import threading

import mujoco
from muscle_mem_demo import arms
from muscle_mem_demo.gripper_yaw import wrap
from muscle_mem_ros.errors import MuscleMemError
import numpy as np

__all__ = [
    'ANGLE_TOLERANCE',
    'ARM',
    'ARM_JOINTS',
    'GRIPPER_CLOSED',
    'GRIPPER_JOINTS',
    'GRIPPER_OPEN',
    'HOME',
    'POSITION_TOLERANCE',
    'GraspPoint',
    'Kinematics',
    'UnreachableError',
    'for_arm',
    'forward',
    'inverse',
    'jaws_closed',
    'use_arm',
]

ARM = 'panda'
"""The arm the module-level names describe (:func:`use_arm` changes it)."""

ARM_JOINTS: tuple[str, ...] = arms.ARMS[ARM].arm_joints
"""Joints the joint-trajectory action moves, in the order /joint_states lists them."""

GRIPPER_JOINTS: tuple[str, ...] = arms.ARMS[ARM].gripper_joints
"""The finger joints, moved by the gripper action and listed after the arm joints."""

GRIPPER_OPEN: float = arms.ARMS[ARM].gripper_open
"""Finger joint position when open, metres (0.04: an 8 cm opening)."""

GRIPPER_CLOSED: float = arms.ARMS[ARM].gripper_closed
"""Finger joint position when closed on nothing, metres."""

HOME: tuple[float, ...] = arms.ARMS[ARM].home
"""Arm pose at rest (the Panda's 'ready' pose): gripper down, 46 cm above the table."""

POSITION_TOLERANCE = 1e-4
"""Largest grasp-point error an inverse solution may leave, metres."""

ANGLE_TOLERANCE = 1e-3
"""Largest orientation error an inverse solution may leave, radians."""

_DAMPING = 3e-3
_NULL_GAIN = 0.1
_ITERATIONS = 400
_POLISH = 1e-3
_LIMIT_MARGIN = 1e-4


class UnreachableError(MuscleMemError, ValueError):
    """A grasp point lies outside the arm's workspace or joint limits."""


@dataclass(frozen=True)
class GraspPoint:
    """Where the grasp point between the jaws is, in the world frame (table top at z = 0)."""

    x: float
    """Metres forward of the base."""
    y: float
    """Metres to the left of the base."""
    z: float
    """Metres above the table top."""

    def distance_xy(self, other: GraspPoint) -> float:
        """Return the horizontal distance to another point, metres."""
        return math.hypot(self.x - other.x, self.y - other.y)


class Kinematics:
    """Forward and inverse kinematics of one arm on its own MuJoCo model (thread-safe)."""

    def __init__(self, *, arm: str = ARM) -> None:
        """
        Build the arm's kinematic model.

        :raises ValueError: an unknown arm.
        :raises arms.ModelFilesError: the model files are missing.
        """
        self._arm = arms.ARMS[arm] if arm in arms.ARMS else None
        if self._arm is None:
            raise ValueError(f'unknown arm {arm!r}: one of {sorted(arms.ARMS)}')
        self._model = arms.build_arm(arm)
        self._data = mujoco.MjData(self._model)
        self._lock = threading.Lock()
        names = self._arm.arm_joints
        self._qpos = np.array([self._model.joint(n).qposadr[0] for n in names])
        self._dof = np.array([self._model.joint(n).dofadr[0] for n in names])
        ranges = np.array([self._model.joint(n).range if self._model.jnt_limited[
            self._model.joint(n).id] else (-2 * math.pi, 2 * math.pi) for n in names])
        self._low = ranges[:, 0] + _LIMIT_MARGIN
        self._high = ranges[:, 1] - _LIMIT_MARGIN
        self._site = self._model.site('grasp').id
        self._home = np.array(self._arm.home)
        self._down = self._pose(self._home)[1]

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Return the arm joints, in the order positions are given."""
        return self._arm.arm_joints  # type: ignore[union-attr]

    @property
    def limits(self) -> tuple[tuple[float, float], ...]:
        """Return each arm joint's (lower, upper) position limit, radians (unlimited: 2 pi)."""
        return tuple((float(lo) - _LIMIT_MARGIN, float(hi) + _LIMIT_MARGIN)
                     for lo, hi in zip(self._low, self._high, strict=True))

    def _pose(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return the grasp site's position and orientation (a quaternion) at ``q``."""
        with self._lock:
            d = self._data
            d.qpos[self._qpos] = q
            mujoco.mj_kinematics(self._model, d)
            quat = np.zeros(4)
            mujoco.mju_mat2Quat(quat, d.site_xmat[self._site])
            return d.site_xpos[self._site].copy(), quat

    def forward(self, positions: Sequence[float]) -> GraspPoint:
        """Return the grasp point for arm joint positions (``joint_names`` order)."""
        q = np.asarray(positions, dtype=float)[:len(self._qpos)]
        x, y, z = (float(v) for v in self._pose(q)[0])
        return GraspPoint(x=x, y=y, z=z)

    def orientation(self, positions: Sequence[float]) -> tuple[float, float, float, float]:
        """
        Return the hand's rotation from gripper down at yaw 0, (x, y, z, w), world frame.

        What a MoveToPose orientation says (:mod:`.gripper_yaw`): the identity with the
        gripper down and unturned, a turn about z by the yaw when turned.
        """
        q = np.asarray(positions, dtype=float)[:len(self._qpos)]
        quat = self._pose(q)[1]
        turn = np.zeros(4)
        down_inverse = np.zeros(4)
        mujoco.mju_negQuat(down_inverse, self._down)
        mujoco.mju_mulQuat(turn, quat, down_inverse)
        w, x, y, z = (float(v) for v in turn)
        return (x, y, z, w) if w >= 0.0 else (-x, -y, -z, -w)

    def inverse(self, target: GraspPoint, *, yaw: float = 0.0) -> tuple[float, ...]:
        """
        Return arm joint positions that put the grasp point at ``target``, gripper down.

        :param yaw: The gripper's turn about the world z axis, radians (module docstring):
            a turn the last joint cannot make inside its limits is made 180 deg apart.
        :raises UnreachableError: no solution within the tolerances inside the joint limits,
            at ``yaw`` or 180 deg apart.
        """
        try:
            return self._solve(target, wrap(yaw))
        except UnreachableError as err:
            if not math.isfinite(yaw):
                raise
            try:
                return self._solve(target, wrap(yaw + math.pi))
            except UnreachableError:
                raise UnreachableError(
                    f'{err}; the gripper turned {math.degrees(wrap(yaw + math.pi)):.1f} deg '
                    '(the same grasp, 180 deg apart) is out of reach too') from err

    def _solve(self, target: GraspPoint, yaw: float) -> tuple[float, ...]:
        """Return the joints that put the grasp point at ``target`` turned by ``yaw``."""
        goal = np.array([target.x, target.y, target.z], dtype=float)
        if not np.all(np.isfinite(goal)) or not math.isfinite(yaw):
            raise UnreachableError(f'grasp point {target} at yaw {yaw} is not finite')
        down = np.zeros(4)
        mujoco.mju_mulQuat(down, np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]),
                           self._down)
        q = self._home.copy()
        jacp = np.zeros((3, self._model.nv))
        jacr = np.zeros((3, self._model.nv))
        error = np.zeros(6)
        for _ in range(_ITERATIONS):
            with self._lock:
                d = self._data
                d.qpos[self._qpos] = q
                mujoco.mj_kinematics(self._model, d)
                mujoco.mj_comPos(self._model, d)
                quat = np.zeros(4)
                mujoco.mju_mat2Quat(quat, d.site_xmat[self._site])
                error[:3] = goal - d.site_xpos[self._site]
                local = np.zeros(3)
                mujoco.mju_subQuat(local, down, quat)
                error[3:] = d.site_xmat[self._site].reshape(3, 3) @ local
                mujoco.mj_jacSite(self._model, d, jacp, jacr, self._site)
            if np.linalg.norm(error[:3]) < 1e-9 and np.linalg.norm(error[3:]) < 1e-8:
                break
            jac = np.vstack([jacp[:, self._dof], jacr[:, self._dof]])
            inv = jac.T @ np.linalg.inv(jac @ jac.T + _DAMPING ** 2 * np.eye(6))
            step = inv @ error
            if np.linalg.norm(error) > _POLISH:
                # posture: the spare freedom towards home, until the last polish
                step += (np.eye(len(q)) - inv @ jac) @ (_NULL_GAIN * (self._home - q))
            q = np.clip(q + step, self._low, self._high)
        position_error = float(np.linalg.norm(error[:3]))
        angle_error = float(np.linalg.norm(error[3:]))
        if position_error > POSITION_TOLERANCE or angle_error > ANGLE_TOLERANCE:
            at_limit = [n for n, v, lo, hi in zip(self.joint_names, q, self._low, self._high,
                                                  strict=True)
                        if v <= lo + 1e-6 or v >= hi - 1e-6]
            where = f'; at its limit: {", ".join(at_limit)}' if at_limit else ''
            turned = f' turned {math.degrees(yaw):.1f} deg' if yaw else ''
            raise UnreachableError(
                f'grasp point ({target.x:.3f}, {target.y:.3f}, {target.z:.3f}) is out of '
                f'reach with the gripper down{turned} (left {position_error * 1000:.1f} mm, '
                f'{math.degrees(angle_error):.2f} deg off{where})')
        return tuple(float(v) for v in q)


@functools.lru_cache(maxsize=None)
def for_arm(arm: str = ARM) -> Kinematics:
    """Return the (shared) kinematics of ``arm``."""
    return Kinematics(arm=arm)


def use_arm(arm: str) -> None:
    """
    Make ``arm`` the process's arm: the module-level names and functions then describe it.

    For a process that drives one arm (the demo agent, from its ``arm`` parameter); call it
    before planning. The names are read at call time by the planner and the agent.

    :raises ValueError: an unknown arm.
    :raises arms.ModelFilesError: the model files are missing.
    """
    global ARM, ARM_JOINTS, GRIPPER_JOINTS, GRIPPER_OPEN, GRIPPER_CLOSED, HOME
    model = arms.ARMS.get(arm)
    if model is None:
        raise ValueError(f'unknown arm {arm!r}: one of {sorted(arms.ARMS)}')
    for_arm(arm)  # its model loads, or this raises
    ARM = arm
    ARM_JOINTS = model.arm_joints
    GRIPPER_JOINTS = model.gripper_joints
    GRIPPER_OPEN = model.gripper_open
    GRIPPER_CLOSED = model.gripper_closed
    HOME = model.home


def forward(positions: Sequence[float]) -> GraspPoint:
    """Return the process arm's grasp point for arm joint positions (ARM_JOINTS order)."""
    return for_arm(ARM).forward(positions)


def inverse(target: GraspPoint, *, yaw: float = 0.0) -> tuple[float, ...]:
    """
    Return the process arm's joint positions that put the grasp point at ``target``.

    :param yaw: The gripper's turn about the world z axis, radians (:meth:`Kinematics.inverse`).
    :raises UnreachableError: the point is out of reach or outside the joint limits.
    """
    return for_arm(ARM).inverse(target, yaw=yaw)


def jaws_closed(positions: Sequence[float]) -> bool:
    """Return whether finger positions read as closed (on the cube or on nothing)."""
    mean = sum(positions) / len(positions)
    return mean < GRIPPER_OPEN - 0.25 * (GRIPPER_OPEN - GRIPPER_CLOSED)
