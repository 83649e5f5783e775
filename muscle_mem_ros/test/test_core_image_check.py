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
The image compare mode (issue 44): a camera's grid checked as the cache checks any sensor.

The scenes are :mod:`test_core_images`' table and 5 cm cube 0.6 m from a 640x480 camera,
with the camera's noise drawn anew for every frame.
"""

from __future__ import annotations

from muscle_mem_ros.checks.images import decode_raw, Grid, Region
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.records import CompareMode, SensorSpec, Snapshot
from muscle_mem_ros.resume import FailureKind
import numpy as np
import pytest
from test_core_images import _raw, _scene, HEIGHT, WIDTH

GRID = Grid(WIDTH, HEIGHT, 32)
TOLERANCE = 0.1


def _vector(pixels: np.ndarray, grid: Grid = GRID) -> tuple[float, ...]:
    data, step = _raw(pixels)
    frame = decode_raw(data=data, width=WIDTH, height=HEIGHT, step=step, encoding='rgb8')
    return tuple(grid.vector(frame).tolist())


def _check(grid: Grid = GRID, channels: int = 3) -> ToleranceCheck:
    return ToleranceCheck(sensors=[SensorSpec('camera', (TOLERANCE,), CompareMode.IMAGE,
                                              image=grid.layout(channels))])


def _snap(vector: tuple[float, ...], name: str = 'camera') -> Snapshot:
    return Snapshot(features={name: vector}, stamps={name: 0.0}, taken_at=0.0)


def test_noise_and_light_pass_where_a_two_centimetre_move_fails():
    rng = np.random.default_rng(1)
    check = _check()
    recorded = _snap(_vector(_scene(rng=rng, noise=5.0)))
    for _ in range(20):  # twenty fresh frames of the same scene: never a false miss
        assert check.evaluate(recorded, _snap(_vector(_scene(rng=rng, noise=5.0)))).passed
    brighter = check.evaluate(recorded, _snap(_vector(_scene(rng=rng, noise=5.0, gain=1.12))))
    assert brighter.passed, brighter.failures
    moved = check.evaluate(recorded, _snap(_vector(_scene(cube_x=0.02, rng=rng, noise=5.0))))
    assert not moved.passed
    (failure,) = moved.failures
    assert failure.sensor == 'camera' and failure.kind is FailureKind.OUT_OF_TOLERANCE
    assert failure.deviation > TOLERANCE and failure.score > 1.0
    # where: the cube's cells, right of the centre of the view
    assert 'cell at x ' in failure.reason and 'over' in failure.reason, failure.reason
    x = int(failure.reason.split('cell at x ')[1].split(',')[0])
    assert WIDTH / 2 - 64 <= x <= WIDTH / 2 + 96, failure.reason


def test_a_mask_over_the_change_lets_it_pass():
    rng = np.random.default_rng(2)
    side = 0.05 * 525.0 / 0.6
    over = Region(int(WIDTH / 2 - side), int(HEIGHT / 2 - side), int(3 * side), int(2 * side))
    masked = Grid(WIDTH, HEIGHT, 32, masks=(over,))
    check = _check(masked)
    recorded = _snap(_vector(_scene(rng=rng, noise=5.0), masked))
    now = _snap(_vector(_scene(cube_x=0.02, rng=rng, noise=5.0), masked))
    assert check.evaluate(recorded, now).passed
    assert not _check().evaluate(_snap(_vector(_scene(rng=rng, noise=5.0))),
                                 _snap(_vector(_scene(cube_x=0.02, rng=rng, noise=5.0)))).passed


def test_the_region_of_interest_leaves_out_the_rest_of_the_view():
    rng = np.random.default_rng(3)
    left = Grid(WIDTH, HEIGHT, 32, roi=Region(0, 0, 256, HEIGHT))  # the cube is not in it
    check = _check(left)
    recorded = _snap(_vector(_scene(rng=rng, noise=5.0), left))
    assert len(recorded.features['camera']) == 3 * 8 * 15
    assert check.evaluate(recorded, _snap(_vector(_scene(cube_x=0.03, rng=rng, noise=5.0),
                                                  left))).passed


def test_depth_is_metres_with_invalid_pixels_left_out():
    grid = Grid(64, 48, 16)
    check = ToleranceCheck(sensors=[SensorSpec('depth', (0.02,), CompareMode.IMAGE,
                                               image=grid.layout(0))])
    metres = np.full((48, 64), 0.8, np.float32)
    metres[::7, ::5] = 0.0  # dropouts, different each frame below
    data = (metres * 1000).astype('<u2').tobytes()
    frame = decode_raw(data=data, width=64, height=48, step=128, encoding='16UC1')
    recorded = _snap(tuple(grid.vector(frame).tolist()), 'depth')
    nearer = metres.copy()
    nearer[16:32, 16:32] = np.where(nearer[16:32, 16:32] > 0, 0.75, 0.0)  # 5 cm closer
    nearer[1::6, 2::4] = np.nan
    frame = decode_raw(data=nearer.astype('<f4').tobytes(), width=64, height=48, step=256,
                       encoding='32FC1')
    result = check.evaluate(recorded, _snap(tuple(grid.vector(frame).tolist()), 'depth'))
    assert not result.passed and result.failures[0].deviation == pytest.approx(0.05, abs=1e-3)
    assert 'depth' in result.failures[0].reason
    same = decode_raw(data=(metres * 1000).astype('<u2').tobytes(), width=64, height=48,
                      step=128, encoding='16UC1')
    assert check.evaluate(recorded, _snap(tuple(grid.vector(same).tolist()), 'depth')).passed


def test_a_view_with_nothing_left_to_compare_fails_closed():
    grid = Grid(64, 48, 16)
    check = ToleranceCheck(sensors=[SensorSpec('depth', (0.02,), CompareMode.IMAGE,
                                               image=grid.layout(0))])
    recorded = _snap(tuple([0.8] * 12), 'depth')
    result = check.evaluate(recorded, _snap(tuple([float('nan')] * 12), 'depth'))
    assert not result.passed and 'no cell to compare' in result.failures[0].reason


def test_many_recordings_score_as_one_does():
    rng = np.random.default_rng(4)
    check = _check()
    (compiled,) = check.compiled
    rows = np.array([_vector(_scene(cube_x=dx, rng=rng, noise=5.0)) for dx in (0.0, 0.02, 0.04)])
    now = np.array(_vector(_scene(rng=rng, noise=5.0)))
    scores = compiled.scores(rows, now)
    for row, score in zip(rows, scores):
        assert check.evaluate(_snap(tuple(row)), _snap(tuple(now))).score == pytest.approx(score)
    assert scores[0] <= 1.0 < scores[1] < scores[2] + 1.0


def test_an_image_spec_needs_its_layout_and_one_tolerance():
    with pytest.raises(ValueError, match='image layout'):
        ToleranceCheck(sensors=[SensorSpec('camera', (0.1,), CompareMode.IMAGE)])
    with pytest.raises(ValueError, match='one tolerance'):
        ToleranceCheck(sensors=[SensorSpec('camera', (0.1, 0.2), CompareMode.IMAGE,
                                           image=GRID.layout(3))])


def test_the_watched_view_is_coarse_and_lit_alike():
    from muscle_mem_ros.checks.imageview import QUANTUM, WATCH_CELLS, watch_view
    rng = np.random.default_rng(5)
    fine = Grid(WIDTH, HEIGHT, 16)  # 40 x 30 cells, pooled by 2 into 20 x 15
    layout = fine.layout(3)
    plain = watch_view(_vector(_scene(rng=rng, noise=5.0), fine), layout)
    assert len(plain) == 3 * 20 * 15 and 20 * 15 <= WATCH_CELLS < 40 * 30
    assert all(abs(v / QUANTUM - round(v / QUANTUM)) < 1e-9 for v in plain)
    assert len(watch_view(_vector(_scene(rng=rng)), GRID.layout(3))) == 3 * 20 * 15  # as is
    brighter = watch_view(_vector(_scene(rng=rng, noise=5.0, gain=1.1), fine), layout)
    assert max(abs(a - b) for a, b in zip(plain, brighter)) < TOLERANCE
    hand = _scene(rng=rng, noise=5.0)
    hand[40:130, 60:150] = (200, 160, 140)  # a hand, 10 cm at 0.6 m, enters the view
    entered = watch_view(_vector(hand, fine), layout)
    assert max(abs(a - b) for a, b in zip(plain, entered)) > 2 * TOLERANCE
    masked = Grid(WIDTH, HEIGHT, 16, masks=(Region(0, 0, 32, 32),))
    view = watch_view(_vector(_scene(rng=rng), masked), masked.layout(3))
    nan = [i for i, v in enumerate(view) if not np.isfinite(v)]
    assert nan == [0, 300, 600]  # the masked corner's block, in each channel


def test_a_camera_reads_its_newest_frame_that_decodes_trying_each_once():
    from muscle_mem_ros.ros.capture.camerafeed import FRAME_DEPTH, Frames
    frames = Frames()
    tried: list[bytes] = []

    def decode(raw: bytes):
        tried.append(raw)
        return None if raw.startswith(b'bad') else (float(raw[-1]),)

    for i, raw in enumerate([b'ok1', b'ok2', b'bad3', b'bad4']):
        frames.push(raw, float(i), 0.0)
    assert frames.reading(decode, lambda: False)[:2] == ((50.0,), 1.0)  # ok2, 1 s
    assert tried == [b'bad4', b'bad3', b'ok2']
    assert frames.reading(decode, lambda: False)[0] == (50.0,) and len(tried) == 3
    for i in range(FRAME_DEPTH):  # nothing but corrupt frames: the last good one stands in
        frames.push(b'bad', 10.0 + i, 0.0)
    assert frames.reading(decode, lambda: False)[1] == 1.0
    assert frames.reading(decode, lambda: True) is None  # unusable: nothing stands in
