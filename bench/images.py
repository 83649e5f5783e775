#!/usr/bin/env python3
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
Camera checks: what one costs, what the store keeps, and how far noise is from a miss.

One check is what the node does per snapshot of a camera sensor and per candidate: the
frame's CDR deserialized by rclpy (``sensor_msgs/msg/Image``, or a JPEG in a
``CompressedImage``), decoded and reduced to its grid (:class:`FrameReader`), and judged
against a recorded snapshot by :class:`ToleranceCheck` (mode image). The scene is the
tests' table and 5 cm cube 0.6 m from the camera, with fresh noise (5 grey levels) in
every frame. Parts are timed apart and together, p50 and p99 over ``--frames`` frames.

The margins: the largest score (1.0 = at the tolerance) of ``--frames`` noisy frames of
the unchanged scene, beside the score of the cube moved 2 cm (caught when over 1.0).

The store: the bytes a step's pre and post snapshots of one camera take in a real SQLite
store (the file's growth over ``--steps`` steps, divided), by resolution and cell size.

Usage: bench/images [--frames 200] [--steps 200] [--out bench/images.md]
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path
import platform
import sys
import tempfile
import time

from _common import cpu_name, ms, pct
from muscle_mem_ros.checks.images import Grid
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.records import CompareMode, SensorSpec, Snapshot
from muscle_mem_ros.ros.capture.frames import FrameReader
import numpy as np
from PIL import Image as PilImage
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import CompressedImage, Image

TOLERANCE = 0.1
NOISE = 5.0


def scene(width: int, height: int, rng: np.random.Generator, cube_x: float = 0.0) -> np.ndarray:
    """Return an rgb8 table with a 5 cm red cube 0.6 m away, fresh noise."""
    focal = 525.0 * width / 640.0
    yy, xx = np.mgrid[0:height, 0:width]
    table = 0.45 + 0.08 * np.sin(xx / 23.0) * np.cos(yy / 41.0)
    image = np.stack([table * 0.9, table * 0.7, table * 0.5], axis=2)
    side = 0.05 * focal / 0.6
    left = width / 2 + cube_x * focal / 0.6 - side / 2
    top = height / 2 - side / 2
    image[(xx >= left) & (xx < left + side) & (yy >= top) & (yy < top + side)] = (0.8, 0.1, 0.1)
    image = image * 255.0 + rng.normal(0.0, NOISE, image.shape)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def raw(pixels: np.ndarray) -> bytes:
    height, width = pixels.shape[:2]
    return bytes(serialize_message(Image(height=height, width=width, encoding='rgb8',
                                         step=width * 3, data=pixels.tobytes())))


def jpeg(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    PilImage.fromarray(pixels).save(out, format='JPEG', quality=90)
    return bytes(serialize_message(CompressedImage(format='jpeg', data=out.getvalue())))


def time_checks(width: int, height: int, compressed: bool, frames: int) -> dict[str, float]:
    rng = np.random.default_rng(1)
    grid = Grid(width, height, max(4, height // 15))
    reader = FrameReader(sensor='camera', encoding='rgb8', compressed=compressed, grid=grid)
    kind = CompressedImage if compressed else Image
    check = ToleranceCheck(sensors=[SensorSpec('camera', (TOLERANCE,), CompareMode.IMAGE,
                                               image=grid.layout(3))])
    encode = jpeg if compressed else raw
    recorded = Snapshot(features={'camera': tuple(reader(deserialize_message(
        encode(scene(width, height, rng)), kind)))}, stamps={'camera': 0.0})
    cdrs = [encode(scene(width, height, rng)) for _ in range(min(frames, 20))]
    parts: dict[str, list[float]] = {'deserialize': [], 'grid': [], 'compare': [], 'total': []}
    for i in range(frames):
        cdr = cdrs[i % len(cdrs)]
        t0 = time.perf_counter()
        msg = deserialize_message(cdr, kind)
        t1 = time.perf_counter()
        vector = tuple(reader(msg))
        t2 = time.perf_counter()
        result = check.evaluate(recorded, Snapshot(features={'camera': vector},
                                                   stamps={'camera': 0.0}))
        t3 = time.perf_counter()
        assert result.passed, result.failures
        parts['deserialize'].append(t1 - t0)
        parts['grid'].append(t2 - t1)
        parts['compare'].append(t3 - t2)
        parts['total'].append(t3 - t0)
    out = {f'{k} p50': pct(v, 50) for k, v in parts.items()}
    out['total p99'] = pct(parts['total'], 99)
    return out


def margins(frames: int) -> tuple[float, float, int]:
    rng = np.random.default_rng(2)
    grid = Grid(640, 480, 32)
    reader = FrameReader(sensor='camera', encoding='rgb8', compressed=False, grid=grid)
    check = ToleranceCheck(sensors=[SensorSpec('camera', (TOLERANCE,), CompareMode.IMAGE,
                                               image=grid.layout(3))])

    def snap(pixels: np.ndarray) -> Snapshot:
        msg = deserialize_message(raw(pixels), Image)
        return Snapshot(features={'camera': tuple(reader(msg))}, stamps={'camera': 0.0})

    recorded = snap(scene(640, 480, rng))
    scores = [check.evaluate(recorded, snap(scene(640, 480, rng))).score for _ in range(frames)]
    misses = sum(1 for s in scores if s > 1.0)
    moved = check.evaluate(recorded, snap(scene(640, 480, rng, cube_x=0.02))).score
    return max(scores), moved, misses


def store_bytes(width: int, height: int, cell: int, steps: int) -> float:
    rng = np.random.default_rng(3)
    grid = Grid(width, height, cell)
    reader = FrameReader(sensor='camera', encoding='rgb8', compressed=False, grid=grid)
    snaps = [Snapshot(features={'camera': tuple(reader(deserialize_message(
        raw(scene(width, height, rng)), Image)))}, stamps={'camera': 0.0}) for _ in range(4)]
    with tempfile.TemporaryDirectory() as tmp:
        small = _filled(Path(tmp) / 'one.db', snaps, 1)
        large = _filled(Path(tmp) / 'many.db', snaps, steps + 1)
        return (large - small) / steps


def _filled(path: Path, snaps: list[Snapshot], steps: int) -> int:
    """Return the size of a closed SQLite store holding ``steps`` one-step trajectories."""
    from muscle_mem_ros import SqliteStore
    from muscle_mem_ros.records import Step, StepStatus, ToolKind
    from muscle_mem_ros.ros.capture.recorder import Recorder
    with SqliteStore(path=str(path)) as store:
        recorder = Recorder(store=store)
        for i in range(steps):
            session = recorder.start(task=f't{i}', params_json='{}', parent=None, manual=True)
            session.append(Step(tool='/arm', kind=ToolKind.ACTION, type_name='x/action/Y',
                                payload=b'\x00', payload_json='{}', pre=snaps[i % 4],
                                post=snaps[(i + 1) % 4], status=StepStatus.SUCCEEDED,
                                duration=1.0))
            recorder.finish(save=True)
    return _size(path)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + '*'))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--frames', type=int, default=200)
    parser.add_argument('--steps', type=int, default=200)
    parser.add_argument('--out', type=Path, default=Path(__file__).with_name('images.md'))
    args = parser.parse_args()
    lines = ['# Camera checks', '', f'`bench/images` on {cpu_name()}, Python '
             f'{platform.python_version()}, {args.frames} frames per row (noise {NOISE:g} grey '
             f'levels, tolerance {TOLERANCE:g}, cell = height / 15).', '',
             '| frame | deserialize p50 ms | grid p50 ms | compare p50 ms | one check p50 ms '
             '| p99 ms |', '|---|---|---|---|---|---|']
    for width, height in ((640, 480), (1280, 720)):
        for compressed in (False, True):
            got = time_checks(width, height, compressed, args.frames)
            what = f'{width}x{height} {"JPEG" if compressed else "rgb8"}'
            lines.append(f'| {what} | {ms(got["deserialize p50"])} | {ms(got["grid p50"])} | '
                         f'{ms(got["compare p50"])} | {ms(got["total p50"])} | '
                         f'{ms(got["total p99"])} |')
            print(lines[-1], file=sys.stderr)
    noise, moved, misses = margins(args.frames)
    lines += ['', '## Margins (640x480, cell 32)', '',
              f'- unchanged scene, {args.frames} noisy frames: largest score {noise:.3f}, '
              f'{misses} over 1.0 (false misses)',
              f'- the 5 cm cube moved 2 cm at 0.6 m: score {moved:.2f} '
              f'({"caught" if moved > 1.0 else "NOT caught"})', '',
              '## Store bytes per step (pre and post snapshot of one camera, SQLite)', '',
              '| frame | cell | elements | bytes per step |', '|---|---|---|---|']
    for width, height, cell in ((320, 240, 16), (640, 480, 32), (640, 480, 16),
                                (1280, 720, 48)):
        size = store_bytes(width, height, cell, args.steps)
        elements = 3 * (width // cell) * (height // cell)
        lines.append(f'| {width}x{height} | {cell} | {elements} | {size:.0f} |')
        print(lines[-1], file=sys.stderr)
    args.out.write_text('\n'.join(lines) + '\n')
    print(f'wrote {args.out}', file=sys.stderr)


if __name__ == '__main__':
    main()
