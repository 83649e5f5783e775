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
One link of the frame tree over time: its transforms, sorted by stamp, and the value at a time.

A dynamic link (from ``/tf``) keeps the transforms of the last :data:`CACHE_TIME` seconds
before its newest stamp, as tf2's cache does (its newest transform is always kept, however
old). The value at a time between two stamps is interpolated (the translation linearly, the
rotation by slerp); at a stamp it is that stamp's transform. Outside the stamps it has, the
link has no value: a time before its oldest stamp or after its newest is refused, as tf2
refuses to extrapolate, except within :data:`HOLD` of either end, where the end's transform
is taken as it is (held, never extrapolated). A static link (from ``/tf_static``) has one
transform, valid at every time.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

from .transform import interpolate, Transform

__all__ = ['CACHE_TIME', 'HOLD', 'LinkHistory']

CACHE_TIME = 10.0
"""Seconds of a dynamic link's history kept before its newest stamp (tf2's default cache)."""
HOLD = 0.01
"""Seconds beyond either end of a link's stamps at which the end's transform still stands:
one period of a 100 Hz ``/tf``, so a snapshot taken between two messages of the
slowest-moving link is answered, and nothing staler. tf2 holds nothing (it refuses any time
past its newest stamp); a time further out is refused here too."""
_ROW = 7
"""Floats per stamp in a history: the translation's x, y, z, the rotation's x, y, z, w."""


class LinkHistory:
    """
    The transforms of one link ``parent -> child`` (module docstring).

    The history is kept in two arrays of floats (the stamps; seven floats per stamp), not as
    a list of transforms: 64 bytes a stamp instead of about 400, and nothing for Python's
    garbage collector to scan (10 s of a 1 kHz ``/tf`` is 10 000 stamps per link; kept as
    objects, the collector's passes over them doubled what a message cost).

    :param parent: The parent frame.
    :param child: The child frame.
    :param static: True for a link of ``/tf_static``: one transform, valid at all times.
    :param keep: Seconds of history kept before the newest stamp (dynamic links).
    """

    __slots__ = ('child', 'name', 'parent', 'static', '_fixed', '_keep', '_stamps', '_start',
                 '_values')

    def __init__(self, *, parent: str, child: str, static: bool, keep: float = CACHE_TIME
                 ) -> None:
        self.parent = parent
        self.child = child
        self.static = static
        self.name = f'{parent}->{child}'
        """The link as messages name it, ``parent->child``."""
        self._keep = keep
        self._stamps = array('d')
        self._values = array('d')
        self._fixed = Transform()
        """A static link's transform."""
        self._start = 0
        """Where the history starts in the arrays: the stamps before it have expired. They are
        deleted in one go once they are half the arrays, not one by one: deleting the head of
        an array moves the rest, and 10 000 stamps (a 1 kHz link) made each ``add`` take 2
        microseconds instead of 0.7."""

    def __len__(self) -> int:
        """Return how many stamps the link holds."""
        return len(self._stamps) - self._start

    @property
    def oldest(self) -> float:
        """Return the link's oldest stamp (the stamp it was last set at, for a static link)."""
        return self._stamps[self._start]

    @property
    def newest(self) -> float:
        """Return the link's newest stamp."""
        return self._stamps[-1]

    @property
    def stamps(self) -> tuple[float, ...]:
        """Return the stamps held, oldest first."""
        return tuple(self._stamps[self._start:])

    def add(self, stamp: float, value: Transform) -> bool:
        """
        Keep ``value`` as the link's transform at ``stamp``.

        A static link's transform is replaced. A dynamic link's is inserted in stamp order
        (a stamp it holds already is replaced), and stamps older than the history's length
        before the newest are dropped.

        :param stamp: Seconds.
        :param value: The transform from the parent frame to the child frame.
        :return: False when the stamp is older than the history keeps (the transform is
            dropped, as tf2 drops it), True when it was kept.
        """
        stamps = self._stamps
        values = self._values
        if self.static:
            self._stamps = array('d', (stamp,))
            self._fixed = value
            return True
        if not stamps or stamp > stamps[-1]:
            stamps.append(stamp)
            values.extend(value.translation + value.rotation)
            self._expire(stamp)
            return True
        if stamp < stamps[-1] - self._keep:
            return False
        at = bisect_left(stamps, stamp, self._start)
        row = array('d', value.translation + value.rotation)
        if stamps[at] == stamp:
            values[at * _ROW:(at + 1) * _ROW] = row
        else:
            stamps.insert(at, stamp)
            values[at * _ROW:at * _ROW] = row
        return True

    def add_row(self, stamp: float, x: float, y: float, z: float, qx: float, qy: float,
                qz: float, qw: float) -> bool:
        """
        Keep the transform of seven floats at ``stamp``, as :meth:`add` keeps one.

        The common case of a stream, a dynamic link's newest stamp, goes straight into the
        arrays, with no :class:`Transform` made (:meth:`TransformBuffer.set_many`); any other
        goes through :meth:`add`. The rotation must be a unit quaternion already.

        :return: As :meth:`add`.
        """
        stamps = self._stamps
        if self.static or (stamps and stamp <= stamps[-1]):
            return self.add(stamp, Transform((x, y, z), (qx, qy, qz, qw)))
        stamps.append(stamp)
        self._values.extend((x, y, z, qx, qy, qz, qw))
        self._expire(stamp)
        return True

    def _expire(self, newest: float) -> None:
        """Drop the stamps older than the history keeps before ``newest`` (just appended)."""
        stamps = self._stamps
        cutoff = newest - self._keep
        start = self._start
        if stamps[start] < cutoff:
            start += 1
            if stamps[start] < cutoff:
                start = bisect_left(stamps, cutoff, start)
            if start * 2 >= len(stamps):
                del stamps[:start]
                del self._values[:start * _ROW]
                start = 0
            self._start = start

    def at(self, stamp: float, hold: float) -> tuple[Transform, float] | None:
        """
        Return the link's transform at ``stamp`` and the newest stamp it rests on.

        :param stamp: Seconds; any value for a static link.
        :param hold: Seconds beyond either end at which the end's transform is taken.
        :return: The transform and the later of the stamps it was taken from (for the age of
            a lookup), or None when the link has no transform at ``stamp``.
        """
        stamps = self._stamps
        if self.static:
            return self._fixed, stamps[0]
        start = self._start
        at = bisect_left(stamps, stamp, start)
        if at == len(stamps):
            if stamp - stamps[-1] <= hold:
                return self._row(at - 1), stamps[-1]
            return None
        after = stamps[at]
        if after == stamp:
            return self._row(at), after
        if at == start:
            if after - stamp <= hold:
                return self._row(at), after
            return None
        before = stamps[at - 1]
        return interpolate(self._row(at - 1), self._row(at),
                           (stamp - before) / (after - before)), after

    def _row(self, index: int) -> Transform:
        """Return the transform kept at ``index`` of the arrays."""
        v = self._values
        i = index * _ROW
        return Transform((v[i], v[i + 1], v[i + 2]), (v[i + 3], v[i + 4], v[i + 5], v[i + 6]))
