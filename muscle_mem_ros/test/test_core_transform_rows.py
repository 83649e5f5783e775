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
``TransformBuffer.set_many`` (a TF message at once) leaves the buffer as ``set`` for each does.

The transform feed calls it for every message of a 1 kHz ``/tf``; its fast path skips the
:class:`Transform` and takes one lock per message, so it must agree with ``set`` on every
case: new links, the newest stamp, a late stamp, one older than the history, static links,
and each refusal.
"""

from __future__ import annotations

import math
import random

from muscle_mem_ros.errors import FrameTreeError
from muscle_mem_ros.transforms.buffer import TransformBuffer
from muscle_mem_ros.transforms.rotation import from_yaw
from muscle_mem_ros.transforms.transform import Transform
import pytest

Row = tuple[str, str, float, tuple[float, float, float], tuple[float, float, float, float]]


def numbers(rows: list[Row]) -> list[float]:
    """Return the nine numbers per transform that ``set_many`` takes."""
    out: list[float] = []
    for _parent, _child, stamp, xyz, quat in rows:
        sec = math.floor(stamp)
        out += [sec, round((stamp - sec) * 1e9), *xyz, *quat]
    return out


Both = tuple[TransformBuffer, TransformBuffer, list[list[str]], list[list[str]]]


def both(messages: list[tuple[list[Row], bool]]) -> Both:
    """Feed the messages to one buffer by set, to another by set_many; return both and errors."""
    one, many = TransformBuffer(), TransformBuffer()
    by_set: list[list[str]] = []
    by_many: list[list[str]] = []
    for rows, static in messages:
        errors: list[str] = []
        for parent, child, stamp, xyz, quat in rows:
            sec, nsec = numbers([(parent, child, stamp, xyz, quat)])[:2]  # the same rounding
            try:
                one.set(parent, child, sec + nsec * 1e-9, Transform(xyz, quat), static)
            except ValueError as err:
                errors.append(f'{type(err).__name__}: {err}')
        by_set.append(errors)
        refused = many.set_many([(p, c) for p, c, *_ in rows], numbers(rows), static)
        by_many.append([f'{type(err).__name__}: {err}' for _i, err in refused])
    return one, many, by_set, by_many


def same(one: TransformBuffer, many: TransformBuffer) -> None:
    assert one.frames == many.frames
    for frame in one.frames:
        a, b = one.link(frame), many.link(frame)
        assert (a is None) == (b is None), frame
        if a is not None and b is not None:
            assert (a.parent, a.static, a.stamps) == (b.parent, b.static, b.stamps), frame
            for stamp in a.stamps:
                assert a.at(stamp, 0.0) == b.at(stamp, 0.0), (frame, stamp)


def test_a_stream_with_late_old_and_static_transforms_ends_the_same():
    rng = random.Random(7)
    chain = [('base', 'l1'), ('l1', 'l2'), ('l2', 'l3'), ('/l3', 'tool')]
    messages: list[tuple[list[Row], bool]] = [
        ([('world', 'base', 0.0, (0.0, 0.0, 1.0), from_yaw(0.5))], True)]
    for k in range(300):
        stamp = 100.0 + k * 0.1 + rng.choice((0.0, 0.0, 0.0, -0.35, -30.0))  # late, too old
        messages.append(([(p, c, stamp, (rng.random(), rng.random(), 0.0),
                           from_yaw(rng.uniform(-3, 3))) for p, c in chain], False))
    messages.append(([('world', 'base', 0.0, (0.0, 0.0, 2.0), from_yaw(0.1))], True))
    one, many, by_set, by_many = both(messages)
    same(one, many)
    assert by_set == by_many and not any(by_set)
    assert len(many.link('l2')) > 50  # 10 s of history at 10 Hz, less the late ones
    assert many.lookup('world', 'tool', at=120.05).transform == \
        one.lookup('world', 'tool', at=120.05).transform


def test_each_refusal_is_the_one_set_raises_and_the_rest_is_kept():
    good = (1.0, 2.0, 3.0)
    unit = (0.0, 0.0, 0.0, 1.0)
    messages: list[tuple[list[Row], bool]] = [
        ([('base', 'a', 1.0, good, unit), ('base', 'b', 1.0, good, unit)], False),
        ([('base', 'a', 2.0, (math.nan, 0.0, 0.0), unit),
          ('base', 'b', 2.0, good, (0.0, 0.0, 0.0, 0.0)),
          ('other', 'a', 2.0, good, unit),
          ('a', 'c', 2.0, good, (0.0, 0.0, 0.0, 1.001)),
          ('base', 'b', 3.0, (0.0, 1.0, 0.0), unit)], False),
        ([('base', 'a', 4.0, good, unit)], True),
    ]
    one, many, by_set, by_many = both(messages)
    same(one, many)
    assert by_set == by_many
    assert len(by_many[1]) == 3 and len(by_many[2]) == 1
    assert 'base->a' in by_many[1][0] and 'not finite' in by_many[1][0]
    assert 'base->b' in by_many[1][1]
    assert by_many[1][2].startswith('FrameTreeError') and 'second parent' in by_many[1][2]
    assert by_many[2][0].startswith('FrameTreeError') and 'dynamic' in by_many[2][0]
    assert many.link('b').stamps == (1.0, 3.0)
    assert many.link('c').at(2.0, 0.0)[0].rotation == pytest.approx(unit, abs=1e-3)


def test_the_indexes_name_the_refused_transforms():
    buffer = TransformBuffer()
    buffer.set('base', 'a', 0.0, Transform(), static=True)
    refused = buffer.set_many([('base', 'x'), ('other', 'a'), ('base', 'y')],
                              [1, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0] * 3)
    assert [index for index, _err in refused] == [1]
    assert isinstance(refused[0][1], FrameTreeError)
    assert {'x', 'y'} <= buffer.frames
