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
The store interface: trajectory trees, recordings, and the dedupe rule.

Tree model: per (task, variant) a prefix tree of :class:`~muscle_mem_ros.records.Node`.
``variant`` is '' for the Python API; the ROS node passes the canonical params
JSON. A complete trajectory is a root-to-node path that ended in success; it is
identified by its last node, so recording the same path twice yields the same
trajectory.

Dedupe rule (identical executions are not stored twice): when a recording is
committed, a step reuses an existing child of the same parent when the two
have the same tool, kind, type name and payload bytes, and their pre
snapshots are both absent or have the same feature names with every value
equal after rounding to 9 decimals, and the same user capture (equal bytes in
the safe format of :mod:`.values`, or equal pickled bytes for a capture that is
not JSON data or NumPy arrays: pickling only writes, it never loads). Post
snapshots, stamps, durations and statuses are outcomes, not identity, and are
ignored. Values within 1e-9 that straddle a rounding boundary are stored twice,
which is harmless. An unpicklable user capture never dedupes.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
import hashlib
import itertools
import json
import pickle
import struct
from typing import Any, overload

import numpy as np

from .columns import Columns
from .values import Blobs, pack
from ..body import Compatibility
from ..errors import StoreError, UnsafeValueError
from ..records import (
    Agreement, Approval, Declaration, FailedView, Node, ReplayBook, Step, TaskStats, ToolKind,
    TrajectoryInfo,
)

__all__ = [
    'Batching', 'declarations', 'logged', 'NodeList', 'Recording', 'RecordingInfo', 'Store',
    'step_signature', 'tree_tallies',
]


class NodeList(Sequence[Node]):
    """
    The children of one tree node: a read-only sequence with a key identifying the set.

    ``key`` changes whenever a child is added or removed (not when counters
    change), so the matcher can cache its matrices on it without hashing every
    node id on each lookup. Stores hand out the same NodeList until something
    changes, so a lookup does not copy a large fan-out.

    It views the store's own list without copying it (100 000 first steps would
    cost a copy on every commit): the store only appends to that list past this
    view's length, or puts a node with new counters in the place of the old one,
    which the view then shows.

    ``changes`` is the store's log of the children whose counters changed (their
    ids, oldest first; a new list object starts a new log) and ``changed`` its
    length when the view was made: whoever keeps its own order of the children
    (:class:`~muscle_mem_ros.replay.ranking.RankOrder`) reads what changed since it last
    looked instead of every child.

    After a restart a SQL store hands out a large tree's first steps from their kept
    columns (:mod:`.columns`): ``columns`` describes the first ``columns.n`` children,
    whose nodes are read when asked for (``load``: the store fills the positions
    given, or every unread one for None); iterating reads them all at once.
    """

    __slots__ = ('_nodes', '_n', 'key', 'family', 'changes', 'changed', 'columns', '_load',
                 '_tool_kinds')

    def __init__(
        self,
        nodes: Sequence[Node | None] = (),
        *,
        key: tuple[Any, ...],
        family: tuple[Any, ...] | None = None,
        changes: Sequence[int] | None = None,
        columns: Columns | None = None,
        load: Callable[[Sequence[int] | None], None] | None = None,
    ) -> None:
        """
        Build the view.

        :param nodes: The children, oldest first.
        :param key: Identifies this exact membership.
        :param family: Identifies the tree node whose children these are, across
            memberships that only grew: within a family children are only
            appended (a removal, or reading the list again, starts a new one),
            so a matcher extends what it built for a shorter list of the family.
        :param changes: The family's log of children given new counters (ids), or None
            when the store keeps none.
        :param columns: What matching reads of the first children, when kept.
        :param load: Reads the unread nodes (None in ``nodes``) at the positions given.
        """
        self._nodes = nodes
        self._n = len(nodes)
        self.key = key
        self.family = family
        self.changes = changes
        self.changed = 0 if changes is None else len(changes)
        self.columns = columns
        self._load = load
        self._tool_kinds: set[tuple[str, ToolKind]] | None = None

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Node: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Node, ...]: ...

    def __getitem__(self, index: int | slice) -> Node | tuple[Node, ...]:
        if isinstance(index, slice):
            wanted = range(*index.indices(self._n))
            if self._load is not None:
                self._load([i for i in wanted if self._nodes[i] is None])
            return tuple(self._nodes[i] for i in wanted)  # type: ignore[misc]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError('NodeList index out of range')
        node = self._nodes[index]
        if node is None:
            assert self._load is not None, 'an unread node in a list that cannot read it'
            self._load([index])
            node = self._nodes[index]
        return node  # type: ignore[return-value]

    def __iter__(self) -> Iterator[Node]:
        if self._load is not None:
            self._load(None)
        return itertools.islice(self._nodes, self._n)  # type: ignore[arg-type]

    def tool_kinds(self) -> set[tuple[str, ToolKind]]:
        """Return the (tool, kind) pairs the children call (unread ones from their columns)."""
        if self._tool_kinds is None:
            start = 0 if self.columns is None else self.columns.n
            found = set() if self.columns is None else self.columns.tool_kinds()
            for i in range(start, self._n):
                step = self[i].step
                found.add((step.tool, step.kind))
            self._tool_kinds = found
        return set(self._tool_kinds)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == self._n and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f'NodeList({list(self)!r}, key={self.key!r})'


def logged(log: list[int], node_id: int, size: int) -> list[int]:
    """
    Return ``log`` with ``node_id`` appended, or a new log once it outgrows the list.

    A reader of the old log starts over from the whole list, once per many changes,
    so a long-lived store's log stays within a few times its children.
    """
    if len(log) > 2 * size + 256:
        return [node_id]
    log.append(node_id)
    return log


@dataclass(frozen=True)
class RecordingInfo:
    """
    A recording that was started and never committed or discarded.

    :ivar id: Recording id.
    :ivar task: Task name.
    :ivar variant: Tree key within the task.
    :ivar parent: Node the steps would have been appended under.
    :ivar started: Wall time the recording began.
    :ivar step_count: Steps written before it stopped (or so far).
    :ivar live: True while the process making it still has the store open; False
        when it was abandoned (its process stopped or closed the store).
    :ivar owner: Who is or was recording, for messages ('pid 12 on host robot1').
    """

    id: int  # noqa: A003 (the public name, as in the store's schema)
    task: str
    variant: str
    parent: int | None
    started: float
    step_count: int
    live: bool = False
    owner: str = ''


def step_signature(step: Step) -> str | None:
    """Return the dedupe key of a step (see the module docstring), or None if it never dedupes."""
    h = hashlib.blake2b(digest_size=16)
    for text in (step.tool, step.kind.value, step.type_name):
        data = text.encode()
        h.update(struct.pack('<I', len(data)))
        h.update(data)
    h.update(struct.pack('<Q', len(step.payload)))
    h.update(bytes(step.payload))
    pre = step.pre
    if pre is None:
        h.update(b'\x00')
        return h.hexdigest()
    h.update(b'\x01')
    for name in sorted(pre.features):
        data = name.encode()
        values = np.round(np.asarray(pre.features[name], dtype=np.float64).reshape(-1), 9) + 0.0
        h.update(struct.pack('<II', len(data), values.size))
        h.update(data)
        h.update(values.tobytes())
    if pre.user is not None:
        try:
            blobs = Blobs()
            h.update(b'j' + json.dumps(pack(pre.user, blobs), separators=(',', ':')).encode())
            for blob in blobs.items:
                h.update(struct.pack('<Q', len(blob)))
                h.update(blob)
        except UnsafeValueError:
            try:
                h.update(b'p' + pickle.dumps(pre.user, protocol=4))
            except Exception:  # noqa: BLE001 - any pickling failure means "never dedupe"
                return None
    return h.hexdigest()


def check_step(step: Step) -> Step:
    """Return the step if it is a well-formed Step, else raise TypeError."""
    if not isinstance(step, Step):
        raise TypeError(f'expected a Step, got {type(step).__name__}')
    if not isinstance(step.kind, ToolKind):
        raise TypeError(f'step.kind must be a ToolKind, got {step.kind!r}')
    if not isinstance(step.payload, (bytes, bytearray, memoryview)):
        raise TypeError(f'step.payload must be bytes, got {type(step.payload).__name__}')
    return step


class Recording(abc.ABC):
    """
    Steps being recorded for one task; nothing reaches the tree until commit.

    :ivar id: Recording id, unique within the store.
    :ivar task: Task name.
    :ivar variant: Tree key within the task.
    :ivar params_json: Parameters of the run.
    :ivar parent: Node the steps go under (None = a first step).
    :ivar body: Key of the body it is learned on ('': unknown, :mod:`muscle_mem_ros.body`).
    :ivar steps: Steps appended so far.
    """

    def __init__(
        self, *, id: int,  # noqa: A002 (the public name, as in the store's schema)
        task: str, variant: str, params_json: str, parent: int | None, body: str = '',
    ) -> None:
        self.id = id
        self.task = task
        self.variant = variant
        self.params_json = params_json
        self.parent = parent
        self.body = body
        self.steps: list[Step] = []
        self._closed = False

    @property
    def closed(self) -> bool:
        """Return True once committed or discarded."""
        return self._closed

    def _ensure_open(self) -> None:
        if self._closed:
            raise ValueError(f'recording {self.id} is already committed or discarded')

    @abc.abstractmethod
    def append(self, step: Step) -> None:
        """Add a step; durable at once (SQLite: a row of an incomplete recording)."""

    @abc.abstractmethod
    def commit(self) -> TrajectoryInfo:
        """
        Merge the steps into the tree under ``parent`` atomically.

        Identical steps reuse existing nodes (see the module docstring), so
        recording the same path twice returns the same trajectory. Committing
        no steps under a parent marks the parent as the end of a trajectory.

        :raises ValueError: No steps and no parent (an empty trajectory), or the
            recording is already closed.
        """

    @abc.abstractmethod
    def discard(self) -> None:
        """Drop the recording; nothing reaches the tree."""


class Store(abc.ABC):
    """Where learned trajectory trees live. Implementations are thread-safe."""

    @abc.abstractmethod
    def children(self, *, task: str, variant: str, parent: int | None) -> NodeList:
        """Return the children of ``parent`` (None = the first steps), oldest first."""

    @abc.abstractmethod
    def node(self, node_id: int) -> Node:
        """Return one node. Raises UnknownTrajectoryError if there is none."""

    @abc.abstractmethod
    def begin(
        self, *, task: str, variant: str, params_json: str, parent: int | None = None,
        body: str = '',
    ) -> Recording:
        """
        Start a recording whose steps go after ``parent`` (None = from the root).

        :param body: Key of the body it is learned on ('': unknown); its steps dedupe only
            with steps learned on the same body (:func:`step_signature`).
        """

    @abc.abstractmethod
    def add_trajectory(
        self,
        *,
        task: str,
        variant: str,
        params_json: str,
        steps: Sequence[Step],
        parent: int | None = None,
        body: str = '',
    ) -> TrajectoryInfo:
        """Merge a complete list of steps at once (import, teach, bulk load) for ``body``."""

    @abc.abstractmethod
    def trajectory(self, trajectory_id: int) -> TrajectoryInfo:
        """Return one trajectory. Raises UnknownTrajectoryError."""

    def path(self, trajectory_id: int) -> list[Node]:
        """Return the nodes of a trajectory, first step to last."""
        return [self.node(i) for i in self.trajectory(trajectory_id).node_ids]

    def nodes(self, node_ids: Sequence[int]) -> list[Node]:
        """
        Return nodes by id, in the order asked (the SQL stores read many in one query).

        :raises UnknownTrajectoryError: One is not a node of this store.
        """
        return [self.node(i) for i in node_ids]

    @abc.abstractmethod
    def trajectories(self, *, task: str | None = None, variant: str | None = None,
                     after: int = 0, limit: int | None = None) -> list[TrajectoryInfo]:
        """
        Return every trajectory (of one task, of one of its trees), oldest first.

        :param task: Only this task's.
        :param variant: Only this tree's (needs ``task``).
        :param after: Only those with a larger id (ids are never handed out twice): what
            was committed since a listing whose newest id this is, except what another
            writer committed late with a smaller id; :meth:`tally` tells.
        :param limit: At most this many (the oldest): a long listing read page by page.
        """

    def tally(self, *, task: str, variant: str) -> tuple[int, int]:
        """
        Return how many trajectories a tree has and the sum of their ids.

        A reader that keeps a tree's trajectories up to date with ``after=`` listings
        compares it with its own: a removal, or a trajectory committed late with a
        smaller id, changes it. Cheap in the SQL stores (one index read).
        """
        found = self.trajectories(task=task, variant=variant)
        return len(found), sum(t.id for t in found)

    def trees(self, *, task: str) -> dict[str, tuple[int, int]]:
        """
        Return a task's trees: variant -> :meth:`tally` (count, sum of ids).

        Which tree a run uses is chosen from this, without listing the task's
        trajectories (cheap in the SQL stores: one index read).
        """
        return tree_tallies(self.trajectories(task=task))

    keeps_plans = False
    """Whether :meth:`keep_plans` keeps anything (a store that outlives its process)."""

    def keep_plans(self, *, task: str, variant: str, tally: tuple[int, int],
                   fingerprint: str, plans: Sequence[tuple[int, str]]) -> bool:
        """
        Keep what learning found for a tree (:mod:`muscle_mem_ros.bindings.keeping`).

        Replaces what was kept for the tree. A store that does not outlive its process
        keeps nothing (this default) and returns False.

        :param tally: The tree's :meth:`tally` the plans were learned at.
        :param fingerprint: What they were learned with.
        :param plans: (learned step id, plan as JSON) of the steps that have one.
        """
        return False

    def kept_plans(self, *, task: str, variant: str) -> tuple[tuple[int, int], str, int] | None:
        """Return (tally, fingerprint, how many) of a tree's kept plans, None when none are."""
        return None

    def order_first_steps(self, tolerance: Mapping[str, Any]) -> None:
        """
        Tell the store the tolerances first steps are matched under (sensor -> tolerance).

        A store that keeps large trees' first steps for a restart
        (:mod:`.columns`) keeps them sorted so that a restart's first lookup reads few;
        this default keeps nothing. Only the sensors of a box or norm check belong here.
        """

    def kept_plan(self, *, task: str, variant: str, node_id: int) -> str | None:
        """Return one learned step's kept plan (JSON), None when it has none."""
        return None

    def kept_plan_ids(self, *, task: str, variant: str) -> list[int]:
        """Return the learned steps of a tree that have a kept plan."""
        return []

    @abc.abstractmethod
    def trajectory_ending_at(self, node_id: int) -> TrajectoryInfo | None:
        """Return the trajectory whose last node is ``node_id``, if any."""

    def bodies(self) -> dict[str, int]:
        """Return how many trajectories each body learned ('': learned before bodies)."""
        found: dict[str, int] = {}
        for info in self.trajectories():
            found[info.body] = found.get(info.body, 0) + 1
        return found

    def compatible_bodies(self) -> list[Compatibility]:
        """Return the pairs of bodies declared compatible (:mod:`muscle_mem_ros.body`)."""
        return []

    def revoke_compatible(self, *, a: str, b: str, who: str) -> Compatibility:
        """
        Revoke the declaration that bodies ``a`` and ``b`` are one; ``who`` is recorded.

        :raises ValueError: they are not declared compatible.
        """
        raise StoreError(f'{type(self).__name__} does not keep compatible bodies')

    def revoked_bodies(self) -> list[Compatibility]:
        """Return the declarations revoked (``who`` revoked each, ``at`` when), oldest first."""
        return []

    def note_source(self, *, trajectory_id: int, source: str) -> None:
        """Record what a trajectory was learned from (a recording: ``muscle-mem learn``)."""
        raise StoreError(f'{type(self).__name__} does not keep where trajectories were learned')

    def sources(self, *, task: str) -> dict[int, str]:
        """Return what each trajectory of ``task`` learned from a recording was learned from."""
        return {}

    def keep_failed_view(self, view: FailedView) -> bool:
        """
        Keep what a camera saw when a check on it failed, in place of the one before.

        One view is kept per learned step, sensor and phase (the latest), so the store
        stays bounded however often a robot misses. A view of a step that is not (or no
        longer) a node of its task is not kept. This default keeps nothing.

        :return: True when it was kept.
        """
        return False

    def failed_views(self, *, task: str, node_id: int | None = None) -> list[FailedView]:
        """Return the failed views of ``task`` (of one of its steps), by step, phase, sensor."""
        return []

    @abc.abstractmethod
    def declare_compatible(self, *, a: str, b: str, who: str) -> Compatibility:
        """Declare bodies ``a`` and ``b`` (keys) one for the cache: each replays the other's."""

    @abc.abstractmethod
    def tasks(self) -> list[TaskStats]:
        """Return per-task counters, sorted by name."""

    @abc.abstractmethod
    def forget(self, *, task: str, trajectory_id: int | None = None) -> int:
        """
        Remove one trajectory (or all of a task); return how many were removed.

        Removing one trajectory drops only the nodes no other trajectory uses.

        :raises UnknownTrajectoryError: ``trajectory_id`` does not exist in ``task``.
        """

    @abc.abstractmethod
    def note_replay(self, *, trajectory_id: int) -> None:
        """Record that a trajectory was replayed to its end (counters, recency)."""

    @abc.abstractmethod
    def note_outcome(self, *, task: str, hit: bool) -> None:
        """Count a cache hit or miss for a task."""

    @abc.abstractmethod
    def note_shadow(self, *, task: str, trajectory_id: int, agreed: bool,
                    bindings: Sequence[tuple[int, str, bool]] = ()) -> None:
        """
        Count one shadow run (:mod:`muscle_mem_ros.replay.shadow`).

        :param task: The task.
        :param trajectory_id: The trajectory the cache's prediction followed (0: none).
        :param agreed: Every step agreed and the prediction completed that trajectory.
        :param bindings: (node id, field, agreed) of each inferred binding predicted.
        """

    @abc.abstractmethod
    def book_replay(self, *, task: str, trajectory_id: int,
                    booker: Callable[[ReplayBook, int], ReplayBook]) -> ReplayBook:
        """
        Book how one replay of a trajectory ended (:mod:`muscle_mem_ros.replay.booking`).

        :param task: Its task.
        :param trajectory_id: The trajectory.
        :param booker: ``booker(its book so far, its agreeing shadow runs now)`` returns the
            new book (:func:`~muscle_mem_ros.replay.booking.booked`); read and written in one
            write, so concurrent bookings (a fleet's robots) never lose one.
        :return: The new book.
        """

    @abc.abstractmethod
    def replay_books(self, *, task: str | None = None) -> dict[int, ReplayBook]:
        """Return how the replays of a task's trajectories (None: every task's) ended, by id."""

    @abc.abstractmethod
    def agreement(self, *, task: str) -> tuple[dict[int, Agreement],
                                               dict[tuple[int, str], Agreement]]:
        """Return a task's shadow counts: per trajectory, and per (node id, field) binding."""

    @abc.abstractmethod
    def approve(self, *, task: str, trajectory_id: int = 0, who: str,
                covers: Sequence[int] = (),
                bindings: Sequence[tuple[int, str, str]] = (),
                declared: Sequence[Declaration] = ()) -> Approval:
        """
        Approve a task (``trajectory_id`` 0) or one of its trajectories for replay.

        An approval covers what the approver could see and nothing learned later
        (:func:`muscle_mem_ros.replay.gates.approve` reads it and calls this; renewing an
        approval replaces what it covers).

        :param covers: The trajectory ids it covers (a trajectory's approval covers that
            trajectory in any case).
        :param bindings: The inferred bindings it covers: (learned step id, field, source).
        :param declared: The declared bindings it saw on what it covers: (learned step id,
            field, source, max_shift); a later change to them holds what it covers.
        :raises UnknownTrajectoryError: ``trajectory_id`` is not a trajectory of ``task``.
        """

    @abc.abstractmethod
    def revoke(self, *, task: str, trajectory_id: int = 0) -> bool:
        """Withdraw an approval; return False when there was none."""

    @abc.abstractmethod
    def approvals(self, *, task: str | None = None) -> list[Approval]:
        """Return the approvals of a task (None: of every task), oldest first."""

    @abc.abstractmethod
    def incomplete_recordings(self) -> list[RecordingInfo]:
        """Return recordings that were started and never finished (never replayed)."""

    def purge_abandoned(self, *, older_than: float = 0.0) -> int:
        """
        Delete incomplete recordings abandoned by a stopped process; return how many.

        :param older_than: Only those started more than this many seconds ago.
        :return: 0 here: a store whose recordings die with the process has none.
        """
        return 0

    @property
    def allow_pickle(self) -> bool:
        """
        Return True if this store may hold arbitrary Python objects.

        A persistent store then pickles what is not JSON data or NumPy arrays
        (trusted files only); an in-memory store keeps objects as they are and
        never reads them from a file, so it is always True there.
        """
        return False

    def preload(self, *, task: str | None = None) -> int:
        """
        Read the first steps of every tree (of one task) into memory ahead of use.

        A persistent store reads lazily; a node can call this at startup so the
        first lookup does not pay for reading a large tree. Returns the number
        of first-step nodes now in memory (0 for stores that are always loaded).
        """
        return 0

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group many writes into one transaction (bulk loading); a no-op in memory."""
        yield

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources. The store must not be used afterwards."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Batching:
    """
    ``batch()`` for a store that writes in transactions: nested batches are one.

    The store has ``_lock`` (reentrant), ``_batch_depth`` (0 outside a batch) and
    ``_write()``, a context manager around one write transaction (inside a batch,
    the batch's); ``_batch_done(conn)`` runs after a batch's writes, in its
    transaction (nothing on an error).
    """

    _lock: Any
    _batch_depth: int
    _write: Callable[[], Any]

    def _batch_done(self, conn: Any) -> None:
        """Run at the end of a batch (the PostgreSQL store notifies other stores)."""

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group many writes (appends, commits, add_trajectory) into one transaction."""
        with self._lock:
            if self._batch_depth:
                self._batch_depth += 1
                try:
                    yield
                finally:
                    self._batch_depth -= 1
                return
            with self._write() as conn:
                self._batch_depth = 1
                try:
                    yield
                finally:
                    self._batch_depth = 0
                self._batch_done(conn)


def declarations(declared: Iterable[Sequence[Any]]) -> tuple[Declaration, ...]:
    """Return declared bindings as every store keeps an approval's: typed, unique, sorted."""
    return tuple(sorted({(int(n), str(f), str(s), None if m is None else float(m))
                         for n, f, s, m in declared},
                        key=lambda d: (d[0], d[1], d[2], -1.0 if d[3] is None else d[3])))


def tree_tallies(infos: Iterable[TrajectoryInfo]) -> dict[str, tuple[int, int]]:
    """Return variant -> (count, sum of ids) of the trajectories ``infos`` (one task's)."""
    out: dict[str, tuple[int, int]] = {}
    for t in infos:
        count, ids = out.get(t.variant, (0, 0))
        out[t.variant] = (count + 1, ids + t.id)
    return out
