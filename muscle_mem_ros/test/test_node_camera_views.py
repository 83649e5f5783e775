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
What the camera saw, kept by a real cache node (issue 44 item 2, shown).

The node records a task with two cameras over the harness's table (raw rgb8 and JPEG,
:mod:`camera_helpers`): every recorded pre and post snapshot keeps a 96 px PNG of each
camera's frame. ``muscle-mem show --images`` writes them out, ``export --mcap`` carries
them as CompressedImage, and ``learn`` of that export learns the task back.
"""

from __future__ import annotations

import io
import json

from camera_helpers import camera_harness
from muscle_mem_ros.cli import main
from muscle_mem_ros.ros.bags.exportformat import view_topic
from muscle_mem_ros.store import SqliteStore
from node_helpers import wait_until
from PIL import Image
import pytest


@pytest.fixture(scope='module')
def harness(tmp_path_factory):
    h = camera_harness(tmp_path_factory.mktemp('camera_views'))
    assert wait_until(lambda: all(c.published >= 3 for c in h.cameras.values()), 10.0)
    run = h.run_task('look')
    assert run.result.success and not run.result.cache_hit, run.result.message
    yield h
    h.close()


def red(png: bytes) -> bool:
    """Return True when the thumbnail's centre is the red object (at home, mid-view)."""
    with Image.open(io.BytesIO(png)) as image:
        r, g, b = image.convert('RGB').getpixel((48, 36))
    return r > 150 and g < 100 and b < 100


def test_each_recorded_snapshot_keeps_each_cameras_view(harness):
    with SqliteStore(path=harness.tmp / 'cache.db', read_only=True) as store:
        (info,) = store.trajectories(task='look')
        nodes = store.path(info.id)
    assert len(nodes) >= 2
    for node in nodes:
        for snapshot in (node.step.pre, node.step.post):
            assert snapshot is not None
            assert set(snapshot.images) == {'camera', 'jpeg'} == set(snapshot.features) - {
                'joints'}
            for png in snapshot.images.values():
                with Image.open(io.BytesIO(png)) as image:
                    assert image.format == 'PNG' and image.size == (96, 72)
                assert red(png)


def test_show_export_and_learn_of_the_export(harness, capsys):
    h = harness
    db = h.tmp / 'cache.db'
    views = h.tmp / 'views'
    assert main(['show', str(db), 'look', '--images', str(views)]) == 0
    text = capsys.readouterr().out
    files = sorted(views.iterdir())
    assert len(files) >= 8 and all(str(f) in text for f in files)  # 2+ steps, 2 phases, 2 cams
    for f in files:
        with Image.open(f) as image:
            assert image.size == (96, 72)
    export = h.tmp / 'look.mcap'
    assert main(['export', str(db), 'look', '--mcap', str(export), '--json']) == 0

    messages = json.loads(capsys.readouterr().out)['messages']
    steps = messages['/muscle_mem/pre']
    assert messages[view_topic('camera')] == messages[view_topic('jpeg')] == 2 * steps
    learned = h.tmp / 'learned.db'
    code = main(['learn', str(export), '--params-file', str(h.tmp / 'params.yaml'),
                 '--node-name', h.names.node, '--task', 'look', '--store', str(learned)])
    assert code == 0, capsys.readouterr().err
    with SqliteStore(path=db, read_only=True) as a, \
            SqliteStore(path=learned, read_only=True) as b:
        (ta,), (tb,) = a.trajectories(task='look'), b.trajectories(task='look')
        pa, pb = a.path(ta.id), b.path(tb.id)
        assert [n.step.payload for n in pa] == [n.step.payload for n in pb]
        assert [sorted(n.step.pre.features) for n in pa] == \
            [sorted(n.step.pre.features) for n in pb]
