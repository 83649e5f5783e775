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
The tree merge: where a committed recording's steps go, for every store.

One function decides; each store supplies only its storage calls
(:class:`TreeWriter`). The decision: the steps follow ``parent`` (the last
replayed node, None for the root); each step reuses the child of the current
node with the same dedupe signature (:func:`~.base.step_signature`, the rule
in :mod:`.base`), else a new node is added; every node of the resulting
root-to-leaf path counts one more success and is marked used now; the leaf
becomes terminal; the trajectory ending at the leaf is reused (recording the
same path twice yields the same trajectory) or created.

A recording learned on a body (:mod:`muscle_mem_ros.body`) dedupes only with steps
learned on the same body: its steps' signatures are the dedupe signature and the body's
key, hashed together (:func:`bodied`). Two bodies that recorded byte-identical goals from
identical snapshots therefore keep two branches, each its own trajectory with its own
body; steps of an unknown body ('', stores from before) keep their plain signature. A
recording that continues a branch of another body (one its body may replay: an unknown
or a compatible one) adds its own steps under that branch's last replayed step.
"""

from __future__ import annotations

from collections.abc import Sequence
import hashlib
import time
from typing import Protocol

from .base import step_signature
from ..records import Step, TrajectoryInfo

__all__ = ['bodied', 'merge_steps', 'TreeWriter']


class TreeWriter(Protocol):
    """The storage calls of one store's merge; the caller holds its lock or transaction."""

    def path_to(self, node: int) -> list[int]:
        """Return the node ids from the root down to ``node`` (inclusive)."""

    def child_with(self, parent: int | None, sig: str) -> int | None:
        """Return the id of ``parent``'s child with signature ``sig``, if any."""

    def add_node(self, parent: int | None, depth: int, step: Step, sig: str | None,
                 now: float) -> int:
        """Add a node (success count 0, not terminal) and return its id."""

    def touch_path(self, path: Sequence[int], now: float) -> None:
        """Add one success to every node of ``path`` and set its last use to ``now``."""

    def mark_terminal(self, leaf: int) -> None:
        """Mark ``leaf`` as the end of a trajectory."""

    def trajectory_at(self, leaf: int) -> TrajectoryInfo | None:
        """Return the trajectory ending at ``leaf``, if any."""

    def touch_trajectory(self, info: TrajectoryInfo, now: float) -> TrajectoryInfo:
        """Set the trajectory's last use to ``now``; return it updated."""

    def add_trajectory(self, params_json: str, path: Sequence[int],
                       now: float, body: str) -> TrajectoryInfo:
        """Add the trajectory ``path``, learned on ``body``, and return it."""


def bodied(sig: str | None, body: str) -> str | None:
    """Return a step's dedupe signature on ``body`` (the plain one for an unknown body)."""
    if sig is None or not body:
        return sig
    return hashlib.blake2b(f'{sig}@{body}'.encode(), digest_size=16).hexdigest()


def merge_steps(
    writer: TreeWriter, *, params_json: str, parent: int | None, steps: Sequence[Step],
    body: str = '',
) -> tuple[TrajectoryInfo, list[int]]:
    """
    Merge ``steps`` under ``parent`` (see the module docstring).

    :param writer: The store's storage calls (for one task and variant).
    :param params_json: The params the recording was made with.
    :param parent: The node the steps follow, None for the root (checked by the caller).
    :param steps: The recorded steps, in order.
    :param body: Key of the body they were learned on ('': unknown).
    :return: The trajectory, and the ids of its root-to-leaf path.
    :raises ValueError: No steps at the root.
    """
    if not steps and parent is None:
        raise ValueError('cannot commit an empty trajectory at the root')
    now = time.time()
    path = writer.path_to(parent) if parent is not None else []
    cursor = parent
    for step in steps:
        sig = bodied(step_signature(step), body)
        nid = writer.child_with(cursor, sig) if sig is not None else None
        if nid is None:
            nid = writer.add_node(cursor, len(path), step, sig, now)
        path.append(nid)
        cursor = nid
    writer.touch_path(path, now)
    leaf = path[-1]
    writer.mark_terminal(leaf)
    info = writer.trajectory_at(leaf)
    if info is not None:
        return writer.touch_trajectory(info, now), path
    return writer.add_trajectory(params_json, path, now, body), path
