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
The node's judge: sensor snapshots, the ToleranceCheck, the matcher and the bindings.

Everything that judges a candidate on the node's side is here, in two classes:
:class:`SensorJudge`, one per node (the hub, the check, the matcher's index), and
:class:`WalkJudge`, one per walk: the walk's ``Judge`` (:mod:`muscle_mem_ros.replay.walk`)
and the ``Senses`` of the core's :class:`~muscle_mem_ros.bindings.judge.BindingJudge`.
One step's candidates are judged once: the gate's filter, the usable tools and the
sensors' health (:meth:`SensorJudge.unusable`), then literally by the matcher
(:meth:`SensorJudge.pick`) while neither the candidates have bindings nor the world has
moved, else under their plans by the binding judge, which sees the world through the
:class:`WalkJudge` (one snapshot per step) and compares by
:func:`~muscle_mem_ros.bindings.judge.checked`.

Before the first pre-check of a walk the judge waits for sensor data received
after the request, and, within ``sensor_startup_timeout`` of the node's start,
for the first message of every sensor that has not sent one yet (saying so in
the feedback). A pre-check picks the best candidate whose recorded pre snapshot
matches a fresh snapshot (the matcher's index, fast for large fan-outs). A
post-check waits until every sensor reported data received after the step ended
(at most ``post_check_timeout``), then compares the recorded post snapshot with a
fresh one.

Node specifics:

* Steps recorded without a pre snapshot (no sensors) are replayed only when
  ``allow_unchecked_replay`` is true; otherwise they never pass.
* Stale or missing sensor data fails a check (the core's ToleranceCheck).
* A step whose tool is not configured is never a candidate.
* A gate (``replay_requires``) that holds back every candidate of a step misses
  with the gate's reason (:meth:`WalkJudge.gate`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
import math
import time
from typing import Any

from muscle_mem_ros.bindings.judge import (
    BindingJudge, Bound, checked, Compared, Observation, PlanSource, SensorSenses,
)
from muscle_mem_ros.checks.matcher import Matcher
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.records import (
    CheckFailure, Node, SensorSpec, Snapshot, ToolKind, ViewPhase)
from muscle_mem_ros.replay.walk import blamed, Miss, Reporter, Verdict
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.store.base import NodeList

__all__ = ['describe_failure', 'missed', 'OnFailed', 'SensorJudge', 'WalkJudge']

OnFailed = Callable[[ViewPhase, Node | None, CheckFailure | None], None]
"""Told of a failed check as it fails: which, the step it judged, why (:mod:`.failedviews`)."""


def describe_failure(failure: CheckFailure) -> str:
    """
    Render a check failure: 'sensor object deviates 0.081 (tolerance 0.02)'.

    A pose's says both parts: 'sensor dock moved 0.05 m and turned 1.2 deg (tolerance
    0.03 m, 2.9 deg)'. A refused binding's reason names its source and shift already: it
    stands as it is.
    """
    if failure.source:
        return failure.reason
    if failure.kind is FailureKind.OUT_OF_TOLERANCE and ': moved ' in failure.reason:
        return f'sensor {failure.sensor} {failure.reason.partition(": ")[2]}'  # a pose's
    if failure.kind is FailureKind.OUT_OF_TOLERANCE:
        where = failure.reason.partition(' at the ')[2]  # an image's cell, when it says one
        return (
            f'sensor {failure.sensor} deviates {failure.deviation:.4g} '
            f'(tolerance {failure.tolerance:.4g})' + (f' at the {where}' if where else '')
        )
    if failure.sensor:
        return f'sensor {failure.sensor} {failure.reason}'
    return failure.reason


def missed(kind: FailureKind, reason: str, failure: CheckFailure | None = None,
           node: Node | None = None) -> Verdict:
    """Return the verdict of a step no candidate passes (``failure`` judged against ``node``)."""
    return Verdict((), Miss(kind, reason, failure, node))


class SensorJudge:
    """
    Judge candidates literally by the configured sensors.

    :param hub: Sensor capture.
    :param tools: Names of the configured tools (``Step.tool``).
    :param sensors: Tolerance specs of the configured sensors (may be empty).
    :param allow_unchecked_replay: Replay steps recorded without a pre snapshot.
    :param post_timeout: Max seconds to wait for data newer than a step's end.
    :param sensor_startup_timeout: Seconds from now (the node's start) during which a walk
        waits for sensors that have not sent their first message yet.
    """

    def __init__(self, *, hub: SensorHub, tools: Collection[str], sensors: Sequence[SensorSpec],
                 allow_unchecked_replay: bool, post_timeout: float,
                 sensor_startup_timeout: float = 0.0) -> None:
        self.hub = hub
        self._tools = frozenset(tools)
        self.check = ToleranceCheck(sensors=sensors) if sensors else None
        self._matcher = Matcher(check=self.check) if self.check is not None else None
        self.allow_unchecked = allow_unchecked_replay
        self._post_timeout = post_timeout
        self._startup_deadline = time.monotonic() + sensor_startup_timeout

    def usable(self, candidates: Sequence[Node]) -> Sequence[Node]:
        """
        Return the candidates whose tool is configured or that call a subtask.

        The same list object when all are: keeping the store's list keeps its identity,
        under which the matcher caches the candidates' index.
        """
        pairs = (candidates.tool_kinds() if isinstance(candidates, NodeList)
                 else {(c.step.tool, c.step.kind) for c in candidates})
        if all(self._runs(tool, kind) for tool, kind in pairs):
            return candidates  # (a store's list is not read whole: it may hold unread nodes)
        return [c for c in candidates if self._runs(c.step.tool, c.step.kind)]

    def _runs(self, tool: str, kind: ToolKind) -> bool:
        return tool in self._tools or kind is ToolKind.SUBTASK

    def warm(self, candidates: Sequence[Node]) -> int:
        """Index a candidate set for matching now, not on first use; return its usable size."""
        usable = self.usable(candidates)
        if self._matcher is not None:
            self._matcher.warm(usable)
        return len(usable)

    def prepare(self, reporter: Reporter | None = None) -> None:
        """
        Wait (at most ``post_check_timeout``) for sensor data received from now on.

        The first pre-check must not judge the world by a message older than
        the request; later pre-checks follow a post-check that already waited.
        Right after the node's start a sensor may not have spoken yet (its
        publisher is still starting, discovery takes a while under load):
        until ``sensor_startup_timeout`` after the start, its first message is
        waited for, and the reporter is told. On timeout the check runs
        anyway, and stale or missing data fails it.

        :param reporter: Told what is waited for (ExecuteTask feedback), if given.
        """
        if not self.hub.names:
            return
        since = self.hub.now()
        silent = self.hub.silent()
        remaining = self._startup_deadline - since
        if silent and remaining > 0:
            if reporter is not None:
                reporter.progress(step=0, total=0,
                                  detail=f'waiting for sensors: {", ".join(silent)}')
            self.hub.wait_first(remaining)
        self.hub.wait_newer(since, self._post_timeout)

    def unusable(self, candidates: Sequence[Node], usable: Sequence[Node],
                 step: int) -> Verdict | None:
        """Return the miss when nothing can be judged (no usable tool, a broken sensor)."""
        if not usable:
            if not candidates:
                return missed(FailureKind.NO_CANDIDATE, f'nothing learned for step {step}')
            tools = ', '.join(sorted({c.step.tool for c in candidates}))
            return missed(FailureKind.NO_CANDIDATE, f'step {step}: tool {tools} not configured')
        problems = self.hub.problems()
        if problems:
            name, problem = next(iter(problems.items()))
            failure = CheckFailure(name, math.inf, 0.0, math.inf, f'unusable: {problem}',
                                   FailureKind.MISSING)
            return missed(FailureKind.PRE_CHECK, f'pre-check failed at step {step}: {problem}',
                          failure)
        return None

    def _explained(self, failure: CheckFailure) -> CheckFailure:
        """
        Return a missing sensor's failure with why it is unusable, when the capture says.

        A frame is decoded when a snapshot is taken: a camera that now sends another size
        is found unusable by the capture that the check then finds it missing from.
        """
        problem = self.hub.problems().get(failure.sensor) \
            if failure.kind is FailureKind.MISSING else None
        if not problem:
            return failure
        return CheckFailure(failure.sensor, math.inf, 0.0, math.inf, f'unusable: {problem}',
                            FailureKind.MISSING)

    def pick(self, usable: Sequence[Node], step: int) -> Verdict:
        """
        Return the matcher's best candidate (or the blind ones), else why none passes.

        :param usable: The step's candidates with a configured tool (:meth:`usable`), when
            :meth:`unusable` found nothing that stops judging them.
        """
        failure: CheckFailure | None = None
        blamed_node: Node | None = None
        if self._matcher is not None:
            selection = self._matcher.select(usable, self.hub.capture(), now_time=self.hub.now())
            if selection.node is not None:
                score = selection.result.score if selection.result is not None else 0.0
                return Verdict(((selection.node, score),))
            worst = blamed([(node, result.failures[0]) for node, result in selection.rejected
                            if result.failures])
            if worst is not None:
                blamed_node, failure = worst[0], self._explained(worst[1])
        if self.allow_unchecked:
            blind = [c for c in usable if c.step.pre is None or not c.step.pre.features]
            if blind:
                return Verdict(tuple((c, 0.0) for c in blind))
        if failure is not None and failure.kind is not FailureKind.UNCHECKED:
            return missed(FailureKind.PRE_CHECK, f'pre-check failed at step {step}: '
                          f'{describe_failure(failure)}', failure, blamed_node)
        return missed(
            FailureKind.UNCHECKED, f'step {step} was recorded without sensor checks and '
            'allow_unchecked_replay is false', failure, blamed_node,
        )

    def post_check(self, node: Node, step: int, ended: float,
                   expected: Snapshot | None = None) -> Miss | None:
        """
        Judge ``node``'s post-check with data newer than ``ended``; None when it passed.

        :param expected: What the world should look like (the recording moved by a bound
            walk's shift); default the recorded post snapshot.
        """
        recorded = node.step.post if expected is None else expected
        if self.check is None or recorded is None or not recorded.features:
            return None
        failure: CheckFailure | None
        if not self.hub.wait_newer(ended, self._post_timeout):
            lagging = ', '.join(self.hub.lagging(ended))
            failure = CheckFailure(
                lagging, math.inf, 0.0, math.inf,
                f'sent no data within {self._post_timeout:g} s after the step',
                FailureKind.STALE,
            )
        else:
            result = self.check.evaluate(recorded, self.hub.capture(), now_time=self.hub.now())
            failure = result.failures[0] if not result.passed and result.failures else None
        if failure is None:
            return None
        failure = self._explained(failure)
        return Miss(FailureKind.POST_CHECK,
                    f'post-check failed at step {step}: {describe_failure(failure)}', failure,
                    node)


class WalkJudge(SensorSenses):
    """
    The judge of one walk on the node, and the binding judge's senses (one snapshot a step).

    One per walk: its binding judge keeps the walk's shift. :attr:`bindings` is that
    judge, for the walk's executor (what to send, and that a step ran).

    :param sensors: The node's literal judge.
    :param plans: The tree's plans, as the run read them.
    :param params: The run's task parameters.
    :param tolerance: Tolerance of a sensor element.
    :param on_failed: Told of each pre-check that no candidate passed and each post-check
        that failed, as it fails (the walk's failed views); None: nobody is.
    """

    def __init__(self, *, sensors: SensorJudge, plans: PlanSource, params: Mapping[str, Any],
                 tolerance: Callable[[str], float | None],
                 on_failed: OnFailed | None = None) -> None:
        super().__init__(tolerance)
        self._sensors = sensors
        self._on_failed = on_failed
        self.bindings = BindingJudge(plans=plans, params=params, senses=self)
        self._trusted: frozenset[int] | None = None
        self._held = ''
        self._seen: Observation | None = None
        self._now_time = 0.0

    def gate(self, trusted: frozenset[int] | None, held: str) -> None:
        """
        Let only ``trusted`` learned steps replay (None: all).

        :param held: Why the others do not (:meth:`...replay.gates.Trusted.held`): a miss that
            only they would have served gives it as its reason.
        """
        self._trusted, self._held = trusted, held

    def prepare(self, reporter: Reporter) -> None:
        """Wait for fresh sensor data."""
        self._sensors.prepare(reporter)

    def pick(self, candidates: Sequence[Node], step: int) -> Verdict:
        """Judge literally while nothing is bound or moved, else each candidate under its plan."""
        verdict = self._pick(candidates, step)
        miss = verdict.miss
        if self._on_failed is not None and not verdict.passing and miss is not None:
            self._on_failed(ViewPhase.PRE, miss.node, miss.failure)
        return verdict

    def _pick(self, candidates: Sequence[Node], step: int) -> Verdict:
        if self._trusted is not None:
            allowed = [c for c in candidates if c.id in self._trusted]
            if not allowed and candidates:
                return missed(FailureKind.NO_CANDIDATE, self._held)
            candidates = allowed
        sensors = self._sensors
        usable = sensors.usable(candidates)
        early = sensors.unusable(candidates, usable, step)
        if early is not None:
            return early
        if self.bindings.literal(usable):
            return sensors.pick(usable, step)
        now = sensors.hub.capture()
        self._now_time = sensors.hub.now()
        self._seen = Observation(now, self.bindings.current(now))
        passing, failures = self.bindings.pick(usable, step)
        if passing:
            return Verdict(tuple(passing))
        worst = blamed(failures)
        if worst is None:
            return missed(FailureKind.NO_CANDIDATE, f'nothing learned for step {step}')
        node, failure = worst
        others = [f'node {n.id}: {describe_failure(f)}' for n, f in failures if n is not node][:3]
        more = f' (other candidates: {"; ".join(others)})' if others else ''
        reason = f'pre-check failed at step {step}: {describe_failure(failure)}{more}'
        return missed(FailureKind.PRE_CHECK, reason, failure, node)

    def post_check(self, node: Node, step: int, ended: float) -> Miss | None:
        """Judge the post-check against the recording moved by the shift."""
        miss = self._sensors.post_check(node, step, ended,
                                        expected=self.bindings.expected_post(node))
        if miss is not None and self._on_failed is not None:
            self._on_failed(ViewPhase.POST, miss.node, miss.failure)
        return miss

    def observe(self, node: Node) -> Observation | None:
        """Return the step's snapshot, taken once for all its candidates (:meth:`pick`)."""
        return self._seen

    def compare(self, node: Node, expected: Snapshot | None, seen: Observation,
                bound: Bound | None) -> Compared:
        """Check ``expected`` against the snapshot; the distance counts the bindings' shift."""
        return checked(self._sensors.check, expected, seen.now, now_time=self._now_time,
                       bound=bound, unchecked=self._sensors.allow_unchecked)
