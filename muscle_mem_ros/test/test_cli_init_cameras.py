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
``muscle-mem init`` on a cell with cameras: each one a camera sensor, or left out saying why.

A ROS domain of its own holds real publishers of real frames (:class:`Cameras`): a colour
camera whose pixels are noisy by :data:`PIXEL_NOISE` grey levels and whose top band of cells
flickers (a lamp at the edge of the view), a small JPEG camera, a depth camera noisy by
:data:`DEPTH_NOISE` metres with dead pixels, and three init must leave out: an encoding not
read (``yuv422``), a camera that switches resolution, a JPEG stream cut short. init runs in
its own process; the cache node then starts from the file as written. The tolerance is
judged by what it is for: fresh frames of the unchanged scene pass it, an object moved by
half a cell does not.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from typing import Any

from muscle_mem_ros.checks.imagenoise import largest_deviation
from muscle_mem_ros.checks.images import decode_raw, Grid, Region
from muscle_mem_ros.cli.initcameras import camera_from, CameraSample, hear, Heard
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
from node_helpers import CacheProcess, Names, wait_until
import numpy as np
from PIL import Image as PilImage
import pytest
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import CompressedImage, Image
from std_srvs.srv import SetBool
import yaml

WIDTH, HEIGHT = 160, 120
"""The colour camera's frames: cells of 8 pixels (120 / 15), 20 x 15 of them."""
PIXEL_NOISE = 20.0
"""Grey levels of Gaussian noise per pixel of the colour camera."""
FLICKER = 70.0
"""Grey levels the top band's cells jump by, each frame."""
DEPTH_NOISE = 0.02
"""Metres of noise per depth pixel."""


def _scene(rng: np.random.Generator, *, noise: float, flicker: bool = True,
           square: tuple[int, int] | None = (60, 48)) -> np.ndarray:
    """Return one rgb8 frame of the cell: a textured bench, a red block, noise."""
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    bench = 0.45 + 0.08 * np.sin(xx / 9.0) * np.cos(yy / 13.0)
    image = np.stack([bench * 0.9, bench * 0.8, bench * 0.7], axis=2) * 255.0
    if square is not None:
        x, y = square
        image[y:y + 16, x:x + 16] = (215, 30, 25)
    image += rng.normal(0.0, noise, image.shape)
    if flicker:  # the lamp: the top row of cells, each cell by its own jump
        jumps = rng.uniform(-FLICKER, FLICKER, (1, WIDTH // 8))
        image[:8] += np.repeat(jumps, 8, axis=1)[:, :, np.newaxis]
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def _image(pixels: np.ndarray, encoding: str = 'rgb8') -> Image:
    height, width = pixels.shape[:2]
    return Image(height=height, width=width, encoding=encoding, is_bigendian=0,
                 step=pixels.strides[0], data=pixels.tobytes())


def _jpeg(pixels: np.ndarray, cut: bool = False) -> CompressedImage:
    out = io.BytesIO()
    PilImage.fromarray(pixels).save(out, format='JPEG', quality=90)
    data = out.getvalue()
    return CompressedImage(format='jpeg', data=data[:len(data) // 3] if cut else data)


class Cameras(Node):
    """The cell's cameras (module docstring) and one service, a tool for the file."""

    def __init__(self, context: Any) -> None:
        super().__init__('cell_cameras', context=context)
        self._rng = np.random.default_rng(11)
        self._ticks = 0
        self._pubs = {name: self.create_publisher(kind, topic, 5) for name, kind, topic in (
            ('colour', Image, '/cell/camera/image_raw'),
            ('wrist', CompressedImage, '/cell/wrist/compressed'),
            ('depth', Image, '/cell/depth/image_raw'),
            ('ir', Image, '/cell/ir/image_raw'),
            ('zoom', Image, '/cell/zoom/image_raw'),
            ('broken', CompressedImage, '/cell/broken/compressed'))}
        self.create_service(SetBool, '/cell/light', self._light)
        self.create_timer(1 / 15, self._publish)

    @staticmethod
    def _light(_request: Any, response: Any) -> Any:
        response.success = True
        return response

    def _publish(self) -> None:
        rng = self._rng
        self._ticks += 1
        self._pubs['colour'].publish(_image(_scene(rng, noise=PIXEL_NOISE)))
        small = _scene(rng, noise=2.0, flicker=False)[::2, ::2]
        self._pubs['wrist'].publish(_jpeg(np.ascontiguousarray(small)))
        depth = (1.0 + rng.normal(0.0, DEPTH_NOISE, (60, 80))).astype(np.float32)
        depth[rng.random(depth.shape) < 0.05] = 0.0  # dead pixels: invalid, left out
        self._pubs['depth'].publish(_image(depth, '32FC1'))
        self._pubs['ir'].publish(Image(height=4, width=4, encoding='yuv422', step=8,
                                       data=bytes(32)))
        side = 2 if self._ticks % 2 else 1
        self._pubs['zoom'].publish(_image(_scene(rng, noise=2.0)[::side, ::side].copy()))
        self._pubs['broken'].publish(_jpeg(small.copy(), cut=True))


@pytest.fixture(scope='module')
def cell(tmp_path_factory):
    """Run init on the cell; return (domain, the file's text, init's JSON summary)."""
    tmp = tmp_path_factory.mktemp('init_cameras')
    domain_id = random.randint(120, 200)
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain_id)
    node = Cameras(context)
    executor = MultiThreadedExecutor(num_threads=2, context=context)
    executor.add_node(node)
    spinner = Spinner(executor)
    try:
        path = tmp / 'cell.yaml'
        env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id))
        done = subprocess.run([sys.executable, '-m', 'muscle_mem_ros.cli', 'init', str(path),
                               '--json', '--store', str(tmp / 'cache.db'), '--duration', '3'],
                              capture_output=True, text=True, timeout=90, env=env)
        assert done.returncode == 0, done.stderr
        yield tmp, domain_id, path, json.loads(done.stdout)
    finally:
        spinner.stop()
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def _sensors(path) -> dict:
    return yaml.safe_load(path.read_text())['muscle_mem']['ros__parameters']['sensors']


def test_cameras_are_written_with_their_frames_and_the_rest_left_out_saying_why(cell):
    _, _, path, summary = cell
    text = path.read_text()
    sensors = _sensors(path)
    # keys: the shortest unique tail of each topic
    assert set(sensors) == {'image_raw', 'compressed', 'depth_image_raw'}, text
    colour, wrist, depth = sensors['image_raw'], sensors['compressed'], sensors['depth_image_raw']
    assert colour == {**colour, 'type': 'sensor_msgs/msg/Image', 'encoding': 'rgb8',
                      'width': WIDTH, 'height': HEIGHT, 'cell': 8, 'mode': 'image'}, text
    assert wrist == {**wrist, 'type': 'sensor_msgs/msg/CompressedImage', 'encoding': 'rgb8',
                     'width': 80, 'height': 60, 'cell': 4, 'mode': 'image'}, text
    assert depth == {**depth, 'encoding': '32FC1', 'width': 80, 'height': 60, 'cell': 4}, text
    assert 'fields' not in colour and len(colour['tolerance']) == 1
    left = {s: text.split(f'#   {s} ')[1].split('\n')[0] for s in (
        '/cell/ir/image_raw', '/cell/zoom/image_raw', '/cell/broken/compressed')}
    assert "image encoding 'yuv422' is not read" in left['/cell/ir/image_raw'], text
    assert 'its frames changed while sampled (80x60 rgb8, 160x120 rgb8)' in \
        left['/cell/zoom/image_raw'], text
    assert 'could not be decoded' in left['/cell/broken/compressed'], text
    assert set(summary['left_out']) >= set(left)
    assert summary['cameras']['image_raw']['roi'] == [0, 8, WIDTH, HEIGHT - 8]


def test_the_tolerance_passes_the_noise_and_fails_an_object_moved_half_a_cell(cell):
    _, _, path, summary = cell
    colour = _sensors(path)['image_raw']
    (tolerance,) = colour['tolerance']
    # the lamp's band is cut off: it varied far more than the rest, and it is said
    assert colour['roi'] == [0, 8, WIDTH, HEIGHT - 8]
    assert summary['cameras']['image_raw']['rule'] == 'noise'
    assert tolerance == pytest.approx(1.5 * summary['cameras']['image_raw']['noise'],
                                      rel=0.1)
    grid = Grid(WIDTH, HEIGHT, 8, Region(*colour['roi']))
    rng = np.random.default_rng(5)

    def vector(**kwargs: Any) -> np.ndarray:
        pixels = _scene(rng, noise=PIXEL_NOISE, **kwargs)
        return grid.vector(decode_raw(data=pixels.tobytes(), width=WIDTH, height=HEIGHT,
                                      step=WIDTH * 3, encoding='rgb8'))

    recorded = vector()
    still = [largest_deviation(recorded, vector(), channels=3) for _ in range(30)]
    assert max(still) < tolerance, (still, tolerance)
    moved = largest_deviation(recorded, vector(square=(64, 48)), channels=3)
    assert moved > tolerance, (moved, tolerance)
    # the band the lamp flickers in, kept, would have set a tolerance the move passes
    band = Grid(WIDTH, HEIGHT, 8)
    flicker = max(largest_deviation(band.vector(_frame(rng)), band.vector(_frame(rng)),
                                    channels=3) for _ in range(10))
    assert flicker > moved


def _frame(rng: np.random.Generator):
    pixels = _scene(rng, noise=PIXEL_NOISE)
    return decode_raw(data=pixels.tobytes(), width=WIDTH, height=HEIGHT, step=WIDTH * 3,
                      encoding='rgb8')


def test_a_quiet_camera_gets_the_floor_and_depth_is_in_metres(cell):
    _, _, path, _ = cell
    text = path.read_text()
    sensors = _sensors(path)
    assert sensors['compressed']['tolerance'] == [0.05], text
    assert 'roi' not in sensors['compressed']
    assert 'region of interest: the whole view' in text
    (metres,) = sensors['depth_image_raw']['tolerance']
    # a 4x4 cell averages 16 pixels (fewer where dead): its noise is about 0.005 m
    assert 0.01 < metres < 0.1, text
    assert 'largest cell deviation at rest' in text and ' m;' in text


def test_the_node_starts_from_the_file_as_written(cell):
    tmp, domain_id, path, _ = cell
    cache = CacheProcess(names=Names(prefix='cell', node='muscle_mem'), params_file=path,
                         log=tmp / 'cache.log', domain_id=domain_id)
    try:
        ready = wait_until(lambda: 'behavior cache ready' in cache.output()
                           or not cache.alive(), 60.0)
        assert ready and cache.alive(), cache.output()
    finally:
        cache.stop()


def _heard(width: int, height: int, value: float = 0.5, encoding: str = 'mono8') -> Heard:
    pixels = np.full((height, width), int(value * 255), dtype=np.uint8)
    return hear(_image(pixels, encoding), compressed=False)


def test_a_camera_that_changes_or_sends_too_little_is_left_out_never_a_crash():
    times = (0.0, 0.1, 0.2)
    changed = camera_from(CameraSample('/c', 'sensor_msgs/msg/Image', times, (
        _heard(64, 48), _heard(64, 48), _heard(32, 24))))
    assert changed == ('its frames changed while sampled (32x24 mono8, 64x48 mono8): a camera '
                       'sensor is written for one resolution and encoding; run init again once '
                       'the camera sends one kind')
    encodings = camera_from(CameraSample('/c', 'sensor_msgs/msg/Image', times, (
        _heard(64, 48), hear(_image(np.zeros((48, 64, 3), np.uint8)), compressed=False))))
    assert isinstance(encodings, str) and '64x48 mono8, 64x48 rgb8' in encodings
    one = camera_from(CameraSample('/c', 'sensor_msgs/msg/Image', times[:1], (_heard(64, 48),)))
    assert one == '1 of 1 frame(s) decoded while sampled: two are needed to measure its noise'
    assert camera_from(CameraSample('/c', 'sensor_msgs/msg/Image', (), ())) == \
        'sent no frame while sampled'
    dead = np.zeros((48, 64), np.float32)
    blind = camera_from(CameraSample('/c', 'sensor_msgs/msg/Image', times, tuple(
        hear(_image(dead, '32FC1'), compressed=False) for _ in times)))
    assert isinstance(blind, str) and 'no cell' in blind
    short = Image(height=48, width=64, encoding='rgb8', step=192, data=bytes(100))
    broken = hear(short, compressed=False)
    assert broken.vector is None and 'needs rows of 192 bytes' in broken.error
