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
The ``muscle-mem`` command line: inspect, export, calibrate and prune a store.

ROS-free except where a command needs ROS itself: ``calibrate --live`` talks to
a running node, and ``export`` serializes snapshot messages with rclpy; both
import it only when they run.
"""

from __future__ import annotations

from .app import build_parser, main

__all__ = ['build_parser', 'main']
