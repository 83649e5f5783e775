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
Bindings: goal fields that follow the world and the task instead of repeating a recording.

An agent's goal field is either a constant or derived from data it saw: a task
parameter ("place the cube at [0.3, -0.3]") or a sensor reading (the perceived
cube). A :class:`Binding` says which: ``field = source + offset``. At replay the
field is recomputed from the current source and the rest of the goal is sent as
recorded, so one demonstration serves a family of situations.

Vocabulary (ROS-free, shared by the node and the Python ``Engine``):

* A goal is seen as its **leaves**: ``{path: value}`` of its numeric and string
  fields, e.g. ``target.pose.position.x`` or ``points[0].positions[2]``
  (:func:`leaves`; the node reads them from ``Step.payload_json``).
* A source is ``param:<key>`` / ``param:<key>[i]`` (a task parameter or one
  element of a list parameter) or ``sensor:<feature>[i]`` (element ``i`` of a
  configured sensor's feature vector in the step's pre snapshot).
* Orientation, headers, stamps and frame ids are never bound as ``source + offset``
  (:func:`bindable_leaves` recognizes them by their fields): a rotation does not
  shift as a sum, and bookkeeping is not a place. An orientation follows a frame as a
  rotation instead (:mod:`.turns`).

Where bindings come from (:mod:`.learning`):

* **declared** in the node's params file (per tool): field, source and
  ``max_shift``; a sensor binding's offset is the recording's ``goal - source``,
  and it binds only the steps where that offset is within ``max_shift`` (a goal
  at or near the thing sensed; the same tool's other goals stay as recorded);
* **inferred** from parameters: a leaf equal to a parameter's leaf (numbers
  other than 0, non-empty strings; an integer leaf only an integer parameter) is
  bound to it, with no range (the caller names the value). Within a tree that is
  one recording; a tree shared by other values of the parameter needs a second
  recording whose field followed another value (:func:`.filing.witnessed`);
* **inferred** from sensors, from two or more recordings of the same step (the
  steps at the same depth of trajectories of the same shape): a float leaf
  that varies, whose difference to a sensor element that also varies is the
  same in every recording within the sensor's tolerance, is bound with the
  mean difference as offset. A leaf that varied inconsistently is never bound,
  nor one whose fit chance explains (:func:`.inference.chance`).

The rest of the slice, one concept per module: :mod:`.learning` (plans from the
recordings), :mod:`.variants` (trees whose parameters are bound),
:mod:`.judge` (replay under bindings: checks moved by the walk's shift, one
judge for the node and the ``Engine``) and :mod:`.filing` (a recording the
bindings explain follows the learned step instead of branching).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
import functools
import json
import math
import re
from typing import Any, TypeGuard

from ..records import CompareMode, SensorSpec, Snapshot, Step, ToolKind

__all__ = [
    'BIND_AUTO_LIMIT', 'bindable_leaves', 'Binding', 'DECLARED', 'Declared', 'DEFAULT_MAX_SHIFT',
    'element_tolerances', 'goal_leaves', 'INFERRED', 'is_number', 'leaves', 'moved_sensors',
    'param_leaves', 'parse_path', 'Plan', 'sensor_elements', 'sensor_sources', 'Source',
    'SourceKind', 'SourceRule',
    'split_element', 'Substitution',
]

DECLARED = 'declared'
"""Origin of a binding written in the params file."""
INFERRED = 'inferred'
"""Origin of a binding found in the recordings."""

_PATH = re.compile(r'([^.\[\]]+)|\[(\d+)\]')
_SOURCE = re.compile(r'^param:(.+)$|^sensor:([^\[\]]+)(?:\[(\d+)\])?$|^capture(?::(.+))?$')

DEFAULT_MAX_SHIFT = 0.1
"""How far (the sensor's unit) a binding may move a goal from its recording, unless set."""


class SourceKind(Enum):
    """What a binding's source is."""

    PARAM = 'param'
    """A task parameter leaf: ``param:<key>``, ``param:<key>[i]``."""
    SENSOR = 'sensor'
    """An element of a configured sensor's feature vector: ``sensor:<feature>[i]``."""
    CAPTURE = 'capture'
    """A leaf of a Python check's capture: ``capture``, ``capture:<path>``."""


@dataclass(frozen=True)
class Source:
    """
    A binding's source, parsed from its text once (:meth:`parse`).

    The text (``str(source)``) is what records, messages and the params file carry
    and what the sources of a snapshot are keyed by.

    :ivar kind: Parameter, sensor element or capture leaf.
    :ivar name: The parameter's path (``place[0]``), the sensor's feature name, or the
        path in the capture ('' for the capture itself).
    :ivar index: The sensor element (None: the whole vector, in a declaration).
    """

    kind: SourceKind
    name: str
    index: int | None = None

    @staticmethod
    @functools.lru_cache(maxsize=65536)
    def parse(text: str) -> Source:
        """
        Parse ``param:<key>[i]``, ``sensor:<feature>[i]`` or ``capture:<path>``.

        :raises ValueError: the text is none of these.
        """
        found = _SOURCE.match(text)
        if found is None:
            raise ValueError(f'{text!r} is not param:<key>[i], sensor:<sensor>[i] or '
                             'capture:<path>')
        param, sensor, index, captured = found.groups()
        if param is not None:
            return Source(SourceKind.PARAM, param)
        if sensor is not None:
            return Source(SourceKind.SENSOR, sensor, int(index) if index else None)
        return Source(SourceKind.CAPTURE, captured or '')

    def __str__(self) -> str:
        if self.kind is SourceKind.CAPTURE:
            return f'capture:{self.name}' if self.name else 'capture'
        index = '' if self.index is None else f'[{self.index}]'
        return f'{self.kind.value}:{self.name}{index}'


@dataclass(frozen=True)
class Binding:
    """
    One goal field computed at replay as ``source + offset``.

    :ivar field: Leaf path in the goal, e.g. ``target.pose.position.x``.
    :ivar source: ``param:<key>[i]`` or ``sensor:<feature>[i]``.
    :ivar offset: Added to a numeric source (0 for parameters).
    :ivar max_shift: Largest allowed ``|value - recorded value|``; None = any. For an
        orientation binding, the largest angle (radians) its source may turn: ``max_angle``.
    :ivar origin: :data:`DECLARED` or :data:`INFERRED`.
    :ivar turn: An orientation binding (:mod:`.turns`): the goal's recorded rotation relative
        to its source's, ``q_source* q_goal`` (x, y, z, w); ``field`` names the quaternion and
        ``source`` the pose sensor (``sensor:<name>``). None: ``source + offset``.
    """

    field: str
    source: str
    offset: float = 0.0
    max_shift: float | None = None
    origin: str = INFERRED
    turn: tuple[float, float, float, float] | None = None

    @property
    def is_param(self) -> bool:
        """Return True when the source is a task parameter."""
        return Source.parse(self.source).kind is SourceKind.PARAM

    def to_json(self) -> dict[str, Any]:
        """Return the binding as JSON data (GetTrajectory, events, the CLI)."""
        if self.turn is not None:
            return {'field': self.field, 'source': self.source,
                    'turn': [round(v, 9) for v in self.turn], 'max_angle': self.max_shift,
                    'origin': self.origin}
        return {'field': self.field, 'source': self.source, 'offset': round(self.offset, 9),
                'max_shift': self.max_shift, 'origin': self.origin}


@dataclass(frozen=True)
class Substitution:
    """
    One field a replay recomputed: what was recorded, what was sent, and why.

    :ivar step: Step index in the walk.
    :ivar tool: The step's tool.
    :ivar field: Leaf path in the goal.
    :ivar source: The binding's source.
    :ivar origin: The binding's origin.
    :ivar recorded: The recorded value.
    :ivar value: The value sent.
    """

    step: int
    tool: str
    field: str
    source: str
    origin: str
    recorded: Any
    value: Any

    def describe(self) -> str:
        """Render it for messages: 'target.pose.position.x=0.412 (sensor:object[0])'."""
        value = f'{self.value:.4g}' if isinstance(self.value, float) else repr(self.value)
        return f'{self.field}={value} ({self.source})'


@dataclass(frozen=True)
class Plan:
    """
    The bindings of one learned step, and which post elements follow its fields.

    :ivar bindings: One per bound field.
    :ivar follows: (post element key, field) pairs: the element moved with the field
        at recording, so it is expected moved by the field's shift at replay.
    :ivar ahead: (sensor source, max_shift) of bindings of later steps of the branch: the
        world may already differ there (the cube moved before the arm gets to it); the
        step that uses the source checks it again. A group's sensor binding counts here
        even at a step where a declared or parameter binding of the same field wins: the
        recordings say the field went with that source, so a shift beyond its range is a
        world they do not account for.
    :ivar edits: (field, delta) of unbound numeric fields a person moved in a behavior tree
        document (:mod:`..bt.document`): the goal is sent as edited, and the post elements
        that followed the field at recording (``follows``) are expected moved by ``delta``,
        as a bound field's shift moves them. Learned plans have none.
    """

    bindings: tuple[Binding, ...] = ()
    follows: tuple[tuple[str, str], ...] = ()
    ahead: tuple[tuple[str, float | None], ...] = ()
    edits: tuple[tuple[str, float], ...] = ()


def parse_path(path: str) -> list[str | int]:
    """Split ``a.b[2].c`` into ``['a', 'b', 2, 'c']``."""
    return [int(index) if index else name for name, index in _PATH.findall(path)]


def leaves(value: Any, prefix: str = '') -> dict[str, Any]:
    """
    Return the numeric and string leaves of JSON data as ``{path: value}``.

    Booleans, nulls and non-finite numbers are not leaves (they are never bound);
    dict keys join with '.', list items get ``[i]``.
    """
    out: dict[str, Any] = {}
    if isinstance(value, Mapping):
        for key, item in value.items():
            out.update(leaves(item, f'{prefix}.{key}' if prefix else str(key)))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            out.update(leaves(item, f'{prefix}[{i}]'))
    elif isinstance(value, str) or (is_number(value) and math.isfinite(value)):
        out[prefix] = value
    return out


def param_leaves(params: Mapping[str, Any]) -> dict[str, Any]:
    """Return a task's parameters as sources: ``{'param:place[0]': 0.3, ...}``."""
    return {f'param:{path}': value for path, value in leaves(dict(params)).items()}


def sensor_elements(snapshot: Snapshot | None) -> dict[str, float]:
    """Return a snapshot's features as sources: ``{'sensor:object[0]': 0.41, ...}``."""
    if snapshot is None:
        return {}
    return {f'sensor:{name}[{i}]': float(v)
            for name, vector in snapshot.features.items() for i, v in enumerate(vector)}


def element_tolerances(sensors: Sequence[SensorSpec]) -> Callable[[str], float | None]:
    """
    Return ``tol(key)``: the tolerance of one sensor element, None for an unknown sensor.

    A single tolerance applies to every element (the only kind ``norm`` and ``rms``
    have); per-element tolerances apply to their element. A pose's (a TF sensor's) origin
    elements take its metres; its quaternion's elements half its radians, the most an element
    moves for a turn of that angle, so "the step moved it" holds for a turn as it does for a
    shift (its checks compare the rotation as a rotation, :mod:`..checks.poses`).
    """
    by_name = {spec.name: spec.tolerance for spec in sensors}
    poses = {spec.name for spec in sensors if spec.mode is CompareMode.POSE}

    def tol(key: str) -> float | None:
        name, index = split_element(key)
        tolerance = by_name.get(name)
        if tolerance is None:
            return None
        if name in poses:  # a pose: metres; a quaternion element moves by at most half a turn
            return float(tolerance[0] if index < 3 else tolerance[-1] / 2.0)
        return float(tolerance[index] if len(tolerance) > 1 and index < len(tolerance)
                     else tolerance[0])
    return tol


BIND_AUTO_LIMIT = 16
"""A sensor with more elements than this is never an inferred source unless set to auto."""


@dataclass(frozen=True)
class SourceRule:
    """
    Which sensors inference may bind goal fields to: ``rule(sensor, size)`` (a ``Sources``).

    A sensor's ``bind`` says so (``auto`` or ``never``). By default a sensor of at most
    :data:`BIND_AUTO_LIMIT` elements may (an object's pose, a tool's position, the
    joints: each element a quantity a goal may be derived from), and an array sensor
    with more may not: a 360-range scan under one tolerance has some element that
    matches an unrelated goal field by chance in most pairs of recordings, and a
    replay would then move that field with the range. Declare such a binding instead.

    :ivar modes: Sensor -> its ``bind`` (None: by size).
    :ivar poses: The pose sensors (TF sensors): their origin elements are sources of
        positions, their rotation the source of orientations (:mod:`.turns`), never an
        element of it a position's.
    """

    modes: Mapping[str, str | None]
    poses: frozenset[str] = frozenset()

    def __call__(self, name: str, size: int) -> bool:
        mode = self.modes.get(name)
        if mode is None:
            return size <= BIND_AUTO_LIMIT
        return mode == 'auto'


def sensor_sources(sensors: Sequence[SensorSpec]) -> SourceRule:
    """Return the :class:`SourceRule` of the configured sensors."""
    return SourceRule({spec.name: spec.bind for spec in sensors},
                      frozenset(s.name for s in sensors if s.mode is CompareMode.POSE))


@functools.lru_cache(maxsize=1 << 16)  # learning asks it for every element of every step
def split_element(key: str) -> tuple[str, int]:
    """
    Split 'sensor:object[1]' into ('object', 1): which vector an element belongs to.

    A capture leaf belongs to the list it is in ('capture:pos[1]' to 'capture:pos');
    the capture's other leaves form one group ('').
    """
    if key.startswith('sensor:'):
        source = Source.parse(key)
        return source.name, source.index or 0
    name, _, rest = key.rpartition('[')
    return name, int(rest.rstrip(']')) if rest.rstrip(']').isdigit() else 0


def is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def goal_leaves(step: Step) -> dict[str, Any]:
    """
    Return a step's goal leaves, read from its ``payload_json`` ({} when it has none).

    The contract of ``Step.payload_json`` (:class:`~..records.Step`): the goal's fields
    as JSON data, numbers as JSON numbers (integers), strings.
    A non-finite float is written as the string ``'nan'``, ``'inf'`` or ``'-inf'`` (the
    node writes strict JSON), so those strings are not leaves: a field that may hold
    one is never bound, and never equal to a parameter.
    """
    try:
        data = json.loads(step.payload_json) if step.payload_json else {}
    except ValueError:
        return {}
    return {path: value for path, value in leaves(data).items()
            if value not in _NON_FINITE}


_NON_FINITE = frozenset({'nan', 'inf', '-inf'})


def bindable_leaves(step: Step) -> dict[str, Any]:
    """
    Return the goal leaves a binding may compute: :func:`goal_leaves` but what never moves.

    Never bound, recognized by their type's fields (a goal's JSON names no types):

    * a quaternion (a message of exactly ``x, y, z, w``): a rotation does not shift as
      a sum, and its ``w`` of 1.0 equals any parameter that is 1;
    * a time (``sec, nanosec``), and every field named ``header``, ``stamp``,
      ``frame_id`` or ``child_frame_id``: bookkeeping, not a place;
    * a subtask call's ``task``: which skill a step calls is what the step is (its tool),
      never a value a parameter chooses.

    Booleans and non-finite values are not leaves at all.
    """
    try:
        data = json.loads(step.payload_json) if step.payload_json else {}
    except ValueError:
        return {}
    out: dict[str, Any] = {}
    _bindable(data, '', out)
    if step.kind is ToolKind.SUBTASK:
        out.pop('task', None)
    return out


_QUATERNION = frozenset({'x', 'y', 'z', 'w'})
_TIME = frozenset({'sec', 'nanosec'})
_BOOKKEEPING = frozenset({'header', 'stamp', 'frame_id', 'child_frame_id'})


def _bindable(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        if value.keys() == _QUATERNION or value.keys() == _TIME:
            return
        for key, item in value.items():
            if key not in _BOOKKEEPING:
                _bindable(item, f'{prefix}.{key}' if prefix else str(key), out)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _bindable(item, f'{prefix}[{i}]', out)
    elif (isinstance(value, str) and value not in _NON_FINITE) or (
            is_number(value) and math.isfinite(value)):
        out[prefix] = value


# -- Declared bindings and moves -------------------------------------------------------------


@dataclass(frozen=True)
class Declared:
    """
    A binding written in the params file, before its offset is fitted.

    :ivar tool: The tool whose goals it binds (``Step.tool``).
    :ivar field: Leaf path (a message path binds each numeric leaf under it in order).
    :ivar source: ``param:<key>[i]`` or ``sensor:<feature>[i]`` (no index: the whole vector).
    :ivar max_shift: How far the world may move: the largest shift a replay may send.
    :ivar max_offset: Which goals a sensor binding binds: those whose recorded
        ``|goal - source|`` is within it (a goal at, or a standoff from, the thing
        sensed); None: ``max_shift``. A base that stops 0.4 m in front of a tag
        declares ``max_offset: 0.5`` and still lets the tag move only ``max_shift``.
    :ivar max_angle: An orientation binding (:mod:`.turns`): ``field`` is a quaternion that
        follows the rotation of the pose sensor ``source``, which may turn this far (radians).
    """

    tool: str
    field: str
    source: str
    max_shift: float | None
    max_offset: float | None = None
    max_angle: float | None = None


def moved_sensors(pre: Mapping[str, float], post: Mapping[str, float],
                  tolerance: Callable[[str], float | None]) -> set[str]:
    """
    Return the sensors whose vector a step moved beyond their tolerance (pre -> post).

    A sensor moved when one element moved beyond its tolerance or the vector's
    Euclidean change exceeds it (a ``norm`` sensor that moved a little on each axis).
    The one rule for "moved": the bindings (which sensors a goal may follow) and the
    watch (:mod:`~muscle_mem_ros.replay.watching`: whose path a shift may reshape)
    both ask it.
    """
    deltas: dict[str, list[tuple[float, float]]] = {}
    for key, value in post.items():
        tol = tolerance(key)
        if key in pre and tol is not None:
            deltas.setdefault(split_element(key)[0], []).append((value - pre[key], tol))
    return {name for name, items in deltas.items()
            if any(abs(d) > t for d, t in items)
            or math.sqrt(sum(d * d for d, _ in items)) > min(t for _, t in items)}
