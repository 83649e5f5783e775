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
Frames: where things are, as ROS keeps it in TF, without ROS.

Unit quaternions and their algebra (:mod:`.rotation`), a rigid transform as a typed record
(:mod:`.transform`), one link's transforms over time (:mod:`.history`) and the buffer of a
frame tree that answers "where is frame A in frame B at time t" the way tf2 does
(:mod:`.buffer`). Plain floats: no rclpy, no message types; the node feeds the buffer from
``/tf`` and ``/tf_static`` (there is no tf2 wheel on PyPI, and a lookup here needs no
ROS install).
"""

from __future__ import annotations

from .buffer import Lookup, TransformBuffer
from .transform import Transform

__all__ = ['Lookup', 'Transform', 'TransformBuffer']
