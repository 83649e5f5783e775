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
ROS 2 node ``sim_robot``: the MuJoCo demo arm behind ordinary robot interfaces.

The arm is a real model, the Franka Emika Panda (``arm`` parameter; :mod:`arms`), whose MJCF
is published once on ``robot_description`` (std_msgs/String, transient local, as
robot_state_publisher publishes a URDF: a late subscriber gets it), model name ``panda``.
Publishes ``joint_states`` (sensor_msgs/JointState, 120 Hz by default), ``ee_pose``
(geometry_msgs/PoseStamped of the grasp point between the jaws, from the published joint
positions through the forward kinematics, its orientation the hand's turn from gripper down
(:mod:`.gripper_yaw`), with each joint state's stamp) and ``object_pose``
(geometry_msgs/PoseStamped, 30 Hz) from the physics state, and its frames on ``tf`` and
``tf_static`` (tf2_msgs/TFMessage; :mod:`.tf_frames`, :mod:`.tf_feed`): the arm's links
``world -> panda_link0 -> ... -> panda_link7 -> panda_hand -> panda_hand_tcp`` (and the
fingers) with each joint state, as robot_state_publisher would; the camera
(``world -> camera -> workspace_camera``) once, static; the cube as a tag detector sees it,
``workspace_camera -> cube`` with each object pose, with noise (``cube_tf_noise``,
``cube_tf_yaw_noise``; ``object_pose`` keeps its own, ``object_noise``). Serves the
joint-trajectory action ``arm/follow_joint_trajectory``
(muscle_mem_demo_interfaces/action/FollowJointTrajectory, which mirrors control_msgs', served
as joint_trajectory_controller serves it: it rejects the goals the real controller rejects
(:mod:`.controller_rules`: no joint names, no points, a joint it does not have, points of the
wrong size, ...), a new goal preempts the one running; ``trajectory``; per-joint ``path_tolerance``
positions, a joint leaving its tolerance while the trajectory runs aborts the goal with
PATH_TOLERANCE_VIOLATED and an error_string naming the joint, the arm holding where it is;
per-joint ``goal_tolerance`` positions checked by the last waypoint's time plus
``goal_time_tolerance``, else GOAL_TOLERANCE_VIOLATED naming the joint; feedback with desired,
actual and error; a ``multi_dof_trajectory`` is refused), the Cartesian move
``arm/move_to_pose`` (muscle_mem_demo_interfaces/action/MoveToPose: the grasp point to a
position, gripper down and turned by the goal's yaw about the world z axis, through
damped-least-squares inverse kinematics on the model; a tilted orientation is INVALID_GOAL
saying the tilt, a yaw beyond ``panda_joint7``'s limits is reached 180 degrees apart (the
fingers are symmetric), a pose out of reach is UNREACHABLE with the reason), the gripper
action ``gripper/gripper_cmd``
(muscle_mem_demo_interfaces/action/GripperCommand, which mirrors control_msgs', served as
gripper_action_controller with allow_stalling serves it: jaws closing on the cube stop
against it and the goal SUCCEEDS with stalled true and reached_goal false; feedback and
result say position, effort, stalled, reached_goal), the older gripper service ``gripper/set``
(std_srvs/srv/SetBool, true closes), and for demos and tests ``~/move_object``
(muscle_mem_demo_interfaces/srv/MoveObject: the cube to a pose, turned by its orientation),
``~/move_distractor`` (MoveObject too: the
pose only, now; puts the camera's distractor, a magenta 6 cm box parked out of sight
(:mod:`.distractor`), at a position, from where it falls: dropped over the table it lands
on it) and ``~/reset`` (std_srvs/srv/Trigger; it parks the distractor again). A
MoveObject with a delay knocks the cube during the next arm goal; when that goal ends the
node publishes on ``~/knocks`` (muscle_mem_demo_interfaces/msg/Knock) when the knock and the
goal's cancel happened (monotonic clock, comparable across processes of the machine) and
where the grasp point was: the reaction time of whoever watches the world.

With ``camera_rate`` > 0 it publishes the workspace camera (:mod:`.camera`, 1.1 m over the
table looking down) on ``camera/image_raw`` (sensor_msgs/Image, rgb8, frame
``workspace_camera``) and ``camera/camera_info`` (sensor_msgs/CameraInfo, same stamp: the
pinhole K and P, ``plumb_bob`` with zero distortion), rendered from the simulation's state
in a thread of its own (:mod:`.camera_feed`), stamped when the state was copied; a camera
that cannot keep its rate publishes as fast as it renders and says so once. Rendering needs
an OpenGL backend (``MUJOCO_GL=egl``, Mesa on the CPU, set by this package unless set):
without one the node exits at start, the one line of its log saying which ``MUJOCO_GL`` to
set. All names are relative, so namespaces and remapping apply.

A goal's stop has a real controller's manners, chosen by ``cancel_manners``:

* ``brake`` (the default, as joint_trajectory_controller stops a canceled goal): the cancel
  is accepted, the arm decelerates evenly from its commanded velocity to rest over
  ``brake_time`` simulated seconds, then the goal is CANCELED and the arm holds there;
* ``accept``: the cancel is accepted and the arm holds where it is at once (no deceleration);
* ``refuse``: rclpy's default cancel callback, the cancel is rejected and the motion runs on.

Whatever the manners, a hold stops the arm where it is and holds it. On the trajectory action
it is what a real joint_trajectory_controller executes: a one-point trajectory to where the
joints are (the behavior cache's default stop of a FollowJointTrajectory tool), which preempts
the goal in progress (ABORTED, 'preempted by a newer goal'); the empty trajectory of ROS 1 is
rejected, as the real controller rejects it. On MoveToPose, the demo's own action, it is the
all-zero goal (frame '', position (0, 0, 0), which no move can reach: it is inside the arm's
base; duration 0; ``{}`` as JSON: the cache's ``actions.<tool>.stop_goal``), and the goal in
progress ends ABORTED, 'preempted by a hold'.

Every goal is reported when its execution ends on ``~/goals`` (std_msgs/String, JSON: action,
goal_id, hold (a hold: :func:`.controller_rules.is_hold`, or the all-zero MoveToPose),
started and ended (monotonic seconds of the machine), status, cancel ('' | 'accepted' |
'refused'), cancel_at (monotonic, or null), error_code and error_string
(of an arm goal's result; null and '' for the gripper), and ``overlaps``: the goal ids of
motions still executing when this motion started: two motions at once).

Parameters: ``arm`` ('panda'), ``rtf`` (real-time factor, 1.0), ``joint_state_rate`` (Hz, 120.0),
``object_pose_rate`` (Hz, 30.0), ``joint_noise`` (rad, standard deviation, 0.0),
``object_noise`` (m, 0.0), ``cube_tf_noise`` (m, 0.001: the cube on ``tf``, per axis),
``cube_tf_yaw_noise`` (rad, 0.0087: 0.5 degree), ``noise_seed`` (0), ``frame_id`` ('world'),
``cancel_manners`` ('brake', 'accept' or 'refuse'), ``brake_time`` (s, 0.2),
``servo_scale`` (1.0, may be set while running: the arm servos' stiffness, below 1 a weaker
arm that lags its path, for tests of path tolerances), ``camera_rate`` (Hz, 0.0: no camera,
nothing rendered and no OpenGL needed), ``camera_width`` (pixels, 320), ``camera_height``
(pixels, 240), ``camera_noise`` (pixel noise, standard deviation in grey levels 0-255, 2.0;
seeded by ``noise_seed``; may be set while running, from the next frame on). A 320 x 240
frame with the default noise costs about 18 ms (16 without noise; 640 x 480: 35 ms, 25
without), measured on one core of a busy 2-core AMD EPYC
with Mesa's EGL on the CPU: a camera of 10 to 30 Hz is one the demo keeps beside its physics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import json
import math
import sys
import threading
import time
from typing import TypeVar

from action_msgs.msg import GoalStatus
from geometry_msgs.msg import Point, PoseStamped
from muscle_mem_demo import arms, controller_rules, gripper_yaw, kinematics
from muscle_mem_demo.camera import CameraError
from muscle_mem_demo.camera_feed import CameraFeed, read_camera_parameters
from muscle_mem_demo.motion import Motion, MotionOutcome
from muscle_mem_demo.params import declare_int, declare_number, declare_string, spin_node
from muscle_mem_demo.physics import ArmSim
from muscle_mem_demo.tf_feed import TfFeed
from muscle_mem_demo.tf_frames import ArmFrames, CameraFrames
from muscle_mem_demo.trajectory import JointPath
from muscle_mem_demo_interfaces.action import FollowJointTrajectory, GripperCommand, MoveToPose
from muscle_mem_demo_interfaces.msg import Knock
from muscle_mem_demo_interfaces.srv import MoveObject
import numpy as np
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import SetBool, Trigger

__all__ = ['SimRobotNode', 'main']

_FEEDBACK_PERIOD = 0.05
_DEFAULT_MOVE_TIME = 1.0
"""Seconds a MoveToPose goal takes when it gives no duration."""
CUBE_TF_NOISE = 0.001
"""Default standard deviation of the cube's detected position on ``tf``, per axis, metres."""
CUBE_TF_YAW_NOISE = math.radians(0.5)
"""Default standard deviation of the cube's detected yaw on ``tf``, radians."""
MANNERS = ('accept', 'refuse', 'brake')
"""How the arm's action servers answer a cancel (``cancel_manners``, module docstring)."""


class SimRobotNode(Node):
    """The simulated arm as a ROS node; owns an :class:`ArmSim` running in its own thread."""

    def __init__(self, *, node_name: str = 'sim_robot', **kwargs: object) -> None:
        """
        Declare and check parameters, start the physics and the publishing threads.

        :raises ValueError: a parameter is out of range; the message names it.
        """
        super().__init__(node_name, **kwargs)
        arm = declare_string(self, 'arm', 'panda')
        if arm not in arms.ARMS:
            raise ValueError(f"parameter 'arm': {arm!r} is not one of {sorted(arms.ARMS)}")
        rtf = declare_number(self, 'rtf', 1.0, minimum=0.0, exclusive=True)
        self._joint_rate = declare_number(self, 'joint_state_rate', 120.0, minimum=0.0,
                                          exclusive=True)
        self._object_rate = declare_number(self, 'object_pose_rate', 30.0, minimum=0.0,
                                           exclusive=True)
        self._joint_noise = declare_number(self, 'joint_noise', 0.0, minimum=0.0)
        self._object_noise = declare_number(self, 'object_noise', 0.0, minimum=0.0)
        cube_noise = declare_number(self, 'cube_tf_noise', CUBE_TF_NOISE, minimum=0.0)
        cube_yaw_noise = declare_number(self, 'cube_tf_yaw_noise', CUBE_TF_YAW_NOISE,
                                        minimum=0.0)
        seed = declare_int(self, 'noise_seed', 0, minimum=0)
        self._frame_id = declare_string(self, 'frame_id', 'world')
        self._manners = declare_string(self, 'cancel_manners', 'brake')
        if self._manners not in MANNERS:
            raise ValueError(f"parameter 'cancel_manners': {self._manners!r} is not one of "
                             f'{list(MANNERS)}')
        self._brake_time = declare_number(self, 'brake_time', 0.2, minimum=0.0, exclusive=True)
        camera = read_camera_parameters(self)
        self._rng = np.random.default_rng(seed)
        self._sim = ArmSim(arm=arm, rtf=rtf)
        scale = self.declare_parameter('servo_scale', 1.0, ParameterDescriptor(
            description='stiffness of the arm servos (kp times this); below 1 a weaker arm '
                        'that lags its path; may be set while running',
            floating_point_range=[FloatingPointRange(from_value=0.01, to_value=10.0)])).value
        try:
            self._sim.set_servo_scale(float(scale))
        except (TypeError, ValueError) as err:
            raise ValueError(f"parameter 'servo_scale': {err}") from err
        self.add_on_set_parameters_callback(self._on_parameters)
        self._kin = kinematics.for_arm(arm)
        group = ReentrantCallbackGroup()
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._description_pub = self.create_publisher(String, 'robot_description', latched)
        self._description_pub.publish(String(data=arms.description(arm)))
        self._joint_pub = self.create_publisher(JointState, 'joint_states', 10)
        self._ee_pub = self.create_publisher(PoseStamped, 'ee_pose', 10)
        self._object_pub = self.create_publisher(PoseStamped, 'object_pose', 10)
        self._knock_pub = self.create_publisher(Knock, '~/knocks', 10)
        # its own generator: the cube's detection noise leaves the other sensors' draws as
        # they were before /tf
        self._tf = TfFeed(node=self, arm=ArmFrames(arm=arm, world=self._frame_id),
                          camera=CameraFrames(model=self._sim.model, world=self._frame_id),
                          rng=np.random.default_rng((seed, 45)), noise=cube_noise,
                          yaw_noise=cube_yaw_noise)
        self._cancels: dict[bytes, tuple[float, tuple[float, ...]]] = {}
        self._goals_pub = self.create_publisher(String, '~/goals', 50)
        self._executing: dict[bytes, dict[str, object]] = {}
        self._goals_lock = threading.Lock()
        self._publish_lock = threading.Lock()
        self._action = ActionServer(
            self,
            FollowJointTrajectory,
            'arm/follow_joint_trajectory',
            execute_callback=lambda handle: self._timed(handle, 'follow_joint_trajectory',
                                                        self._execute),
            goal_callback=self._on_trajectory,
            cancel_callback=self._on_cancel,
            callback_group=group,
        )
        self._move_action = ActionServer(
            self,
            MoveToPose,
            'arm/move_to_pose',
            execute_callback=lambda handle: self._timed(handle, 'move_to_pose',
                                                        self._execute_move),
            goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=self._on_cancel,
            callback_group=group,
        )
        self._gripper_action = ActionServer(
            self,
            GripperCommand,
            'gripper/gripper_cmd',
            execute_callback=lambda handle: self._timed(handle, 'gripper_cmd',
                                                        self._execute_gripper),
            goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=group,
        )
        self.create_service(SetBool, 'gripper/set', self._on_gripper, callback_group=group)
        self.create_service(MoveObject, '~/move_object', self._on_move, callback_group=group)
        self.create_service(MoveObject, '~/move_distractor', self._on_move_distractor,
                            callback_group=group)
        self.create_service(Trigger, '~/reset', self._on_reset, callback_group=group)
        self._camera: CameraFeed | None = None
        if camera.rate > 0.0:
            try:
                self._camera = CameraFeed(node=self, sim=self._sim, settings=camera, seed=seed)
            except CameraError as err:  # the one line main logs before exiting 1
                raise ValueError(f'{err}; or camera_rate 0: no camera') from err
        self._stop = threading.Event()
        self._sim.start()
        self._publisher = threading.Thread(target=self._publish_loop, daemon=True)
        self._publisher.start()
        self.get_logger().info(
            f'sim robot up: {arm}, rtf {rtf}, joint_states {self._joint_rate} Hz, '
            f'object_pose {self._object_rate} Hz, camera '
            + (f'{camera.rate:g} Hz {camera.width}x{camera.height}' if camera.rate > 0.0
               else 'off')
        )

    def _on_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Apply a new ``servo_scale`` or ``camera_noise``; the others are read at start."""
        for param in params:
            camera = getattr(self, '_camera', None)  # set after this callback is added
            if param.name == 'camera_noise' and camera is not None:
                try:
                    camera.set_noise(float(param.value))
                except (TypeError, ValueError) as err:
                    return SetParametersResult(successful=False, reason=str(err))
                self.get_logger().info(f'camera_noise now {param.value}')
            if param.name != 'servo_scale':
                continue
            try:
                self._sim.set_servo_scale(float(param.value))
            except (TypeError, ValueError) as err:
                return SetParametersResult(successful=False, reason=str(err))
            self.get_logger().info(f'servo_scale now {param.value}')
        return SetParametersResult(successful=True)

    @property
    def sim(self) -> ArmSim:
        """Return the simulation behind the node."""
        return self._sim

    def shutdown(self) -> None:
        """
        End running goals, then stop the publishing and physics threads.

        Called after a shutdown signal and before the node is destroyed: a goal in
        progress is aborted ('shutting down') and nothing publishes afterwards.
        """
        self._stop.set()
        self._publisher.join(timeout=2.0)
        if self._camera is not None:
            self._camera.stop()
        self._sim.stop()

    # -- publishing -------------------------------------------------------------------------

    def _publish_loop(self) -> None:
        period = 1.0 / self._joint_rate
        object_every = 1.0 / self._object_rate
        next_joint = time.monotonic()
        next_object = next_joint
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_joint:
                self._publish_joints()
                next_joint = max(next_joint + period, now - period)
            if now >= next_object:
                self._publish_object()
                next_object = max(next_object + object_every, now - object_every)
            time.sleep(max(0.0, min(next_joint, next_object) - time.monotonic()))

    def _publish_joints(self) -> None:
        msg = JointState()
        msg.header.frame_id = self._frame_id
        with self._publish_lock:
            # read, stamp and publish together: a message never carries an older state than
            # one published before it, on either topic
            state = self._sim.state()
            positions = np.array(state.positions)
            if self._joint_noise > 0.0:
                positions = positions + self._rng.normal(0.0, self._joint_noise, positions.shape)
            msg.name = list(state.joint_names)
            msg.position = [float(v) for v in positions]
            msg.velocity = list(state.velocities)
            msg.header.stamp = self.get_clock().now().to_msg()
            self._joint_pub.publish(msg)
            self._ee_pub.publish(self._ee_pose(positions, msg.header.stamp))
            self._tf.publish_links(positions, msg.header.stamp)

    def _ee_pose(self, positions: Sequence[float], stamp: object) -> PoseStamped:
        """
        Return the grasp pose of arm joint ``positions`` as a PoseStamped.

        Its orientation is the hand's turn from gripper down (:mod:`.gripper_yaw`), what a
        MoveToPose goal gives.
        """
        arm = positions[:len(self._kin.joint_names)]
        point = self._kin.forward(arm)
        ee = PoseStamped()
        ee.header.frame_id = self._frame_id
        ee.header.stamp = stamp
        ee.pose.position.x, ee.pose.position.y, ee.pose.position.z = point.x, point.y, point.z
        q = ee.pose.orientation
        q.x, q.y, q.z, q.w = self._kin.orientation(arm)
        return ee

    def _publish_object(self) -> None:
        msg = PoseStamped()
        msg.header.frame_id = self._frame_id
        with self._publish_lock:
            state = self._sim.state()
            position = np.array(state.object_position)
            if self._object_noise > 0.0:
                position = position + self._rng.normal(0.0, self._object_noise, 3)
            msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (
                float(v) for v in position
            )
            w, x, y, z = state.object_orientation
            msg.pose.orientation.w, msg.pose.orientation.x = w, x
            msg.pose.orientation.y, msg.pose.orientation.z = y, z
            msg.header.stamp = self.get_clock().now().to_msg()
            self._object_pub.publish(msg)
            self._tf.publish_cube(state.object_position, state.object_orientation,
                                  msg.header.stamp)

    # -- action and services ----------------------------------------------------------------

    def _timed(self, goal_handle: ServerGoalHandle, action: str,
               execute: Callable[[ServerGoalHandle], _R]) -> _R:
        """Run ``execute``, noting its interval and any motion it overlaps; say it on ~/goals."""
        key = bytes(goal_handle.goal_id.uuid)
        state = self._sim.state()
        hold = _is_hold(goal_handle.request, dict(zip(state.joint_names, state.positions)))
        with self._goals_lock:
            record: dict[str, object] = {
                'action': action, 'goal_id': key.hex(), 'hold': hold,
                'started': time.monotonic(), 'ended': None, 'status': '', 'cancel': '',
                'cancel_at': None,
                'overlaps': [] if hold else [r['goal_id'] for r in self._executing.values()
                                             if not r['hold']]}
            self._executing[key] = record
        if record['overlaps']:
            self.get_logger().error(f'{action} goal {key.hex()[:8]} started while '
                                    f'{record["overlaps"]} still executing: two motions')
        result: object = None
        try:
            result = execute(goal_handle)
            return result  # type: ignore[return-value]
        finally:
            with self._goals_lock:
                self._executing.pop(key, None)
                record['ended'] = time.monotonic()
                record['status'] = _OUTCOMES.get(goal_handle.status, str(goal_handle.status))
                record['error_code'] = getattr(result, 'error_code', None)
                record['error_string'] = getattr(result, 'error_string', '')
            self._goals_pub.publish(String(data=json.dumps(record)))

    def _hold(self, goal_handle: ServerGoalHandle, result: _R) -> _R:
        """Stop the trajectory in progress where it is and hold (the all-zero MoveToPose)."""
        held = self._sim.hold()
        self._publish_joints()
        result.error_code = 0  # type: ignore[attr-defined]
        result.error_string = (  # type: ignore[attr-defined]
            'holding position' + (': stopped the goal in progress' if held else ''))
        self.get_logger().info(f'hold: {result.error_string}')  # type: ignore[attr-defined]
        goal_handle.succeed()
        return result

    def _on_trajectory(self, goal: FollowJointTrajectory.Goal) -> GoalResponse:
        """Reject what joint_trajectory_controller rejects, saying why as it does."""
        why = controller_rules.rejection(goal, self._kin.joint_names)
        if why:
            self.get_logger().error(why)
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _execute(self, goal_handle: ServerGoalHandle) -> FollowJointTrajectory.Result:
        goal = goal_handle.request
        result = FollowJointTrajectory.Result()
        traj = goal.trajectory
        names = list(traj.joint_names)
        try:
            if goal.multi_dof_trajectory.joint_names or goal.multi_dof_trajectory.points:
                raise ValueError('multi_dof_trajectory: the demo arm has no multi-DOF joints')
            path = _path_from(traj)
            motion = self._sim.follow(names=names, path=path,
                                      tolerance=_goal_tolerances(goal.goal_tolerance, names),
                                      settle_time=_seconds(goal.goal_time_tolerance),
                                      path_tolerance=_goal_tolerances(goal.path_tolerance, names,
                                                                      'path_tolerance'))
        except ValueError as err:
            unknown = not names or any(n not in self._kin.joint_names for n in names)
            result.error_code = (
                FollowJointTrajectory.Result.INVALID_JOINTS
                if unknown or len(set(names)) != len(names)
                else FollowJointTrajectory.Result.INVALID_GOAL
            )
            result.error_string = str(err)
            self.get_logger().warning(f'rejected trajectory: {err}')
            goal_handle.abort()
            return result
        feedback = FollowJointTrajectory.Feedback()
        feedback.joint_names = names
        while not motion.wait(_FEEDBACK_PERIOD):
            if self._stop.is_set() or goal_handle.is_cancel_requested or (
                    not goal_handle.is_active):
                return self._reported(goal_handle, motion, self._trajectory_end(names, path), (
                    self._end_early(goal_handle, motion, result, FollowJointTrajectory.Result)))
            feedback.header.stamp = self.get_clock().now().to_msg()
            desired, actual = list(motion.desired), list(motion.actual)
            feedback.desired.positions = desired
            feedback.actual.positions = actual
            feedback.error.positions = [d - a for d, a in zip(desired, actual, strict=True)]
            goal_handle.publish_feedback(feedback)
        # a deferred object move may have happened as the motion ended: publish it first
        self._publish_object()
        self._publish_joints()
        result.error_string = motion.message
        if motion.outcome is MotionOutcome.SUCCEEDED:
            result.error_code = FollowJointTrajectory.Result.SUCCESSFUL
            goal_handle.succeed()
        elif motion.outcome is MotionOutcome.TOLERANCE_VIOLATED:
            result.error_code = FollowJointTrajectory.Result.GOAL_TOLERANCE_VIOLATED
            goal_handle.abort()
        elif motion.outcome is MotionOutcome.PATH_TOLERANCE_VIOLATED:
            result.error_code = FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED
            self.get_logger().warning(f'aborted trajectory: {motion.message}')
            goal_handle.abort()
        else:
            result.error_code = FollowJointTrajectory.Result.INVALID_GOAL
            goal_handle.abort()
        return self._reported(goal_handle, motion, self._trajectory_end(names, path), result)

    def _trajectory_end(self, names: Sequence[str], path: JointPath) -> tuple[float, ...]:
        """Return the grasp point at a trajectory's last waypoint (NaN unless all arm joints)."""
        if tuple(names) != self._kin.joint_names:
            return (math.nan,) * 3
        point = self._kin.forward(path.final)
        return (point.x, point.y, point.z)

    def _execute_gripper(self, goal_handle: ServerGoalHandle) -> GripperCommand.Result:
        """Move the jaws as gripper_action_controller does (allow_stalling: a stall succeeds)."""
        command = goal_handle.request.command
        result = GripperCommand.Result()
        try:
            motion = self._sim.set_gripper(position=float(command.position),
                                           max_effort=float(command.max_effort))
        except ValueError as err:
            self.get_logger().warning(f'rejected gripper command: {err}')
            result.position = float(np.mean(self._sim.state().positions[-2:]))
            goal_handle.abort()
            return result
        feedback = GripperCommand.Feedback()
        deadline = time.monotonic() + 10.0 / max(self._sim.rtf, 0.1) + 2.0
        while not motion.wait(_FEEDBACK_PERIOD):
            fingers = self._sim.state().positions[-2:]
            if self._stop.is_set() or goal_handle.is_cancel_requested or (
                    time.monotonic() > deadline):
                self._sim.set_gripper(position=float(np.clip(
                    np.mean(fingers), *sorted((self._sim.arm.gripper_closed,
                                               self._sim.arm.gripper_open)))))
                result.position = float(np.mean(fingers))
                if goal_handle.is_cancel_requested and not self._stop.is_set():
                    goal_handle.canceled()
                else:
                    goal_handle.abort()
                return result
            feedback.position = float(np.mean(fingers))
            goal_handle.publish_feedback(feedback)
        self._publish_joints()
        outcome = motion.gripper
        if motion.outcome is not MotionOutcome.SUCCEEDED or outcome is None:
            result.position = float(np.mean(self._sim.state().positions[-2:]))
            goal_handle.abort()
            return result
        result.position = outcome.position  # type: ignore[attr-defined]
        result.effort = outcome.effort  # type: ignore[attr-defined]
        result.stalled = outcome.stalled  # type: ignore[attr-defined]
        result.reached_goal = outcome.reached_goal  # type: ignore[attr-defined]
        goal_handle.succeed()
        return result

    def _execute_move(self, goal_handle: ServerGoalHandle) -> MoveToPose.Result:
        target = goal_handle.request.target
        result = MoveToPose.Result()
        if _is_hold(goal_handle.request, {}):
            return self._hold(goal_handle, result)
        try:
            joints = _joints_for(self._kin, target, self._frame_id)
            turn = gripper_yaw.yaw_of(self._kin.orientation(joints))
            asked = gripper_yaw.yaw_of_goal(_quaternion(target.pose.orientation))
            if abs(gripper_yaw.wrap(turn - asked)) > 0.5 * math.pi:
                self.get_logger().info(
                    f'move_to_pose: the gripper turned {math.degrees(turn):.1f} deg, 180 from '
                    f'the {math.degrees(asked):.1f} asked (beyond panda_joint7; the fingers are '
                    'symmetric)')
        except kinematics.UnreachableError as err:
            result.error_code, result.error_string = MoveToPose.Result.UNREACHABLE, str(err)
        except ValueError as err:
            result.error_code, result.error_string = MoveToPose.Result.INVALID_GOAL, str(err)
        if result.error_string:
            self.get_logger().warning(f'rejected move_to_pose: {result.error_string}')
            goal_handle.abort()
            return result
        duration = _seconds(goal_handle.request.duration) or _DEFAULT_MOVE_TIME
        try:
            motion = self._sim.follow(names=self._kin.joint_names,
                                      path=JointPath(times=[duration], positions=[joints]))
        except ValueError as err:
            result.error_code = MoveToPose.Result.INVALID_GOAL
            result.error_string = f'duration {duration} s: {err}'
            goal_handle.abort()
            return result
        feedback = MoveToPose.Feedback()
        feedback.current.header.frame_id = self._frame_id
        while not motion.wait(_FEEDBACK_PERIOD):
            if self._stop.is_set() or goal_handle.is_cancel_requested or (
                    not goal_handle.is_active):
                return self._reported(goal_handle, motion, _point(target.pose.position), (
                    self._end_early(goal_handle, motion, result, MoveToPose.Result)))
            feedback.current = self._ee_pose(motion.actual, self.get_clock().now().to_msg())
            goal_handle.publish_feedback(feedback)
        self._publish_object()
        self._publish_joints()
        result.error_string = motion.message
        if motion.outcome is MotionOutcome.SUCCEEDED:
            result.error_code = MoveToPose.Result.SUCCESSFUL
            goal_handle.succeed()
        else:
            result.error_code = (MoveToPose.Result.GOAL_TOLERANCE_VIOLATED
                                 if motion.outcome is MotionOutcome.TOLERANCE_VIOLATED
                                 else MoveToPose.Result.INVALID_GOAL)
            goal_handle.abort()
        return self._reported(goal_handle, motion, _point(target.pose.position), result)

    def _on_cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        """Answer a cancel with the arm's manners; note when it arrived and the grasp point."""
        key = bytes(goal_handle.goal_id.uuid)
        now = time.monotonic()
        refused = self._manners == 'refuse'
        with self._goals_lock:
            record = self._executing.get(key)
            if record is not None:
                record['cancel'] = 'refused' if refused else 'accepted'
                record['cancel_at'] = now
        if refused:
            self.get_logger().info(f'refused the cancel of goal {key.hex()[:8]}')
            return CancelResponse.REJECT
        self._cancels[key] = (now, self._sim.grasp_point())
        return CancelResponse.ACCEPT

    def _reported(self, goal_handle: ServerGoalHandle, motion: Motion,
                  target: tuple[float, ...], result: _R) -> _R:
        """Publish the Knock of a goal that ended, if the cube was knocked during it."""
        cancel = self._cancels.pop(bytes(goal_handle.goal_id.uuid), None)
        knock = self._sim.knock_during(motion)
        if knock is None:
            return result
        nan = (math.nan,) * 3
        msg = Knock(knocked_at=knock.monotonic, ended_at=time.monotonic(),
                    time_into_goal=knock.time_into_goal,
                    cancel_at=cancel[0] if cancel else math.nan,
                    outcome=_OUTCOMES.get(goal_handle.status, str(goal_handle.status)),
                    goal_target=_msg_point(target), grasp_at_knock=_msg_point(knock.grasp),
                    grasp_at_cancel=_msg_point(cancel[1] if cancel else nan),
                    grasp_at_end=_msg_point(self._sim.grasp_point()),
                    object_before=_msg_point(knock.object_before),
                    object_after=_msg_point(knock.object_after))
        self._knock_pub.publish(msg)
        return result

    def _end_early(self, goal_handle: ServerGoalHandle, motion: Motion, result: object,
                   codes: type) -> object:
        """
        End a goal whose motion is still running: shutdown, a cancel, or a goal gone.

        :return: ``result``, filled in.
        """
        braking = (self._manners == 'brake' and not self._stop.is_set()
                   and goal_handle.is_cancel_requested
                   and self._sim.brake(motion, self._brake_time))
        if not braking:
            self._sim.cancel(motion)
        if self._stop.is_set():
            result.error_code = codes.INVALID_GOAL  # type: ignore[attr-defined]
            result.error_string = 'shutting down'  # type: ignore[attr-defined]
            goal_handle.abort()
        elif goal_handle.is_cancel_requested:
            motion.wait(1.0 + (self._brake_time / self._sim.rtf if braking else 0.0))
            result.error_code = codes.SUCCESSFUL  # type: ignore[attr-defined]
            result.error_string = 'canceled'  # type: ignore[attr-defined]
            goal_handle.canceled()
        else:
            result.error_string = 'goal no longer active'  # type: ignore[attr-defined]
        return result

    def _on_gripper(
        self, request: SetBool.Request, response: SetBool.Response
    ) -> SetBool.Response:
        motion = self._sim.set_gripper(closed=bool(request.data))
        deadline = time.monotonic() + 10.0 / max(self._sim.rtf, 0.1) + 2.0
        finished = False
        while not finished and time.monotonic() < deadline and not self._stop.is_set():
            finished = motion.wait(_FEEDBACK_PERIOD)
        response.success = finished and motion.outcome is MotionOutcome.SUCCEEDED
        response.message = motion.message if finished else (
            'shutting down' if self._stop.is_set() else 'gripper timed out')
        return response

    def _on_move(
        self, request: MoveObject.Request, response: MoveObject.Response
    ) -> MoveObject.Response:
        p, q = request.pose.position, request.pose.orientation
        try:
            self._sim.move_object(
                position=(p.x, p.y, p.z),
                orientation=(q.w, q.x, q.y, q.z),
                after_goals=int(request.after_goals),
                delay=float(request.delay),
                relative=bool(request.relative),
            )
        except ValueError as err:
            response.success = False
            response.message = str(err)
            return response
        if request.after_goals == 0 and request.delay == 0.0:
            self._publish_object()
        response.success = True
        when = 'now' if request.after_goals == 0 else f'after {request.after_goals} goal(s)'
        if request.delay > 0.0:
            when = f'{request.delay:g} s into arm goal {request.after_goals + 1} from now'
        response.message = f'object moves to ({p.x:.3f}, {p.y:.3f}, {p.z:.3f}) {when}'
        return response

    def _on_move_distractor(
        self, request: MoveObject.Request, response: MoveObject.Response
    ) -> MoveObject.Response:
        """Put the distractor box at the request's pose now; from there it falls."""
        p, q = request.pose.position, request.pose.orientation
        response.success = False
        if request.after_goals != 0 or request.delay != 0.0 or request.relative:
            response.message = ('the distractor moves now only: after_goals, delay and '
                                'relative must be 0')
            return response
        try:
            self._sim.move_distractor(position=(p.x, p.y, p.z), orientation=(q.w, q.x, q.y, q.z))
        except ValueError as err:
            response.message = str(err)
            return response
        response.success = True
        response.message = f'distractor at ({p.x:.3f}, {p.y:.3f}, {p.z:.3f}), falling from there'
        return response

    def _on_reset(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self._sim.reset()
        self._publish_joints()
        self._publish_object()
        response.success = True
        response.message = 'arm at home, object at its start pose, distractor parked'
        return response


_R = TypeVar('_R')

_OUTCOMES = {GoalStatus.STATUS_SUCCEEDED: 'succeeded', GoalStatus.STATUS_CANCELED: 'canceled',
             GoalStatus.STATUS_ABORTED: 'aborted'}


def _is_hold(goal: object, positions: dict[str, float]) -> bool:
    """
    Return whether ``goal`` is a hold: the joints where they are, or the all-zero MoveToPose goal.

    The all-zero MoveToPose target (frame '', the origin: inside the arm's base) is no move
    the arm can make, so it cannot be mistaken for one.
    """
    if isinstance(goal, FollowJointTrajectory.Goal):
        return controller_rules.is_hold(goal, positions)
    if isinstance(goal, MoveToPose.Goal):
        return goal == MoveToPose.Goal()
    return False


def _point(position: object) -> tuple[float, ...]:
    return (position.x, position.y, position.z)  # type: ignore[attr-defined]


def _msg_point(xyz: Sequence[float]) -> Point:
    return Point(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))


def _seconds(duration: object) -> float:
    return duration.sec + duration.nanosec * 1e-9  # type: ignore[attr-defined]


def _goal_tolerances(tolerances: list[object], names: list[str],
                     field: str = 'goal_tolerance') -> list[float]:
    """
    Return the position tolerance of each joint in ``names`` from JointTolerance entries.

    As joint_trajectory_controller reads them: a joint not listed, or listed with position
    0, keeps the server default (0 here: for the goal, the simulation's default; for the
    path, not checked); -1 accepts any position.

    :raises ValueError: an entry names a joint that is not in the trajectory, or a joint twice.
    """
    by_name: dict[str, float] = {}
    for entry in tolerances:
        name = entry.name  # type: ignore[attr-defined]
        if name not in names or name in by_name:
            raise ValueError(f'{field} names {name!r}: not a joint of the trajectory '
                             f'{names}, or named twice')
        by_name[name] = float(entry.position)  # type: ignore[attr-defined]
    return [by_name.get(name, 0.0) for name in names]


def _quaternion(q: object) -> tuple[float, float, float, float]:
    return (q.x, q.y, q.z, q.w)  # type: ignore[attr-defined]


def _joints_for(kin: kinematics.Kinematics, target: object,
                frame_id: str) -> tuple[float, ...]:
    """
    Return the arm joints that put the grasp point at a MoveToPose target, gripper down.

    :raises ValueError: a frame other than '' or ``frame_id``, an orientation that is not
        "gripper down" turned about the world z axis (:func:`.gripper_yaw.yaw_of_goal`: the
        message says the tilt), or a position that is not finite.
    :raises UnreachableError: the position is outside the arm's workspace, at the yaw or 180
        degrees apart.
    """
    frame = target.header.frame_id  # type: ignore[attr-defined]
    if frame not in ('', frame_id):
        raise ValueError(f"target.header.frame_id {frame!r}: must be '' or {frame_id!r}")
    yaw = gripper_yaw.yaw_of_goal(
        _quaternion(target.pose.orientation))  # type: ignore[attr-defined]
    p = target.pose.position  # type: ignore[attr-defined]
    if not all(math.isfinite(v) for v in (p.x, p.y, p.z)):
        raise ValueError(f'target.pose.position ({p.x}, {p.y}, {p.z}) is not finite')
    return kin.inverse(kinematics.GraspPoint(x=p.x, y=p.y, z=p.z), yaw=yaw)


def _path_from(traj: object) -> JointPath:
    points = list(traj.points)  # type: ignore[attr-defined]
    if not points:
        raise ValueError('trajectory has no points')
    times = [_seconds(p.time_from_start) for p in points]
    positions = [list(p.positions) for p in points]
    with_vel = all(len(p.velocities) > 0 for p in points)
    velocities = [list(p.velocities) for p in points] if with_vel else None
    return JointPath(times=times, positions=positions, velocities=velocities)


def main(args: list[str] | None = None) -> int:
    """Run the sim robot until interrupted; exit code 1 on bad parameters."""
    return spin_node(SimRobotNode, name='sim_robot', args=args, on_exit=SimRobotNode.shutdown)


if __name__ == '__main__':
    sys.exit(main())
