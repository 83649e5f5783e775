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
How ``muscle-mem init`` proposes TF frames as sensors (``sensors.<n>.frame``), ROS-free.

While it samples, the survey fills a :class:`~muscle_mem_ros.transforms.buffer.TransformBuffer`
from ``/tf`` and ``/tf_static``; :func:`frame_samples` reads what it holds, and
:func:`frame_from` decides per frame.

* **Which frames.** A frame whose own link came on ``/tf`` (a detector's tag, a localised
  base), and that is not one of the robot's links. The robot's links are the ``<link name>``
  elements of its description (:func:`description_links`: URDF, SDF; an MJCF's ``<body
  name>``, as the demo's sim names its frames after them): robot_state_publisher
  sends them, and the joint states already say where they are. Without a description (or one
  naming no link) they cannot be told apart: every moving frame is proposed, and the file says
  the description was missing. Left out, each with its reason: a robot link, a frame only on
  ``/tf_static`` (it moves only with its parent), a root (the frame others are given in), a
  frame received fewer than twice (no noise, no rate). Named with ``--frame``, a frame is
  proposed even when it is a link.
* **Relative to** the root of its tree (``world``, ``map``, ``odom``): the frame goals are
  usually given in, and where an object's pose is what the check is about.
* **Tolerance** (metres, radians): the calibration rule on the frame's pose in the root at each
  of its stamps (:func:`muscle_mem_ros.checks.calibration.noise`, mode ``pose``: 1.5 x
  max(4 rms, widest), a distance and an angle, never quaternion elements), rounded up to two
  significant digits; at least :data:`FLOORS` (1 mm, 0.5 degree: 0.0088 rad written). A frame
  with no noise at all (a simulation without it) gets :data:`SILENT_DEFAULTS`, as a silent
  topic does.
* **max_age** from the frame's stamps (its publishing period), by the topics' rule
  (:func:`.initrules.max_age`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
import math
import xml.etree.ElementTree as ElementTree

import numpy as np

from .initrules import max_age, NOISE_MULTIPLE, SILENT
from ..checks import calibration
from ..errors import TransformError
from ..records import CompareMode
from ..transforms.buffer import TransformBuffer

__all__ = ['description_links', 'FLOORS', 'frame_from', 'frame_lines', 'frame_samples',
           'FrameSample', 'FrameSensor', 'SILENT_DEFAULTS']

FLOORS = (0.001, math.radians(0.5))
"""Smallest frame tolerance: 1 mm, 0.5 degree (a tag detector's noise is above them)."""
SILENT_DEFAULTS = (0.02, 0.05)
"""Tolerance of a frame that made no noise at rest: 2 cm (a silent position's), 0.05 rad
(2.9 degrees)."""


@dataclass(frozen=True)
class FrameSample:
    """
    One frame of the tree, as the survey heard it.

    :ivar frame: The frame.
    :ivar parent: Its parent ('' for a root).
    :ivar root: The root of its tree (itself for a root).
    :ivar static: Whether its own link came on ``/tf_static``.
    :ivar stamps: Its link's stamps, seconds (publisher's clock), oldest first.
    :ivar readings: Its pose in ``root`` at each stamp it could be looked up at:
        x, y, z, qx, qy, qz, qw.
    """

    frame: str
    parent: str
    root: str
    static: bool
    stamps: tuple[float, ...] = ()
    readings: tuple[tuple[float, ...], ...] = ()


@dataclass(frozen=True)
class FrameSensor:
    """
    A TF sensor entry of the file, with the numbers it was computed from.

    :ivar sample: What was heard.
    :ivar tolerance: Metres, radians.
    :ivar rules: Per tolerance, ``noise``, ``floor`` or ``silent``.
    :ivar rms: The pose's rms spread at rest (metres, radians).
    :ivar widest: The widest two readings apart (metres, radians).
    :ivar max_age: Seconds.
    :ivar rate: Transforms per second (from the stamps).
    :ivar link: Whether it is a link of the description (proposed only when named).
    """

    sample: FrameSample
    tolerance: tuple[float, float]
    rules: tuple[str, str]
    rms: tuple[float, float]
    widest: tuple[float, float]
    max_age: float
    rate: float
    link: bool = False


def description_links(description: str) -> frozenset[str] | None:
    """
    Return the robot's links: ``<link name>`` (URDF, SDF), ``<body name>`` (MJCF).

    :param description: The description's text.
    :return: The names; None when it is not XML.
    """
    try:
        root = ElementTree.fromstring(description)
    except ElementTree.ParseError:
        return None
    tag = 'body' if root.tag == 'mujoco' else 'link'
    return frozenset(str(e.get('name')).lstrip('/') for e in root.iter(tag) if e.get('name'))


def _root(buffer: TransformBuffer, frame: str) -> str:
    parent = buffer.parent(frame)
    while parent is not None:
        frame, parent = parent, buffer.parent(parent)
    return frame


def frame_samples(buffer: TransformBuffer) -> tuple[FrameSample, ...]:
    """
    Return every frame the buffer holds, with its moving frames' poses in their roots.

    Read it once nothing sets the buffer any more (the survey's feed closed).
    """
    out: list[FrameSample] = []
    for frame in sorted(buffer.frames):
        link = buffer.link(frame)
        root = _root(buffer, frame)
        if link is None:
            out.append(FrameSample(frame, '', root, False))
            continue
        if link.static:
            out.append(FrameSample(frame, link.parent, root, True))
            continue
        readings = []
        for stamp in link.stamps:
            try:
                t = buffer.lookup(root, frame, stamp).transform
            except TransformError:  # another moving link of the chain has no data then
                continue
            readings.append(tuple(t.translation) + tuple(t.rotation))
        out.append(FrameSample(frame, link.parent, root, False, link.stamps, tuple(readings)))
    return tuple(out)


def _round_up(value: float) -> float:
    scale = 10 ** (1 - math.floor(math.log10(value)))
    return float(math.ceil(value * scale - 1e-9) / scale)


def _rule(proposed: float, floor: float) -> str:
    return 'silent' if proposed <= SILENT else 'floor' if proposed < floor else 'noise'


def frame_from(sample: FrameSample, links: Collection[str], *,
               named: bool = False) -> FrameSensor | str:
    """
    Return the TF sensor of a frame, or why it is left out (module docstring).

    :param sample: The frame as heard.
    :param links: The robot's links (empty without a description).
    :param named: Named with ``--frame``: proposed even when it is a link.
    """
    link = sample.frame in links
    if link and not named:
        return 'a link of the robot description (robot_state_publisher sends it)'
    if not sample.parent:
        return 'a root of the tree (the frame the others are given in)'
    if sample.static:
        return (f'static only: its link from {sample.parent} is on /tf_static (it moves only '
                'with its parent)')
    if len(sample.stamps) < 2 or len(sample.readings) < 2:
        return (f'not received twice: {len(sample.stamps)} distinct stamp(s) while sampled '
                f'(its pose in {sample.root} read at {len(sample.readings)}); two are needed '
                'to measure its noise and rate')
    found = calibration.noise(sample.frame, [np.asarray(r) for r in sample.readings],
                              mode=CompareMode.POSE, floor=0.0)
    rules = (_rule(found.proposed[0], FLOORS[0]), _rule(found.proposed[1], FLOORS[1]))
    tolerance = tuple(_round_up(
        SILENT_DEFAULTS[i] if rule == 'silent' else FLOORS[i] if rule == 'floor'
        else found.proposed[i]) for i, rule in enumerate(rules))
    age, rate = max_age(sample.stamps)
    return FrameSensor(sample=sample, tolerance=(tolerance[0], tolerance[1]), rules=rules,
                       rms=(found.std[0], found.std[1]),
                       widest=(found.peak_to_peak[0], found.peak_to_peak[1]),
                       max_age=age, rate=rate, link=link)


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _said(sensor: FrameSensor) -> str:
    parts = []
    for i, (unit, scale, floor) in enumerate((('mm', 1000.0, 'the floor 1 mm'),
                                              ('deg', 180 / math.pi, 'the floor 0.5 deg'))):
        rule = sensor.rules[i]
        parts.append(f'{NOISE_MULTIPLE:g} x the noise at rest' if rule == 'noise' else
                     f'{floor} (quieter than that at rest)' if rule == 'floor' else
                     f'the default {SILENT_DEFAULTS[i] * scale:.2g} {unit} for a frame that '
                     'made no noise at rest (a simulation?): calibrate it after two runs')
    if parts[0] == parts[1]:
        return parts[0]
    return f'{parts[0]} (metres); {parts[1]} (radians)'


def frame_lines(key: str, sensor: FrameSensor, *, described: bool) -> list[str]:
    """
    Return the file's lines for one TF sensor, its comments saying where each number came from.

    :param described: Whether the robot's links were known from its description.
    """
    s = sensor.sample
    if sensor.link:
        why = 'a link of the description, named with --frame'
    elif described:
        why = 'a frame on /tf that is not a link of the description'
    else:
        why = "a frame on /tf (no description: the robot's links could not be told apart)"
    deg = 180 / math.pi
    return [f'      # {s.frame}: {why}, under {s.parent};',
            f'      # {sensor.rate:.3g} Hz in its stamps; at rest its pose in {s.root} varied '
            f'{sensor.rms[0] * 1000:.2g} mm, {sensor.rms[1] * deg:.2g} deg rms',
            f'      # (widest {sensor.widest[0] * 1000:.2g} mm, {sensor.widest[1] * deg:.2g} '
            f'deg over {len(s.readings)} readings); tolerance ({sensor.tolerance[0] * 1000:g} '
            f'mm, {sensor.tolerance[1] * deg:.2g} deg): {_said(sensor)}',
            f'      {key}:', f'        frame: {_q(s.frame)}',
            f'        relative_to: {_q(s.root)}',
            f'        tolerance: [{sensor.tolerance[0]:g}, {sensor.tolerance[1]:g}]',
            '        mode: pose', f'        max_age: {sensor.max_age:g}']
