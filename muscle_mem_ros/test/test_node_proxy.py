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
The proxies outside a task: transparent pass-through of goals, feedback, cancel, results.

Nothing is recorded unless a task or a manual recording is active.
"""

from __future__ import annotations

import time
import uuid

from action_msgs.msg import GoalStatus
from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_interfaces.srv import ListTasks
from muscle_mem_ros.ros.rclfix.action_client import ActionClient as FixedActionClient
from muscle_mem_ros.ros.rclfix.matching import wait_for_action_matched, wait_for_service_matched
from node_helpers import Harness, JOINT_NAMES, wait_feedback, wait_until
import pytest
import rclpy
from rclpy.action import ActionClient
from rclpy.node import Node
from std_srvs.srv import SetBool
from test_msgs.action import Fibonacci
from trajectory_msgs.msg import JointTrajectoryPoint


@pytest.fixture(scope='module')
def harness(tmp_path_factory):
    h = Harness(tmp=tmp_path_factory.mktemp('proxy'))
    h.start_cache(**{'actions.ghost': {
        'server': f'/{h.names.prefix}/ghost', 'type': 'test_msgs/action/Fibonacci'}})
    yield h
    h.close()


@pytest.fixture
def world(harness):
    harness.robot.reset()
    yield harness
    assert harness.cache is not None and harness.cache.alive(), harness.cache.output()


def arm_goal(positions):
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = JOINT_NAMES
    goal.trajectory.points = [JointTrajectoryPoint(positions=positions)]
    return goal


def proxy_client(h: Harness, action_type, server: str) -> FixedActionClient:
    """Return a client of a proxy, matched both ways (its feedback then reaches it)."""
    client = FixedActionClient(h.client, action_type, h.names.proxy(server))
    # the proxies' hidden node serves no parameters; the cache's node is the same process
    assert wait_for_action_matched(h.client, client, f'/{h.names.node}', 15.0), h.spin_error
    return client


def test_goal_feedback_and_result_pass_through(world):
    h = world
    client = proxy_client(h, FollowJointTrajectory, h.names.arm)
    h.robot.arm_delay = 0.3
    feedback: list = []
    before = len(h.robot.arm_goals)
    handle = h.wait(client.send_goal_async(
        arm_goal([0.5, 0.4, 0.3]), feedback_callback=lambda m: feedback.append(m.feedback)))
    assert handle.accepted
    wrapped = h.result(handle)
    assert wrapped.status == GoalStatus.STATUS_SUCCEEDED
    assert wrapped.result.error_string == 'reached'
    assert len(h.robot.arm_goals) == before + 1
    feedback = wait_feedback(feedback, bool, 'feedback of the proxied goal')
    assert list(feedback[0].joint_names) == JOINT_NAMES
    assert h.robot.joints == [0.5, 0.4, 0.3]
    fib = proxy_client(h, Fibonacci, h.names.fib)
    handle = h.wait(fib.send_goal_async(Fibonacci.Goal(order=6)))
    wrapped = h.result(handle)
    assert list(wrapped.result.sequence) == [0, 1, 1, 2, 3, 5, 8]


def test_cancel_of_proxied_goal_cancels_the_real_goal(world):
    h = world
    client = proxy_client(h, FollowJointTrajectory, h.names.arm)
    h.robot.arm_delay = 10.0
    canceled = h.robot.arm_canceled
    handle = h.wait(client.send_goal_async(arm_goal([0.1, 0.1, 0.1])))
    assert wait_until(h.robot.arm_active.is_set, 10.0)
    h.wait(handle.cancel_goal_async())
    wrapped = h.result(handle)
    assert wrapped.status == GoalStatus.STATUS_CANCELED
    assert h.robot.arm_canceled == canceled + 1


def test_abort_and_missing_server_reach_the_caller(world):
    h = world
    client = proxy_client(h, FollowJointTrajectory, h.names.arm)
    h.robot.abort_next = 1
    handle = h.wait(client.send_goal_async(arm_goal([0.2, 0.2, 0.2])))
    wrapped = h.result(handle)
    assert wrapped.status == GoalStatus.STATUS_ABORTED
    assert wrapped.result.error_string == 'aborted by the test'
    ghost = proxy_client(h, Fibonacci, f'/{h.names.prefix}/ghost')
    handle = h.wait(ghost.send_goal_async(Fibonacci.Goal(order=3)))
    wrapped = h.result(handle)
    assert wrapped.status == GoalStatus.STATUS_ABORTED


def test_service_proxy_and_nothing_recorded_outside_a_task(world):
    h = world
    before = h.call(ListTasks, 'list_tasks', task='', with_steps=False)
    client = h.client.create_client(SetBool, h.names.proxy(h.names.gripper))
    assert wait_for_service_matched(h.client, client, f'/{h.names.node}', 15.0)
    response = h.wait(client.call_async(SetBool.Request(data=True)))
    assert response.success and response.message == 'closed'
    assert h.robot.gripper_requests[-1] is True
    after = h.call(ListTasks, 'list_tasks', task='', with_steps=False)
    assert [t.id for t in after.trajectories] == [t.id for t in before.trajectories]
    assert not after.trajectories


def test_action_client_keeps_no_future_per_goal(world):
    """
    Check that the project's action client keeps no future per goal (rclpy 9.1.2's leaks one).

    rclpy 9.1.2 leaks a future per goal into the client's list (ros2/rclpy#1532).
    The executor walks that list whenever the client has data, so the proxy,
    which sends every goal of every task, would slow down with each one. The
    project's client drops the orphan; results still arrive.
    """
    h = world
    client = FixedActionClient(h.client, Fibonacci, h.names.fib)
    assert client.wait_for_server(timeout_sec=15.0)
    for order in range(1, 41):
        handle = h.wait(client.send_goal_async(Fibonacci.Goal(order=order)))
        wrapped = h.result(handle)
        assert wrapped.status == GoalStatus.STATUS_SUCCEEDED
        assert len(wrapped.result.sequence) == order + 1
    assert wait_until(lambda: len(client._futures) <= 1, timeout=5.0), len(client._futures)


class _SlowDict(dict):
    """The client's feedback-callback table, slow to write: it widens rclpy's race window."""

    def __setitem__(self, key, value):
        time.sleep(0.5)  # rclpy 9.1.2 writes it between its two registrations of a goal
        super().__setitem__(key, value)


@pytest.mark.parametrize('client_type, completes', [(FixedActionClient, True),
                                                    (ActionClient, False)],
                         ids=['project', 'rclpy'])
def test_a_goal_response_that_comes_at_once_completes_the_returned_future(
        world, client_type, completes):
    """
    Check that a goal whose response arrives while it is being sent is not lost.

    rclpy 9.1.2 registers a first future for a goal under the client's lock and the
    one it returns after the lock is released; a response handled in between completes
    the first, and the returned one never completes (a replayed step then hangs for its
    timeout). The client here takes half a second between the two registrations (its
    feedback table is slow to write), so the response always comes in between: the
    project's client registers once, under the lock, and its future completes; rclpy's
    does not (the second case pins that the fault is real, so the first one means
    something; it fails once rclpy is fixed, and can then go).
    """
    h = world
    # Made on a node nothing spins yet: rclpy's client registered with a spinning node can
    # kill the executor thread that wakes meanwhile (the next test's), see the test below.
    # Neither is destroyed before the harness is: an executor thread may still hold it.
    node = Node(f'goal_race_{uuid.uuid4().hex[:8]}', context=h.context)
    client = client_type(node, Fibonacci, h.names.fib)
    h.extra_nodes.append(node)
    h.executor.add_node(node)
    assert client.wait_for_server(timeout_sec=15.0)
    client._feedback_callbacks = _SlowDict()
    future = client.send_goal_async(Fibonacci.Goal(order=3), feedback_callback=lambda _m: None)
    assert wait_until(future.done, timeout=5.0) is completes
    if completes:
        assert future.result().accepted
    assert not h.spin_error, h.spin_error


@pytest.mark.parametrize('client_type', [FixedActionClient, ActionClient],
                         ids=['project', 'rclpy'])
def test_action_client_can_be_created_while_its_node_spins(client_type):
    """
    Check that a client registered with a spinning node is usable at once.

    rclpy 9.1.2 registers a new ActionClient with its node before it creates
    the client's lock; an executor thread that wakes in between calls the
    client's ``add_to_wait_set`` and dies with AttributeError. The node here
    does what that executor thread does, right at registration, so the window
    is hit every time: the project's client survives it, rclpy's does not
    (the second case pins that the fault is real, so the first one means
    something; it fails once rclpy is fixed, and can then go).
    """
    seen = []

    class EagerNode(Node):

        def add_waitable(self, waitable):
            super().add_waitable(waitable)
            if not isinstance(waitable, ActionClient):
                return
            try:
                waitable.get_num_entities()
                seen.append('ok')
            except AttributeError as err:
                seen.append(str(err))

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = EagerNode(f'eager_{uuid.uuid4().hex[:8]}', context=context)
        client = client_type(node, Fibonacci, 'fib_nobody')
        client.destroy()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    if client_type is FixedActionClient:
        assert seen == ['ok']
    else:
        assert len(seen) == 1 and '_lock' in seen[0]


def test_goal_without_result_within_step_timeout_is_aborted_and_canceled(world):
    """A server that keeps a goal longer than ``step_timeout`` (5 s here): the proxy gives up."""
    h = world
    client = proxy_client(h, FollowJointTrajectory, h.names.arm)
    h.robot.arm_delay = 30.0
    canceled = h.robot.arm_canceled
    handle = h.wait(client.send_goal_async(arm_goal([0.3, 0.3, 0.3])))
    assert handle.accepted
    wrapped = h.result(handle, 25.0)
    assert wrapped.status == GoalStatus.STATUS_ABORTED
    assert 'within 5 s (step_timeout)' in wrapped.result.error_string
    assert wait_until(lambda: h.robot.arm_canceled == canceled + 1)  # the real goal too
