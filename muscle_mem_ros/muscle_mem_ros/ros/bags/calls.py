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
Find a tool's calls in a bag as it streams by: goal or request, how it ended, when.

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
  the trace, when the bag has it. A goal id is given the one goal message received since
  the previous acceptance, before its first ACCEPTED or EXECUTING status; with none the
  goal's contents are missing, with two or more (goals sent together, or one rejected)
  which is which is not in the bag: both are refused, naming the goal ids. The result is
  not in such a bag: a call succeeded when its status is SUCCEEDED (a tool's ``success``
  rule on the result's fields cannot be applied). A bag with the status but not the goals
  is refused, naming both topics that could have held them.
* **service without introspection**: nothing in a bag tells a request's answer; not read.

The events are decoded as the node's tap decodes them live (:mod:`..capture.tap`): with the
installed interface (``<Action>.Impl.SendGoalService.Event``), one call per goal id (or per
client GID and sequence number for a service) whichever side (client or server) published
it, a rejected goal dropped, the result judged by the tool's ``success`` rule. Times are the
bag's receive times: a call starts at its request event, is accepted at the send_goal
response and ends at its result's response event. Its stamps are the events' own
(``info.stamp``: when the request and the response were published), which say what came
first across topics when receive order does not (:mod:`.learning`).

A :class:`Finder` is fed the tool's messages in the bag's order and tells a
:class:`Listener` (the steps being built, :mod:`.steps`) when a call starts, is accepted,
gets feedback and ends, so that nothing of the bag but the calls needs to be kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
import heapq
from typing import Any, Protocol

from action_msgs.msg import GoalStatus, GoalStatusArray
from muscle_mem_ros.records import StepStatus, ToolKind
from muscle_mem_ros.ros.bags.reader import Bag, BagError, Topic
from muscle_mem_ros.ros.messages.success import answered, refusal_reason
from muscle_mem_ros.ros.node.nodeconfig import ToolConfig
from rclpy.serialization import deserialize_message
from service_msgs.msg import ServiceEventInfo

__all__ = ['Call', 'Finder', 'Listener', 'chosen', 'decode', 'event_topics', 'find_calls',
           'finders', 'tool_topics']

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
    :ivar stamps: The stamps (ns) its request and its response were published with
        (introspection events); None: the bag does not say (no introspection).
    """

    tool: ToolConfig
    started: int
    accepted: int
    ended: int
    message: Any
    status: StepStatus
    detail: str
    goal_id: bytes = b''
    stamps: tuple[int, int] | None = None


class Listener(Protocol):
    """What a finder tells as the bag streams by (a call is named by its finder and key)."""

    def started(self, finder: Finder, key: object, when: int) -> None:
        """Take a request sent at ``when`` (its call may never be accepted)."""

    def accepted(self, finder: Finder, key: object, when: int) -> None:
        """Take the goal's acceptance at ``when``."""

    def feedback(self, finder: Finder, key: object, when: int, message: Any) -> None:
        """Take feedback the accepted goal sent."""

    def ended(self, finder: Finder, key: object, call: Call) -> None:
        """Take a call that is over, whether it succeeded or not."""


def _path(server: str, suffix: str) -> str:
    return '/' + server.strip('/') + '/' + suffix


def event_topics(tool: ToolConfig) -> list[str]:
    """Return the introspection topics a tool's calls are read from."""
    if tool.kind is ToolKind.ACTION:
        return [_path(tool.server, '_action/send_goal/_service_event'),
                _path(tool.server, '_action/get_result/_service_event')]
    return [_path(tool.server, '_service_event')]


def tool_topics(tool: ToolConfig) -> list[str]:
    """Return every topic a tool's calls can be read from, in either form."""
    if tool.kind is ToolKind.ACTION:
        return event_topics(tool) + [_path(tool.server, '_action/status'),
                                     _path(tool.server, 'goal')]
    return event_topics(tool)


def decode(topic: Topic, msg_type: Any) -> Iterator[tuple[int, Any]]:
    """
    Yield (receive time, message) of a kept topic, decoded with the installed ``msg_type``.

    :raises BagError: the bag says the topic has another type, or a message does not decode.
    """
    for when, raw in zip(topic.times, topic.data):
        yield when, _decode(topic, raw, msg_type, when)


def _decode(topic: Topic, raw: bytes, msg_type: Any, when: int) -> Any:
    expected = _type_name(msg_type)
    if topic.type_name and topic.type_name != expected:
        raise BagError(f'{topic.name}: recorded as {topic.type_name}, but the params file '
                       f'makes it {expected}')
    try:
        return deserialize_message(raw, msg_type)
    except Exception as err:  # rclpy raises plain errors for bad CDR
        raise BagError(f'{topic.name}: a message at {when} ns does not decode as '
                       f'{expected}: {err}') from err


def _type_name(msg_type: Any) -> str:
    module = msg_type.__module__.split('.')
    return f'{module[0]}/{module[1]}/{msg_type.__name__}'


def _stamp(info: Any) -> int:
    return int(info.stamp.sec) * 10**9 + int(info.stamp.nanosec)


def _no_contents(topic: Topic) -> BagError:
    return BagError(f'{topic.name}: an event without contents: the goal is missing (the '
                    'introspection was configured with METADATA; CONTENTS is needed)')


class _Quiet:
    """Hear nothing: the tasks' own calls need no step built."""

    def started(self, finder: Finder, key: object, when: int) -> None:
        pass

    def accepted(self, finder: Finder, key: object, when: int) -> None:
        pass

    def feedback(self, finder: Finder, key: object, when: int, message: Any) -> None:
        pass

    def ended(self, finder: Finder, key: object, call: Call) -> None:
        pass


class Finder:
    """One form of a tool's calls (introspection, or status and goals), found as fed."""

    def __init__(self, tool: ToolConfig, listener: Listener | None = None) -> None:
        self.tool = tool
        self.listener: Listener = listener if listener is not None else _Quiet()
        self.found: list[Call] = []
        self.topics: dict[str, str] = {}
        """Topic name -> what it is to this finder."""

    def feed(self, topic: Topic, when: int, data: bytes) -> None:
        """Take one message of one of :attr:`topics`."""
        raise NotImplementedError

    def calls(self, bag: Bag) -> list[Call]:
        """Return the calls that ended, in the order they ended (after the last message)."""
        return sorted(self.found, key=lambda call: call.ended)

    def _end(self, key: object, call: Call) -> None:
        self.found.append(call)
        self.listener.ended(self, key, call)


class _Introspected(Finder):
    """Calls told by their introspection events: actions and services."""

    def __init__(self, tool: ToolConfig, listener: Listener | None = None) -> None:
        super().__init__(tool, listener)
        names = event_topics(tool)
        if tool.kind is ToolKind.ACTION:
            impl = tool.interface.Impl
            self.topics = {names[0]: 'send_goal', names[1]: 'get_result',
                           _path(tool.server, '_action/feedback'): 'feedback'}
            self._types = {'send_goal': impl.SendGoalService.Event,
                           'get_result': impl.GetResultService.Event,
                           'feedback': impl.FeedbackMessage}
        else:
            self.topics = {names[0]: 'service'}
            self._types = {'service': tool.interface.Event}
        self._goals: dict[bytes, tuple[int, Any, int]] = {}
        self._accepted: dict[bytes, int] = {}
        self._sent: dict[tuple[bytes, int], bytes] = {}
        self._asked: dict[tuple[bytes, int], bytes] = {}
        self._begun: dict[tuple[bytes, int], tuple[int, Any, int]] = {}
        self._done: set[tuple[bytes, int]] = set()

    def calls(self, bag: Bag) -> list[Call]:
        """Return the calls, or none when the bag lacks one of the event topics."""
        if any(bag.topic(name) is None for name in event_topics(self.tool)):
            return []
        return super().calls(bag)

    def feed(self, topic: Topic, when: int, data: bytes) -> None:
        """Take one event (or feedback message)."""
        role = self.topics[topic.name]
        if role == 'feedback':
            if self._accepted:
                msg = _decode(topic, data, self._types[role], when)
                goal_id = bytes(msg.goal_id.uuid)
                if goal_id in self._accepted:
                    self.listener.feedback(self, goal_id, when, msg.feedback)
            return
        msg = _decode(topic, data, self._types[role], when)
        key = (bytes(msg.info.client_gid), int(msg.info.sequence_number))
        if role == 'service':
            self._service(topic, key, when, msg)
        elif role == 'send_goal':
            self._send_goal(topic, key, when, msg)
        else:
            self._get_result(key, when, msg)

    def _service(self, topic: Topic, key: tuple[bytes, int], when: int, msg: Any) -> None:
        if msg.info.event_type in _REQUESTS:
            if not msg.request:
                raise _no_contents(topic)
            if key not in self._begun and key not in self._done:
                self._begun[key] = (when, msg.request[0], _stamp(msg.info))
                self.listener.started(self, key, when)
            return
        start = self._begun.pop(key, None)
        if start is None or not msg.response:
            return
        self._done.add(key)
        why = answered(msg.response[0], self.tool.success)
        self._end(key, Call(self.tool, start[0], start[0], when, start[1],
                            StepStatus.FAILED if why else StepStatus.SUCCEEDED, why,
                            stamps=_stamps(start[2], _stamp(msg.info))))

    def _send_goal(self, topic: Topic, key: tuple[bytes, int], when: int, msg: Any) -> None:
        if msg.info.event_type in _REQUESTS:
            if not msg.request:
                raise _no_contents(topic)
            goal_id = bytes(msg.request[0].goal_id.uuid)
            if goal_id not in self._goals:
                self._goals[goal_id] = (when, msg.request[0].goal, _stamp(msg.info))
                self.listener.started(self, goal_id, when)
            self._sent[key] = goal_id
            return
        goal_id = self._sent.pop(key, b'')
        if goal_id in self._goals and msg.response:
            if not msg.response[0].accepted:
                del self._goals[goal_id]
            elif goal_id not in self._accepted:
                self._accepted[goal_id] = when
                self.listener.accepted(self, goal_id, when)

    def _get_result(self, key: tuple[bytes, int], when: int, msg: Any) -> None:
        if msg.info.event_type in _REQUESTS:
            if msg.request:
                self._asked[key] = bytes(msg.request[0].goal_id.uuid)
            return
        goal_id = self._asked.pop(key, b'')
        start = self._goals.pop(goal_id, None)
        if start is None or not msg.response:
            return
        accepted = self._accepted.pop(goal_id, start[0])
        wrapped = msg.response[0]
        why = refusal_reason(wrapped.result, self.tool.success)
        if wrapped.status != GoalStatus.STATUS_SUCCEEDED:
            status = StepStatus.CANCELED if wrapped.status == GoalStatus.STATUS_CANCELED \
                else StepStatus.FAILED
            why = f'goal ended with status {wrapped.status}'
        else:
            status = StepStatus.FAILED if why else StepStatus.SUCCEEDED
        self._end(goal_id, Call(self.tool, start[0], accepted, when, start[1], status, why,
                                goal_id, _stamps(start[2], _stamp(msg.info))))


def _stamps(first: int, last: int) -> tuple[int, int] | None:
    return (first, last) if 0 < first <= last else None


_TERMINAL = {GoalStatus.STATUS_SUCCEEDED: StepStatus.SUCCEEDED,
             GoalStatus.STATUS_CANCELED: StepStatus.CANCELED,
             GoalStatus.STATUS_ABORTED: StepStatus.FAILED}
_RUNNING = (GoalStatus.STATUS_ACCEPTED, GoalStatus.STATUS_EXECUTING, GoalStatus.STATUS_CANCELING)


class _Status(Finder):
    """An action's calls told by its status topic, their goals from its goal topic."""

    def __init__(self, tool: ToolConfig, listener: Listener | None = None) -> None:
        super().__init__(tool, listener)
        self.status_topic = _path(tool.server, '_action/status')
        self.goal_topic = _path(tool.server, 'goal')
        self.topics = {self.status_topic: 'status', self.goal_topic: 'goal',
                       _path(tool.server, '_action/feedback'): 'feedback'}
        self._waiting: list[tuple[int, int, bytes]] = []
        """The goal messages since the last acceptance: (index, receive time, CDR)."""
        self._sent = 0
        self._paired: dict[bytes, tuple[int, int, Any, int]] = {}
        """Goal id -> (key, goal message time, goal, acceptance time)."""
        self._seen: set[bytes] = set()
        self._missing: list[str] = []
        self._ambiguous: list[list[bytes]] = []
        self._open_group = False
        self._goal_type: Topic | None = None

    def feed(self, topic: Topic, when: int, data: bytes) -> None:
        """Take one status, goal or feedback message."""
        role = self.topics[topic.name]
        if role == 'goal':
            self._goal_type = topic
            self._waiting.append((self._sent, when, data))
            self.listener.started(self, self._sent, when)
            self._sent += 1
            self._open_group = False
            return
        if role == 'feedback':
            if self._paired:
                msg = _decode(topic, data, self.tool.interface.Impl.FeedbackMessage, when)
                paired = self._paired.get(bytes(msg.goal_id.uuid))
                if paired is not None:
                    self.listener.feedback(self, paired[0], when, msg.feedback)
            return
        for entry in _decode(topic, data, GoalStatusArray, when).status_list:
            goal_id = bytes(entry.goal_info.goal_id.uuid)
            if goal_id not in self._seen and (entry.status in _RUNNING
                                              or entry.status in _TERMINAL):
                self._seen.add(goal_id)
                self._accept(goal_id, when)
            if entry.status in _TERMINAL and goal_id in self._paired:
                self._finish(goal_id, when, int(entry.status))

    def _accept(self, goal_id: bytes, when: int) -> None:
        if len(self._waiting) == 1:
            index, sent, data = self._waiting.pop()
            assert self._goal_type is not None
            goal = _decode(self._goal_type, data, self.tool.interface.Goal, sent)
            self._paired[goal_id] = (index, sent, goal, when)
            self.listener.accepted(self, index, when)
            return
        if len(self._waiting) > 1 or self._open_group:
            if not self._open_group:
                self._ambiguous.append([])
                self._open_group = True
            self._ambiguous[-1].append(goal_id)
            self._waiting.clear()
            return
        self._missing.append(f'goal {goal_id.hex()} accepted at {when} ns')

    def _finish(self, goal_id: bytes, when: int, code: int) -> None:
        index, sent, goal, at = self._paired.pop(goal_id)
        why = '' if code == GoalStatus.STATUS_SUCCEEDED else f'goal ended with status {code}'
        self._end(index, Call(self.tool, sent, at, when, goal, _TERMINAL[code], why, goal_id))

    def calls(self, bag: Bag) -> list[Call]:
        """
        Return the calls, or none when the bag has no status.

        :raises BagError: goals but not their contents, or goals that cannot be told apart.
        """
        status = bag.topic(self.status_topic)
        if status is None or not status.count:
            return []
        goals = bag.topic(self.goal_topic)
        if goals is None or not goals.count:
            missing = ', '.join(n for n in event_topics(self.tool) if bag.topic(n) is None)
            raise BagError(
                f'{self.tool.server}: the bag has {status.name} (goals were sent) but not '
                f'{missing} nor {self.goal_topic}: the goals themselves are not in it. Record '
                'the introspection events (configure_introspection with CONTENTS on the server '
                'or its client; see docs/learning-from-bags.md for the ros2 bag record line), '
                'or the goals on <server>/goal')
        if self._missing:
            raise BagError(f'{self.tool.server}: {self._missing[0]} (on {status.name}) with no '
                           f'{goals.name} message before it: its contents are missing')
        if self._ambiguous:
            groups = '; '.join(', '.join(g.hex() for g in group) for group in self._ambiguous)
            raise BagError(
                f'{self.tool.server}: which {goals.name} message is which goal is not in the '
                f'bag for goals {groups} (more goal messages than goals accepted since the '
                'one before: goals sent together, or one rejected); record the '
                'introspection events to learn them')
        return super().calls(bag)


def finders(tool: ToolConfig, listener: Listener | None = None) -> list[Finder]:
    """Return the finders of a tool's calls: introspection, and (actions) status and goals."""
    found: list[Finder] = [_Introspected(tool, listener)]
    if tool.kind is ToolKind.ACTION:
        found.append(_Status(tool, listener))
    return found


def chosen(found: list[Finder], bag: Bag) -> Finder | None:
    """Return the finder whose form the bag holds: introspection when it has the events."""
    if all(bag.topic(name) is not None for name in event_topics(found[0].tool)):
        return found[0]
    return found[1] if len(found) > 1 else None


def _messages(finder: Finder, topic: Topic) -> Iterator[tuple[int, Finder, Topic, bytes]]:
    for when, raw in zip(topic.times, topic.data):
        yield when, finder, topic, raw


def find_calls(bag: Bag, tool: ToolConfig) -> list[Call]:
    """
    Return every call of ``tool`` in a bag whose topics were kept, in the order they ended.

    :raises BagError: the bag has the tool's status topic but not its goals (no introspection
        with contents), or an event without contents, or a type other than the tool's.
    """
    found = finders(tool)
    streams = [_messages(finder, topic) for finder in found for topic in
               (bag.topic(name) for name in finder.topics) if topic is not None]
    for when, finder, topic, raw in heapq.merge(*streams, key=lambda item: item[0]):
        finder.feed(topic, when, raw)
    best = chosen(found, bag)
    return best.calls(bag) if best is not None else []
