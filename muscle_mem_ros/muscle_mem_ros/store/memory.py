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

"""In-process store: the Python API's default, gone when the process exits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
import itertools
import threading
import time

from .base import check_step, declarations, logged, NodeList, Recording, RecordingInfo, Store
from .merge import merge_steps
from ..body import Compatibility, shown
from ..errors import UnknownTrajectoryError
from ..records import (
    Agreement, Approval, Declaration, FailedView, Node, ReplayBook, Step, TaskStats,
    TrajectoryInfo, ViewPhase,
)

__all__ = ['MemoryStore']

_store_ids = itertools.count(1)

_Key = tuple[str, str, 'int | None']


@dataclass
class _Children:
    """Children of one node: ordered ids, dedupe index and a membership generation."""

    ids: list[int] = field(default_factory=list)
    by_sig: dict[str, int] = field(default_factory=dict)
    gen: int = 0
    lineage: int = 0
    view: NodeList | None = None
    log: list[int] = field(default_factory=list)
    """Ids of children given new counters (:attr:`.base.NodeList.changes`)."""


class _MemoryRecording(Recording):

    def __init__(self, store: MemoryStore, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._store = store
        self._started = time.time()

    def append(self, step: Step) -> None:
        self._ensure_open()
        self.steps.append(check_step(step))

    def commit(self) -> TrajectoryInfo:
        self._ensure_open()
        info = self._store._merge(self.task, self.variant, self.params_json, self.parent,
                                  self.steps, self.body)
        self._close()
        return info

    def discard(self) -> None:
        self._ensure_open()
        self._close()

    def _close(self) -> None:
        self._closed = True
        with self._store._lock:
            self._store._recordings.pop(self.id, None)


def _plus(found: Agreement | None, agreed: bool) -> Agreement:
    found = found or Agreement()
    return Agreement(found.runs + 1, found.agreed + int(agreed))


class MemoryStore(Store):
    """Trajectory trees in dictionaries; thread-safe; nothing persists."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._uid = next(_store_ids)
        self._gens = itertools.count(1)
        self._ids = itertools.count(1)
        self._traj_ids = itertools.count(1)
        self._rec_ids = itertools.count(1)
        self._nodes: dict[int, Node] = {}
        self._task_of: dict[int, tuple[str, str]] = {}
        self._sig_of: dict[int, str | None] = {}
        self._children: dict[_Key, _Children] = {}
        self._trajs: dict[int, TrajectoryInfo] = {}
        self._by_leaf: dict[int, int] = {}
        self._counts: dict[str, list[float]] = {}
        self._shadow: dict[int, Agreement] = {}
        self._shadow_task: dict[int, str] = {}
        self._bound: dict[tuple[int, str], Agreement] = {}
        self._bound_task: dict[tuple[int, str], str] = {}
        self._approvals: dict[tuple[str, int], Approval] = {}
        self._compatible: dict[tuple[str, str], Compatibility] = {}
        self._revoked: list[Compatibility] = []
        self._sources: dict[int, str] = {}
        self._failed: dict[tuple[int, str, ViewPhase], FailedView] = {}
        self._books: dict[int, ReplayBook] = {}
        self._recordings: dict[int, _MemoryRecording] = {}

    def children(self, *, task: str, variant: str, parent: int | None) -> NodeList:
        """Return the children of ``parent``, oldest first."""
        with self._lock:
            kids = self._children.get((task, variant, parent))
            if kids is None:
                return NodeList((), key=(self._uid, task, variant, parent, 0))
            if kids.view is None:
                kids.view = NodeList([self._nodes[i] for i in kids.ids],
                                     key=(self._uid, task, variant, parent, kids.gen),
                                     family=(self._uid, task, variant, parent, kids.lineage),
                                     changes=kids.log)
            return kids.view

    def node(self, node_id: int) -> Node:
        """Return one node."""
        with self._lock:
            try:
                return self._nodes[node_id]
            except KeyError:
                raise UnknownTrajectoryError(f'no node with id {node_id}') from None

    def begin(
        self, *, task: str, variant: str, params_json: str, parent: int | None = None,
        body: str = '',
    ) -> Recording:
        """Start a recording under ``parent``."""
        with self._lock:
            self._check_parent(task, variant, parent)
            rec = _MemoryRecording(self, id=next(self._rec_ids), task=task, variant=variant,
                                   params_json=params_json, parent=parent, body=body)
            self._recordings[rec.id] = rec
            return rec

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
        """Merge a complete list of steps at once."""
        return self._merge(task, variant, params_json, parent,
                           [check_step(s) for s in steps], body)

    def trajectory(self, trajectory_id: int) -> TrajectoryInfo:
        """Return one trajectory."""
        with self._lock:
            try:
                return self._trajs[trajectory_id]
            except KeyError:
                raise UnknownTrajectoryError(f'no trajectory with id {trajectory_id}') from None

    def trajectories(self, *, task: str | None = None, variant: str | None = None,
                     after: int = 0, limit: int | None = None) -> list[TrajectoryInfo]:
        """Return every trajectory (of one task, of one tree, newer than ``after``)."""
        if variant is not None and task is None:
            raise ValueError('a variant names a tree of a task: give the task too')
        with self._lock:
            found = [t for t in self._trajs.values() if t.id > after
                     and task in (None, t.task) and variant in (None, t.variant)]
        return found if limit is None else found[:limit]

    def trajectory_ending_at(self, node_id: int) -> TrajectoryInfo | None:
        """Return the trajectory whose last node is ``node_id``, if any."""
        with self._lock:
            tid = self._by_leaf.get(node_id)
            return None if tid is None else self._trajs[tid]

    def tasks(self) -> list[TaskStats]:
        """Return per-task counters, sorted by name."""
        with self._lock:
            names = {t.task for t in self._trajs.values()} | set(self._counts)
            out = []
            for name in sorted(names):
                hits, misses, used = self._counts.get(name, [0, 0, 0.0])
                trajs = [t for t in self._trajs.values() if t.task == name]
                used = max([used] + [t.last_used for t in trajs])
                out.append(TaskStats(name, len(trajs), int(hits), int(misses), used))
            return out

    def forget(self, *, task: str, trajectory_id: int | None = None) -> int:
        """Remove one trajectory or all of a task."""
        with self._lock:
            if trajectory_id is None:
                doomed = [t.id for t in self._trajs.values() if t.task == task]
                self._counts.pop(task, None)
                self._failed = {k: v for k, v in self._failed.items() if v.task != task}
            else:
                traj = self._trajs.get(trajectory_id)
                if traj is None or traj.task != task:
                    raise UnknownTrajectoryError(
                        f'no trajectory with id {trajectory_id} in task {task!r}')
                doomed = [trajectory_id]
            for tid in doomed:
                self._drop(self._trajs[tid])
            return len(doomed)

    def note_replay(self, *, trajectory_id: int) -> None:
        """Bump counters and recency along a replayed trajectory."""
        with self._lock:
            traj = self.trajectory(trajectory_id)
            now = time.time()
            for nid in traj.node_ids:
                node = self._nodes[nid]
                self._put(replace(node, success_count=node.success_count + 1, last_used=now))
            self._trajs[traj.id] = replace(traj, last_used=now,
                                           replay_count=traj.replay_count + 1)

    def note_outcome(self, *, task: str, hit: bool) -> None:
        """Count a hit or a miss."""
        with self._lock:
            counts = self._counts.setdefault(task, [0, 0, 0.0])
            counts[0 if hit else 1] += 1
            counts[2] = time.time()

    def note_shadow(self, *, task: str, trajectory_id: int, agreed: bool,
                    bindings: Sequence[tuple[int, str, bool]] = ()) -> None:
        """Count one shadow run."""
        with self._lock:
            if trajectory_id:
                self._shadow[trajectory_id] = _plus(self._shadow.get(trajectory_id), agreed)
                self._shadow_task[trajectory_id] = task
            for node, path, ok in bindings:
                self._bound[(node, path)] = _plus(self._bound.get((node, path)), ok)
                self._bound_task[(node, path)] = task

    def agreement(self, *, task: str) -> tuple[dict[int, Agreement],
                                               dict[tuple[int, str], Agreement]]:
        """Return a task's shadow counts."""
        with self._lock:
            return ({t: a for t, a in self._shadow.items() if self._shadow_task[t] == task},
                    {k: a for k, a in self._bound.items() if self._bound_task[k] == task})

    def book_replay(self, *, task: str, trajectory_id: int,
                    booker: Callable[[ReplayBook, int], ReplayBook]) -> ReplayBook:
        """Book one replay of a trajectory (under the store's lock, as SQL books in a write)."""
        with self._lock:
            old = self._books.get(trajectory_id) or ReplayBook(trajectory_id, task)
            new = self._books[trajectory_id] = booker(
                old, self._shadow.get(trajectory_id, Agreement()).agreed)
            return new

    def replay_books(self, *, task: str | None = None) -> dict[int, ReplayBook]:
        """Return how replays ended, by trajectory."""
        with self._lock:
            return {t: b for t, b in self._books.items() if task is None or b.task == task}

    def approve(self, *, task: str, trajectory_id: int = 0, who: str,
                covers: Sequence[int] = (),
                bindings: Sequence[tuple[int, str, str]] = (),
                declared: Sequence[Declaration] = ()) -> Approval:
        """Approve a task or one of its trajectories (and what it covers, as SQL keeps it)."""
        if trajectory_id:
            self.trajectory(trajectory_id)  # raises when unknown
        ids = tuple(sorted({int(i) for i in (*covers, trajectory_id) if i}))
        bound = tuple(sorted({(int(n), str(f), str(s)) for n, f, s in bindings}))
        with self._lock:
            found = self._approvals[(task, trajectory_id)] = Approval(
                task, trajectory_id, who, time.time(), ids, bound, declarations(declared))
            return found

    def revoke(self, *, task: str, trajectory_id: int = 0) -> bool:
        """Withdraw an approval."""
        with self._lock:
            return self._approvals.pop((task, trajectory_id), None) is not None

    def approvals(self, *, task: str | None = None) -> list[Approval]:
        """Return approvals, oldest first."""
        with self._lock:
            return sorted((a for a in self._approvals.values()
                           if task is None or a.task == task), key=lambda a: a.at)

    def declare_compatible(self, *, a: str, b: str, who: str) -> Compatibility:
        """Declare bodies ``a`` and ``b`` one for the cache."""
        first, second = sorted((a, b))
        with self._lock:
            found = self._compatible[(first, second)] = Compatibility(first, second, who,
                                                                      time.time())
            return found

    def note_source(self, *, trajectory_id: int, source: str) -> None:
        """Record what a trajectory was learned from (the first one kept)."""
        with self._lock:
            self._sources.setdefault(trajectory_id, source)

    def sources(self, *, task: str) -> dict[int, str]:
        """Return what each trajectory of ``task`` learned from a recording was learned from."""
        with self._lock:
            ids = {i for i, t in self._trajs.items() if t.task == task}
            return {i: s for i, s in self._sources.items() if i in ids}

    def keep_failed_view(self, view: FailedView) -> bool:
        """Keep ``view`` in place of the one before it; False when its step is not stored."""
        with self._lock:
            found = self._task_of.get(view.node_id)
            if found is None or found[0] != view.task:
                return False
            self._failed[(view.node_id, view.sensor, view.phase)] = view
            return True

    def failed_views(self, *, task: str, node_id: int | None = None) -> list[FailedView]:
        """Return the failed views of ``task`` (of one of its steps), by step, phase, sensor."""
        order = list(ViewPhase)
        with self._lock:
            return sorted((v for v in self._failed.values() if v.task == task
                           and node_id in (None, v.node_id)),
                          key=lambda v: (v.node_id, order.index(v.phase), v.sensor))

    def revoke_compatible(self, *, a: str, b: str, who: str) -> Compatibility:
        """Revoke the declaration that ``a`` and ``b`` are one body; ``who`` is recorded."""
        first, second = sorted((a, b))
        with self._lock:
            if self._compatible.pop((first, second), None) is None:
                raise ValueError(f'{shown(first)} and {shown(second)} are not declared '
                                 'compatible')
            revoked = Compatibility(first, second, who, time.time())
            self._revoked.append(revoked)
            return revoked

    def revoked_bodies(self) -> list[Compatibility]:
        """Return the declarations revoked, oldest first."""
        with self._lock:
            return list(self._revoked)

    def compatible_bodies(self) -> list[Compatibility]:
        """Return the pairs declared compatible, oldest first."""
        with self._lock:
            return sorted(self._compatible.values(), key=lambda c: (c.at, c.a, c.b))

    def incomplete_recordings(self) -> list[RecordingInfo]:
        """Return recordings in progress."""
        with self._lock:
            return [RecordingInfo(r.id, r.task, r.variant, r.parent, r._started, len(r.steps),
                                  live=True, owner='this process')
                    for r in self._recordings.values()]

    @property
    def allow_pickle(self) -> bool:
        """Return always True: objects are kept as they are, in this process only."""
        return True

    def _put(self, node: Node) -> None:
        """Store a (new or updated) node and drop the cached view of its siblings."""
        known = node.id in self._nodes
        self._nodes[node.id] = node
        task, variant = self._task_of[node.id]
        kids = self._children.get((task, variant, node.parent))
        if kids is not None:
            kids.view = None
            if known:
                kids.log = logged(kids.log, node.id, len(kids.ids))

    def _check_parent(self, task: str, variant: str, parent: int | None) -> None:
        if parent is None:
            return
        if parent not in self._nodes:
            raise UnknownTrajectoryError(f'no node with id {parent}')
        if self._task_of[parent] != (task, variant):
            raise ValueError(f'node {parent} belongs to task {self._task_of[parent][0]!r}, '
                             f'not {task!r}')

    def _merge(
        self, task: str, variant: str, params_json: str, parent: int | None, steps: list[Step],
        body: str = '',
    ) -> TrajectoryInfo:
        with self._lock:
            self._check_parent(task, variant, parent)
            return merge_steps(_MemoryTree(self, task, variant), params_json=params_json,
                               parent=parent, steps=steps, body=body)[0]

    def _drop(self, traj: TrajectoryInfo) -> None:
        del self._trajs[traj.id]
        del self._by_leaf[traj.node_ids[-1]]
        used: set[int] = set()
        for other in self._trajs.values():
            if other.task == traj.task and other.variant == traj.variant:
                used.update(other.node_ids)
        leaf = traj.node_ids[-1]
        if leaf in used:
            self._put(replace(self._nodes[leaf], terminal=False))
        for nid in reversed(traj.node_ids):
            if nid in used:
                continue
            node = self._nodes.pop(nid)
            self._task_of.pop(nid)
            for seen in [k for k in self._failed if k[0] == nid]:
                del self._failed[seen]
            sig = self._sig_of.pop(nid)
            key = (traj.task, traj.variant, node.parent)
            kids = self._children[key]
            kids.ids.remove(nid)
            if sig is not None and kids.by_sig.get(sig) == nid:
                del kids.by_sig[sig]
            kids.gen = kids.lineage = next(self._gens)  # a removal starts a new family
            kids.view = None
            if not kids.ids:
                del self._children[key]
            self._children.pop((traj.task, traj.variant, nid), None)


class _MemoryTree:
    """The dictionary writes of a merge for one (task, variant): :class:`~.merge.TreeWriter`."""

    def __init__(self, store: MemoryStore, task: str, variant: str) -> None:
        self._store = store
        self._task = task
        self._variant = variant

    def path_to(self, node: int) -> list[int]:
        path: list[int] = []
        cursor: int | None = node
        while cursor is not None:
            path.append(cursor)
            cursor = self._store._nodes[cursor].parent
        path.reverse()
        return path

    def child_with(self, parent: int | None, sig: str) -> int | None:
        kids = self._store._children.get((self._task, self._variant, parent))
        return None if kids is None else kids.by_sig.get(sig)

    def add_node(self, parent: int | None, depth: int, step: Step, sig: str | None,
                 now: float) -> int:
        store = self._store
        kids = store._children.setdefault((self._task, self._variant, parent), _Children())
        nid = next(store._ids)
        store._task_of[nid] = (self._task, self._variant)
        store._put(Node(id=nid, parent=parent, depth=depth, step=step, success_count=0,
                        last_used=now))
        store._sig_of[nid] = sig
        kids.ids.append(nid)
        if sig is not None:
            kids.by_sig[sig] = nid
        kids.gen = next(store._gens)
        return nid

    def touch_path(self, path: Sequence[int], now: float) -> None:
        for nid in path:
            node = self._store._nodes[nid]
            self._store._put(replace(node, success_count=node.success_count + 1, last_used=now))

    def mark_terminal(self, leaf: int) -> None:
        self._store._put(replace(self._store._nodes[leaf], terminal=True))

    def trajectory_at(self, leaf: int) -> TrajectoryInfo | None:
        tid = self._store._by_leaf.get(leaf)
        return None if tid is None else self._store._trajs[tid]

    def touch_trajectory(self, info: TrajectoryInfo, now: float) -> TrajectoryInfo:
        info = replace(info, last_used=now)
        self._store._trajs[info.id] = info
        return info

    def add_trajectory(self, params_json: str, path: Sequence[int],
                       now: float, body: str) -> TrajectoryInfo:
        info = TrajectoryInfo(id=next(self._store._traj_ids), task=self._task,
                              variant=self._variant, params_json=params_json,
                              node_ids=tuple(path), created=now, last_used=now, body=body)
        self._store._by_leaf[path[-1]] = info.id
        self._store._trajs[info.id] = info
        return info
