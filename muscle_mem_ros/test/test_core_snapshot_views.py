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
Issue 44 item 2, shown: the thumbnails of what a camera saw, kept, shown and exported.

A snapshot carries ``images`` (camera sensor -> PNG) inside its stored bytes: stores
written before keep reading, a snapshot without thumbnails is stored byte for byte as
before, and no check or dedupe reads them. ``muscle-mem show --images DIR`` writes them
as files; ``muscle-mem export --mcap`` writes them as CompressedImage messages.
"""

from __future__ import annotations

from dataclasses import replace
import io
import json
from pathlib import Path
import struct

from cli_helpers import FIB, FIB_TYPE
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from muscle_mem_ros.checks.images import Frame, thumbnail_png
from muscle_mem_ros.cli import main
from muscle_mem_ros.errors import StoreCorruptError
from muscle_mem_ros.records import Series, Snapshot, Step, ToolKind, Trace
from muscle_mem_ros.ros.bags.exportformat import is_view_topic, view_topic
from muscle_mem_ros.ros.bags.reader import read_bag
from muscle_mem_ros.store import open_store, SqliteStore
from muscle_mem_ros.store.base import step_signature
from muscle_mem_ros.store.codec import decode_snapshot, encode_snapshot, SNAPSHOT_MAGIC
from muscle_mem_ros.store.values import Blobs, write_container
import numpy as np
from pg_server import pg_server  # noqa: F401 (fixture)
from PIL import Image
import pytest
from rclpy.serialization import serialize_message
from test_msgs.action import Fibonacci


def view(red_at: int, width: int = 320, height: int = 240) -> bytes:
    """Return the thumbnail of a grey frame with a red square at column ``red_at``."""
    pixels = np.full((height, width, 3), 0.4)
    pixels[100:140, red_at:red_at + 40] = (0.9, 0.1, 0.1)
    return thumbnail_png(Frame(pixels=pixels, encoding='rgb8'))


def snapshot(t: float, red_at: int | None = None) -> Snapshot:
    images = {} if red_at is None else {'camera': view(red_at), 'depth cam': view(red_at + 8)}
    return Snapshot(features={'camera': (0.4, 0.5), 'joints': (1.0, 2.0)},
                    stamps={'camera': t - 0.01, 'joints': t - 0.02}, taken_at=t, images=images)


def fib_step(pre: Snapshot, post: Snapshot) -> Step:
    return Step(tool=FIB, kind=ToolKind.ACTION, type_name=FIB_TYPE,
                payload=bytes(serialize_message(Fibonacci.Goal(order=5))),
                payload_json='{"order": 5}', pre=pre, post=post, duration=0.2)


def test_thumbnails_are_png_of_at_most_96_px():
    with Image.open(io.BytesIO(view(60))) as image:
        assert image.format == 'PNG' and image.size == (96, 72)
        assert image.getpixel((int(80 * 96 / 320), int(120 * 96 / 320)))[0] > 200  # red


def test_the_codec_keeps_thumbnails_and_old_bytes_stay_as_they_were():
    with_views = snapshot(5.0, red_at=60)
    back = decode_snapshot(encode_snapshot(with_views))
    assert back is not None and back.images == with_views.images
    assert back.features == with_views.features
    plain = snapshot(5.0)
    data = encode_snapshot(plain)
    assert data is not None and b'"i"' not in data  # a snapshot without views: as before
    assert decode_snapshot(data).images == {}
    # bytes as a store written before thumbnails holds them
    blobs = Blobs()
    header = {'t': 1.0, 'f': [['a', '<f8', [1], blobs.add(struct.pack('<d', 2.0))]], 's': []}
    old = decode_snapshot(write_container(SNAPSHOT_MAGIC, header, blobs))
    assert old is not None and old.features == {'a': (2.0,)} and old.images == {}


@pytest.mark.parametrize('entry', [['camera', 7], ['camera', -1], [3, 0], ['camera']])
def test_a_bad_thumbnail_entry_is_a_corrupt_snapshot(entry):
    blobs = Blobs()
    header = {'t': 1.0, 'f': [], 's': [], 'i': [entry]}
    blobs.add(b'png')
    with pytest.raises(StoreCorruptError, match='malformed'):
        decode_snapshot(write_container(SNAPSHOT_MAGIC, header, blobs))


def test_thumbnails_are_not_identity():
    a = fib_step(snapshot(1.0, red_at=60), snapshot(2.0, red_at=60))
    b = fib_step(snapshot(1.0, red_at=200), snapshot(2.0))
    c = fib_step(snapshot(1.0), snapshot(2.0))
    assert step_signature(a) == step_signature(b) == step_signature(c)


def check_store(store) -> None:
    """Record twice (other views the second time): one node, the first views kept."""
    first = store.add_trajectory(task='look', variant='', params_json='{}', steps=[
        fib_step(snapshot(1.0, red_at=60), snapshot(2.0, red_at=100))])
    second = store.add_trajectory(task='look', variant='', params_json='{}', steps=[
        fib_step(snapshot(3.0, red_at=200), snapshot(4.0, red_at=200))])
    assert first.node_ids == second.node_ids  # thumbnails do not split a branch
    (node,) = store.path(first.id)
    assert node.step.pre.images == {'camera': view(60), 'depth cam': view(68)}
    assert node.step.post.images == {'camera': view(100), 'depth cam': view(108)}


def test_a_sqlite_store_keeps_the_views(tmp_path):
    path = tmp_path / 'cache.db'
    with SqliteStore(path=path) as store:
        check_store(store)
    with SqliteStore(path=path, read_only=True) as store:
        (info,) = store.trajectories(task='look')
        (node,) = store.path(info.id)
        assert node.step.pre.images['camera'] == view(60)


def test_a_postgresql_store_keeps_the_views(pg_server):  # noqa: F811
    url = pg_server.new_url()
    with open_store(url) as store:
        check_store(store)
    with open_store(url) as store:  # read from the database, not what the writer cached
        (info,) = store.trajectories(task='look')
        (node,) = store.path(info.id)
        assert node.step.post.images['depth cam'] == view(108)


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    path = tmp_path / 'cache.db'
    with SqliteStore(path=path) as store:
        store.add_trajectory(task='look', variant='', params_json='{}', steps=[
            fib_step(snapshot(10.0, red_at=60), snapshot(10.5, red_at=100)),
            fib_step(snapshot(11.0), snapshot(11.5))])
    return path


def test_show_writes_the_views_and_names_them(capsys, recorded, tmp_path):
    out_dir = tmp_path / 'views'
    assert main(['show', str(recorded), 'look', '--images', str(out_dir)]) == 0
    text = capsys.readouterr().out
    files = sorted(out_dir.iterdir())
    assert [f.name for f in files] == ['t1-s0-post-camera.png', 't1-s0-post-depth_cam.png',
                                       't1-s0-pre-camera.png', 't1-s0-pre-depth_cam.png']
    for f in files:
        assert str(f) in text
        with Image.open(f) as image:
            assert image.format == 'PNG' and max(image.size) == 96
    with Image.open(out_dir / 't1-s0-pre-camera.png') as pre, \
            Image.open(out_dir / 't1-s0-post-camera.png') as post:
        assert pre.convert('RGB').getpixel((24, 36))[0] > 200  # red at x 60..100
        assert post.convert('RGB').getpixel((24, 36))[0] < 150  # moved to x 100..140
    assert main(['show', str(recorded), 'look', '--images', str(out_dir), '--json']) == 0
    (traj,) = json.loads(capsys.readouterr().out)
    assert traj['steps'][0]['images']['pre']['camera'] == str(out_dir / 't1-s0-pre-camera.png')
    assert traj['steps'][1]['images'] == {}
    assert main(['show', str(recorded), 'look', '--json']) == 0
    assert 'images' not in json.loads(capsys.readouterr().out)[0]['steps'][0]


def test_export_writes_the_views_as_compressed_images(capsys, recorded, tmp_path):
    out = tmp_path / 'look.mcap'
    assert main(['export', str(recorded), 'look', '--mcap', str(out)]) == 0
    capsys.readouterr()
    with open(out, 'rb') as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        rows = [(c.topic, s.name, m.log_time, d)
                for s, c, m, d in reader.iter_decoded_messages(log_time_order=True)]
    times = {topic: [t for tp, _, t, _ in rows if tp == topic]
             for topic in ('/muscle_mem/pre', '/muscle_mem/post')}
    views = [(topic, name, t, msg) for topic, name, t, msg in rows if is_view_topic(topic)]
    assert {topic for topic, *_ in views} == {view_topic('camera'), view_topic('depth cam')}
    camera = [(t, msg) for topic, name, t, msg in views if topic == view_topic('camera')]
    assert all(name == 'sensor_msgs/msg/CompressedImage' for _, name, _, _ in views)
    # step 0's pre and post (step 1 kept no views), each at its snapshot's time
    assert [t for t, _ in camera] == [times['/muscle_mem/pre'][0], times['/muscle_mem/post'][0]]
    for (t, msg), png in zip(camera, (view(60), view(100))):
        assert msg.format == 'png' and bytes(msg.data) == png
        assert msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec == t
        assert msg.header.frame_id == 'camera'
        with Image.open(io.BytesIO(bytes(msg.data))) as image:
            assert image.size == (96, 72)


def test_view_topics_are_only_those_of_a_sensor():
    assert is_view_topic('/muscle_mem/camera/recorded/compressed')
    assert not is_view_topic('/muscle_mem//recorded/compressed'[:-1])
    assert not is_view_topic('/muscle_mem/pre')
    assert not is_view_topic('/camera/recorded/compressed')


def test_a_trace_that_starts_before_its_goal_never_runs_back_over_the_last_step(
        capsys, tmp_path):
    """The node's watch samples from before the goal's acceptance: learn must read them."""
    early = Trace(rate=40.0, sensors={'joints': Series(times=(-0.3, 0.0, 0.05),
                                                       values=((1.0,), (1.1,), (1.2,)))})
    path = tmp_path / 'cache.db'
    with SqliteStore(path=path) as store:
        steps = [fib_step(snapshot(10.0 + i, red_at=60), snapshot(10.05 + i, red_at=60))
                 for i in (0.0, 0.1)]
        steps = [replace(step, trace=early) for step in steps]
        store.add_trajectory(task='look', variant='', params_json='{}', steps=steps)
    out = tmp_path / 'look.mcap'
    assert main(['export', str(path), 'look', '--mcap', str(out)]) == 0
    capsys.readouterr()
    bag = read_bag(out)  # raises when a topic's clock runs back
    trace, pre = bag.topic('/muscle_mem/trace'), bag.topic('/muscle_mem/pre')
    goal = bag.topic('/fib/goal')
    assert trace is not None and pre is not None and goal is not None
    assert list(trace.times) == sorted(trace.times) and len(trace.times) == 6
    for k in range(2):  # each step's samples: after its pre, offsets from its goal kept
        assert trace.times[3 * k] > pre.times[k]
        assert [t - goal.times[k] for t in trace.times[3 * k:3 * k + 3]] == \
            [-300_000_000, 0, 50_000_000]
