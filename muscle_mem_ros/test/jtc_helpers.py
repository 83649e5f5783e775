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
The test arm with ros2_controllers' joint_trajectory_controller manners on its trajectory action.

:class:`JtcRobot` is the harness's :class:`node_helpers.FakeRobot` whose arm server does what
the real controller does (its ``goal_received_callback`` / ``validate_trajectory_msg``, as
:mod:`muscle_mem_ros.ros.node.stops` cites them): it rejects a goal with no joint names, no
points, a joint it does not have, or a point whose positions are not one per joint; it refuses
every cancel (rclpy's default cancel callback, the bad manners the cache's stop is for); a new
goal preempts the one running (which ends ABORTED: rclpy has no CANCELED without a cancel
request); and the joints move along the trajectory in time (``time_from_start``), published on
the harness's JointState topic, so a goal stopped midway leaves the arm midway.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from node_helpers import FakeAgent, FakeRobot, Harness, JOINT_NAMES
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.serialization import serialize_message
from trajectory_msgs.msg import JointTrajectoryPoint

__all__ = ['JtcHarness', 'JtcRobot', 'trajectory']


def trajectory(positions: list[float], seconds: float) -> Any:
    """Return a FollowJointTrajectory goal: the joints to ``positions`` in ``seconds``."""
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(JOINT_NAMES)
    point = JointTrajectoryPoint(positions=[float(p) for p in positions])
    point.time_from_start.sec = int(seconds)
    point.time_from_start.nanosec = int(round((seconds - int(seconds)) * 1e9))
    goal.trajectory.points = [point]
    return goal


def rejection(goal: Any) -> str:
    """Return why joint_trajectory_controller rejects ``goal`` ('' : it accepts it)."""
    trajectory = goal.trajectory
    names = list(trajectory.joint_names)
    if not names:
        return 'Empty joint names on incoming trajectory.'
    if not trajectory.points:
        return 'Empty trajectory received.'
    for name in names:
        if name not in JOINT_NAMES:
            return f"Incoming joint {name} doesn't match the controller's joints."
    for i, point in enumerate(trajectory.points):
        if len(point.positions) != len(names):
            return (f'Mismatch between joint_names size ({len(names)}) and positions '
                    f'({len(point.positions)}) at point #{i}.')
    return ''


class JtcRobot(FakeRobot):
    """:class:`FakeRobot` whose arm server has joint_trajectory_controller's manners."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.accepted: list[Any] = []
        """Every arm goal accepted, in order (goal messages)."""
        self.accepted_ids: list[bytes] = []
        self.rejected: list[str] = []
        """Why each rejected arm goal was rejected."""
        self._active = b''
        server = next(w for w in self.waitables if isinstance(w, ActionServer)
                      and w._action_type is FollowJointTrajectory)
        server.register_goal_callback(self._validate)
        server.register_cancel_callback(lambda _h: CancelResponse.REJECT)
        server.register_execute_callback(self._follow)

    def _validate(self, goal: Any) -> GoalResponse:
        why = rejection(goal)
        if why:
            self.rejected.append(why)
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _follow(self, goal_handle: Any) -> Any:
        goal = goal_handle.request
        key = bytes(goal_handle.goal_id.uuid)
        self.arm_goals.append(bytes(serialize_message(goal)))
        self.accepted.append(goal)
        self.accepted_ids.append(key)
        result = FollowJointTrajectory.Result()
        last = goal.trajectory.points[-1]
        seconds = last.time_from_start.sec + last.time_from_start.nanosec * 1e-9
        slots = [JOINT_NAMES.index(n) for n in goal.trajectory.joint_names]
        with self._lock:
            self._active = key
            start = list(self.joints)
        self.arm_active.set()
        try:
            return self._track(goal_handle, key, result, seconds, slots, start)
        finally:
            self.arm_active.clear()

    def _track(self, goal_handle: Any, key: bytes, result: Any, seconds: float,
               slots: list[int], start: list[float]) -> Any:
        """Move the joints along the goal's last point in time; end preempted or reached."""
        target = goal_handle.request.trajectory.points[-1].positions
        began = time.monotonic()
        while True:
            fraction = 1.0 if seconds <= 0 else min(1.0, (time.monotonic() - began) / seconds)
            with self._lock:
                if self._active != key:
                    result.error_code = FollowJointTrajectory.Result.INVALID_GOAL
                    result.error_string = 'Current goal cancelled due to new incoming action.'
                    goal_handle.abort()
                    return result
                for slot, value in zip(slots, target):
                    self.joints[slot] = start[slot] + (value - start[slot]) * fraction
            if fraction >= 1.0:
                break
            time.sleep(0.01)
        self._count_call()
        goal_handle.succeed()
        result.error_string = 'Goal reached, success!'
        return result


class JtcHarness(Harness):
    """The harness with :class:`JtcRobot` as its robot."""

    def _doubles(self) -> tuple[Any, Any]:
        robot = JtcRobot(names=self.names, context=self.context)
        return robot, FakeAgent(names=self.names, robot=robot, context=self.context)


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    """Wait until ``predicate()``; fail naming ``what``."""
    done = threading.Event()
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f'timed out waiting for {what}')
        done.wait(0.02)
