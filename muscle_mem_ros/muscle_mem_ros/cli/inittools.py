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
Which servers ``muscle-mem init`` makes tools, each action's stop, the description's wait.

ROS-free.

**Tools** are the robot's actions: what the agent calls to make the robot do something, and
so what the cache records and replays. A server that is not one is left out by rule, and the
file names it with the rule (:func:`sort_servers`):

* a stop (its last name part says ``stop``, ``estop``, ``halt`` or ``emergency``): the cache
  calls it to stop a motion (below), never replays it as a step;
* a reset (``reset`` in its last name part: a world, a simulation, a counter): it changes
  what the robot's state means, not where the robot is;
* the controller manager's (under ``/controller_manager``, or a ``controller_manager_msgs``
  type): it loads and switches controllers;
* a lifecycle service (``lifecycle_msgs``): a node's state, not the robot's;
* a component container's (``composition_interfaces``): it loads nodes;
* parameter and type-description services (``rcl_interfaces``,
  ``type_description_interfaces``): every node has them; one line per node names them.

A running cache is not the robot either: its nodes, the servers under its name (its
proxies) and its hidden helper nodes (``_<name>_proxies``) are left out before these rules
(:mod:`muscle_mem_ros.cli.survey`).

**Stops** (:func:`stop_of`): the stop the cache sends when an action's server refuses or
ignores a cancel. A ``FollowJointTrajectory`` tool's is known and needs nothing written: the
node holds the joints where they are, as a one-point trajectory, unless the file names
another (it reads them from a JointState sensor, and refuses to start without one: so does
init). Any other action gets a stop service its own node serves (a ``Trigger`` or an
``Empty`` named as a stop, above), found by its name; where none is, the file says that no
stop is known.

**The description's wait** (:func:`description_timeout`): a cache that starts has to
discover the description's publisher and receive the description before
``robot_description_timeout`` ends; a description that comes later makes it another body
(every branch learned misses). The wait ends when the description arrives, so a long one
costs nothing on a robot that publishes it: :data:`DESCRIPTION_MARGIN` times what init waited
for it, at least :data:`DESCRIPTION_FLOOR` seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math
import re

from .initrules import Skipped, Tool

__all__ = ['DESCRIPTION_FLOOR', 'DESCRIPTION_MARGIN', 'Stop', 'description_timeout',
           'sort_servers', 'stop_of']

DESCRIPTION_FLOOR = 10.0
"""Fewest seconds written for robot_description_timeout (a cold start took about 1.9 s)."""
DESCRIPTION_MARGIN = 5.0
"""robot_description_timeout is this many times the seconds init waited for the description."""
STOP_SERVICE_TYPES = ('std_srvs/srv/Trigger', 'std_srvs/srv/Empty')
"""Types a stop service is called with an empty request by (the node's stop_service_type)."""
_STOP = re.compile(r'(?:^|_)(?:e_?stop|stop|halt|emergency)(?:$|_)')
_RESET = re.compile(r'(?:^|_)reset(?:$|_)')
_NODE_TYPES = {'rcl_interfaces/': 'parameter', 'type_description_interfaces/': 'parameter',
               'lifecycle_msgs/': "a lifecycle service: a node's state, not the robot's",
               'composition_interfaces/': "a component container's: it loads nodes",
               'controller_manager_msgs/': "the controller manager's: it loads and switches "
                                           'controllers'}


@dataclass(frozen=True)
class Stop:
    """
    An action tool's stop, as the file writes it.

    :ivar service: ``stop_service`` to write ('' for none).
    :ivar service_type: ``stop_service_type`` to write ('' for the default Trigger).
    :ivar note: The comment that says which stop it is, or that none is known.
    :ivar hold: The node's hold (it needs a JointState sensor, or it refuses to start).
    """

    service: str
    service_type: str
    note: str
    hold: bool = False


def _last(name: str) -> str:
    return name.rstrip('/').rsplit('/', 1)[-1]


def _rule(tool: Tool) -> str:
    """Return why a server is not a robot action ('' for a tool; 'parameter' for a group)."""
    for prefix, why in _NODE_TYPES.items():
        if tool.type.startswith(prefix):
            return why
    if tool.server.startswith('/controller_manager/') or \
            tool.node.rstrip('/').endswith('/controller_manager'):
        return _NODE_TYPES['controller_manager_msgs/']
    if tool.kind == 'service' and _STOP.search(_last(tool.server)):
        return ('a stop: it halts the robot, a replay never repeats it (the stop_service '
                'of an action above, where one names it)')
    if tool.kind == 'service' and _RESET.search(_last(tool.server)):
        return ("a reset: it changes what the robot's state means, not where the robot is; "
                'a replay must not repeat it')
    return ''


def sort_servers(servers: Sequence[Tool]) -> tuple[list[Tool], list[Tool], list[Skipped]]:
    """
    Return the tools, the stop services, and what is left out with its rule (module docstring).

    :param servers: Every server the robot's nodes serve (a running cache's left out).
    :return: Tools and stop services sorted by name; left-out entries, parameter services
        one line per node.
    """
    tools: list[Tool] = []
    stops: list[Tool] = []
    left: list[Skipped] = []
    parameters: dict[str, list[str]] = {}
    for tool in sorted(servers, key=lambda t: (t.server, t.kind)):
        why = _rule(tool)
        if why == 'parameter':
            parameters.setdefault(tool.node, []).append(tool.server)
        elif why:
            left.append(Skipped(tool.server, tool.type, why))
            if why.startswith('a stop'):
                stops.append(tool)
        else:
            tools.append(tool)
    left += [Skipped(f'parameter services of {node}', '',
                     f"{', '.join(names)}: a node's settings, not robot actions")
             for node, names in sorted(parameters.items())]
    return tools, stops, left


def stop_of(action: Tool, stops: Sequence[Tool]) -> Stop:
    """Return the stop written for ``action`` (module docstring)."""
    if action.type.endswith('/action/FollowJointTrajectory'):
        return Stop('', '', 'stop: the current joint positions as a one-point trajectory (a '
                    "FollowJointTrajectory tool's default when it names none: the node reads "
                    'them from the JointState sensor)', hold=True)
    own = [s for s in stops if s.node == action.node and s.type in STOP_SERVICE_TYPES]
    if own:
        chosen = own[0]
        return Stop(chosen.server, chosen.type if chosen.type != STOP_SERVICE_TYPES[0] else '',
                    f'stop: {chosen.server}, served by the same node and named a stop (check '
                    'that it halts this motion)')
    return Stop('', '', f'stop: none known for {action.server}: a goal whose cancel it '
                'refuses or ignores ends the task saying the robot did not stop; name its stop '
                'here (stop_goal or stop_service) if it has one')


def description_timeout(heard: float | None) -> float:
    """
    Return robot_description_timeout for a description init heard ``heard`` s after asking.

    :param heard: Seconds from subscribing to the description; None: seen, never heard.
    """
    if heard is None or not math.isfinite(heard):
        return DESCRIPTION_FLOOR
    return float(max(DESCRIPTION_FLOOR, math.ceil(DESCRIPTION_MARGIN * heard)))
