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
Subtasks: a task that calls another task through the cache, as one step of its own.

A planning agent decomposes ("restock the shelf" is ``pick`` then ``place``); the cache
learns each skill in its own tree, and the parent's trajectory records each call as one
step (:func:`subtask_step`): its tool is the subtask's name, its goal the subtask's name
and parameters (``{"params": {...}, "task": "pick"}``), with the pre and post snapshots of
any step. Its parameters are goal leaves (``params.x``), so they bind like an action's
fields: to the parent's parameters or to a sensor. Replaying the step runs the subtask
through the cache again (:func:`subtask_call` gives what to run, bound fields set).

Subtasks nest up to :data:`MAX_DEPTH` below the task that was sent; a task that would
call itself, directly or through others, is refused (:func:`refusal`): its recording
would contain itself, and its replay would never end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
import json
import re
from typing import Any

from muscle_mem_ros.errors import MuscleMemError
from muscle_mem_ros.records import Snapshot, Step, StepStatus, ToolKind

__all__ = ['MAX_DEPTH', 'refusal', 'SUBTASK_TYPE', 'subtask_call', 'subtask_step', 'SubtaskCall']

SUBTASK_TYPE = 'muscle_mem_interfaces/action/ExecuteTask'
"""The type name of a subtask step: the call is an ExecuteTask goal to the cache."""

MAX_DEPTH = 4
"""How deep subtasks nest: a task sent to the cache runs at depth 0, a subtask it calls at
1, ... a subtask at depth 4 may call none. Each level holds a thread while the level below
runs, and an agent's plan that deep is more likely a loop than a decomposition."""

_INDEX = re.compile(r'^(.*?)((?:\[\d+\])*)$')


@dataclass(frozen=True)
class SubtaskCall:
    """
    What a subtask step runs.

    :ivar task: The subtask's name.
    :ivar params: Its parameters (bound fields set).
    """

    task: str
    params: dict[str, Any]

    @property
    def params_json(self) -> str:
        """Return the parameters as canonical JSON (the subtask's literal tree)."""
        return json.dumps(self.params, sort_keys=True, separators=(',', ':'))


def subtask_step(task: str, params: Mapping[str, Any], *, pre: Snapshot | None,
                 post: Snapshot | None, duration: float) -> Step:
    """
    Return the step a parent records for a subtask call that succeeded.

    :param task: The subtask's name.
    :param params: Its parameters, as the caller sent them.
    :param pre: Snapshot when the call arrived (None: unchecked).
    :param post: Snapshot after it succeeded (None: unchecked).
    :param duration: Seconds it took.
    """
    text = json.dumps({'params': dict(params), 'task': task}, sort_keys=True,
                      separators=(',', ':'))
    return Step(tool=task, kind=ToolKind.SUBTASK, type_name=SUBTASK_TYPE,
                payload=text.encode(), payload_json=text, pre=pre, post=post,
                status=StepStatus.SUCCEEDED, duration=duration)


def subtask_call(step: Step, fields: Mapping[str, Any] | None = None) -> SubtaskCall:
    """
    Return what a subtask step runs: its task and parameters, ``fields`` set.

    :param step: A step of kind ``SUBTASK``.
    :param fields: Bound goal leaves to set (``params.x`` -> value), as a binding computes them.
    :raises MuscleMemError: The step is not a subtask call, or a field is not in its goal.
    """
    try:
        data = json.loads(step.payload.decode())
        task, params = data['task'], data['params']
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        raise MuscleMemError(f'not a subtask call: {step.payload[:80]!r} ({err})') from err
    if not isinstance(task, str) or not isinstance(params, dict):
        raise MuscleMemError(f'not a subtask call: {step.payload[:80]!r}')
    for path, value in (fields or {}).items():
        _set(data, path, value)
    return SubtaskCall(task=data['task'], params=data['params'])


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    """Set the leaf ``path`` (``params.place[0]``, as :func:`..bindings.rules.leaves` names it)."""
    parts: list[str | int] = []
    for piece in path.split('.'):
        match = _INDEX.match(piece)
        assert match is not None  # the pattern matches every string
        parts.append(match.group(1))
        parts.extend(int(i) for i in re.findall(r'\[(\d+)\]', match.group(2)))
    where: Any = data
    try:
        for part in parts[:-1]:
            where = where[part]
        last = parts[-1]
        where[last]  # noqa: B018 (a leaf that is not there is not added)
        where[last] = value
    except (KeyError, IndexError, TypeError) as err:
        raise MuscleMemError(f'subtask call: no field {path!r} to bind') from err


def refusal(running: Sequence[str], task: str) -> str:
    """
    Return why ``task`` may not run as a subtask of ``running`` ('' when it may).

    :param running: The tasks running, outermost first (the one sent to the cache first).
    :param task: The subtask asked for.
    """
    chain = ' > '.join([*running, task])
    if task in running:
        return (f"task '{task}' is already running ({chain}): a task may not call itself, "
                'directly or through its subtasks')
    if len(running) > MAX_DEPTH:
        return f'subtasks nest at most {MAX_DEPTH} deep ({chain})'
    return ''
