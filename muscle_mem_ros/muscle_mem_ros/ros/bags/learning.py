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
Split a bag into tasks and file each through the node's own learning.

Tasks, first that applies:

* ``--from``/``--to`` (seconds from the bag's first message): one task, that range;
* the ExecuteTask calls the bag holds for the task (introspection events of the cache's
  ``/<node>/execute_task`` or of the params file's ``agent_action``): one task per call
  that succeeded, from its goal to its result; a call inside another one (the cache
  calling the agent) is the same task, counted once; its ``params_json`` is the task's
  params unless ``--params`` is given;
* else the whole bag, one task.

Each task's steps are the successful calls of the configured tools that started and
ended inside it, in the order they ended (as the node records them). A task whose
snapshots are stale (:mod:`.steps`) is skipped, saying which sensor at which step; a task
with no step is an error. Everything is built before anything is written: a bag that
fails leaves the store as it was.

Filing is the node's (:meth:`..execution.replay.Replayer.file` over
:func:`~muscle_mem_ros.bindings.filing.file_steps`): a recording is started from the root
(:class:`..capture.recorder.Recorder`, on the body of the params file), its steps
appended, and ``finish(save=True, filer=...)`` folds a repeat into its branch or files it
under bound parameters as a live recording would. Nothing is approved: under
``replay_requires`` a learned trajectory waits for shadow runs or an approval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.bindings.filing import file_steps
from muscle_mem_ros.bindings.rules import element_tolerances, sensor_sources
from muscle_mem_ros.body import Body
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.records import Node, Step, StepStatus, ToolKind, TrajectoryInfo
from muscle_mem_ros.replay.treeview import recorded_params, Trees
from muscle_mem_ros.ros.bags.calls import Call, find_calls
from muscle_mem_ros.ros.bags.reader import Bag, BagError
from muscle_mem_ros.ros.bags.steps import build_step, Sensors
from muscle_mem_ros.ros.capture.recorder import Recorder
from muscle_mem_ros.ros.messages.convert import canonical_params
from muscle_mem_ros.ros.node.nodeconfig import NodeConfig, ToolConfig
from muscle_mem_ros.store import Store

__all__ = ['Planned', 'Window', 'file_tasks', 'plan_tasks', 'task_windows']

_NS = 1e-9


@dataclass(frozen=True)
class Window:
    """
    One task in a bag.

    :ivar start: First receive time (ns) of the task.
    :ivar end: Last receive time (ns).
    :ivar params_json: Its canonical parameters.
    :ivar source: Where the range came from, for people.
    """

    start: int
    end: int
    params_json: str
    source: str


@dataclass
class Planned:
    """
    A task of the bag, built: its steps, or why it is skipped.

    :ivar window: The task's range.
    :ivar steps: The steps to file.
    :ivar skipped: Why it is not filed ('' : it is).
    """

    window: Window
    steps: list[Step] = field(default_factory=list)
    skipped: str = ''


def _execute_task_topics(bag: Bag, config: NodeConfig, node_name: str) -> list[str]:
    servers = {f'/{node_name.strip("/")}/execute_task'}
    if config.agent_action:
        servers.add('/' + config.agent_action.strip('/'))
    return sorted(s for s in servers
                  if bag.topic(s + '/_action/send_goal/_service_event') is not None)


def task_windows(bag: Bag, config: NodeConfig, *, task: str, node_name: str,
                 params_json: str | None, since: float | None = None,
                 until: float | None = None) -> list[Window]:
    """
    Return the task's ranges in the bag (module docstring).

    :param since: ``--from``, seconds from the bag's first message.
    :param until: ``--to``.
    :raises BagError: an ExecuteTask topic the bag holds cannot be read, or a bad range.
    :raises ValueError: ``params_json`` is not a JSON object.
    """
    given = canonical_params(params_json) if params_json is not None else None
    if since is not None or until is not None:
        start = bag.start + int((since or 0.0) * 1e9)
        end = bag.end if until is None else bag.start + int(until * 1e9)
        if end < start:
            raise BagError(f'--from {since} is after --to {until}')
        return [Window(start, end, given or '{}', f'{since or 0:g} s to '
                       f'{(end - bag.start) * _NS:g} s of the bag')]
    found: list[Window] = []
    for server in _execute_task_topics(bag, config, node_name):
        tool = _execute_task_tool(server)
        for call in find_calls(bag, tool):
            if call.status is not StepStatus.SUCCEEDED or call.message.task != task:
                continue
            params = given if given is not None else canonical_params(call.message.params_json)
            found.append(Window(call.started, call.ended, params, f'ExecuteTask on {server}'))
    if found:
        found.sort(key=lambda w: (w.start, -w.end))
        outer: list[Window] = []
        for window in found:
            if outer and window.end <= outer[-1].end:
                continue  # the cache's call of the agent, inside its own
            outer.append(window)
        return outer
    if _execute_task_topics(bag, config, node_name):
        raise BagError(f'the bag holds ExecuteTask calls, but none of task {task!r} that '
                       'succeeded (give --from/--to to learn a range anyway)')
    return [Window(bag.start, bag.end, given or '{}', 'the whole bag')]


def _execute_task_tool(server: str) -> ToolConfig:
    return ToolConfig(name='execute_task', kind=ToolKind.ACTION, server=server, proxy='',
                      type_name='muscle_mem_interfaces/action/ExecuteTask',
                      interface=ExecuteTask)


def plan_tasks(bag: Bag, config: NodeConfig, windows: Sequence[Window]) -> list[Planned]:
    """
    Build every task's steps; nothing is written.

    :raises BagError: a task with no step, a type the bag and the params file disagree on,
        a goal whose contents are missing, a message that does not decode.
    """
    calls: list[Call] = []
    for tool in config.tools:
        calls.extend(c for c in find_calls(bag, tool) if c.status is StepStatus.SUCCEEDED)
    calls.sort(key=lambda c: (c.ended, c.started))
    sensors = Sensors(bag, config.sensors)
    planned = []
    for window in windows:
        inside = [c for c in calls if window.start <= c.started and c.ended <= window.end]
        span = (f'{(window.start - bag.start) * _NS:.3f} s to '
                f'{(window.end - bag.start) * _NS:.3f} s ({window.source})')
        if not inside:
            raise BagError(f'{bag.path}: the task from {span} has no step: no call of a '
                           'configured tool succeeded in it')
        item = Planned(window)
        for index, call in enumerate(inside):
            step, stale = build_step(bag, call, sensors, config)
            if stale:
                item.skipped = (f'step {index} ({call.tool.server}) has stale sensors: '
                                f'{"; ".join(stale)}; the node would not have learned a step '
                                'it cannot check, so the task from ' + span + ' is skipped')
                break
            item.steps.append(step)
        planned.append(item)
    return planned


def _filer(store: Store, trees: Trees, check: ToleranceCheck | None,
           agreement: dict[str, float], *, task: str, variant: str, params_json: str,
           parent: int | None, steps: Sequence[Step]) -> tuple[str, int | None, list[Step]]:
    seen: dict[str, frozenset[int] | None] = {}

    def children(tree: str, at: int | None) -> Sequence[Node]:
        if tree not in seen:
            seen[tree] = trees.visible(task, tree)
        listed = store.children(task=task, variant=tree, parent=at)
        visible = seen[tree]
        return listed if visible is None else [c for c in listed if c.id in visible]
    return file_steps(
        variant=variant, parent=parent, steps=steps, params=recorded_params(params_json),
        plans=partial(trees.plans, task), children=children, check=check,
        tolerance=trees.tolerance, declared=trees.declared, infer=trees.infer,
        others=partial(trees.literal_trees, task, variant),
        agreement=lambda tool: agreement.get(tool, 0.0))


def file_tasks(store: Store, config: NodeConfig, body: Body | None, task: str,
               planned: Sequence[Planned]) -> list[TrajectoryInfo | None]:
    """
    File every planned task that is not skipped, as the node files a finished recording.

    :return: Per planned task, the trajectory committed (None: skipped, or it added
        nothing new: a repeat that folded into its branch).
    """
    specs = [s.spec for s in config.sensors]
    trees = Trees(store, declared=config.bindings, infer=config.infer_bindings,
                  max_shift=config.binding_max_shift, tolerance=element_tolerances(specs),
                  sources=sensor_sources(specs), learned_with=repr(tuple(specs)), body=body)
    check = ToleranceCheck(sensors=specs) if specs else None
    agreement = {tool.server: tool.agreement for tool in config.tools}
    recorder = Recorder(store=store, body=body)
    out: list[TrajectoryInfo | None] = []
    try:
        for item in planned:
            if item.skipped:
                out.append(None)
                continue
            session = recorder.start(task=task, params_json=item.window.params_json,
                                     parent=None, manual=True)
            for step in item.steps:
                session.append(step)
            filer = partial(_filer, store, trees, check, agreement)
            _, info = recorder.finish(save=True, filer=filer)
            out.append(info)
    finally:
        trees.close()
    return out
