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
A task's trees as one run sees them: read once per run.

A run (one ExecuteTask goal, a Replay, a dry run) reads its tree once: one
listing of that tree's trajectories, from which its plans are brought up to
date (:func:`..bindings.learning.follow`, learning only what is new). The walk, the dry
run, the filer and the reporters read the :class:`TreeView`; nothing in a run
lists the tree again. Children are read from the store, which caches them.

:class:`Trees` keeps each tree's learner between runs and chooses the tree a
run with given parameters uses (:meth:`Trees.variant_for`), from the store's
per-tree tallies rather than a listing of the task. It keeps what its learners
found with the store (:meth:`Trees.keep`) and, after a restart, reads a tree's
kept plans while the tree is learned again in the background
(:mod:`..bindings.keeping`), so the first run does not wait for learning.

The body a branch was learned on (:mod:`..body`): a :class:`Trees` given this robot's
``body`` lists a tree as this body sees it. The view's ``trajectories`` are those this
body replays (its own, those of bodies declared compatible with it, those of an unknown
body); the others are the view's ``foreign`` ones, whose steps nothing in the run
replays, predicts, files under or learns from (:func:`..replay.gates.gate_tree` holds
them back with the reason naming both bodies; :meth:`Trees.visible` restricts the
children the filer and the shadow run read; the plans are learned from the visible
trajectories only, and kept with the store under a fingerprint that names the bodies
seen). The compatible pairs are read from the store with each view, so a declaration
reaches a running node at its next run. Without a body (the Python ``Engine``, the CLI)
bodies are ignored: every trajectory is visible.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
import json
import logging
import threading
import time
from typing import Any

from ..bindings.filing import file_steps
from ..bindings.inference import Sources
from ..bindings.keeping import fingerprint, KeptPlans, plan_text
from ..bindings.learning import follow, Learner, no_plans, Plans
from ..bindings.rules import Declared, DEFAULT_MAX_SHIFT
from ..bindings.variants import served, Variant
from ..body import Body, Compatibility, Kin, kin
from ..errors import StoreError
from ..records import Node, Step, TrajectoryInfo
from ..store.base import Store

__all__ = ['Paths', 'recorded_params', 'Trees', 'TreeView']

_log = logging.getLogger(__name__)


class _Closed(Exception):
    """Raised in a background learner's rest once its Trees closed."""


_FIRST_REST = 1.0
"""Seconds a background learner waits before it starts (:meth:`Trees._learn_quietly`)."""

Paths = Sequence[tuple[int, tuple[int, ...], int]]
"""(replay count, node ids, id) of the trajectories a walk may be on."""


@dataclass(frozen=True)
class TreeView:
    """
    One tree, read once for one run.

    :ivar task: The task.
    :ivar variant: The tree's variant.
    :ivar trajectories: Its trajectories, oldest first, as listed when the run began.
    :ivar plans: Its plans (node id -> bindings), up to date with ``trajectories``.
    :ivar foreign: Its trajectories learned on bodies this robot does not replay (kept
        apart from ``trajectories``; empty when bodies are ignored).
    :ivar kin: Which bodies this robot replays (None: bodies are ignored).
    """

    task: str
    variant: str
    trajectories: tuple[TrajectoryInfo, ...]
    plans: Plans = field(default_factory=no_plans)
    foreign: tuple[TrajectoryInfo, ...] = ()
    kin: Kin | None = None

    @property
    def nodes(self) -> frozenset[int] | None:
        """Return the learned steps this robot may replay (None: every one, none is foreign)."""
        if not self.foreign:
            return None
        return frozenset(i for t in self.trajectories for i in t.node_ids)

    @cached_property
    def visible(self) -> frozenset[int] | None:
        """
        Return the learned steps of the trajectories this body replays (None: bodies ignored).

        The set a walk checks each step it takes against (:func:`.walk.on_body`): a node
        outside it is another body's, or was added to the tree after the run read it.
        """
        if self.kin is None:
            return None
        return frozenset(i for t in self.trajectories for i in t.node_ids)

    def paths(self, path: Sequence[int] | None = None) -> Paths:
        """Return (replay count, node ids, id) of its trajectories (those on ``path``)."""
        wanted = None if path is None else tuple(path)
        return [(t.replay_count, t.node_ids, t.id) for t in self.trajectories
                if wanted is None or tuple(t.node_ids) == wanted]

    def ending_at(self, node_id: int) -> TrajectoryInfo | None:
        """Return the trajectory whose last step is ``node_id``, if any."""
        return next((t for t in self.trajectories if t.node_ids and t.node_ids[-1] == node_id),
                    None)


def recorded_params(params_json: str) -> dict[str, Any]:
    """Return the parameters a trajectory was recorded with ({} when unreadable)."""
    try:
        value = json.loads(params_json or '{}')
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class Trees:
    """
    The trees of a store as runs use them: each tree's plans, kept between runs.

    :param store: The cache.
    :param declared: Bindings from the params file.
    :param infer: Infer bindings from the recordings.
    :param max_shift: ``max_shift`` of inferred sensor bindings.
    :param tolerance: Tolerance of a sensor element.
    :param sources: Which sensors inference may bind to (:func:`..bindings.rules.sensor_sources`).
    :param learned_with: What ``tolerance`` and ``sources`` were made from (the sensors'
        settings, as text): with it, plans are kept with the store and read after a
        restart (:mod:`..bindings.keeping`); without it (''), nothing is kept.
    :param body: This robot's body: trees are seen as it sees them (module docstring);
        None: bodies are ignored.
    """

    def __init__(self, store: Store, *, declared: Sequence[Declared] = (), infer: bool = True,
                 max_shift: float | None = DEFAULT_MAX_SHIFT,
                 tolerance: Callable[[str], float | None] = lambda key: None,
                 sources: Sources | None = None, learned_with: str = '',
                 body: Body | None = None) -> None:
        self._store = store
        self.body = body
        self._pairs: list[Compatibility] = []
        self._seen: dict[tuple[str, str], tuple[tuple[int, int], str, tuple[Any, ...]]] = {}
        self.declared = tuple(declared)
        self.infer = infer
        self._max_shift = max_shift
        self.tolerance = tolerance
        self._sources = sources
        self._learners: dict[tuple[str, str], Learner] = {}
        self._lock = threading.Lock()
        self._learning: dict[tuple[str, str], threading.Lock] = {}
        self._kept: dict[tuple[str, str], tuple[tuple[int, int], KeptPlans]] = {}
        self._backlog: list[tuple[str, str, float]] = []
        self._worker: threading.Thread | None = None
        self._closed = False
        self._none = no_plans()
        self.fingerprint = '' if not learned_with else fingerprint(
            declared=self.declared, infer=infer, max_shift=max_shift, learned_with=learned_with)
        """What plans are learned with ('': they are not kept)."""

    @property
    def binds(self) -> bool:
        """Return True when bindings are declared or inferred."""
        return bool(self.declared) or self.infer

    def kin(self) -> Kin | None:
        """Return which bodies this robot replays, as the store says now (None: any)."""
        if self.body is None:
            return None
        try:
            self._pairs = self._store.compatible_bodies()
        except StoreError:  # a fleet store away: the pairs it said last
            pass
        return kin(self.body, self._pairs)

    def view(self, task: str, variant: str) -> TreeView:
        """Read one tree for one run: one listing, the plans caught up from it."""
        listing = tuple(self._store.trajectories(task=task, variant=variant))
        seen = self.kin()
        if seen is None:
            return TreeView(task, variant, listing, self._plans(task, variant, listing))
        mine = tuple(t for t in listing if seen.sees(t.body))
        foreign = tuple(t for t in listing if not seen.sees(t.body))
        self._remember(task, variant, listing, seen, mine)
        return TreeView(task, variant, mine, self._plans(task, variant, mine), foreign, seen)

    def _remember(self, task: str, variant: str, listing: Sequence[TrajectoryInfo],
                  seen: Kin, mine: tuple[TrajectoryInfo, ...]) -> tuple[TrajectoryInfo, ...]:
        with self._lock:
            self._seen[(task, variant)] = ((len(listing), sum(t.id for t in listing)),
                                           seen.text, mine)
        return mine

    def _mine(self, task: str, variant: str) -> tuple[TrajectoryInfo, ...] | None:
        """Return a tree's trajectories this body sees (one tally read when unchanged)."""
        seen = self.kin()
        if seen is None:
            return None
        tally = self._store.tally(task=task, variant=variant)
        with self._lock:
            held = self._seen.get((task, variant))
        if held is not None and held[:2] == (tally, seen.text):
            return tuple(held[2])
        listing = self._store.trajectories(task=task, variant=variant)
        return self._remember(task, variant, listing, seen,
                              tuple(t for t in listing if seen.sees(t.body)))

    def visible(self, task: str, variant: str) -> frozenset[int] | None:
        """Return the learned steps of a tree this body may follow (None: every one)."""
        mine = self._mine(task, variant)
        if mine is None:
            return None
        held = self._seen.get((task, variant))
        if held is not None and held[0][0] == len(mine):
            return None  # nothing in it is foreign
        return frozenset(i for t in mine for i in t.node_ids)

    def file(self, *, task: str, variant: str, params_json: str, parent: int | None,
             steps: Sequence[Step], check: Any, agreement: Callable[[str], float],
             ) -> tuple[str, int | None, list[Step]]:
        """
        Return where a finished recording goes (:func:`~..bindings.filing.file_steps`).

        The node's replayer and ``muscle-mem learn`` both file here: a recording follows
        only the learned steps this body may follow (another body's are not its to follow),
        under the tree's plans and this store's binding settings.

        :param check: The sensors' ToleranceCheck, or None.
        :param agreement: A tool's agreement (how far its goal numbers may differ).
        :return: (variant, parent node, steps still to store).
        """
        seen: dict[str, frozenset[int] | None] = {}

        def children(tree: str, at: int | None) -> Sequence[Node]:
            if tree not in seen:
                seen[tree] = self.visible(task, tree)
            listed = self._store.children(task=task, variant=tree, parent=at)
            visible = seen[tree]
            return listed if visible is None else [c for c in listed if c.id in visible]
        return file_steps(
            variant=variant, parent=parent, steps=steps, params=recorded_params(params_json),
            plans=partial(self.plans, task), children=children, check=check,
            tolerance=self.tolerance, declared=self.declared, infer=self.infer,
            others=partial(self.literal_trees, task, variant), agreement=agreement)

    def plans(self, task: str, variant: str) -> Plans:
        """Return the plans of one tree, up to date (one tally read when nothing changed)."""
        return self._plans(task, variant, self._mine(task, variant))

    def _plans(self, task: str, variant: str,
               listing: Sequence[TrajectoryInfo] | None) -> Plans:
        if not self.binds:
            return self._none
        if (task, variant) not in self._learners:
            kept = self._read_kept(task, variant, listing)
            if kept is not None:
                return kept
        return self._learn(task, variant, listing).plans

    def _learn(self, task: str, variant: str, listing: Sequence[TrajectoryInfo] | None = None,
               between: Callable[[], None] = lambda: None) -> Learner:
        """Bring a tree's learner up to date (one tree learns at a time; others go on)."""
        with self._lock:
            lock = self._learning.setdefault((task, variant), threading.Lock())
        if listing is None:
            listing = self._mine(task, variant)
        with lock:
            learner = follow(
                self._learners.get((task, variant)), self._store, task=task, variant=variant,
                params=lambda t: recorded_params(t.params_json), listing=listing,
                new=lambda: Learner(declared=self.declared, infer=self.infer,
                                    max_shift=self._max_shift, tolerance=self.tolerance,
                                    sources=self._sources), between=between)
            with self._lock:
                self._learners[(task, variant)] = learner
                self._kept.pop((task, variant), None)
        return learner

    def _read_kept(self, task: str, variant: str,
                   listing: Sequence[TrajectoryInfo] | None) -> KeptPlans | None:
        """
        Return a tree's kept plans when they are of the tree as it is, and learn it meanwhile.

        The first read starts learning the tree in a background thread; until it is
        learned, runs read the kept plans, unless the tally moves (then they wait for it).
        """
        if not self.fingerprint or not self._store.keeps_plans:
            return None
        tally = (self._store.tally(task=task, variant=variant) if listing is None
                 else (len(listing), sum(t.id for t in listing)))
        with self._lock:
            held = self._kept.get((task, variant))
            if held is not None and held[0] != tally:
                del self._kept[(task, variant)]  # (the learner stops resting: a run waits)
        if held is not None:
            return held[1] if held[0] == tally else None
        try:
            found = self._store.kept_plans(task=task, variant=variant)
        except StoreError:  # a fleet store away: learn from what is loaded, as before
            return None
        if found is None or found[0] != tally or found[1] != self._printed():
            return None
        kept = KeptPlans(self._store, task=task, variant=variant, count=found[2])
        with self._lock:
            if (task, variant) in self._learners or (task, variant) in self._kept:
                return kept
            self._kept[(task, variant)] = (tally, kept)
            self._backlog.append((task, variant, time.monotonic()))
            if self._worker is None and not self._closed:
                self._worker = threading.Thread(target=self._learn_backlog, daemon=True,
                                                name='learn kept trees')
                self._worker.start()
        _log.info(f'task {task!r}: {found[2]} plan(s) read from the store, kept at its tally '
                  f'{tally[0]}; learning the tree again in the background')
        return kept

    def close(self) -> None:
        """Stop learning in the background (before the store closes): at the next chunk."""
        with self._lock:
            self._closed = True
            self._backlog.clear()

    def _learn_backlog(self) -> None:
        """Learn the trees read from kept plans, one at a time (one background thread)."""
        while True:
            with self._lock:
                if not self._backlog or self._closed:
                    self._worker = None
                    return
                task, variant, read_at = self._backlog.pop(0)
            self._learn_quietly(task, variant, read_at)

    def _learn_quietly(self, task: str, variant: str, read_at: float) -> None:
        """
        Learn a tree in the background, at most half the time: runs meanwhile read the store.

        It starts a second after its kept plans were read (the run that read them is
        then on its way, uncontended); between chunks it rests as long as the chunk took;
        unless a run waits for it (the tree's tally moved: the kept plans no longer serve).
        """
        start = read_at + _FIRST_REST
        while (task, variant) in self._kept and time.monotonic() < start and not self._closed:
            time.sleep(0.02)
        mark = [time.monotonic()]

        def rest() -> None:
            if (task, variant) in self._kept:
                time.sleep(min(time.monotonic() - mark[0], 0.1))
            if self._closed:
                raise _Closed('closed')
            mark[0] = time.monotonic()
        try:
            self._learn(task, variant, between=rest)
        except _Closed:
            return
        except Exception as err:  # the store went away: the next run learns it
            _log.info(f'task {task!r}: not learned in the background: {err!r}')
        else:
            _log.info(f'task {task!r}: learned again in the background in '
                      f'{time.monotonic() - read_at:.1f} s')

    def keep(self) -> int:
        """
        Keep what the learners found with the store, for the trees it changed for.

        A tree whose learner moved while its plans were read is left for the next
        time. Returns how many trees were kept.
        """
        if not self.fingerprint or not self._store.keeps_plans:
            return 0
        with self._lock:
            learners = list(self._learners.items())
        count = 0
        for (task, variant), learner in learners:
            tally = learner.tally
            found = self._store.kept_plans(task=task, variant=variant)
            printed = self._printed()
            if found is not None and found[:2] == (tally, printed):
                continue
            plans = [(i, plan_text(p)) for i in learner.node_ids()
                     if (p := learner.plan(i)) is not None]
            if learner.tally == tally and self._store.keep_plans(
                    task=task, variant=variant, tally=tally, fingerprint=printed,
                    plans=plans):
                count += 1
        return count

    def _printed(self) -> str:
        """Return what kept plans are learned with: the fingerprint, and the bodies seen."""
        seen = self.kin()
        return self.fingerprint if seen is None else f'{self.fingerprint} bodies:{seen.text}'

    def literal_trees(self, task: str, but: str) -> Iterator[tuple[dict[str, Any], list[Step]]]:
        """
        Yield the task's trees with no bound parameter but ``but``: parameters, first recording.

        What :func:`~..bindings.filing.witnessed` searches; read one tree at a time, as asked for.
        """
        for text in self._store.trees(task=task):
            variant = Variant.parse(text)
            if text == but or variant.has_bound or not isinstance(variant.pattern, dict):
                continue
            listing = self._mine(task, text)
            if listing is None:
                listing = tuple(self._store.trajectories(task=task, variant=text))
            if listing:
                yield variant.pattern, [n.step for n in self._store.path(listing[0].id)]

    def variant_for(self, task: str, params: Mapping[str, Any], literal: str) -> str:
        """
        Return the tree a run with ``params`` uses: its own, else one with them bound.

        :param task: The task.
        :param params: The run's parameters.
        :param literal: Their canonical JSON (the tree of runs with exactly these values).
        :return: ``literal`` when such a tree exists or no tree binds the differing
            parameters; else the fitting bound tree with the most trajectories (then
            the one whose trajectories are newer: the larger sum of ids). A tree binds
            the parameters its variant binds and those its declared bindings follow
            (:func:`~..bindings.variants.served`: a tree learned before the params file
            declared them serves their edits too, as run-bt and an import do).
        """
        trees = self._store.trees(task=task)
        if literal in trees:
            return literal
        declared = [d.source for d in self.declared]
        fitting = []
        for text, tally in trees.items():
            variant = Variant.parse(text)
            if declared and variant.with_bound(declared).fits(params):  # read its plans
                variant = served(text, self.plans(task, text).values())
            if variant.has_bound and variant.fits(params):
                fitting.append((tally, text))
        return max(fitting)[1] if fitting else literal
