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
The rules ``muscle-mem init`` writes a params file by (ROS-free).

What the graph offers is surveyed by :mod:`muscle_mem_ros.cli.survey`; this
module decides what of it goes into the file and with which numbers.

**Sensors.** A topic is read when its type is one the cache knows how to read:

* ``sensor_msgs/msg/JointState``: the positions, selected by joint name (every name
  heard while sampling, in the order first heard), mode ``abs`` with one tolerance
  per joint. Velocities and efforts are left out: a resting robot's are zero and a
  moving one's describe the motion, not the situation.
* ``nav_msgs/msg/Odometry``, ``geometry_msgs/msg/PoseStamped``,
  ``geometry_msgs/msg/PoseWithCovarianceStamped``, ``geometry_msgs/msg/TransformStamped``:
  the position (translation), mode ``norm``: one distance in metres. Orientation is
  left out (a quaternion is not compared element by element; add a yaw sensor by
  hand where heading matters).
* any other message whose **floating-point** fields (top level, or inside nested
  messages other than headers, times and durations; fixed-size arrays included)
  add up to 1 to :data:`MAX_NUMERIC` numbers: those fields, mode ``abs``. Integers,
  booleans and strings are not read (counters, ids and enums, where a tolerance
  means nothing), nor variable-length arrays (their size can change).

Big arrays (scans, clouds, maps: :data:`BIG`) are left out and named, as is
any topic of another type, or that sent fewer than two messages while sampled. Cameras
(``Image``, ``CompressedImage``, also in :data:`BIG`) are taken by the survey before these
rules and written as camera sensors by :mod:`.initcameras`.

**Tolerance** per element: :data:`NOISE_MULTIPLE` (6) times the noise heard at rest,
the calibration rule on the readings sampled (:func:`muscle_mem_ros.checks.calibration.noise`:
``max(k * std, peak_to_peak) * margin`` with ``k = 4``, ``margin = 1.5``), rounded up to
two significant digits; where that is below the kind's floor (:data:`FLOORS`), the floor.
The floors are small enough for a lab robot: a gantry whose axes are noisy by 0.2 mm over
wells 9 mm apart gets about 1.5 mm (the noise), and a scale noisy by 0.01 g under 0.5 g
aspirates about 0.08 g, so one well off, or an aspirate that took nothing, fails its check.
A sensor that makes no noise at all (under :data:`SILENT`: a simulation, or a driver that
repeats what it was commanded) says nothing of its precision, and nothing of how differently
a motion ends from one run to the next (a simulated grasp varies by millimetres): it gets
the kind's default (:data:`SILENT_DEFAULTS`, as loose as the floors used to be). The file
says per sensor which rule set each tolerance (:func:`tolerance_note`); ``muscle-mem
calibrate`` after two runs of a task says what varies between runs.

**At rest.** init samples a robot standing still. A JointState or Odometry sensor whose
position drifts across the window by more than :data:`MOVING` times its noise around that
drift, and more than its floor, is a robot moving (:func:`moving`): init refuses to write
tolerances from it.

**max_age**: five median periods, or twice the longest gap heard, at least
:data:`MIN_AGE`, rounded up to a tenth of a second: four messages lost in a row,
or a callback late on a loaded machine, do not fail a check, and a sensor that
stopped does within a few periods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
import math
import re

import numpy as np

from ..checks import calibration
from ..records import CompareMode

__all__ = [
    'BIG',
    'FLOORS',
    'SILENT',
    'SILENT_DEFAULTS',
    'MAX_NUMERIC',
    'MIN_AGE',
    'MOVING',
    'NOISE_MULTIPLE',
    'POSITIONS',
    'Kind',
    'Sampled',
    'Sensor',
    'Skipped',
    'Tool',
    'choose_key',
    'float_fields',
    'kind_of',
    'max_age',
    'moving',
    'sensor_from',
    'tolerance',
    'tolerance_note',
]

JOINT_STATE = 'sensor_msgs/msg/JointState'
POSITIONS = {
    'nav_msgs/msg/Odometry': 'pose.pose.position',
    'geometry_msgs/msg/PoseStamped': 'pose.position',
    'geometry_msgs/msg/PoseWithCovarianceStamped': 'pose.pose.position',
    'geometry_msgs/msg/TransformStamped': 'transform.translation',
}
"""Pose-like types and the field path of their position."""
BIG = frozenset({
    'sensor_msgs/msg/LaserScan', 'sensor_msgs/msg/MultiEchoLaserScan',
    'sensor_msgs/msg/PointCloud', 'sensor_msgs/msg/PointCloud2', 'sensor_msgs/msg/Image',
    'sensor_msgs/msg/CompressedImage', 'nav_msgs/msg/OccupancyGrid', 'nav_msgs/msg/Path',
    'visualization_msgs/msg/MarkerArray', 'grid_map_msgs/msg/GridMap',
})
"""Types left out as big arrays (a scan can be added by hand with mode rms)."""
MAX_NUMERIC = 16
"""Most numbers a generic numeric sensor may have (the watch traces up to 16)."""
MIN_AGE = 0.5
"""Smallest max_age written, seconds."""
FLOORS = {'joints': 0.001, 'position': 0.001, 'numeric': 0.001}
"""Smallest tolerance per kind: 1 mrad (or 1 mm) for a joint, 1 mm for a position, 0.001 for
a generic number (1 mg on a scale in grams): below a lab robot's noise, so the noise sets it."""
SILENT = 1e-6
"""Tolerances the noise proposes up to this are no noise at all (a simulated sensor)."""
SILENT_DEFAULTS = {'joints': 0.02, 'position': 0.02, 'numeric': 0.01}
"""Tolerance per kind of a sensor that made no noise: 0.02 rad (or m), 2 cm, 0.01."""
NOISE_MULTIPLE = calibration.DEFAULT_K * calibration.DEFAULT_MARGIN
"""A tolerance is this many standard deviations of the noise at rest (or 1.5 x its peak to
peak, when that is larger)."""
MOVING = 3.0
"""Drift across the sampling window, in standard deviations of the noise around it, that is
motion (:func:`moving`)."""
_ROBOT_STATE = ('sensor_msgs/msg/JointState', 'nav_msgs/msg/Odometry')
_SKIP_NESTED = ('std_msgs/Header', 'builtin_interfaces/Time', 'builtin_interfaces/Duration')
_FLOATS = ('float', 'double')
_ARRAY = re.compile(r'^(\w+)\[(\d+)\]$')
_KEY = re.compile(r'[^A-Za-z0-9_]')


@dataclass(frozen=True)
class Tool:
    """
    One server the agent calls.

    :ivar kind: ``action`` or ``service``.
    :ivar server: Its name.
    :ivar type: Its type, ``pkg/action/Name`` or ``pkg/srv/Name``.
    :ivar node: The node serving it.
    """

    kind: str
    server: str
    type: str  # noqa: A003 (the params file's key)
    node: str


@dataclass(frozen=True)
class Kind:
    """
    How a topic type is read.

    :ivar name: ``joints``, ``position`` or ``numeric`` (a key of :data:`FLOORS`).
    :ivar fields: Field paths.
    :ivar mode: Compare mode.
    :ivar why: Why it was chosen, for the file's comment.
    """

    name: str
    fields: tuple[str, ...]
    mode: CompareMode
    why: str


@dataclass(frozen=True)
class Sampled:
    """
    What one topic sent while sampled.

    :ivar topic: The topic.
    :ivar type: Its type.
    :ivar kind: How it is read.
    :ivar times: Receive times, seconds (monotonic).
    :ivar readings: Feature vectors, one per message.
    :ivar joints: Joint names in vector order (JointState), else empty.
    """

    topic: str
    type: str  # noqa: A003 (the params file's key)
    kind: Kind
    times: tuple[float, ...]
    readings: tuple[tuple[float, ...], ...]
    joints: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sensor:
    """
    A sensor entry of the file, with the numbers it was computed from.

    :ivar sampled: What was heard.
    :ivar tolerance: Per element (or one for ``norm``).
    :ivar max_age: Seconds.
    :ivar rate: Messages per second heard.
    :ivar noise: Largest standard deviation of an element.
    :ivar rules: Per tolerance, the rule that set it: ``noise``, ``floor`` or ``silent``.
    """

    sampled: Sampled
    tolerance: tuple[float, ...]
    max_age: float
    rate: float
    noise: float
    rules: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skipped:
    """
    Something found and left out.

    :ivar name: Topic or server.
    :ivar type: Its type.
    :ivar reason: Why, for a person.
    """

    name: str
    type: str  # noqa: A003
    reason: str = field(default='')


def float_fields(fields: Mapping[str, str],
                 nested: Callable[[str], Mapping[str, str]]) -> tuple[list[str], int]:
    """
    Return the floating-point field paths of a message and how many numbers they hold.

    :param fields: The message's field names and types (``get_fields_and_field_types``).
    :param nested: Fields of a nested message type (``pkg/Name``).
    :return: Paths (a nested message all of floats as one path) and their size.
    """
    paths: list[str] = []
    size = 0
    for name, type_str in fields.items():
        array = _ARRAY.match(type_str)
        if type_str in _FLOATS or (array is not None and array.group(1) in _FLOATS):
            paths.append(name)
            size += int(array.group(2)) if array is not None else 1
        elif '/' in type_str and '[' not in type_str and '<' not in type_str \
                and type_str not in _SKIP_NESTED:
            sub = nested(type_str)
            inner, inner_size = float_fields(sub, nested)
            if inner and inner == list(sub):
                paths.append(name)
            else:
                paths.extend(f'{name}.{p}' for p in inner)
            size += inner_size
    return paths, size


def kind_of(type_name: str, fields: Mapping[str, str] | None,
            nested: Callable[[str], Mapping[str, str]]) -> Kind | str:
    """
    Return how a topic of ``type_name`` is read, or why it is left out.

    :param fields: The type's fields, None when the type is not installed here.
    """
    if type_name == JOINT_STATE:
        return Kind('joints', ('position',), CompareMode.ABS,
                    'joint positions by name')
    if type_name in POSITIONS:
        return Kind('position', (POSITIONS[type_name],), CompareMode.NORM,
                    'a position, compared as one distance (orientation not read)')
    if type_name in BIG:
        return 'a big array (add it by hand with mode rms if it should gate replays)'
    if fields is None:
        return 'its type is not installed here'
    paths, size = float_fields(fields, nested)
    if not paths:
        return 'no floating-point field to compare'
    if size > MAX_NUMERIC:
        return f'{size} numbers: more than {MAX_NUMERIC} (a big array)'
    return Kind('numeric', tuple(paths), CompareMode.ABS,
                f'{size} floating-point number(s): {", ".join(paths)}')


def _round_up(value: float, digits: int = 2) -> float:
    if value <= 0 or not math.isfinite(value):
        return value
    scale = 10 ** (digits - 1 - math.floor(math.log10(value)))
    return float(math.ceil(value * scale - 1e-9) / scale)


def _rule(noisy: float, floor: float) -> str:
    return 'silent' if noisy <= SILENT else 'floor' if noisy < floor else 'noise'


def tolerance(sampled: Sampled) -> tuple[tuple[float, ...], float, tuple[str, ...]]:
    """
    Return a sampled sensor's tolerances (module docstring), its largest std, and their rules.

    :raises ValueError: nothing was read.
    """
    found = calibration.noise(sampled.topic, [np.asarray(r) for r in sampled.readings],
                              mode=sampled.kind.mode)
    floor = FLOORS[sampled.kind.name]
    rules = tuple(_rule(p, floor) for p in found.proposed)
    by_rule = {'silent': SILENT_DEFAULTS[sampled.kind.name], 'floor': floor}
    values = tuple(by_rule.get(r, _round_up(p)) for r, p in zip(rules, found.proposed))
    return values, max(found.std, default=0.0), rules


def tolerance_note(sensor: Sensor) -> str:
    """Return which rule set a sensor's tolerances, for its comment in the file."""
    sampled = sensor.sampled
    names = list(sampled.joints) if len(sampled.joints) == len(sensor.tolerance) else \
        [str(i) for i in range(len(sensor.tolerance))]
    kind = sampled.kind.name
    said = {'noise': f'{NOISE_MULTIPLE:g} x the noise at rest (1.5 x max(4 std, peak to peak))',
            'floor': f'the floor {FLOORS[kind]:g} (quieter than that at rest)',
            'silent': f'the default {SILENT_DEFAULTS[kind]:g} for a sensor that made no noise '
                      'at rest (a simulation?): calibrate it after two runs'}
    parts: list[str] = []
    for rule in ('noise', 'floor', 'silent'):
        which = [n for n, r in zip(names, sensor.rules) if r == rule]
        if which:
            every = len(which) == len(names)
            parts.append(said[rule] + ('' if every or not parts and rule == 'noise'
                                       else f' for {", ".join(which)}'))
    return 'tolerance: ' + '; '.join(parts)


def moving(sampled: Sampled) -> str:
    """
    Return how a robot-state sensor moved while sampled ('' when it stood still).

    Per element, a straight line is fitted to the readings in order: its rise across the
    window is motion when it exceeds :data:`MOVING` times the readings' spread around the
    line and the kind's floor (noise does not rise; a slow sensor drift under the floor is
    not a robot moving). Only the robot's own state is judged (JointState, Odometry): an
    object seen moving is the world, not the robot.
    """
    if sampled.type not in _ROBOT_STATE or len(sampled.readings) < 3:
        return ''
    sizes = {len(r) for r in sampled.readings}
    if len(sizes) != 1:
        return ''
    data = np.asarray(sampled.readings, dtype=np.float64)
    index = np.arange(len(data), dtype=np.float64)
    slope, offset = np.polyfit(index, data, 1)
    rise = np.abs(slope) * (len(data) - 1)
    spread = (data - (np.outer(index, slope) + offset)).std(axis=0)
    floor = FLOORS[sampled.kind.name]
    moved = [i for i in range(data.shape[1]) if rise[i] > max(MOVING * spread[i], floor)]
    if not moved:
        return ''
    names = sampled.joints if len(sampled.joints) == data.shape[1] else \
        tuple(f'{sampled.kind.fields[0]}[{i}]' for i in range(data.shape[1]))
    seconds = max(sampled.times) - min(sampled.times) if sampled.times else 0.0
    return f'{sampled.topic}: ' + ', '.join(
        f'{names[i]} moved {rise[i]:.3g}' for i in moved) + f' in {seconds:.1f} s'


def max_age(times: Sequence[float]) -> tuple[float, float]:
    """
    Return max_age and the rate (messages per second) from receive times.

    :raises ValueError: fewer than two times.
    """
    if len(times) < 2:
        raise ValueError('fewer than two messages: no rate')
    gaps = np.diff(np.sort(np.asarray(times, dtype=np.float64)))
    period = float(np.median(gaps))
    age = max(MIN_AGE, 5 * period, 2 * float(gaps.max()))
    return math.ceil(age * 10 - 1e-9) / 10, (1 / period if period > 0 else math.inf)


def sensor_from(sampled: Sampled) -> Sensor | str:
    """Return the sensor entry of a sampled topic, or why it is left out."""
    if len(sampled.times) < 2:
        return f'sent {len(sampled.times)} message(s) while sampled: no rate to set max_age by'
    if not sampled.readings or not any(sampled.readings):
        return 'no reading while sampled'
    age, rate = max_age(sampled.times)
    tol, std, rules = tolerance(sampled)
    return Sensor(sampled=sampled, tolerance=tol, max_age=age, rate=rate, noise=std,
                  rules=rules)


def choose_key(name: str, taken: set[str]) -> str:
    """
    Return a parameter key for a ROS name: its shortest unique tail, ``/`` as ``_``.

    :param name: ``/arm/follow_joint_trajectory``.
    :param taken: Keys already used (the new key is added).
    """
    parts = [_KEY.sub('_', p) for p in name.strip('/').split('/') if p] or ['x']
    for n in range(1, len(parts) + 1):
        key = '_'.join(parts[-n:])
        if key[0].isdigit():
            key = f'k{key}'
        if key not in taken:
            taken.add(key)
            return key
    index = 2
    while f'{key}_{index}' in taken:
        index += 1
    taken.add(f'{key}_{index}')
    return f'{key}_{index}'
