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
The transform feed fills the buffer from a real ``/tf`` and ``/tf_static``.

Real DDS, real rclpy: a publisher node sends ``tf2_msgs/msg/TFMessage`` with the QoS tf2_ros's
broadcasters use (keep-last 100, reliable; transient local for ``/tf_static``), and the feed
of :mod:`muscle_mem_ros.ros.capture.transformfeed` subscribes as tf2_ros's listener does. Each
test names its own frames, so what another test's publisher left cannot satisfy it.
"""

from __future__ import annotations

import math
import time
import uuid

from geometry_msgs.msg import TransformStamped
from muscle_mem_ros.ros.capture.tfcdr import TFReader
from muscle_mem_ros.ros.capture.transformfeed import STATIC_QOS, TF_QOS, TransformFeed
from muscle_mem_ros.ros.rclfix import waitset
from muscle_mem_ros.transforms.buffer import TransformBuffer
from muscle_mem_ros.transforms.rotation import angle_between, from_yaw
from muscle_mem_ros.transforms.transform import interpolate, Transform
from node_helpers import wait_until
import pytest
import rclpy
from rclpy.node import Node
from rclpy.serialization import serialize_message
from tf2_msgs.msg import TFMessage


def stamped(parent: str, child: str, stamp: float, xyz: tuple[float, float, float],
            quat: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)) -> TransformStamped:
    """Return one TransformStamped, as a broadcaster fills it."""
    t = TransformStamped()
    t.header.stamp.sec = int(stamp)
    t.header.stamp.nanosec = round((stamp - int(stamp)) * 1e9)
    t.header.frame_id = parent
    t.child_frame_id = child
    t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = xyz
    r = t.transform.rotation
    r.x, r.y, r.z, r.w = quat
    return t


class World:
    """A context, a cache-like node, a publisher node on /tf and /tf_static, and feeds."""

    def __init__(self) -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = Node(f'cache_{uuid.uuid4().hex[:8]}', context=self.context)
        self.pub_node = Node(f'tf_pub_{uuid.uuid4().hex[:8]}', context=self.context)
        self.tf = self.pub_node.create_publisher(TFMessage, '/tf', TF_QOS)
        self.static = self.pub_node.create_publisher(TFMessage, '/tf_static', STATIC_QOS)
        self.feeds: list[TransformFeed] = []
        self.errors: list[str] = []
        self.batches: list[float] = []
        self.prefix = f'f{uuid.uuid4().hex[:6]}_'

    def frame(self, name: str) -> str:
        """Return this test's own name for frame ``name``."""
        return self.prefix + name

    def feed(self, buffer: TransformBuffer) -> TransformFeed:
        feed = TransformFeed(self.node, buffer, on_data=lambda: self.batches.append(1.0),
                             on_error=self.errors.append)
        self.feeds.append(feed)
        return feed

    def close(self) -> None:
        for feed in self.feeds:
            feed.close()
        self.pub_node.destroy_node()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


@pytest.fixture
def world():
    made = World()
    try:
        yield made
    finally:
        made.close()


def knows(buffer: TransformBuffer, *frames: str) -> bool:
    return set(frames) <= buffer.frames


@pytest.mark.parametrize('plain', [False, True], ids=['wait_set', 'plain'])
def test_a_static_and_a_dynamic_chain_are_looked_up_interpolated(world, monkeypatch, plain):
    if plain:
        monkeypatch.setenv(waitset.FORCE_FALLBACK, '1')
    else:
        monkeypatch.delenv(waitset.FORCE_FALLBACK, raising=False)
    f = world.frame
    buffer = TransformBuffer()
    feed = world.feed(buffer)
    assert (feed.fallback is not None) == plain
    mount = Transform((0.0, 0.0, 0.5), from_yaw(math.pi / 2))
    first = Transform((1.0, 0.0, 0.0), from_yaw(0.0))
    second = Transform((2.0, 1.0, 0.0), from_yaw(0.4))
    tool = Transform((0.0, 0.0, 0.1))
    static = TFMessage(transforms=[stamped(f('world'), f('base'), 0.0, mount.translation,
                                           mount.rotation)])
    dynamic = TFMessage(transforms=[
        stamped(f('base'), f('arm'), 100.0, first.translation, first.rotation),
        stamped(f('arm'), f('tool'), 100.0, tool.translation),
    ])
    later = TFMessage(transforms=[
        stamped(f('base'), f('arm'), 100.2, second.translation, second.rotation),
        stamped(f('arm'), f('tool'), 100.2, tool.translation),
    ])
    world.static.publish(static)

    def sent() -> bool:
        world.tf.publish(dynamic)
        world.tf.publish(later)
        return knows(buffer, f('world'), f('base'), f('arm'), f('tool'))
    assert wait_until(sent, 20.0), buffer.frames
    assert wait_until(lambda: len(buffer.link(f('arm')) or ()) == 2, 5.0)
    found = buffer.lookup(f('world'), f('tool'), at=100.05)
    want = mount.compose(interpolate(first, second, 0.25)).compose(tool)
    assert found.transform.distance_to(want) < 1e-9
    assert angle_between(found.transform.rotation, want.rotation) < 1e-9
    assert found.links == (f'{f("arm")}->{f("tool")}', f'{f("base")}->{f("arm")}',
                           f'{f("world")}->{f("base")}')
    assert buffer.link(f('base')).static and not buffer.link(f('arm')).static
    assert world.errors == []


def test_tf_static_sent_before_the_feed_started_is_received(world):
    f = world.frame
    world.static.publish(TFMessage(transforms=[
        stamped(f('map'), f('dock'), 0.0, (3.0, 4.0, 0.0)),
        stamped(f('dock'), f('tag'), 0.0, (0.0, 0.0, 0.2)),
    ]))
    time.sleep(0.3)  # sent, and nobody listening yet
    buffer = TransformBuffer()
    world.feed(buffer)
    assert wait_until(lambda: knows(buffer, f('map'), f('dock'), f('tag')), 20.0)
    assert buffer.lookup(f('map'), f('tag')).transform.translation == (3.0, 4.0, 0.2)


def test_a_malformed_transform_is_reported_naming_its_link_and_the_rest_kept(world):
    f = world.frame
    buffer = TransformBuffer()
    world.feed(buffer)
    message = TFMessage(transforms=[
        stamped(f('base'), f('good'), 5.0, (1.0, 2.0, 3.0)),
        stamped(f('base'), f('nan'), 5.0, (math.nan, 0.0, 0.0)),
        stamped(f('base'), f('zero'), 5.0, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0)),
        stamped(f('base'), f('after'), 5.0, (0.0, 1.0, 0.0)),
    ])
    assert wait_until(lambda: (world.tf.publish(message), len(world.errors) >= 2)[1], 20.0)
    assert wait_until(lambda: knows(buffer, f('good'), f('after')), 5.0)
    for _ in range(5):
        world.tf.publish(message)
    time.sleep(0.2)
    assert len(world.errors) == 2, world.errors  # once per link
    nan, zero = sorted(world.errors, key=lambda e: f('zero') in e)
    assert f'{f("base")}->{f("nan")}' in nan and 'not finite' in nan, nan
    assert f'{f("base")}->{f("zero")}' in zero and 'rotation' in zero, zero
    assert f('nan') not in buffer.frames and f('zero') not in buffer.frames
    assert buffer.lookup(f('base'), f('good')).transform.translation == (1.0, 2.0, 3.0)
    assert buffer.lookup(f('base'), f('after')).transform.translation == (0.0, 1.0, 0.0)


def test_received_advances_with_each_message_and_on_data_is_called(world):
    f = world.frame
    buffer = TransformBuffer()
    feed = world.feed(buffer)
    assert feed.received(f('arm')) == -math.inf
    start = time.monotonic()

    def send(stamp: float) -> None:
        world.tf.publish(TFMessage(transforms=[stamped(f('base'), f('arm'), stamp,
                                                       (stamp, 0.0, 0.0))]))
    assert wait_until(lambda: (send(1.0), feed.received(f('arm')) > start)[1], 20.0)
    assert world.batches
    time.sleep(0.3)  # the repeats sent while waiting have all arrived
    first = feed.received(f('arm'))
    assert start < first <= time.monotonic()
    batches = len(world.batches)
    send(2.0)
    assert wait_until(lambda: feed.received(f('arm')) > first, 5.0)
    assert len(world.batches) > batches
    assert buffer.link(f('arm')).newest == 2.0
    assert feed.received(f('base')) == -math.inf  # a parent only: no transform of its own


def test_close_stops_the_thread_and_removes_the_helper_node(world):
    buffer = TransformBuffer()
    feed = world.feed(buffer)
    helper = f'_{world.node.get_name()}_tf'
    assert wait_until(lambda: helper in world.pub_node.get_node_names(), 10.0)
    thread = feed._thread
    assert thread is not None and thread.is_alive()
    feed.close()
    assert not thread.is_alive()
    assert wait_until(lambda: helper not in world.pub_node.get_node_names(), 10.0)
    feed.close()  # twice is harmless
    assert world.errors == []


def test_the_reader_reuses_a_layout_and_learns_a_changed_one():
    reader = TFReader()
    msg = TFMessage(transforms=[stamped('base', 'link1', 7.5, (1.0, 2.0, 3.0)),
                                stamped('link1', 'link2', 7.5, (0.0, 0.0, 0.1),
                                        from_yaw(0.3))])
    for x in (1.0, 2.0, 3.0):
        msg.transforms[0].transform.translation.x = x
        layout, values = reader.decode(serialize_message(msg))
        assert values[:9] == (7, 500_000_000, x, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0)
    assert reader.learned == 1
    msg.transforms[1].child_frame_id = 'link3'  # the same length, another frame
    layout, values = reader.decode(serialize_message(msg))
    assert reader.learned == 2
    assert layout.links == (('base', 'link1'), ('link1', 'link3'))
    assert values[9:] == (7, 500_000_000, 0.0, 0.0, 0.1, *from_yaw(0.3))
    raw = serialize_message(msg)
    with pytest.raises(ValueError, match='truncated|cannot fit'):
        TFReader().decode(raw[:-9])
    with pytest.raises(ValueError, match='not a plain CDR'):
        TFReader().decode(b'\x00\x07' + raw[2:])
    assert TFReader().decode(serialize_message(TFMessage()))[0].links == ()
