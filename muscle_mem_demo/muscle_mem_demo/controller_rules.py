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
Which FollowJointTrajectory goals the demo arm refuses: those joint_trajectory_controller refuses.

ros2_controllers' joint_trajectory_controller answers a goal in ``goal_received_callback``, which
rejects (``GoalResponse::REJECT``) every goal its ``validate_trajectory_msg`` refuses (checked in
ros-controls/ros2_controllers ``joint_trajectory_controller/src/joint_trajectory_controller.cpp``
at humble ad559d9, jazzy ed360c9 and master 94e74de), with these messages:

* "Empty joint names on incoming trajectory." (ROS 1's empty "hold" goal is refused);
* "Empty trajectory received." (no points);
* "Incoming joint %s doesn't match the controller's joints.";
* "Velocity of last trajectory point of joint %s is not zero" (unless
  ``allow_nonzero_velocity_at_trajectory_end``, false by default);
* "Time between points %zu and %zu is not strictly increasing";
* "Mismatch between joint_names size (%zu) and positions (%zu) at point #%zu." (and the
  same for a non-empty ``velocities`` or ``accelerations``).

A goal naming only some of the joints is what the controller does with
``allow_partial_joints_goal: true`` (the demo's agent and tests move single joints); the
controller's default (false) would refuse it too. What the controller accepts and the demo arm
cannot do (a joint named twice, a ``multi_dof_trajectory``, a tolerance naming a joint not in
the trajectory) is accepted and then aborted, as before.

A goal accepted while another runs preempts it, as the controller's ``preempt_active_goal``
does: that is how the behavior cache's hold (the joints where they are, one point a tenth of a
second ahead: muscle_mem_ros ``ros/node/stops.py``) stops a goal whose cancel was refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ['HOLD_RADIUS', 'is_hold', 'rejection']

HOLD_RADIUS = 0.05
"""Radians: a one-point trajectory this close to where each of its joints is holds the arm."""
_EPSILON = 1.1920929e-07
"""std::numeric_limits<float>::epsilon(): the controller's "zero" velocity."""


def rejection(goal: Any, joints: Sequence[str]) -> str:
    """Return why joint_trajectory_controller rejects ``goal`` ('' : it accepts it)."""
    trajectory = goal.trajectory
    names = list(trajectory.joint_names)
    points = list(trajectory.points)
    if not names:
        return 'Empty joint names on incoming trajectory.'
    if not points:
        return 'Empty trajectory received.'
    for name in names:
        if name not in joints:
            return f"Incoming joint {name} doesn't match the controller's joints."
    for name, velocity in zip(names, points[-1].velocities):
        if abs(velocity) > _EPSILON:
            return f'Velocity of last trajectory point of joint {name} is not zero: {velocity}'
    previous = -1.0
    for index, point in enumerate(points):
        at = point.time_from_start.sec + point.time_from_start.nanosec * 1e-9
        if index > 0 and at <= previous:
            return (f'Time between points {index - 1} and {index} is not strictly increasing, '
                    f'it is {previous} and {at} respectively')
        previous = at
        for field, allow_empty in (('positions', False), ('velocities', True),
                                   ('accelerations', True)):
            values = getattr(point, field)
            if (len(values) or not allow_empty) and len(values) != len(names):
                return (f'Mismatch between joint_names size ({len(names)}) and {field} '
                        f'({len(values)}) at point #{index}.')
    return ''


def is_hold(goal: Any, positions: Mapping[str, float]) -> bool:
    """Return whether ``goal`` holds the arm: one point, each joint within HOLD_RADIUS of now."""
    trajectory = goal.trajectory
    if len(trajectory.points) != 1 or not trajectory.joint_names:
        return False
    point = trajectory.points[0]
    return all(name in positions and abs(positions[name] - value) <= HOLD_RADIUS
               for name, value in zip(trajectory.joint_names, point.positions))
