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
The ROS 2 layer: the behavior-cache node, its sensor capture, proxies and replay.

Everything here imports rclpy; the package above it never does. Start the node
with :func:`muscle_mem_ros.ros.node.main.main` (console script ``behavior_cache``).
"""

__all__: list[str] = []
