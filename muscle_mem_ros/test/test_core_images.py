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

"""Camera frames as features (checks/images): decoding, the cell grid, deviations."""

from __future__ import annotations

import io

from muscle_mem_ros.checks.images import (
    decode_compressed, decode_raw, deviations, Frame, Grid, Region, thumbnail_png)
from muscle_mem_ros.errors import ImageError
import numpy as np
from PIL import Image
import pytest

WIDTH, HEIGHT = 640, 480
FOCAL = 525.0
"""Pixels per unit of x/z: a 640x480 camera with a 62 degree horizontal field of view."""


def _scene(*, cube_x: float = 0.0, rng: np.random.Generator | None = None,
           noise: float = 0.0, gain: float = 1.0) -> np.ndarray:
    """
    Return an rgb8 view of a table 0.6 m away with a 5 cm red cube on it, as uint8.

    The table has a wood-like texture (so the median of a cell is not all there is), the
    cube sits ``cube_x`` metres right of the centre. ``noise`` is the sensor's standard
    deviation in grey levels; ``gain`` the exposure.
    """
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    table = 0.45 + 0.08 * np.sin(xx / 23.0) * np.cos(yy / 41.0)
    image = np.stack([table * 0.9, table * 0.7, table * 0.5], axis=2)
    side = 0.05 * FOCAL / 0.6
    left = WIDTH / 2 + cube_x * FOCAL / 0.6 - side / 2
    top = HEIGHT / 2 - side / 2
    inside = (xx >= left) & (xx < left + side) & (yy >= top) & (yy < top + side)
    image[inside] = (0.8, 0.1, 0.1)
    image = image * gain * 255.0
    if noise:
        image = image + (rng or np.random.default_rng(0)).normal(0.0, noise, image.shape)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def _raw(pixels: np.ndarray, *, pad: int = 0) -> tuple[bytes, int]:
    """Return the image's rows as bytes with ``pad`` bytes after each, and the step."""
    rows = pixels.reshape(pixels.shape[0], -1).view(np.uint8)
    step = rows.shape[1] + pad
    padded = np.zeros((rows.shape[0], step), np.uint8)
    padded[:, :rows.shape[1]] = rows
    return padded.tobytes(), step


@pytest.mark.parametrize('encoding', ['rgb8', 'bgr8', 'rgba8', 'bgra8'])
def test_colour_encodings_decode_to_the_same_rgb(encoding):
    rgb = _scene()[:40, :50]
    order = [2, 1, 0] if encoding.startswith('bgr') else [0, 1, 2]
    pixels = rgb[:, :, order]
    if encoding.endswith('a8'):
        pixels = np.concatenate([pixels, np.full(pixels.shape[:2] + (1,), 7, np.uint8)], axis=2)
    data, step = _raw(np.ascontiguousarray(pixels), pad=6)
    frame = decode_raw(data=data, width=50, height=40, step=step, encoding=encoding)
    assert frame.shape == (50, 40) and not frame.depth
    np.testing.assert_allclose(frame.intensities(), rgb / 255.0, atol=1e-6)


@pytest.mark.parametrize('bigendian', [False, True])
def test_mono16_is_read_in_either_byte_order(bigendian):
    values = np.arange(12, dtype=np.uint16).reshape(3, 4) * 5000
    data, step = _raw(values.astype('>u2' if bigendian else '<u2'))
    frame = decode_raw(data=data, width=4, height=3, step=step, encoding='mono16',
                       is_bigendian=bigendian)
    np.testing.assert_allclose(frame.pixels[:, :, 0], values / 65535.0, atol=1e-6)


def test_depth_is_metres_with_invalid_pixels_left_out():
    mm = np.array([[600, 0], [650, 700]], dtype=np.uint16)
    data, step = _raw(mm)
    frame = decode_raw(data=data, width=2, height=2, step=step, encoding='16UC1')
    assert frame.depth
    assert np.isnan(frame.pixels[0, 1])
    np.testing.assert_allclose(frame.pixels[1], [0.65, 0.7], atol=1e-6)
    metres = np.array([[0.6, np.nan], [np.inf, 0.7]], dtype=np.float32)
    data, step = _raw(metres)
    frame = decode_raw(data=data, width=2, height=2, step=step, encoding='32FC1')
    assert np.isnan(frame.pixels[0, 1]) and np.isnan(frame.pixels[1, 0])
    assert frame.pixels[1, 1] == pytest.approx(0.7)


def test_an_unknown_encoding_or_a_short_buffer_is_an_image_error():
    with pytest.raises(ImageError, match=r"'yuv422' is not read \(known: rgb8"):
        decode_raw(data=bytes(100), width=5, height=5, step=10, encoding='yuv422')
    with pytest.raises(ImageError, match='needs rows of 15 bytes'):
        decode_raw(data=bytes(40), width=5, height=5, step=15, encoding='rgb8')


@pytest.mark.parametrize('fmt', ['png', 'jpeg'])
def test_compressed_frames_decode_with_pillow(fmt):
    rgb = _scene()
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format=fmt.upper(), quality=95)
    frame = decode_compressed(data=out.getvalue(), format=f'rgb8; {fmt} compressed bgr8')
    assert frame.shape == (WIDTH, HEIGHT)
    error = np.abs(frame.intensities() - rgb / 255.0).mean()
    assert error < (1e-6 if fmt == 'png' else 0.02)


def test_a_corrupt_jpeg_is_an_image_error():
    out = io.BytesIO()
    Image.fromarray(_scene()).save(out, format='JPEG')
    with pytest.raises(ImageError, match='could not be decoded'):
        decode_compressed(data=out.getvalue()[:200], format='jpeg')
    with pytest.raises(ImageError, match="'tiff' is not read"):
        decode_compressed(data=out.getvalue(), format='tiff')


def _frame(rgb: np.ndarray) -> Frame:
    return Frame(rgb, 'rgb8')


def test_noise_and_light_stay_small_and_a_2cm_move_stands_out():
    grid = Grid(width=WIDTH, height=HEIGHT, cell=16)
    recorded = grid.vector(_frame(_scene()))
    rng = np.random.default_rng(3)
    noisy = grid.vector(_frame(_scene(noise=3.0, rng=rng)))
    brighter = grid.vector(_frame(_scene(noise=3.0, rng=rng, gain=1.06)))
    moved = grid.vector(_frame(_scene(cube_x=0.02)))
    worst = {name: float(np.nanmax(np.abs(deviations(recorded, v, channels=3))))
             for name, v in (('noise', noisy), ('light', brighter), ('moved', moved))}
    assert worst['noise'] < 0.01, worst
    assert worst['light'] < 0.04, worst
    assert worst['moved'] > 0.2, worst
    changed = np.flatnonzero(np.abs(deviations(recorded, moved, channels=3)) > 0.1)
    regions = {grid.cell_region(int(i)) for i in changed}
    assert all(abs(r.y + 8 - HEIGHT / 2) < 40 for r in regions), regions


def test_a_change_of_light_is_not_removed_from_depth():
    deviation = deviations(np.array([0.6, 0.6, 0.6]), np.array([0.65, 0.65, 0.65]), channels=0)
    np.testing.assert_allclose(deviation, 0.05)


def test_masks_and_the_region_of_interest_leave_cells_out():
    grid = Grid(width=WIDTH, height=HEIGHT, cell=16, roi=Region(160, 120, 320, 240),
                masks=(Region(160, 120, 20, 16),))
    assert grid.cells == (20, 15)
    vector = grid.vector(_frame(_scene()))
    assert vector.shape == (3 * 20 * 15,)
    nan = np.flatnonzero(np.isnan(vector[:300]))
    assert nan.tolist() == [0, 1]  # the mask touches the first two cells of the top row
    moved = grid.vector(_frame(_scene(cube_x=0.25)))  # the cube leaves the region
    outside = grid.vector(_frame(_scene(cube_x=0.0)))
    assert np.nanmax(np.abs(deviations(vector, outside, channels=3))) == 0.0
    assert np.nanmax(np.abs(deviations(vector, moved, channels=3))) > 0.2


def test_depth_cells_with_too_few_valid_pixels_are_left_out():
    metres = np.full((32, 32), 0.6, np.float32)
    metres[:16, :16] = np.nan  # no valid pixel
    metres[16:, :16][::2] = np.nan  # half valid: kept
    metres[:16, 16:][:, :9] = np.nan  # 7 of 16 columns valid: left out
    vector = Grid(width=32, height=32, cell=16).vector(Frame(metres, '32FC1'))
    assert np.isnan(vector[0]) and np.isnan(vector[1])
    assert vector[2] == pytest.approx(0.6) and vector[3] == pytest.approx(0.6)


def test_another_resolution_is_an_image_error_and_a_bad_region_a_value_error():
    grid = Grid(width=WIDTH, height=HEIGHT)
    with pytest.raises(ImageError, match='sends 320x240 frames, the check was made for 640x480'):
        grid.vector(_frame(_scene()[::2, ::2]))
    with pytest.raises(ValueError, match='outside the 640x480 view'):
        Grid(width=WIDTH, height=HEIGHT, roi=Region(600, 0, 100, 100))
    with pytest.raises(ValueError, match='positive size'):
        Region(0, 0, 0, 10)


def test_a_thumbnail_is_a_small_png():
    png = thumbnail_png(_frame(_scene()), side=96)
    with Image.open(io.BytesIO(png)) as image:
        assert image.format == 'PNG' and image.size == (96, 72)
    depth = np.full((48, 64), 0.6, np.float32)
    depth[0, 0] = np.nan
    with Image.open(io.BytesIO(thumbnail_png(Frame(depth, '32FC1')))) as image:
        assert image.mode == 'L' and image.size == (64, 48)
