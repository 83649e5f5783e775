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

"""The camera's distractor in the simulation: parked out of sight and touching nothing, dropped."""

from __future__ import annotations

import mujoco
from muscle_mem_demo.arms import OBJECT_START
from muscle_mem_demo.camera import open_eye
from muscle_mem_demo.distractor import HALF_SIZE, NAME, PARK
from muscle_mem_demo.physics import ArmSim
import numpy as np
import pytest


@pytest.fixture
def sim() -> ArmSim:
    return ArmSim()


def _contacts_of_the_box(sim: ArmSim) -> int:
    data = mujoco.MjData(sim.model)
    data.qpos[:] = sim.positions()
    mujoco.mj_forward(sim.model, data)
    box = sim.model.geom(NAME).id
    return sum(box in (c.geom1, c.geom2) for c in data.contact[:data.ncon])


def test_parked_it_stays_put_touches_nothing_and_leaves_the_cube_alone(sim):
    assert sim.distractor_position() == pytest.approx(PARK)
    sim.advance(2.0)
    assert sim.distractor_position() == pytest.approx(PARK, abs=1e-9)
    assert _contacts_of_the_box(sim) == 0
    assert sim.state().object_position == pytest.approx(OBJECT_START, abs=1e-3)


def test_parked_it_is_out_of_the_cameras_sight(sim):
    eye = open_eye(sim.model, width=320, height=240)
    try:
        parked = eye.frame(sim.positions())
        sim.move_distractor(position=(OBJECT_START[0] + 0.1, OBJECT_START[1], HALF_SIZE))
        on_the_table = eye.frame(sim.positions())
        sim.move_distractor(position=(30.0, 30.0, 30.0))  # nowhere near anything
        gone = eye.frame(sim.positions())
    finally:
        eye.close()
    assert np.array_equal(parked, gone)  # no noise: the same pixels, so not in view
    assert np.abs(parked.astype(int) - on_the_table).max() > 100  # the camera would see it


def test_dropped_over_the_table_it_falls_and_lands_there_and_reset_parks_it(sim):
    sim.move_distractor(position=(0.35, -0.15, 0.3))
    sim.advance(0.1)
    x, y, z = sim.distractor_position()
    assert 0.1 < z < 0.3  # falling
    sim.advance(1.5)
    assert sim.distractor_position() == pytest.approx((0.35, -0.15, HALF_SIZE), abs=1e-3)
    assert _contacts_of_the_box(sim) >= 4  # resting on its face
    assert sim.state().object_position == pytest.approx(OBJECT_START, abs=1e-3)
    sim.reset()
    assert sim.distractor_position() == pytest.approx(PARK)
    sim.advance(1.0)
    assert sim.distractor_position() == pytest.approx(PARK, abs=1e-9)


def test_dropped_on_the_cube_it_rests_on_it(sim):
    x, y, _ = OBJECT_START
    sim.move_distractor(position=(x, y, 0.3))
    sim.advance(1.5)
    assert sim.distractor_position() == pytest.approx((x, y, 0.04 + HALF_SIZE), abs=2e-3)


@pytest.mark.parametrize('position, orientation', [
    ((0.3, float('nan'), 0.2), (1.0, 0.0, 0.0, 0.0)),
    ((0.3, 0.1), (1.0, 0.0, 0.0, 0.0)),
    ((0.3, 0.1, 0.2), (0.0, 0.0, 0.0, 0.0)),
])
def test_a_bad_pose_is_refused_and_the_box_stays_parked(sim, position, orientation):
    with pytest.raises(ValueError, match='distractor'):
        sim.move_distractor(position=position, orientation=orientation)
    assert sim.distractor_position() == pytest.approx(PARK)
