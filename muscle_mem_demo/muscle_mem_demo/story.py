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
The demo's scripted story: eleven runs of the pick-and-place, what each expects, the verdict.

ROS-free: :mod:`muscle_mem_demo.driver` performs a :class:`RunSpec` over ROS and returns a
:class:`RunOutcome`; :func:`judge` decides whether it held. The simulation is the judge of
the result: a run whose cube did not end on its own place target failed, whatever the cache
reported. Every run gives the place target as the task parameter ``place``; runs 6 and 7
show the cache's bindings (the cube moved beyond the literal tolerance, another target) and
must place within :data:`BOUND_PLACE_TOLERANCE`; run 8 moves the cube beyond the bindings'
range and must go to the agent; run 9 knocks the cube during the replay's first motion, which
the cache must cancel mid-motion (no other run may be canceled so). Runs 10 and 11 turn the
cube on the table (the cache reads it from /tf): turned 30 degrees, the replay turns the grasp
and the cube must land within :data:`BOUND_PLACE_TOLERANCE` and :data:`TURNED_YAW_TOLERANCE`;
turned 45 degrees, beyond the ``cube_turn`` binding's ``max_angle``, it is a miss saying the
angle, and the agent does it.

The same types describe the story's second part (:mod:`muscle_mem_demo.skill_story`): runs
of other tasks (:attr:`RunSpec.task`) judged by which tasks the agent was asked for
(:attr:`Expectation.asked`) and which subtasks the cache replayed in full
(:attr:`Expectation.from_cache`); an expectation left None there is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import enum
import json
import math
from typing import Any

from muscle_mem_demo.physics import OBJECT_START

__all__ = [
    'BOUND_PLACE_TOLERANCE',
    'BUMP_POSITION',
    'DROP_DELAY',
    'FAR_POSITION',
    'KNOCK_DELAY',
    'KNOCK_POSITION',
    'MIN_STOPPED_SHORT',
    'MOVED_PLACE_TARGET',
    'NUDGE_POSITION',
    'PLACE_TOLERANCE',
    'PLACE_TARGET',
    'SHIFT_POSITION',
    'STORY',
    'TASK',
    'TURNED_POSITION',
    'TURNED_YAW_TOLERANCE',
    'TURNED_YAWS',
    'Expectation',
    'KnockReport',
    'RunMode',
    'RunOutcome',
    'RunSpec',
    'judge',
]

TASK = 'pick_and_place'
"""The task of the story's eleven runs."""

PLACE_TARGET: tuple[float, float] = (0.4, -0.3)
"""Where the agent puts the cube (the agent's default place_x, place_y), metres."""

PLACE_TOLERANCE = 0.03
"""Largest horizontal distance from the target for the cube to count as placed, metres."""

BOUND_PLACE_TOLERANCE = 0.005
"""The same for the runs that show bindings (6, 7): a retargeted replay places this well."""

NUDGE_POSITION: tuple[float, float, float] = (OBJECT_START[0] + 0.01, OBJECT_START[1] - 0.01,
                                              OBJECT_START[2])
"""Run 3's cube: 1.4 cm from its start, inside the cache's 2 cm object tolerance."""

BUMP_POSITION: tuple[float, float, float] = (0.55, 0.07, OBJECT_START[2])
"""Runs 4 and 5: where the cube is knocked when the first arm goal ends (14 cm away)."""

SHIFT_POSITION: tuple[float, float, float] = (OBJECT_START[0] - 0.045, OBJECT_START[1] + 0.04,
                                              OBJECT_START[2])
"""Run 6's cube: 6.0 cm from its start, beyond the 2 cm tolerance, within max_shift 0.1 per
axis, and away from the bump (so the branch learned in run 4 does not match)."""

FAR_POSITION: tuple[float, float, float] = (OBJECT_START[0] - 0.11, OBJECT_START[1] - 0.11,
                                            OBJECT_START[2])
"""Run 8's cube: 15.6 cm from its start, 11 cm along each axis, beyond max_shift 0.1 (and
more than 0.1 from run 6's spot along y, should run 6 have been learned as a new branch)."""

MOVED_PLACE_TARGET: tuple[float, float] = (PLACE_TARGET[0], PLACE_TARGET[1] + 0.05)
"""Run 7's place target, given as the task parameter: 5 cm from the learned one, along y.

Along y, as on the earlier four-joint arm, whose learned target's x lay within the tool
sensor's 2 cm of the grasp point's x at home: the cache then could not tell that the move home
sets the tool's x anew. On the Panda (home x 0.307) either axis would do."""


KNOCK_POSITION: tuple[float, float, float] = (OBJECT_START[0] + 0.05, OBJECT_START[1] - 0.05,
                                              OBJECT_START[2])
"""Run 9's cube: knocked 7.1 cm from its start during the approach (step 0) of a replay."""

KNOCK_DELAY = 0.15
"""Simulated seconds into the approach (0.8 s) at which run 9's cube is knocked: early, so
the arm is far from the cube when the cache cancels the motion, even at rtf 4."""

DROP_DELAY = 0.1
"""Seconds after the arm starts its first motion at which a run's ``drop`` lets the camera's
distractor box go (timed by the driver from /joint_states): early in the 0.8 s approach, so the
camera sees the box fall while the step still runs."""

TURNED_POSITION: tuple[float, float, float] = (OBJECT_START[0] + 0.015, OBJECT_START[1] - 0.015,
                                               OBJECT_START[2])
"""Runs 10 and 11's cube: 2.1 cm from its start (within max_shift), turned on the table."""

TURNED_YAWS: tuple[float, float] = (math.radians(30.0), math.radians(45.0))
"""Run 10's turn (within the cube_turn binding's max_angle 0.6 rad, 34 degrees) and run 11's
(beyond it), radians about the world z axis."""

TURNED_YAW_TOLERANCE = math.radians(3.0)
"""Largest turn of the placed cube from its learned rest (yaw 0, as the cube looks the same
every quarter turn: nearest of the four), radians, in runs that turn it."""

MIN_STOPPED_SHORT = 0.03
"""Run 9: the arm must stop at least this far from where the recorded approach ends, m."""


class RunMode(enum.Enum):
    """How a run was carried out, read from the cache's ExecuteTask result."""

    MISS = 'miss -> agent'
    """Nothing learned matched: the agent did every step."""
    REPLAY = 'replay'
    """Every step came from the cache; the agent was not called."""
    HANDOFF = 'replay -> agent'
    """The cache replayed a prefix (or canceled a step mid-motion), a check failed, the
    agent finished the task."""


@dataclass(frozen=True)
class Expectation:
    """What a run must show for the story to hold."""

    mode: RunMode | None
    """How it must be carried out (None: not judged)."""
    replayed: int | None
    """Steps replayed by the cache (None: not judged, nor ``by_agent``)."""
    by_agent: int | None
    """Steps done by the agent."""
    agent_calls: tuple[int, ...] | None
    """resume_from_step of each agent call, in order; () means the agent is not called
    (None: not judged)."""
    asked: tuple[str, ...] | None = None
    """The task of each agent call, in order (a parent, then the subtasks the cache sent
    back to the agent); () means the agent is not called; None: not judged."""
    from_cache: tuple[str, ...] = ()
    """Subtasks the cache must have replayed in full (a HIT event below the run's own task),
    each at least once."""
    substitutes: tuple[str, ...] = ()
    """Source prefixes (``sensor:object``, ``param:place``) the cache must have substituted
    from, each at least once, as its ExecuteTask result reports."""
    place_tolerance: float = PLACE_TOLERANCE
    """Largest horizontal distance of the cube from the run's target afterwards, metres."""
    canceled_step: int | None = None
    """The step the cache must cancel mid-motion (a check during it failed); None: no step
    may be canceled so."""
    noticed: tuple[str, ...] = ()
    """Words the cache's first failed check of the run must say, each (``camera``, ``cell
    at``: the sensor and the cell it names); () judges nothing."""
    yaw_tolerance: float | None = None
    """Largest turn of the placed cube from yaw 0 (nearest quarter turn), radians; None: not
    judged."""


@dataclass(frozen=True)
class KnockReport:
    """
    The robot's account of a knock during a goal (its Knock message), ROS-free.

    Times are monotonic seconds of the machine; points are grasp points (x, y, z), metres.
    """

    knocked_at: float
    cancel_at: float
    """NaN when the goal was not canceled."""
    outcome: str
    """How the goal ended: succeeded, canceled, aborted."""
    time_into_goal: float
    """Simulated seconds from the goal's start to the knock."""
    target: tuple[float, float, float]
    """Where the goal sends the grasp point: where the recorded approach ends."""
    at_knock: tuple[float, float, float]
    at_cancel: tuple[float, float, float]
    at_end: tuple[float, float, float]
    sent_at: float = math.nan
    """When the run's task was sent (monotonic), to place the knock on the run's time axis."""

    @property
    def reaction(self) -> float:
        """Seconds from the knock to the cancel reaching the robot (NaN: not canceled)."""
        return self.cancel_at - self.knocked_at

    @property
    def stopped_short(self) -> float:
        """Distance from where the arm stopped to where the goal would have taken it, m."""
        return math.dist(self.at_end, self.target)

    @property
    def after_knock(self) -> float:
        """Distance the grasp point travelled (straight line) from the knock to its stop, m."""
        return math.dist(self.at_end, self.at_knock)


@dataclass(frozen=True)
class RunSpec:
    """One run of the story: how to change the world first, and what must happen."""

    number: int
    """1-based position in the story."""
    title: str
    """What the run shows."""
    expect: Expectation
    """The verdict's reference."""
    nudge: tuple[float, float, float] | None = None
    """Move the cube here before the run (after the reset)."""
    turn: float = 0.0
    """The nudged cube's turn about the world z axis, radians."""
    bump: tuple[float, float, float] | None = None
    """Knock the cube here when the run's first arm goal ends (MoveObject after_goals=1)."""
    knock: tuple[float, float, float] | None = None
    """Knock the cube here :data:`KNOCK_DELAY` s into the run's first arm goal (MoveObject
    delay), while the arm moves."""
    distractor: tuple[float, float, float] | None = None
    """Drop the camera's distractor box here before the run (after the reset); it has landed
    when the task is sent."""
    drop: tuple[float, float, float] | None = None
    """Drop the distractor box here ``drop_delay`` s after the arm starts the run's first
    motion, while it moves."""
    drop_delay: float = DROP_DELAY
    """Seconds after the arm starts the run's first motion that the box is let go."""
    camera_noise: float | None = None
    """Set the robot's ``camera_noise`` (grey levels) to this before the run; None: leave it."""
    place: tuple[float, float] = PLACE_TARGET
    """The place target, sent as the task parameter ``place`` (unless ``place_param`` is
    False: then the place the task itself knows, for judging)."""
    task: str = TASK
    """The task sent to the cache."""
    place_param: bool = True
    """Send ``place`` as the task parameter; False: no parameters."""

    @property
    def params_json(self) -> str:
        """Return the task parameters of the run, as ExecuteTask's ``params_json``."""
        if not self.place_param:
            return ''
        return json.dumps({'place': [float(v) for v in self.place]})


STORY: tuple[RunSpec, ...] = (
    RunSpec(number=1, title='first pick-and-place',
            expect=Expectation(mode=RunMode.MISS, replayed=0, by_agent=8, agent_calls=(0,))),
    RunSpec(number=2, title='same again',
            expect=Expectation(mode=RunMode.REPLAY, replayed=8, by_agent=0, agent_calls=())),
    RunSpec(number=3, title='object nudged 1.4 cm (< 2 cm tol.)', nudge=NUDGE_POSITION,
            expect=Expectation(mode=RunMode.REPLAY, replayed=8, by_agent=0, agent_calls=())),
    RunSpec(number=4, title='object bumped 14 cm after step 0', bump=BUMP_POSITION,
            expect=Expectation(mode=RunMode.HANDOFF, replayed=1, by_agent=8,
                               agent_calls=(1,))),
    RunSpec(number=5, title='same bump again', bump=BUMP_POSITION,
            expect=Expectation(mode=RunMode.REPLAY, replayed=9, by_agent=0, agent_calls=())),
    RunSpec(number=6, title='cube moved 6 cm: grasp retargeted', nudge=SHIFT_POSITION,
            expect=Expectation(mode=RunMode.REPLAY, replayed=8, by_agent=0, agent_calls=(),
                               substitutes=('sensor:object',),
                               place_tolerance=BOUND_PLACE_TOLERANCE)),
    RunSpec(number=7, title='place target moved 5 cm (param)', place=MOVED_PLACE_TARGET,
            expect=Expectation(mode=RunMode.REPLAY, replayed=8, by_agent=0, agent_calls=(),
                               substitutes=('param:place',),
                               place_tolerance=BOUND_PLACE_TOLERANCE)),
    RunSpec(number=8, title='cube moved 16 cm: beyond max_shift', nudge=FAR_POSITION,
            expect=Expectation(mode=RunMode.MISS, replayed=0, by_agent=8, agent_calls=(0,))),
    RunSpec(number=9, title='cube knocked 7 cm during step 0', knock=KNOCK_POSITION,
            expect=Expectation(mode=RunMode.HANDOFF, replayed=0, by_agent=8, agent_calls=(0,),
                               canceled_step=0)),
    RunSpec(number=10, title='cube turned 30 deg: grasp turned', nudge=TURNED_POSITION,
            turn=TURNED_YAWS[0],
            expect=Expectation(mode=RunMode.REPLAY, replayed=8, by_agent=0, agent_calls=(),
                               substitutes=('sensor:object',),
                               place_tolerance=BOUND_PLACE_TOLERANCE,
                               yaw_tolerance=TURNED_YAW_TOLERANCE)),
    RunSpec(number=11, title='cube turned 45 deg: beyond max_angle', nudge=TURNED_POSITION,
            turn=TURNED_YAWS[1],
            expect=Expectation(mode=RunMode.MISS, replayed=0, by_agent=8, agent_calls=(0,),
                               noticed=('target.pose.orientation would turn', 'max_angle'),
                               yaw_tolerance=TURNED_YAW_TOLERANCE)),
)
"""The eleven runs the demo performs, in order, each from a reset world."""


@dataclass
class RunOutcome:
    """What happened in one run, as observed over ROS and in the simulation."""

    spec: RunSpec
    """The run."""
    success: bool = False
    """ExecuteTask result: success."""
    cache_hit: bool = False
    """ExecuteTask result: cache_hit."""
    replayed: int = 0
    """ExecuteTask result: steps_replayed."""
    by_agent: int = 0
    """ExecuteTask result: steps_by_agent."""
    message: str = ''
    """ExecuteTask result message, or why the run could not be performed."""
    agent_calls: tuple[int, ...] = ()
    """resume_from_step of each call the agent announced during the run."""
    agent_tasks: tuple[str, ...] = ()
    """The task of each call the agent announced during the run, in order."""
    hits: tuple[tuple[str, int], ...] = ()
    """(task, depth) of every full replay the cache reported (HIT events), in order:
    depth 0 is the run's own task, 1 a subtask it called."""
    wall_time: float = math.nan
    """Seconds from sending the goal to its result."""
    object_start: tuple[float, float, float] | None = None
    """The cube's position in the simulation when the task was sent."""
    final_object: tuple[float, float, float] | None = None
    """The cube's position in the simulation after the run."""
    final_yaw: float = math.nan
    """The cube's turn about the world z axis after the run, radians (NaN: unknown)."""
    unobserved: str = ''
    """Why the cube's final position is not known (the robot's streams were not fresh)."""
    substituted: tuple[dict[str, object], ...] = ()
    """What the cache substituted (ExecuteTask result ``substituted``): one dict per field,
    keys step, tool, field, source, recorded, value."""
    check_failure: str = ''
    """The cache's first failed check of the run, if any (from its events)."""
    canceled: tuple[tuple[int, float], ...] = ()
    """(step, seconds into the step) of every check that failed during a step (the cache
    canceled the step mid-motion), from its CHECK_FAILED events."""
    knock: KnockReport | None = None
    """The robot's account of the run's knock, if the run had one and it was reported."""
    check_failed_at: float = math.nan
    """Stamp (ROS time, seconds) of the run's first check that failed during a step."""
    stops: tuple[tuple[float, str], ...] = ()
    """(stamp in ROS time seconds, detail) of every STOPPED event of the run, in order: what
    happened while the cache stopped a step (the cancel's answer, a stop sent, the goal's
    end, at rest)."""
    goals: tuple[dict[str, object], ...] = ()
    """The robot's record of every arm goal executed during the run (its ``~/goals``)."""
    trace_times: list[float] = field(default_factory=list)
    """Seconds since the goal was sent, one per joint_states message."""
    trace_positions: list[tuple[float, ...]] = field(default_factory=list)
    """Arm joint positions, one row per joint_states message."""
    trace_origin: float = math.nan
    """ROS time (seconds) the trace times count from: when the task was sent."""
    motion_started: float = math.nan
    """ROS time (s) at which the arm first moved in the run (NaN: it did not)."""
    dropped_at: float = math.nan
    """ROS time (s) at which the run's ``drop`` asked the sim to let the distractor box go
    (NaN: none, or the sim refused)."""
    frames: list[tuple[float, Any]] = field(default_factory=list)
    """(stamp in ROS time s, rgb8 pixels) of the camera's frames in the run's first seconds,
    when the driver keeps them (:mod:`muscle_mem_demo.camera_frames`)."""
    failures: tuple[str, ...] = ()
    """Why the run does not hold (filled in by :func:`judge`); empty when it holds."""

    @property
    def rest_after(self) -> float:
        """Seconds from the cache's first STOPPED (the cancel's answer) to at rest, or NaN."""
        rest = [at for at, detail in self.stops if detail.startswith('at rest after')]
        if not rest or not self.stops:
            return math.nan
        return rest[0] - self.stops[0][0]

    @property
    def overlaps(self) -> tuple[str, ...]:
        """Return the ids of the motions the robot saw start while another still executed."""
        return tuple(str(g['goal_id']) for g in self.goals if g.get('overlaps'))

    @property
    def mode(self) -> RunMode | None:
        """How the run was carried out, None when it did not finish."""
        if not self.success:
            return None
        if self.cache_hit or self.by_agent == 0:
            return RunMode.REPLAY
        return RunMode.HANDOFF if self.replayed > 0 or self.canceled else RunMode.MISS

    @property
    def placement_error(self) -> float:
        """Horizontal distance of the cube from the run's place target, m (inf if unknown)."""
        if self.final_object is None:
            return math.inf
        x, y, _ = self.final_object
        tx, ty = self.spec.place
        return math.hypot(x - tx, y - ty)

    @property
    def yaw_error(self) -> float:
        """Turn of the cube from yaw 0 after the run, nearest quarter turn, radians (or NaN)."""
        quarter = 0.5 * math.pi
        return abs((self.final_yaw + 0.5 * quarter) % quarter - 0.5 * quarter)

    @property
    def placed(self) -> bool:
        """Return True when the cube rests on the table within the run's place tolerance."""
        return (
            self.final_object is not None
            and self.placement_error <= self.spec.expect.place_tolerance
            and self.final_object[2] < 0.035
        )

    @property
    def substituted_sources(self) -> tuple[str, ...]:
        """Return the distinct sources the cache substituted from, sorted."""
        return tuple(sorted({str(s.get('source', '')) for s in self.substituted}))

    @property
    def from_cache(self) -> tuple[str, ...]:
        """Return the subtasks the cache replayed in full during the run, in order."""
        return tuple(task for task, depth in self.hits if depth > 0)

    @property
    def held(self) -> bool:
        """Return True when judged and nothing failed."""
        return not self.failures


def judge(outcome: RunOutcome) -> RunOutcome:
    """Fill in ``outcome.failures`` against its spec's expectation; return it."""
    expect = outcome.spec.expect
    failures: list[str] = []
    if not outcome.success:
        failures.append(f'task failed: {outcome.message}')
    if expect.mode is not None and outcome.mode is not expect.mode:
        mode = outcome.mode.value if outcome.mode else 'none'
        failures.append(f'mode {mode}, expected {expect.mode.value}')
    if expect.replayed is not None and (
            (outcome.replayed, outcome.by_agent) != (expect.replayed, expect.by_agent)):
        failures.append(
            f'{outcome.replayed} replayed / {outcome.by_agent} by agent, expected '
            f'{expect.replayed} / {expect.by_agent}'
        )
    if expect.agent_calls is not None and outcome.agent_calls != expect.agent_calls:
        failures.append(
            f'agent calls (resume steps) {list(outcome.agent_calls)}, expected '
            f'{list(expect.agent_calls)}'
        )
    if expect.asked is not None and outcome.agent_tasks != expect.asked:
        failures.append(
            f'the agent was asked for {list(outcome.agent_tasks) or "nothing"}, expected '
            f'{list(expect.asked) or "nothing"}'
        )
    for task in expect.from_cache:
        if task not in outcome.from_cache:
            failures.append(f'subtask {task} not replayed from the cache (replayed in full: '
                            f'{", ".join(outcome.from_cache) or "none"})')
    sources = outcome.substituted_sources
    for prefix in expect.substitutes:
        if not any(source.startswith(prefix) for source in sources):
            failures.append(f'nothing substituted from {prefix} (substituted from: '
                            f'{", ".join(sources) or "nothing"})')
    failures += _judge_cancel(outcome)
    missing = [word for word in expect.noticed if word not in outcome.check_failure]
    if missing:
        failures.append(f'the cache\'s failed check does not say {", ".join(missing)} '
                        f'({outcome.check_failure or "no check failed"})')
    turn = outcome.spec.expect.yaw_tolerance
    if turn is not None and not outcome.yaw_error <= turn:
        failures.append(f'object placed turned {math.degrees(outcome.yaw_error):.1f} deg '
                        f'(allowed {math.degrees(turn):.0f} deg)')
    if not outcome.placed:
        where = f'unknown: {outcome.unobserved}' if outcome.final_object is None else (
            f'{outcome.placement_error * 1000:.1f} mm from the target '
            f'{tuple(outcome.spec.place)}, allowed '
            f'{outcome.spec.expect.place_tolerance * 1000:.0f} mm'
        )
        failures.append(f'object not placed ({where})')
    outcome.failures = tuple(failures)
    return outcome


def _judge_cancel(outcome: RunOutcome) -> list[str]:
    """Return why the run's mid-motion cancels (and its knock) do not hold, if they do not."""
    expect = outcome.spec.expect.canceled_step
    steps = [step for step, _ in outcome.canceled]
    if expect is None:
        return [f'step {steps[0]} canceled mid-motion, no step expected canceled'] if steps else []
    failures = []
    if steps != [expect]:
        failures.append(f'steps canceled mid-motion {steps}, expected [{expect}]')
    knock = outcome.knock
    if outcome.spec.knock is not None and (knock is None or knock.outcome != 'canceled'):
        failures.append('the knocked goal was not canceled (robot: '
                        f'{knock.outcome if knock else "no knock reported"})')
    elif knock is not None and not knock.stopped_short >= MIN_STOPPED_SHORT:
        failures.append(f'the arm stopped {knock.stopped_short * 100:.1f} cm from the end of '
                        f'the recorded motion, expected >= {MIN_STOPPED_SHORT * 100:.0f} cm')
    return failures
