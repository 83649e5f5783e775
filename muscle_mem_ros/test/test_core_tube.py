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

"""The check during a step, ROS-free: the tube, what is watched, and the walk's rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import math
import threading
import time

from muscle_mem_ros.bindings.judge import During
from muscle_mem_ros.bindings.rules import element_tolerances, moved_sensors, sensor_elements
from muscle_mem_ros.checks.tube import FEEDBACK, left_tube, Tube, Watched
from muscle_mem_ros.records import (
    CheckFailure, CompareMode, Node, SensorSpec, Series, Snapshot, Step, StepStatus, ToolKind,
    Trace,
)
from muscle_mem_ros.replay.walk import StepEvent, Verdict, walk
from muscle_mem_ros.replay.watching import FEEDBACK_FLOOR, watched_elements
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.store import MemoryStore
import numpy as np
import pytest

TIMES = tuple(float(t) for t in np.arange(0.0, 2.0, 0.025))
"""A two-second step sampled at 40 Hz."""


def ramp(start: float, end: float) -> tuple[tuple[float, ...], ...]:
    """Element 0 goes from ``start`` to ``end`` over the step; element 1 stays at 0.5."""
    return tuple((float(v), 0.5) for v in np.linspace(start, end, len(TIMES)))


def tube(*, low: float = 0.0, high: float = 0.0, angle: bool = False,
         values: tuple[tuple[float, ...], ...] | None = None, scale: float = 1.0) -> Tube:
    trace = Trace(40.0, {'ee': Series(TIMES, values or ramp(0.0, 0.4))})
    return Tube(trace, [Watched('ee', 0, 0.02, angle, low, high),
                        Watched('ee', 1, 0.02, angle)], scale=scale)


def test_readings_on_the_recorded_path_pass_late_or_early():
    t = tube()
    assert t.judge('ee', 1.0, (0.2, 0.5)) is None
    # Late by a second (a planner took longer), then early: both on the path.
    assert t.judge('ee', 2.0, (0.21, 0.5)) is None
    assert t.judge('ee', 2.1, (0.4, 0.5)) is None
    # Between two samples of a fast motion: on the segment.
    two = Trace(40.0, {'ee': Series((0.0, 0.1), ((0.0, 0.5), (0.4, 0.5)))})
    assert Tube(two, [Watched('ee', 0, 0.02)]).judge('ee', 0.05, (0.27, 0.5)) is None


def test_a_reading_off_the_path_fails_with_the_element_value_and_time():
    failure = tube().judge('ee', 1.0, (0.2, 0.56))
    assert failure is not None
    assert (failure.sensor, failure.element, failure.kind) == \
        ('ee', 1, FailureKind.OUT_OF_TOLERANCE)
    assert failure.value == pytest.approx(0.56)
    assert failure.expected == pytest.approx(0.5)
    assert failure.deviation == pytest.approx(0.06)
    assert failure.at == 1.0
    assert 'sensor ee[1] was 0.56 at 1.00 s into the step' in left_tube(failure)
    assert tube().judge('ee', 1.0, (0.45, 0.5)) is not None  # beyond where the path ends


def test_progress_does_not_go_back_along_the_path():
    t = tube()
    assert t.judge('ee', 1.5, (0.35, 0.5)) is None
    assert t.judge('ee', 1.6, (0.345, 0.5)) is None  # jitter within a segment and its neighbour
    failure = t.judge('ee', 1.7, (0.05, 0.5))  # back to where the motion came from
    assert failure is not None and failure.element == 0
    assert 0.3 < failure.expected < 0.35  # the nearest point it may still be at


def test_one_reading_lies_on_the_path_at_one_progress():
    values = tuple((float(a), float(b)) for a, b in
                   zip(np.linspace(0, 0.4, len(TIMES)), np.linspace(1, 2, len(TIMES))))
    # Element 0 as recorded at 0.5 s, element 1 as at 1.8 s: each on its path, never together.
    failure = tube(values=values).judge('ee', 1.0, (0.1, 1.9))
    assert failure is not None and failure.kind is FailureKind.OUT_OF_TOLERANCE
    # Element 1 from a message one sample newer (a JointState merged from two publishers).
    assert tube(values=values).judge('ee', 1.0, (values[20][0], values[21][1])) is None


def test_a_shift_between_low_and_high_moves_the_path():
    # A retargeted move: the recording ends 0.1 further; anything between is explained.
    t = tube(low=0.0, high=0.1)
    assert t.judge('ee', 1.0, (0.25, 0.5)) is None
    assert t.judge('ee', 1.95, (0.49, 0.5)) is None
    assert t.judge('ee', 1.95, (0.55, 0.5)) is not None


def test_the_tolerance_scale_widens_every_element():
    assert tube().judge('ee', 1.0, (0.2, 0.53)) is not None
    assert tube(scale=2.0).judge('ee', 1.0, (0.2, 0.53)) is None


def test_angles_compare_across_the_wrap():
    values = tuple((float(v), 0.5) for v in np.linspace(3.0, 3.3, len(TIMES)))
    wrapped = tuple((math.remainder(a, 2 * math.pi), b) for a, b in values)
    t = tube(values=wrapped, angle=True)
    assert t.judge('ee', 1.9, (math.remainder(3.29, 2 * math.pi), 0.5)) is None
    assert t.judge('ee', 1.9, (3.295, 0.5)) is None
    assert t.judge('ee', 1.9, (3.6, 0.5)) is not None


def test_two_threads_judge_the_state_one_at_a_time():
    """
    The sampler's thread judges sensor readings, the feedback callback's thread feedback.

    Each judge reads and writes the one state and the progress reached: a judge that ran
    while another was half way saw a state neither had left (issue 43 item 17).
    """
    values = ramp(0.0, 0.4)
    # the feedback holds still: the two series fit together whichever reads first
    trace = Trace(40.0, {'ee': Series(TIMES, values)},
                  feedback=Series(TIMES, tuple((1.0,) for _ in values)), feedback_leaves=('x',))
    t = Tube(trace, [Watched('ee', 0, 0.02), Watched(FEEDBACK, 0, 0.02)])
    earliest = t._earliest  # the search over the state; made slow so two judges would meet
    inside, most, guard = [0], [0], threading.Lock()

    def slow(start: int) -> int | None:
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.002)
        try:
            return earliest(start)
        finally:
            with guard:
                inside[0] -= 1

    t._earliest = slow  # type: ignore[method-assign]
    failures: list[CheckFailure] = []

    def feed(series: str) -> None:
        for at, value in zip(TIMES[::4], values[::4]):
            failure = t.judge(series, at, (1.0,) if series == FEEDBACK else value)
            if failure is not None:
                failures.append(failure)

    threads = [threading.Thread(target=feed, args=(name,)) for name in ('ee', FEEDBACK)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1, f'{most[0]} judges ran at once'
    assert failures == []
    assert t.judge('ee', 2.0, values[0]) is not None  # the progress reached was kept


def test_a_missing_or_nan_reading_fails():
    t = tube()
    assert t.judge('ee', 1.0, (0.2,)).kind is FailureKind.MISSING
    assert math.isinf(t.judge('ee', 1.0, (math.nan, 0.5)).deviation)
    assert t.judge('other', 1.0, (5.0,)) is None  # not watched


def traced(*, feedback: bool = True) -> Node:
    """Return a learned action step that moved ``ee`` 0.4 along x and left ``box`` alone."""
    values = ramp(0.0, 0.4)
    trace = Trace(40.0, {'ee': Series(TIMES, values),
                         'box': Series(TIMES, tuple((1.0, 2.0) for _ in TIMES)),
                         'scan': Series(TIMES, tuple((3.0, 3.0) for _ in TIMES))},
                  feedback=Series(TIMES, tuple((v[0], 1.0) for v in values)) if feedback
                  else None,
                  feedback_leaves=('x', 'w') if feedback else ())
    step = Step(tool='/arm', kind=ToolKind.ACTION, type_name='a/action/A', payload=b'',
                pre=Snapshot({'ee': (0.0, 0.5), 'box': (1.0, 2.0)}),
                post=Snapshot({'ee': (0.4, 0.5), 'box': (1.0, 2.0)}), duration=2.0,
                trace=trace)
    return Node(1, None, 0, step)


SPECS = [SensorSpec('ee', (0.02,), CompareMode.NORM), SensorSpec('box', (0.03, 0.04)),
         SensorSpec('scan', (0.1,))]


def test_watched_elements_as_recorded():
    watched, unwatched = watched_elements(traced(), sensors=SPECS, watch={'ee', 'box'},
                                          during=None, feedback_tolerance=0.25)
    assert [w.label for w in watched] == ['ee[0]', 'ee[1]', 'box[0]', 'box[1]',
                                          'feedback:x', 'feedback:w']
    assert unwatched == ('scan: watch is off for it',)
    assert [w.tolerance for w in watched][:4] == [0.02, 0.02, 0.03, 0.04]
    # A feedback leaf's tolerance: a share of its recorded range, at least the floor.
    assert watched[4].tolerance == pytest.approx(0.25 * 0.4)
    assert watched[5].tolerance == FEEDBACK_FLOOR
    assert all(w.series == FEEDBACK for w in watched[4:])


def test_a_retargeted_step_moves_what_followed_and_leaves_out_the_unpredictable():
    node = traced()
    # The whole motion moved by 0.1 (start and end): the recorded path moved.
    during = During(pre=Snapshot({'ee': (0.1, 0.5), 'box': (1.1, 2.0)}),
                    post=Snapshot({'ee': (0.5, 0.5), 'box': (1.1, 2.0)}),
                    unpredictable=frozenset({'sensor:ee[1]'}), retargeted=True)
    watched, unwatched = watched_elements(node, sensors=SPECS, watch={'ee', 'box'},
                                          during=during, feedback_tolerance=0.1)
    by_label = {w.label: w for w in watched}
    assert (by_label['ee[0]'].low, by_label['ee[0]'].high) == pytest.approx((0.1, 0.1))
    assert (by_label['box[0]'].low, by_label['box[0]'].high) == pytest.approx((0.1, 0.1))
    assert set(unwatched) == {
        'ee[1]: moved unpredictably by the retarget', 'scan: watch is off for it',
        'feedback:x: the goal or the world moved from the recording',
        'feedback:w: the goal or the world moved from the recording'}


def test_a_motion_whose_start_and_end_move_apart_is_not_watched_where_it_moved():
    # From a moved start to the recorded end (a carry from a moved cube to a fixed place):
    # the path's shape changes, no offset explains it; the box the step did not move stays.
    node = traced(feedback=False)
    during = During(pre=Snapshot({'ee': (0.1, 0.5), 'box': (1.1, 2.0)}),
                    post=Snapshot({'ee': (0.4, 0.5), 'box': (1.1, 2.0)}))
    watched, unwatched = watched_elements(node, sensors=SPECS, watch={'ee', 'box'},
                                          during=during, feedback_tolerance=0.1)
    # the arc may bulge in any element
    assert unwatched == tuple(f'ee[{i}]: start and end shifted apart, the path changes shape'
                              for i in range(2)) + ('scan: watch is off for it',)
    assert [w.label for w in watched] == ['box[0]', 'box[1]']


def test_a_step_sent_as_recorded_into_a_moved_world_leaves_its_feedback_unwatched():
    # Sent byte for byte, but the walk's shift moved the box before it: the goal's feedback
    # (where it is, what is left) is not the recording's; the sensors are judged moved.
    node = traced()
    during = During(pre=Snapshot({'ee': (0.0, 0.5), 'box': (1.1, 2.0)}),
                    post=Snapshot({'ee': (0.4, 0.5), 'box': (1.1, 2.0)}))
    watched, unwatched = watched_elements(node, sensors=SPECS, watch={'ee', 'box'},
                                          during=during, feedback_tolerance=0.1)
    assert {u.partition(': ')[0] for u in unwatched} == {'feedback:x', 'feedback:w', 'scan'}
    assert [w.label for w in watched] == ['ee[0]', 'ee[1]', 'box[0]', 'box[1]']
    assert (watched[2].low, watched[2].high) == pytest.approx((0.1, 0.1))


def test_nothing_is_watched_without_a_trace():
    node = traced()
    bare = Node(1, None, 0, Step(tool='/arm', kind=ToolKind.ACTION, type_name='t',
                                 payload=b'', pre=node.step.pre, post=node.step.post))
    assert watched_elements(bare, sensors=SPECS, watch={'ee'}, during=None,
                            feedback_tolerance=0.1) == ((), ())


@dataclass
class Out:
    status: StepStatus
    ended: float = 0.0
    detail: str = ''
    kind: FailureKind | None = None
    failure: CheckFailure | None = None


class Judge:

    def prepare(self, reporter):
        pass

    def pick(self, candidates, step):
        return Verdict([(c, 0.0) for c in candidates])

    def post_check(self, node, step, ended):
        return None


class Reporter:

    def __init__(self):
        self.events = []

    def event(self, *, kind, step, trajectory_id=0, detail='', failure=None):
        self.events.append((kind, step, detail, failure))

    def progress(self, *, step, total, detail):
        pass


@pytest.mark.parametrize('status', [StepStatus.FAILED, StepStatus.SUCCEEDED])
def test_the_walk_hands_back_the_step_whose_during_check_failed(status):
    store = MemoryStore()
    node = traced()
    store.add_trajectory(task='t', variant='', params_json='{}', steps=[node.step, node.step])
    failure = CheckFailure('box', 0.1, 0.03, 3.3, 'left the tube', element=0, value=1.1,
                           expected=1.0, at=0.7)

    class Executor:

        def execute(self, node, step, cancel):
            if step == 0:
                return Out(StepStatus.SUCCEEDED)
            # Whatever the server answered after the cancel, the world left the tube.
            return Out(status, kind=FailureKind.DURING_CHECK, failure=failure,
                       detail=left_tube(failure))

    reporter = Reporter()
    result = walk(store=store, task='t', variant='', judge=Judge(), executor=Executor(),
                  reporter=reporter)
    assert not result.complete
    assert result.kind is FailureKind.DURING_CHECK
    assert result.resume.step == 1 and result.steps_replayed == 1
    assert result.failure is failure
    kind, step, detail, said = reporter.events[-1]
    assert (kind, step, said) == (StepEvent.CHECK_FAILED, 1, failure)
    assert detail.startswith('check during step 1 (/arm) failed: sensor box[0] was 1.1')


# -- one progress for the whole step, on recorded-looking motions ---------------------------------

RATE = 40.0
"""Hz the trace is sampled at, and the sensors are read at."""

Motion = Callable[[float], dict[str, tuple[float, ...]]]
"""The true state of every sensor at a time into the recorded step."""


def minimum_jerk(s: float) -> float:
    """Return how far along a smooth point-to-point motion is at ``s`` of its time (0..1)."""
    s = min(max(s, 0.0), 1.0)
    return s ** 3 * (10.0 - 15.0 * s + 6.0 * s * s)


def lift(t: float) -> dict[str, tuple[float, ...]]:
    """Lift a grasped cube 20 cm in 2 s: the grasp point, and the cube 3 cm below it."""
    z = 0.05 + 0.20 * minimum_jerk(t / 2.0)
    return {'ee': (0.40, -0.10, z), 'object': (0.40, -0.10, z - 0.03)}


def descend(t: float, *, cube: float = 0.40) -> dict[str, tuple[float, ...]]:
    """From above the home (x 0.3) down to a cube at ``cube`` in 2 s; the cube stays."""
    s = minimum_jerk(t / 2.0)
    return {'ee': (0.30 + (cube + 0.0 - 0.30) * s, 0.0, 0.25 - 0.20 * s),
            'object': (cube, 0.0, 0.02)}


def l_path(t: float) -> dict[str, tuple[float, ...]]:
    """Drive a base 30 cm along x in 3 s, then 30 cm along y in 3 s (x, y, yaw)."""
    return {'odom': (0.10 * min(max(t, 0.0), 3.0), 0.10 * min(max(t - 3.0, 0.0), 3.0), 0.0)}


def drive(t: float) -> dict[str, tuple[float, ...]]:
    """Drive a base 60 cm along x at 10 cm/s (x, y, yaw)."""
    return {'odom': (0.10 * min(max(t, 0.0), 6.0), 0.0, 0.0)}


DURATION = {lift: 2.0, descend: 2.0, l_path: 6.0, drive: 6.0}


def record(motion: Motion, *, noise: float = 0.001, seed: int = 0) -> Trace:
    """
    Return the trace of ``motion`` as the sampler writes it.

    Each sensor is received at 40 Hz at its own phase with a little jitter (its own
    publisher), and reads the truth plus Gaussian noise.
    """
    rng = np.random.default_rng(seed)
    sensors = {}
    for name in motion(0.0):
        phase = rng.uniform(0.0, 1.0 / RATE)
        times = np.arange(-0.02, DURATION[motion] + 0.3, 1.0 / RATE) + phase + \
            rng.uniform(-0.002, 0.002, int(np.ceil((DURATION[motion] + 0.32) * RATE)))
        values = tuple(tuple(float(v) for v in np.asarray(motion(float(t))[name])
                             + rng.normal(0.0, noise, len(motion(0.0)[name])))
                       for t in times)
        sensors[name] = Series(tuple(float(t) for t in times), values)
    return Trace(RATE, sensors)


def watch_all(trace: Trace, tolerance: float = 0.02, *,
              shift: dict[tuple[str, int], tuple[float, float]] | None = None) -> Tube:
    """Return the tube of every element of every sensor, each moved by its ``shift``."""
    shift = shift or {}
    return Tube(trace, [Watched(name, i, tolerance, False, *shift.get((name, i), (0.0, 0.0)))
                        for name, series in trace.sensors.items()
                        for i in range(len(series.values[0]))])


Disturb = Callable[[float, str, np.ndarray], np.ndarray]


def replay(tube: Tube, motion: Motion, progress: Callable[[float], float], *,
           lag: dict[str, float] | None = None, disturb: Disturb | None = None,
           seed: int = 1) -> tuple[float, CheckFailure] | None:
    """
    Feed ``tube`` the readings of a replay whose state at ``t`` is ``motion(progress(t))``.

    Each sensor is read at 40 Hz at its own phase, ``lag`` seconds behind the others'
    (a later message, a slower publisher), with noise; ``disturb`` changes a reading.

    :return: (time into the step, failure) of the first reading the tube refused, or None.
    """
    rng = np.random.default_rng(seed)
    lag = lag or {}
    end = 0.0
    while progress(end) < DURATION.get(motion, 6.0) + 0.2:
        end += 0.1
    readings = sorted((float(t), name) for name in motion(0.0)
                      for t in np.arange(0.0, end + 0.5, 1.0 / RATE)
                      + rng.uniform(0.0, 1.0 / RATE))
    for t, name in readings:
        values = np.asarray(motion(progress(t - lag.get(name, 0.0)))[name]) + \
            rng.normal(0.0, 0.001, len(motion(0.0)[name]))
        if disturb is not None:
            values = disturb(t, name, values)
        failure = tube.judge(name, t, values)
        if failure is not None:
            return t, failure
    return None


def stalls(t: float) -> float:
    """Move for 1 s, stand still for 1.5 s (a slow controller), then go on."""
    return t if t < 1.0 else (1.0 if t < 2.5 else t - 1.5)


REPLAYS = {
    'as recorded': ({}, lambda t: t),
    'starts 1.5 s late': ({}, lambda t: t - 1.5),
    'runs 2x faster': ({}, lambda t: 2.0 * t),
    'runs 2x slower': ({}, lambda t: 0.5 * t),
    'stalls half-way': ({}, stalls),
    'object read 50 ms late': ({'object': 0.05}, lambda t: t),
    'ee read 50 ms late': ({'ee': 0.05}, lambda t: t),
    '2x faster, object 25 ms late': ({'object': 0.025}, lambda t: 2.0 * t),
}


@pytest.mark.parametrize('motion', [lift, descend, l_path], ids=lambda m: m.__name__)
@pytest.mark.parametrize('case', sorted(REPLAYS))
def test_a_replay_of_the_recorded_motion_is_not_caught(motion, case):
    lag, progress = REPLAYS[case]
    for seed in range(3):
        trace = record(motion, seed=seed)
        assert replay(watch_all(trace), motion, progress, lag=lag, seed=seed + 10) is None


def test_a_cube_that_stays_on_the_table_while_the_gripper_rises_is_caught():
    def slipped(t: float, name: str, values: np.ndarray) -> np.ndarray:
        return np.array([0.40, -0.10, 0.02]) if name == 'object' else values

    caught = replay(watch_all(record(lift)), lift, lambda t: t, disturb=slipped)
    assert caught is not None
    t, failure = caught
    assert failure.element == 2 and failure.sensor in ('ee', 'object')
    risen = lift(t)['ee'][2] - lift(0.0)['ee'][2]
    assert 0.03 < risen < 0.06  # each alone is on its path (the old tube never caught it)
    assert failure.score > 1.0 and failure.at == t


def test_the_reading_that_broke_the_fit_is_blamed_where_the_rest_fits():
    """
    A camera cell that sees a box is named, not a joint a little off further on.

    The arm ramps on; the camera's cell reads 0 but, from 1.2 s of the recording, where the
    arm crossed it, may read anything (loose). At 1.0 s the cell reads the box: the joint
    fits at 1.0 s, where the cell is off by 5 tolerances, and the cell fits from 1.2 s,
    where the joint is off by 1.25. The element furthest off where the state fits best is
    the joint; the reading that broke the fit is the camera's.
    """
    arm = Series(TIMES, tuple((float(v),) for v in np.linspace(0.0, 0.8, len(TIMES))))
    cell = Series(TIMES, tuple((0.0,) for _ in TIMES))
    crossed = np.array([[t >= 1.2] for t in TIMES])
    t = Tube(Trace(40.0, {'joints': arm, 'camera': cell}),
             [Watched('joints', 0, 0.02), Watched('camera', 0, 0.2)],
             loose={'camera': crossed})
    assert t.judge('joints', 1.0, (0.4,)) is None
    assert t.judge('camera', 1.0, (0.0,)) is None
    failure = t.judge('camera', 1.02, (1.0,))
    assert failure is not None
    assert (failure.sensor, failure.element) == ('camera', 0)
    assert failure.expected == pytest.approx(0.0) and failure.deviation == pytest.approx(1.0)
    # a joint pushed beyond the path while the camera is as recorded: the joint is blamed
    assert t.judge('camera', 1.04, (0.0,)) is None
    pushed = t.judge('joints', 1.06, (0.9,))
    assert pushed is not None and pushed.sensor == 'joints', pushed


def test_where_the_robots_own_state_fits_the_rest_is_blamed():
    """
    The joints (the robot's own state) still on their path: the camera is named.

    Also when a joint reading broke the fit: the cell read the box while the arm was where
    the recording had the cell hidden (it fit there), and the arm then moved on.
    """
    arm = Series(TIMES, tuple((float(v),) for v in np.linspace(0.0, 0.8, len(TIMES))))
    cell = Series(TIMES, tuple((0.0,) for _ in TIMES))
    crossed = np.array([[1.0 <= t < 1.2] for t in TIMES])
    for own, blamed in ((frozenset({'joints'}), 'camera'), (frozenset(), 'joints')):
        t = Tube(Trace(40.0, {'joints': arm, 'camera': cell}),
                 [Watched('joints', 0, 0.02), Watched('camera', 0, 0.2)],
                 loose={'camera': crossed}, own=own)
        assert t.judge('joints', 1.0, (0.4,)) is None
        assert t.judge('camera', 1.02, (1.0,)) is None  # the arm hid the cell there
        failure = t.judge('joints', 1.3, (0.53,))
        assert failure is not None and failure.sensor == blamed, (own, failure)


def test_an_l_shaped_path_does_not_accept_the_opposite_corner():
    # y first, then x: every reading has each element on its own path, never both together.
    def y_first(t: float) -> dict[str, tuple[float, ...]]:
        x, y, yaw = l_path(t)['odom']
        return {'odom': (y, x, yaw)}

    tube = watch_all(record(l_path))
    caught = replay(tube, y_first, lambda t: t)
    assert caught is not None
    t, failure = caught
    assert (failure.sensor, failure.element) in (('odom', 0), ('odom', 1))
    assert y_first(t)['odom'][1] < 0.05  # at once, not at the corner


@pytest.mark.parametrize('tolerance, by, within', [(0.01, 0.05, 0.04), (0.02, 0.08, 0.06)])
def test_a_slow_push_back_along_the_path_is_caught(tolerance, by, within):
    # The base drives half-way, stops, and is pushed back ``by`` over 1 s along its path.
    def pushed(t: float) -> dict[str, tuple[float, ...]]:
        x = drive(min(t, 3.0))['odom'][0] - by * min(max(t - 3.0, 0.0), 1.0)
        return {'odom': (x, 0.0, 0.0)}

    caught = replay(watch_all(record(drive), tolerance), pushed, lambda t: t)
    assert caught is not None
    t, failure = caught
    assert 3.0 < t < 4.0 and by * (t - 3.0) <= within  # during the push
    assert failure.element == 0 and failure.value < failure.expected
    # Standing there (a controller that stalls) is not caught.
    assert replay(watch_all(record(drive), tolerance),
                  lambda t: drive(min(t, 3.0)), lambda t: t) is None


def test_a_retargeted_replay_is_not_caught_and_a_knock_during_it_is():
    # The cube moved 6 cm in x: the descent ends 6 cm further, its start (home) unmoved.
    def moved(t: float) -> dict[str, tuple[float, ...]]:
        return descend(t, cube=0.46)

    shift = {('ee', 0): (0.0, 0.06), ('object', 0): (0.06, 0.06)}
    for seed in range(3):
        trace = record(descend, seed=seed)
        assert replay(watch_all(trace, shift=shift), moved, lambda t: t, seed=seed) is None
        assert replay(watch_all(trace, shift=shift), moved, lambda t: 2.0 * t,
                      lag={'object': 0.05}, seed=seed) is None
    # As recorded, the same moved replay is caught (the shift is what lets it pass).
    assert replay(watch_all(record(descend)), moved, lambda t: t) is not None

    def knocked(t: float, name: str, values: np.ndarray) -> np.ndarray:
        return values + (0.0, 0.08, 0.0) if name == 'object' and t > 1.0 else values

    caught = replay(watch_all(record(descend), shift=shift), moved, lambda t: t,
                    disturb=knocked)
    assert caught is not None and caught[1].sensor == 'object' and caught[1].element == 1


def test_the_progress_reached_is_kept_and_read():
    tube = watch_all(record(drive))
    assert tube.progress == pytest.approx(-0.02, abs=0.03)
    assert replay(tube, drive, lambda t: t) is None
    assert tube.progress > 5.5


def test_a_reading_is_judged_well_under_a_millisecond():
    # A 10 s step at 40 Hz, three sensors of 16 elements and a feedback of 4.
    rng = np.random.default_rng(3)
    times = np.arange(0.0, 10.0, 1.0 / RATE)
    paths = {name: np.cumsum(rng.normal(0.0, 0.002, (len(times), size)), axis=0)
             for name, size in (('a', 16), ('b', 16), ('c', 16), (FEEDBACK, 4))}
    trace = Trace(RATE, {n: Series(tuple(times), tuple(map(tuple, p)))
                         for n, p in paths.items() if n != FEEDBACK},
                  feedback=Series(tuple(times), tuple(map(tuple, paths[FEEDBACK]))),
                  feedback_leaves=('a', 'b', 'c', 'd'))
    tube = Tube(trace, [Watched(n, i, 0.02) for n, p in paths.items()
                        for i in range(p.shape[1])])
    costs = []
    for k in range(len(times)):
        for name, path in paths.items():
            started = time.perf_counter()
            assert tube.judge(name, times[k], path[k] + rng.normal(0.0, 0.003)) is None
            costs.append(time.perf_counter() - started)
    assert float(np.median(costs)) < 0.5e-3, np.median(costs)


# -- what is watched: feedback in its own units, and everything left out named -----------------

def test_a_feedback_leaf_is_held_to_a_share_of_its_range_not_of_its_magnitude():
    # A map x at 50 m that moved 0.3 m, a y at -20 m that moved 0.1 m, a w that stayed at 1.
    xs = np.linspace(50.0, 50.3, len(TIMES))
    ys = np.linspace(-20.0, -20.1, len(TIMES))
    node = traced()
    trace = Trace(40.0, node.step.trace.sensors,
                  feedback=Series(TIMES, tuple((float(x), float(y), 1.0)
                                               for x, y in zip(xs, ys))),
                  feedback_leaves=('pose.x', 'pose.y', 'pose.w'))
    step = Step(tool='/goto', kind=ToolKind.ACTION, type_name='a/action/A', payload=b'',
                pre=node.step.pre, post=node.step.post, duration=2.0, trace=trace)
    watched, _ = watched_elements(Node(1, None, 0, step), sensors=SPECS, watch={'box'},
                                  during=None, feedback_tolerance=0.25)
    tolerances = {w.label: w.tolerance for w in watched if w.series == FEEDBACK}
    assert tolerances == pytest.approx({'feedback:pose.x': 0.25 * 0.3,
                                        'feedback:pose.y': FEEDBACK_FLOOR,
                                        'feedback:pose.w': FEEDBACK_FLOOR})
    assert FEEDBACK_FLOOR <= 0.1


def test_unwatched_names_every_configured_sensor_left_out_and_why():
    node = traced(feedback=False)
    scan = tuple(float(r) for r in np.linspace(0.5, 4.0, 360))
    step = node.step
    pre = Snapshot({**step.pre.features, 'scan': scan, 'tag': (2.0, 0.5, 0.0)})
    post = Snapshot({**step.post.features, 'scan': scan, 'tag': (2.0, 0.5, 0.0)})
    trace = Trace(40.0, {'ee': step.trace.sensors['ee'], 'box': step.trace.sensors['box'],
                         'joints': Series(TIMES, tuple((0.1, 0.2) for _ in TIMES))})
    bare = Node(1, None, 0, Step(tool='/arm', kind=ToolKind.ACTION, type_name='a/action/A',
                                 payload=b'', pre=pre, post=post, duration=2.0, trace=trace))
    specs = [*SPECS[:2], SensorSpec('scan', (0.1,), CompareMode.RMS),
             SensorSpec('tag', (0.03,)), SensorSpec('joints', (0.01,))]
    watched, unwatched = watched_elements(bare, sensors=specs,
                                          watch={'ee', 'box', 'scan', 'tag'},
                                          during=None, feedback_tolerance=0.25)
    assert [w.label for w in watched] == ['ee[0]', 'ee[1]', 'box[0]', 'box[1]']
    assert unwatched == ('scan: 360 elements, over 16',  # never traced
                         'tag: not in the recorded trace',  # an import dropped it
                         'joints: watch is off for it')


def test_one_rule_for_moved_a_little_on_each_axis():
    # The step moved ee 1.5 cm in x and y (each within 2 cm, together beyond it): moved, as
    # the bindings say (moved_sensors); a shift of its start alone reshapes its path.
    values = tuple((float(v), float(v) + 0.5) for v in np.linspace(0.0, 0.015, len(TIMES)))
    step = Step(tool='/arm', kind=ToolKind.ACTION, type_name='a/action/A', payload=b'',
                pre=Snapshot({'ee': (0.0, 0.5)}), post=Snapshot({'ee': (0.015, 0.515)}),
                duration=2.0, trace=Trace(40.0, {'ee': Series(TIMES, values)}))
    tolerances = element_tolerances(SPECS)
    assert moved_sensors(sensor_elements(step.pre), sensor_elements(step.post),
                         tolerances) == {'ee'}
    during = During(pre=Snapshot({'ee': (0.03, 0.5)}), post=step.post)
    watched, unwatched = watched_elements(Node(1, None, 0, step), sensors=SPECS[:1],
                                          watch={'ee'}, during=during, feedback_tolerance=None)
    assert watched == ()
    assert all(u.endswith('start and end shifted apart, the path changes shape')
               for u in unwatched) and len(unwatched) == 2
