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

from dataclasses import dataclass
import math

from muscle_mem_ros.bindings.judge import During
from muscle_mem_ros.checks.tube import FEEDBACK, left_tube, Tube, Watched
from muscle_mem_ros.records import (
    CheckFailure, CompareMode, Node, SensorSpec, Series, Snapshot, Step, StepStatus, ToolKind,
    Trace,
)
from muscle_mem_ros.replay.walk import StepEvent, Verdict, walk
from muscle_mem_ros.replay.watching import watched_elements
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


def test_each_element_progresses_on_its_own():
    values = tuple((float(a), float(b)) for a, b in
                   zip(np.linspace(0, 0.4, len(TIMES)), np.linspace(1, 2, len(TIMES))))
    t = tube(values=values)
    # Element 1 from a newer message than element 0: not one recorded sample, both on the path.
    assert t.judge('ee', 1.0, (0.1, 1.9)) is None


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
                                          during=None, feedback_tolerance=0.1)
    assert [w.label for w in watched] == ['ee[0]', 'ee[1]', 'box[0]', 'box[1]',
                                          'feedback:x', 'feedback:w']
    assert unwatched == ()
    assert [w.tolerance for w in watched][:4] == [0.02, 0.02, 0.03, 0.04]
    # A feedback leaf's tolerance: a share of its range or magnitude.
    assert watched[4].tolerance == pytest.approx(0.04, abs=1e-6)
    assert watched[5].tolerance == pytest.approx(0.1, abs=1e-6)
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
    assert set(unwatched) == {'ee[1]', 'feedback:x', 'feedback:w'}


def test_a_motion_whose_start_and_end_move_apart_is_not_watched_where_it_moved():
    # From a moved start to the recorded end (a carry from a moved cube to a fixed place):
    # the path's shape changes, no offset explains it; the box the step did not move stays.
    node = traced(feedback=False)
    during = During(pre=Snapshot({'ee': (0.1, 0.5), 'box': (1.1, 2.0)}),
                    post=Snapshot({'ee': (0.4, 0.5), 'box': (1.1, 2.0)}))
    watched, unwatched = watched_elements(node, sensors=SPECS, watch={'ee', 'box'},
                                          during=during, feedback_tolerance=0.1)
    assert unwatched == ('ee[0]', 'ee[1]')  # the arc may bulge in any element
    assert [w.label for w in watched] == ['box[0]', 'box[1]']


def test_a_step_sent_as_recorded_into_a_moved_world_leaves_its_feedback_unwatched():
    # Sent byte for byte, but the walk's shift moved the box before it: the goal's feedback
    # (where it is, what is left) is not the recording's; the sensors are judged moved.
    node = traced()
    during = During(pre=Snapshot({'ee': (0.0, 0.5), 'box': (1.1, 2.0)}),
                    post=Snapshot({'ee': (0.4, 0.5), 'box': (1.1, 2.0)}))
    watched, unwatched = watched_elements(node, sensors=SPECS, watch={'ee', 'box'},
                                          during=during, feedback_tolerance=0.1)
    assert set(unwatched) == {'feedback:x', 'feedback:w'}
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
