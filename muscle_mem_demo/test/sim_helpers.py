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
Helpers for the sim tests: the sim robot and demo agent as real processes, a client node.

Every process runs in a unique namespace (the nodes use relative names), so tests on the same
ROS_DOMAIN_ID cannot see each other's topics. Processes are stopped by their own PID only.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
import os
from pathlib import Path
import signal
import subprocess
import sys
import threading
import time
from typing import Any
import uuid

from builtin_interfaces.msg import Duration
from geometry_msgs.msg import PoseStamped
from muscle_mem_demo_interfaces.action import FollowJointTrajectory, GripperCommand, MoveToPose
from muscle_mem_demo_interfaces.srv import MoveObject
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.matching import wait_for_action_matched
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint


def namespaced_sensors(params: dict[str, Any], namespace: str) -> None:
    """
    Put a cache's topic sensors in ``namespace``, in place (its TF sensors read /tf).

    A TF sensor has no topic: the cache reads ``/tf`` and ``/tf_static``, which the namespaced
    robot publishes as ``<namespace>/tf``; :func:`tf_remaps` points the cache there.
    """
    for sensor in params['sensors'].values():
        if 'topic' in sensor:
            sensor['topic'] = namespace + sensor['topic']


def tf_remaps(namespace: str) -> list[str]:
    """Return the ros args that point a cache's ``/tf`` and ``/tf_static`` into ``namespace``."""
    return ['-r', f'/tf:={namespace}/tf', '-r', f'/tf_static:={namespace}/tf_static']


def unique_namespace() -> str:
    return '/t' + uuid.uuid4().hex[:8]


class FeedbackClient(ActionClient):
    """
    An action client that hands over a goal's feedback even when it comes after the result.

    Feedback travels on a topic and the result on a service, so the last feedback can
    arrive second, and rclpy's client then drops it (it forgets a goal's feedback callback
    when the result arrives). The tests' servers match the feedback reader before a goal
    is sent (:func:`~muscle_mem_ros.ros.rclfix.matching.wait_for_action_matched`) and publish it
    reliably, so every message arrives; this keeps it from being dropped on the way in.
    Its reader keeps up to 1000 messages (rclpy's default is 10), so feedback that
    arrives while the test's executor is busy is not pushed out before it is taken.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault('feedback_sub_qos_profile', QoSProfile(depth=1000))
        super().__init__(*args, **kwargs)

    def _remove_pending_result_request(self, future: Any) -> None:
        seq = self._remove_pending_request(future, self._pending_result_requests)
        self._result_sequence_number_to_goal_id.pop(seq, None)  # the callback stays


class NodeProcess:
    """One node as ``python -m <module> --ros-args ...`` with its output in a log file."""

    def __init__(self, module: str, *, namespace: str, params: dict[str, Any],
                 log_dir: Path, ros_args: Sequence[str] = ()) -> None:
        args = [sys.executable, '-m', module, '--ros-args', '-r', f'__ns:={namespace}',
                *ros_args]
        for key, value in params.items():
            args += ['-p', f'{key}:={value}']
        self.log_path = log_dir / f'{module.rsplit(".", 1)[-1]}_{uuid.uuid4().hex[:6]}.log'
        self._log = open(self.log_path, 'wb')  # noqa: SIM115
        self.process = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT,
                                        env=dict(os.environ, PYTHONUNBUFFERED='1'))

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors='replace')

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


class SimClient(Node):
    """Talks to one namespaced sim robot (and agent), spinning in its own thread."""

    def __init__(self, namespace: str) -> None:
        super().__init__('sim_test_client_' + uuid.uuid4().hex[:6])
        ns = self._ns = namespace
        group = ReentrantCallbackGroup()
        self.lock = threading.Lock()
        self.joint_msgs: list[JointState] = []
        self.object_msgs: list[PoseStamped] = []
        self.ee_msgs: list[PoseStamped] = []
        self.calls: list[str] = []
        self.arm = FeedbackClient(self, FollowJointTrajectory,
                                  f'{ns}/arm/follow_joint_trajectory', callback_group=group)
        self.move_to_pose = FeedbackClient(self, MoveToPose, f'{ns}/arm/move_to_pose',
                                           callback_group=group)
        self.agent = FeedbackClient(self, ExecuteTask, f'{ns}/demo_agent/execute_task',
                                    callback_group=group)
        self.gripper = self.create_client(SetBool, f'{ns}/gripper/set', callback_group=group)
        self.gripper_cmd = FeedbackClient(self, GripperCommand, f'{ns}/gripper/gripper_cmd',
                                          callback_group=group)
        self.reset_client = self.create_client(Trigger, f'{ns}/sim_robot/reset',
                                               callback_group=group)
        self.move_client = self.create_client(MoveObject, f'{ns}/sim_robot/move_object',
                                              callback_group=group)
        self.create_subscription(JointState, f'{ns}/joint_states', self._on_joints, 50,
                                 callback_group=group)
        self.create_subscription(PoseStamped, f'{ns}/object_pose', self._on_object, 50,
                                 callback_group=group)
        self.create_subscription(PoseStamped, f'{ns}/ee_pose', self._on_ee, 50,
                                 callback_group=group)
        self.create_subscription(String, f'{ns}/demo_agent/calls', self._on_call, 10,
                                 callback_group=group)
        self._executor = MultiThreadedExecutor(num_threads=3)
        self._executor.add_node(self)
        self._spinner = Spinner(self._executor)

    def close(self) -> None:
        self._spinner.stop(2.0)
        self.destroy_node()

    def _on_joints(self, msg: JointState) -> None:
        with self.lock:
            self.joint_msgs.append(msg)
            del self.joint_msgs[:-500]

    def _on_object(self, msg: PoseStamped) -> None:
        with self.lock:
            self.object_msgs.append(msg)
            del self.object_msgs[:-200]

    def _on_ee(self, msg: PoseStamped) -> None:
        with self.lock:
            self.ee_msgs.append(msg)
            del self.ee_msgs[:-500]

    def _on_call(self, msg: String) -> None:
        with self.lock:
            self.calls.append(msg.data)

    # -- waiting ---------------------------------------------------------------------------

    def wait_for(self, predicate, timeout: float = 20.0, what: str = 'condition') -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f'timed out waiting for {what}')
            time.sleep(0.02)

    def wait_feedback(self, feedback: list, until, what: str, timeout: float = 10.0) -> list:
        """
        Return a copy of ``feedback`` once ``until(copy)`` holds (bounded).

        Feedback travels on a topic, the result on a service: the last feedback messages
        may arrive after the result, so a test that asserts on feedback after a result
        waits here for what it needs.
        """
        self.wait_for(lambda: until(list(feedback)), timeout, what)
        return list(feedback)

    def wait_robot(self, timeout: float = 30.0) -> None:
        self.wait_for(lambda: self.arm.server_is_ready() and self.gripper.service_is_ready()
                      and self.reset_client.service_is_ready()
                      and self.move_client.service_is_ready()
                      and bool(self.joint_msgs) and bool(self.object_msgs),
                      timeout, 'the sim robot')
        for action in (self.arm, self.move_to_pose):
            assert wait_for_action_matched(self, action, f'{self._ns}/sim_robot', timeout), \
                'the sim robot did not match the feedback readers of the arm clients'

    def wait_agent(self, timeout: float = 30.0) -> None:
        self.wait_for(lambda: self.agent.server_is_ready()
                      and self.count_publishers(self._calls_topic()) > 0,
                      timeout, 'the demo agent')
        assert wait_for_action_matched(self, self.agent, f'{self._ns}/demo_agent', timeout), \
            'the demo agent did not match the feedback reader of the ExecuteTask client'

    def _calls_topic(self) -> str:
        for sub in self.subscriptions:
            if sub.topic_name.endswith('/demo_agent/calls'):
                return sub.topic_name
        raise AssertionError('no calls subscription')

    @staticmethod
    def result_of(future, timeout: float = 30.0) -> Any:
        event = threading.Event()
        future.add_done_callback(lambda _f: event.set())
        assert event.wait(timeout), 'timed out waiting for a future'
        return future.result()

    def call(self, client, request, timeout: float = 10.0) -> Any:
        assert client.wait_for_service(timeout_sec=timeout)
        return self.result_of(client.call_async(request), timeout)

    # -- actions ---------------------------------------------------------------------------

    def send_trajectory(self, names: Sequence[str], positions: Sequence[Sequence[float]],
                        times: Sequence[float], *, feedback: list | None = None,
                        timeout: float = 30.0, goal: Any = None) -> tuple[int, Any]:
        goal = goal if goal is not None else FollowJointTrajectory.Goal()
        goal.trajectory = JointTrajectory()
        goal.trajectory.joint_names = list(names)
        for row, t in zip(positions, times, strict=True):
            point = JointTrajectoryPoint()
            point.positions = [float(v) for v in row]
            point.time_from_start = Duration(sec=int(t), nanosec=int((t - int(t)) * 1e9))
            goal.trajectory.points.append(point)
        callback = (lambda fb: feedback.append(fb.feedback)) if feedback is not None else None
        handle = self.result_of(self.arm.send_goal_async(goal, feedback_callback=callback))
        assert handle.accepted
        response = self.result_of(handle.get_result_async(), timeout)
        return response.status, response.result

    def send_move_to_pose(self, position: Sequence[float], *, frame_id: str = 'world',
                          orientation: Sequence[float] = (0.0, 0.0, 0.0, 1.0),
                          duration: float = 0.0, feedback: list | None = None,
                          timeout: float = 30.0) -> tuple[int, Any]:
        goal = MoveToPose.Goal()
        goal.target.header.frame_id = frame_id
        goal.target.pose.position.x, goal.target.pose.position.y, goal.target.pose.position.z = (
            float(v) for v in position)
        q = goal.target.pose.orientation
        q.x, q.y, q.z, q.w = (float(v) for v in orientation)
        goal.duration = Duration(sec=int(duration), nanosec=int((duration % 1) * 1e9))
        callback = (lambda fb: feedback.append(fb.feedback)) if feedback is not None else None
        assert self.move_to_pose.wait_for_server(timeout_sec=timeout)
        handle = self.result_of(self.move_to_pose.send_goal_async(goal,
                                                                  feedback_callback=callback))
        assert handle.accepted
        response = self.result_of(handle.get_result_async(), timeout)
        return response.status, response.result

    def send_gripper(self, position: float, *, max_effort: float = 0.0,
                     feedback: list | None = None, timeout: float = 30.0) -> tuple[int, Any]:
        goal = GripperCommand.Goal()
        goal.command.position = float(position)
        goal.command.max_effort = float(max_effort)
        callback = (lambda fb: feedback.append(fb.feedback)) if feedback is not None else None
        assert self.gripper_cmd.wait_for_server(timeout_sec=timeout)
        handle = self.result_of(self.gripper_cmd.send_goal_async(goal,
                                                                 feedback_callback=callback))
        assert handle.accepted
        response = self.result_of(handle.get_result_async(), timeout)
        return response.status, response.result

    def run_task(self, task: str = 'pick_and_place', *, params_json: str = '',
                 resume_from_step: int = 0, feedback: list | None = None,
                 timeout: float = 60.0) -> Any:
        goal = ExecuteTask.Goal(task=task, params_json=params_json,
                                resume_from_step=resume_from_step)
        callback = (lambda fb: feedback.append(fb.feedback)) if feedback is not None else None
        handle = self.result_of(self.agent.send_goal_async(goal, feedback_callback=callback))
        assert handle.accepted
        return self.result_of(handle.get_result_async(), timeout).result

    def reset(self) -> None:
        assert self.call(self.reset_client, Trigger.Request()).success
        self.wait_fresh()

    def move_object(self, position: Sequence[float], *, after_goals: int = 0,
                    orientation: Sequence[float] = (0.0, 0.0, 0.0, 1.0)) -> Any:
        request = MoveObject.Request(after_goals=after_goals)
        request.pose.position.x, request.pose.position.y, request.pose.position.z = position
        o = request.pose.orientation
        o.x, o.y, o.z, o.w = orientation
        return self.call(self.move_client, request)

    # -- observations ----------------------------------------------------------------------

    def now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def wait_fresh(self, after_ns: int | None = None) -> tuple[JointState, PoseStamped]:
        after = self.now_ns() if after_ns is None else after_ns

        def fresh() -> bool:
            with self.lock:
                return (bool(self.joint_msgs) and _ns(self.joint_msgs[-1]) > after
                        and bool(self.object_msgs) and _ns(self.object_msgs[-1]) > after)

        self.wait_for(fresh, 10.0, 'fresh sensor data')
        with self.lock:
            return self.joint_msgs[-1], self.object_msgs[-1]

    def object_position(self, after_ns: int | None = None) -> tuple[float, float, float]:
        _, obj = self.wait_fresh(after_ns)
        p = obj.pose.position
        return (p.x, p.y, p.z)

    def object_yaw(self, after_ns: int | None = None) -> float:
        """Return the cube's turn about the world z axis, radians (its /object_pose)."""
        _, obj = self.wait_fresh(after_ns)
        q = obj.pose.orientation
        return 2.0 * math.atan2(q.z, q.w)


def assert_bad_parameter(module: str, param: str, value: str) -> None:
    """
    Start ``module`` with one bad parameter: it must exit 1 and name the parameter.

    Once in a fresh-clone CI run under load the exit code was not 1, and the old
    assertion did not say what it was. A process killed by a signal (a negative
    code: a crash in teardown, not the validation under test) is started once
    more; every attempt's code and output are shown if none exits 1.
    """
    runs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, '-m', module, '--ros-args',
             '-r', f'__ns:={unique_namespace()}', '-p', f'{param}:={value}'],
            capture_output=True, text=True, timeout=60)
        runs.append(proc)
        if proc.returncode >= 0:
            break
    shown = '\n---\n'.join(f'exit {p.returncode}\n{p.stdout}{p.stderr}' for p in runs)
    assert proc.returncode == 1, shown
    assert f"'{param}'" in proc.stdout + proc.stderr, shown


def _ns(msg: Any) -> int:
    stamp = msg.header.stamp
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def ros_init() -> None:
    if not rclpy.ok():
        rclpy.init()
