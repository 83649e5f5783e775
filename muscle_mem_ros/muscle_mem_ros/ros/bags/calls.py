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
Find a tool's calls in a bag: goal or request, how it ended, when.

What each form of bag needs, per configured tool (its ``server`` in the params file):

* **action, introspection** (rosbag2 records it when the server or its client calls
  ``configure_introspection(..., CONTENTS)``): ``<server>/_action/send_goal/_service_event``
  (the goal id and the goal, and whether it was accepted) and
  ``<server>/_action/get_result/_service_event`` (the status and the result). The trace's
  feedback is read from ``<server>/_action/feedback`` when the bag has it.
* **service, introspection**: ``<server>/_service_event`` with contents.
* **action without introspection**: ``<server>/_action/status`` (each goal's id, when it
  was accepted and how it ended) and the goals' contents on ``<server>/goal`` as
  ``<pkg>/action/<Action>_Goal`` messages (what ``muscle-mem export --mcap`` writes, and what
  an agent or a recorder can publish beside each goal it sends); ``_action/feedback`` for
  the trace, when the bag has it. A goal id is given the last unused goal message received
  before its first ACCEPTED or EXECUTING status. The result is not in such a bag: a call
  succeeded when its status is SUCCEEDED (a tool's ``success`` rule on the result's fields
  cannot be applied). A bag with the status but not the goals is refused, naming both
  topics that could have held them; so is a goal accepted with no goal message before it.
* **service without introspection**: nothing in a bag tells a request's answer; not read.

The events are decoded as the node's tap decodes them live (:mod:`..capture.tap`): with the
installed interface (``<Action>.Impl.SendGoalService.Event``), one call per goal id (or per
client GID and sequence number for a service) whichever side (client or server) published
it, a rejected goal dropped, the result judged by the tool's ``success`` rule. Times are the
bag's receive times: a call starts at its request event, is accepted at the send_goal
response and ends at its result's response event.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from action_msgs.msg import GoalStatus, GoalStatusArray
from muscle_mem_ros.records import StepStatus, ToolKind
from muscle_mem_ros.ros.bags.reader import Bag, BagError, Topic
from muscle_mem_ros.ros.messages.success import answered, refusal_reason
from muscle_mem_ros.ros.node.nodeconfig import ToolConfig
from rclpy.serialization import deserialize_message
from service_msgs.msg import ServiceEventInfo

__all__ = ['Call', 'decode', 'feedback_between', 'find_calls', 'event_topics']

_REQUESTS = (ServiceEventInfo.REQUEST_SENT, ServiceEventInfo.REQUEST_RECEIVED)


@dataclass(frozen=True, eq=False)
class Call:
    """
    One call found in a bag.

    :ivar tool: The configured tool it called.
    :ivar started: Receive time (ns) of its request event.
    :ivar accepted: When the goal was accepted (ns; ``started`` for a service).
    :ivar ended: Receive time (ns) of its response (the result's, for an action).
    :ivar message: The goal or request (the installed class).
    :ivar status: How it ended.
    :ivar detail: Why it failed ('' if it succeeded).
    :ivar goal_id: The action goal's id (b'' for a service).
    """

    tool: ToolConfig
    started: int
    accepted: int
    ended: int
    message: Any
    status: StepStatus
    detail: str
    goal_id: bytes = b''


def _path(server: str, suffix: str) -> str:
    return '/' + server.strip('/') + '/' + suffix


def event_topics(tool: ToolConfig) -> list[str]:
    """Return the introspection topics a tool's calls are read from."""
    if tool.kind is ToolKind.ACTION:
        return [_path(tool.server, '_action/send_goal/_service_event'),
                _path(tool.server, '_action/get_result/_service_event')]
    return [_path(tool.server, '_service_event')]


def decode(topic: Topic, msg_type: Any) -> Iterator[tuple[int, Any]]:
    """
    Yield (receive time, message) of a topic, decoded with the installed ``msg_type``.

    :raises BagError: the bag says the topic has another type, or a message does not decode.
    """
    expected = _type_name(msg_type)
    if topic.type_name and topic.type_name != expected:
        raise BagError(f'{topic.name}: recorded as {topic.type_name}, but the params file '
                       f'makes it {expected}')
    for when, raw in zip(topic.times, topic.data):
        try:
            yield when, deserialize_message(raw, msg_type)
        except Exception as err:  # rclpy raises plain errors for bad CDR
            raise BagError(f'{topic.name}: a message at {when} ns does not decode as '
                           f'{expected}: {err}') from err


def _type_name(msg_type: Any) -> str:
    module = msg_type.__module__.split('.')
    return f'{module[0]}/{module[1]}/{msg_type.__name__}'


def find_calls(bag: Bag, tool: ToolConfig) -> list[Call]:
    """
    Return every call of ``tool`` in the bag that ended, in the order they ended.

    :raises BagError: the bag has the tool's status topic but not its goals (no introspection
        with contents), or an event without contents, or a type other than the tool's.
    """
    topics = [bag.topic(name) for name in event_topics(tool)]
    if any(topic is None for topic in topics):
        status = bag.topic(_path(tool.server, '_action/status'))
        if tool.kind is not ToolKind.ACTION or status is None or not status.times:
            return []
        goals = bag.topic(_path(tool.server, 'goal'))
        if goals is None or not goals.times:
            missing = ', '.join(n for n, t in zip(event_topics(tool), topics) if t is None)
            raise BagError(
                f'{tool.server}: the bag has {status.name} (goals were sent) but not {missing} '
                f'nor {_path(tool.server, "goal")}: the goals themselves are not in it. Record '
                'the introspection events (configure_introspection with CONTENTS on the server '
                'or its client, and ros2 bag record --all-services or those topics), or the '
                'goals on <server>/goal')
        return _status_calls(status, goals, tool)
    if tool.kind is ToolKind.SERVICE:
        assert topics[0] is not None
        return _service_calls(topics[0], tool)
    assert topics[0] is not None and topics[1] is not None
    return _action_calls(topics[0], topics[1], tool)


def _no_contents(topic: Topic) -> BagError:
    return BagError(f'{topic.name}: an event without contents: the goal is missing (the '
                    'introspection was configured with METADATA; CONTENTS is needed)')


def _service_calls(topic: Topic, tool: ToolConfig) -> list[Call]:
    begun: dict[tuple[bytes, int], tuple[int, Any]] = {}
    calls: list[Call] = []
    done: set[tuple[bytes, int]] = set()
    for when, msg in decode(topic, tool.interface.Event):
        key = (bytes(msg.info.client_gid), int(msg.info.sequence_number))
        if msg.info.event_type in _REQUESTS:
            if not msg.request:
                raise _no_contents(topic)
            if key not in begun and key not in done:
                begun[key] = (when, msg.request[0])
            continue
        start = begun.pop(key, None)
        if start is None or not msg.response:
            continue
        done.add(key)
        why = answered(msg.response[0], tool.success)
        calls.append(Call(tool, start[0], start[0], when, start[1],
                          StepStatus.FAILED if why else StepStatus.SUCCEEDED, why))
    return calls


def _action_calls(send: Topic, result: Topic, tool: ToolConfig) -> list[Call]:
    impl = tool.interface.Impl
    goals: dict[bytes, tuple[int, Any]] = {}
    accepted: dict[bytes, int] = {}
    sent: dict[tuple[bytes, int], bytes] = {}
    for when, msg in decode(send, impl.SendGoalService.Event):
        key = (bytes(msg.info.client_gid), int(msg.info.sequence_number))
        if msg.info.event_type in _REQUESTS:
            if not msg.request:
                raise _no_contents(send)
            goal_id = bytes(msg.request[0].goal_id.uuid)
            goals.setdefault(goal_id, (when, msg.request[0].goal))
            sent[key] = goal_id
            continue
        goal_id = sent.get(key, b'')
        if goal_id and msg.response:
            if msg.response[0].accepted:
                accepted.setdefault(goal_id, when)
            else:
                goals.pop(goal_id, None)
    asked: dict[tuple[bytes, int], bytes] = {}
    calls: list[Call] = []
    for when, msg in decode(result, impl.GetResultService.Event):
        key = (bytes(msg.info.client_gid), int(msg.info.sequence_number))
        if msg.info.event_type in _REQUESTS:
            if msg.request:
                asked[key] = bytes(msg.request[0].goal_id.uuid)
            continue
        goal_id = asked.pop(key, b'')
        start = goals.pop(goal_id, None)
        if start is None or not msg.response:
            continue
        wrapped = msg.response[0]
        why = refusal_reason(wrapped.result, tool.success)
        if wrapped.status != GoalStatus.STATUS_SUCCEEDED:
            status = StepStatus.CANCELED if wrapped.status == GoalStatus.STATUS_CANCELED \
                else StepStatus.FAILED
            why = f'goal ended with status {wrapped.status}'
        else:
            status = StepStatus.FAILED if why else StepStatus.SUCCEEDED
        calls.append(Call(tool, start[0], accepted.get(goal_id, start[0]), when, start[1],
                          status, why, goal_id))
    return calls


_TERMINAL = {GoalStatus.STATUS_SUCCEEDED: StepStatus.SUCCEEDED,
             GoalStatus.STATUS_CANCELED: StepStatus.CANCELED,
             GoalStatus.STATUS_ABORTED: StepStatus.FAILED}
_RUNNING = (GoalStatus.STATUS_ACCEPTED, GoalStatus.STATUS_EXECUTING, GoalStatus.STATUS_CANCELING)


def _status_calls(status: Topic, goals: Topic, tool: ToolConfig) -> list[Call]:
    """Return the calls told by the status topic, their goals from the goal topic."""
    accepted: dict[bytes, int] = {}
    ended: dict[bytes, tuple[int, int]] = {}
    for when, msg in decode(status, GoalStatusArray):
        for entry in msg.status_list:
            goal_id = bytes(entry.goal_info.goal_id.uuid)
            if entry.status in _RUNNING or entry.status in _TERMINAL:
                accepted.setdefault(goal_id, when)
            if entry.status in _TERMINAL:
                ended.setdefault(goal_id, (when, int(entry.status)))
    sent = list(decode(goals, tool.interface.Goal))
    used = [False] * len(sent)
    calls: list[Call] = []
    for goal_id, at in sorted(accepted.items(), key=lambda item: item[1]):
        last = bisect_right(goals.times, at) - 1
        while last >= 0 and used[last]:
            last -= 1
        if last < 0:
            raise BagError(f'{tool.server}: goal {goal_id.hex()} accepted at {at} ns (on '
                           f'{status.name}) with no {goals.name} message before it: its '
                           'contents are missing')
        used[last] = True
        if goal_id not in ended:
            continue
        end, code = ended[goal_id]
        why = '' if code == GoalStatus.STATUS_SUCCEEDED else f'goal ended with status {code}'
        calls.append(Call(tool, sent[last][0], at, end, sent[last][1], _TERMINAL[code], why,
                          goal_id))
    calls.sort(key=lambda call: call.ended)
    return calls


def feedback_between(bag: Bag, call: Call) -> list[tuple[int, Any]]:
    """Return the feedback messages of an action call (receive time, feedback), if recorded."""
    topic = bag.topic(_path(call.tool.server, '_action/feedback'))
    if topic is None or not call.goal_id:
        return []
    lo = bisect_left(topic.times, call.accepted)
    hi = bisect_right(topic.times, call.ended)
    part = Topic(topic.name, topic.type_name, topic.times[lo:hi], topic.data[lo:hi])
    return [(when, msg.feedback)
            for when, msg in decode(part, call.tool.interface.Impl.FeedbackMessage)
            if bytes(msg.goal_id.uuid) == call.goal_id]
