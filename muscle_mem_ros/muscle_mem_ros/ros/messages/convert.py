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

"""Core records <-> muscle_mem_interfaces messages, and task parameter parsing."""

from __future__ import annotations

from collections.abc import Mapping
import json
import math

from builtin_interfaces.msg import Time
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import StepInfo, Substitution as SubstitutionMsg, TaskInfo
from muscle_mem_interfaces.msg import TrajectoryInfo as TrajectoryInfoMsg
from muscle_mem_ros.bindings.rules import Plan, Substitution
from muscle_mem_ros.bindings.variants import canonical
from muscle_mem_ros.records import Node, TaskStats, TrajectoryInfo
from muscle_mem_ros.resume import Resume

__all__ = [
    'canonical_params',
    'resume_goal',
    'resume_of',
    'step_info',
    'substitution_msg',
    'task_info',
    'time_msg',
    'trajectory_info',
]


def canonical_params(params_json: str) -> str:
    """
    Parse a task's params JSON and return its canonical form (the tree variant).

    Empty means ``{}``. Keys are sorted and separators fixed, so the same
    parameters always select the same tree.

    :raises ValueError: Not valid JSON, or not a JSON object.
    """
    text = params_json.strip() or '{}'
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f'params_json is not valid JSON: {err}') from err
    if not isinstance(value, dict):
        raise ValueError(f'params_json must be a JSON object, got {type(value).__name__}')
    return canonical(value)


def time_msg(seconds: float) -> Time:
    """Wall-clock seconds -> builtin_interfaces/Time (0 for unset or invalid)."""
    if not math.isfinite(seconds) or seconds <= 0:
        return Time()
    sec = int(seconds)
    return Time(sec=sec, nanosec=min(int((seconds - sec) * 1e9), 999_999_999))


def substitution_msg(sub: Substitution) -> SubstitutionMsg:
    """One substituted field as a Substitution message."""
    numeric = isinstance(sub.value, (int, float)) and not isinstance(sub.value, bool)
    return SubstitutionMsg(
        step=sub.step, tool=sub.tool, field=sub.field, source=sub.source, origin=sub.origin,
        recorded=float(sub.recorded) if numeric else 0.0,
        value=float(sub.value) if numeric else 0.0, text='' if numeric else str(sub.value),
    )


def step_info(index: int, node: Node, plan: Plan | None = None) -> StepInfo:
    """One learned step as a StepInfo, with its bindings when it has a plan."""
    step = node.step
    bindings = [b.to_json() for b in plan.bindings] if plan is not None else []
    return StepInfo(
        bindings_json=json.dumps(bindings, separators=(',', ':')),
        index=index,
        tool=step.tool,
        kind=step.kind.value,
        type_name=step.type_name,
        goal_json=step.payload_json,
        pre_sensors=sorted(step.pre.features) if step.pre is not None else [],
        duration=float(step.duration),
    )


def trajectory_info(info: TrajectoryInfo, steps: list[Node] | None = None,
                    plans: Mapping[int, Plan] | None = None) -> TrajectoryInfoMsg:
    """One trajectory as a TrajectoryInfo message, with its steps (and their bindings)."""
    return TrajectoryInfoMsg(
        id=info.id,
        task=info.task,
        params_json=info.params_json,
        steps=[step_info(i, n, (plans or {}).get(n.id)) for i, n in enumerate(steps or [])],
        step_count=len(info.node_ids),
        replay_count=info.replay_count,
        created=time_msg(info.created),
        last_used=time_msg(info.last_used),
        robot_id=info.robot_id,
    )


def task_info(stats: TaskStats) -> TaskInfo:
    """Per-task counters as a TaskInfo message."""
    return TaskInfo(
        name=stats.name,
        trajectory_count=stats.trajectory_count,
        hits=stats.hits,
        misses=stats.misses,
        last_used=time_msg(stats.last_used),
    )


def resume_goal(*, task: str, params_json: str, resume: Resume) -> ExecuteTask.Goal:
    """
    Build the ExecuteTask goal that hands a task to the agent at ``resume``.

    :param task: The task name.
    :param params_json: The task's params, as the caller sent them.
    :param resume: Where the replay stopped (the walk's record).
    :return: A goal with ``resume_from_step``, ``resume_reason`` and ``steps_done``.
    """
    return ExecuteTask.Goal(task=task, params_json=params_json, resume_from_step=resume.step,
                            resume_reason=resume.reason, steps_done=resume.steps_done)


def resume_of(goal: ExecuteTask.Goal) -> Resume | None:
    """
    Read the resume point of an ExecuteTask goal (what an agent node receives).

    The goal carries the number of steps done, not their tools: ``replayed``
    holds that many empty names.

    :param goal: The goal.
    :return: The resume record, or None when the task starts from the beginning.
    """
    step = max(0, int(goal.resume_from_step))
    if step == 0 and not goal.steps_done:
        return None
    return Resume(step, goal.resume_reason, ('',) * max(0, int(goal.steps_done)))
