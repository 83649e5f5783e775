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
ROS-free pick-and-place planning for the demo arm, one step at a time from the current state.

The demo agent calls :func:`next_step` before every step with what it perceives now (joint
positions, jaw state, the cube's pose), as an LLM or VLM planner would be queried per step.
From home the answer sequence is eight steps: move above the object, descend, close the
gripper, lift, move above the place target, lower, open the gripper, return home. The arm moves
are Cartesian (:attr:`StepKind.POSE`: a target for the grasp point, sent as a MoveToPose goal)
except the last, a joint-space move home (:attr:`StepKind.MOVE`, a joint trajectory). The
targets are derived from data the way a script would derive them: the moves to and from the
cube take their x, y from its perceived position, exactly (no offset), and the moves at the
place target take the target's x, y exactly as given; heights are constants of the spec. That
is what lets the behavior cache bind those goal fields (a sensor feature plus an offset, a task
parameter by equality) and retarget a replay. Because each
answer depends only on the current state, the same function resumes a task anywhere: if the
cube was knocked away after the first step, the next answer is "move above the object" at its
new position. :func:`plan` rolls the sequence forward on the ideal outcome of each step, for
previews and tests.

A cube turned on the table is grasped turned: the moves to and from it (above it, down to it,
the lift) turn the gripper by the cube's perceived yaw (:func:`grasp_yaw`: the cube looks the
same every quarter turn, so the yaw nearest zero), and the moves at the place target turn it
back to yaw 0, so the cube lands unturned. The carry to the place target runs higher
(``carry_height``) than the hover above the cube: a goal's distance from the cube then tells
the grasp (within 13 cm of the cube) from the place (17.5 cm from the cube in the jaws), which
is how the cache's orientation binding picks the goals that turn with the cube.

The agent also knows the pick-and-place as two skills and two tasks made of them.
:func:`next_pick_step` plans ``pick`` (approach, descend, close, lift: it ends holding the
cube at hover height), :func:`next_place_step` plans ``place`` (carry, lower, open, return
home: it needs the cube in the jaws, or already at the target). :func:`next_subtask` is the
decomposition of the parents of :data:`PARENT_PLACES` (``restock``: the cube to the shelf,
``tidy``: the cube to the bin): ``pick`` while the cube is not held, ``place`` while it is,
nothing once it rests at the target with the arm home; like :func:`next_step`, it decides
from the current state only, so a parent resumes anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
import enum
import math

from muscle_mem_demo import kinematics
from muscle_mem_demo.kinematics import GraspPoint

__all__ = [
    'BIN',
    'PARENT_PLACES',
    'PickPlaceSpec',
    'PlanningError',
    'SHELF',
    'PlannedStep',
    'StepKind',
    'WorldView',
    'grasp_yaw',
    'next_pick_step',
    'next_place_step',
    'next_step',
    'next_subtask',
    'plan',
]

SHELF: tuple[float, float] = (0.4, -0.3)
"""Where ``restock`` puts the cube (the agent's default place target), metres."""

BIN: tuple[float, float] = (0.4, -0.15)
"""Where ``tidy`` puts the cube, metres: 15 cm from the shelf along y."""

PARENT_PLACES: dict[str, tuple[float, float]] = {'restock': SHELF, 'tidy': BIN}
"""The tasks the agent decomposes into ``pick`` and ``place`` subtasks, with their place
target (a task parameter ``place`` overrides it)."""


class PlanningError(Exception):
    """The task cannot go on from this state (for ``place``: nothing is held)."""


class StepKind(enum.Enum):
    """What a planned step commands."""

    MOVE = 'move'
    """A joint trajectory to ``PlannedStep.joints`` (the joint-space move home)."""
    POSE = 'pose'
    """A Cartesian move of the grasp point to ``PlannedStep.target``, gripper down."""
    GRIPPER = 'gripper'
    """Open or close the jaws (``PlannedStep.close``)."""


@dataclass(frozen=True)
class PlannedStep:
    """One step for the agent to send."""

    kind: StepKind
    """Trajectory or gripper."""
    label: str
    """Short description, for example 'descend to the object'."""
    joints: tuple[float, ...] = ()
    """Target arm joint positions (ARM_JOINTS order) for MOVE steps; for POSE steps the
    inverse kinematics of the target (what the robot will solve)."""
    duration: float = 0.0
    """Seconds the motion takes, for MOVE and POSE steps."""
    target: GraspPoint | None = None
    """Where the grasp point goes, world frame, for POSE steps."""
    close: bool = False
    """For GRIPPER steps: True closes, False opens."""
    yaw: float = 0.0
    """For POSE steps: the gripper's turn about the world z axis, radians (0: fingers closing
    along the world y axis)."""


@dataclass(frozen=True)
class WorldView:
    """What the agent perceives before a step."""

    joints: tuple[float, ...]
    """Arm joint positions, ARM_JOINTS order, radians."""
    gripper_closed: bool
    """True when the jaws are closed."""
    object_position: tuple[float, float, float]
    """Cube centre, metres, table frame."""
    object_yaw: float = 0.0
    """Cube's turn about the world z axis, radians."""


@dataclass(frozen=True)
class PickPlaceSpec:
    """Where to put the cube and how to move; defaults fit the Panda on its table."""

    place_x: float = 0.4
    """Place target, metres forward."""
    place_y: float = -0.3
    """Place target, metres left (negative: right)."""
    hover_height: float = 0.15
    """Grasp-point height for moves above the cube, metres."""
    carry_height: float = 0.2
    """Grasp-point height above the place target, metres: higher than ``hover_height``, so
    the place goals lie farther from the cube in the jaws than the grasp goals from the cube
    (module docstring)."""
    release_height: float = 0.025
    """Grasp-point height when letting go, metres (the cube centre rests at 0.02)."""
    grasp_height: float = 0.02
    """Grasp-point height when closing on the cube, metres (a constant, not the perceived
    height, so the goal does not change with sensor noise)."""
    move_time: float = 0.8
    """Seconds for moves between hover poses and home."""
    vertical_time: float = 0.5
    """Seconds for descending, lifting and lowering."""
    align_tolerance: float = 0.015
    """Horizontal distance counting as 'above' a point, metres."""
    height_tolerance: float = 0.012
    """Vertical distance counting as 'at' a height, metres."""
    holding_radius: float = 0.035
    """Cube within this distance of the grasp point with the jaws closed means held, m."""
    placed_tolerance: float = 0.03
    """Cube within this horizontal distance of the target, on the table, means placed, m."""
    home_tolerance: float = 0.03
    """Largest joint difference counting as being at home, radians."""

    def __post_init__(self) -> None:
        for name in ('hover_height', 'carry_height', 'grasp_height', 'move_time', 'vertical_time',
                     'align_tolerance', 'height_tolerance', 'holding_radius',
                     'placed_tolerance', 'home_tolerance'):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f'{name} must be a positive number, got {value}')
        if not (math.isfinite(self.place_x) and math.isfinite(self.place_y)):
            raise ValueError('place target must be finite')
        kinematics.inverse(GraspPoint(x=self.place_x, y=self.place_y, z=self.carry_height))

    @property
    def place(self) -> GraspPoint:
        """Return the place target at table height."""
        return GraspPoint(x=self.place_x, y=self.place_y, z=0.0)


def next_step(view: WorldView, spec: PickPlaceSpec) -> PlannedStep | None:
    """
    Return the next step of the pick-and-place from ``view``, or None when it is done.

    :raises kinematics.UnreachableError: the cube or the target is out of the arm's reach.
    """
    grasp = kinematics.forward(view.joints)
    ox, oy, oz = view.object_position
    cube = GraspPoint(x=ox, y=oy, z=oz)
    held = view.gripper_closed and math.dist(
        (grasp.x, grasp.y, grasp.z), view.object_position
    ) <= spec.holding_radius
    if held:
        if grasp.distance_xy(spec.place) > spec.align_tolerance:
            if grasp.z < spec.hover_height - spec.height_tolerance:
                return _move('lift the object', replace(cube, z=spec.hover_height),
                             spec.vertical_time, grasp_yaw(view.object_yaw))
            return _move('move above the place target',
                         replace(spec.place, z=spec.carry_height), spec.move_time)
        if grasp.z > spec.release_height + spec.height_tolerance:
            return _move('lower the object', replace(spec.place, z=spec.release_height),
                         spec.vertical_time)
        return PlannedStep(kind=StepKind.GRIPPER, label='open the gripper', close=False)
    if view.gripper_closed:
        return PlannedStep(kind=StepKind.GRIPPER, label='open the gripper', close=False)
    placed = cube.distance_xy(spec.place) <= spec.placed_tolerance and oz < 0.035
    if placed:
        away = max(abs(a - b) for a, b in zip(view.joints, kinematics.HOME, strict=True))
        if away > spec.home_tolerance:
            return PlannedStep(kind=StepKind.MOVE, label='return home',
                               joints=tuple(kinematics.HOME), duration=spec.move_time)
        return None
    return _approach(grasp, cube, spec, grasp_yaw(view.object_yaw))


def next_pick_step(view: WorldView, spec: PickPlaceSpec) -> PlannedStep | None:
    """
    Return the next step of ``pick`` from ``view``, or None when the cube is held up high.

    :raises kinematics.UnreachableError: the cube is out of the arm's reach.
    """
    grasp = kinematics.forward(view.joints)
    ox, oy, oz = view.object_position
    cube = GraspPoint(x=ox, y=oy, z=oz)
    if _held(view, grasp, spec):
        if grasp.z < spec.hover_height - spec.height_tolerance:
            return _move('lift the object', replace(cube, z=spec.hover_height),
                         spec.vertical_time, grasp_yaw(view.object_yaw))
        return None
    if view.gripper_closed:
        return PlannedStep(kind=StepKind.GRIPPER, label='open the gripper', close=False)
    return _approach(grasp, cube, spec, grasp_yaw(view.object_yaw))


def next_place_step(view: WorldView, spec: PickPlaceSpec) -> PlannedStep | None:
    """
    Return the next step of ``place`` from ``view``, or None when placed with the arm home.

    :raises PlanningError: the cube is neither held nor at the target.
    :raises kinematics.UnreachableError: the target is out of the arm's reach.
    """
    grasp = kinematics.forward(view.joints)
    if not _held(view, grasp, spec) and not _placed(view, spec) and not view.gripper_closed:
        ox, oy, oz = view.object_position
        raise PlanningError(f'place: the object is not held (it is at ({ox:.3f}, {oy:.3f}, '
                            f'{oz:.3f})): pick it first')
    return next_step(view, spec)


def next_subtask(view: WorldView, spec: PickPlaceSpec) -> str | None:
    """Return the next subtask of a parent placing at ``spec.place``: pick, place or None."""
    grasp = kinematics.forward(view.joints)
    if _held(view, grasp, spec):
        return 'place'
    if _placed(view, spec) and not view.gripper_closed:
        away = max(abs(a - b) for a, b in zip(view.joints, kinematics.HOME, strict=True))
        return 'place' if away > spec.home_tolerance else None
    return 'pick'


def _held(view: WorldView, grasp: GraspPoint, spec: PickPlaceSpec) -> bool:
    return view.gripper_closed and math.dist(
        (grasp.x, grasp.y, grasp.z), view.object_position) <= spec.holding_radius


def _placed(view: WorldView, spec: PickPlaceSpec) -> bool:
    ox, oy, oz = view.object_position
    return GraspPoint(x=ox, y=oy, z=oz).distance_xy(spec.place) <= spec.placed_tolerance and (
        oz < 0.035)


def grasp_yaw(object_yaw: float) -> float:
    """
    Return the gripper's yaw that grasps a cube turned by ``object_yaw``, radians.

    The cube looks the same every quarter turn: the yaw nearest zero of the four, in
    [-pi/4, pi/4).
    """
    quarter = 0.5 * math.pi
    return (object_yaw + 0.5 * quarter) % quarter - 0.5 * quarter


def _approach(grasp: GraspPoint, cube: GraspPoint, spec: PickPlaceSpec,
              yaw: float) -> PlannedStep:
    """Return the next step towards closing the open jaws on the cube, turned by ``yaw``."""
    if grasp.distance_xy(cube) > spec.align_tolerance:
        return _move('move above the object', replace(cube, z=spec.hover_height),
                     spec.move_time, yaw)
    if grasp.z > cube.z + spec.height_tolerance:
        return _move('descend to the object', replace(cube, z=spec.grasp_height),
                     spec.vertical_time, yaw)
    return PlannedStep(kind=StepKind.GRIPPER, label='close the gripper', close=True)


def plan(view: WorldView, spec: PickPlaceSpec, *, max_steps: int = 16,
         planner: Callable[[WorldView, PickPlaceSpec], PlannedStep | None] = next_step,
         ) -> list[PlannedStep]:
    """
    Return the whole remaining sequence, assuming every step ends exactly at its target.

    :param planner: The task's next-step function: :func:`next_step` (pick-and-place),
        :func:`next_pick_step` or :func:`next_place_step`.
    :raises RuntimeError: no end within ``max_steps`` (a planning bug, not a world state).
    """
    steps: list[PlannedStep] = []
    while len(steps) < max_steps:
        step = planner(view, spec)
        if step is None:
            return steps
        steps.append(step)
        view = _ideal_outcome(view, step, spec)
    raise RuntimeError(f'pick-and-place did not finish within {max_steps} steps')


def _move(label: str, target: GraspPoint, duration: float, yaw: float = 0.0) -> PlannedStep:
    return PlannedStep(kind=StepKind.POSE, label=label, joints=kinematics.inverse(target),
                       duration=duration, target=target, yaw=yaw)


def _ideal_outcome(view: WorldView, step: PlannedStep, spec: PickPlaceSpec) -> WorldView:
    grasp = kinematics.forward(view.joints)
    held = view.gripper_closed and math.dist(
        (grasp.x, grasp.y, grasp.z), view.object_position
    ) <= spec.holding_radius
    if step.kind is StepKind.GRIPPER:
        position = view.object_position
        if not step.close and held:
            position = (position[0], position[1], 0.02)
        return replace(view, gripper_closed=step.close, object_position=position)
    new_grasp = kinematics.forward(step.joints)
    position = view.object_position
    if held:
        position = (
            position[0] + new_grasp.x - grasp.x,
            position[1] + new_grasp.y - grasp.y,
            position[2] + new_grasp.z - grasp.z,
        )
    return replace(view, joints=step.joints, object_position=position)
