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
``muscle-mem show --images DIR``: the thumbnails a recording kept, written out as PNG files.

A camera sensor's snapshot features are numbers (a grid of cell means); what the camera
saw is kept beside them as a small PNG per recorded pre and post snapshot
(``Snapshot.images``). ``show`` writes each to ``DIR`` as
``t<trajectory>-s<step>-<pre|post>-<sensor>.png`` and names the files in its output, so a
person can open the view a step was recorded from.

Beside them, what a camera saw when a check on the step failed (the store's failed views, the
latest per step, sensor and phase: :class:`~muscle_mem_ros.records.FailedView`):
``t<trajectory>-s<step>-failed-<pre|post|during>-<sensor>.png``, listed under the step with
why and when, so the recorded view and the one that failed open side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
import re
from typing import Any

from ..records import FailedView, Snapshot

__all__ = ['failed_data', 'thumbnail_name', 'write_thumbnails']

_UNSAFE = re.compile(r'[^A-Za-z0-9_.-]+')


def thumbnail_name(trajectory: int, step: int, phase: str, sensor: str) -> str:
    """Return the file name of one thumbnail (a sensor's name made safe for a path)."""
    return f't{trajectory}-s{step}-{phase}-{_UNSAFE.sub("_", sensor)}.png'


def write_thumbnails(directory: Path, trajectory: int, step: int,
                     snapshots: dict[str, Snapshot | None]) -> dict[str, dict[str, str]]:
    """
    Write the thumbnails of one step's snapshots into ``directory`` (made if missing).

    :param snapshots: ``{'pre': ..., 'post': ...}``.
    :return: Phase -> sensor -> the file written (phases without thumbnails left out).
    """
    written: dict[str, dict[str, str]] = {}
    for phase, snapshot in snapshots.items():
        if snapshot is None or not snapshot.images:
            continue
        directory.mkdir(parents=True, exist_ok=True)
        for sensor, png in sorted(snapshot.images.items()):
            path = directory / thumbnail_name(trajectory, step, phase, sensor)
            path.write_bytes(png)
            written.setdefault(phase, {})[sensor] = str(path)
    return written


def failed_data(directory: Path | None, trajectory: int, step: int,
                views: Sequence[FailedView]) -> list[dict[str, Any]]:
    """
    Return one step's failed views as data, each written into ``directory`` when one is given.

    :return: Per view its ``phase``, ``sensor``, ``at`` (Unix time), ``reason`` and, when
        written, ``file``.
    """
    out: list[dict[str, Any]] = []
    for view in views:
        entry: dict[str, Any] = {'phase': view.phase.value, 'sensor': view.sensor,
                                 'at': view.at, 'reason': view.reason}
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / thumbnail_name(trajectory, step, f'failed-{view.phase.value}',
                                              view.sensor)
            path.write_bytes(view.png)
            entry['file'] = str(path)
        out.append(entry)
    return out
