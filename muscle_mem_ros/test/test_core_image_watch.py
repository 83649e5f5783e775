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
A camera watched during a step (issue 44): where the arm crosses the view between frames.

The scene is a 40 x 30 cell view (pooled into 20 x 15 blocks) of a table, and an arm's link,
one block wide, that sweeps along the lower rows faster than the camera's 10 Hz frames: it
crosses whole blocks between two frames. The replay's frames fall half a period later than
the recording's, as a replay's frames do. The joints (40 Hz) follow their recorded path.
"""

from __future__ import annotations

from muscle_mem_ros.checks.imageview import moving_cells, watch_view
from muscle_mem_ros.checks.tube import Tube, Watched
from muscle_mem_ros.records import ImageLayout, Series, Trace
import numpy as np

LAYOUT = ImageLayout(3, 40, 30, 16)
TOLERANCE = 0.2
DURATION = 1.0
"""Seconds the recorded step took."""


def cells(t: float, *, box: bool = False) -> tuple[float, ...]:
    """Return the view's cells at ``t`` s into the step: table, the link, and a box or not."""
    view = np.full((3, 30, 40), 0.45)
    view[0] += 0.1  # a brown table: red over green and blue
    left = int(round(t / DURATION * 48)) - 8  # 2 blocks wide, 24 blocks a second
    view[:, 20:28, max(0, left):max(0, left + 4)] = 0.9
    if box:
        view[:, 4:12, 4:12] = 0.15  # a dark box on the far side of the table
    return tuple(view.reshape(-1).tolist())


def trace(frames: np.ndarray) -> Trace:
    joints = np.arange(0.0, DURATION, 0.025)
    views = [watch_view(cells(t), LAYOUT) for t in frames]
    return Trace(40.0, {'joints': Series(tuple(joints), tuple((float(t),) for t in joints)),
                        'camera': Series(tuple(frames), tuple(views))})


def make_tube(recorded: Trace, *, loose: bool) -> Tube:
    size = len(recorded.sensors['camera'].values[0])
    watched = [Watched('joints', 0, 0.01)] + [Watched('camera', i, TOLERANCE)
                                              for i in range(size)]
    marks = moving_cells(recorded.sensors['camera'].values, LAYOUT, TOLERANCE)
    return Tube(recorded, watched, loose={'camera': marks} if loose else None)


def replay(tube: Tube, *, box_from: float = np.inf) -> list[str]:
    """Judge a replay whose frames fall 50 ms after the recording's; return the failures."""
    failures = []
    for t in np.arange(0.0, DURATION, 0.025):
        found = tube.judge('joints', t, (float(t),))
        if found is None and round(t / 0.025) % 4 == 2:  # a frame at 10 Hz, half a period on
            found = tube.judge('camera', t, watch_view(cells(t, box=t >= box_from), LAYOUT))
        if found is not None:
            failures.append(f'{found.sensor}[{found.element}] at {t:.3f}')
            break
    return failures


RECORDED = trace(np.arange(0.0, DURATION, 0.1))


def test_the_arm_crossing_blocks_between_frames_is_not_a_trip():
    assert replay(make_tube(RECORDED, loose=False))  # held everywhere, the phase trips it
    assert replay(make_tube(RECORDED, loose=True)) == []


def test_where_the_recording_saw_the_view_still_a_box_is_caught():
    failures = replay(make_tube(RECORDED, loose=True), box_from=0.5)
    assert failures and failures[0].startswith('camera[') and failures[0].endswith('0.550')


def test_moving_cells_are_the_crossed_blocks_and_those_next_to_them():
    marks = moving_cells(RECORDED.sensors['camera'].values, LAYOUT, TOLERANCE)
    blocks = marks.reshape(len(RECORDED.sensors['camera'].times), 3, 15, 20)
    assert (blocks == blocks[:, :1]).all()  # the same in each channel
    assert blocks[:, 0, 9:, :].any() and not blocks[:, 0, :9, :].any()  # rows 9 to 14 only
    still = trace(np.arange(0.0, DURATION, 0.1) * 0.0)  # a view that never changes
    assert not moving_cells(still.sensors['camera'].values, LAYOUT, TOLERANCE).any()
    other = moving_cells(RECORDED.sensors['camera'].values, ImageLayout(1, 40, 30, 16),
                         TOLERANCE)
    assert not other.any()  # views of another layout: nothing is known to move
