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
The demo's tests: MuJoCo renders headless unless told otherwise.

MuJoCo reads ``MUJOCO_GL`` when it is first imported, and a test module may import mujoco
before muscle_mem_demo (which sets the same default), so the default is set here, first.
Each test module starts with the garbage collector's heap settled (:func:`settled_heap`).
"""

import gc
import os
import sys

import pytest

if sys.platform.startswith('linux'):
    os.environ.setdefault('MUJOCO_GL', 'egl')


@pytest.fixture(scope='module', autouse=True)
def settled_heap() -> None:
    """
    Collect, then freeze, what earlier test modules left, as each module starts.

    The test process keeps doubles and subscribers of its own (the agent's, a test's on the
    sim's topics at 120 Hz), and a full pass of the garbage collector stops every thread
    in it: a subscriber that stops longer than its queue lasts loses messages. One suite in
    one process leaves a large heap, and a full pass over it takes 0.15 s quiet and over
    0.3 s under load. Frozen objects are left out of every pass, so a pass sees only what
    this module made; what was frozen is unfrozen and collected when the next one starts.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()
