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
The hook for live events: whatever watches a running node pushes here, open pages receive.

The page on a store shows what was learned; attached to a node it also shows what the
cache decides as it happens. This module is the seam between the two: an event source
(a subscriber to the node's ``~/events``, a bag being played, a test) calls
:meth:`EventHub.publish` with one event as plain data, from any thread; every open page
holds a subscription (:meth:`EventHub.subscribe`) through the server's ``/events``
endpoint, a Server-Sent Events stream the page's few lines of script append to its log.
A page opened later first gets the last :data:`KEPT` events.

Nothing here knows ROS: an event is a mapping with at least ``kind`` (``miss``,
``replay``, ``check_failed``, ``stop``, ``at_rest``, ``hand_back``, ``branch_learned``,
...) and ``text`` (the reason, for people), and may carry ``task``, ``trajectory``,
``step``, ``mark`` (seconds into the step) and ``at`` (Unix time), which the page turns into
a link to the step's trace with that moment marked. ``serve --attach`` feeds a node's
``~/events`` here (:mod:`muscle_mem_ros.ros.execution.eventfeed`).
A slow page never blocks the source: each subscription's queue is bounded and a page
that falls behind loses its oldest events, and says so.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
import json
import queue
import threading
import time
from typing import Any

__all__ = ['EventHub', 'KEPT', 'Subscription']

KEPT = 200
"""Events kept for a page that opens later."""

_QUEUE = 1000
"""Events one page may fall behind by before its oldest are dropped."""


class Subscription:
    """One open page's queue of events (:meth:`EventHub.subscribe`)."""

    def __init__(self, hub: EventHub, backlog: list[dict[str, Any]]) -> None:
        self._hub = hub
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(_QUEUE)
        self.dropped = 0
        """Events this page lost because it fell behind."""
        for event in backlog:
            self.put(event)

    def put(self, event: dict[str, Any] | None) -> None:
        """Queue one event (None: the hub closed), dropping the oldest when full."""
        while True:
            try:
                self._queue.put_nowait(event)
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()
                    self.dropped += 1
                except queue.Empty:
                    pass

    def events(self, *, idle: float = 15.0) -> Iterator[dict[str, Any] | None]:
        """
        Yield events as they come; None after ``idle`` seconds without one (a keep-alive).

        Ends when the hub closes or the subscription is cancelled.
        """
        while True:
            try:
                event = self._queue.get(timeout=idle)
            except queue.Empty:
                yield None
                continue
            if event is None:
                return
            yield event

    def cancel(self) -> None:
        """Stop receiving (the page went away)."""
        self._hub.unsubscribe(self)
        self.put(None)


class EventHub:
    """
    Fan events out to every open page: the place an event source pushes to.

    :param source: What the events come from, shown on the page (``node /muscle_mem``);
        '' while nothing is attached (the page then says it shows the store only).
    """

    def __init__(self, *, source: str = '') -> None:
        self._lock = threading.Lock()
        self._kept: deque[dict[str, Any]] = deque(maxlen=KEPT)
        self._subscribers: list[Subscription] = []
        self._closed = False
        self.source = source

    def publish(self, event: Mapping[str, Any]) -> None:
        """
        Send one event to every open page (any thread; never blocks on a page).

        :param event: At least ``kind`` and ``text``; ``at`` (Unix time) is added when
            missing. It must be JSON data.
        :raises ValueError: no ``kind``, or not JSON data.
        """
        if not event.get('kind'):
            raise ValueError('an event needs a kind')
        data = {**event, 'at': float(event.get('at') or time.time())}
        json.dumps(data)  # raises for what a page could not read
        with self._lock:
            if self._closed:
                return
            self._kept.append(data)
            subscribers = list(self._subscribers)
        for sub in subscribers:
            sub.put(data)

    def subscribe(self) -> Subscription:
        """Return a new page's subscription, primed with the events kept."""
        with self._lock:
            sub = Subscription(self, list(self._kept))
            if self._closed:
                sub.put(None)
            else:
                self._subscribers.append(sub)
            return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Forget one page's subscription."""
        with self._lock:
            if sub in self._subscribers:
                self._subscribers.remove(sub)

    def recent(self) -> list[dict[str, Any]]:
        """Return the events kept, oldest first."""
        with self._lock:
            return list(self._kept)

    @property
    def attached(self) -> bool:
        """Return True when an event source is attached."""
        return bool(self.source)

    def close(self) -> None:
        """End every page's stream (the server stops)."""
        with self._lock:
            self._closed = True
            subscribers, self._subscribers = self._subscribers, []
        for sub in subscribers:
            sub.put(None)
