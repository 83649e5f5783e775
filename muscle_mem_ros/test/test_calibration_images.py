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
``muscle-mem calibrate`` on a camera: repeats compared as a check compares them.

The store holds :data:`REPEATS` runs of one step whose pre snapshot is a real camera grid
(rgb8 frames of a bench with a red block, :data:`PIXEL_NOISE` grey levels of noise, and the
room's light different in each run by up to :data:`LIGHT`), one run recorded after the
camera was set to another resolution, and a later branch where the block had moved by half
a cell (a divergence). The proposal is one tolerance with most of the light's change taken
out, the moved block stays outside it, and the run of another size is said and left out.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
import subprocess
import sys
import threading

from cli_helpers import _step
from core_helpers import subprocess_env
from muscle_mem_ros.checks import calibration
from muscle_mem_ros.checks.images import decode_raw, deviations, Grid
from muscle_mem_ros.cli import main
from muscle_mem_ros.records import CompareMode, Snapshot, ToolKind
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
from muscle_mem_ros.store import SqliteStore
from node_helpers import CacheProcess, Names, wait_until, write_params
import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import Image
from test_msgs.action import Fibonacci
import yaml

REPEATS = 8
WIDTH, HEIGHT, CELL = 160, 120, 8
PIXEL_NOISE = 6.0
LIGHT = 0.12
"""Largest change of the room's light between two runs (a fraction of the intensity)."""


def _pixels(rng: np.random.Generator, *, light: float, block: int = 60) -> np.ndarray:
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    bench = 0.45 + 0.08 * np.sin(xx / 9.0) * np.cos(yy / 13.0)
    image = np.stack([bench * 0.9, bench * 0.8, bench * 0.7], axis=2) * 255.0
    image[48:64, block:block + 16] = (215, 30, 25)
    image = image * light + rng.normal(0.0, PIXEL_NOISE, image.shape)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def _grid(rng: np.random.Generator, *, light: float, block: int = 60,
          width: int = WIDTH, height: int = HEIGHT) -> tuple[float, ...]:
    pixels = _pixels(rng, light=light, block=block)
    step = HEIGHT // height
    pixels = np.ascontiguousarray(pixels[::step, ::step])
    frame = decode_raw(data=pixels.tobytes(), width=width, height=height, step=width * 3,
                       encoding='rgb8')
    return tuple(Grid(width, height, CELL).vector(frame).tolist())


def _run(store: SqliteStore, grid: tuple[float, ...], *, order: int, t: float) -> None:
    snap = Snapshot(features={'camera': grid, 'gripper': (0.02,)},
                    stamps={'camera': t, 'gripper': t}, taken_at=t)
    store.add_trajectory(task='look', variant='{}', params_json='{}', steps=[
        _step('/fib', ToolKind.ACTION, 'test_msgs/action/Fibonacci', Fibonacci.Goal(order=order),
              {'order': order}, snap, snap, 0.1)])


@pytest.fixture(scope='module')
def recorded(tmp_path_factory) -> tuple[Path, list[np.ndarray], list[np.ndarray]]:
    """Return the store, the repeats' grids and the divergences' grids."""
    rng = np.random.default_rng(2)
    path = tmp_path_factory.mktemp('camera_store') / 'cache.db'
    repeats, moved = [], []
    with SqliteStore(path=path) as store:
        for i in range(REPEATS):
            grid = _grid(rng, light=1.0 + LIGHT * (i / (REPEATS - 1) - 0.5))
            repeats.append(np.asarray(grid))
            _run(store, grid, order=5, t=10.0 * i)
        _run(store, _grid(rng, light=1.0, width=80, height=60), order=5, t=500.0)
        grid = _grid(rng, light=1.0, block=64)  # the block moved by half a cell: the agent
        moved.append(np.asarray(grid))          # took another step, learned as a branch
        _run(store, grid, order=7, t=900.0)
    return path, repeats, moved


def _params(tmp_path: Path, **camera: object) -> Path:
    path = tmp_path / 'params.yaml'
    path.write_text(yaml.safe_dump({'muscle_mem': {'ros__parameters': {'sensors': {
        'camera': {'topic': '/camera/image_raw', 'type': 'sensor_msgs/msg/Image',
                   'encoding': 'rgb8', 'width': WIDTH, 'height': HEIGHT, 'cell': CELL,
                   **camera},
        'gripper': {'tolerance': [0.01]}}}}}))
    return path


def test_a_camera_is_calibrated_as_it_is_checked_light_removed(recorded):
    path, repeats, moved = recorded
    with SqliteStore(path=path, read_only=True) as db:
        found = calibration.from_store(db, 'look', modes={'camera': CompareMode.IMAGE},
                                       channels={'camera': 3}, sizes={'camera': 900})
    # one tolerance: 1.5 x the largest cell deviation, light removed, between two repeats
    pairs = [np.nanmax(np.abs(deviations(a, b, channels=3)))
             for a, b in itertools.combinations(repeats, 2)]
    assert found.proposed['camera'] == pytest.approx((1.5 * max(pairs),))
    (tolerance,) = found.proposed['camera']
    # the light changed by 12 % between runs: measured as read, the repeats spread far wider
    # (what is left is what the light does not move alike: the bright block moves more)
    raw = max(np.abs(a - b).max() for a, b in itertools.combinations(repeats, 2))
    assert raw > 1.5 * max(pairs)
    # every repeat replays, no divergence (the block moved half a cell) does
    (row,) = calibration.what_if(found, 'camera', [tolerance])
    assert (row.replayed, row.repeats, row.wrong, row.divergences) == (
        REPEATS, REPEATS, 0, 1)
    assert min(found.separation['camera']) > tolerance
    # the run recorded at 80x60 is said and left out, never compared
    (note,) = found.notes
    assert note.startswith("sensor 'camera': 1 recording(s) with 210 elements, not the 900")
    assert 'the camera changed resolution or encoding' in note
    step = next(s for s in found.steps if s.repeats == REPEATS + 1)
    assert step.noise['camera'].samples == REPEATS


def test_a_camera_needs_its_channels_and_masked_cells_count_for_nothing(recorded):
    path, repeats, _ = recorded
    with SqliteStore(path=path, read_only=True) as db, \
            pytest.raises(ValueError, match='mode image needs its channels'):
        calibration.from_store(db, 'look', modes={'camera': CompareMode.IMAGE})
    masked = [r.copy() for r in repeats]
    for r in masked:
        r[::300] = np.nan  # the cells a mask touches, in each channel
    found = calibration.noise('camera', masked, mode=CompareMode.IMAGE, channels=3)
    assert len(found.proposed) == 1 and math.isfinite(found.proposed[0])
    assert math.isnan(found.std[0]) and math.isfinite(found.std[1])
    assert calibration.deviation(masked[0], masked[1], CompareMode.IMAGE, 3) <= \
        calibration.deviation(repeats[0], repeats[1], CompareMode.IMAGE, 3)
    # grids of another size (another resolution or encoding): not comparable, no crash
    assert calibration.deviation(repeats[0], repeats[0][:300], CompareMode.IMAGE, 3) == math.inf
    assert calibration.deviation(repeats[0][:301], repeats[0][:301], CompareMode.IMAGE,
                                 3) == math.inf


def test_cli_calibrate_reads_the_camera_from_the_params_file(recorded, tmp_path, capsys):
    path, repeats, _ = recorded
    code = main(['calibrate', str(path), 'look', '--json', '--params', str(_params(tmp_path))])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    (tolerance,) = data['proposed']['camera']
    pairs = [np.nanmax(np.abs(deviations(a, b, channels=3)))
             for a, b in itertools.combinations(repeats, 2)]
    assert tolerance == pytest.approx(1.5 * max(pairs))
    snippet = yaml.safe_load(data['params_yaml'])['muscle_mem']['ros__parameters']['sensors']
    assert snippet['camera'] == {'tolerance': pytest.approx(tolerance, rel=1e-5)}
    assert len(data['notes']) == 1 and '210 elements' in data['notes'][0]
    code = main(['calibrate', str(path), 'look', '--params', str(_params(tmp_path)),
                 '--sensor', 'camera'])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "what if sensor 'camera' had tolerance x (mode image" in out
    assert 'not the 900 of its grid' in ' '.join(out.split())
    # the params file says 80x60: the 900-element runs are the other size now
    code = main(['calibrate', str(path), 'look', '--json', '--params',
                 str(_params(tmp_path, width=80, height=60))])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data['proposed'].get('camera') is None  # one run of that size: nothing to spread
    assert '9 recording(s) with 900 elements, not the 210' in data['notes'][0]


class _Camera:
    """A real publisher of noisy rgb8 frames of the bench, 30 Hz, in its own context."""

    def __init__(self, topic: str) -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node('bench_camera', context=self.context)
        pub = self.node.create_publisher(Image, topic, 5)
        rng = np.random.default_rng(4)
        self.step = 1
        lock = threading.Lock()

        def tick() -> None:
            with lock:
                pixels = np.ascontiguousarray(_pixels(rng, light=1.0)[::self.step, ::self.step])
            height, width = pixels.shape[:2]
            pub.publish(Image(height=height, width=width, encoding='rgb8', step=width * 3,
                              data=pixels.tobytes()))

        self.node.create_timer(1 / 30, tick)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.spinner = Spinner(self.executor)

    def close(self) -> None:
        self.spinner.stop()
        rclpy.try_shutdown(context=self.context)


def _live(node: str, duration: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, '-m', 'muscle_mem_ros.cli', 'calibrate', '--live', f'/{node}',
         '--duration', duration, *extra],
        capture_output=True, text=True, env=subprocess_env(), timeout=120)


def test_live_calibrate_proposes_one_tolerance_for_a_real_camera(tmp_path):
    names = Names.unique()
    topic = f'/{names.prefix}/camera/image_raw'
    params = write_params(tmp_path / 'params.yaml', names.node, {
        'store_path': str(tmp_path / 'cache.db'), 'agent_action': '',
        'sensors': {'camera': {'topic': topic, 'type': 'sensor_msgs/msg/Image',
                               'encoding': 'rgb8', 'width': WIDTH, 'height': HEIGHT,
                               'cell': CELL, 'tolerance': [0.1], 'max_age': 1.0}}})
    camera = _Camera(topic)
    cache = CacheProcess(names=names, params_file=params, log=tmp_path / 'cache.log')
    try:
        assert wait_until(lambda: 'behavior cache ready' in cache.output()
                          or not cache.alive(), 60.0), cache.output()
        assert cache.alive(), cache.output()
        done = _live(names.node, '2', '--json')
        assert done.returncode == 0, done.stderr + cache.output()
        (found,) = json.loads(done.stdout)['sensors']
        assert found['sensor'] == 'camera' and found['current'] == [0.1]
        assert found['samples'] >= 10 and len(found['std']) == 900
        # a cell averages 64 pixels: its noise is 6 / 8 grey levels, 0.0029; the difference
        # of two frames' cells 0.0042, and the worst of 900 cells over the pairs 3 to 8 times
        # that
        (proposed,) = found['proposed']
        assert 1.5 * 3 * 0.0042 < proposed < 1.5 * 8 * 0.0042, found['proposed']
        human = _live(names.node, '1')
        assert human.returncode == 0, human.stderr
        assert 'all 900' in human.stdout and 'tolerance:' in human.stdout
        # the camera now sends 80x60 frames: no crash, the sensor sends nothing comparable
        camera.step = 2
        resized = _live(names.node, '1')
        assert 'Traceback' not in resized.stderr + cache.output()
        assert resized.returncode == 1 and 'no sensor sent data in 1 s: camera' in \
            resized.stderr, resized.stderr
        assert cache.alive()
    finally:
        cache.stop()
        camera.close()
