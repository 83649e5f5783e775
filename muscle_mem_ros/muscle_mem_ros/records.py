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
Typed records shared by the core, the store and the ROS node.

Everything here is immutable: a recorded step never changes after it is
written, and a replay sends exactly what was recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
import math
from typing import Any

from .resume import FailureKind

__all__ = [
    'Agreement',
    'Approval',
    'CheckFailure',
    'CheckResult',
    'CompareMode',
    'Declaration',
    'FailedView',
    'ImageLayout',
    'Node',
    'ReplayBook',
    'ReplayOutcome',
    'SensorSpec',
    'Series',
    'Snapshot',
    'Step',
    'StepStatus',
    'TaskStats',
    'ToolKind',
    'Trace',
    'TrajectoryInfo',
    'ViewPhase',
]


class ToolKind(Enum):
    """What kind of tool a step called."""

    ACTION = 'action'
    """A goal sent to a ROS action server; payload is the goal as CDR bytes."""
    SERVICE = 'service'
    """A request sent to a ROS service; payload is the request as CDR bytes."""
    FUNCTION = 'function'
    """A decorated Python function or method (Python API); payload is its stored arguments."""
    SUBTASK = 'subtask'
    """Another task run through the cache (:mod:`.replay.subtasks`); the tool is its name and
    the payload its name and parameters as JSON."""


class StepStatus(Enum):
    """How a recorded step ended."""

    SUCCEEDED = 'succeeded'
    """The tool reported success; only such steps are replayed."""
    FAILED = 'failed'
    """The tool reported failure (action aborted, service error, exception)."""
    CANCELED = 'canceled'
    """The step was canceled before it finished."""


class CompareMode(Enum):
    """
    How a built-in tolerance check reduces a feature vector's deviation.

    Every mode yields a score where 0 means identical and 1 means exactly at
    the tolerance; the check passes while the score is at most 1.
    """

    ABS = 'abs'
    """Largest per-element deviation, each element divided by its own tolerance."""
    NORM = 'norm'
    """Euclidean norm of the deviation divided by the (scalar) tolerance."""
    RMS = 'rms'
    """Root mean square of the per-element deviations over their tolerances."""
    EXACT = 'exact'
    """Every element must be equal; score is 0 or infinity."""
    ANGLE = 'angle'
    """Like ABS, on angles: deviations wrap into [-pi, pi) first."""
    IMAGE = 'image'
    """A camera's grid of cell means (:class:`ImageLayout`): the largest cell deviation over
    the (single) tolerance, the scene's overall brightness change removed per channel first;
    depth cells in metres as read. Cells that are NaN (masked, no valid depth) count for
    nothing (:mod:`~muscle_mem_ros.checks.images`)."""
    POSE = 'pose'
    """A transform (a TF sensor): ``x, y, z, qx, qy, qz, qw``, two tolerances (metres,
    radians); the larger of the origin's distance and the rotation's angle, each over its
    tolerance, the rotation compared as a rotation (:mod:`~muscle_mem_ros.checks.poses`)."""


@dataclass(frozen=True)
class ImageLayout:
    """
    Where each element of an image sensor's vector lies in the view.

    The vector is channel-major, then row, then column (:meth:`..checks.images.Grid.vector`).

    :ivar channels: 3 (colour), 1 (grey) or 0 (depth, one plane of metres).
    :ivar columns: Cells per row.
    :ivar rows: Rows of cells.
    :ivar cell: A cell's side, pixels.
    :ivar x: Left of the region of interest, pixels.
    :ivar y: Top of it.
    """

    channels: int
    columns: int
    rows: int
    cell: int
    x: int = 0
    y: int = 0

    @property
    def size(self) -> int:
        """Return the vector's length."""
        return max(self.channels, 1) * self.columns * self.rows

    def where(self, element: int) -> str:
        """Return the pixels of ``element``'s cell and its channel, for people."""
        plane = self.columns * self.rows
        channel, index = divmod(element, plane)
        row, column = divmod(index, self.columns)
        name = {3: ('red', 'green', 'blue'), 1: ('grey',)}.get(self.channels, ('depth',))
        return (f'cell at x {self.x + column * self.cell}, y {self.y + row * self.cell} '
                f'({self.cell}x{self.cell} px, {name[min(channel, len(name) - 1)]})')


@dataclass(frozen=True)
class SensorSpec:
    """
    Tolerance of one named sensor feature in a built-in check.

    :ivar name: Feature name as it appears in ``Snapshot.features``.
    :ivar tolerance: One tolerance per element, or a single value for all.
    :ivar mode: How the deviation is reduced to a score.
    :ivar max_age: Seconds; an older (or never received) reading fails the check.
        ``None`` disables the staleness test (Python API captures).
    :ivar bind: May inference bind goal fields to its elements: ``'auto'``, ``'never'``,
        or None for the default (:func:`~.bindings.sensor_sources`).
    :ivar image: Where an image sensor's elements lie (``CompareMode.IMAGE``); None
        otherwise. Left out of the repr: the mode and the vector's length say the same.
    """

    name: str
    tolerance: tuple[float, ...]
    mode: CompareMode = CompareMode.ABS
    max_age: float | None = None
    bind: str | None = None
    image: ImageLayout | None = field(default=None, repr=False)


@dataclass(frozen=True, eq=False)
class Snapshot:
    """
    Named feature vectors captured at one instant.

    :ivar features: Feature name -> float vector. Strings and enums are encoded to
        floats by whoever captures them, so ``EXACT`` compares them.
    :ivar stamps: Feature name -> time the underlying message was received
        (seconds, same clock as ``taken_at``).
    :ivar taken_at: When the snapshot was taken.
    :ivar user: Result of a user ``Check.capture`` (Python API), or None. A persistent
        store keeps JSON data and NumPy arrays; other objects need ``allow_pickle``.
    :ivar images: Camera sensor name -> a small PNG of the frame its features came from
        (longest side 96 px), for people to see what the camera saw: only the recorded
        pre and post snapshots carry them. No check, match or dedupe reads them.
    """

    features: dict[str, tuple[float, ...]] = field(default_factory=dict)
    stamps: dict[str, float] = field(default_factory=dict)
    taken_at: float = 0.0
    user: Any = None
    images: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Series:
    """
    One vector sampled while a step ran.

    :ivar times: Seconds since the goal was accepted (ascending); a sample taken between
        sending the goal and its acceptance has a small negative time.
    :ivar values: One vector per time, all of the same length.
    """

    times: tuple[float, ...]
    values: tuple[tuple[float, ...], ...]


@dataclass(frozen=True, eq=False)
class Trace:
    """
    What the watched sensors, and the action's feedback, did while a step ran.

    A replay of the step is judged against it while it runs (:mod:`.checks.tube`), by
    progress, not by time: on each new reading, the latest reading of every watched
    series together must lie within the checks' tolerance of the recording at one
    point along it, found forward from the furthest point reached so far (a replay
    may start late or run faster or slower; it may not leave the path, nor go back
    along it by more than a small window in all).

    :ivar rate: Hz the sensors were sampled at (a sensor's series is thinned to it).
    :ivar sensors: Sensor name -> its series (the feature vector of the sensor).
    :ivar feedback: The action's numeric feedback leaves as one series, or None (a
        service, no feedback, or more leaves than are watched).
    :ivar feedback_leaves: The leaf paths of ``feedback``'s elements, in order.
    """

    rate: float
    sensors: dict[str, Series] = field(default_factory=dict)
    feedback: Series | None = None
    feedback_leaves: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class Step:
    """
    One call of one tool, as recorded.

    :ivar tool: Tool name: the action or service name the agent used, or the
        Python function's qualified name.
    :ivar kind: Action, service or Python function.
    :ivar type_name: Interface type (``test_msgs/action/Fibonacci``), or for a
        Python function a hash of its source.
    :ivar payload: What replay sends: CDR bytes of the goal or request, or the
        arguments of a Python call (:meth:`~muscle_mem_ros.engine.arguments.CallSpec.encode`,
        JSON plus typed blobs, never a pickle unless allowed). Replayed byte-identical.
    :ivar payload_json: The same goal as JSON data: what people read, and the goal's
        leaves bindings learn from (:func:`~.bindings.goal_leaves` states the contract:
        numbers, a non-finite float as the string 'nan' or 'inf', never a
        leaf). A replay sends ``payload``, never this.
    :ivar pre: Snapshot taken just before the call, or None if unchecked.
    :ivar post: Snapshot taken just after the call, or None if unchecked.
    :ivar status: How the call ended.
    :ivar duration: Seconds the call took.
    :ivar trace: What the watched sensors and the feedback did during the call (an
        action recorded with sensors to watch), or None.
    """

    tool: str
    kind: ToolKind
    type_name: str
    payload: bytes
    payload_json: str = ''
    pre: Snapshot | None = None
    post: Snapshot | None = None
    status: StepStatus = StepStatus.SUCCEEDED
    duration: float = 0.0
    trace: Trace | None = None


@dataclass(frozen=True, eq=False)
class Node:
    """
    One step in a task's trajectory tree.

    :ivar id: Store-wide unique id.
    :ivar parent: Parent node id, or None for a first step.
    :ivar depth: Index of the step in its trajectories (0 for a first step).
    :ivar step: The recorded step.
    :ivar success_count: Times a trajectory through this node finished successfully
        (recorded or replayed); breaks ties between equally good candidates.
    :ivar last_used: Wall time the node was last recorded or replayed.
    :ivar terminal: True if some complete trajectory ends at this node.
    """

    id: int  # noqa: A003 (the public name, as in the store's schema)
    parent: int | None
    depth: int
    step: Step
    success_count: int = 1
    last_used: float = 0.0
    terminal: bool = False


@dataclass(frozen=True)
class TrajectoryInfo:
    """
    A complete learned trajectory: a root-to-leaf path that ended in success.

    :ivar id: Store-wide unique id (> 0).
    :ivar task: Task name.
    :ivar variant: Tree key within the task (the ROS node uses canonical params JSON;
        the Python API uses '').
    :ivar params_json: Parameters the trajectory was recorded with.
    :ivar node_ids: Node ids from the first step to the leaf.
    :ivar created: Wall time it was committed.
    :ivar last_used: Wall time it was last recorded or replayed to the end.
    :ivar replay_count: Times it was replayed to the end.
    :ivar robot_id: The robot that recorded it first (a fleet store); '' where the
        store does not keep it (SQLite, memory).
    :ivar body: Key of the body it was learned on (:mod:`muscle_mem_ros.body`); '' when
        unknown (learned before trajectories recorded it, or by the Python ``Engine``).
    """

    id: int  # noqa: A003 (the public name, as in the store's schema)
    task: str
    variant: str
    params_json: str
    node_ids: tuple[int, ...]
    created: float
    last_used: float
    replay_count: int = 0
    robot_id: str = ''
    body: str = ''


@dataclass(frozen=True)
class Agreement:
    """
    How often shadow runs agreed with the cache (:mod:`muscle_mem_ros.replay.shadow`).

    :ivar runs: Shadow runs that compared it.
    :ivar agreed: Those in which the cache's prediction matched the agent.
    """

    runs: int = 0
    agreed: int = 0

    @property
    def rate(self) -> float:
        """Return the share of runs that agreed (0 when none ran)."""
        return self.agreed / self.runs if self.runs else 0.0


class ReplayOutcome(Enum):
    """How one replay of a learned trajectory ended (booked per trajectory by the store)."""

    COMPLETED = 'c'
    """Every step replayed and passed its checks."""
    FALSE_HIT = 'f'
    """A step failed, or its post-check failed, after its pre-check had passed: the cache
    thought the world was the one recorded and it was not."""
    CANCELED = 'w'
    """A check during a step canceled it (the watch): the world left the recorded path."""
    HANDED_BACK = 'h'
    """A later step's pre-check failed and the agent took over from there: the world changed
    between steps, and the cache saw it before moving."""

    @property
    def failed(self) -> bool:
        """Return True for what counts against a trajectory: a false hit or a canceled step."""
        return self in (ReplayOutcome.FALSE_HIT, ReplayOutcome.CANCELED)


@dataclass(frozen=True)
class ReplayBook:
    """
    How the replays of one trajectory ended, and whether it stepped back.

    :ivar trajectory_id: The trajectory.
    :ivar task: Its task.
    :ivar completed: Replays that completed.
    :ivar false_hits: Replays in which a step, or its post-check, failed after its
        pre-check passed.
    :ivar canceled: Replays a check during a step canceled.
    :ivar handed_back: Replays a later pre-check handed to the agent.
    :ivar recent: The outcomes since it last stepped back (at most the rule's window),
        oldest first, one :class:`ReplayOutcome` value each.
    :ivar stepped_back: When it last stepped back (wall time; 0: never).
    :ivar agreed_then: Its agreeing shadow runs when it stepped back (trust earned since
        counts from there).
    :ivar why: Why it stepped back (the replays that failed), '' if it never did.
    """

    trajectory_id: int
    task: str
    completed: int = 0
    false_hits: int = 0
    canceled: int = 0
    handed_back: int = 0
    recent: str = ''
    stepped_back: float = 0.0
    agreed_then: int = 0
    why: str = ''

    @property
    def replays(self) -> int:
        """Return the replays booked."""
        return self.completed + self.false_hits + self.canceled + self.handed_back

    @property
    def false_hit_rate(self) -> float:
        """Return the share of replays that were false hits (0 when none was booked)."""
        return self.false_hits / self.replays if self.replays else 0.0


Declaration = tuple[int, str, str, float | None]
"""A declared binding as an approval saw it: (learned step id, field, source, max_shift)."""


@dataclass(frozen=True)
class Approval:
    """
    An operator's approval of what they could see: a task's trajectories then, or one of them.

    An approval covers the trajectories and the inferred bindings the approver was
    shown, not what is learned later (:func:`muscle_mem_ros.replay.gates.approve` records
    them), and the declared bindings (the params file's) on them as they were then: a
    later change to those holds what it covered. One recorded before approvals listed
    what they cover (``covers`` None) covers the trajectory it names, or for a whole
    task every trajectory created at or before ``at``, and no inferred binding; one
    recorded before they listed declared bindings (``declared`` None) covers none.

    :ivar task: The task.
    :ivar trajectory_id: The trajectory approved; 0 approves the whole task.
    :ivar who: Who approved.
    :ivar at: When (Unix time).
    :ivar covers: The trajectory ids it covers; None: not recorded (an old approval).
    :ivar bindings: The inferred bindings it covers: (learned step id, field, source).
    :ivar declared: The declared bindings it saw on what it covers: (learned step id,
        field, source, max_shift); None: not recorded (an older approval).
    """

    task: str
    trajectory_id: int
    who: str
    at: float
    covers: tuple[int, ...] | None = None
    bindings: tuple[tuple[int, str, str], ...] = ()
    declared: tuple[Declaration, ...] | None = None

    def covers_trajectory(self, info: TrajectoryInfo) -> bool:
        """Return True when this approval covers the trajectory ``info`` (of its task)."""
        if info.task != self.task:
            return False
        if self.covers is not None:
            return info.id in self.covers
        if self.trajectory_id:
            return info.id == self.trajectory_id
        return info.created <= self.at


class ViewPhase(Enum):
    """Which check of a learned step failed on a camera (:class:`FailedView`)."""

    PRE = 'pre'
    """Its pre-check: no candidate passed, and the walk stopped before this step."""
    POST = 'post'
    """Its post-check, after it was replayed."""
    DURING = 'during'
    """The check while it ran: its watch stopped the motion."""


@dataclass(frozen=True, eq=False)
class FailedView:
    """
    What a camera saw when a check on it failed: a thumbnail, for people.

    A store keeps the latest one per learned step, sensor and phase (each replaces the
    one before), so a robot that misses the same step a thousand times keeps one picture.
    Nothing compares it: it is what ``muscle-mem show --images`` writes beside the step's
    recorded views.

    :ivar task: The task.
    :ivar node_id: The learned step whose check failed; for a miss (no candidate passed),
        the candidate the failure was judged against (the one the walk would have taken).
    :ivar sensor: The camera sensor that failed.
    :ivar phase: Which check failed.
    :ivar at: When (Unix time).
    :ivar reason: Why, for people ('sensor camera deviates 0.32 (tolerance 0.1) at the cell
        at x 128, y 112').
    :ivar png: The frame the check judged, as a PNG thumbnail (longest side 96 px).
    """

    task: str
    node_id: int
    sensor: str
    phase: ViewPhase
    at: float
    reason: str
    png: bytes = field(repr=False)


@dataclass(frozen=True)
class TaskStats:
    """Per-task counters kept by the store."""

    name: str
    trajectory_count: int
    hits: int
    misses: int
    last_used: float


@dataclass(frozen=True)
class CheckFailure:
    """
    Why one recorded snapshot did not match the current one.

    :ivar sensor: Feature name that failed (or the user check's tool name).
    :ivar deviation: Raw deviation in the sensor's units (largest element for ABS);
        ``inf`` when the reading is missing or stale.
    :ivar tolerance: The tolerance it was compared against (largest element).
    :ivar score: Deviation over tolerance (1.0 = at the tolerance).
    :ivar reason: Short human text: 'out of tolerance', 'stale (0.8 s old)', 'missing'.
    :ivar kind: The same as a kind (compare this, not the text): OUT_OF_TOLERANCE,
        STALE, MISSING (also: not comparable) or UNCHECKED (no pre-check recorded).
    :ivar source: When a binding refused the candidate: its source (``sensor:object[0]``,
        ``param:place[1]``), whose shift or absence the reason describes; '' for a check.
    :ivar element: A check during a step: the element of ``sensor`` that left the tube
        (-1 otherwise). ``sensor`` is then a sensor name, or ``feedback:<leaf>``.
    :ivar value: Its value then (nan otherwise).
    :ivar expected: The nearest value the tube allowed then (nan otherwise).
    :ivar at: Seconds into the step (since the goal was accepted) it left the tube (nan
        otherwise).
    """

    sensor: str
    deviation: float
    tolerance: float
    score: float
    reason: str
    kind: FailureKind = FailureKind.MISSING
    source: str = ''
    element: int = -1
    value: float = math.nan
    expected: float = math.nan
    at: float = math.nan


@dataclass(frozen=True)
class CheckResult:
    """
    Outcome of comparing one recorded snapshot against the current one.

    :ivar passed: True when every sensor is within tolerance and fresh.
    :ivar score: 0 = identical, 1 = at the tolerance; the worst sensor's score.
    :ivar failures: One entry per failing sensor, worst first.
    """

    passed: bool
    score: float
    failures: tuple[CheckFailure, ...] = ()
