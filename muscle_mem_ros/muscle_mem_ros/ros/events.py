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

"""How a walk is told to people: CacheEvents, ExecuteTask feedback, a trajectory's bindings."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.bindings import Plan, Substitution
from muscle_mem_ros.records import CheckFailure, TrajectoryInfo
from muscle_mem_ros.ros.messages.convert import substitution_msg
from muscle_mem_ros.walk import StepEvent

__all__ = ['describe_bindings', 'EventReporter']

_EVENTS = {
    StepEvent.STEP_OK: CacheEvent.STEP_OK,
    StepEvent.CHECK_FAILED: CacheEvent.CHECK_FAILED,
    StepEvent.STEP_FAILED: CacheEvent.ERROR,
}


class EventReporter:
    """
    Publish a walk's events for one task as CacheEvents, and its progress as feedback.

    :param task: The task the events are about.
    :param sink: ``sink(kind=, task=, step=, trajectory_id=, detail=, failure=)``.
    :param feedback: Called with (step, total, detail) for progress, or None.
    """

    def __init__(self, *, task: str, sink: Callable[..., None],
                 feedback: Callable[..., None] | None = None) -> None:
        self._task = task
        self._sink = sink
        self._feedback = feedback
        self._total = -1
        self._pending: dict[int, tuple[list[Substitution], list[Any]]] = {}
        self.substitutions: list[Substitution] = []
        """Every substitution of the walk, in order (the ExecuteTask result lists them)."""
        self.messages: list[Any] = []
        """The same as ``Substitution`` messages (converted once, sent three times)."""

    def event(
        self, *, kind: StepEvent, step: int, trajectory_id: int = 0, detail: str = '',
        failure: CheckFailure | None = None,
    ) -> None:
        """Publish one CacheEvent; a bound step's STEP_OK carries its substitutions."""
        subs, msgs = self._pending.pop(step, ([], [])) if kind is StepEvent.STEP_OK else ([], [])
        if subs:
            detail += ' (' + ', '.join(s.describe() for s in subs) + ')'
        self._sink(kind=_EVENTS[kind], task=self._task, step=step,
                   trajectory_id=trajectory_id, detail=detail, failure=failure,
                   substituted=msgs)

    def progress(self, *, step: int, total: int, detail: str) -> None:
        """Publish feedback, when there is a channel for it."""
        self._total = total
        if self._feedback is not None:
            self._feedback(step, total, detail)

    def substituted(self, step: int, subs: Sequence[Substitution]) -> None:
        """Note a bound step's substitutions; feedback says them before the goal is sent."""
        msgs = [substitution_msg(s) for s in subs]
        self._pending[step] = (list(subs), msgs)
        self.substitutions.extend(subs)
        self.messages.extend(msgs)
        if self._feedback is not None:
            self._feedback(step, self._total, f'step {step}: ' + ', '.join(
                s.describe() for s in subs), msgs)


def describe_bindings(info: TrajectoryInfo, plans: Mapping[int, Plan]) -> str:
    """Return '; bound: <step>:<field> <- <source> (<origin>), ...' for a trajectory, or ''."""
    bound = [f'{depth}:{b.field} <- {b.source} ({b.origin})'
             for depth, node_id in enumerate(info.node_ids)
             for b in plans.get(node_id, Plan()).bindings]
    return '; bound: ' + ', '.join(bound) if bound else ''
