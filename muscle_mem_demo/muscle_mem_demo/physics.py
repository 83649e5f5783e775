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
ROS-free MuJoCo simulation of the demo arm: a physics thread, trajectory tracking, grasping.

The arm is a real model (the Franka Emika Panda, :mod:`muscle_mem_demo.arms`), on a table
with a 4 cm cube; a 6 cm box, the camera's distractor (:mod:`.distractor`), waits out of
sight until it is put somewhere.

The simulator owns one ``MjModel``/``MjData`` pair guarded by a lock. Either a background
thread steps it at a real-time factor (``start()``), or a caller steps it by hand
(``advance()``, used by tests). Commands (follow a trajectory, open or close the gripper,
move the object, reset) are accepted from any thread and finish inside the stepping loop,
which completes a :class:`Motion` that the caller may wait on.

The arm is driven as ros2_control's joint_trajectory_controller drives one: a path tolerance
per joint while the trajectory runs (PATH_TOLERANCE_VIOLATED, naming the joint), a goal
tolerance checked by the trajectory's end plus the goal time tolerance
(GOAL_TOLERANCE_VIOLATED), a brake that decelerates to rest and holds, a hold.

Grasping is an attach stand-in: jaws that close with the cube's centre within
``grasp_radius`` of the grasp point stop against the cube (a stall: they end at the cube's
half width, not at the commanded position) and a weld equality between hand and cube is
switched on at the current relative pose; opening the jaws switches it off and the cube drops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math
import threading
import time

import mujoco
from muscle_mem_demo import arms
from muscle_mem_demo.arms import OBJECT_START
from muscle_mem_demo.distractor import Distractor
from muscle_mem_demo.motion import Motion, MotionOutcome, SimState
from muscle_mem_demo.trajectory import JointPath
import numpy as np

__all__ = [
    'DEFAULT_GOAL_TOLERANCE',
    'GRIPPER_MOTION_TIME',
    'OBJECT_START',
    'SETTLE_TIME',
    'ArmSim',
    'GripperOutcome',
    'Knock',
]

GRIPPER_MOTION_TIME = 0.3
"""Simulated seconds the jaws take to open or close."""

DEFAULT_GOAL_TOLERANCE = 0.01
"""Final position error accepted per joint when a goal gives none, radians."""

SETTLE_TIME = 1.0
"""Simulated seconds allowed after a trajectory's last waypoint to reach the tolerance."""

CUBE_HALF_WIDTH = 0.02
"""Half the cube's width, metres: where closing jaws stop against it (finger positions)."""

GRIPPER_MAX_EFFORT = 70.0
"""The jaws' force limit, newtons (the finger actuators' force range)."""


@dataclass
class _Tracking:
    motion: Motion
    path: JointPath
    indices: np.ndarray
    started_at: float
    tolerance: np.ndarray
    settle_time: float
    path_tolerance: np.ndarray | None = None
    braking: bool = False


@dataclass
class _Bump:
    remaining: int
    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float]
    delay: float = 0.0
    """> 0: a knock this many simulated seconds after the next goal starts, not at an end."""
    goal: _Tracking | None = None
    """The goal a knock waits on, once it started."""
    relative: bool = False
    """A knock's position is an offset from where the cube is then."""


@dataclass(frozen=True)
class GripperOutcome:
    """How a gripper command ended (control_msgs' GripperCommand result)."""

    position: float
    """Where the jaws ended, finger joint position (metres)."""
    effort: float
    """The force the jaws press with, newtons (0 unless they stalled on the cube)."""
    stalled: bool
    """The jaws stopped against the cube before the commanded position."""
    reached_goal: bool
    """The jaws reached the commanded position."""


@dataclass(frozen=True)
class Knock:
    """A delayed object move (a knock) that happened during a goal: when, and the arm then."""

    monotonic: float
    """time.monotonic() when the object moved."""
    time_into_goal: float
    """Simulated seconds from the goal's start."""
    grasp: tuple[float, ...]
    """The grasp point (x, y, z) at that moment, world frame, metres."""
    motion: Motion
    """The goal's motion."""
    object_before: tuple[float, ...] = ()
    """The cube's centre just before the knock."""
    object_after: tuple[float, ...] = ()
    """The cube's centre just after it."""


class ArmSim:
    """The demo arm, table and cube in MuJoCo, stepped in real time times ``rtf``."""

    def __init__(
        self,
        *,
        arm: str = 'panda',
        rtf: float = 1.0,
        grasp_radius: float = 0.03,
    ) -> None:
        """
        Build the scene around the named arm and put the world in its start state.

        :param arm: one of :data:`arms.ARMS`.
        :param rtf: simulated seconds per wall-clock second when running in the thread.
        :param grasp_radius: largest cube-to-grasp-point distance at which closing attaches, m.
        :raises ValueError: rtf or grasp_radius is not positive, or an unknown arm.
        :raises arms.ModelFilesError: the arm's model files are not installed.
        """
        if not rtf > 0.0 or not math.isfinite(rtf):
            raise ValueError(f'rtf must be a positive number, got {rtf}')
        if not grasp_radius > 0.0:
            raise ValueError(f'grasp_radius must be positive, got {grasp_radius}')
        self._arm = arms.ARMS[arm] if arm in arms.ARMS else None
        if self._arm is None:
            raise ValueError(f'unknown arm {arm!r}: one of {sorted(arms.ARMS)}')
        self._model = arms.build_scene(arm)
        self._data = mujoco.MjData(self._model)
        self._rtf = float(rtf)
        self._grasp_radius = float(grasp_radius)
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        names = self._arm.arm_joints + self._arm.gripper_joints
        self._joint_names = names
        self._n_arm = len(self._arm.arm_joints)
        self._qpos_idx = np.array([self._model.joint(n).qposadr[0] for n in names])
        self._qvel_idx = np.array([self._model.joint(n).dofadr[0] for n in names])
        self._act_idx = np.array([self._model.actuator(n).id for n in names])
        self._object_body = self._model.body('object').id
        self._gripper_body = self._model.body(self._arm.hand_body).id
        self._object_qpos = self._model.joint('object_free').qposadr[0]
        self._object_qvel = self._model.joint('object_free').dofadr[0]
        self._weld = self._model.equality('grasp').id
        self._grasp_site = self._model.site('grasp').id
        self._distractor = Distractor(self._model)
        self._tracking: _Tracking | None = None
        self._gripper_motion: Motion | None = None
        self._gripper_ends_at = 0.0
        self._gripper_closed = False
        self._gripper_command = self._arm.gripper_open
        self._gripper_effort = 0.0
        self._gripper_stalling = False
        self._bumps: list[_Bump] = []
        self._knocks: list[Knock] = []
        self._finished_goals = 0
        self.reset()

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Arm joints then jaw joints, the order of :attr:`SimState.positions`."""
        return self._joint_names

    @property
    def arm(self) -> arms.ArmModel:
        """Return the arm model the scene was built around."""
        return self._arm  # type: ignore[return-value]

    @property
    def rtf(self) -> float:
        """Return the real-time factor the thread runs at."""
        return self._rtf

    @property
    def timestep(self) -> float:
        """Physics step, simulated seconds."""
        return float(self._model.opt.timestep)

    @property
    def finished_goals(self) -> int:
        """Joint-trajectory goals that ended (any outcome) since creation."""
        return self._finished_goals

    # -- running ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start stepping in a background thread at the real-time factor."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name='arm_sim', daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background thread (commands in progress stay pending)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def set_servo_scale(self, scale: float) -> None:
        """
        Scale the arm servos' stiffness (their ``kp``; damping kept): below 1, a weaker arm.

        A worn or overloaded arm lags its path more (by ``kv / (kp * scale)`` times the
        speed): what a path tolerance is there to catch.

        :raises ValueError: scale is not a positive number.
        """
        if not (math.isfinite(scale) and scale > 0.0):
            raise ValueError(f'servo scale must be a positive number, got {scale}')
        with self._lock:
            for index, (kp, _kv, _force) in zip(self._act_idx[:self._n_arm], arms.SERVOS,
                                                strict=True):
                self._model.actuator_gainprm[index, 0] = kp * scale
                self._model.actuator_biasprm[index, 1] = -kp * scale

    def advance(self, seconds: float) -> None:
        """Step the physics by ``seconds`` of simulated time in the calling thread."""
        steps = max(1, round(seconds / self.timestep))
        with self._lock:
            for _ in range(steps):
                self._step_once()

    def _run(self) -> None:
        dt = self.timestep
        max_chunk = max(1, int(0.02 * self._rtf / dt) * 4)
        wall_anchor = time.monotonic()
        with self._lock:
            sim_anchor = float(self._data.time)
        while not self._stop.is_set():
            target = sim_anchor + (time.monotonic() - wall_anchor) * self._rtf
            with self._lock:
                steps = int((target - self._data.time) / dt)
                if steps > max_chunk:
                    steps = max_chunk
                    wall_anchor = time.monotonic()
                    sim_anchor = float(self._data.time) + steps * dt
                for _ in range(max(0, steps)):
                    self._step_once()
            time.sleep(0.001)

    # -- reading ---------------------------------------------------------------------------

    def state(self) -> SimState:
        """Return a consistent copy of the current state."""
        with self._lock:
            d = self._data
            return SimState(
                sim_time=float(d.time),
                joint_names=self._joint_names,
                positions=tuple(float(v) for v in d.qpos[self._qpos_idx]),
                velocities=tuple(float(v) for v in d.qvel[self._qvel_idx]),
                object_position=tuple(float(v) for v in d.xpos[self._object_body]),
                object_orientation=tuple(float(v) for v in d.xquat[self._object_body]),
                holding=bool(d.eq_active[self._weld]),
                gripper_closed=self._gripper_closed,
            )

    def positions(self) -> np.ndarray:
        """Return a copy of every joint position (``qpos``), consistent: what a camera renders."""
        with self._lock:
            return np.array(self._data.qpos)

    @property
    def model(self) -> mujoco.MjModel:
        """Return the scene (read only: a camera renders it)."""
        return self._model

    def grasp_point(self) -> tuple[float, float, float]:
        """Return the world position of the point between the jaw tips."""
        with self._lock:
            return tuple(float(v) for v in self._data.site_xpos[self._grasp_site])

    # -- commands --------------------------------------------------------------------------

    def follow(
        self, *, names: Sequence[str], path: JointPath,
        tolerance: float | Sequence[float] = 0.0, settle_time: float = 0.0,
        path_tolerance: Sequence[float] | None = None,
    ) -> Motion:
        """
        Start tracking ``path`` for the named arm joints; preempt any trajectory in progress.

        :param names: arm joints the path's columns refer to (a subset of ARM_JOINTS, no repeats).
        :param path: waypoints relative to now; starts from the current positions.
        :param tolerance: final error accepted, radians: one value for every joint or one per
            joint of ``names``; 0 uses DEFAULT_GOAL_TOLERANCE, a negative value accepts any error
            (control_msgs' "-1 erases the tolerance").
        :param settle_time: simulated seconds after the last waypoint to get within tolerance;
            0 uses SETTLE_TIME.
        :param path_tolerance: largest error between the commanded and the measured position
            while the path runs, one per joint of ``names`` (radians); 0 or a negative value
            does not check that joint; None checks none.
        :raises ValueError: unknown or repeated joint names, a path of the wrong width, or
            tolerances of the wrong length.
        """
        names = tuple(names)
        arm_joints = self._arm.arm_joints  # type: ignore[union-attr]
        unknown = [n for n in names if n not in arm_joints]
        if unknown or not names or len(set(names)) != len(names):
            raise ValueError(
                f'joint names must be distinct arm joints {list(arm_joints)}, '
                f'got {list(names)}'
            )
        path_limits = None
        if path_tolerance is not None:
            path_limits = np.asarray(path_tolerance, dtype=float).copy()
            if path_limits.shape != (len(names),):
                raise ValueError(f'{path_limits.size} path tolerances for {len(names)} joints')
            path_limits[path_limits <= 0.0] = np.inf
        if path.width != len(names):
            raise ValueError(f'path has {path.width} columns for {len(names)} joints')
        tolerances = np.atleast_1d(np.asarray(tolerance, dtype=float)).copy()
        if tolerances.size == 1:
            tolerances = np.full(len(names), tolerances[0])
        if tolerances.shape != (len(names),):
            raise ValueError(f'{tolerances.size} tolerances for {len(names)} joints')
        tolerances[tolerances == 0.0] = DEFAULT_GOAL_TOLERANCE
        tolerances[tolerances < 0.0] = np.inf
        motion = Motion(kind='trajectory')
        indices = np.array([self._joint_names.index(n) for n in names])
        with self._lock:
            start = self._data.qpos[self._qpos_idx[indices]].copy()
            if self._tracking is not None:
                self._end_tracking(MotionOutcome.PREEMPTED, 'preempted by a newer goal')
            self._tracking = _Tracking(
                motion=motion,
                path=path.anchored(start),
                indices=indices,
                started_at=float(self._data.time),
                tolerance=tolerances,
                settle_time=settle_time if settle_time > 0.0 else SETTLE_TIME,
                path_tolerance=path_limits,
            )
            motion.desired = tuple(float(v) for v in start)
            motion.actual = motion.desired
            for bump in self._bumps:
                if bump.delay > 0.0 and bump.goal is None:
                    if bump.remaining > 0:
                        bump.remaining -= 1
                    else:
                        bump.goal = self._tracking
        return motion

    def cancel(self, motion: Motion) -> None:
        """Stop a trajectory in progress where it is (holding the current position)."""
        with self._lock:
            if self._tracking is not None and self._tracking.motion is motion:
                hold = self._data.qpos[self._qpos_idx[self._tracking.indices]]
                self._data.ctrl[self._act_idx[self._tracking.indices]] = hold
                self._end_tracking(MotionOutcome.PREEMPTED, 'canceled')

    def hold(self) -> bool:
        """
        Stop whatever trajectory is in progress where it is and hold there.

        What a trajectory controller does with an empty trajectory: the goal in progress
        ends (PREEMPTED, 'preempted by a hold') and the arm holds its current position.

        :return: whether a trajectory was in progress.
        """
        with self._lock:
            tracking = self._tracking
            if tracking is None:
                return False
            hold = self._data.qpos[self._qpos_idx[tracking.indices]]
            self._data.ctrl[self._act_idx[tracking.indices]] = hold
            self._end_tracking(MotionOutcome.PREEMPTED, 'preempted by a hold')
            return True

    def brake(self, motion: Motion, duration: float) -> bool:
        """
        Bring a trajectory in progress to rest over ``duration`` simulated seconds.

        A real controller's stop: from where the arm is, at the velocity it was commanded,
        decelerating evenly to zero; ``motion`` finishes (SUCCEEDED, 'braked') once the
        arm is at rest there, and the arm holds that position.

        :return: False when ``motion`` is not the trajectory in progress (it ended).
        """
        if not duration > 0.0:
            raise ValueError(f'brake duration must be > 0, got {duration}')
        with self._lock:
            tracking = self._tracking
            if tracking is None or tracking.motion is not motion:
                return False
            now = float(self._data.time)
            elapsed = now - tracking.started_at
            h = 1e-3
            velocity = (tracking.path.sample(elapsed + h) - tracking.path.sample(elapsed - h)) / (
                2 * h) if elapsed < tracking.path.duration else np.zeros(tracking.path.width)
            start = self._data.qpos[self._qpos_idx[tracking.indices]].copy()
            times = [duration * k / 10 for k in range(1, 11)]
            positions = [start + velocity * t - velocity * t * t / (2 * duration)
                         for t in times]
            tracking.path = JointPath(times=times, positions=positions).anchored(start)
            tracking.started_at = now
            tracking.tolerance = np.full(len(tracking.indices), np.inf)
            tracking.path_tolerance = None
            tracking.braking = True
            return True

    def set_gripper(self, *, closed: bool | None = None, position: float | None = None,
                    max_effort: float = 0.0) -> Motion:
        """
        Move the jaws to ``position`` (or fully open / closed); they stall on the cube.

        Jaws closing with the cube between them stop at its half width: the motion ends
        SUCCEEDED with :attr:`Motion.gripper` saying stalled (and the cube is attached);
        otherwise they reach ``position`` (reached_goal). Opening releases the cube.

        :param closed: True closes fully, False opens fully (when ``position`` is None).
        :param position: finger joint position, within the fingers' range.
        :param max_effort: the force to press with, newtons; 0 or less: GRIPPER_MAX_EFFORT.
        :raises ValueError: neither or both of closed and position, or a position out of range.
        """
        arm = self._arm
        assert arm is not None
        if (closed is None) == (position is None):
            raise ValueError('give closed or position, not both')
        if position is None:
            position = arm.gripper_closed if closed else arm.gripper_open
        low, high = sorted((arm.gripper_closed, arm.gripper_open))
        if not (math.isfinite(position) and low - 1e-9 <= position <= high + 1e-9):
            raise ValueError(f'gripper position {position} is outside [{low}, {high}]')
        effort = max_effort if max_effort > 0.0 else GRIPPER_MAX_EFFORT
        motion = Motion(kind='gripper')
        with self._lock:
            if self._gripper_motion is not None:
                self._gripper_motion.finish(MotionOutcome.PREEMPTED, 'preempted')
            fingers = self._data.qpos[self._qpos_idx[self._n_arm:]]
            closing = position < float(np.mean(fingers)) - 1e-6
            self._gripper_closed = position < high - 0.25 * (high - low)
            self._gripper_command = float(position)
            self._gripper_effort = min(effort, GRIPPER_MAX_EFFORT)
            self._gripper_stalling = closing and position < CUBE_HALF_WIDTH and self._near()
            if not closing:
                self._release()
            target = CUBE_HALF_WIDTH if self._gripper_stalling else position
            self._data.ctrl[self._act_idx[self._n_arm:]] = target
            self._gripper_motion = motion
            self._gripper_ends_at = float(self._data.time) + GRIPPER_MOTION_TIME
        return motion

    def move_object(
        self,
        *,
        position: Sequence[float],
        orientation: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
        after_goals: int = 0,
        delay: float = 0.0,
        relative: bool = False,
    ) -> None:
        """
        Teleport the cube now, or when the ``after_goals``-th trajectory goal from now ends.

        With ``delay`` > 0 the cube is knocked ``delay`` simulated seconds after a goal
        starts, while it runs (or when the delay is over, if it ended first): the next goal,
        or the one after ``after_goals`` more; ``relative`` makes ``position`` an offset from
        where the cube is then. :meth:`knock_during` tells when and where the arm was.
        A moved cube is released from the gripper. Orientation is (w, x, y, z), normalized.

        :raises ValueError: non-finite numbers, a zero quaternion, a negative after_goals or
            delay, or relative without a delay.
        """
        pos = tuple(float(v) for v in position)
        quat = np.array([float(v) for v in orientation])
        if len(pos) != 3 or not all(math.isfinite(v) for v in pos):
            raise ValueError(f'object position must be 3 finite numbers, got {pos}')
        norm = float(np.linalg.norm(quat))
        if quat.shape != (4,) or not math.isfinite(norm) or norm < 1e-9:
            raise ValueError(f'object orientation must be a non-zero quaternion, got {quat}')
        if after_goals < 0:
            raise ValueError(f'after_goals must be >= 0, got {after_goals}')
        if not (math.isfinite(delay) and delay >= 0.0) or (relative and delay == 0.0):
            raise ValueError(f'delay must be >= 0 (> 0 when relative), got {delay}')
        rot = tuple(float(v) for v in quat / norm)
        with self._lock:
            if delay > 0.0:
                self._bumps.append(_Bump(remaining=after_goals, position=pos, orientation=rot,
                                         delay=float(delay), relative=relative))
            elif after_goals == 0:
                self._teleport(pos, rot)
            else:
                self._bumps.append(_Bump(remaining=after_goals, position=pos, orientation=rot))

    def move_distractor(self, *, position: Sequence[float],
                        orientation: Sequence[float] = (1.0, 0.0, 0.0, 0.0)) -> None:
        """
        Put the distractor box at ``position`` (world frame, m) now, at rest; it falls from there.

        Orientation is (w, x, y, z), normalized. :meth:`reset` parks it out of sight again.

        :raises ValueError: non-finite numbers or a zero quaternion.
        """
        with self._lock:
            self._distractor.place(self._data, position, orientation)
            mujoco.mj_forward(self._model, self._data)

    def distractor_position(self) -> tuple[float, float, float]:
        """Return the distractor box's centre, world frame (m)."""
        with self._lock:
            return self._distractor.position(self._data)

    def knock_during(self, motion: Motion) -> Knock | None:
        """Return the knock that happened while ``motion`` ran, if any."""
        with self._lock:
            return next((k for k in self._knocks if k.motion is motion), None)

    def reset(self) -> None:
        """
        Put the arm at home with open jaws, the cube at its start pose, the distractor parked.

        Preempts any motion in progress and drops pending deferred moves.
        """
        with self._lock:
            if self._tracking is not None:
                self._end_tracking(MotionOutcome.PREEMPTED, 'reset')
            if self._gripper_motion is not None:
                self._gripper_motion.finish(MotionOutcome.PREEMPTED, 'reset')
                self._gripper_motion = None
            self._bumps.clear()
            self._knocks.clear()
            self._release()
            d = self._data
            arm = self._arm
            assert arm is not None
            home = np.array(arm.home + (arm.gripper_open,) * len(arm.gripper_joints))
            d.qpos[self._qpos_idx] = home
            d.qvel[:] = 0.0
            d.qacc_warmstart[:] = 0.0
            d.ctrl[self._act_idx] = home
            self._gripper_closed = False
            self._gripper_command = arm.gripper_open
            self._gripper_stalling = False
            self._distractor.park(d)
            self._teleport(OBJECT_START, (1.0, 0.0, 0.0, 0.0))

    # -- inside the lock -------------------------------------------------------------------

    def _teleport(self, pos: tuple[float, ...], quat: tuple[float, ...]) -> None:
        self._release()
        d = self._data
        d.qpos[self._object_qpos:self._object_qpos + 3] = pos
        d.qpos[self._object_qpos + 3:self._object_qpos + 7] = quat
        d.qvel[self._object_qvel:self._object_qvel + 6] = 0.0
        mujoco.mj_forward(self._model, d)

    def _release(self) -> None:
        if self._data.eq_active[self._weld] and self._gripper_stalling:
            # nothing between the jaws any more: they go on to where they were sent
            self._data.ctrl[self._act_idx[self._n_arm:]] = self._gripper_command
            self._gripper_stalling = False
        self._data.eq_active[self._weld] = 0
        self._model.body_gravcomp[self._object_body] = 0.0

    def _near(self) -> bool:
        d = self._data
        grasp = d.site_xpos[self._grasp_site]
        obj = d.xpos[self._object_body]
        return float(np.linalg.norm(grasp - obj)) <= self._grasp_radius

    def _attach(self) -> None:
        d = self._data
        obj = d.xpos[self._object_body]
        gpos = d.xpos[self._gripper_body]
        gmat = d.xmat[self._gripper_body].reshape(3, 3)
        rel_pos = gmat.T @ (obj - gpos)
        inv = np.zeros(4)
        mujoco.mju_negQuat(inv, d.xquat[self._gripper_body])
        rel_quat = np.zeros(4)
        mujoco.mju_mulQuat(rel_quat, inv, d.xquat[self._object_body])
        eq = self._model.eq_data[self._weld]
        eq[0:3] = 0.0
        eq[3:6] = rel_pos
        eq[6:10] = rel_quat
        d.eq_active[self._weld] = 1
        self._model.body_gravcomp[self._object_body] = 1.0

    def _end_tracking(self, outcome: MotionOutcome, message: str) -> None:
        tracking = self._tracking
        self._tracking = None
        if tracking is None:
            return
        self._finished_goals += 1
        for bump in list(self._bumps):
            if bump.delay > 0.0:
                continue
            bump.remaining -= 1
            if bump.remaining <= 0:
                self._bumps.remove(bump)
                self._teleport(bump.position, bump.orientation)
        tracking.motion.finish(outcome, message)

    def _step_once(self) -> None:
        d = self._data
        now = float(d.time)
        tracking = self._tracking
        if tracking is not None:
            elapsed = now - tracking.started_at
            desired = tracking.path.sample(elapsed)
            d.ctrl[self._act_idx[tracking.indices]] = desired
            actual = d.qpos[self._qpos_idx[tracking.indices]]
            tracking.motion.desired = tuple(float(v) for v in desired)
            tracking.motion.actual = tuple(float(v) for v in actual)
            deviation = np.abs(actual - desired)
            if tracking.path_tolerance is not None and elapsed < tracking.path.duration and (
                    np.any(deviation > tracking.path_tolerance)):
                worst = int(np.argmax(deviation - tracking.path_tolerance))
                name = self._joint_names[int(tracking.indices[worst])]
                hold = actual.copy()
                d.ctrl[self._act_idx[tracking.indices]] = hold
                self._end_tracking(
                    MotionOutcome.PATH_TOLERANCE_VIOLATED,
                    f'{name} path error {deviation[worst]:.4f} rad > path tolerance '
                    f'{tracking.path_tolerance[worst]:.4f} at {elapsed:.3f} s')
                tracking = None
            if tracking is not None and elapsed >= tracking.path.duration:
                errors = np.abs(actual - tracking.path.final)
                error = float(np.max(errors))
                if tracking.braking:
                    self._end_tracking(MotionOutcome.SUCCEEDED, 'braked')
                elif np.all(errors <= tracking.tolerance):
                    self._end_tracking(MotionOutcome.SUCCEEDED, f'reached, max error {error:.4f}')
                elif elapsed >= tracking.path.duration + tracking.settle_time:
                    worst = int(np.argmax(errors - tracking.tolerance))
                    name = self._joint_names[int(tracking.indices[worst])]
                    self._end_tracking(
                        MotionOutcome.TOLERANCE_VIOLATED,
                        f'{name} error {errors[worst]:.4f} rad > tolerance '
                        f'{tracking.tolerance[worst]:.4f}',
                    )
        self._knock_if_due(now)
        gripper = self._gripper_motion
        if gripper is not None and now >= self._gripper_ends_at:
            self._gripper_motion = None
            fingers = d.qpos[self._qpos_idx[self._n_arm:]]
            position = float(np.mean(fingers))
            stalled = self._gripper_stalling
            if stalled:
                self._attach()
                message = f'stalled on the object at {position:.4f}, holding it'
            else:
                grasped = ', nothing grasped' if self._gripper_closed else ''
                message = f'reached {position:.4f}{grasped}'
            gripper.gripper = GripperOutcome(
                position=position, effort=self._gripper_effort if stalled else 0.0,
                stalled=stalled,
                reached_goal=not stalled and abs(position - self._gripper_command) < 2e-3)
            gripper.finish(MotionOutcome.SUCCEEDED, message)
        mujoco.mj_step(self._model, d)

    def _knock_if_due(self, now: float) -> None:
        for bump in list(self._bumps):
            goal = bump.goal
            if goal is None or now < goal.started_at + bump.delay:
                continue
            self._bumps.remove(bump)
            d = self._data
            grasp = tuple(float(v) for v in d.site_xpos[self._grasp_site])
            before = tuple(float(v) for v in d.xpos[self._object_body])
            position, orientation = bump.position, bump.orientation
            if bump.relative:
                position = tuple(b + o for b, o in zip(before, position, strict=True))
                orientation = tuple(float(v) for v in d.xquat[self._object_body])
            self._teleport(position, orientation)
            self._knocks = self._knocks[-9:] + [Knock(
                monotonic=time.monotonic(), time_into_goal=now - goal.started_at,
                grasp=grasp, motion=goal.motion, object_before=before,
                object_after=tuple(float(v) for v in d.xpos[self._object_body]))]
