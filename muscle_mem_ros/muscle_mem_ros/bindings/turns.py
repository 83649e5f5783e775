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
Goals that follow a frame's rotation: orientation bindings.

A cube turned by 30 degrees on the table is grasped turned by 30 degrees; a dock that turned
15 degrees is approached from its new front. A position binding (``field = source + offset``)
cannot say either: a rotation does not shift as a sum, and a standoff from a turned thing
turns with it. So an orientation binding is its own kind:

* **What it binds.** A goal's quaternion (``field`` names the ``geometry_msgs/Quaternion``,
  e.g. ``target.pose.orientation``) to the rotation of a pose sensor (a TF sensor,
  ``source: sensor:<name>`` without an index). It is declared (``max_angle``), or inferred
  from two or more recordings with the evidence rules of positions (:mod:`.inference`).
* **What it keeps.** The goal's rotation relative to the object at recording,
  ``turn = q_object_rec* q_goal_rec``. At replay the goal is sent as ``q_object_now turn``:
  the recorded grasp, turned with the object. Quaternions are composed as rotations
  (:mod:`~muscle_mem_ros.checks.poses`), never added or compared element by element.
* **How far.** The object's rotation may differ from the recording by at most ``max_angle``
  (radians, the angle of ``q_object_rec* q_object_now``); beyond it the replay misses, saying
  the angle, and the agent is asked.
* **What turns with it.** Position bindings of the same goal pose (``<pose>.position.x``
  beside ``<pose>.orientation``) to the same sensor's origin keep their offset in the object's
  frame: the offset recorded from the object is turned by the object's turn
  (``p = p_object_now + R(delta) (p_goal_rec - p_object_rec)``, ``delta = q_now q_rec*``).
  A cube grasped at its centre is unchanged by that; a base that docks 0.5 m in front of a
  tag is sent to 0.5 m in front of the turned tag.
* **What is expected after it.** The object's pose elements are range-checked (the angle
  against ``max_angle``) instead of compared literally; what the step carried (a pose sensor
  whose origin followed a bound position field: the cube in the gripper) is expected turned
  by ``delta`` after it (:func:`carried_turns`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import math
from typing import Any

import numpy as np

from .rules import (
    Binding, DECLARED, Declared, goal_leaves, INFERRED, is_number, Source, SourceKind,
)
from ..checks.poses import canonical, relative_turns, turned
from ..transforms.rotation import inverse, multiply, normalize, rotate

__all__ = ['AXES', 'carried_turns', 'DEFAULT_MAX_ANGLE', 'fit_turn', 'infer_turns', 'limit_angle',
           'pose_of', 'position_fields', 'quaternion_of', 'rotated_offset', 'TurnCheck',
           'turn_source', 'turned_ahead']

AXES = ('x', 'y', 'z', 'w')
"""The leaves of a quaternion field, in the order of ``geometry_msgs/Quaternion``."""


def quaternion_of(leaves: Mapping[str, object], field: str) -> tuple[float, ...] | None:
    """Return the quaternion a goal holds at ``field`` (its four leaves), None if it holds none."""
    q = [leaves.get(f'{field}.{axis}') for axis in AXES]
    if not all(is_number(v) for v in q):
        return None
    values = tuple(float(v) for v in q)  # type: ignore[arg-type]
    return values if sum(v * v for v in values) > 0.5 else None


def pose_of(sources: Mapping[str, float], sensor: str,
            ) -> tuple[tuple[float, float, float], tuple[float, float, float, float]] | None:
    """Return a pose sensor's origin and rotation from a snapshot's sources, None if absent."""
    values = [sources.get(f'sensor:{sensor}[{i}]') for i in range(7)]
    if any(v is None or not math.isfinite(v) for v in values):
        return None
    v = [float(x) for x in values]  # type: ignore[arg-type]
    return (v[0], v[1], v[2]), normalize((v[3], v[4], v[5], v[6]))


def turn_source(binding: Binding | str) -> str | None:
    """Return the pose sensor an orientation binding (or an ahead source) turns with, else None."""
    text = binding if isinstance(binding, str) else binding.source
    if not isinstance(binding, str) and binding.turn is None:
        return None
    try:
        source = Source.parse(text)
    except ValueError:
        return None
    return source.name if source.kind is SourceKind.SENSOR and source.index is None else None


def position_fields(field: str) -> tuple[str, str, str] | None:
    """Return the position leaves beside an orientation field (``a.orientation``: a.position.x)."""
    head, dot, last = field.rpartition('.')
    if last != 'orientation':
        return None
    prefix = f'{head}{dot}position'
    return (f'{prefix}.x', f'{prefix}.y', f'{prefix}.z')


def fit_turn(decl: Declared, goal: Mapping[str, object],
             pre: Mapping[str, float]) -> Binding | None:
    """
    Return a declared orientation binding fitted to one recorded step, None if it binds none.

    It binds the step when its goal has a quaternion at ``decl.field`` and the pose sensor was
    seen before it, and, when the goal has a position beside it, that position lies within
    ``max_offset`` of the sensor's origin (a goal at, or a standoff from, the thing).
    """
    sensor = turn_source(decl.source)
    q_goal = quaternion_of(goal, decl.field)
    pose = pose_of(pre, sensor) if sensor is not None else None
    if sensor is None or q_goal is None or pose is None:
        return None
    origin, q_object = pose
    beside = position_fields(decl.field)
    if beside is not None and all(is_number(goal.get(f)) for f in beside):
        reach = decl.max_offset if decl.max_offset is not None else decl.max_shift
        far = math.dist([float(goal[f]) for f in beside], origin)  # type: ignore[arg-type]
        if reach is not None and far > reach:
            return None
    turn = multiply(inverse(q_object), normalize(q_goal))  # type: ignore[arg-type]
    return Binding(decl.field, f'sensor:{sensor}', 0.0, decl.max_angle, DECLARED, turn=turn)


def rotated_offset(binding: Binding, axis: int, delta: tuple[float, float, float, float],
                   goal: Mapping[str, object], origin: tuple[float, float, float],
                   fields: tuple[str, str, str], offsets: Mapping[str, float]) -> float:
    """
    Return a position binding's offset turned with its object (the module's rule).

    :param binding: The position binding (its field is ``fields[axis]``).
    :param axis: 0, 1, 2.
    :param delta: The object's turn since the recording, in the goal's frame.
    :param goal: The recorded goal's leaves.
    :param origin: The object's recorded origin.
    :param fields: The position leaves beside the orientation.
    :param offsets: The fitted offsets of the bound position leaves.
    """
    vector = tuple(offsets[f] if f in offsets else float(goal[f]) - origin[i]  # type: ignore
                   for i, f in enumerate(fields))
    return float(rotate(delta, vector)[axis])  # type: ignore[arg-type]


class TurnCheck:
    """
    The orientation bindings of one step resolved against the current world.

    :ivar deltas: Pose sensor -> its turn since the recording (``q_now q_rec*``).
    :ivar values: Quaternion leaf -> value to send.
    :ivar sources: The sensors' elements, range-checked: element -> current value.
    :ivar problem: Why the world is outside what they explain ('' when it is not).
    """

    def __init__(self, bindings: Sequence[Binding], goal: Mapping[str, object],
                 recorded: Mapping[str, float], current: Mapping[str, float]) -> None:
        self.deltas: dict[str, tuple[float, float, float, float]] = {}
        self.values: dict[str, float] = {}
        self.sources: dict[str, float] = {}
        self.problem = ''
        self.source = ''
        self.excess = 0.0
        self.limit = 0.0
        self.worst = 0.0
        for b in bindings:
            sensor = turn_source(b)
            if sensor is None or b.turn is None:
                continue
            was, now = pose_of(recorded, sensor), pose_of(current, sensor)
            q_goal = quaternion_of(goal, b.field)
            if was is None or now is None or q_goal is None:
                self._refuse(b, f'sensor {b.source} missing', math.inf, 0.0)
                return
            angle = float(relative_turns(np.asarray(was[1]), np.asarray(now[1])))
            if b.max_shift is not None and not angle <= b.max_shift:
                self._refuse(b, (f'{b.field} would turn {math.degrees(angle):.3g} deg from the '
                                 f'recording (max_angle {math.degrees(b.max_shift):.3g} deg, '
                                 f'source {b.source})'), angle, b.max_shift)
                return
            if b.max_shift:
                self.worst = max(self.worst, angle / b.max_shift)
            self.deltas[sensor] = multiply(now[1], inverse(was[1]))
            q = canonical(np.asarray(multiply(now[1], b.turn)))
            if float(np.dot(q, q_goal)) < 0.0:  # the recorded goal's sign, as sent before
                q = -q
            for axis, value in zip(AXES, q.tolist()):
                self.values[f'{b.field}.{axis}'] = value
            for i in range(3, 7):
                self.sources[f'sensor:{sensor}[{i}]'] = float(current[f'sensor:{sensor}[{i}]'])

    def _refuse(self, b: Binding, problem: str, excess: float, limit: float) -> None:
        self.problem, self.source, self.excess, self.limit = problem, b.source, excess, limit


def turned_ahead(source: str, limit: float | None, recorded: Mapping[str, float],
                 current: Mapping[str, float]) -> TurnCheck:
    """
    Return the check, made ahead, of a later step's orientation binding's frame.

    The plan's ``ahead``: the frame may not have turned beyond that step's ``max_angle``
    already (the dock turned before the base drives to it).
    """
    check = TurnCheck([], {}, recorded, current)
    sensor = turn_source(source)
    was = pose_of(recorded, sensor) if sensor is not None else None
    now = pose_of(current, sensor) if sensor is not None else None
    if sensor is None or was is None or now is None:
        return check  # checked literally here; the step that uses it refuses a missing one
    angle = float(relative_turns(np.asarray(was[1]), np.asarray(now[1])))
    if limit is not None and not angle <= limit:
        check.problem = (f'{source} turned {math.degrees(angle):.3g} deg from the recording '
                         f'(max_angle {math.degrees(limit):.3g} deg of a later step)')
        check.source, check.excess, check.limit = source, angle, limit
        return check
    if limit:
        check.worst = angle / limit
    check.sources = {f'sensor:{sensor}[{i}]': float(current[f'sensor:{sensor}[{i}]'])
                     for i in range(3, 7)}
    return check


def carried_turns(follows: Sequence[tuple[str, str]], bindings: Sequence[Binding],
                  deltas: Mapping[str, tuple[float, float, float, float]],
                  post: Mapping[str, float]) -> dict[str, float]:
    """
    Return how the step's turns move what it carried: quaternion element -> shift.

    A pose sensor whose origin followed a position field beside a turned orientation (the cube
    in the gripper ended where the grasp sent the tool) is expected turned by the same turn
    after the step: its recorded post rotation ``q`` becomes ``delta q``. The shift is that
    rotation's elements minus the recorded ones, so the recorded post plus the shift is the
    turned rotation exactly (the check then compares it as a rotation).
    """
    out: dict[str, float] = {}
    turned_fields = {f: turn_source(b) for b in bindings if turn_source(b) is not None
                     for f in (position_fields(b.field) or ())}
    for key, field in follows:
        source = turned_fields.get(field)
        if source is None:
            continue
        name = Source.parse(key).name
        pose = pose_of(post, name)
        if pose is None or source not in deltas:
            continue
        q = np.asarray(pose[1])
        now = turned(np.asarray(deltas[source]), q)
        if float(np.dot(now, q)) < 0.0:
            now = -now
        for i, value in enumerate(now.tolist()):
            out[f'sensor:{name}[{i + 3}]'] = value - float(post[f'sensor:{name}[{i + 3}]'])
    return out


DEFAULT_MAX_ANGLE = 0.5
"""Radians an inferred orientation binding's frame may turn (about 29 degrees); a declared one
says its own (``max_angle``)."""


def infer_turns(members: Sequence[Any], poses: Sequence[str],
                tolerance: Callable[[str], float | None],
                chance: Callable[[float, float, int, int], float], limit: float,
                ) -> tuple[Binding, ...]:
    """
    Return the orientation bindings that recordings of one step agree on (the evidence rules).

    As positions are inferred (:mod:`.inference`), with angles for distances: a goal quaternion
    whose rotation relative to a pose sensor's rotation is the same in every recording, within
    the sensor's rotation tolerance, while both the goal's and the sensor's rotation varied by
    more than it, is bound with that relative rotation, when the fit beats chance
    (``chance(fit, moved, n, tried)`` under ``limit``, ``tried`` the pose sensors whose rotation
    varied). Two sensors that both fit leave the goal unbound. Never from one recording.

    :param members: The recordings of the step (:class:`~.inference.Observed`: ``node``, ``pre``).
    :param poses: The pose sensors inference may bind to.
    :param tolerance: A sensor element's tolerance (a pose's quaternion element: half its
        radians, :func:`~.rules.element_tolerances`).
    :param chance: :func:`~.inference.chance`.
    :param limit: The largest chance accepted (:data:`~.inference.CHANCE`).
    """
    n = len(members)
    if n < 2:
        return ()
    goals = [goal_leaves(m.node.step) for m in members]
    fields = sorted({key.rpartition('.')[0] for key in goals[0]
                     if key.endswith('.w') and key.rpartition('.')[0].endswith('orientation')})
    rotations: dict[str, np.ndarray] = {}
    for name in poses:
        seen = [pose_of(m.pre, name) for m in members]
        radians = 2.0 * (tolerance(f'sensor:{name}[3]') or 0.0)
        if radians <= 0 or any(p is None for p in seen):
            continue
        q = np.array([p[1] for p in seen if p is not None])
        if _widest(q) > radians:  # it varied: a candidate
            rotations[name] = q
    out = []
    for field in fields:
        found = [quaternion_of(g, field) for g in goals]
        if any(q is None for q in found):
            continue
        goal = canonical(np.array(found, dtype=np.float64))
        moved = _widest(goal)
        fits = []
        for name, q in rotations.items():
            radians = 2.0 * (tolerance(f'sensor:{name}[3]') or 0.0)
            relative = np.array([multiply(inverse(_q(a)), _q(b))
                                 for a, b in zip(q.tolist(), goal.tolist())])
            fit = _widest(relative)
            if moved > radians and fit <= radians and \
                    chance(fit, moved, n, len(rotations)) < limit:
                fits.append((fit, name, relative))
        if len(fits) == 1:
            _, name, relative = fits[0]
            x, y, z, w = canonical(relative[0]).tolist()
            turn = normalize((x, y, z, w))
            out.append(Binding(field, f'sensor:{name}', 0.0, limit_angle(DEFAULT_MAX_ANGLE),
                               INFERRED, turn=turn))
    return tuple(out)


def _q(values: Sequence[float]) -> tuple[float, float, float, float]:
    return (values[0], values[1], values[2], values[3])


def limit_angle(value: float) -> float:
    """Return a ``max_angle`` as kept (radians, at most pi)."""
    return min(float(value), math.pi)


def _widest(q: np.ndarray) -> float:
    """Return the largest angle between two of the rotations (rows)."""
    return float(relative_turns(q[:, None], q[None]).max()) if len(q) else 0.0
