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
``muscle-mem run-bt``: tick an exported behavior tree against the real robot, no cache.

The node reads the same params file as the behavior cache (its sensors, the real
servers of its actions and services, ``agent_action``), so it is started the same
way: ``muscle-mem run-bt tree.yaml --ros-args --params-file robot.yaml``. It takes
no store and serves nothing: it subscribes to the sensors, calls the servers (not
the cache's proxies) and, when no learned step passes, sends the task to the agent
with the resume point, as the cache would. The tree decides with the cache's own
binding judge (:mod:`muscle_mem_ros.bt.tree`).

It watches as the cache does: an action step recorded with a trace (the document's
``trace``) is judged while its goal runs, with the node's own parts (the sampler of
:mod:`muscle_mem_ros.ros.capture.tracing` at ``watch_rate``, the watch of
:mod:`muscle_mem_ros.ros.execution.watch` under the params file's ``watch`` settings, the
shift of a retargeted step from the binding judge). The moment the world leaves the
recording's tube the goal is canceled at the server and the task handed to the agent
from that step (``resume_from_step`` = the step, the reason ``check during step k
...``), as the cache hands it over.

A subtask step runs the tree it calls in the same document (its ``subtrees``), as a
tree of its own with the call's parameters (:class:`muscle_mem_ros.bt.tree.Subtask`):
against the same servers, with its own bindings, and, when none of its learned steps
passes, the agent asked for the subtask alone (its task and parameters, from its own
steps done); the caller goes on after it. Its lines in the output are prefixed with
its name (``[pick] step 0 ...``).

With no store there is no approval or shadow count to ask: when the params file's
``replay_requires`` is not ``none``, run-bt refuses (one line naming it) unless the
operator states the review with ``--reviewed-by WHO`` ("I reviewed this file; run it
as it is"), which the output repeats. With ``none`` it runs as the file says.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
import copy
import json
import sys
import time
from typing import Any

from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.bindings.judge import BindingJudge, Bound
from muscle_mem_ros.bindings.rules import element_tolerances
from muscle_mem_ros.bt.document import BtDocument
from muscle_mem_ros.bt.subtrees import call_of, documents
from muscle_mem_ros.bt.tree import build_tree, Progress
from muscle_mem_ros.bt.yamlfile import load
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.checks.tube import left_tube
from muscle_mem_ros.cli.filebody import foreign_file
from muscle_mem_ros.cli.pendingcall import PendingCall
from muscle_mem_ros.errors import ConfigError, MuscleMemError
from muscle_mem_ros.records import CheckFailure, Node as Learned, Snapshot, ToolKind
from muscle_mem_ros.replay.gates import unreviewed
from muscle_mem_ros.replay.shadow import SnapshotSenses
from muscle_mem_ros.replay.subtasks import SUBTASK_TYPE
from muscle_mem_ros.resume import Resume
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.capture.stopping import Stopper, stopper_for
from muscle_mem_ros.ros.capture.tracing import Sampler
from muscle_mem_ros.ros.execution.watch import make_watch, StepWatch
from muscle_mem_ros.ros.messages.convert import resume_goal
from muscle_mem_ros.ros.messages.fromdata import message_from_data
from muscle_mem_ros.ros.messages.goalfields import set_fields
from muscle_mem_ros.ros.messages.introspection import resolve_type
from muscle_mem_ros.ros.messages.success import answered, refusal_reason
from muscle_mem_ros.ros.node.config import load_config, NODE_OPTIONS
from muscle_mem_ros.ros.node.nodeconfig import NodeConfig, ToolConfig
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.shutdown import init_without_signal_handlers, Spinner
from muscle_mem_ros.ros.rclfix.sync import CancelToken
from py_trees.common import Status
import py_trees.trees
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.serialization import serialize_message

__all__ = ['BtRuntime', 'main', 'run']

_TICK = 0.02
"""Seconds between ticks."""
_READY_WAIT = 30.0
"""Seconds to wait for the sensors' first messages and the servers."""


class BtRuntime:
    """The robot side of a tree (:class:`muscle_mem_ros.bt.tree.Runtime`) over rclpy."""

    def __init__(self, node: Node, config: NodeConfig, doc: BtDocument) -> None:
        self._node = node
        self._doc = doc
        self._config = config
        self.hub = SensorHub(node=node, sensors=config.sensors, on_error=self._warn)
        specs = self._specs = [s.spec for s in config.sensors]
        self.sampler = Sampler(self.hub, config.watch_rate, on_error=self._warn) \
            if config.watched else None
        self._check = ToleranceCheck(sensors=specs) if specs else None
        self._senses = SnapshotSenses(self._check, element_tolerances(specs), doc.params)
        self._judge = BindingJudge(plans=doc.plans(), params=doc.params, senses=self._senses)
        self._tools: dict[str, ToolConfig] = {t.server: t for t in config.tools}
        self._clients: dict[str, Any] = {}
        self._stoppers: dict[str, Stopper] = {}
        for tool in config.tools:
            if tool.kind is ToolKind.ACTION:
                client = self._clients[tool.server] = ActionClient(
                    node, tool.interface, tool.server)
                self._stoppers[tool.server] = stopper_for(
                    node=node, tool=tool, client=client, hub=self.hub,
                    rule=config.stop_rule, rate=config.watch_rate)
            else:
                self._clients[tool.server] = node.create_client(tool.interface, tool.server)
        self._agent = ActionClient(node, ExecuteTask, config.agent_action) \
            if config.agent_action else None
        self._call: PendingCall | None = None
        self._agent_call: PendingCall | None = None
        self._ended = [0.0]  # when the last call ended (shared with subtasks' runtimes)
        self.log: list[str] = []
        self._where = ''

    def subtask(self, doc: BtDocument) -> BtRuntime:
        """
        Return the runtime of a subtask's tree: the same node, sensors and servers.

        Its own binding judge (the subtask's plans and params), its own calls, and its
        agent asked for the subtask (``doc``'s task and params); its log lines are prefixed
        with the subtask's name.
        """
        sub = copy.copy(self)
        sub._doc = doc
        sub._senses = SnapshotSenses(self._check, element_tolerances(self._specs), doc.params)
        sub._judge = BindingJudge(plans=doc.plans(), params=doc.params, senses=sub._senses)
        sub._call = sub._agent_call = None
        sub._where = f'{self._where}[{doc.task}] '
        steps = sum(1 for _ in doc.walk())
        self._say(f'subtask {doc.task} {json.dumps(doc.params, separators=(",", ":"))}: '
                  + (f'its tree ({steps} learned steps)' if steps else 'not learned'))
        return sub

    def _say(self, text: str) -> None:
        self.log.append(self._where + text)

    def _warn(self, text: str) -> None:
        self._node.get_logger().warning(text)

    def judge(self) -> BindingJudge:
        """Return the binding judge of the run."""
        return self._judge

    def look(self) -> None:
        """Judge the next pre-check against the sensors now."""
        self._senses.look(self.hub.capture())

    def start_call(self, node: Learned, bound: Bound | None) -> None:
        """Send the learned step's goal, bound fields set (the document's goal as edited)."""
        tool = self._tools.get(node.step.tool)
        why = self.settle()  # a goal it stopped is over before the next is sent
        if self._call is not None:
            self._close(self._call)
        pending = self._call = PendingCall(node, self._stoppers.get(node.step.tool),
                                           self._config.watched)
        if why:
            pending.fail(why)
            return
        if tool is None:
            pending.fail(f'{node.step.tool} is not an action or service of the params file')
            return
        kind = tool.interface.Goal if tool.kind is ToolKind.ACTION else tool.interface.Request
        try:
            message = message_from_data(kind, json.loads(node.step.payload_json))
            if bound is not None and bound.values:
                set_fields(message, bound.values)
        except ValueError as err:
            pending.fail(f'{_step(node)}: {err}')
            return
        said = [f'{s.field}={s.value:.4g}' for s in (bound.substitutions if bound else ())
                if isinstance(s.value, float)]
        if bound is not None:  # an edited field: sent as the document says, carried as a shift
            said += [f'{f} edited {d:+.4g}' for f, d in bound.shifts.items()
                     if f not in bound.values and d]
        subs = ', '.join(said)
        self._say(f'{_step(node)}: {tool.server}' + (f' ({subs})' if subs else ''))
        client = self._clients[tool.server]
        if tool.kind is ToolKind.ACTION:
            if not client.wait_for_server(timeout_sec=5.0):
                pending.fail(f'{tool.server} is not available')
                return
            self._send(client, message, tool, pending, node)
        else:
            if not client.wait_for_service(timeout_sec=5.0):
                pending.fail(f'{tool.server} is not available')
                return
            client.call_async(message).add_done_callback(
                lambda f: pending.end(f.result() is not None and not answered(
                    f.result(), tool.success), f'{tool.server} refused'))

    def _send(self, client: Any, message: Any, tool: ToolConfig, pending: PendingCall,
              node: Learned) -> None:
        """Send an action goal, watched when its step runs watched (as the node's proxy)."""
        watch = pending.watch = self._watching(node)
        if watch is not None and self.sampler is not None:
            self._say(f'{_step(node)}: watched on {_elements(watch.labels)}'
                      + (f'; not watched: {_unwatched(watch.unwatched)}'
                         if watch.unwatched else ''))
            watch.begin(time.monotonic())
            self.sampler.add(pending)
        send = client.send_goal_async(message, feedback_callback=pending.feedback
                                      if watch is not None else None)
        send.add_done_callback(lambda f: self._accepted(f, tool, pending))

    def _watching(self, node: Learned) -> StepWatch | None:
        """Return the watch of ``node``, about to be sent (None: it is not watched)."""
        if self.sampler is None:
            return None
        return make_watch(node, sensors=self._specs, watch=self._config.watched,
                          during=self._judge.during(node),
                          scale=self._config.watch_tolerance_scale, cancel=CancelToken(),
                          period=1.0 / self._config.watch_rate, own=self._config.stop_rule.own)

    def _accepted(self, future: Any, tool: ToolConfig, pending: PendingCall) -> None:
        if pending.watch is not None:
            pending.watch.accepted(time.monotonic())
        handle = future.result()
        if handle is None or not handle.accepted:
            pending.fail(f'{tool.server} rejected the goal')
            return
        result = handle.get_result_async()
        pending.accepted(handle, result)
        result.add_done_callback(
            lambda f: pending.end(f.result() is not None and f.result().status == 4 and
                                  not refusal_reason(f.result().result, tool.success),
                                  f'{tool.server} did not succeed'))

    def call_status(self) -> Status:
        """
        Return the last call's status (its end time is the post-check's 'since').

        A call whose watch tripped before it ended stays RUNNING: its Watch leaf fails the
        step (the node's rule: a tripped watch makes the step a check during it, whatever
        the server answered after the cancel).
        """
        call = self._call
        if call is None:
            return Status.FAILURE
        if call.status is Status.RUNNING:
            return Status.RUNNING
        if self._close(call) is not None:
            return Status.RUNNING
        self._ended[0] = self.hub.now()
        return call.status

    def cancel_call(self) -> None:
        """Cancel the goal in flight (its leaf was interrupted) and stop watching it."""
        call = self._call
        if call is None:
            return
        failure = self._close(call)
        if failure is None and call.status is not Status.RUNNING:
            return
        call.cancel()  # the watch canceled it already when it tripped: once is enough
        where = _step(call.node) if call.node is not None else 'the call'
        self._say(f'{where}: goal canceled' + (
            f', the world left its recording: {left_tube(failure)}' if failure else ''))

    def watch_failure(self) -> CheckFailure | None:
        """Return what left the running call's tube (None: it stays in, or is not watched)."""
        return self._call.tripped() if self._call is not None else None

    def _close(self, call: PendingCall) -> CheckFailure | None:
        """Stop watching ``call``; return its watch's verdict, now fixed."""
        verdict = call.close()
        if self.sampler is not None and call.watch is not None:
            self.sampler.remove(call)
        return verdict

    def post_status(self, node: Learned, expected: Snapshot | None) -> Status:
        """Wait (ticking) for data newer than the step's end, then compare with ``expected``."""
        if self._check is None or expected is None or not expected.features:
            return Status.SUCCESS
        if not self.hub.wait_newer(self._ended[0], 0.0):
            if self.hub.now() - self._ended[0] < self._config.post_check_timeout:
                return Status.RUNNING
        result = self._check.evaluate(expected, self.hub.capture(), now_time=self.hub.now())
        if not result.passed:
            self._say(f'post-check of {_step(node)} failed: '
                      f'{result.failures[0].reason if result.failures else ""}')
        return Status.SUCCESS if result.passed else Status.FAILURE

    def start_agent(self, resume: Resume) -> None:
        """
        Send the task to the agent from ``resume.step`` (``steps_done`` = the steps done).

        Only once the goal run-bt stopped is over: a robot that did not stop is handed to
        nobody (the run fails, saying so).
        """
        pending = self._agent_call = PendingCall()
        why = self.settle()
        if why:
            pending.fail(why)
            return
        self._say(f'agent asked from step {resume.step}: {resume.reason}')
        if self._agent is None:
            pending.fail('no agent configured (agent_action is empty)')
            return
        if not self._agent.wait_for_server(timeout_sec=5.0):
            pending.fail(f'agent {self._config.agent_action} is not available')
            return
        goal = resume_goal(task=self._doc.task, params_json=json.dumps(self._doc.params),
                           resume=resume)
        self._agent.send_goal_async(goal).add_done_callback(
            lambda f: self._agent_accepted(f, pending))

    def settle(self) -> str:
        """Wait until the goal last stopped is over; return (and say) why it did not stop."""
        call = self._call
        said, why = call.settle() if call is not None else ('', '')
        if said:
            self._say(f'{_step(call.node) if call and call.node else "call"}: stopped: {said}'
                      + (f'; {why}' if why else ''))
        return why

    def _agent_accepted(self, future: Any, pending: PendingCall) -> None:
        handle = future.result()
        if handle is None or not handle.accepted:
            pending.fail('the agent rejected the task')
            return
        handle.get_result_async().add_done_callback(
            lambda f: pending.end(f.result() is not None and f.result().result.success,
                                  'the agent failed'))

    def agent_status(self) -> Status:
        """Return the agent's status."""
        return self._agent_call.status if self._agent_call is not None else Status.FAILURE


def _step(node: Learned, tool: str = '') -> str:
    """Name a step as the run counts it (its ExecuteTask index), its learned id labelled."""
    return f'step {node.depth} (learned step {node.id}{", " + tool if tool else ""})'


def _elements(labels: Sequence[str]) -> str:
    """Say which elements, briefly: 'joints[0..2], object[0, 2], scan, 3 feedback leaves'."""
    sensors: dict[str, list[int]] = {}
    whole: list[str] = []
    feedback = 0
    for label in labels:
        name, _, index = label.partition('[')
        if label.startswith('feedback:'):
            feedback += 1
        elif not index.rstrip(']').isdigit():
            whole.append(label)
        else:
            sensors.setdefault(name, []).append(int(index.rstrip(']')))
    out = [f'{name}[{i[0]}..{i[-1]}]' if len(i) > 2 and i == list(range(i[0], i[-1] + 1))
           else f'{name}[{", ".join(map(str, i))}]' for name, i in sensors.items()] + whole
    if feedback:
        out.append(f'{feedback} feedback leaves' if feedback > 1 else '1 feedback leaf')
    return ', '.join(out)


def _unwatched(entries: Sequence[str]) -> str:
    """Say what is not watched and why: 'scan: 360 elements, over 16; odom[0..2]: ...'."""
    reasons: dict[str, list[str]] = {}
    for entry in entries:
        label, _, why = entry.partition(': ')
        reasons.setdefault(why, []).append(label)
    return '; '.join(f'{_elements(labels)}: {why}' if why else _elements(labels)
                     for why, labels in reasons.items())


def check_goals(doc: BtDocument, config: NodeConfig) -> None:
    """
    Build every goal of ``doc`` as a message of its tool's type, before anything is sent.

    :raises ConfigError: a step whose tool is not in the params file, whose type differs
        from the params file's, or whose goal does not build (the first, named by its step).
    """
    tools = {t.server: t for t in config.tools}
    for name, tree in documents(doc):
        _check_tree(tree, tools, f'subtree {name}: ' if name else '')


def _check_tree(doc: BtDocument, tools: dict[str, ToolConfig], prefix: str) -> None:
    nodes = doc.nodes()
    for _, step, _ in doc.walk():
        where = prefix + _step(nodes[step.id], step.tool)
        if step.kind is ToolKind.SUBTASK:  # run by its tree in the document: no server
            if step.type_name != SUBTASK_TYPE:
                raise ConfigError(f'{where}: a subtask step is a {SUBTASK_TYPE}, '
                                  f'not {step.type_name}')
            call_of(step)
            continue
        tool = tools.get(step.tool)
        if tool is None:
            raise ConfigError(f'{where}: not an action or service of the params file '
                              f'({", ".join(sorted(tools)) or "none"})')
        try:
            same = tool.kind is step.kind and resolve_type(
                step.type_name, kind='action' if step.kind is ToolKind.ACTION else 'srv'
            ) is tool.interface
        except MuscleMemError:
            same = False
        if not same:
            raise ConfigError(f'{where}: the document says {step.kind.value} '
                              f'{step.type_name}, the params file {tool.kind.value} '
                              f'{tool.type_name}')
        kind = tool.interface.Goal if tool.kind is ToolKind.ACTION else tool.interface.Request
        try:
            serialize_message(message_from_data(kind, step.goal))
        except (MuscleMemError, ValueError, TypeError, AssertionError) as err:
            raise ConfigError(f'{where}: its goal is not a {step.type_name}: {err}') from err


def run(node: Node, doc: BtDocument, *, timeout: float = 600.0,
        reviewed_by: str = '') -> tuple[bool, Progress, str]:
    """
    Tick ``doc`` on ``node`` (spun elsewhere) until it ends; return (success, progress, log).

    Every goal of the document is built first (:func:`check_goals`): a document that does
    not build is refused before the robot moves. So is any document under a required gate
    (``replay_requires`` not ``none`` in the params file) unless ``reviewed_by`` names who
    reviewed it (:func:`~muscle_mem_ros.replay.gates.unreviewed`): run-bt has no store to ask;
    and a document learned on another body than this robot's
    (:func:`~muscle_mem_ros.cli.filebody.foreign_file`).

    :raises ConfigError: the node's parameters are not a valid cache configuration
        (``bad configuration: ...``), the gate refuses (``refused: ...``), or a goal of
        ``doc`` does not build.
    """
    try:
        config = load_config(node)
    except ConfigError as err:
        raise ConfigError(f'bad configuration: {err}') from err
    refused = unreviewed(config.replay_requires, reviewed_by) or foreign_file(node, config, doc)
    if refused:
        raise ConfigError(f'refused: {refused}')
    check_goals(doc, config)
    runtime = BtRuntime(node, config, doc)
    if config.replay_requires.required:
        runtime.log.append(f'reviewed by {reviewed_by.strip()}: the file runs as it is '
                           f'(replay_requires: {config.replay_requires})')
    try:
        silent = runtime.hub.wait_first(_READY_WAIT)
        if silent:
            return False, Progress(), f'sensors never sent data: {", ".join(silent)}'
        progress = Progress()
        tree = py_trees.trees.BehaviourTree(build_tree(doc, runtime, progress))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            tree.tick()
            if tree.root.status is not Status.RUNNING:
                break
            time.sleep(_TICK)
        else:
            tree.interrupt()
            runtime.log.append(f'timed out after {timeout:g} s')
        not_stopped = runtime.settle()
        return (tree.root.status is Status.SUCCESS and not not_stopped, progress,
                '\n'.join(runtime.log))
    finally:
        if runtime.sampler is not None:
            runtime.sampler.close()
        runtime.hub.close()


def parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``muscle-mem run-bt`` (its ROS arguments follow it)."""
    cmd = argparse.ArgumentParser(
        prog='muscle-mem run-bt', usage='%(prog)s [-h] [--reviewed-by WHO] FILE [--ros-args ...]',
        description='Tick an exported behavior tree (muscle-mem export --bt py_trees) against '
                    "the robot's own servers, with no cache and no store. The node reads the "
                    "cache's params file (sensors, actions, services, agent_action); when no "
                    'learned step passes it sends the task to the agent from the steps done. '
                    'Every goal of the file is built first: a file that does not build is '
                    'refused before the robot moves.',
        epilog='example: muscle-mem run-bt pick_and_place.bt.yaml --ros-args --params-file '
               'robot.yaml. Steps are numbered as ExecuteTask counts them (0-based, the '
               "agent's resume_from_step); a document's ids are labelled 'learned step N'. "
               'Exit status: 0 the task is done (by the tree, or by the agent it asked); 1 it '
               'failed, or a bad file or configuration (one line on stderr); 2 a usage error.')
    cmd.add_argument('file', metavar='FILE',
                     help='the behavior tree document (muscle-mem export --bt py_trees)')
    cmd.add_argument('--reviewed-by', metavar='WHO', default='',
                     help='"I reviewed this file; run it is": required when the params '
                          "file's replay_requires is not none (run-bt has no store to ask "
                          'for approvals or shadow runs); printed in the output')
    return cmd


def main(args: Sequence[str] | None = None) -> int:
    """
    Run ``muscle-mem run-bt FILE [--ros-args ...]``; return the exit code.

    0: the task is done (by the tree, or by the agent it asked); 1: it failed, or a bad
    file or configuration (one line on stderr); 2: a usage error.
    """
    argv = list(sys.argv[1:] if args is None else args)
    ros = argv[argv.index('--ros-args'):] if '--ros-args' in argv else []
    try:
        options = parser().parse_args(argv[:len(argv) - len(ros)])
        path = options.file
    except SystemExit as stop:  # --help (0) or a usage error (2), already printed
        return stop.code if isinstance(stop.code, int) else 2
    try:
        with open(path, encoding='utf-8') as file:
            doc = load(file.read(), source=path)
    except (OSError, UnicodeDecodeError, ConfigError) as err:
        print(f'muscle-mem run-bt: error: {err}', file=sys.stderr)
        return 1
    init_without_signal_handlers(['muscle-mem', *ros])
    node = Node('muscle_mem', **NODE_OPTIONS)
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    spinner = Spinner(executor)
    try:
        ok, progress, log = run(node, doc, reviewed_by=options.reviewed_by)
    except ConfigError as err:
        print(f'muscle-mem run-bt: error: {err}', file=sys.stderr)
        return 1
    finally:
        spinner.stop()
        for waitable in list(node.waitables):  # before the node: see Spinner
            waitable.destroy()  # type: ignore[attr-defined]
        node.destroy_node()
        rclpy.try_shutdown()
    print(log)
    if ok:
        by = f', then the agent from step {progress.done}' if progress.agent_asked else ''
        subs = progress.subtasks_by_agent
        by += f' (the agent did subtask {", ".join(subs)})' if subs else ''
        print(f'done: {progress.done} steps by the tree{by}')
    else:
        print(f'failed after {progress.done} steps by the tree'
              f'{" and the agent" if progress.agent_asked else ""}: {progress.reason}')
    return 0 if ok else 1
