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
The story's third part, "eyes only": the cache sees the world through the camera alone.

ROS-free, like :mod:`muscle_mem_demo.story`, whose types it uses. The cache runs with
``config/sim_eyes.yaml``: the workspace camera (320 x 240 rgb8, cells of 16 px, the
right-hand strip of the view left out) and the arm's joints and jaws; no ``/object_pose``
sensor and no bindings, so a moved cube cannot be retargeted and goes to the agent. The
robot renders its camera at :data:`CAMERA_RATE` in this part only. Each run sets the camera's
noise (:data:`CAMERA_NOISE`, or :data:`NOISY` for run 17) through the robot's parameter.

- Run 15: the task, new: a miss, the agent plans it, the cache records the camera's cells
  before and after each step and its coarse view during each motion.
- Run 16: the same again: a full replay.
- Run 17: the camera four times as noisy (:data:`NOISY`), every frame fresh: a full replay,
  no false miss.
- Run 18: the cube moved 3 cm: the first pre-check fails, naming the camera's cell; a miss.
- Run 19: the distractor box put down outside the region of interest (:data:`TRAY`): a full
  replay, the box is not looked at.
- Run 20: the box dropped into the workspace (:data:`DROP`) while the replay's first motion
  runs: the camera's watch trips, the cache stops the motion and the agent does the task
  from step 0.
"""

from __future__ import annotations

from muscle_mem_demo.physics import OBJECT_START
from muscle_mem_demo.story import Expectation, RunMode, RunSpec

__all__ = ['CAMERA_NOISE', 'CAMERA_RATE', 'CAMERA_TOPIC', 'CUBE_MOVED', 'DROP', 'EYES_STORY',
           'NOISY', 'ROI', 'TRAY']

CAMERA_RATE = 10.0
"""The robot's camera in this part, Hz (a 320 x 240 frame renders in about 18 ms)."""
CAMERA_TOPIC = '/camera/image_raw'
"""Where the robot publishes it, and the cache reads it."""
CAMERA_NOISE = 2.0
"""The camera's pixel noise in every run but :data:`NOISY`'s, grey levels (its default)."""
NOISY = 8.0
"""Run 17's pixel noise, grey levels: four times that of the recording."""
ROI = (0, 0, 272, 160)
"""The camera's region of interest in config/sim_eyes.yaml, pixels (x, y, width, height): the
right-hand strip (the tray) and the lower third (the arm's shoulder and elbow, close to the
camera) left out."""

CUBE_MOVED: tuple[float, float, float] = (OBJECT_START[0] + 0.03, OBJECT_START[1],
                                          OBJECT_START[2])
"""Run 18's cube: 3 cm from where the task was learned (about 10 px in the view)."""
TRAY: tuple[float, float, float] = (0.15, -0.47, 0.1)
"""Where run 19's box is dropped: the table's right-hand edge in the view (about x 305 px),
outside the region of interest."""
DROP: tuple[float, float, float] = (0.65, -0.2, 0.35)
"""Where run 20's box is let go during the approach: 0.35 m over the far side of the table, in
the camera's view from the start (0.75 m from it: 30 px, two of its 16 px cells; from 0.7 m it
began above the view and was caught as it came in at the top edge); it falls for 0.26 s and
lands near x 212, y 51 px, clear of the cube, the place target and the carry between them. It
falls where the approach does not cross the view: where the arm crosses it, a cell of the view
may read anything between two frames, so the watch does not hold it there (see
:mod:`muscle_mem_ros.checks.imageview`), and a box landing under the arm is the post-check's."""

EYES_STORY: tuple[RunSpec, ...] = (
    RunSpec(number=15, title='eyes: first pick-and-place', camera_noise=CAMERA_NOISE,
            expect=Expectation(mode=RunMode.MISS, replayed=0, by_agent=8, agent_calls=(0,))),
    RunSpec(number=16, title='eyes: same again', camera_noise=CAMERA_NOISE,
            expect=Expectation(mode=RunMode.REPLAY, replayed=8, by_agent=0, agent_calls=())),
    RunSpec(number=17, title=f'camera noise x{NOISY / CAMERA_NOISE:g} (fresh frames)',
            camera_noise=NOISY,
            expect=Expectation(mode=RunMode.REPLAY, replayed=8, by_agent=0, agent_calls=())),
    RunSpec(number=18, title='cube moved 3 cm: the camera sees it', nudge=CUBE_MOVED,
            camera_noise=CAMERA_NOISE,
            expect=Expectation(mode=RunMode.MISS, replayed=0, by_agent=8, agent_calls=(0,),
                               noticed=('pre-check', 'camera', 'cell at'))),
    RunSpec(number=19, title='box put down outside the roi', distractor=TRAY,
            camera_noise=CAMERA_NOISE,
            expect=Expectation(mode=RunMode.REPLAY, replayed=8, by_agent=0, agent_calls=())),
    RunSpec(number=20, title='box dropped in view during step 0', drop=DROP,
            camera_noise=CAMERA_NOISE,
            expect=Expectation(mode=RunMode.HANDOFF, replayed=0, by_agent=8, agent_calls=(0,),
                               canceled_step=0, noticed=('during step 0', 'camera'))),
)
"""The runs of the third part, in order, each from a reset world, with a store of its own."""
