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
``muscle-mem run TASK``: send a task to a running cache and say what it did.

The cache's ``~/execute_task`` is an ordinary ``ExecuteTask`` action, so ``ros2 action
send_goal`` reaches it too; this command exists because a newcomer's first question after
starting the cache is "did it replay?", and the answer is in the result's fields
(``cache_hit``, steps replayed and by the agent) and in the feedback's modes, which
``send_goal`` prints as raw messages. It also waits for a freshly started cache: for its
action server to be matched both ways, and for it to have discovered its agent, so the
first task sent right after ``behavior_cache ... &`` is not lost to discovery.

Exit status: 0 when the task succeeded, 1 when it failed or was refused (the cache's
message on stderr), 130 on Ctrl-C (the task is canceled first).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

from .output import Output
from ..errors import MuscleMemError

__all__ = ['add_parser', 'feedback_line', 'run']

_MODES = {0: 'replay', 1: 'agent', 2: 'shadow'}


def add_parser(cmd: argparse.ArgumentParser) -> None:
    """Add the run arguments to its subparser."""
    cmd.add_argument('task', metavar='TASK', help='task name')
    cmd.add_argument('--params', default='', metavar='JSON',
                     help="the task's parameters as a JSON object (default: none)")
    cmd.add_argument('--node-name', default='muscle_mem',
                     help="the cache node's name (default muscle_mem): its ~/execute_task")
    cmd.add_argument('--wait', type=float, default=30.0, metavar='S',
                     help='seconds to wait for the cache and its agent (default 30)')
    cmd.add_argument('--timeout', type=float, default=0.0, metavar='S',
                     help='seconds the task may take before it is canceled (default 0: none)')
    cmd.set_defaults(run=run)


def _check(args: argparse.Namespace) -> str:
    if args.params.strip():
        try:
            params = json.loads(args.params)
        except json.JSONDecodeError as err:
            raise ValueError(f'--params is not JSON: {err}') from None
        if not isinstance(params, dict):
            raise ValueError('--params must be a JSON object')
    if not args.wait > 0:
        raise ValueError('--wait must be > 0')
    if args.timeout < 0:
        raise ValueError('--timeout must be >= 0 (0: no limit)')
    name = str(args.node_name).strip('/')
    if not name:
        raise ValueError('--node-name is empty')
    return '/' + name


def run(args: argparse.Namespace, out: Output) -> int:
    """Send the task, print its feedback as it comes and its outcome."""
    node_name = _check(args)
    from ..ros.rclfix.shutdown import spun_node
    with spun_node('muscle_mem_run') as node:
        return _send(node, node_name, args, out)


def _send(node: Any, cache: str, args: argparse.Namespace, out: Output) -> int:
    from action_msgs.msg import GoalStatus
    from muscle_mem_interfaces.action import ExecuteTask

    from ..ros.rclfix.action_client import ActionClient
    from ..ros.rclfix.matching import AgentSeen, wait_for_action_matched
    seen = AgentSeen(node, cache)
    client = ActionClient(node, ExecuteTask, f'{cache}/execute_task')
    deadline = time.monotonic() + args.wait
    if not wait_for_action_matched(node, client, cache, args.wait):
        raise MuscleMemError(f'no cache answers at {cache}/execute_task after {args.wait:g} s: '
                             'is behavior_cache running (--node-name), in this ROS domain?')
    if not seen.wait(max(0.0, deadline - time.monotonic())):
        out.note(f'{cache} has not reported its agent available: a miss may fail')
    lock = threading.Lock()

    def said(msg: Any) -> None:
        with lock:
            if not out.json_mode:
                out.print(feedback_line(msg.feedback))

    goal = ExecuteTask.Goal(task=args.task, params_json=args.params)
    handle = _wait(client.send_goal_async(goal, feedback_callback=said), args.wait,
                   f'{cache}/execute_task did not answer the goal')
    if not handle.accepted:
        raise MuscleMemError(f'{cache} refused the task (is it active? a task name is needed)')
    future = handle.get_result_async()
    try:
        wrapped = _wait(future, args.timeout or None, '')
    except TimeoutError:
        _wait(handle.cancel_goal_async(), 10.0, f'{args.task}: the cancel after --timeout '
              'was not answered')
        wrapped = _wait(future, 30.0, f'{args.task}: canceled after --timeout, no result')
    except KeyboardInterrupt:
        handle.cancel_goal_async()
        raise
    result, status = wrapped.result, wrapped.status
    ok = status == GoalStatus.STATUS_SUCCEEDED and result.success
    outcome = {'task': args.task, 'succeeded': ok, 'cache_hit': result.cache_hit,
               'steps_replayed': result.steps_replayed,
               'steps_by_agent': result.steps_by_agent,
               'trajectory': result.trajectory_id, 'message': result.message}
    with lock:
        if out.json_mode:
            out.json(outcome)
        elif ok:
            out.print(_summary(outcome))
    if not ok:
        raise MuscleMemError(f'{args.task} failed: {result.message or "no message"}')
    return 0


def feedback_line(fb: Any) -> str:
    """
    Return one feedback message as a line: ``[replay] step 2 (subtask): /arm/... ok``.

    The cache's own details already start with their step (``step 2: /arm/...``, as
    ExecuteTask.action documents), an agent's may not: the step is said once either way.
    """
    where = f' ({fb.task})' if fb.depth else ''
    detail = fb.detail.removeprefix(f'step {fb.step}: ')
    return f'[{_MODES.get(fb.mode, fb.mode)}] step {fb.step}{where}: {detail}'


def _summary(o: dict[str, Any]) -> str:
    if o['cache_hit']:
        how = f"replayed from the cache: {o['steps_replayed']} step(s), no agent call"
    elif o['steps_replayed']:
        how = (f"{o['steps_replayed']} step(s) replayed, then {o['steps_by_agent']} by the "
               'agent (a new branch learned)')
    else:
        how = f"done by the agent: {o['steps_by_agent']} step(s) learned"
    return f"{o['task']}: {how} (trajectory {o['trajectory']}): {o['message']}"


def _wait(future: Any, timeout: float | None, what: str) -> Any:
    """Wait for a future another thread completes; raise ``what`` (or TimeoutError) on timeout."""
    from ..ros.rclfix.sync import wait_future
    if not wait_future(future, timeout):
        if what:
            raise MuscleMemError(what)
        raise TimeoutError()
    return future.result()
