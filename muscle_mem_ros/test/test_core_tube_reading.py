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


"""Where the state sits on the tube (Tube.reading): what ``~/watch`` publishes, ROS-free."""

from __future__ import annotations

import math

from muscle_mem_ros.checks.tube import Tube, Watched
from muscle_mem_ros.records import Series, Trace
import numpy as np
import pytest

TIMES = tuple(float(t) for t in np.arange(0.0, 2.0, 0.025))
"""A two-second step sampled at 40 Hz."""


def tube() -> Tube:
    """Element 0 of 'ee' ramps 0 -> 0.4 over the step, element 1 stays at 0.5; 'obj' stays."""
    ramp = tuple((float(v), 0.5) for v in np.linspace(0.0, 0.4, len(TIMES)))
    trace = Trace(40.0, {'ee': Series(TIMES, ramp),
                         'obj': Series(TIMES, tuple((0.3,) for _ in TIMES))})
    return Tube(trace, [Watched('ee', 0, 0.02), Watched('ee', 1, 0.02),
                        Watched('obj', 0, 0.01, name='cube x')])


def test_before_any_reading_nothing_is_placed():
    t = tube()
    r = t.reading()
    assert r.fits and r.progress == 0.0
    assert np.isnan(r.value).all() and np.isnan(r.ratio).all() and np.isnan(r.deviation).all()
    assert t.recorded == pytest.approx(TIMES[-1])
    assert r.tolerance.tolist() == [0.02, 0.02, 0.01]


def test_on_the_path_the_progress_rises_and_no_ratio_reaches_one():
    t = tube()
    progress = []
    for at, x in ((0.2, 0.04), (0.5, 0.1), (1.0, 0.2), (1.5, 0.3)):
        assert t.judge('ee', at, (x, 0.51)) is None
        r = t.reading()
        assert r.fits
        progress.append(r.progress)
        assert r.value[:2].tolist() == [x, 0.51]
        assert math.isnan(r.value[2]) and math.isnan(r.ratio[2])  # 'obj' not read yet
        assert (r.ratio[:2] <= 1.0).all() and (r.low[:2] <= r.high[:2]).all()
        assert r.deviation[0] == 0.0  # on the ramp: within its span
    assert progress == sorted(progress) and progress[-1] - progress[0] > 1.0
    assert abs(progress[-1] - 1.5) < 0.1


def test_off_the_band_within_tolerance_uses_a_share_of_it():
    t = tube()
    assert t.judge('ee', 1.0, (0.2, 0.51)) is None
    assert t.judge('obj', 1.0, (0.305,)) is None  # 5 mm off, tolerance 1 cm
    r = t.reading()
    assert r.fits
    assert r.expected[2] == pytest.approx(0.3)
    assert r.deviation[2] == pytest.approx(0.005)
    assert r.ratio[2] == pytest.approx(0.5)


def test_a_trip_places_the_state_where_it_fits_best_with_the_ratio_over_one():
    t = tube()
    assert t.judge('ee', 1.0, (0.2, 0.5)) is None
    failure = t.judge('obj', 1.1, (0.35,))  # knocked 5 cm
    assert failure is not None
    r = t.reading()
    assert not r.fits
    assert r.ratio[2] == pytest.approx(failure.score) and r.ratio[2] > 1.0
    assert r.deviation[2] == pytest.approx(failure.deviation)
    assert r.expected[2] == pytest.approx(failure.expected)
    assert int(np.nanargmax(r.ratio)) == 2  # the element the failure names is the worst
    assert abs(r.progress - 1.0) < 0.2
