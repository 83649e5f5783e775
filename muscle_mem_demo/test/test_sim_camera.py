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

"""The demo's camera: rendered offscreen by MuJoCo, where the geometry says, noisy as asked."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import mujoco
from muscle_mem_demo.arms import OBJECT_START
from muscle_mem_demo.camera import CAMERA, open_eye
from muscle_mem_demo.physics import ArmSim
from muscle_mem_ros.checks.images import deviations, Frame, Grid
import numpy as np
import pytest


@pytest.fixture(scope='module')
def sim() -> ArmSim:
    return ArmSim()


@pytest.fixture(scope='module')
def eye(sim):
    eye = open_eye(sim.model, noise=2.0, seed=1)
    yield eye
    eye.close()


def _cells(pixels: np.ndarray) -> np.ndarray:
    frame = Frame(pixels, 'rgb8')
    return Grid(width=640, height=480, cell=16).vector(frame)


def _pixel_of(sim: ArmSim, eye, point: tuple[float, float, float]) -> tuple[int, int]:
    """Project a world point into the image with the camera's pose and intrinsics."""
    model = sim.model
    camera = model.camera(CAMERA).id
    data = mujoco.MjData(model)
    data.qpos[:] = sim.positions()
    mujoco.mj_kinematics(model, data)
    mujoco.mj_camlight(model, data)
    rotation = data.cam_xmat[camera].reshape(3, 3)  # columns: camera x, y, z in the world
    local = rotation.T @ (np.asarray(point) - data.cam_xpos[camera])
    k = eye.intrinsics
    # MuJoCo cameras look along -z with y up; image rows grow downwards.
    u = k.cx + k.fx * local[0] / -local[2]
    v = k.cy - k.fy * local[1] / -local[2]
    return int(round(u)), int(round(v))


def test_the_cube_is_where_the_intrinsics_put_it(sim, eye):
    sim.reset()
    pixels = eye.frame(sim.positions())
    assert pixels.shape == (480, 640, 3) and pixels.dtype == np.uint8
    u, v = _pixel_of(sim, eye, (OBJECT_START[0], OBJECT_START[1], 0.04))
    red, green, blue = (int(c) for c in pixels[v, u])
    assert blue > red + 40 and blue > green + 20, (u, v, pixels[v, u])  # the blue cube
    k = eye.intrinsics
    assert k.k[0] == k.fx and k.width == 640
    assert k.fy == pytest.approx(240 / math.tan(math.radians(36.0) / 2))


def test_noise_stays_small_and_a_2cm_move_of_the_cube_stands_out(sim, eye):
    sim.reset()
    recorded = _cells(eye.frame(sim.positions()))
    again = _cells(eye.frame(sim.positions()))
    x, y, z = OBJECT_START
    sim.move_object(position=(x, y + 0.02, z))
    moved = _cells(eye.frame(sim.positions()))
    sim.reset()
    noise = float(np.nanmax(np.abs(deviations(recorded, again, channels=3))))
    shift = float(np.nanmax(np.abs(deviations(recorded, moved, channels=3))))
    assert noise < 0.02 and shift > 0.1, (noise, shift)


def test_the_arm_is_in_view(sim, eye):
    sim.reset()
    before = _cells(eye.frame(sim.positions()))
    qpos = sim.positions()
    qpos[0] += 0.6  # the first joint turns the arm over the table
    after = _cells(eye.frame(qpos))
    assert float(np.nanmax(np.abs(deviations(before, after, channels=3)))) > 0.1


def test_without_a_gl_backend_the_camera_says_so_in_one_line():
    env = {k: v for k, v in os.environ.items() if k not in ('DISPLAY', 'WAYLAND_DISPLAY')}
    env['MUJOCO_GL'] = 'glfw'
    code = ('from muscle_mem_demo.physics import ArmSim\n'
            'from muscle_mem_demo.camera import CameraError, open_eye\n'
            'try:\n'
            '    open_eye(ArmSim().model)\n'
            'except CameraError as err:\n'
            '    print(err)\n')
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                         timeout=120)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, (out.stdout, out.stderr)
    assert lines[0].startswith('the camera needs an OpenGL backend: MUJOCO_GL=glfw could not '
                               'start'), lines
    assert 'set MUJOCO_GL=egl' in lines[0]
