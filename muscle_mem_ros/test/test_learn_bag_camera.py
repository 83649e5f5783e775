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
``muscle-mem learn`` of a bag whose camera is a sensor (issue 44): as the node learns live.

A JPEG camera at 10 Hz beside the arm's joints; some of its frames are cut off, as a
lossy link cuts them. Each one read is dropped and counted, the last good frame standing
in, as the node does live (a frame newer before anything read it is never decoded): the
task is learned, and its steps keep the thumbnails of their recorded views, as a step
learned live does. A camera of another size than configured is refused,
naming the sensor.
"""

from __future__ import annotations

import io
import json

from bag_helpers import write_bag
from muscle_mem_ros.cli.app import main
from muscle_mem_ros.store import SqliteStore
import numpy as np
from PIL import Image as PilImage
import pytest
from rclpy.serialization import serialize_message
from sensor_msgs.msg import CompressedImage
from test_learn_bag_errors import good_bag, MS, params_file, T0

CAMERA = '/camera/image_raw/compressed'
SENSOR = {'topic': CAMERA, 'type': 'sensor_msgs/msg/CompressedImage', 'encoding': 'rgb8',
          'width': 160, 'height': 120, 'cell': 16, 'tolerance': [0.1], 'max_age': 0.5}


def frame(at_ms: int, *, cut: bool = False, width: int = 160) -> tuple[str, str, bytes, int]:
    """Return a JPEG of a table with a red cube, fresh noise; ``cut``: its second half lost."""
    rng = np.random.default_rng(at_ms)
    pixels = np.full((120, width, 3), (150, 110, 80), dtype=np.float64)
    pixels[40:70, 60:90] = (200, 30, 30)
    pixels += rng.normal(0.0, 3.0, pixels.shape)
    out = io.BytesIO()
    PilImage.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(out, format='JPEG')
    data = out.getvalue()
    msg = CompressedImage(format='jpeg', data=data[:len(data) // 2] if cut else data)
    return CAMERA, 'sensor_msgs/msg/CompressedImage', bytes(serialize_message(msg)), \
        T0 + at_ms * MS


def learn(tmp_path, capsys, messages, *extra):
    write_bag(tmp_path / 'b.mcap', sorted(messages, key=lambda m: m[3]))
    params = params_file(tmp_path, sensors={
        'joints': {'topic': '/arm/joint_states', 'type': 'sensor_msgs/msg/JointState',
                   'fields': ['position'], 'tolerance': [0.01], 'max_age': 0.5},
        'camera': SENSOR})
    code = main(['learn', str(tmp_path / 'b.mcap'), '--params-file', str(params), '--task', 't',
                 '--store', str(tmp_path / 'cache.db'), *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_corrupt_frames_are_dropped_and_counted_and_the_steps_keep_their_views(
        tmp_path, capsys):
    cut = {300, 600, 700, 900}  # 300 is never read (400 is newer when the call starts)
    messages = good_bag() + [frame(t, cut=t in cut) for t in range(0, 2000, 100)]
    code, out, err = learn(tmp_path, capsys, messages, '--json')
    assert code == 0, err
    said = json.loads(out)
    assert said['dropped_frames'] == {'camera': 3}  # the trace's two, and the post's
    (task,) = said['tasks']
    assert task['steps'] == 1 and not task['skipped']
    with SqliteStore(path=str(tmp_path / 'cache.db'), read_only=True) as store:
        (info,) = store.trajectories(task='t')
        (node,) = store.path(info.id)
    for snapshot in (node.step.pre, node.step.post):
        assert snapshot is not None and len(snapshot.features['camera']) == 3 * 10 * 7
        thumbnail = PilImage.open(io.BytesIO(snapshot.images['camera']))
        assert thumbnail.format == 'PNG' and max(thumbnail.size) == 96


def test_the_cli_says_how_many_frames_it_dropped(tmp_path, capsys):
    messages = good_bag() + [frame(t, cut=t == 500) for t in range(0, 2000, 100)]
    code, out, err = learn(tmp_path, capsys, messages)
    assert code == 0, err
    assert 'sensors.camera: 1 frame(s) did not decode and were dropped' in out + err


def test_a_camera_of_another_size_is_refused_naming_the_sensor(tmp_path, capsys):
    messages = good_bag() + [frame(t, width=200) for t in range(0, 2000, 100)]
    code, out, err = learn(tmp_path, capsys, messages, '--json')
    assert code == 1
    assert 'sensors.camera' in err and '200' in err
    assert not (tmp_path / 'cache.db').exists()


@pytest.fixture(autouse=True)
def _plain_output(monkeypatch):
    monkeypatch.setenv('NO_COLOR', '1')
