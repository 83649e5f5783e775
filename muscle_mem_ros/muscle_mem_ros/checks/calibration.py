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
Tolerance calibration: propose each sensor's tolerance from data instead of guessing.

Two sources, one rule:

* **Noise at rest** (:func:`noise`): readings of a sensor sampled while the robot
  rests (the node's ``~/calibrate`` service). Per element: mean, standard
  deviation, peak to peak.
* **Recorded runs** (:func:`from_store`): the pre snapshots a store holds for one
  task. Runs of the same step (the same goals, byte for byte, from the first step
  to it) are repeats of one situation; their spread is the noise plus whatever
  varied harmlessly between runs. A sibling in the tree with a *different* goal,
  learned after the step, is a divergence from it: the world differed, a check
  failed, the agent took over and a new branch was learned. A tolerance that
  admits a divergence replays the wrong step.

The proposal per element is ``max(k * std, peak_to_peak) * margin`` (at least
``floor``): wide enough that the observed variation never fails a check, and no
wider. The what-if table (:func:`what_if`) then shows, for tolerances ``x`` on one
sensor (the other sensors ignored, so wrong replays are an upper bound), how many
recorded repeats would have replayed (their nearest other repeat within ``x``) and
how many divergences would wrongly have replayed (within ``x`` of a repeat of the
step they diverged from). Deviations are the largest per-element absolute
difference (angles wrapped with mode ``angle``; Euclidean with ``norm``).

A camera (mode ``image``) is measured as it is checked: the deviation of two grids is their
largest cell deviation with the light removed, NaN cells ignored
(:func:`.imagenoise.largest_deviation`), so its spread is one number, and so is its proposal:
``margin`` times the largest such deviation between two repeats of a step. Grids are read
with their channels (3 colour, 1 grey, 0 depth: the params file's encoding). Recordings of
another size than the sensor's (a camera that changed resolution or encoding between runs)
are left out and said (:attr:`StoreCalibration.notes`), never compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
import math
import warnings

import numpy as np
import yaml

from .imagenoise import cell_noise, comparable, largest_deviation
from .poses import pose_deviations, POSE_SIZE, pose_spread
from ..records import CompareMode, Node, StepStatus
from ..store import Store

__all__ = [
    'DEFAULT_FLOOR',
    'DEFAULT_K',
    'DEFAULT_MARGIN',
    'Noise',
    'StepSpread',
    'StoreCalibration',
    'WhatIfRow',
    'deviation',
    'from_store',
    'noise',
    'params_snippet',
    'propose',
    'what_if',
]

DEFAULT_K = 4.0
"""Standard deviations a proposed tolerance covers."""
DEFAULT_MARGIN = 1.5
"""Safety factor on top of the observed variation."""
DEFAULT_FLOOR = 1e-6
"""Smallest proposed tolerance (a noiseless simulated sensor still gets a usable one)."""


@dataclass(frozen=True)
class Noise:
    """
    Variation of one sensor's feature vector over a set of readings, per element.

    :ivar sensor: Sensor name.
    :ivar samples: Readings it was computed from.
    :ivar mean: Mean per element.
    :ivar std: Standard deviation per element (population).
    :ivar peak_to_peak: Largest minus smallest per element.
    :ivar proposed: The tolerance this suggests per element (see the module docstring).
    """

    sensor: str
    samples: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    peak_to_peak: tuple[float, ...]
    proposed: tuple[float, ...]


def propose(
    std: np.ndarray, peak_to_peak: np.ndarray, *, k: float = DEFAULT_K,
    margin: float = DEFAULT_MARGIN, floor: float = DEFAULT_FLOOR,
) -> np.ndarray:
    """
    Return the proposed tolerance per element: ``max(k * std, peak_to_peak) * margin``.

    :param std: Standard deviation per element.
    :param peak_to_peak: Range per element.
    :param k: Standard deviations to cover (> 0).
    :param margin: Safety factor (>= 1).
    :param floor: Smallest value returned.
    :return: The tolerances.
    :raises ValueError: ``k`` or ``margin`` out of range.
    """
    if not k > 0 or not math.isfinite(k):
        raise ValueError(f'k must be > 0, got {k}')
    if not margin >= 1 or not math.isfinite(margin):
        raise ValueError(f'margin must be >= 1, got {margin}')
    return np.asarray(np.maximum(np.maximum(k * std, peak_to_peak) * margin, floor))


def noise(
    sensor: str, readings: Sequence[Sequence[float] | np.ndarray], *, k: float = DEFAULT_K,
    margin: float = DEFAULT_MARGIN, floor: float = DEFAULT_FLOOR,
    mode: CompareMode = CompareMode.ABS, channels: int | None = None,
) -> Noise:
    """
    Compute a sensor's noise and proposed tolerance from readings.

    Readings whose length differs from the most common one are left out (a
    variable-length field that changed size).

    :param sensor: Sensor name.
    :param readings: Feature vectors, one per distinct reading.
    :param k: See :func:`propose`.
    :param margin: See :func:`propose`.
    :param floor: See :func:`propose`.
    :param mode: ``angle`` measures the spread of wrapped differences from the first reading;
        ``image`` proposes one tolerance, ``margin`` times the largest cell deviation (light
        removed) between two readings.
    :param channels: Mode ``image``: the grid's channels (3, 1, or 0 for depth).
    :return: The noise.
    :raises ValueError: no readings; mode ``image`` without channels, or with no reading that
        is a grid of them.
    """
    if mode is CompareMode.IMAGE:
        return _image_noise(sensor, readings, margin=margin, floor=floor, channels=channels)
    if not readings:
        raise ValueError(f'sensor {sensor!r}: no readings to calibrate from')
    sizes: dict[int, int] = {}
    for r in readings:
        sizes[len(r)] = sizes.get(len(r), 0) + 1
    size = max(sizes, key=lambda s: sizes[s])
    data = np.array([r for r in readings if len(r) == size], dtype=np.float64).reshape(-1, size)
    if mode is CompareMode.POSE and size == POSE_SIZE:  # (metres, radians), as the check reads
        rms, widest, mean = pose_spread(data)
        return Noise(sensor=sensor, samples=len(data), mean=tuple(mean.tolist()),
                     std=tuple(rms.tolist()), peak_to_peak=tuple(widest.tolist()),
                     proposed=tuple(propose(rms, widest, k=k, margin=margin,
                                            floor=floor).tolist()))
    if mode is CompareMode.ANGLE:
        data = data[0] + (data - data[0] + math.pi) % (2 * math.pi) - math.pi
    std = data.std(axis=0)
    ptp = data.max(axis=0) - data.min(axis=0)
    if mode is CompareMode.NORM:
        spread = np.linalg.norm(data - data.mean(axis=0), axis=1)
        widest = np.linalg.norm(data[:, None] - data[None], axis=2).max()
        proposed = propose(np.array([np.sqrt(np.mean(spread ** 2))]), np.array([widest]),
                           k=k, margin=margin, floor=floor)
    else:
        proposed = propose(std, ptp, k=k, margin=margin, floor=floor)
    return Noise(sensor=sensor, samples=len(data), mean=tuple(data.mean(axis=0).tolist()),
                 std=tuple(std.tolist()), peak_to_peak=tuple(ptp.tolist()),
                 proposed=tuple(proposed.tolist()))


def _image_noise(sensor: str, readings: Sequence[Sequence[float] | np.ndarray], *,
                 margin: float, floor: float, channels: int | None) -> Noise:
    """Return a camera's spread: NaN-aware per element, one proposal (module docstring)."""
    if channels is None:
        raise ValueError(f"sensor {sensor!r}: mode image needs the grid's channels (the "
                         "params file's encoding)")
    if not margin >= 1 or not math.isfinite(margin):
        raise ValueError(f'margin must be >= 1, got {margin}')
    sizes: dict[int, int] = {}
    for r in readings:
        if comparable(len(r), channels):
            sizes[len(r)] = sizes.get(len(r), 0) + 1
    if not sizes:
        raise ValueError(f'sensor {sensor!r}: no reading is a grid of {channels} channel(s)')
    size = max(sizes, key=lambda s: sizes[s])
    data = np.array([r for r in readings if len(r) == size], dtype=np.float64).reshape(-1, size)
    with warnings.catch_warnings():  # a cell never valid (masked) is NaN, not a warning
        warnings.simplefilter('ignore', RuntimeWarning)
        mean, std = np.nanmean(data, axis=0), np.nanstd(data, axis=0)
        ptp = np.nanmax(data, axis=0) - np.nanmin(data, axis=0)
    largest = 0.0
    if len(data) >= 2:
        per_cell = cell_noise(list(data), channels=channels)
        if np.isfinite(per_cell).any():
            largest = float(np.nanmax(per_cell))
    proposed = max(largest * margin, floor)
    return Noise(sensor=sensor, samples=len(data), mean=tuple(mean.tolist()),
                 std=tuple(std.tolist()), peak_to_peak=tuple(ptp.tolist()),
                 proposed=(proposed,))


_UNPOOLED = (CompareMode.IMAGE, CompareMode.POSE)
"""Modes whose residuals from a step's mean are not readings of the sensor."""


def deviation(a: np.ndarray, b: np.ndarray, mode: CompareMode = CompareMode.ABS,
              channels: int | None = None) -> float:
    """
    Return the deviation of two feature vectors in sensor units (inf if not comparable).

    :param channels: Mode ``image``: the grids' channels (required there).
    :raises ValueError: mode ``image`` without channels.
    """
    if mode is CompareMode.IMAGE:
        if channels is None:
            raise ValueError("mode image needs the grid's channels")
        return largest_deviation(a, b, channels=channels)
    if a.shape != b.shape:
        return math.inf
    if mode is CompareMode.POSE:  # the origin's distance (metres); the angle is in init's table
        return float(pose_deviations(a.reshape(1, -1), b)[0, 0]) if a.size == POSE_SIZE \
            else math.inf
    diff = a - b
    if mode is CompareMode.ANGLE:
        diff = (diff + math.pi) % (2 * math.pi) - math.pi
    if mode is CompareMode.NORM:
        return float(np.linalg.norm(diff))
    if mode is CompareMode.RMS:
        return float(np.sqrt(np.mean(diff ** 2))) if diff.size else 0.0
    if mode is CompareMode.EXACT:
        return 0.0 if not np.any(diff) else math.inf
    return float(np.max(np.abs(diff))) if diff.size else 0.0


@dataclass(frozen=True)
class StepSpread:
    """
    The recorded repeats of one step of a task and their spread per sensor.

    :ivar depth: Index of the step in its trajectories.
    :ivar tool: Tool the step calls.
    :ivar repeats: Recorded situations (tree nodes) of this step.
    :ivar divergences: Later siblings with a different goal (branches learned instead).
    :ivar noise: Per sensor, the spread of the repeats' pre snapshots (sensors seen in at
        least two repeats).
    """

    depth: int
    tool: str
    repeats: int
    divergences: int
    noise: Mapping[str, Noise]


@dataclass(frozen=True)
class WhatIfRow:
    """
    One line of the what-if table: tolerance ``x`` on one sensor.

    :ivar sensor: Sensor name.
    :ivar tolerance: The tolerance tried.
    :ivar replayed: Recorded repeats whose nearest other repeat is within it.
    :ivar repeats: Repeats that have another repeat to compare with.
    :ivar wrong: Divergences within it of a repeat of the step they diverged from.
    :ivar divergences: Divergences in the task (for that sensor).
    """

    sensor: str
    tolerance: float
    replayed: int
    repeats: int
    wrong: int
    divergences: int


@dataclass(frozen=True)
class StoreCalibration:
    """
    Everything :func:`from_store` found for one task.

    :ivar task: Task name.
    :ivar steps: Per step, its repeats and spread.
    :ivar proposed: Per sensor, the proposed tolerance per element (over all steps).
    :ivar nearest: Per sensor, each repeat's deviation from its nearest other repeat.
    :ivar separation: Per sensor, each divergence's deviation from the nearest repeat of the
        step it diverged from.
    :ivar modes: Compare mode used per sensor.
    :ivar notes: What was left out and why (a camera's recordings of another size).
    """

    task: str
    steps: tuple[StepSpread, ...]
    proposed: Mapping[str, tuple[float, ...]]
    nearest: Mapping[str, tuple[float, ...]]
    separation: Mapping[str, tuple[float, ...]]
    modes: Mapping[str, CompareMode]
    notes: tuple[str, ...] = ()


_StepKey = tuple[tuple[str, str, str, bytes], ...]
"""The goals from a task's first step to one step: (tool, kind, type name, payload) each."""


def _walk(store: Store, task: str) -> list[tuple[tuple[str, int | None], _StepKey, Node]]:
    """
    Return (sibling group, step key, node) for every succeeded node of a task's trees.

    A step's key is the sequence of goals from the first step to it (tool, kind,
    type and payload bytes of each): two nodes with one key are runs of the same
    step after the same steps.
    """
    variants = sorted({t.variant for t in store.trajectories(task=task)})
    out = []
    for variant in variants:
        stack: list[tuple[int | None, _StepKey]] = [(None, ())]
        while stack:
            parent, prefix = stack.pop()
            for node in store.children(task=task, variant=variant, parent=parent):
                step = node.step
                key = prefix + ((step.tool, step.kind.value, step.type_name,
                                 bytes(step.payload)),)
                stack.append((node.id, key))
                if step.status is StepStatus.SUCCEEDED:
                    out.append(((variant, parent), key, node))
    return out


def from_store(
    store: Store, task: str, *, modes: Mapping[str, CompareMode] | None = None,
    k: float = DEFAULT_K, margin: float = DEFAULT_MARGIN, floor: float = DEFAULT_FLOOR,
    channels: Mapping[str, int] | None = None, sizes: Mapping[str, int] | None = None,
) -> StoreCalibration:
    """
    Measure a task's recorded repeats and divergences per sensor.

    :param store: The store (only read).
    :param task: Task name.
    :param modes: Compare mode per sensor (default ``abs``).
    :param k: See :func:`propose`.
    :param margin: See :func:`propose`.
    :param floor: See :func:`propose`.
    :param channels: Per camera sensor (mode ``image``), its grid's channels.
    :param sizes: Per camera sensor, its grid's length as configured: recordings of another
        length are left out (a note says so). Default: the length most recordings have.
    :return: Spreads, proposals and the deviations the what-if table counts.
    :raises ValueError: the task has no recorded pre snapshots; a sensor of mode ``image``
        without its channels.
    """
    modes = dict(modes or {})
    channels = dict(channels or {})
    for sensor, mode in modes.items():
        if mode is CompareMode.IMAGE and sensor not in channels:
            raise ValueError(f'sensor {sensor!r}: mode image needs its channels (the params '
                             "file's encoding)")
    groups: dict[_StepKey, list[Node]] = {}
    siblings: dict[tuple[str, int | None], list[tuple[_StepKey, Node]]] = {}
    for parent, key, node in _walk(store, task):
        groups.setdefault(key, []).append(node)
        siblings.setdefault(parent, []).append((key, node))
    # A divergence: a sibling with another goal, learned after the step it diverged from
    # (its check failed, the agent took over, the new branch was stored).
    diverged: dict[_StepKey, list[Node]] = {}
    for kids in siblings.values():
        for key, node in kids:
            older = {k for k, n in kids if k != key and n.id < node.id}
            for older_key in older:
                diverged.setdefault(older_key, []).append(node)
    sensors = sorted({s for nodes in groups.values() for n in nodes if n.step.pre
                      for s in n.step.pre.features})
    if not sensors:
        raise ValueError(f'task {task!r}: no recorded pre snapshots to calibrate from')
    notes = []
    kept_size = {}
    for sensor in sensors:
        if modes.get(sensor) is not CompareMode.IMAGE:
            continue
        counts: dict[int, int] = {}
        for nodes in groups.values():
            for n in nodes:
                if n.step.pre and sensor in n.step.pre.features:
                    length = len(n.step.pre.features[sensor])
                    counts[length] = counts.get(length, 0) + 1
        want = (sizes or {}).get(sensor) or max(counts, key=lambda c: counts[c], default=0)
        kept_size[sensor] = want
        odd = {c: n for c, n in counts.items() if c != want}
        if odd:
            notes.append(f'sensor {sensor!r}: {sum(odd.values())} recording(s) with '
                         f'{" or ".join(str(c) for c in sorted(odd))} elements, not the '
                         f'{want} of its grid (the camera changed resolution or encoding '
                         'between runs, or the params file did): left out')
    steps = []
    pooled: dict[str, list[np.ndarray]] = {s: [] for s in sensors}
    nearest: dict[str, list[float]] = {s: [] for s in sensors}
    separation: dict[str, list[float]] = {s: [] for s in sensors}
    for key, nodes in sorted(groups.items(), key=lambda item: (len(item[0]), item[1][0].id)):
        per_sensor = {}
        for sensor in sensors:
            mode = modes.get(sensor, CompareMode.ABS)
            grid = channels.get(sensor)
            samples = [(n.id, np.asarray(n.step.pre.features[sensor], dtype=np.float64))
                       for n in nodes if n.step.pre and sensor in n.step.pre.features and
                       len(n.step.pre.features[sensor]) == kept_size.get(
                           sensor, len(n.step.pre.features[sensor]))]
            values = [v for _, v in samples]
            if len(values) >= 2:
                found = noise(sensor, values, k=k, margin=margin, floor=floor, mode=mode,
                              channels=grid)
                per_sensor[sensor] = found
                center = np.asarray(found.mean)
                pooled[sensor].extend(v - center for v in values if v.shape == center.shape)
                for i, v in enumerate(values):
                    nearest[sensor].append(min(deviation(v, w, mode, grid)
                                               for j, w in enumerate(values) if j != i))
            for other in diverged.get(key, []):
                if other.step.pre is None or sensor not in other.step.pre.features:
                    continue
                q = np.asarray(other.step.pre.features[sensor], dtype=np.float64)
                before = [v for i, v in samples if i < other.id]
                if before:
                    separation[sensor].append(min(deviation(q, v, mode, grid) for v in before))
        steps.append(StepSpread(depth=len(key) - 1, tool=key[-1][0], repeats=len(nodes),
                                divergences=len(diverged.get(key, [])), noise=per_sensor))
    proposed = {
        sensor: noise(sensor, residuals, k=k, margin=margin, floor=floor,
                      mode=modes.get(sensor, CompareMode.ABS)).proposed
        for sensor, residuals in pooled.items()
        if residuals and modes.get(sensor) not in _UNPOOLED}
    for sensor in sensors:  # a camera, a pose: the widest step (residuals mix steps' light,
        spread = [s.noise[sensor].proposed for s in steps if sensor in s.noise]  # or turns)
        if modes.get(sensor) in _UNPOOLED and spread:
            proposed[sensor] = tuple(float(v) for v in np.max(np.array(spread), axis=0))
    return StoreCalibration(
        task=task, steps=tuple(steps), proposed=proposed,
        nearest={s: tuple(v) for s, v in nearest.items()},
        separation={s: tuple(v) for s, v in separation.items()},
        modes={s: modes.get(s, CompareMode.ABS) for s in sensors}, notes=tuple(notes))


def what_if(
    found: StoreCalibration, sensor: str, tolerances: Iterable[float] | None = None,
) -> list[WhatIfRow]:
    """
    Count, per tolerance on one sensor, replayed repeats and wrongly replayed divergences.

    :param found: What :func:`from_store` measured.
    :param sensor: The sensor.
    :param tolerances: Tolerances to try (sensor units). Default: the proposal's largest
        element, and each observed deviation (so every change in the counts shows).
    :return: One row per tolerance, ascending.
    :raises KeyError: a sensor the task never recorded.
    """
    if sensor not in found.modes:
        raise KeyError(f'sensor {sensor!r} is not in the recorded snapshots of task '
                       f'{found.task!r} (it has: {", ".join(found.modes)})')
    nearest = np.array([d for d in found.nearest.get(sensor, ()) if math.isfinite(d)])
    separation = np.array([d for d in found.separation.get(sensor, ()) if math.isfinite(d)])
    if tolerances is None:
        picks = set(nearest.tolist()) | set(separation.tolist())
        if sensor in found.proposed:
            picks.add(max(found.proposed[sensor]))
        if len(picks) > 12:
            picks = set(np.quantile(sorted(picks), np.linspace(0, 1, 12)).tolist()) | (
                {max(found.proposed[sensor])} if sensor in found.proposed else set())
        tolerances = picks
    rows = []
    for x in sorted({float(t) for t in tolerances}):
        rows.append(WhatIfRow(
            sensor=sensor, tolerance=x,
            replayed=int(np.count_nonzero(nearest <= x)), repeats=len(found.nearest[sensor]),
            wrong=int(np.count_nonzero(separation <= x)),
            divergences=len(found.separation[sensor])))
    return rows


def params_snippet(
    tolerances: Mapping[str, Sequence[float]], *, node_name: str = 'muscle_mem',
    digits: int = 6,
) -> str:
    """
    Return a params-file snippet setting each sensor's tolerance.

    :param tolerances: Sensor name -> tolerance per element (or one value).
    :param node_name: The node's name (the file's top key).
    :param digits: Significant digits kept.
    :return: YAML text: ``<node>: ros__parameters: sensors: <name>: tolerance: [...]``.
    """
    sensors = {}
    for name, values in sorted(tolerances.items()):
        rounded = [float(f'{v:.{digits}g}') for v in values]
        sensors[name] = {'tolerance': rounded[0] if len(rounded) == 1 else rounded}
    text: str = yaml.safe_dump({node_name: {'ros__parameters': {'sensors': sensors}}},
                               sort_keys=False, default_flow_style=None)
    return text
