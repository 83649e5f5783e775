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
Plans kept with the store, so a restart does not wait for learning.

Learning a tree's bindings reads every trajectory of it (:mod:`.learning`): a
minute and a half for 100 000 on SQLite. What learning found is kept in the
store beside the tree (:meth:`~..store.base.Store.keep_plans`): each learned
step's plan as JSON, with the tree's tally when it was learned and a
fingerprint of what it was learned with (declared bindings, inference, the
sensors' tolerances and sources, this format). After a restart, a tree whose
tally and fingerprint still match is read from there, one plan per step a
walk asks for (:class:`KeptPlans`), while the tree is learned again in the
background; a tally that moved (a trajectory committed or forgotten since, by
this robot or another) or other settings mean nothing kept is used.

The same learning, so the same plans: a kept plan is what the learner said for
that step at that tally, and the learner says the same again for the same
trajectories and settings.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
import hashlib
import json
import threading
from typing import Any

from .learning import Plans
from .rules import bindable_leaves, Binding, Declared, Plan, sensor_elements
from ..errors import UnknownTrajectoryError
from ..store.base import Store

__all__ = ['fingerprint', 'KeptPlans', 'plan_from_text', 'plan_text']

FORMAT = 3
"""Version of :func:`plan_text` and of what a plan holds (2: ``follows`` also pairs what
moved with a field, :mod:`.learning`; 3: orientation bindings keep their turn); part of the
fingerprint, so an older one is relearned."""


def plan_text(plan: Plan) -> str:
    """Return a plan as compact JSON (:func:`plan_from_text` reads it back)."""
    return json.dumps([[[b.field, b.source, b.offset, b.max_shift, b.origin]
                        + ([list(b.turn)] if b.turn is not None else [])
                        for b in plan.bindings],
                       [list(f) for f in plan.follows], [list(a) for a in plan.ahead]],
                      separators=(',', ':'))


def plan_from_text(text: str) -> Plan:
    """Return the plan :func:`plan_text` wrote (its floats exactly: JSON keeps a float's repr)."""
    bindings, follows, ahead = json.loads(text)
    return Plan(tuple(Binding(str(f), str(s), float(o), None if m is None else float(m), str(w),
                              turn=_turn(rest))
                      for f, s, o, m, w, *rest in bindings),
                tuple((str(e), str(f)) for e, f in follows),
                tuple((str(s), None if m is None else float(m)) for s, m in ahead))


def _turn(rest: list[Any]) -> tuple[float, float, float, float] | None:
    """Return an orientation binding's kept turn (a sixth item), None for the others."""
    if not rest:
        return None
    x, y, z, w = (float(v) for v in rest[0])
    return (x, y, z, w)


def fingerprint(*, declared: Sequence[Declared], infer: bool, max_shift: float | None,
                learned_with: str) -> str:
    """
    Return what plans were learned with, as a short digest.

    :param declared: Bindings from the params file.
    :param infer: Inference on or off.
    :param max_shift: ``max_shift`` of inferred bindings.
    :param learned_with: What the tolerance and source rules came from (the sensors'
        settings, as their owner writes them).
    """
    text = repr((FORMAT, tuple(declared), infer, max_shift, learned_with))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class KeptPlans(Plans):
    """
    A tree's kept plans as :class:`~.learning.Plans`: read from the store one step at a time.

    :param store: The store they are kept in.
    :param task: The tree's task.
    :param variant: The tree's variant.
    :param count: How many steps have a kept plan (``bool`` and ``len`` answer from it).
    """

    def __init__(self, store: Store, *, task: str, variant: str, count: int) -> None:
        self._store = store
        self._task = task
        self._variant = variant
        self._count = count
        self._plans: dict[int, Plan | None] = {}
        self._leaves: dict[int, tuple[Mapping[str, Any], Mapping[str, float]] | None] = {}
        self._lock = threading.Lock()

    def get(self, node_id: int, default: Any = None) -> Any:
        """Return the plan of ``node_id`` (read once), else ``default``."""
        with self._lock:
            if node_id not in self._plans:
                # (a fleet store away raises: a step whose plan cannot be read is not sent)
                text = self._store.kept_plan(task=self._task, variant=self._variant,
                                             node_id=node_id)
                self._plans[node_id] = None if text is None else plan_from_text(text)
            plan = self._plans[node_id]
        return default if plan is None else plan

    def __getitem__(self, node_id: int) -> Plan:
        plan: Plan | None = self.get(node_id)
        if plan is None:
            raise KeyError(node_id)
        return plan

    def __contains__(self, node_id: object) -> bool:
        return isinstance(node_id, int) and self.get(node_id) is not None

    def __iter__(self) -> Iterator[int]:
        return iter(self._store.kept_plan_ids(task=self._task, variant=self._variant))

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def leaves(self, node_id: int) -> tuple[Mapping[str, Any], Mapping[str, float]] | None:
        """Return a step's goal leaves and pre sources, as learning reads them (read once)."""
        with self._lock:
            if node_id not in self._leaves:
                try:
                    step = self._store.node(node_id).step
                except UnknownTrajectoryError:
                    self._leaves[node_id] = None
                else:
                    self._leaves[node_id] = (bindable_leaves(step), sensor_elements(step.pre))
            return self._leaves[node_id]
