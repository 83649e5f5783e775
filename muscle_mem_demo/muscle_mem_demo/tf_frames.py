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
The demo's frame tree, ROS-free: the arm's links, the camera and the cube as TF would hold them.

**The arm**, as robot_state_publisher gives it from a description and the joint states: one
link per body of the arm's model, parent to child, computed from the model's body poses at
the given joint positions (MuJoCo's forward kinematics). Bodies without a joint are static
links (``world -> panda_link0``), the others dynamic (``panda_link0 -> panda_link1`` ...
``panda_link6 -> panda_link7``, and the fingers). Two frames are added, as franka_description
has them: ``panda_hand`` (static under ``panda_link7``, where the fingers are mounted, its
axes those of the grasp: z along the approach, the fingers closing along y) and
``panda_hand_tcp`` (static under ``panda_hand``: the grasp point between the finger pads,
where ``/ee_pose`` and MoveToPose put the tool). The fingers hang under ``panda_hand``.

**The camera** (:mod:`.camera`): ``world -> camera`` (the camera's body, REP 103: x along the
view, y to the image's left, z to its top) and ``camera -> workspace_camera`` (its optical
frame, REP 103's ``_optical`` convention: z along the view, x right, y down; the frame the
images are stamped in), both static.

**The cube**, as a tag detector sees it: ``workspace_camera -> cube``, the cube's pose in the
optical frame the detection was made in (apriltag_ros publishes its tags that way), with
Gaussian noise on the position (per axis) and on the yaw (about the world z axis). A lookup of
``world -> cube`` composes it with the camera's static links.

Transforms are :class:`Link` records: translation in metres, rotation a unit quaternion
(x, y, z, w), each the child's pose in the parent frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math
import threading

import mujoco
from muscle_mem_demo import arms, camera
import numpy as np

__all__ = ['ArmFrames', 'CAMERA_FRAME', 'CUBE_FRAME', 'CameraFrames', 'Link', 'OPTICAL_FRAME']

CAMERA_FRAME = 'camera'
"""The camera's body frame."""
OPTICAL_FRAME = 'workspace_camera'
"""The camera's optical frame: the ``frame_id`` of its images (:mod:`.camera_feed`)."""
CUBE_FRAME = 'cube'
"""The cube, as the detector names it."""
_BODY_FROM_MUJOCO = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])
"""Columns: a REP 103 body frame's axes in MuJoCo's camera frame (x right, y up, looking
along -z): x forward is -z, y left is -x, z up is y."""
_OPTICAL_FROM_MUJOCO = np.diag([1.0, -1.0, -1.0])
"""Columns: the optical frame's axes in MuJoCo's camera frame: x right, y down, z forward."""


@dataclass(frozen=True)
class Link:
    """One transform of the tree: where ``child`` is in ``parent``."""

    parent: str
    """The parent frame (a TransformStamped's ``header.frame_id``)."""
    child: str
    """The child frame (``child_frame_id``)."""
    translation: tuple[float, float, float]
    """The child's origin in the parent frame, metres."""
    rotation: tuple[float, float, float, float]
    """The child's axes in the parent frame, a unit quaternion (x, y, z, w)."""


def _quat(matrix: np.ndarray) -> tuple[float, float, float, float]:
    """Return the quaternion (x, y, z, w) of a rotation matrix, w >= 0."""
    wxyz = np.zeros(4)
    mujoco.mju_mat2Quat(wxyz, np.ascontiguousarray(matrix, dtype=float).reshape(9))
    if wxyz[0] < 0.0:
        wxyz = -wxyz
    return (float(wxyz[1]), float(wxyz[2]), float(wxyz[3]), float(wxyz[0]))


def _link(parent: str, child: str, p_pos: np.ndarray, p_rot: np.ndarray,
          c_pos: np.ndarray, c_rot: np.ndarray) -> Link:
    """Return the link between two frames given as world poses (position, rotation matrix)."""
    translation = p_rot.T @ (c_pos - p_pos)
    return Link(parent=parent, child=child,
                translation=(float(translation[0]), float(translation[1]),
                             float(translation[2])),
                rotation=_quat(p_rot.T @ c_rot))


class ArmFrames:
    """
    The arm's links at given joint positions, from its model (module docstring); thread-safe.

    :param arm: One of :data:`arms.ARMS`.
    :param world: The frame the arm's base stands in (the robot's ``frame_id``).
    :raises ValueError: An unknown arm.
    """

    def __init__(self, *, arm: str = 'panda', world: str = 'world') -> None:
        if arm not in arms.ARMS:
            raise ValueError(f'unknown arm {arm!r}: one of {sorted(arms.ARMS)}')
        self._arm = arms.ARMS[arm]
        self._model = arms.build_arm(arm)
        self._data = mujoco.MjData(self._model)
        self._lock = threading.Lock()
        self._world = world
        self.hand = f'{arm}_hand'
        """The hand frame (``panda_hand``)."""
        self.tcp = f'{arm}_hand_tcp'
        """The grasp point's frame (``panda_hand_tcp``)."""
        model = self._model
        names = self._arm.arm_joints + self._arm.gripper_joints
        self._qpos = np.array([model.joint(n).qposadr[0] for n in names])
        self._hand_body = model.body(self._arm.hand_body).id
        fingers = [model.joint(n).bodyid[0] for n in self._arm.gripper_joints]
        self._site = model.site('grasp').id
        # (parent frame, child frame, body id); the hand's parent gets the hand's frame
        self._bodies: list[tuple[str, str, int]] = []
        for body in range(1, model.nbody):
            parent = int(model.body_parentid[body])
            parent_name = self.hand if body in fingers else (
                world if parent == 0 else model.body(parent).name)
            self._bodies.append((parent_name, model.body(body).name, body))
        self._dynamic = [b for b in self._bodies if model.body_jntnum[b[2]] > 0]
        self._fixed = [b for b in self._bodies if model.body_jntnum[b[2]] == 0]
        self._finger_mount = np.array(model.body_pos[fingers[0]]) if fingers else np.zeros(3)
        self._static = self._static_links()

    @property
    def frames(self) -> tuple[str, ...]:
        """Return every child frame the arm publishes (its links, the hand, the tcp)."""
        return tuple(b[1] for b in self._bodies) + (self.hand, self.tcp)

    def static_links(self) -> tuple[Link, ...]:
        """Return the links that never move: the base in the world, the hand, the tcp."""
        return self._static

    def links(self, positions: Sequence[float]) -> tuple[Link, ...]:
        """
        Return the moving links at joint ``positions`` (arm joints then fingers).

        :raises ValueError: Fewer positions than the arm's joints and fingers.
        """
        q = np.asarray(positions, dtype=float)
        if q.shape != self._qpos.shape:
            raise ValueError(f'{q.size} joint positions for {self._qpos.size} joints')
        with self._lock:
            poses = self._poses(q)
            return tuple(_link(parent, child, *poses[parent], *poses[child])
                         for parent, child, _body in self._dynamic)

    def _poses(self, q: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Return every frame's world pose (position, rotation matrix) at ``q``, locked."""
        d = self._data
        d.qpos[self._qpos] = q
        mujoco.mj_kinematics(self._model, d)
        poses = {self._world: (np.zeros(3), np.eye(3))}
        for _parent, child, body in self._bodies:
            poses[child] = (d.xpos[body].copy(), d.xmat[body].reshape(3, 3).copy())
        hand_pos, hand_rot = poses[self._arm.hand_body]
        site_rot = d.site_xmat[self._site].reshape(3, 3).copy()
        poses[self.hand] = (hand_pos + hand_rot @ self._finger_mount, site_rot)
        poses[self.tcp] = (d.site_xpos[self._site].copy(), site_rot)
        return poses

    def _static_links(self) -> tuple[Link, ...]:
        with self._lock:
            poses = self._poses(np.array(self._arm.home + (self._arm.gripper_open,) * len(
                self._arm.gripper_joints)))
        fixed = [(parent, child) for parent, child, _body in self._fixed]
        fixed += [(self._arm.hand_body, self.hand), (self.hand, self.tcp)]
        return tuple(_link(parent, child, *poses[parent], *poses[child])
                     for parent, child in fixed)


class CameraFrames:
    """
    The camera's static links and the cube as its detector sees it (module docstring).

    :param model: The scene (:func:`arms.build_scene`), with :data:`camera.CAMERA`.
    :param world: The world frame's name.
    """

    def __init__(self, *, model: mujoco.MjModel, world: str = 'world') -> None:
        data = mujoco.MjData(model)
        mujoco.mj_forward(model, data)  # mj_kinematics leaves the cameras out
        cam = model.camera(camera.CAMERA).id
        mj_rot = data.cam_xmat[cam].reshape(3, 3).copy()
        self._position = data.cam_xpos[cam].copy()
        self._body = mj_rot @ _BODY_FROM_MUJOCO
        self._optical = mj_rot @ _OPTICAL_FROM_MUJOCO
        origin = (np.zeros(3), np.eye(3))
        self._static = (
            _link(world, CAMERA_FRAME, *origin, self._position, self._body),
            _link(CAMERA_FRAME, OPTICAL_FRAME, self._position, self._body, self._position,
                  self._optical))

    def static_links(self) -> tuple[Link, ...]:
        """Return ``world -> camera`` and ``camera -> workspace_camera``."""
        return self._static

    def cube(self, position: Sequence[float], orientation: Sequence[float], *,
             rng: np.random.Generator | None = None, noise: float = 0.0,
             yaw_noise: float = 0.0) -> Link:
        """
        Return ``workspace_camera -> cube`` for the cube at a world pose, as detected.

        :param position: The cube's centre in the world, metres.
        :param orientation: Its rotation in the world, (w, x, y, z) as MuJoCo gives it.
        :param rng: Draws the noise (none without it).
        :param noise: Standard deviation of each position axis, metres.
        :param yaw_noise: Standard deviation of a turn about the world z axis, radians.
        """
        pos = np.asarray(position, dtype=float)
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, np.asarray(orientation, dtype=float))
        rot = rot.reshape(3, 3)
        if rng is not None and noise > 0.0:
            pos = pos + rng.normal(0.0, noise, 3)
        if rng is not None and yaw_noise > 0.0:
            turn = float(rng.normal(0.0, yaw_noise))
            c, s = math.cos(turn), math.sin(turn)
            rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ rot
        return _link(OPTICAL_FRAME, CUBE_FRAME, self._position, self._optical, pos, rot)
