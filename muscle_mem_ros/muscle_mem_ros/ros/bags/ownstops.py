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
The cache's own stops in a bag are not steps of the task (issue 43 item 7).

A bag recorded while the cache ran holds what the cache sent to stop a goal
(:mod:`..capture.stopping`) beside the task's steps: the same server's events, often a
call that succeeded. ``learn`` leaves out:

* a goal whose id carries the cache's stop mark (:func:`..node.stops.is_stop_goal_id`):
  every stop goal the cache sends (a ``stop_goal``, or the hold of a joint trajectory) has
  one, whoever recorded the server's events;
* a call of an action tool's ``stop_service`` (when the params file also names that
  service as a tool) that began while a goal of that action was running: that is when the
  cache calls it, a goal's cancel refused or not answered. The service's request has no
  room for a mark, so its time says it; a task's own steps do not overlap a goal of the
  same arm.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from muscle_mem_ros.records import ToolKind
from muscle_mem_ros.ros.bags.calls import Call, chosen
from muscle_mem_ros.ros.bags.reader import Bag
from muscle_mem_ros.ros.node.nodeconfig import NodeConfig
from muscle_mem_ros.ros.node.stops import is_stop_goal_id

__all__ = ['is_own_stop', 'without_own_stops']


def is_own_stop(call: Call, running: Sequence[Call]) -> bool:
    """
    Return whether ``call`` is a stop the cache sent (module docstring).

    :param running: The calls of the action whose stop service ``call`` would be (none
        when its tool is no action's ``stop_service``).
    """
    if call.goal_id and is_stop_goal_id(call.goal_id):
        return True
    return any(goal.started < call.started < goal.ended for goal in running)


def without_own_stops(built: Sequence[Any], config: NodeConfig, stream: Any,
                      bag: Bag) -> list[Any]:
    """
    Return the built steps (``.call``) of ``built`` that are not the cache's own stops.

    :param stream: The bag's :class:`.learning.BagStream` (its finders hold every call of
        each tool, those that did not succeed too: the goals a stop service stopped).
    """
    stopped_by: dict[str, list[Call]] = {}
    for tool in config.actions:
        if tool.stop is None or not tool.stop.service:
            continue
        found = chosen(stream.finders[tool.server], bag)
        calls = found.calls(bag) if found is not None else []
        stopped_by.setdefault(tool.stop.service, []).extend(calls)
    return [b for b in built if not is_own_stop(
        b.call, stopped_by.get(b.call.tool.server, [])
        if b.call.tool.kind is ToolKind.SERVICE else [])]
