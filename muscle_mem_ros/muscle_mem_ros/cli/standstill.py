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
``muscle-mem standstill --who NAME``: a person confirms a robot that did not stop at rest.

After a stop that did not stop the robot, a running cache refuses tasks, ``~/replay`` and
proxied goals until its sensors see the robot at rest
(:mod:`muscle_mem_ros.ros.execution.standstill`). A robot whose sensors cannot show it (a
sensor that went quiet) waits for a person: this calls the node's ``~/confirm_standstill``
with a name, which the node logs and publishes, as an approval keeps who approved.
"""

from __future__ import annotations

import argparse
import getpass
import socket
from typing import Any

from .output import Output
from ..errors import MuscleMemError

__all__ = ['add_parser', 'run']


def add_parser(cmd: argparse.ArgumentParser) -> None:
    """Add the standstill arguments to its subparser."""
    cmd.add_argument('--who', default=None,
                     help='who confirms the robot at rest (default: user@host); kept in the '
                     "node's log and ~/events")
    cmd.add_argument('--node-name', default='muscle_mem',
                     help="the cache node's name (default muscle_mem): its "
                     '~/confirm_standstill')
    cmd.add_argument('--wait', type=float, default=10.0, metavar='S',
                     help='seconds to wait for the cache (default 10)')
    cmd.set_defaults(run=run)


def run(args: argparse.Namespace, out: Output) -> int:
    """Call the node's ``~/confirm_standstill``; print its answer."""
    who = args.who if args.who is not None else f'{getpass.getuser()}@{socket.gethostname()}'
    if not who.strip():
        raise ValueError('--who is empty: a confirmation carries a name')
    name = '/' + str(args.node_name).strip('/')
    if name == '/':
        raise ValueError('--node-name is empty')
    from ..ros.rclfix.shutdown import spun_node
    with spun_node('muscle_mem_standstill') as node:
        answer = _call(node, f'{name}/confirm_standstill', who.strip(), args.wait)
    if out.json_mode:
        out.json({'who': who.strip(), 'confirmed': answer.success, 'message': answer.message})
    if not answer.success:
        raise MuscleMemError(answer.message)
    if not out.json_mode:
        out.print(answer.message)
    return 0


def _call(node: Any, service: str, who: str, wait: float) -> Any:
    from muscle_mem_interfaces.srv import ConfirmStandstill

    from ..ros.rclfix.matching import wait_for_service_matched
    from ..ros.rclfix.sync import wait_future
    client = node.create_client(ConfirmStandstill, service)
    if not wait_for_service_matched(node, client, service.rsplit('/', 1)[0], wait):
        raise MuscleMemError(f'no cache answers at {service} after {wait:g} s: is '
                             'behavior_cache running (--node-name), in this ROS domain?')
    future = client.call_async(ConfirmStandstill.Request(who=who))
    if not wait_future(future, wait):
        raise MuscleMemError(f'{service} did not answer in {wait:g} s')
    return future.result()
