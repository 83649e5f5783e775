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
Geometry of the demo arm in sim/arm.xml: joint names, home pose, forward and inverse kinematics.

The arm is a pan joint followed by three pitch joints (shoulder, elbow, wrist) that move in
the vertical plane the pan joint points at. The gripper hangs from the wrist; the planner
keeps it pointing straight down, so a grasp point (x, y, z) determines all four joints.
The numbers here must match arm.xml; ``test_sim_physics.py`` checks them against MuJoCo.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

from muscle_mem_ros.errors import MuscleMemError

__all__ = [
    'ARM_JOINTS',
    'GRIPPER_CLOSED',
    'GRIPPER_JOINTS',
    'GRIPPER_OPEN',
    'HOME',
    'JOINT_LIMITS',
    'LINK_LENGTHS',
    'SHOULDER_HEIGHT',
    'GraspPoint',
    'UnreachableError',
    'forward',
    'inverse',
]

ARM_JOINTS: tuple[str, ...] = ('shoulder_pan', 'shoulder_lift', 'elbow', 'wrist')
"""Joints the joint-trajectory action moves, in the order /joint_states lists them."""

GRIPPER_JOINTS: tuple[str, ...] = ('finger_left', 'finger_right')
"""The two jaw hinges, moved by the gripper service and listed after the arm joints."""

GRIPPER_OPEN = 0.0
"""Jaw angle when open, radians."""

GRIPPER_CLOSED = 0.35
"""Jaw angle when closed, radians (the jaw tips then touch a 4 cm cube)."""

SHOULDER_HEIGHT = 0.15
"""Height of the shoulder axis above the table top, metres."""

LINK_LENGTHS: tuple[float, float, float] = (0.3, 0.3, 0.12)
"""Shoulder to elbow, elbow to wrist, wrist to grasp point, metres."""

JOINT_LIMITS: dict[str, tuple[float, float]] = {
    'shoulder_pan': (-3.1, 3.1),
    'shoulder_lift': (-0.5, 2.9),
    'elbow': (-2.9, 0.5),
    'wrist': (-3.1, 3.1),
}
"""Position limits of the arm joints, radians."""

HOME: tuple[float, ...] = (0.0, 1.5, -2.0, -math.pi / 2 - 1.5 + 2.0)
"""Arm pose at rest: folded above the base, gripper pointing down."""


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


def forward(positions: tuple[float, ...] | list[float]) -> GraspPoint:
    """Return the grasp point for arm joint positions (ARM_JOINTS order)."""
    pan, lift, elbow, wrist = (float(v) for v in positions[:4])
    l1, l2, l3 = LINK_LENGTHS
    a1 = lift
    a2 = lift + elbow
    a3 = lift + elbow + wrist
    radius = l1 * math.cos(a1) + l2 * math.cos(a2) + l3 * math.cos(a3)
    height = SHOULDER_HEIGHT + l1 * math.sin(a1) + l2 * math.sin(a2) + l3 * math.sin(a3)
    return GraspPoint(x=radius * math.cos(pan), y=radius * math.sin(pan), z=height)


def inverse(target: GraspPoint) -> tuple[float, ...]:
    """
    Return arm joint positions that put the grasp point at ``target``, gripper down.

    The elbow-up solution is used, so the forearm stays above the table.

    :raises UnreachableError: the point is too far, too close or outside the joint limits.
    """
    l1, l2, l3 = LINK_LENGTHS
    radius = math.hypot(target.x, target.y)
    if radius < 1e-6:
        raise UnreachableError(f'grasp point {target} is on the pan axis')
    pan = math.atan2(target.y, target.x)
    wrist_r = radius
    wrist_z = target.z + l3 - SHOULDER_HEIGHT
    reach_sq = wrist_r * wrist_r + wrist_z * wrist_z
    cos_elbow = (reach_sq - l1 * l1 - l2 * l2) / (2.0 * l1 * l2)
    if not -1.0 <= cos_elbow <= 1.0:
        raise UnreachableError(f'grasp point {target} is out of reach')
    elbow = -math.acos(cos_elbow)
    lift = math.atan2(wrist_z, wrist_r) - math.atan2(
        l2 * math.sin(elbow), l1 + l2 * math.cos(elbow)
    )
    wrist = -math.pi / 2 - lift - elbow
    joints = (pan, lift, elbow, wrist)
    for name, value in zip(ARM_JOINTS, joints, strict=True):
        low, high = JOINT_LIMITS[name]
        if not low <= value <= high:
            raise UnreachableError(
                f'grasp point {target} needs {name}={value:.3f} outside [{low}, {high}]'
            )
    return joints
