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
per-tree tallies rather than a listing of the task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
import json
import threading
from typing import Any

from ..bindings.inference import Sources
from ..bindings.learning import follow, Learner, no_plans, Plans
from ..bindings.rules import Declared, DEFAULT_MAX_SHIFT
from ..bindings.variants import Variant
from ..records import Step, TrajectoryInfo
from ..store.base import Store

__all__ = ['Paths', 'recorded_params', 'Trees', 'TreeView']

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
    """

    task: str
    variant: str
    trajectories: tuple[TrajectoryInfo, ...]
    plans: Plans = field(default_factory=no_plans)

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
    """

    def __init__(self, store: Store, *, declared: Sequence[Declared] = (), infer: bool = True,
                 max_shift: float | None = DEFAULT_MAX_SHIFT,
                 tolerance: Callable[[str], float | None] = lambda key: None,
                 sources: Sources | None = None) -> None:
        self._store = store
        self.declared = tuple(declared)
        self.infer = infer
        self._max_shift = max_shift
        self.tolerance = tolerance
        self._sources = sources
        self._learners: dict[tuple[str, str], Learner] = {}
        self._lock = threading.Lock()
        self._none = no_plans()

    @property
    def binds(self) -> bool:
        """Return True when bindings are declared or inferred."""
        return bool(self.declared) or self.infer

    def view(self, task: str, variant: str) -> TreeView:
        """Read one tree for one run: one listing, the plans caught up from it."""
        listing = tuple(self._store.trajectories(task=task, variant=variant))
        return TreeView(task, variant, listing, self._plans(task, variant, listing))

    def plans(self, task: str, variant: str) -> Plans:
        """Return the plans of one tree, up to date (one tally read when nothing changed)."""
        return self._plans(task, variant, None)

    def _plans(self, task: str, variant: str,
               listing: Sequence[TrajectoryInfo] | None) -> Plans:
        if not self.binds:
            return self._none
        with self._lock:
            learner = self._learners[(task, variant)] = follow(
                self._learners.get((task, variant)), self._store, task=task, variant=variant,
                params=lambda t: recorded_params(t.params_json), listing=listing,
                new=lambda: Learner(declared=self.declared, infer=self.infer,
                                    max_shift=self._max_shift, tolerance=self.tolerance,
                                    sources=self._sources))
        return learner.plans

    def literal_trees(self, task: str, but: str) -> Iterator[tuple[dict[str, Any], list[Step]]]:
        """
        Yield the task's trees with no bound parameter but ``but``: parameters, first recording.

        What :func:`~..bindings.filing.witnessed` searches; read one tree at a time, as asked for.
        """
        for text in self._store.trees(task=task):
            variant = Variant.parse(text)
            if text == but or variant.has_bound or not isinstance(variant.pattern, dict):
                continue
            listing = self._store.trajectories(task=task, variant=text)
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
            the one whose trajectories are newer: the larger sum of ids).
        """
        trees = self._store.trees(task=task)
        if literal in trees:
            return literal
        fitting = [(tally, text) for text, tally in trees.items()
                   if (variant := Variant.parse(text)).has_bound and variant.fits(params)]
        return max(fitting)[1] if fitting else literal
