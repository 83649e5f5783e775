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
Record a tool's calls from its introspection events (``record_from: introspection``).

With a proxy the agent calls the cache, which forwards. With a tap the agent
calls the real server itself (no remap, nothing added to its path) and the node
learns from the service introspection events that ROS 2 (Jazzy and later)
publishes for every request and response:

* a service ``/s`` publishes on ``/s/_service_event``, type ``<pkg>/srv/<Srv>_Event``:
  ``info`` (event type, the client's GID, the request's sequence number, a stamp)
  and ``request`` or ``response``, sequences of at most one message that are
  filled only when introspection is configured with ``CONTENTS``;
* an action ``/a`` publishes the same for its goal and result services, on
  ``/a/_action/send_goal/_service_event`` and ``/a/_action/get_result/_service_event``.

Events come from the client (REQUEST_SENT, RESPONSE_RECEIVED) or the server
(REQUEST_RECEIVED, RESPONSE_SENT), as each was configured
(``configure_introspection(clock, qos, ServiceIntrospectionState.CONTENTS)`` on
the agent's client or the robot's server; the event publisher's QoS must be
reliable). Either side is enough; when both publish, each call is taken once.

While a recording is active a tap does what the proxy does with a proxied call:

* a call whose request was sent (the event's DDS source time) before the
  recording started is not part of it, however late its events arrive (hosts'
  clocks must agree, as ROS time across hosts assumes anyway);
* service: the request event starts a call (pre snapshot at once), keyed by
  (client GID, sequence number); its response event ends it; a response with a
  boolean ``success`` false is a failed step;
* action: the ``send_goal`` request (goal id, goal) starts a call (pre snapshot);
  a rejected goal is dropped; the ``get_result`` request ties its (GID, sequence
  number) to the goal id, and its response (status, result) ends the call;
* a call that ended with success is recorded by :meth:`.forwarding.ToolProxy.record`:
  post snapshot once every sensor sent data newer than the response's stamp
  (the event's DDS source time), then the step is appended. A recording being
  saved first waits (bounded) for the calls it still records
  (:meth:`.recorder.Recorder.add_settle`).

The node's own calls (replay, through the tool's client) are never recorded:
a request event whose client GID belongs to the node's own client is dropped.
That GID is looked up in the ROS graph, as the endpoints of the node's proxy
node on the service's hidden request and reply topics (``rq/<service>Request``,
``rr/<service>Reply``: the naming of the DDS middlewares, Fast DDS here, whose
client GID is its reply reader's).

Compared with the proxy, a tap loses: the pre snapshot is taken when the
request event arrives, after the server already has the goal (a fast arm may
have started moving); the agent is not held until the post snapshot is taken,
so its next call may start before the sensors reported the end of the previous
one: that call's pre snapshot is then the previous call's post snapshot
(:class:`Ledger`), which shows the new call's motion if the robot moves within
one sensor period (checks then fail at replay: a miss, not a wrong replay);
calls made by any client other than the node's own are recorded (the proxy
records only what is sent to it); an action whose result the client never
requests is never recorded; and nothing is recorded unless someone publishes
the events with contents.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
import threading
import time
from typing import Any

from action_msgs.msg import GoalStatus
from muscle_mem_ros.records import Snapshot, StepStatus, ToolKind
from muscle_mem_ros.ros.capture.forwarding import CallOutcome, ToolProxy
from muscle_mem_ros.ros.capture.recorder import Recorder, Session
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.capture.tracing import TraceTaker
from muscle_mem_ros.ros.messages.success import answered, refusal_reason
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.node import Node as RosNode
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.subscription import MessageInfo, Subscription
from service_msgs.msg import ServiceEventInfo

__all__ = ['ActionTap', 'EVENT_DEPTH', 'Ledger', 'ServiceTap', 'Tap', 'make_tap']

EVENT_DEPTH = 100
"""Events kept per topic before the tap takes them (bursts of concurrent calls)."""
_REMEMBERED = 4096
"""Finished call keys kept to drop the second side's duplicate events."""
_SETTLE_GRACE = 1.0
"""Seconds a saved recording waits for calls in flight beyond ``post_check_timeout``."""
_REQUESTS = (ServiceEventInfo.REQUEST_SENT, ServiceEventInfo.REQUEST_RECEIVED)

_Key = bytes | tuple[bytes, int]
"""A call's key: a goal id, or an event's client gid and sequence number."""


@dataclass(eq=False)
class _Call:
    """
    One call seen starting: the recording it belongs to, its payload and pre snapshot.

    :ivar after: The call that ended last before this one started, when this
        one's pre snapshot is older than that end: its post snapshot is used instead.
    :ivar ended: When the response was sent (monotonic); inf while running.
    :ivar post: Its post snapshot once recorded (None if it was not).
    :ivar posted: Set once ``post`` is final.
    """

    session: Session
    message: Any
    pre: Snapshot | None
    started: float
    after: _Call | None = None
    ended: float = float('inf')
    post: Snapshot | None = None
    posted: threading.Event = field(default_factory=threading.Event)
    taker: TraceTaker | None = None


class Ledger:
    """
    The call that ended last, across all taps of a node (steps of any tool follow each other).

    An agent that sends its next call before the sensors reported after the
    previous one ended leaves a pre snapshot from before that end (the proxy
    cannot be outrun: it answers after the post snapshot). A replay checks the
    next step right after the previous one's post-check, so such a call's pre
    snapshot is taken to be the previous call's post snapshot instead.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: _Call | None = None

    def ended(self, call: _Call) -> None:
        """Note ``call`` as the one that ended last."""
        with self._lock:
            self._last = call

    def previous(self, session: Session) -> _Call | None:
        """Return the call of ``session`` that ended last, if any."""
        with self._lock:
            last = self._last
        return last if last is not None and last.session is session else None


class _Bounded(OrderedDict[_Key, bytes | None]):
    """A dict that forgets its oldest entries beyond a size."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self._size = size

    def put(self, key: _Key, value: bytes | None) -> None:
        self[key] = value
        while len(self) > self._size:
            self.popitem(last=False)


class Tap:
    """
    Common part of the service and action taps: calls in flight, settle, own-call filter.

    :param node: The node that subscribes (the proxy node: its own client's
        endpoints are the ones filtered out).
    :param proxy: The tool's client side (records and replays).
    :param hub: Sensors for the pre snapshot.
    :param recorder: The active recording, if any.
    :param post_timeout: The node's ``post_check_timeout``; bounds the wait of
        a recording being saved, with a grace of a second.
    :param logger: Where to log.
    :param ledger: Shared by the node's taps (see :class:`Ledger`); default: one of its own.
    """

    def __init__(
        self, *, node: RosNode, proxy: ToolProxy, hub: SensorHub, recorder: Recorder,
        post_timeout: float, logger: RcutilsLogger, ledger: Ledger | None = None,
    ) -> None:
        self.tool = proxy.tool
        self._node = node
        self._proxy = proxy
        self._hub = hub
        self._recorder = recorder
        self._log = logger
        self._settle_timeout = post_timeout + _SETTLE_GRACE
        self._ledger = ledger if ledger is not None else Ledger()
        self._cond = threading.Condition()
        self._pending: dict[_Key, _Call] = {}
        self._done = _Bounded(_REMEMBERED)
        self._recording = 0
        self._own: frozenset[bytes] = frozenset()
        self._subs: list[Subscription[Any]] = []  # destroyed with the node
        self._said_empty = False
        self.topics: list[str] = []
        """The event topics this tap listens to."""
        self.own_calls = 0
        """Calls of the node's own client seen during a recording and dropped."""

    def _subscribe(self, event_type: type, topic: str,
                   callback: Callable[[Any, MessageInfo], None]) -> None:
        """Subscribe to one event topic (reliable, volatile: matches the usual publishers)."""
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=EVENT_DEPTH,
                         reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)

        def incompatible(_status: object) -> None:
            self._log.warning(
                f'{self.tool.server}: the events on {topic} are published with a QoS this '
                'node cannot receive (best effort?); publish them reliable')

        events = SubscriptionEventCallbacks(incompatible_qos=incompatible)
        self._subs.append(self._node.create_subscription(
            event_type, topic, callback, qos, event_callbacks=events))
        self.topics.append(topic)

    # -- the node's own client ------------------------------------------------------------

    def _own_service(self) -> str:
        """Return the service whose requests start calls (its client is the node's own)."""
        raise NotImplementedError

    def _is_own(self, gid: bytes) -> bool:
        """Return True if ``gid`` is a client endpoint of the node's own (replay) client."""
        if self._own:
            return gid in self._own  # the client lives as long as the tap: looked up once
        node = self._node
        name, namespace = node.get_name(), node.get_namespace()
        service = self._own_service()
        found = set()
        for topic, lookup in ((f'rq{service}Request', node.get_publishers_info_by_topic),
                              (f'rr{service}Reply', node.get_subscriptions_info_by_topic)):
            for info in lookup(topic, no_mangle=True):
                if info.node_name == name and info.node_namespace == namespace:
                    found.add(bytes(info.endpoint_gid)[:16])
        self._own = frozenset(found)
        return gid in self._own

    # -- calls ----------------------------------------------------------------------------

    def _begin(self, key: _Key, message: Any, at: float, gid: bytes) -> None:
        """Start a call: take the pre snapshot and keep it until the call ends."""
        session = self._recorder.active
        if session is None:
            return
        with self._cond:
            if at < session.opened:  # sent before the recording started, seen late
                self._done.put(key, None)
                return
            if key in self._pending or key in self._done:
                return  # the other side's event of a call already seen
            if self._is_own(gid[:16]):
                self._done.put(key, None)
                self.own_calls += 1
                return
            for stale in [k for k, c in self._pending.items() if c.session is not session]:
                self._proxy.end_trace(self._pending.pop(stale).taker)  # never ended
        pre = self._hub.capture(thumbnails=True)
        previous = self._ledger.previous(session)
        after = previous if previous is not None and _older(pre, previous.ended) else None
        with self._cond:
            self._pending[key] = _Call(session=session, message=message, pre=pre, started=at,
                                       after=after,
                                       taker=self._proxy.start_trace(session, at, pre))

    def _drop(self, key: _Key) -> None:
        """End a call without a step (a rejected goal)."""
        with self._cond:
            call = self._pending.pop(key, None)
            self._done.put(key, None)
            self._cond.notify_all()
        if call is not None:
            self._proxy.end_trace(call.taker)

    def _end(self, key: _Key, status: StepStatus, detail: str, at: float, response: Any) -> None:
        """End a call: record it (in a thread of its own: the post snapshot waits)."""
        with self._cond:
            call = self._pending.pop(key, None)
            self._done.put(key, None)
            if call is None:
                return
            self._recording += 1
            call.ended = at
        self._proxy.end_trace(call.taker)
        self._ledger.ended(call)
        out = CallOutcome(status, detail, call.started, at, response)
        threading.Thread(target=self._record, args=(call, out),
                         name=f'tap {self.tool.server}', daemon=True).start()

    def _record(self, call: _Call, out: CallOutcome) -> None:
        try:
            pre = call.pre
            if call.after is not None:  # see Ledger; waiting also keeps the steps in order
                call.after.posted.wait(self._settle_timeout)
                pre = call.after.post or pre
            call.post = self._proxy.record(call.session, call.message, pre, out, call.taker)
        except Exception as err:  # logged; the agent's call is not affected
            self._log.error(f'{self.tool.server}: recording the step failed: {err!r}')
        finally:
            call.posted.set()
            with self._cond:
                self._recording -= 1
                self._cond.notify_all()

    def settle(self, session: Session) -> None:
        """
        Wait until the calls of ``session`` seen so far are recorded (bounded).

        Registered with :meth:`.recorder.Recorder.add_settle`: the agent's answer
        can reach the node before the events of its last call, and that call's
        post snapshot takes up to ``post_check_timeout``.

        :param session: The recording about to be saved.
        """
        deadline = time.monotonic() + self._settle_timeout
        with self._cond:
            while self._recording or any(c.session is session for c in self._pending.values()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._log.warning(
                        f'{self.tool.server}: a call still running when the recording of '
                        f"'{session.task}' was saved is not part of it")
                    break
                self._cond.wait(remaining)
        if not self._said_empty and not any(
                self._node.count_publishers(topic) for topic in self.topics):
            self._said_empty = True
            self._log.warning(
                f'{self.tool.server}: nothing publishes {self.topics[0]}, so no call was '
                "recorded: configure introspection with CONTENTS on the agent's client or "
                'on the server (record_from: introspection)')

    def _no_contents(self, topic: str) -> None:
        """Say once that events arrive without their request (introspection METADATA)."""
        if not self._said_empty:
            self._said_empty = True
            self._log.warning(
                f'{self.tool.server}: events on {topic} carry no request: introspection is '
                'configured with METADATA; set CONTENTS or nothing can be recorded')


class ServiceTap(Tap):
    """Follow one service's ``_service_event`` topic."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._subscribe(self.tool.interface.Event, f'{self.tool.server}/_service_event',
                        self._on_event)

    def _own_service(self) -> str:
        return self.tool.server

    def _on_event(self, msg: Any, info: MessageInfo) -> None:
        event = msg.info
        gid = bytes(event.client_gid)
        key = (gid, event.sequence_number)
        if event.event_type in _REQUESTS:
            if not msg.request:
                return self._no_contents(self.topics[0])
            return self._begin(key, msg.request[0], _sent_at(info), gid)
        if not msg.response:
            return self._drop(key)
        response = msg.response[0]
        why = answered(response, self.tool.success)
        if why:
            return self._end(key, StepStatus.FAILED, why, _sent_at(info), response)
        return self._end(key, StepStatus.SUCCEEDED, '', _sent_at(info), response)


class ActionTap(Tap):
    """Follow one action's ``send_goal`` and ``get_result`` event topics."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        impl = self.tool.interface.Impl
        self._sent = _Bounded(_REMEMBERED)
        self._asked = _Bounded(_REMEMBERED)
        server = self.tool.server
        self._subscribe(impl.SendGoalService.Event,
                        f'{server}/_action/send_goal/_service_event', self._on_send_goal)
        self._subscribe(impl.GetResultService.Event,
                        f'{server}/_action/get_result/_service_event', self._on_get_result)

    def _own_service(self) -> str:
        return f'{self.tool.server}/_action/send_goal'

    def _on_send_goal(self, msg: Any, info: MessageInfo) -> None:
        event = msg.info
        gid = bytes(event.client_gid)
        key = (gid, event.sequence_number)
        if event.event_type in _REQUESTS:
            if self._recorder.active is None:
                return
            if not msg.request:
                return self._no_contents(self.topics[0])
            request = msg.request[0]
            goal_id = bytes(request.goal_id.uuid)
            self._sent.put(key, goal_id)
            return self._begin(goal_id, request.goal, _sent_at(info), gid)
        sent = self._sent.pop(key, None)
        if sent is not None and msg.response and not msg.response[0].accepted:
            self._drop(sent)

    def _on_get_result(self, msg: Any, info: MessageInfo) -> None:
        event = msg.info
        key = (bytes(event.client_gid), event.sequence_number)
        if event.event_type in _REQUESTS:
            if msg.request:
                asked = bytes(msg.request[0].goal_id.uuid)
                with self._cond:
                    wanted = asked in self._pending
                if wanted:
                    self._asked.put(key, asked)
            return
        goal_id = self._asked.pop(key, None)
        if goal_id is None:
            return
        if not msg.response:
            return self._drop(goal_id)
        wrapped = msg.response[0]
        why = refusal_reason(wrapped.result, self.tool.success)
        if wrapped.status == GoalStatus.STATUS_SUCCEEDED and why:
            return self._end(goal_id, StepStatus.FAILED, why, _sent_at(info), wrapped.result)
        if wrapped.status == GoalStatus.STATUS_SUCCEEDED:
            return self._end(goal_id, StepStatus.SUCCEEDED, '', _sent_at(info), wrapped.result)
        status = StepStatus.CANCELED if wrapped.status == GoalStatus.STATUS_CANCELED \
            else StepStatus.FAILED
        return self._end(goal_id, status, f'goal ended with status {wrapped.status}',
                         _sent_at(info), wrapped.result)


def _older(snapshot: Snapshot, since: float) -> bool:
    """Return True if some sensor in ``snapshot`` has no data received after ``since``."""
    return any(stamp <= since for stamp in snapshot.stamps.values())


def _sent_at(info: MessageInfo) -> float:
    """
    Return when an event was published, on the monotonic clock (the sensors' clock).

    The DDS source time (system clock) is moved onto the monotonic clock; without
    one, now.
    """
    now = time.monotonic()
    sent = info.get('source_timestamp', 0) if isinstance(info, dict) else 0
    if not sent:
        return now
    return min(now, now - (time.time() - sent * 1e-9))


def make_tap(**kwargs: Any) -> Tap:
    """Build the tap matching ``kwargs['proxy'].tool.kind``."""
    proxy: ToolProxy = kwargs['proxy']
    return ActionTap(**kwargs) if proxy.tool.kind is ToolKind.ACTION else ServiceTap(**kwargs)
