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
What a camera saw when a check on it failed, kept with the store for people to look at.

A check that fails on a camera (out of tolerance: the view is not the recorded one) holds
on to the frame it judged the moment it fails (:meth:`WalkViews.judged`: a reference to
the message, from :meth:`~..capture.sensors.SensorHub.last_frames`, microseconds), because
the camera's last frame moves on with the next capture. The walk then says which of those
failures it reports (:meth:`WalkViews.keep`): a post-check's always (at once), a pre-check's
and a watch's when the walk stops on it (a terminal step whose longer branch does not pass
completes the task: nothing failed; a goal that succeeded before the watch's cancel arrived
is judged by its post-check). Only then is the frame decoded into a thumbnail
and written (:meth:`~muscle_mem_ros.store.base.Store.keep_failed_view`), by one worker
thread: the hand-back to the agent never waits for the PNG (some 5 ms) nor the store. A
write that fails is logged and shown as a degraded store (:mod:`..node.health`), never
raised; a view that finds the worker's queue full is dropped, saying so.

Which check: ``pre`` (no candidate passed; the view is kept for the candidate the miss
blames, :func:`~muscle_mem_ros.replay.walk.blamed`), ``post`` (the replayed step's), or
``during`` (the watch's, held when its token is cancelled: the frame that tripped it, not
one taken while the robot stopped).
"""

from __future__ import annotations

from dataclasses import replace
import logging
import queue
import threading
import time

from muscle_mem_ros.checks.tube import left_tube
from muscle_mem_ros.records import CheckFailure, FailedView, Node, ViewPhase
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.execution.judge import describe_failure
from muscle_mem_ros.ros.node.health import StoreHealth
from muscle_mem_ros.store import Store

__all__ = ['FailedViews', 'QUEUE', 'WalkViews']

QUEUE = 8
"""Failed views waiting for their thumbnail at most; more are dropped (a burst of misses)."""

_log = logging.getLogger(__name__)
_Job = tuple[FailedView, bytes]


class FailedViews:
    """
    The node's keeper of failed views: one worker thread makes and stores their thumbnails.

    :param store: Where they are kept.
    :param hub: The cameras (their last frames, their thumbnails).
    :param health: Notes a write that failed, and one that succeeded after.
    """

    def __init__(self, *, store: Store, hub: SensorHub, health: StoreHealth) -> None:
        self.store = store
        self.hub = hub
        self._health = health
        self._jobs: queue.Queue[_Job | None] = queue.Queue(QUEUE)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def walk(self, task: str) -> WalkViews:
        """Return the failed views of one walk of ``task``."""
        return WalkViews(self, task)

    def put(self, view: FailedView, raw: bytes) -> None:
        """Have ``view``'s thumbnail made from the frame ``raw`` and kept (never blocks)."""
        with self._lock:
            if self._closed:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, daemon=True,
                                                name='muscle_mem failed views')
                self._thread.start()
        try:
            self._jobs.put_nowait((view, raw))
        except queue.Full:
            _log.warning('failed view of %s (node %d) dropped: %d are being kept already',
                         view.sensor, view.node_id, QUEUE)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            view, raw = job
            try:
                self._keep(view, raw)
            except Exception as err:  # noqa: BLE001 - a picture for people never stops a node
                _log.warning('failed view of %s (node %d) not kept: %r', view.sensor,
                             view.node_id, err)

    def _keep(self, view: FailedView, raw: bytes) -> None:
        png = self.hub.thumbnail(view.sensor, raw)
        if png is None:
            return
        done = replace(view, png=png)
        self._health.bookkeep(f'failed view of {view.sensor}',
                              lambda: self.store.keep_failed_view(done))

    def close(self, timeout: float = 2.0) -> None:
        """Keep what is queued (waiting at most ``timeout`` s), then stop the worker."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is None:
            return
        try:
            self._jobs.put(None, timeout=timeout)
        except queue.Full:
            return
        thread.join(timeout)


class WalkViews:
    """
    The failed views of one walk: held when a check fails, kept when the walk reports it.

    :param keeper: The node's keeper.
    :param task: The task walked.
    """

    def __init__(self, keeper: FailedViews, task: str) -> None:
        self._keeper = keeper
        self._task = task
        self._lock = threading.Lock()
        self._held: dict[int, tuple[CheckFailure, FailedView, bytes]] = {}

    def judged(self, phase: ViewPhase, node: Node | None, failure: CheckFailure | None) -> None:
        """
        Hold the frame a failed check judged, when it failed on a camera's view.

        A post-check's is kept at once: the walk reports every post-check that fails.
        """
        if node is None or failure is None or failure.kind is not FailureKind.OUT_OF_TOLERANCE \
                or failure.sensor not in self._keeper.hub.views:
            return
        raw = self._keeper.hub.last_frames((failure.sensor,)).get(failure.sensor)
        if raw is None:
            return
        reason = left_tube(failure) if phase is ViewPhase.DURING else describe_failure(failure)
        view = FailedView(task=self._task, node_id=node.id, sensor=failure.sensor,
                          phase=phase, at=time.time(), reason=reason, png=b'')
        with self._lock:
            self._held[id(failure)] = (failure, view, raw)
        if phase is ViewPhase.POST:
            self.keep(failure)

    def tripped(self, node: Node, failure: CheckFailure | None) -> None:
        """Hold what a step's watch saw the moment it tripped: its token's cancel calls this."""
        self.judged(ViewPhase.DURING, node, failure)

    def keep(self, failure: CheckFailure | None) -> None:
        """Keep the view held for ``failure`` (the one the walk reports), if one is."""
        if failure is None:
            return
        with self._lock:
            held = self._held.pop(id(failure), None)
            self._held.clear()
        if held is not None and held[0] is failure:
            self._keeper.put(held[1], held[2])
