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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .values import Blobs, read_container, write_container
from ..errors import StoreCorruptError
from ..records import Node, ToolKind

__all__ = ['Columns', 'columns_of', 'decode', 'encode', 'joined', 'KEEP_FROM', 'Vectors']

KEEP_FROM = 256
"""Trees with at least this many first steps keep them as columns."""

_MAGIC = b'MMC1'
_KINDS = tuple(ToolKind)
_KIND_CODE = {kind: i for i, kind in enumerate(_KINDS)}


@dataclass(frozen=True, eq=False)
class Vectors:
    """
    One sensor's vectors in the pre snapshots of every row.

    :ivar k: The most common length.
    :ivar has: Rows whose vector has length ``k``.
    :ivar rec: (n, k) those vectors (zeros elsewhere).
    :ivar odd: Rows whose vector has another length (a matcher scores them one by one).
    """

    k: int
    has: np.ndarray
    rec: np.ndarray
    odd: np.ndarray


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

    @property
    def n(self) -> int:
        """Return the number of rows."""
        return int(self.ids.size)

    def tool_kinds(self) -> set[tuple[str, ToolKind]]:
        """Return the (tool, kind) pairs the rows call."""
        pairs = np.unique(np.stack([self.tool_of.astype(np.int64),
                                    self.kinds.astype(np.int64)]), axis=1)
        return {(self.tools[int(t)], _KINDS[int(k)]) for t, k in pairs.T}


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
    """Return ``first``'s rows then ``then``'s, None when a sensor's usual length differs."""
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


def encode(columns: Columns) -> bytes:
    """Return the columns as one value (:func:`decode` reads it)."""
    blobs = Blobs()
    header = {
        'rows': columns.n, 'tools': list(columns.tools), 'kinds_of': [k.value for k in _KINDS],
        'ids': blobs.add(columns.ids.astype('<i8').tobytes()),
        'tool_of': blobs.add(columns.tool_of.astype('<i4').tobytes()),
        'kinds': blobs.add(columns.kinds.astype('i1').tobytes()),
        'no_pre': blobs.add(np.packbits(columns.no_pre).tobytes()),
        'sensors': [[name, v.k, blobs.add(np.packbits(v.has).tobytes()),
                     blobs.add(v.rec.astype('<f8').tobytes()),
                     blobs.add(np.packbits(v.odd).tobytes())]
                    for name, v in columns.sensors.items()]}
    return write_container(_MAGIC, header, blobs)


def decode(data: bytes | memoryview) -> Columns:
    """
    Return the columns :func:`encode` wrote.

    :raises StoreCorruptError: not such a value, or its arrays do not fit its header.
    """
    header, blobs = read_container(_MAGIC, data, views=True)
    try:
        n = int(header['rows'])

        def mask(index: int) -> np.ndarray:
            return np.unpackbits(np.frombuffer(blobs[index], np.uint8), count=n).astype(bool)

        kinds = np.array([_KIND_CODE[ToolKind(v)] for v in header['kinds_of']], np.int8)
        sensors = {}
        for name, k, has, rec, odd in header['sensors']:
            vectors = np.frombuffer(blobs[rec], '<f8').reshape(n, int(k))
            sensors[str(name)] = Vectors(int(k), mask(has), vectors, mask(odd))
        columns = Columns(np.frombuffer(blobs[header['ids']], '<i8'),
                          tuple(str(t) for t in header['tools']),
                          np.frombuffer(blobs[header['tool_of']], '<i4'),
                          kinds[np.frombuffer(blobs[header['kinds']], 'i1')],
                          mask(header['no_pre']),
                          sensors)
        if columns.ids.size != n or columns.tool_of.size != n or columns.kinds.size != n:
            raise ValueError('row counts differ')
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise StoreCorruptError(f'kept first steps are malformed: {err!r}') from err
    return columns
