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

"""The demo agent's planner: the eight steps from home, replanning from any state."""

from __future__ import annotations

import dataclasses
import math

from muscle_mem_demo import kinematics
from muscle_mem_demo.kinematics import GraspPoint
from muscle_mem_demo.physics import ArmSim, OBJECT_START
from muscle_mem_demo.planner import (
    grasp_yaw,
    next_step,
    PickPlaceSpec,
    plan,
    StepKind,
    WorldView,
)
from muscle_mem_demo.trajectory import JointPath
import pytest

EIGHT = [
    'move above the object', 'descend to the object', 'close the gripper', 'lift the object',
    'move above the place target', 'lower the object', 'open the gripper', 'return home',
]

SPEC = PickPlaceSpec()
HOME_VIEW = WorldView(joints=kinematics.HOME, gripper_closed=False,
                      object_position=OBJECT_START)


def test_from_home_the_pick_and_place_is_eight_steps_ending_at_home():
    steps = plan(HOME_VIEW, SPEC)
    assert [s.label for s in steps] == EIGHT
    assert steps[-1].joints == tuple(kinematics.HOME)
    above = kinematics.forward(steps[0].joints)
    assert (above.x, above.y, above.z) == pytest.approx(
        (OBJECT_START[0], OBJECT_START[1], SPEC.hover_height))
    grasp = kinematics.forward(steps[1].joints)
    assert (grasp.x, grasp.y, grasp.z) == pytest.approx(OBJECT_START)
    assert steps[2].kind is StepKind.GRIPPER and steps[2].close
    assert steps[6].kind is StepKind.GRIPPER and not steps[6].close


def test_the_plan_follows_the_perceived_object():
    moved = dataclasses.replace(HOME_VIEW, object_position=(0.45, 0.02, 0.02))
    first = kinematics.forward(plan(moved, SPEC)[0].joints)
    assert (first.x, first.y) == pytest.approx((0.45, 0.02))


def test_after_a_bump_it_replans_from_the_current_state():
    # step 0 done (above the old position), then the object was knocked away
    after_step0 = WorldView(
        joints=kinematics.inverse(GraspPoint(x=OBJECT_START[0], y=OBJECT_START[1], z=0.15)),
        gripper_closed=False, object_position=(0.45, 0.02, 0.02))
    steps = plan(after_step0, SPEC)
    assert [s.label for s in steps] == EIGHT
    target = kinematics.forward(steps[0].joints)
    assert (target.x, target.y) == pytest.approx((0.45, 0.02))


def test_without_a_bump_it_continues_where_it_was():
    after_step0 = WorldView(
        joints=kinematics.inverse(GraspPoint(x=OBJECT_START[0], y=OBJECT_START[1], z=0.15)),
        gripper_closed=False, object_position=OBJECT_START)
    assert [s.label for s in plan(after_step0, SPEC)] == EIGHT[1:]


def test_holding_above_the_target_it_lowers_and_lets_go():
    above_place = kinematics.inverse(GraspPoint(x=0.4, y=-0.3, z=0.15))
    view = WorldView(joints=above_place, gripper_closed=True,
                     object_position=(0.4, -0.3, 0.15))
    assert [s.label for s in plan(view, SPEC)] == EIGHT[5:]


def test_a_closed_empty_gripper_is_opened_first():
    view = dataclasses.replace(HOME_VIEW, gripper_closed=True)
    assert next_step(view, SPEC).label == 'open the gripper'


def test_done_when_placed_and_home():
    view = dataclasses.replace(HOME_VIEW, object_position=(0.41, -0.29, 0.02))
    assert next_step(view, SPEC) is None


def test_place_target_from_the_spec():
    spec = PickPlaceSpec(place_x=0.45, place_y=-0.1)
    target = kinematics.forward(plan(HOME_VIEW, spec)[5].joints)
    expected = (0.45, -0.1, spec.release_height)
    assert (target.x, target.y, target.z) == pytest.approx(expected,
                                                           abs=kinematics.POSITION_TOLERANCE)


def test_unreachable_targets_are_refused():
    with pytest.raises(kinematics.UnreachableError):
        PickPlaceSpec(place_x=2.0, place_y=0.0)
    far = dataclasses.replace(HOME_VIEW, object_position=(1.5, 0.0, 0.02))
    with pytest.raises(kinematics.UnreachableError):
        next_step(far, SPEC)


def test_bad_spec_values_name_the_field():
    with pytest.raises(ValueError, match='move_time'):
        PickPlaceSpec(move_time=0.0)


def test_executing_the_plan_in_the_simulation_places_the_object():
    sim = ArmSim()
    for _ in range(12):
        state = sim.state()
        arm = len(kinematics.ARM_JOINTS)
        view = WorldView(joints=state.positions[:arm],
                         gripper_closed=kinematics.jaws_closed(state.positions[arm:]),
                         object_position=state.object_position)
        step = next_step(view, SPEC)
        if step is None:
            break
        if step.kind is StepKind.GRIPPER:
            motion = sim.set_gripper(closed=step.close)
        else:
            motion = sim.follow(
                names=kinematics.ARM_JOINTS, tolerance=0.005,
                path=JointPath(times=[step.duration], positions=[step.joints],
                               velocities=[[0.0] * len(step.joints)]))
        while not motion.done:
            sim.advance(0.01)
    else:
        pytest.fail('the plan did not finish within 12 steps')
    x, y, z = sim.state().object_position
    assert (x, y) == pytest.approx((SPEC.place_x, SPEC.place_y), abs=0.01)
    assert z == pytest.approx(0.02, abs=0.003)


@pytest.mark.parametrize('cube, place', [
    (OBJECT_START, (0.4, -0.3)),
    ((0.455123456789, 0.2401, 0.0198), (0.44, -0.27)),
])
def test_cartesian_goals_carry_the_cube_and_place_values_exactly(cube, place):
    """
    Check the x, y the cache's bindings rely on: equal, not merely close, to their sources.

    Moves to and from the cube take the perceived cube x, y; moves at the target take the
    place parameter's x, y; heights are constants of the spec (not the perceived height, so
    sensor noise does not change a goal); the move home is the only joint-space step.
    """
    spec = PickPlaceSpec(place_x=place[0], place_y=place[1])
    view = dataclasses.replace(HOME_VIEW, object_position=cube)
    steps = plan(view, spec)
    assert [s.label for s in steps] == EIGHT
    kinds = [s.kind for s in steps]
    assert kinds == [StepKind.POSE, StepKind.POSE, StepKind.GRIPPER, StepKind.POSE,
                     StepKind.POSE, StepKind.POSE, StepKind.GRIPPER, StepKind.MOVE]
    targets = [(s.target.x, s.target.y, s.target.z) for s in steps if s.target is not None]
    assert targets == [
        (cube[0], cube[1], spec.hover_height),
        (cube[0], cube[1], spec.grasp_height),
        (cube[0], cube[1], spec.hover_height),
        (place[0], place[1], spec.carry_height),
        (place[0], place[1], spec.release_height),
    ]
    for step in steps:
        if step.target is not None:
            assert step.joints == kinematics.inverse(step.target)


@pytest.mark.parametrize(('cube_yaw', 'grasp'), [
    (30.0, 30.0), (-20.0, -20.0), (80.0, -10.0), (45.0, -45.0), (0.0, 0.0)])
def test_a_turned_cube_is_grasped_turned_and_placed_at_yaw_0(cube_yaw, grasp):
    """The moves to and from the cube turn by its yaw (nearest zero of the quarter turns)."""
    view = dataclasses.replace(HOME_VIEW, object_yaw=math.radians(cube_yaw))
    steps = [s for s in plan(view, SPEC) if s.kind is StepKind.POSE]
    assert [math.degrees(s.yaw) for s in steps] == pytest.approx([grasp] * 3 + [0.0, 0.0])
    assert grasp_yaw(math.radians(cube_yaw)) == pytest.approx(math.radians(grasp))


def test_the_place_goals_lie_farther_from_the_cube_than_the_grasp_goals():
    """What lets an orientation binding's max_offset (0.15 m) pick the grasp goals only."""
    cube = (OBJECT_START[0], OBJECT_START[1], 0.02)
    steps = plan(dataclasses.replace(HOME_VIEW, object_position=cube), SPEC)
    poses = [s for s in steps if s.kind is StepKind.POSE]
    # the cube where the step starts: on the table for the first three, in the jaws after
    at = [cube, cube, cube, (cube[0], cube[1], SPEC.hover_height),
          (SPEC.place_x, SPEC.place_y, SPEC.carry_height)]
    far = [math.dist((s.target.x, s.target.y, s.target.z), c) for s, c in zip(poses, at)]
    assert max(far[:3]) < 0.14 and min(far[3:]) > 0.16, far
