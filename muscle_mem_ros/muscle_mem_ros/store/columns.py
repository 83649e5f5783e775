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
A tree's first steps as columns: what matching reads of them, kept for a restart.

Matching a step reads, of each candidate, its id, its tool and its pre snapshot's
vectors (:mod:`..checks.candidates`). For a tree with 100 000 first steps, reading
and decoding those rows takes seconds; the same figures as a few arrays
(:class:`Columns`) take milliseconds. The SQL stores keep them beside the tree
(:func:`encode`, one value) and, after a restart, hand out the tree's first
steps as a list whose nodes are read when asked for (a walk asks for the one it
replays) with these columns attached for the matcher
(:attr:`.base.NodeList.columns`). The columns are a copy of the rows they were
made from; a store checks they still describe the tree's first steps (their count
and ids) before it uses them, and reads the rows otherwise.

The vectors are most of the value (100 000 x 35 numbers: 28 MB), and a restart's
first lookup needs few of them: a candidate passes a box or norm tolerance only if
each element is within its tolerance. So the value keeps them sorted by the element
that tells the rows apart best in tolerance units (:func:`encode` is told the
tolerances), with every :data:`FENCE`-th key beside the small arrays; a kept list
is opened with its small arrays only (:func:`open_columns`), and the first lookup
reads the rows whose key lies within the tolerance of the current value
(:meth:`Columns.band`, a few contiguous byte ranges), the second all of them
(:meth:`Columns.full`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
import json
import threading
import zlib

import numpy as np

from .values import Blobs, container_head, write_container
from ..errors import StoreCorruptError, StoreError
from ..records import Node, ToolKind

__all__ = ['Columns', 'columns_of', 'decode', 'encode', 'Fetch', 'FENCE', 'joined', 'KEEP_FROM',
           'open_columns', 'sorted_for', 'Vectors']

KEEP_FROM = 256
"""Trees with at least this many first steps keep them as columns."""
FENCE = 16
"""Every FENCE-th sorted key is kept beside the small arrays."""
_BAND_MAX = 0.25
"""A band of more than this share of the rows is not worth reading apart."""

_MAGIC = b'MMC2'
_KINDS = tuple(ToolKind)
_KIND_CODE = {kind: i for i, kind in enumerate(_KINDS)}
_HEAD_GUESS = 4096

Fetch = Callable[[Sequence[tuple[int, int]]], Sequence[bytes | memoryview]]
"""``fetch(ranges)`` returns those (offset, length) byte ranges of a kept value."""


@dataclass(frozen=True, eq=False)
class Vectors:
    """
    One sensor's vectors in the pre snapshots of every row.

    :ivar k: The most common length.
    :ivar has: Rows whose vector has length ``k``.
    :ivar rec: (n, k) those vectors (zeros elsewhere); None while not read
        (:meth:`Columns.full`).
    :ivar odd: Rows whose vector has another length (a matcher scores them one by one).
    """

    k: int
    has: np.ndarray
    rec: np.ndarray | None
    odd: np.ndarray


@dataclass(eq=False)
class _Kept:
    """Where a kept value's vectors are, for columns opened without them."""

    fetch: Fetch
    head: bytes
    offsets: dict[str, int]
    key: tuple[str, int] | None
    sorted_for: str
    front: int
    perm_at: int | None
    fence: np.ndarray
    full: Columns | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, ranges: Sequence[tuple[int, int]]) -> Sequence[bytes | memoryview]:
        """Read ``ranges``, checking the value is still the one opened (its head)."""
        got = self.fetch([(0, len(self.head)), *ranges])
        if len(got) != len(ranges) + 1 or bytes(got[0]) != self.head or any(
                len(part) != n for part, (_, n) in zip(got[1:], ranges)):
            raise StoreError('kept first steps changed since they were opened')
        return got[1:]


@dataclass(frozen=True, eq=False)
class Columns:
    """
    What matching reads of a list of nodes, as arrays (row i: the list's node i).

    :ivar ids: Node ids.
    :ivar tools: Tool names; ``tool_of`` indexes them.
    :ivar tool_of: Each row's tool.
    :ivar kinds: Each row's :class:`~..records.ToolKind` (its place in the enumeration).
    :ivar no_pre: Rows without a pre snapshot.
    :ivar sensors: Sensor name -> its vectors.
    """

    ids: np.ndarray
    tools: tuple[str, ...]
    tool_of: np.ndarray
    kinds: np.ndarray
    no_pre: np.ndarray
    sensors: dict[str, Vectors]
    kept: _Kept | None = None

    @property
    def n(self) -> int:
        """Return the number of rows."""
        return int(self.ids.size)

    @property
    def key(self) -> tuple[str, int] | None:
        """Return the (sensor, element) a kept value's vectors are sorted by, if any."""
        return None if self.kept is None else self.kept.key

    @property
    def sorted_for(self) -> str | None:
        """Return :func:`sorted_for` of the tolerances a kept value was written for, if kept."""
        return None if self.kept is None else self.kept.sorted_for

    def tool_kinds(self) -> set[tuple[str, ToolKind]]:
        """Return the (tool, kind) pairs the rows call."""
        pairs = np.unique(np.stack([self.tool_of.astype(np.int64),
                                    self.kinds.astype(np.int64)]), axis=1)
        return {(self.tools[int(t)], _KINDS[int(k)]) for t, k in pairs.T}

    def full(self) -> Columns:
        """
        Return these columns with every vector read (itself when they are).

        :raises StoreError: the kept value cannot be read, or changed since it was opened.
        """
        kept = self.kept
        if kept is None:
            return self
        with kept.lock:
            if kept.full is None:
                rows, recs = self._read([(0, self.n)])
                sensors = {}
                for name, rec in recs.items():
                    if rows is not None:
                        rec, sorted_rec = np.empty_like(rec), rec
                        rec[rows] = sorted_rec
                    sensors[name] = replace(self.sensors[name], rec=rec)
                kept.full = replace(self, sensors=sensors, kept=None)
            return kept.full

    def _read(self, spans: Sequence[tuple[int, int]],
              ) -> tuple[np.ndarray | None, dict[str, np.ndarray]]:
        """Read the rows at ``spans`` of stored positions: their rows (sorted), the vectors."""
        kept = self.kept
        assert kept is not None
        names = list(kept.offsets)
        widths = [self.sensors[name].k * 8 for name in names]
        starts = [kept.offsets[name] for name in names]
        if kept.perm_at is not None:
            widths.append(4)
            starts.append(kept.perm_at)
        parts = kept.read([(at + a * width, (b - a) * width)
                           for at, width in zip(starts, widths) for a, b in spans])
        m = len(spans)
        recs = {name: np.concatenate([np.frombuffer(part, '<f8').reshape(-1, width // 8)
                                      for part in parts[i * m:(i + 1) * m]])
                for i, (name, width) in enumerate(zip(names, widths))}
        rows = None if kept.perm_at is None else np.concatenate(
            [np.frombuffer(part, '<i4') for part in parts[len(names) * m:]]).astype(np.intp)
        return rows, recs

    def band(self, lo: float, hi: float) -> tuple[np.ndarray, Columns] | None:
        """
        Return the rows that may have their key within [lo, hi], and their columns.

        The rows without the key (no such vector, another length, not a number) are
        among them; so is every row of a fence block the range touches. None when the
        vectors are not kept sorted, or the band holds too many rows to be worth it.

        :raises StoreError: the kept value cannot be read, or changed since it was opened.
        """
        kept = self.kept
        if kept is None or kept.key is None or kept.perm_at is None or not lo <= hi:
            return None
        start = max(int(np.searchsorted(kept.fence, lo, 'left')) - 1, 0) * FENCE
        stop = min(int(np.searchsorted(kept.fence, hi, 'right')) * FENCE, self.n - kept.front)
        spans = [(0, kept.front), (kept.front + start, kept.front + max(stop, start))]
        count = sum(b - a for a, b in spans)
        if count > _BAND_MAX * self.n:
            return None
        rows, recs = self._read(spans)
        assert rows is not None
        sensors = {name: Vectors(v.k, v.has[rows], recs[name], v.odd[rows])
                   for name, v in self.sensors.items()}
        return rows, Columns(self.ids[rows], self.tools, self.tool_of[rows], self.kinds[rows],
                             self.no_pre[rows], sensors)


def columns_of(nodes: Sequence[Node]) -> Columns:
    """Return the columns of ``nodes`` (every one read)."""
    n = len(nodes)
    tools: dict[str, int] = {}
    tool_of = np.fromiter((tools.setdefault(x.step.tool, len(tools)) for x in nodes),
                          np.int32, n)
    kinds = np.fromiter((_KIND_CODE[x.step.kind] for x in nodes), np.int8, n)
    pres = [x.step.pre for x in nodes]
    no_pre = np.fromiter((p is None for p in pres), bool, n)
    names = sorted({name for p in pres if p is not None for name in p.features})
    sensors = {}
    for name in names:
        values = [None if p is None else p.features.get(name) for p in pres]
        lengths = np.fromiter((-1 if v is None else len(v) for v in values), np.int64, n)
        present = lengths >= 0
        k = int(np.bincount(lengths[present]).argmax())
        has = present & (lengths == k)
        rec = np.zeros((n, k))
        rows = np.flatnonzero(has)
        if rows.size:
            rec[rows] = np.asarray([values[i] for i in rows], dtype=np.float64).reshape(-1, k)
        sensors[name] = Vectors(k, has, rec, present & ~has)
    ids = np.fromiter((x.id for x in nodes), np.int64, n)
    return Columns(ids, tuple(tools), tool_of, kinds, no_pre, sensors)


def joined(first: Columns, then: Columns) -> Columns | None:
    """
    Return ``first``'s rows then ``then``'s, None when a sensor's usual length differs.

    :raises StoreError: ``first``'s vectors cannot be read (:meth:`Columns.full`).
    """
    first, then = first.full(), then.full()
    tools = dict(zip(first.tools, range(len(first.tools))))
    remap = np.array([tools.setdefault(t, len(tools)) for t in then.tools], np.int32)
    sensors = {}
    for name in sorted(set(first.sensors) | set(then.sensors)):
        a, b = first.sensors.get(name), then.sensors.get(name)
        if a is not None and b is not None and a.k != b.k:
            return None
        k = a.k if a is not None else b.k  # type: ignore[union-attr]
        parts = [v if v is not None else Vectors(k, np.zeros(c.n, bool), np.zeros((c.n, k)),
                                                 np.zeros(c.n, bool))
                 for v, c in ((a, first), (b, then))]
        sensors[name] = Vectors(k, np.concatenate([p.has for p in parts]),
                                np.concatenate([p.rec for p in parts]),
                                np.concatenate([p.odd for p in parts]))
    return Columns(np.concatenate([first.ids, then.ids]), tuple(tools),
                   np.concatenate([first.tool_of, remap[then.tool_of]]).astype(np.int32),
                   np.concatenate([first.kinds, then.kinds]),
                   np.concatenate([first.no_pre, then.no_pre]), sensors)


def _sort_key(columns: Columns, tolerance: Mapping[str, np.ndarray],
              ) -> tuple[str, int, np.ndarray] | None:
    """
    Return the (sensor, element, its values) that leaves a lookup the fewest rows to read.

    Estimated on up to 256 of the rows: the share of rows within the element's tolerance
    of each. None when no element leaves less than :data:`_BAND_MAX` of them.
    """
    best: tuple[float, str, int, np.ndarray] | None = None
    rng = np.random.default_rng(0)
    for name, v in sorted(columns.sensors.items()):
        tol = tolerance.get(name)
        if tol is None or tol.size not in (1, v.k) or v.rec is None:
            continue
        rows = np.flatnonzero(v.has)
        if rows.size < 2:
            continue
        probe = rng.choice(rows, min(256, rows.size), replace=False)
        for e in range(v.k):
            t = float(tol[e] if tol.size > 1 else tol[0])
            values = np.sort(v.rec[rows, e])
            if not np.isfinite(t) or not np.isfinite(values).all():
                continue
            x = v.rec[probe, e]
            share = (float(np.mean(np.searchsorted(values, x + t, 'right')
                                   - np.searchsorted(values, x - t, 'left')))
                     + columns.n - rows.size) / columns.n
            if share < _BAND_MAX and (best is None or share < best[0]):
                best = (share, name, e, v.rec[:, e])
    return None if best is None else best[1:]


def sorted_for(tolerance: Mapping[str, np.ndarray] | None) -> str:
    """Return the tolerances :func:`encode` sorts by as text ('' for none): equal if equal."""
    return json.dumps({k: np.asarray(v, np.float64).tolist()
                       for k, v in sorted((tolerance or {}).items())}) if tolerance else ''


def encode(columns: Columns, tolerance: Mapping[str, np.ndarray] | None = None) -> bytes:
    """
    Return the columns as one value (:func:`open_columns` reads it).

    :param tolerance: Sensor name -> its tolerance (one for every element, or one per
        element) under a box or norm check: the vectors are kept sorted by the element
        that tells the rows apart best. Without it they are kept in row order.
    """
    columns = columns.full()
    n = columns.n
    blobs = Blobs()
    order = None if not tolerance else _sort_key(columns, tolerance)
    header: dict[str, object] = {
        'rows': n, 'tools': list(columns.tools), 'kinds_of': [k.value for k in _KINDS],
        'sorted_for': sorted_for(tolerance),
        'ids_crc': zlib.crc32(columns.ids.astype('<i8').tobytes()),
        'first_id': int(columns.ids[0]) if n else 0,
        'id_steps': _smallest(np.diff(columns.ids), blobs),
        'tool_of': _smallest(columns.tool_of, blobs),
        'kinds': blobs.add(columns.kinds.astype('i1').tobytes()),
        'no_pre': blobs.add(np.packbits(columns.no_pre).tobytes())}
    masks = [[name, v.k, blobs.add(np.packbits(v.has).tobytes()),
              blobs.add(np.packbits(v.odd).tobytes())] for name, v in columns.sensors.items()]
    perm = None
    if order is not None:
        name, element, values = order
        keyed = columns.sensors[name].has & np.isfinite(values)
        front = np.flatnonzero(~keyed)
        sorted_rows = np.flatnonzero(keyed)
        sorted_rows = sorted_rows[np.argsort(values[sorted_rows], kind='stable')]
        perm = np.concatenate([front, sorted_rows])
        header.update(key=[name, element], front=int(front.size),
                      fence=blobs.add(values[sorted_rows[::FENCE]].astype('<f8').tobytes()))
    for mask in masks:  # the vectors last: a reader reads the small arrays before them
        rec = columns.sensors[str(mask[0])].rec
        assert rec is not None  # (full)
        mask.append(blobs.add((rec if perm is None else rec[perm]).astype('<f8').tobytes()))
    header['sensors'] = masks
    if perm is not None:  # (read with the vectors: a band needs a few of them)
        header['perm'] = blobs.add(perm.astype('<i4').tobytes())
    return write_container(_MAGIC, header, blobs)


_INTS = ('u1', '<u2', '<u4', '<i8')


def _smallest(values: np.ndarray, blobs: Blobs) -> list[object]:
    """Add integers in the smallest type of :data:`_INTS` that holds them; return [type, blob]."""
    low, top = (int(values.min()), int(values.max())) if values.size else (0, 0)
    dtype = next(t for t in _INTS if np.iinfo(t).min <= low and top <= np.iinfo(t).max)
    return [dtype, blobs.add(values.astype(dtype).tobytes())]


def open_columns(fetch: Fetch, later: Fetch | None = None) -> Columns:
    """
    Return kept columns with their small arrays read, their vectors read when asked.

    :param fetch: Reads byte ranges of the value now.
    :param later: Reads them later (:meth:`Columns.full`, :meth:`Columns.band`); ``fetch``
        by default.
    :raises StoreCorruptError: not such a value, or its arrays do not fit its header.
    """
    (first,) = fetch([(0, _HEAD_GUESS)])
    head = container_head(_MAGIC, first)
    if isinstance(head, int):
        (first,) = fetch([(0, head)])
        head = container_head(_MAGIC, first)
    assert not isinstance(head, int)
    header, start = head
    try:
        lengths = header['n']
        offsets = np.concatenate([[start], start + np.cumsum(lengths)]).tolist()
        lazy = {int(s[4]) for s in header['sensors']} | (
            {int(header['perm'])} if 'perm' in header else set())
        small = len(lengths) - len(lazy)
        if lazy != set(range(small, len(lengths))):
            raise ValueError('the vectors are not last')
        (read,) = fetch([(start, offsets[small] - start)])
        if len(read) != offsets[small] - start:
            raise ValueError('truncated')
        body = memoryview(bytes(read))

        def blob(index: int) -> memoryview:
            if not 0 <= index < small:
                raise ValueError(f'blob {index}')
            return body[offsets[index] - start:offsets[index + 1] - start]

        n = int(header['rows'])

        def mask(index: int) -> np.ndarray:
            return np.unpackbits(np.frombuffer(blob(index), np.uint8), count=n).astype(bool)

        kinds = np.array([_KIND_CODE[ToolKind(v)] for v in header['kinds_of']], np.int8)
        sensors = {str(name): Vectors(int(k), mask(has), None, mask(odd))
                   for name, k, has, odd, _ in header['sensors']}

        def small_ints(spec: list[object]) -> np.ndarray:
            if spec[0] not in _INTS:
                raise ValueError(f'integer type {spec[0]!r}')
            return np.frombuffer(blob(int(str(spec[1]))), str(spec[0])).astype(np.int64)

        ids = np.empty(n, np.int64)
        if n:
            ids[0] = int(header['first_id'])
            np.cumsum(small_ints(header['id_steps']), out=ids[1:])
            ids[1:] += ids[0]
        if zlib.crc32(ids.tobytes()) != header['ids_crc']:
            raise ValueError('ids do not match their checksum')
        key = header.get('key')
        kept = _Kept(fetch=later or fetch, head=bytes(first[:start]),
                     offsets={str(s[0]): int(offsets[int(s[4])]) for s in header['sensors']},
                     key=None if key is None else (str(key[0]), int(key[1])),
                     sorted_for=str(header['sorted_for']), front=int(header.get('front', 0)),
                     perm_at=int(offsets[int(header['perm'])]) if 'perm' in header else None,
                     fence=np.array([]) if key is None
                     else np.frombuffer(blob(header['fence']), '<f8'))
        columns = Columns(ids, tuple(str(t) for t in header['tools']),
                          small_ints(header['tool_of']),
                          kinds[np.frombuffer(blob(header['kinds']), 'i1')],
                          mask(header['no_pre']), sensors, kept)
        if columns.tool_of.size != n or columns.kinds.size != n or (
                'perm' in header and lengths[int(header['perm'])] != 4 * n) or any(
                lengths[int(s[4])] != n * int(s[1]) * 8 for s in header['sensors']):
            raise ValueError('row counts differ')
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise StoreCorruptError(f'kept first steps are malformed: {err!r}') from err
    return columns


def decode(data: bytes | memoryview) -> Columns:
    """
    Return the columns :func:`encode` wrote, every vector read.

    :raises StoreCorruptError: not such a value, or its arrays do not fit its header.
    """
    view = memoryview(bytes(data))
    return open_columns(lambda ranges: [view[a:a + n] for a, n in ranges]).full()
