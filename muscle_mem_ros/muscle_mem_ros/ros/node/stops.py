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
The cache's own stops: which stop an action tool gets, and how its goals are told apart.

**The hold.** ROS 1's joint_trajectory_controller took an empty FollowJointTrajectory goal
as "hold where you are". ros2_controllers' does not: ``goal_received_callback`` rejects
every goal that ``validate_trajectory_msg`` refuses, and that refuses, in order (checked in
ros-controls/ros2_controllers ``joint_trajectory_controller/src/joint_trajectory_controller.cpp``
at humble ad559d9, jazzy ed360c9 and master 94e74de): a goal that does not name every
controller joint unless ``allow_partial_joints_goal`` (default false), empty ``joint_names``
("Empty joint names on incoming trajectory."), no points ("Empty trajectory received."), a
joint the controller does not have, a last point with a non-zero velocity (unless
``allow_nonzero_velocity_at_trajectory_end``), a stamped trajectory that ends in the past,
times that do not strictly increase, and a point whose ``positions`` (or a non-empty
``velocities``/``accelerations``) is not one per joint name. So ``stop_goal: '{}'`` is
refused on a real arm. What it executes is an ordinary goal that goes nowhere: the joints'
positions now, as one point :data:`HOLD_SECONDS` from now, the previous goal preempted
(its ``preempt_active_goal``). That is the stop a joint-trajectory tool gets unless the
params file names another (:func:`default_stop`); it is built at stop time
(:func:`hold_goal`) for the joints of the goal being stopped (the controller accepted
those names), from their positions on the cache's JointState sensors.

**The mark.** Every goal the cache sends as a stop carries a goal id of its own kind
(:func:`stop_goal_id`, an RFC 9562 version-8 UUID whose first bytes spell ``mmstop``), so
whatever records the server's events (a bag, ``learn``) tells the cache's stops from the
task's steps by the goal alone (:func:`is_stop_goal_id`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
import os
from typing import Any

from muscle_mem_ros.ros.node.nodeconfig import StopConfig
from trajectory_msgs.msg import JointTrajectoryPoint
from unique_identifier_msgs.msg import UUID

__all__ = ['default_stop', 'HOLD_SECONDS', 'hold_goal', 'is_stop_goal_id', 'joint_positions',
           'joint_trajectory', 'JOINT_STATE', 'refused_stop_goal', 'stop_goal_id']

HOLD_SECONDS = 0.1
"""time_from_start of the hold's one point: small (the arm stops within it) but not zero."""
JOINT_STATE = 'sensor_msgs/msg/JointState'
"""The type of the sensors the hold reads joint positions from, by name."""
HOLD_TEXT = 'hold: the joints where they are, as a one-point trajectory'
"""How the hold is said (``StopConfig.text``, ``init``'s comment)."""
_MARK = b'mmstop'


def joint_trajectory(action: Any) -> bool:
    """Return whether ``action``'s goal is a FollowJointTrajectory's (a ``trajectory``)."""
    fields = action.Goal.get_fields_and_field_types()
    return bool(fields.get('trajectory') == 'trajectory_msgs/JointTrajectory')


def default_stop(action: Any) -> StopConfig | None:
    """
    Return the stop an action tool gets when its params give none (None: the cancel only).

    A FollowJointTrajectory (control_msgs', or a type of the same shape) is held where it
    is (module docstring); the node needs a JointState sensor to build that hold. No other
    action's stop is known: its cancel is all the cache has unless ``stop_goal`` or
    ``stop_service`` says more.
    """
    return StopConfig(hold=True, text=HOLD_TEXT) if joint_trajectory(action) else None


def refused_stop_goal(action: Any, goal: Any) -> str:
    """Return why a real controller refuses ``goal`` as ``action``'s stop ('' : it may not)."""
    if not joint_trajectory(action):
        return ''
    if not goal.trajectory.joint_names or not goal.trajectory.points:
        return ('joint_trajectory_controller rejects a trajectory with no joint_names or no '
                'points (the hold of ROS 1): leave stop_goal out, and the cache holds the '
                'joints where they are (it needs a JointState sensor)')
    return ''


def joint_positions(messages: Iterable[Any]) -> dict[str, float]:
    """Return position by joint name from JointState messages (a later one wins)."""
    out: dict[str, float] = {}
    for msg in messages:
        out.update(zip(msg.name, msg.position))
    return out


def hold_goal(stopped: Any, positions: Mapping[str, float]) -> Any:
    """
    Return the hold for the goal ``stopped``: its joints where they are now (a goal of its type).

    :param stopped: The goal being stopped (its ``trajectory.joint_names`` are the joints).
    :param positions: Joint positions by name (:func:`joint_positions`).
    :raises ValueError: no goal, a goal with no joint names, or a joint with no position.
    """
    names = list(stopped.trajectory.joint_names) if stopped is not None else []
    if not names:
        raise ValueError('the goal being stopped names no joints')
    missing = [n for n in names if n not in positions]
    if missing:
        raise ValueError(f'no position of {", ".join(missing)} on the JointState sensors')
    goal = type(stopped)()
    goal.trajectory.joint_names = names
    point = JointTrajectoryPoint(positions=[float(positions[n]) for n in names])
    whole = int(HOLD_SECONDS)
    point.time_from_start.sec = whole
    point.time_from_start.nanosec = int(round((HOLD_SECONDS - whole) * 1e9))
    goal.trajectory.points = [point]
    return goal


def stop_goal_id() -> Any:
    """Return a fresh goal id that says "a stop the cache sent" (module docstring)."""
    raw = bytearray(_MARK + os.urandom(16 - len(_MARK)))
    raw[6] = 0x80 | (raw[6] & 0x0F)  # version 8
    raw[8] = 0x80 | (raw[8] & 0x3F)  # variant RFC 9562
    return UUID(uuid=list(raw))


def is_stop_goal_id(goal_id: bytes) -> bool:
    """Return whether ``goal_id`` (16 bytes) is one :func:`stop_goal_id` made."""
    return len(goal_id) == 16 and goal_id.startswith(_MARK) and goal_id[6] >> 4 == 8 and \
        goal_id[8] >> 6 == 2
