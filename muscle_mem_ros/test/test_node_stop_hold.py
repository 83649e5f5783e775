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
A stop a real controller accepts (issue 43 item 6): the hold of a FollowJointTrajectory tool.

The test arm's trajectory server has joint_trajectory_controller's manners
(:class:`jtc_helpers.JtcRobot`: it rejects an empty trajectory, refuses every cancel, and a new
goal preempts the running one). The cache runs with no ``stop_goal`` for the arm: its stop is
the default hold. A proxied goal the agent cancels midway is refused its cancel, so the cache
sends the hold: the stopped goal's joints where the JointState sensor says they are, one point
a tenth of a second ahead, under a goal id with the cache's stop mark. The controller accepts
it, the running goal is preempted, and the arm stays where it was stopped.

Before the hold (issue 43), a FollowJointTrajectory tool had no stop unless the params file
gave ``stop_goal: '{}'``, which this controller (as the real one) rejects: the goal ran on to
its end and the stop said the robot did not stop.
"""

from __future__ import annotations

import time

from action_msgs.msg import GoalStatus
from jtc_helpers import JtcHarness, trajectory, wait_for
from muscle_mem_ros.ros.node.stops import HOLD_SECONDS, is_stop_goal_id
from node_helpers import JOINT_NAMES
import pytest


@pytest.fixture(scope='module')
def harness(tmp_path_factory):
    h = JtcHarness(tmp=tmp_path_factory.mktemp('stop_hold'))
    h.start_cache(stop_timeout=2.0)
    yield h
    h.close()


def test_a_refused_cancel_gets_the_hold_the_controller_executes(harness):
    h, robot = harness, harness.robot
    robot.reset()
    handle = h.wait(h.agent._arm.send_goal_async(trajectory([1.0, 1.0, 1.0], 3.0)))
    assert handle.accepted
    wait_for(lambda: robot.joints[0] > 0.3, 10.0, 'the arm to move')
    h.wait(handle.cancel_goal_async())
    wrapped = h.wait(handle.get_result_async(), 30.0)
    with robot._lock:
        stopped = list(robot.joints)
    output = h.cache.output()
    assert not robot.rejected, robot.rejected
    assert len(robot.accepted) >= 2, output[-3000:]
    held, held_id = robot.accepted[-1], robot.accepted_ids[-1]
    assert is_stop_goal_id(held_id) and not is_stop_goal_id(robot.accepted_ids[-2])
    assert list(held.trajectory.joint_names) == JOINT_NAMES
    (point,) = held.trajectory.points
    assert point.time_from_start.sec + point.time_from_start.nanosec * 1e-9 == \
        pytest.approx(HOLD_SECONDS)
    assert 0.2 < stopped[0] < 0.95, stopped  # stopped midway, not at the goal's 1.0
    assert list(point.positions) == pytest.approx(stopped, abs=0.1)
    time.sleep(0.5)
    with robot._lock:
        assert robot.joints == pytest.approx(stopped, abs=1e-9)  # it holds there
    assert wrapped.status != GoalStatus.STATUS_SUCCEEDED
    assert 'stop goal sent to' in output and '(hold j1 ' in output, output[-3000:]
    assert 'did not stop' not in output, output[-3000:]
