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
What the simulation reports: a consistent state reading, and commands in progress.

A :class:`Motion` is created by :class:`~muscle_mem_demo.physics.ArmSim` for every trajectory
or gripper command and finished by its physics loop; callers in other threads wait on it.
"""

from __future__ import annotations

from dataclasses import dataclass
import enum
import threading

__all__ = ['Motion', 'MotionOutcome', 'SimState']


class MotionOutcome(enum.Enum):
    """How a commanded motion ended."""

    SUCCEEDED = 'succeeded'
    """The motion finished within tolerance."""
    TOLERANCE_VIOLATED = 'tolerance_violated'
    """The trajectory's time ran out before the joints were within the goal tolerance."""
    PATH_TOLERANCE_VIOLATED = 'path_tolerance_violated'
    """A joint left its path tolerance while the trajectory ran; the arm holds there."""
    PREEMPTED = 'preempted'
    """A newer command of the same kind, a cancel or a reset replaced it."""


@dataclass(frozen=True)
class SimState:
    """One consistent reading of the simulation."""

    sim_time: float
    """Simulated seconds since the simulator was created."""
    joint_names: tuple[str, ...]
    """Arm joints then jaw joints."""
    positions: tuple[float, ...]
    """Joint positions, radians, in ``joint_names`` order."""
    velocities: tuple[float, ...]
    """Joint velocities, radians per second."""
    object_position: tuple[float, float, float]
    """Cube centre, world frame, metres."""
    object_orientation: tuple[float, float, float, float]
    """Cube orientation as a quaternion (w, x, y, z)."""
    holding: bool
    """True while the cube is welded to the gripper."""
    gripper_closed: bool
    """True when the jaws were last commanded closed."""


class Motion:
    """
    A command in progress; finished by the physics loop.

    :ivar kind: 'trajectory' or 'gripper'.
    """

    def __init__(self, *, kind: str) -> None:
        self.kind = kind
        self._done = threading.Event()
        self._outcome: MotionOutcome | None = None
        self._message = ''
        self.desired: tuple[float, ...] = ()
        self.actual: tuple[float, ...] = ()
        self.gripper: object | None = None
        """For a gripper motion that ended: its :class:`physics.GripperOutcome`."""

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the motion ends; return False on timeout."""
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        """Return True once the motion has ended."""
        return self._done.is_set()

    @property
    def outcome(self) -> MotionOutcome | None:
        """How it ended, None while it runs."""
        return self._outcome

    @property
    def message(self) -> str:
        """Return a human-readable account of the ending."""
        return self._message

    def finish(self, outcome: MotionOutcome, message: str) -> None:
        """End the motion (the simulator calls this); later calls are ignored."""
        if self._done.is_set():
            return
        self._outcome = outcome
        self._message = message
        self._done.set()
