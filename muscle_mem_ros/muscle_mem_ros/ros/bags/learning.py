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
ended inside it, in the order they ended (as the node records them). Inside is judged by
each call's own stamps against the task's (the introspection events' ``info.stamp``: when
each request and response was published) where both have them on one clock (their offsets
from their receive times agree within a second), else by receive times:
receive order across topics is not publish order, and a step whose events were received
just after the task's result (they went through another queue) is still the task's last.
A tool the params file names whose topics are all absent from the bag was not recorded:
the bag is refused, naming the topics, rather than a task learned without its steps. The
bag is read in one pass (:class:`BagStream`): the calls' events, the tasks' and the
description are kept; sensors stream through the steps being built. A task whose
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
from muscle_mem_ros.bindings.rules import element_tolerances, sensor_sources
from muscle_mem_ros.body import Body
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.records import Step, StepStatus, ToolKind, TrajectoryInfo
from muscle_mem_ros.replay.treeview import Trees
from muscle_mem_ros.ros.bags.calls import (
    Call, chosen, event_topics, find_calls, Finder, finders, tool_topics)
from muscle_mem_ros.ros.bags.ownstops import without_own_stops
from muscle_mem_ros.ros.bags.reader import Bag, BagError, Topic
from muscle_mem_ros.ros.bags.steps import Built, Steps
from muscle_mem_ros.ros.capture.recorder import Recorder
from muscle_mem_ros.ros.messages.convert import canonical_params
from muscle_mem_ros.ros.node.nodeconfig import NodeConfig, ToolConfig
from muscle_mem_ros.store import Store

__all__ = ['BagStream', 'Planned', 'Window', 'file_tasks', 'plan_tasks', 'task_windows']

_NS = 1e-9
_SAME_CLOCK = 10**9
"""Stamps whose offsets from their receive times differ by more: other clocks (ns)."""


@dataclass(frozen=True)
class Window:
    """
    One task in a bag.

    :ivar start: First receive time (ns) of the task.
    :ivar end: Last receive time (ns).
    :ivar params_json: Its canonical parameters.
    :ivar source: Where the range came from, for people.
    :ivar stamps: The task's own stamps (ns) of its goal and its result (None: a range).
    """

    start: int
    end: int
    params_json: str
    source: str
    stamps: tuple[int, int] | None = None


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


def _task_servers(config: NodeConfig, node_name: str) -> list[str]:
    servers = {f'/{node_name.strip("/")}/execute_task'}
    if config.agent_action:
        servers.add('/' + config.agent_action.strip('/'))
    return sorted(servers)


def _execute_task_topics(bag: Bag, config: NodeConfig, node_name: str) -> list[str]:
    return [s for s in _task_servers(config, node_name)
            if bag.topic(s + '/_action/send_goal/_service_event') is not None]


class BagStream:
    """
    What learn does with each message as the bag is read once (:func:`.reader.read_bag`).

    :param config: The node's configuration.
    :param node_name: The node's name (its ``execute_task``).
    :param kept: Further topics to keep whole (the export's).
    """

    def __init__(self, config: NodeConfig, node_name: str, kept: Sequence[str] = ()) -> None:
        self.steps = Steps(config)
        self.finders = {tool.server: finders(tool, self.steps) for tool in config.tools}
        self._fed: dict[str, list[Finder]] = {}
        for found in self.finders.values():
            for finder in found:
                for name in finder.topics:
                    self._fed.setdefault(name, []).append(finder)
        self._kept = set(kept)
        for server in _task_servers(config, node_name):
            self._kept.update(event_topics(_execute_task_tool(server)))

    def keep(self, topic: Topic) -> bool:
        """Return True for a topic read at the end (the tasks' calls, the export's)."""
        return topic.name in self._kept

    def message(self, topic: Topic, when: int, published: int, data: bytes) -> None:
        """Take one message of the bag, in its order."""
        self.steps.advance(when)
        if topic.name in self.steps.sensors.by_topic:
            self.steps.sensor(topic, when, data)
        for finder in self._fed.get(topic.name, ()):
            finder.feed(topic, when, data)

    def built(self, bag: Bag, tool: ToolConfig) -> list[Built]:
        """
        Return the steps of a tool's calls that succeeded, in the form the bag holds.

        :raises BagError: the form's refusals (:mod:`.calls`).
        """
        best = chosen(self.finders[tool.server], bag)
        if best is None:
            return []
        best.calls(bag)
        return self.steps.built.get(id(best), [])


def _unrecorded(bag: Bag, config: NodeConfig) -> str:
    missing = [tool for tool in config.tools
               if not any(bag.topic(name) is not None for name in tool_topics(tool))]
    if not missing:
        return ''
    return (', '.join(f'{tool.name} ({tool.server})' for tool in missing) +
            ' (none of ' + ', '.join(name for tool in missing for name in tool_topics(tool)) +
            ' is in the bag)')


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
            found.append(Window(call.started, call.ended, params, f'ExecuteTask on {server}',
                                call.stamps))
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


def _inside(window: Window, call: Call) -> bool:
    if _one_clock(window, call):
        assert window.stamps is not None and call.stamps is not None
        return window.stamps[0] <= call.stamps[0] and call.stamps[1] <= window.stamps[1]
    return window.start <= call.started and call.ended <= window.end


def _one_clock(window: Window, call: Call) -> bool:
    """Return True when the task's and the call's stamps can be compared (one clock)."""
    if window.stamps is None or call.stamps is None:
        return False
    offset = (window.stamps[0] - window.start) - (call.stamps[0] - call.started)
    return abs(offset) < _SAME_CLOCK


def _order(built: list[Built]) -> list[Built]:
    if all(b.call.stamps is not None for b in built):
        return sorted(built, key=lambda b: (b.call.stamps or (0, 0))[::-1])
    return sorted(built, key=lambda b: (b.call.ended, b.call.started))


def plan_tasks(bag: Bag, config: NodeConfig, windows: Sequence[Window],
               stream: BagStream) -> list[Planned]:
    """
    Build every task's steps from what the stream built; nothing is written.

    :raises BagError: a tool of the params file not recorded, a task with no step, a type
        the bag and the params file disagree on, a goal whose contents are missing.
    """
    built: list[Built] = []
    for tool in config.tools:
        built.extend(stream.built(bag, tool))
    built = without_own_stops(built, config, stream, bag)  # the cache's stops are no steps
    unrecorded = _unrecorded(bag, config)
    planned = []
    for window in windows:
        inside = _order([b for b in built if _inside(window, b.call)])
        span = (f'{(window.start - bag.start) * _NS:.3f} s to '
                f'{(window.end - bag.start) * _NS:.3f} s ({window.source})')
        if not inside:
            raise BagError(f'{bag.path}: the task from {span} has no step: no call of a '
                           'configured tool succeeded in it' +
                           (f'; the bag lacks every topic of {unrecorded}' if unrecorded
                            else ''))
        item = Planned(window)
        for index, found in enumerate(inside):
            if found.stale:
                item.skipped = (f'step {index} ({found.call.tool.server}) has stale sensors: '
                                f'{"; ".join(found.stale)}; the node would not have learned a '
                                'step it cannot check, so the task from ' + span +
                                ' is skipped')
                break
            item.steps.append(found.step)
        planned.append(item)
    if unrecorded:
        raise BagError(f'{bag.path}: the params file names tools the bag did not record: '
                       f'{unrecorded}: a task learned from it would lack their steps. Record '
                       'them (docs/learning-from-bags.md), or leave them out of the params '
                       'file')
    return planned


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
            filer = partial(trees.file, check=check,  # as the node files: one place
                            agreement=lambda tool: agreement.get(tool, 0.0))
            _, info = recorder.finish(save=True, filer=filer)
            out.append(info)
    finally:
        trees.close()
    return out
