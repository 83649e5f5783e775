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
The demo's eyes: a camera over the table, rendered offscreen by MuJoCo on the CPU.

The camera (:data:`CAMERA`, added to the scene by :func:`add_camera`) hangs 1.1 m over
the table looking straight down, so the cube, the place marker and the arm's reach are in
view: the cube at its start is about 1.1 m away, where a 2 cm move is 14 pixels of a
640 x 480 frame. Shadows are not rendered: on the CPU they cost five times the rest of a
frame, and a camera check must not depend on where the light falls anyway.

A frame is rendered from a copy of the simulation's state taken under its lock
(:meth:`Eye.frame`), so rendering never holds up the physics; the renderer's GL context
belongs to the thread that made the :class:`Eye`, and only that thread renders.

MuJoCo renders headless through Mesa's EGL (``MUJOCO_GL=egl``) or OSMesa; with neither
(no ``MUJOCO_GL`` and no display) :func:`open_eye` raises :class:`CameraError` whose
message is one line naming what is missing (GLFW's own complaint, a Python warning, goes
into that line instead of onto stderr). Sensor noise is Gaussian per pixel and
channel, from a seeded generator: the same seed gives the same frames.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
import os
from typing import Any
import warnings

import mujoco
import numpy as np

__all__ = ['add_camera', 'CAMERA', 'CameraError', 'Eye', 'Intrinsics', 'open_eye']

CAMERA = 'workspace'
"""The camera's name in the scene."""
_POSITION = (0.45, -0.05, 1.1)
_FOVY = 36.0
"""Vertical field of view, degrees: 0.7 m of the table's depth at the table's height."""


class CameraError(RuntimeError):
    """The camera cannot render: no OpenGL backend, or a bad size."""


@dataclass(frozen=True)
class Intrinsics:
    """A pinhole camera's intrinsics, as sensor_msgs/CameraInfo's K holds them (pixels)."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    @property
    def k(self) -> tuple[float, ...]:
        """Return the row-major 3x3 camera matrix."""
        return (self.fx, 0.0, self.cx, 0.0, self.fy, self.cy, 0.0, 0.0, 1.0)


def add_camera(world: Any) -> None:
    """Add :data:`CAMERA` to a scene's world body (an ``MjSpec`` body), looking down."""
    # Image right is world -y, image up is world +x: the camera's z axis points up, so it
    # looks along world -z.
    world.add_camera(name=CAMERA, pos=list(_POSITION), xyaxes=[0.0, -1.0, 0.0, 1.0, 0.0, 0.0],
                     fovy=_FOVY)


def open_eye(model: mujoco.MjModel, *, width: int = 640, height: int = 480,
             noise: float = 0.0, seed: int = 0) -> Eye:
    """
    Return an :class:`Eye` on ``model``'s :data:`CAMERA`, rendering in the calling thread.

    :param noise: Standard deviation of the sensor noise, in grey levels (0-255).
    :raises CameraError: No OpenGL backend could be started (the message says which
        setting is missing), or the size exceeds the model's offscreen buffer.
    """
    if width <= 0 or height <= 0:
        raise CameraError(f'camera size must be positive, got {width}x{height}')
    if noise < 0 or not math.isfinite(noise):
        raise CameraError(f'camera noise must be >= 0 grey levels, got {noise}')
    model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), width)
    model.vis.global_.offheight = max(int(model.vis.global_.offheight), height)
    # GLFW says why it failed in Python warnings (no DISPLAY, ...): kept for the one line
    with warnings.catch_warnings(record=True) as said_meanwhile:
        warnings.simplefilter('always')
        try:
            renderer = mujoco.Renderer(model, height=height, width=width)
        except Exception as err:  # noqa: B902 (mujoco raises RuntimeError, FatalError or worse)
            backend = os.environ.get('MUJOCO_GL')
            said = f'MUJOCO_GL={backend} could not start' if backend else \
                'MUJOCO_GL is not set and there is no display'
            why = ''.join(f': {w.message}' for w in said_meanwhile[:1])
            raise CameraError(
                f'the camera needs an OpenGL backend: {said} ({type(err).__name__}{why}); set '
                'MUJOCO_GL=egl (Mesa EGL, headless on the CPU) or MUJOCO_GL=osmesa') from err
    for warning in said_meanwhile:  # not ours to keep
        warnings.warn_explicit(warning.message, warning.category, warning.filename,
                               warning.lineno)
    return Eye(model, renderer, noise=noise, seed=seed)


class Eye:
    """
    Render :data:`CAMERA` (made by :func:`open_eye`; render only in the thread that made it).

    :param model: The scene.
    :param renderer: A renderer of the model's size.
    :param noise: Sensor noise, grey levels.
    :param seed: The noise generator's seed.
    """

    def __init__(self, model: mujoco.MjModel, renderer: mujoco.Renderer, *, noise: float,
                 seed: int) -> None:
        self._model = model
        self._renderer = renderer
        self._data = mujoco.MjData(model)
        self._noise = float(noise)
        self._rng = np.random.default_rng(seed)
        self._camera = model.camera(CAMERA).id
        renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False

    @property
    def intrinsics(self) -> Intrinsics:
        """Return the pinhole model of the camera: square pixels, centred."""
        width, height = self._renderer.width, self._renderer.height
        fy = height / 2.0 / math.tan(math.radians(float(self._model.cam_fovy[self._camera])) / 2)
        return Intrinsics(width, height, fy, fy, (width - 1) / 2.0, (height - 1) / 2.0)

    @property
    def noise(self) -> float:
        """Return the sensor noise, grey levels."""
        return self._noise

    @noise.setter
    def noise(self, value: float) -> None:
        """Change the sensor noise from the next frame on (a camera whose gain went up)."""
        if not (math.isfinite(value) and value >= 0.0):
            raise CameraError(f'camera noise must be >= 0 grey levels, got {value}')
        self._noise = float(value)

    def frame(self, qpos: np.ndarray, mocap: tuple[np.ndarray, np.ndarray] | None = None
              ) -> np.ndarray:
        """
        Render the scene at the joint positions ``qpos``; return rgb8, (height, width, 3).

        :param qpos: A copy of the simulation's ``qpos`` (taken under its lock).
        :param mocap: A copy of its mocap positions and orientations, if it has mocap bodies.
        """
        data = self._data
        data.qpos[:] = qpos
        if mocap is not None:
            data.mocap_pos[:], data.mocap_quat[:] = mocap
        mujoco.mj_kinematics(self._model, data)
        mujoco.mj_camlight(self._model, data)
        self._renderer.update_scene(data, camera=self._camera)
        pixels = self._renderer.render()
        if self._noise > 0.0:
            noisy = pixels + self._rng.normal(0.0, self._noise, pixels.shape)
            pixels = np.clip(np.rint(noisy), 0, 255).astype(np.uint8)
        return np.asarray(pixels)

    def close(self) -> None:
        """Free the renderer's GL context."""
        self._renderer.close()
