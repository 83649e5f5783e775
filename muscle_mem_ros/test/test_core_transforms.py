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
The transform buffer: chains composed, stamps interpolated, and what it refuses, named.

ROS-free (:mod:`muscle_mem_ros.transforms.buffer`). The tree of most tests is a robot's
``base -> arm -> hand`` and a camera ``base -> cam -> tag`` seeing a tag, with numbers a
person can check: the tag's pose in the hand frame is worked out by hand below, and checked
again against 4x4 matrices made by scipy for random transforms.
"""

from __future__ import annotations

import math
import random
import threading

from muscle_mem_ros.errors import (
    DisconnectedFramesError,
    ExtrapolationError,
    FrameTreeError,
    StaleTransformError,
    UnknownFrameError,
)
from muscle_mem_ros.transforms.buffer import Lookup, TransformBuffer
from muscle_mem_ros.transforms.history import HOLD
from muscle_mem_ros.transforms.rotation import (
    angle_between,
    from_axis_angle,
    from_yaw,
    IDENTITY,
    to_yaw,
)
from muscle_mem_ros.transforms.transform import Transform
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

TIGHT = 1e-12
QUARTER = math.pi / 2


def robot(buffer: TransformBuffer | None = None) -> TransformBuffer:
    """
    Return a buffer holding ``base -> arm -> hand`` and ``base -> cam -> tag``, all static.

    The arm sits 1 m along the base's x, turned 90 degrees (its x is the base's y); the
    hand 0.5 m along the arm's x. The camera sits at (0, 2, 1), turned 180 degrees; the
    tag 1 m along the camera's x. So in the base frame the hand is at (1, 0.5, 0) turned 90
    degrees and the tag at (-1, 2, 1) turned 180 degrees.
    """
    buffer = buffer or TransformBuffer()
    buffer.set('base', 'arm', 0.0, Transform((1.0, 0.0, 0.0), from_yaw(QUARTER)), static=True)
    buffer.set('arm', 'hand', 0.0, Transform((0.5, 0.0, 0.0), IDENTITY), static=True)
    buffer.set('base', 'cam', 0.0, Transform((0.0, 2.0, 1.0), from_yaw(math.pi)), static=True)
    buffer.set('cam', 'tag', 0.0, Transform((1.0, 0.0, 0.0), IDENTITY), static=True)
    return buffer


def matrix(t: Transform) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = Rotation.from_quat(t.rotation).as_matrix()
    out[:3, 3] = t.translation
    return out


def moving_arm(buffer: TransformBuffer, stamps: tuple[float, ...] = (1.0, 2.0)) -> None:
    """
    Set ``base -> arm`` dynamic, at ``stamps``.

    At the first stamp the arm is at the base's origin; at the last, 1 m along x and turned
    90 degrees; in a straight line and at a constant turn between.
    """
    first, last = stamps[0], stamps[-1]
    for stamp in stamps:
        ratio = (stamp - first) / (last - first)
        buffer.set('base', 'arm', stamp, Transform((ratio, 0.0, 0.0), from_yaw(QUARTER * ratio)))


def test_a_chain_through_the_common_ancestor_is_composed_as_worked_out_by_hand():
    buffer = robot()
    hand = buffer.lookup('base', 'hand')
    assert hand.transform.translation == pytest.approx((1.0, 0.5, 0.0), abs=TIGHT)
    assert to_yaw(hand.transform.rotation) == pytest.approx(QUARTER, abs=TIGHT)
    found = buffer.lookup('hand', 'tag')
    # the tag is 2 m behind and 1.5 m left of the hand in the base; the hand faces the base's
    # y, so in the hand frame it is 1.5 m ahead, 2 m left, 1 m up, turned 90 degrees
    assert found.transform.translation == pytest.approx((1.5, 2.0, 1.0), abs=TIGHT)
    assert angle_between(found.transform.rotation, from_yaw(QUARTER)) == pytest.approx(
        0.0, abs=1e-7)
    assert found.links == ('cam->tag', 'base->cam', 'base->arm', 'arm->hand')
    assert found.transform.apply((0.0, 0.0, 0.0)) == pytest.approx((1.5, 2.0, 1.0), abs=TIGHT)
    back = buffer.lookup('tag', 'hand').transform
    assert back.compose(found.transform).distance_to(Transform()) == pytest.approx(0.0,
                                                                                   abs=TIGHT)
    assert buffer.lookup('arm', 'hand').links == ('arm->hand',)
    assert buffer.lookup('hand', 'arm').transform.translation == pytest.approx(
        (-0.5, 0.0, 0.0), abs=TIGHT)
    same = buffer.lookup('tag', 'tag')
    assert same.transform == Transform() and same.links == ()


def test_random_chains_agree_with_matrices():
    rng = random.Random(3)

    def some() -> Transform:
        axis = (rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1))
        return Transform((rng.uniform(-2, 2), rng.uniform(-2, 2), rng.uniform(-2, 2)),
                         from_axis_angle(axis, rng.uniform(-math.pi, math.pi)))

    buffer = TransformBuffer()
    links = {'arm': ('base', some()), 'hand': ('arm', some()), 'cam': ('base', some()),
             'tag': ('cam', some()), 'finger': ('hand', some())}
    for child, (parent, t) in links.items():
        buffer.set(parent, child, 0.0, t, static=True)

    def in_base(frame: str) -> np.ndarray:
        out = np.eye(4)
        while frame != 'base':
            parent, t = links[frame]
            out = matrix(t) @ out
            frame = parent
        return out

    for target, source in (('finger', 'tag'), ('tag', 'finger'), ('hand', 'cam'),
                           ('base', 'finger'), ('finger', 'base')):
        expected = np.linalg.inv(in_base(target)) @ in_base(source)
        assert np.allclose(matrix(buffer.lookup(target, source).transform), expected,
                           atol=1e-12), (target, source)


def test_a_link_is_interpolated_between_its_stamps():
    buffer = TransformBuffer()
    moving_arm(buffer)
    buffer.set('arm', 'hand', 0.0, Transform((0.5, 0.0, 0.0), IDENTITY), static=True)
    arm = buffer.lookup('base', 'arm', at=1.25).transform
    assert arm.translation == pytest.approx((0.25, 0.0, 0.0), abs=TIGHT)
    assert to_yaw(arm.rotation) == pytest.approx(QUARTER / 4, abs=TIGHT)
    hand = buffer.lookup('base', 'hand', at=1.5)
    c, s = math.cos(QUARTER / 2), math.sin(QUARTER / 2)
    assert hand.transform.translation == pytest.approx((0.5 + 0.5 * c, 0.5 * s, 0.0),
                                                       abs=TIGHT)
    assert hand.stamp == 1.5 and hand.oldest == 2.0 and hand.oldest_link == 'base->arm'
    at_stamp = buffer.lookup('base', 'arm', at=2.0).transform
    assert at_stamp.translation == pytest.approx((1.0, 0.0, 0.0), abs=TIGHT)
    assert to_yaw(at_stamp.rotation) == pytest.approx(QUARTER, abs=TIGHT)


def test_with_no_time_the_chain_is_looked_up_at_the_latest_time_all_its_links_have():
    buffer = robot()
    buffer.set('world', 'base', 1.0, Transform((0.0, 0.0, 0.0), IDENTITY))
    buffer.set('world', 'base', 3.0, Transform((2.0, 0.0, 0.0), IDENTITY))
    buffer.set('cam', 'ball', 1.5, Transform((0.0, 0.0, 0.0), IDENTITY))
    buffer.set('cam', 'ball', 2.5, Transform((0.0, 0.0, 1.0), IDENTITY))
    latest = buffer.lookup('world', 'ball')
    assert latest.stamp == 2.5 and latest.oldest == 2.5 and latest.oldest_link == 'cam->ball'
    # base at 2.5 is at x = 1.5; the ball 1 m above the camera, at (0, 2, 1) in the base
    assert latest.transform.translation == pytest.approx((1.5, 2.0, 2.0), abs=TIGHT)
    assert latest.age(now=2.75) == pytest.approx(0.25, abs=TIGHT)
    latest.check_age(now=2.75, max_age=0.3)
    with pytest.raises(StaleTransformError, match=r'link cam->ball is stale: its data is '
                       r'0\.250 s old \(stamp 2\.500, now 2\.750\), older than max_age 0\.2 s'):
        latest.check_age(now=2.75, max_age=0.2)


def test_a_static_link_holds_at_every_time_and_never_ages():
    buffer = robot()
    for at in (-1e6, 0.0, 12.5, 1.7e9):
        found = buffer.lookup('hand', 'tag', at=at)
        assert found.transform.translation == pytest.approx((1.5, 2.0, 1.0), abs=TIGHT)
        assert found.stamp == at and found.oldest is None and found.oldest_link == ''
    static = buffer.lookup('hand', 'tag')
    assert static.stamp is None and static.age(now=1e9) == 0.0
    static.check_age(now=1e9, max_age=0.1)
    # /tf_static sent again (a latched republish, a recalibration): the new value stands
    buffer.set('cam', 'tag', 5.0, Transform((2.0, 0.0, 0.0), IDENTITY), static=True)
    assert buffer.lookup('base', 'tag', at=1.0).transform.translation == pytest.approx(
        (-2.0, 2.0, 1.0), abs=TIGHT)
    assert len(buffer.link('tag') or ()) == 1


def test_a_frame_never_seen_is_named_with_the_ones_that_are():
    buffer = robot()
    with pytest.raises(UnknownFrameError, match=r"frame 'hnad' is unknown: no transform has "
                       r"named it \(did you mean 'hand'\?\); known frames: arm, base, cam, "
                       r'hand, tag'):
        buffer.lookup('base', 'hnad')
    with pytest.raises(UnknownFrameError, match="frame 'map' is unknown"):
        buffer.lookup('map', 'hand')
    with pytest.raises(UnknownFrameError, match='known frames: none yet'):
        TransformBuffer().lookup('map', 'map')


def test_frames_in_separate_trees_are_refused_naming_both_roots():
    buffer = robot()
    buffer.set('map', 'dock', 0.0, Transform(), static=True)
    with pytest.raises(DisconnectedFramesError, match=(
            r"frames 'hand' and 'dock' are in separate trees: 'hand' is under root 'base', "
            r"'dock' is under root 'map'; no chain")):
        buffer.lookup('hand', 'dock')
    with pytest.raises(DisconnectedFramesError,
                       match=r"'map' is a root \(it has no parent\), 'tag' is under root 'base'"):
        buffer.lookup('map', 'tag')


def test_a_time_outside_a_links_stamps_is_refused_naming_the_link_and_the_stamps():
    buffer = TransformBuffer()
    moving_arm(buffer, stamps=(1.0, 1.5, 2.0))
    buffer.set('arm', 'hand', 0.0, Transform((0.5, 0.0, 0.0), IDENTITY), static=True)
    with pytest.raises(ExtrapolationError, match=(
            r"lookup of 'hand' in 'base' at 2\.500: link base->arm has no data then; it has 3 "
            r'stamps from 1\.000 to 2\.000, and 2\.500 is 0\.500 s after its newest '
            r'\(extrapolation into the future is refused beyond 0\.01 s\)')):
        buffer.lookup('base', 'hand', at=2.5)
    with pytest.raises(ExtrapolationError, match=(
            r'link base->arm has no data then; .* 0\.900 is 0\.100 s before its oldest '
            r'\(extrapolation into the past')):
        buffer.lookup('hand', 'base', at=0.9)
    # within the hold, the end's transform stands as it is (held, not extrapolated)
    held = buffer.lookup('base', 'arm', at=2.0 + HOLD / 2)
    assert held.transform.translation == pytest.approx((1.0, 0.0, 0.0), abs=TIGHT)
    assert held.oldest == 2.0
    early = buffer.lookup('base', 'arm', at=1.0 - HOLD / 2).transform
    assert early.translation == pytest.approx((0.0, 0.0, 0.0), abs=TIGHT)
    assert robot().lookup('base', 'hand', at=2.5).stamp == 2.5  # static: no refusal


def test_the_latest_common_time_is_refused_when_a_link_starts_after_it():
    buffer = TransformBuffer()
    buffer.set('map', 'odom', 1.0, Transform())
    buffer.set('map', 'odom', 2.0, Transform())
    buffer.set('odom', 'base', 5.0, Transform())
    buffer.set('odom', 'base', 6.0, Transform())
    with pytest.raises(ExtrapolationError, match=(
            r"lookup of 'base' in 'map' at 2\.000 \(the latest time every link of the chain "
            r'has data for\): link odom->base has no data then; it has 2 stamps from 5\.000 to '
            r'6\.000, and 2\.000 is 3\.000 s before its oldest')):
        buffer.lookup('map', 'base')


def test_a_second_parent_a_loop_and_a_link_both_static_and_dynamic_are_refused_at_set():
    buffer = robot()
    with pytest.raises(FrameTreeError, match=(
            r"frame 'hand' has parent 'arm'; a transform from 'cam' would give it a second "
            r'parent')):
        buffer.set('cam', 'hand', 1.0, Transform())
    with pytest.raises(FrameTreeError, match=(
            r"link hand->base would close a loop: 'hand' is already under 'base' "
            r'\(base->arm->hand\)')):
        buffer.set('hand', 'base', 1.0, Transform())
    with pytest.raises(FrameTreeError, match=(
            r'link arm->hand is static; a dynamic transform for it is refused')):
        buffer.set('arm', 'hand', 1.0, Transform())
    assert isinstance(FrameTreeError('x'), ValueError)
    assert buffer.parent('hand') == 'arm' and buffer.parent('base') is None
    assert buffer.frames == {'base', 'arm', 'hand', 'cam', 'tag'}


@pytest.mark.parametrize(('parent', 'child', 'stamp', 'transform', 'message'), [
    ('base', 'arm', math.nan, Transform(), 'stamp nan is not finite'),
    ('base', 'arm', 1.0, Transform((0.0, math.inf, 0.0), IDENTITY), 'is not finite'),
    ('base', 'arm', 1.0, Transform((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0)), 'not a rotation'),
    ('base', 'arm', 1.0, Transform((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, math.nan)),
     'not a rotation'),
    ('arm', 'arm', 1.0, Transform(), 'cannot be its own parent'),
    ('', 'arm', 1.0, Transform(), 'a frame needs a name'),
    ('/', 'arm', 1.0, Transform(), 'a frame needs a name'),
])
def test_set_refuses_what_is_not_a_transform(parent, child, stamp, transform, message):
    buffer = TransformBuffer()
    with pytest.raises(ValueError, match=message):
        buffer.set(parent, child, stamp, transform)
    assert buffer.frames == frozenset()


def test_set_normalizes_a_rounded_quaternion_and_drops_a_leading_slash():
    buffer = TransformBuffer()
    buffer.set('/base', '/arm', 1.0, Transform((1.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.004)))
    found = buffer.lookup('base', 'arm', at=1.0)
    assert found.transform.rotation == (0.0, 0.0, 0.0, 1.0)
    assert buffer.lookup('/base', 'arm', at=1.0).transform == found.transform
    buffer.set('base', '/arm', 2.0, Transform((2.0, 0.0, 0.0), IDENTITY))
    assert buffer.link('arm').stamps == (1.0, 2.0)  # type: ignore[union-attr]


def test_the_history_keeps_its_last_seconds_and_the_stamps_in_order():
    buffer = TransformBuffer(cache_time=1.0)
    for i in range(301):  # 0 to 3 s at 100 Hz
        buffer.set('odom', 'base', i / 100, Transform((i / 100, 0.0, 0.0), IDENTITY))
    link = buffer.link('base')
    assert link is not None
    assert link.oldest == pytest.approx(2.0) and link.newest == 3.0 and len(link) == 101
    with pytest.raises(ExtrapolationError, match=r'101 stamps from 2\.000 to 3\.000, and '
                       r'1\.500 is 0\.500 s before its oldest'):
        buffer.lookup('odom', 'base', at=1.5)
    assert buffer.lookup('odom', 'base', at=2.505).transform.translation == pytest.approx(
        (2.505, 0.0, 0.0), abs=1e-9)
    # late messages: kept in stamp order when inside the history, dropped when older
    assert buffer.set('odom', 'base', 2.505, Transform((9.0, 0.0, 0.0), IDENTITY)) is True
    assert buffer.set('odom', 'base', 1.9, Transform()) is False
    assert buffer.set('odom', 'base', 2.5, Transform((7.0, 0.0, 0.0), IDENTITY)) is True
    stamps = link.stamps
    assert list(stamps) == sorted(stamps) and len(stamps) == 102 and 1.9 not in stamps
    assert buffer.lookup('odom', 'base', at=2.505).transform.translation[0] == 9.0
    assert buffer.lookup('odom', 'base', at=2.5).transform.translation[0] == 7.0
    # a newer stamp drops what fell out of the last second
    buffer.set('odom', 'base', 3.5, Transform())
    assert link.oldest == 2.5 and 2.505 in link.stamps


def test_the_newest_transform_is_kept_however_old():
    buffer = TransformBuffer(cache_time=1.0)
    buffer.set('odom', 'base', 1.0, Transform((1.0, 0.0, 0.0), IDENTITY))
    buffer.set('odom', 'base', 100.0, Transform((2.0, 0.0, 0.0), IDENTITY))
    link = buffer.link('base')
    assert link is not None and link.stamps == (100.0,)
    assert buffer.lookup('odom', 'base').transform.translation[0] == 2.0


def test_the_chain_kept_for_a_pair_goes_when_the_tree_changes_shape():
    buffer = robot()
    first = buffer.lookup('hand', 'tag')
    buffer.lookup('base', 'hand')
    assert buffer.kept_chains == 2
    # a refused second parent leaves the tree, the kept chains and the answers as they were
    with pytest.raises(FrameTreeError):
        buffer.set('cam', 'hand', 0.0, Transform(), static=True)
    assert buffer.kept_chains == 2
    assert buffer.lookup('hand', 'tag') == first
    # a new transform of a known link is no change of shape
    buffer.set('cam', 'tag', 0.0, Transform((3.0, 0.0, 0.0), IDENTITY), static=True)
    assert buffer.kept_chains == 2
    assert buffer.lookup('base', 'tag').transform.translation == pytest.approx(
        (-3.0, 2.0, 1.0), abs=TIGHT)
    # a new frame changes the shape: the chains are found again
    buffer.set('world', 'base', 0.0, Transform((10.0, 0.0, 0.0), IDENTITY), static=True)
    assert buffer.kept_chains == 0
    assert buffer.lookup('world', 'hand').transform.translation == pytest.approx(
        (11.0, 0.5, 0.0), abs=TIGHT)
    assert buffer.lookup('world', 'hand').links == ('arm->hand', 'base->arm', 'world->base')


def test_after_clear_a_new_tree_is_looked_up_not_the_kept_chain():
    buffer = robot()
    assert buffer.lookup('base', 'hand').transform.translation == pytest.approx(
        (1.0, 0.5, 0.0), abs=TIGHT)
    buffer.clear()
    assert buffer.kept_chains == 0 and buffer.frames == frozenset()
    with pytest.raises(UnknownFrameError):
        buffer.lookup('base', 'hand')
    buffer.set('base', 'cam', 0.0, Transform((0.0, 0.0, 2.0), IDENTITY), static=True)
    buffer.set('cam', 'hand', 0.0, Transform((0.0, 0.0, 1.0), IDENTITY), static=True)
    found = buffer.lookup('base', 'hand')
    assert found.transform.translation == pytest.approx((0.0, 0.0, 3.0), abs=TIGHT)
    assert found.links == ('cam->hand', 'base->cam')


def test_a_lookup_is_a_typed_record():
    found = robot().lookup('hand', 'tag', at=3.0)
    assert isinstance(found, Lookup) and isinstance(found.transform, Transform)
    assert found._fields == ('transform', 'stamp', 'oldest', 'oldest_link', 'links')


def test_a_time_that_is_not_finite_is_refused():
    with pytest.raises(ValueError, match="lookup of 'tag' in 'hand': time nan is not finite"):
        robot().lookup('hand', 'tag', at=math.nan)


def test_lookups_while_another_thread_sets_see_whole_transforms():
    buffer = TransformBuffer(cache_time=0.05)  # short: the history is compacted often
    buffer.set('odom', 'base', 0.0, Transform((0.0, 0.0, 0.0), IDENTITY))
    buffer.set('base', 'arm', 0.0, Transform((0.0, 0.0, 1.0), IDENTITY), static=True)
    stop = threading.Event()

    def publish() -> None:
        k = 0
        while not stop.is_set():
            k += 1
            stamp = k * 1e-3
            buffer.set('odom', 'base', stamp, Transform((stamp, 0.0, 0.0), from_yaw(stamp)))

    setter = threading.Thread(target=publish)
    setter.start()
    try:
        seen = 0
        for _ in range(3000):
            found = buffer.lookup('odom', 'arm')
            assert found.stamp is not None
            # whatever the stamp, the transform is the one set at it, whole
            assert found.transform.translation == pytest.approx((found.stamp, 0.0, 1.0),
                                                                abs=1e-9)
            assert angle_between(found.transform.rotation, from_yaw(found.stamp)) < 1e-7
            seen = max(seen, len(buffer.frames))
    finally:
        stop.set()
        setter.join()
    assert seen == 3
