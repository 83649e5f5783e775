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
Orientation bindings: a goal's rotation follows a frame's, and a standoff turns with it.

A dock seen as a TF frame turned by 15 degrees and moved 20 cm: the base's docking goal, 0.5 m
in front of it and facing it, is sent 0.5 m in front of the turned dock, facing it; a cube
turned by 30 degrees is grasped turned, and after the grasp the cube in the gripper is
expected turned too. Beyond max_angle the replay misses, saying the angle.
"""

from __future__ import annotations

import json
import math

from muscle_mem_ros.bindings.judge import advance, resolve, Shift
from muscle_mem_ros.bindings.keeping import plan_from_text, plan_text
from muscle_mem_ros.bindings.learning import learn
from muscle_mem_ros.bindings.rules import Declared, element_tolerances, sensor_sources
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.records import CompareMode, Node, SensorSpec, Snapshot, Step, ToolKind
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

SENSORS = [SensorSpec('dock', (0.02, 0.05), CompareMode.POSE),
           SensorSpec('base', (0.02, 0.05), CompareMode.POSE)]
TOL = element_tolerances(SENSORS)
DOCK = (2.0, 1.0, math.radians(90.0))  # x, y, yaw: its front faces +y


def quat(yaw: float) -> tuple[float, float, float, float]:
    return tuple(Rotation.from_euler('z', yaw).as_quat().tolist())  # type: ignore[return-value]


def frame(x: float, y: float, yaw: float) -> tuple[float, ...]:
    return (x, y, 0.0, *quat(yaw))


def in_front(dock: tuple[float, float, float], distance: float) -> tuple[float, float, float]:
    """Return the pose ``distance`` in front of the dock, facing it."""
    x, y, yaw = dock
    return (x + distance * math.cos(yaw), y + distance * math.sin(yaw), yaw + math.pi)


def goto(node_id: int, target: tuple[float, float, float], dock: tuple[float, float, float],
         ) -> Node:
    x, y, yaw = target
    qx, qy, qz, qw = quat(yaw)
    goal = {'target': {'header': {'frame_id': 'map'},
                       'pose': {'position': {'x': x, 'y': y, 'z': 0.0},
                                'orientation': {'x': qx, 'y': qy, 'z': qz, 'w': qw}}}}
    pre = Snapshot(features={'dock': frame(*dock), 'base': frame(0.0, 0.0, 0.0)}, taken_at=1.0)
    post = Snapshot(features={'dock': frame(*dock), 'base': frame(*target)}, taken_at=2.0)
    step = Step(tool='/base/goto', kind=ToolKind.ACTION, type_name='demo/action/MoveToPose',
                payload=json.dumps(goal).encode(), payload_json=json.dumps(goal), pre=pre,
                post=post)
    return Node(node_id, None, 0, step)


DECLARED = [
    Declared('/base/goto', 'target.pose.position.x', 'sensor:dock[0]', 0.3, 0.7),
    Declared('/base/goto', 'target.pose.position.y', 'sensor:dock[1]', 0.3, 0.7),
    Declared('/base/goto', 'target.pose.orientation', 'sensor:dock', None, 0.7,
             max_angle=0.35),
]


def _plan(node: Node):
    return learn([([node], {})], declared=DECLARED, infer=False, tolerance=TOL)[node.id]


def _sent(node: Node, values: dict[str, float]) -> tuple[float, float, float]:
    goal = json.loads(node.step.payload_json)['target']['pose']
    x = values.get('target.pose.position.x', goal['position']['x'])
    y = values.get('target.pose.position.y', goal['position']['y'])
    q = [values.get(f'target.pose.orientation.{a}', goal['orientation'][a]) for a in 'xyzw']
    return x, y, float(Rotation.from_quat(q).as_euler('zyx')[0])


def _angle(a: float, b: float) -> float:
    return abs((a - b + math.pi) % (2 * math.pi) - math.pi)


def test_a_docking_goal_follows_a_moved_and_turned_dock() -> None:
    node = goto(1, in_front(DOCK, 0.5), DOCK)
    plan = _plan(node)
    turn = [b for b in plan.bindings if b.turn is not None]
    assert [b.field for b in turn] == ['target.pose.orientation']
    moved = (DOCK[0] + 0.2, DOCK[1] - 0.05, DOCK[2] + math.radians(15.0))
    now = Snapshot(features={'dock': frame(*moved), 'base': frame(0.0, 0.0, 0.0)}, taken_at=5.0)
    bound = resolve(plan, 0, node, {}, now)
    assert not bound.problem, bound.problem
    x, y, yaw = _sent(node, bound.values)
    want = in_front(moved, 0.5)
    assert math.dist((x, y), want[:2]) < 1e-9  # 0.5 m in front of the turned dock
    assert _angle(yaw, want[2]) < 1e-9  # facing it
    fields = {s.field for s in bound.substitutions}
    assert {'target.pose.position.x', 'target.pose.orientation.z'} <= fields
    # without the turn of the offset, the base would stop 13 cm to the side
    assert math.dist((moved[0] + 0.5 * math.cos(DOCK[2]), moved[1] + 0.5 * math.sin(DOCK[2])),
                     want[:2]) > 0.1


def test_beyond_max_angle_the_replay_misses_saying_the_angle() -> None:
    node = goto(1, in_front(DOCK, 0.5), DOCK)
    turned = (DOCK[0], DOCK[1], DOCK[2] + math.radians(30.0))
    now = Snapshot(features={'dock': frame(*turned), 'base': frame(0.0, 0.0, 0.0)})
    bound = resolve(_plan(node), 0, node, {}, now)
    assert 'target.pose.orientation would turn 30 deg' in bound.problem, bound.problem
    assert 'max_angle 20.1 deg' in bound.problem
    assert bound.excess == pytest.approx(math.radians(30.0))


def test_unchanged_world_sends_the_goal_as_recorded() -> None:
    node = goto(1, in_front(DOCK, 0.5), DOCK)
    now = Snapshot(features={'dock': frame(*DOCK), 'base': frame(0.0, 0.0, 0.0)})
    bound = resolve(_plan(node), 0, node, {}, now)
    assert not bound.problem and bound.values == {} and bound.substitutions == ()


def test_a_far_goal_is_not_bound_to_the_dock() -> None:
    node = goto(1, (0.0, -1.0, 0.0), DOCK)  # 2.2 m away: a patrol waypoint
    plans = learn([([node], {})], declared=DECLARED, infer=False, tolerance=TOL)
    assert 1 not in plans or not plans[1].bindings


def test_a_plan_with_a_turn_is_kept_and_read_back() -> None:
    plan = _plan(goto(1, in_front(DOCK, 0.5), DOCK))
    again = plan_from_text(plan_text(plan))
    assert again == plan
    turn = next(b for b in again.bindings if b.turn is not None)
    assert turn.to_json()['max_angle'] == pytest.approx(0.35)


def test_what_the_step_carried_is_expected_turned_after_it() -> None:
    # a grasp-and-lift whose tool ends where the cube ends: the cube follows the goal, so a
    # cube turned 30 degrees is expected turned 30 degrees after the lift, not as recorded
    cube = (0.4, 0.1, 0.0)
    qx, qy, qz, qw = quat(0.0)
    goal = {'target': {'pose': {'position': {'x': 0.4, 'y': 0.1, 'z': 0.2},
                                'orientation': {'x': qx, 'y': qy, 'z': qz, 'w': qw}}}}
    sensors = [SensorSpec('cube', (0.005, 0.05), CompareMode.POSE)]
    pre = Snapshot(features={'cube': frame(*cube)}, taken_at=1.0)
    post = Snapshot(features={'cube': (0.4, 0.1, 0.2, *quat(0.0))}, taken_at=2.0)
    node = Node(1, None, 0, Step(tool='/arm/move', kind=ToolKind.ACTION, type_name='t',
                                 payload=b'', payload_json=json.dumps(goal), pre=pre,
                                 post=post))
    declared = [Declared('/arm/move', 'target.pose.position.x', 'sensor:cube[0]', 0.1),
                Declared('/arm/move', 'target.pose.position.y', 'sensor:cube[1]', 0.1),
                Declared('/arm/move', 'target.pose.orientation', 'sensor:cube', None, 0.3,
                         max_angle=0.6)]  # the grasp 0.2 m above the cube's origin
    tolerance = element_tolerances(sensors)
    plan = learn([([node], {})], declared=declared, infer=False, tolerance=tolerance)[1]
    turned = (0.42, 0.08, math.radians(30.0))
    bound = resolve(plan, 0, node, {}, Snapshot(features={'cube': frame(*turned)}))
    assert not bound.problem, bound.problem
    shift = Shift()
    advance(shift, node, tolerance, plan, bound)
    expected = shift.expected(post)
    assert expected is not None
    check = ToleranceCheck(sensors=sensors)
    lifted = Snapshot(features={'cube': (0.42, 0.08, 0.2, *quat(math.radians(30.0)))})
    assert check.evaluate(expected, lifted).passed  # turned with the grasp: as expected
    as_recorded = Snapshot(features={'cube': (0.42, 0.08, 0.2, *quat(0.0))})
    result = check.evaluate(expected, as_recorded)
    assert not result.passed and 'turned 30 deg' in result.failures[0].reason
    assert np.isfinite(result.score)


def _grasp(node_id: int, cube_yaw: float, grasp_yaw: float, noise: float = 0.0) -> Node:
    """Return a grasp of a cube at (0.4, 0.1) turned ``cube_yaw``, the gripper ``grasp_yaw``."""
    qx, qy, qz, qw = quat(grasp_yaw)
    goal = {'target': {'pose': {'position': {'x': 0.4, 'y': 0.1, 'z': 0.02},
                                'orientation': {'x': qx, 'y': qy, 'z': qz, 'w': qw}}}}
    pre = Snapshot(features={'cube': frame(0.4, 0.1, cube_yaw + noise),
                             'tool': frame(0.0, 0.3, 0.7)})
    post = Snapshot(features={'cube': frame(0.4, 0.1, cube_yaw), 'tool': frame(0.4, 0.1, 0.0)})
    return Node(node_id, None, 0, Step(tool='/arm/move', kind=ToolKind.ACTION, type_name='t',
                                       payload=b'', payload_json=json.dumps(goal), pre=pre,
                                       post=post))


POSE_SENSORS = [SensorSpec('cube', (0.005, 0.05), CompareMode.POSE),
                SensorSpec('tool', (0.005, 0.05), CompareMode.POSE)]


def test_a_grasp_that_turned_with_the_cube_in_recordings_is_inferred() -> None:
    tol = element_tolerances(POSE_SENSORS)
    yaws = [0.0, 0.4, -0.3]
    nodes = [_grasp(i + 1, y, y + 0.1) for i, y in enumerate(yaws)]
    plans = learn([([n], {}) for n in nodes], tolerance=tol, sources=sensor_sources(POSE_SENSORS))
    turn = [b for b in plans[1].bindings if b.turn is not None]
    assert [(b.field, b.source) for b in turn] == [('target.pose.orientation', 'sensor:cube')]
    # the kept relative rotation is the grasp's 0.1 rad about z from the cube
    assert 2 * math.atan2(turn[0].turn[2], turn[0].turn[3]) == pytest.approx(0.1)
    # one recording is no evidence
    assert not [b for b in learn([([nodes[0]], {})], tolerance=tol,
                                 sources=sensor_sources(POSE_SENSORS)).get(1, _EMPTY).bindings
                if b.turn is not None]


def test_a_grasp_that_did_not_follow_the_cube_is_not_bound() -> None:
    tol = element_tolerances(POSE_SENSORS)
    nodes = [_grasp(1, 0.0, 0.1), _grasp(2, 0.4, 0.1), _grasp(3, -0.3, 0.6)]
    plans = learn([([n], {}) for n in nodes], tolerance=tol, sources=sensor_sources(POSE_SENSORS))
    assert not [b for p in plans.values() for b in p.bindings if b.turn is not None]


_EMPTY = type('Empty', (), {'bindings': ()})()
