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
The frame tree over time: where one frame is in another, at a time, as tf2 answers it.

The node feeds :meth:`TransformBuffer.set` with what ``/tf`` (dynamic links) and
``/tf_static`` (static links) say; a sensor asks :meth:`TransformBuffer.lookup`. A lookup
walks from both frames up to their nearest common ancestor and composes the links on the way,
each at the asked time (:mod:`.history`: interpolated between stamps, never extrapolated).
With no time asked it answers at the latest time every dynamic link of the chain has data for,
as tf2 does for ``Time(0)``.

What it refuses, each with an error that names what is wrong
(:mod:`muscle_mem_ros.errors`): a frame never seen (:class:`UnknownFrameError`), two frames
in separate trees (:class:`DisconnectedFramesError`, naming both roots), a link with no data
at the asked time (:class:`ExtrapolationError`, naming the link, its oldest and newest stamps
and the time), and, at ``set``, a frame with a second parent, a loop, or a link that is static
and dynamic at once (:class:`FrameTreeError`). The age of the chain's stalest link comes with
every answer (:class:`Lookup`), so a sensor can refuse data older than its ``max_age``.

The chain between two frames is kept per ``(target, source)`` until the tree's shape changes
(a new link), so a repeated lookup costs the links' interpolation and composition only.
"""

from __future__ import annotations

from collections.abc import Sequence
import difflib
import math
import threading
from typing import NamedTuple

from .history import CACHE_TIME, HOLD, LinkHistory
from .transform import Transform
from ..errors import (
    DisconnectedFramesError,
    ExtrapolationError,
    FrameTreeError,
    StaleTransformError,
    UnknownFrameError,
)

__all__ = ['Lookup', 'MAX_CHAINS', 'TransformBuffer']

MAX_CHAINS = 4096
"""Most chains kept between shape changes; past it the kept chains are dropped (a node asks
for a few pairs, over and over)."""
_IDENTITY = Transform()


class Lookup(NamedTuple):
    """
    Where the source frame is in the target frame, and on what data that rests.

    :ivar transform: ``T_target_source``: maps a point given in the source frame to the target
        frame; its translation is the source frame's origin seen from the target frame.
    :ivar stamp: The time it holds at: the asked time, or the latest common time of the
        chain's dynamic links; None when every link is static and no time was asked.
    :ivar oldest: The stamp of the chain's stalest data: of each dynamic link, the later of
        the stamps its transform was taken from, the earliest of those; None when every link
        is static (a static link never ages).
    :ivar oldest_link: The link ``parent->child`` that :attr:`oldest` is of ('' when None).
    :ivar links: The chain's links, ``parent->child``, from the source up to the common
        ancestor and down to the target.
    """

    transform: Transform
    stamp: float | None
    oldest: float | None
    oldest_link: str
    links: tuple[str, ...]

    def age(self, now: float) -> float:
        """Return how old the chain's stalest data is at ``now`` (0 for a static chain)."""
        return 0.0 if self.oldest is None else now - self.oldest

    def check_age(self, now: float, max_age: float) -> None:
        """
        Refuse a chain whose stalest data is older than ``max_age`` at ``now``.

        :param now: Seconds, on the clock of the stamps.
        :param max_age: Seconds.
        :raises StaleTransformError: Naming the stale link, its age and ``max_age``.
        """
        if self.oldest is not None and now - self.oldest > max_age:
            raise StaleTransformError(
                f'link {self.oldest_link} is stale: its data is {now - self.oldest:.3f} s old '
                f'(stamp {self.oldest:.3f}, now {now:.3f}), older than max_age {max_age:g} s')


class _Chain(NamedTuple):
    """The links from the source up to the common ancestor, and from the target up to it."""

    up: tuple[LinkHistory, ...]
    down: tuple[LinkHistory, ...]
    dynamic: tuple[LinkHistory, ...]
    names: tuple[str, ...]


class TransformBuffer:
    """
    The transforms of a frame tree over time, and lookups across it (module docstring).

    Thread-safe: a set and a lookup each hold one lock, for microseconds (the node sets from
    its ``/tf`` callbacks while a snapshot looks up from another thread).

    :param cache_time: Seconds of each dynamic link's history kept before its newest stamp.
    :param hold: Seconds beyond a link's oldest or newest stamp at which that end's transform
        is still taken (:data:`~muscle_mem_ros.transforms.history.HOLD`); further out a
        lookup is refused.
    """

    def __init__(self, *, cache_time: float = CACHE_TIME, hold: float = HOLD) -> None:
        if not cache_time > 0:
            raise ValueError(f'cache_time must be > 0, got {cache_time}')
        if not hold >= 0:
            raise ValueError(f'hold must be >= 0, got {hold}')
        self._cache_time = cache_time
        self._hold = hold
        self._links: dict[str, LinkHistory] = {}
        self._frames: set[str] = set()
        self._chains: dict[tuple[str, str], _Chain] = {}
        self._lock = threading.Lock()

    @property
    def frames(self) -> frozenset[str]:
        """Return every frame a transform has named, as parent or child."""
        with self._lock:
            return frozenset(self._frames)

    @property
    def kept_chains(self) -> int:
        """Return how many chains are kept, until the tree's shape next changes."""
        return len(self._chains)

    def parent(self, frame: str) -> str | None:
        """Return the parent of ``frame``, None for a root (or a frame never seen)."""
        link = self._links.get(frame.lstrip('/'))
        return None if link is None else link.parent

    def link(self, child: str) -> LinkHistory | None:
        """
        Return the history of the link from ``child``'s parent to ``child``, if any.

        The history itself, not a copy: read it where no ``set`` runs at the same time
        (tests, a diagnostic on the thread that sets).
        """
        return self._links.get(child.lstrip('/'))

    def clear(self) -> None:
        """Forget every frame and transform (a jump back in time: a bag looped, a sim reset)."""
        with self._lock:
            self._links.clear()
            self._frames.clear()
            self._chains.clear()

    def set(self, parent: str, child: str, stamp: float,  # noqa: A003 (the buffer's verb)
            transform: Transform, static: bool = False) -> bool:
        """
        Keep the transform from ``parent`` to ``child`` at ``stamp``.

        :param parent: The parent frame (``header.frame_id``); a leading ``/`` is dropped, as
            tf2 drops it.
        :param child: The child frame (``child_frame_id``).
        :param stamp: Seconds (``header.stamp``).
        :param transform: The child frame's pose in the parent frame. Its rotation is
            normalized; one far from unit length is refused.
        :param static: True for ``/tf_static``: the link's one transform, valid at all times.
        :return: False when the stamp is older than the link's history keeps (dropped).
        :raises FrameTreeError: When ``child`` has another parent, the link would close a
            loop, or the link was set with the other ``static``.
        :raises ValueError: For an empty frame name, a frame its own parent, a stamp or a
            translation that is not finite, or a quaternion that is not a rotation.
        """
        if not math.isfinite(stamp):
            raise ValueError(f'link {parent}->{child}: stamp {stamp} is not finite')
        qx, qy, qz, qw = transform.rotation
        x, y, z = transform.translation
        if not abs(qx * qx + qy * qy + qz * qz + qw * qw - 1.0) <= 1e-12 or not math.isfinite(
                x + y + z):
            try:
                transform = Transform.checked(transform.translation, transform.rotation)
            except ValueError as err:
                raise ValueError(f'link {parent}->{child} at {stamp}: {err}') from err
        with self._lock:
            link = self._links.get(child)
            if link is None or link.parent != parent or link.static != static:
                link = self._new_link(parent.lstrip('/'), child.lstrip('/'), static)
            return link.add(stamp, transform)

    def set_many(self, links: Sequence[tuple[str, str]], numbers: Sequence[float],
                 static: bool = False) -> list[tuple[int, ValueError]]:
        """
        Keep the transforms of one TF message, each as :meth:`set` keeps it.

        For a 1 kHz ``/tf``: a transform of a link already known, with a unit quaternion and
        finite numbers, goes into its history under one lock for the message, with no
        :class:`Transform` made; any other goes through :meth:`set`. The buffer ends as if
        :meth:`set` had been called for each.

        :param links: ``(parent, child)`` of each transform.
        :param numbers: Nine per transform: the stamp's seconds and nanoseconds (as a header
            stamp gives them), the translation's x, y, z, the rotation's x, y, z, w.
        :param static: True for ``/tf_static``.
        :return: The index and the error of each transform refused (what :meth:`set` raises
            for it); a transform older than the history is dropped silently, as by :meth:`set`.
        """
        isfinite = math.isfinite
        slow: list[tuple[int, str, str, float, tuple[float, ...]]] = []
        row = iter(numbers)
        with self._lock:
            known = self._links
            for index, ((parent, child), sec, nsec, x, y, z, qx, qy, qz, qw) in enumerate(
                    zip(links, *(row,) * 9)):
                stamp = sec + nsec * 1e-9
                link = known.get(child)
                if (link is None or link.parent != parent or link.static != static
                        or not abs(qx * qx + qy * qy + qz * qz + qw * qw - 1.0) <= 1e-12
                        or not isfinite(x + y + z + stamp)):
                    slow.append((index, parent, child, stamp, (x, y, z, qx, qy, qz, qw)))
                    continue
                link.add_row(stamp, x, y, z, qx, qy, qz, qw)
        refused: list[tuple[int, ValueError]] = []
        for index, parent, child, stamp, (x, y, z, qx, qy, qz, qw) in slow:
            try:
                self.set(parent, child, stamp, Transform((x, y, z), (qx, qy, qz, qw)), static)
            except ValueError as err:  # FrameTreeError is one too
                refused.append((index, err))
        return refused

    def lookup(self, target: str, source: str, at: float | None = None) -> Lookup:
        """
        Return where ``source`` is in ``target`` at ``at``: ``T_target_source``.

        As tf2's ``lookup_transform(target_frame, source_frame, time)``: the result maps a
        point in ``source`` to ``target``.

        :param target: The frame the answer is expressed in.
        :param source: The frame whose pose is asked.
        :param at: Seconds; None for the latest time every dynamic link of the chain has.
        :return: The transform, the time it holds at and the age of its data.
        :raises UnknownFrameError: For a frame never seen.
        :raises DisconnectedFramesError: For frames in separate trees.
        :raises ExtrapolationError: For a link with no data at the time.
        :raises ValueError: For a time that is not finite.
        """
        if at is not None and not math.isfinite(at):
            raise ValueError(f'lookup of {source!r} in {target!r}: time {at} is not finite')
        with self._lock:
            return self._lookup(target, source, at)

    def _lookup(self, target: str, source: str, at: float | None) -> Lookup:
        """Return :meth:`lookup`'s answer, the lock held."""
        chain = self._chains.get((target, source))
        if chain is None:
            chain = self._chain(target.lstrip('/'), source.lstrip('/'))
            if len(self._chains) >= MAX_CHAINS:
                self._chains.clear()
            self._chains[(target, source)] = chain
        if at is not None:
            stamp = at
        elif chain.dynamic:
            stamp = min(link.newest for link in chain.dynamic)
        else:
            stamp = 0.0
        oldest = math.inf
        oldest_link = ''
        hold = self._hold
        up = _IDENTITY
        for link in chain.up:
            got = link.at(stamp, hold)
            if got is None:
                raise self._extrapolation(link, stamp, at, target, source)
            up = got[0].compose(up)
            if got[1] < oldest and not link.static:
                oldest, oldest_link = got[1], link.name
        down = _IDENTITY
        for link in chain.down:
            got = link.at(stamp, hold)
            if got is None:
                raise self._extrapolation(link, stamp, at, target, source)
            down = got[0].compose(down)
            if got[1] < oldest and not link.static:
                oldest, oldest_link = got[1], link.name
        transform = down.inverse().compose(up) if chain.down else up
        if not oldest_link:
            return Lookup(transform, at, None, '', chain.names)
        return Lookup(transform, stamp, oldest, oldest_link, chain.names)

    def _new_link(self, parent: str, child: str, static: bool) -> LinkHistory:
        """Return the link ``parent -> child``, made if new, once the tree accepts it."""
        if not parent or not child:
            raise ValueError(f'link {parent!r}->{child!r}: a frame needs a name')
        if parent == child:
            raise ValueError(f'link {parent}->{child}: a frame cannot be its own parent')
        link = self._links.get(child)
        if link is not None:
            if link.parent != parent:
                raise FrameTreeError(
                    f'frame {child!r} has parent {link.parent!r}; a transform from '
                    f'{parent!r} would give it a second parent (a frame has one parent in TF)')
            if link.static != static:
                kinds = ('static', 'dynamic') if link.static else ('dynamic', 'static')
                raise FrameTreeError(f'link {link.name} is {kinds[0]}; a {kinds[1]} transform '
                                     'for it is refused (it must come from one of /tf and '
                                     '/tf_static)')
            return link
        path = self._path_up(parent)
        if child in path:
            loop = '->'.join(reversed(path[:path.index(child) + 1]))
            raise FrameTreeError(f'link {parent}->{child} would close a loop: {parent!r} is '
                                 f'already under {child!r} ({loop})')
        link = LinkHistory(parent=parent, child=child, static=static, keep=self._cache_time)
        self._links[child] = link
        self._frames.update((parent, child))
        self._chains.clear()
        return link

    def _path_up(self, frame: str) -> list[str]:
        """Return ``frame`` and its ancestors, up to its tree's root."""
        path = [frame]
        link = self._links.get(frame)
        while link is not None:
            path.append(link.parent)
            link = self._links.get(link.parent)
        return path

    def _chain(self, target: str, source: str) -> _Chain:
        """Return the links joining ``source`` and ``target`` through their common ancestor."""
        for frame in (target, source):
            if frame not in self._frames:
                raise UnknownFrameError(self._unknown(frame))
        from_source = self._path_up(source)
        from_target = self._path_up(target)
        if from_source[-1] != from_target[-1]:
            raise DisconnectedFramesError(
                f'frames {target!r} and {source!r} are in separate trees: '
                f'{_under(from_target)}, {_under(from_source)}; no chain of transforms joins '
                'them')
        on_target_side = set(from_target)
        common = next(frame for frame in from_source if frame in on_target_side)
        up = tuple(self._links[f] for f in from_source[:from_source.index(common)])
        down = tuple(self._links[f] for f in from_target[:from_target.index(common)])
        return _Chain(up, down, tuple(link for link in up + down if not link.static),
                      tuple(link.name for link in up + tuple(reversed(down))))

    def _unknown(self, frame: str) -> str:
        """Return the message for a frame never seen: the close names, the known ones."""
        known = sorted(self._frames)
        close = difflib.get_close_matches(frame, known, n=3)
        hint = f' (did you mean {", ".join(map(repr, close))}?)' if close else ''
        more = f' and {len(known) - 20} more' if len(known) > 20 else ''
        listed = ', '.join(known[:20]) + more
        return (f'frame {frame!r} is unknown: no transform has named it{hint}; known frames: '
                f'{listed or "none yet"}')

    def _extrapolation(self, link: LinkHistory, stamp: float, at: float | None, target: str,
                       source: str) -> ExtrapolationError:
        """Return the error for a link with no data at ``stamp``, naming all of it."""
        when = (f'at {stamp:.3f}' if at is not None else
                f'at {stamp:.3f} (the latest time every link of the chain has data for)')
        if stamp > link.newest:
            where = f'{stamp - link.newest:.3f} s after its newest'
            what = 'extrapolation into the future'
        else:
            where = f'{link.oldest - stamp:.3f} s before its oldest'
            what = 'extrapolation into the past'
        return ExtrapolationError(
            f'lookup of {source!r} in {target!r} {when}: link {link.name} has no data then; it '
            f'has {len(link)} stamps from {link.oldest:.3f} to {link.newest:.3f}, and '
            f'{stamp:.3f} is {where} ({what} is refused beyond {self._hold:g} s)')


def _under(path: list[str]) -> str:
    """Say which root a frame's path up (:meth:`TransformBuffer._path_up`) ends at."""
    if len(path) == 1:
        return f'{path[0]!r} is a root (it has no parent)'
    return f'{path[0]!r} is under root {path[-1]!r}'
