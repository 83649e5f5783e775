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
Bags for the learn tests: recorded live from a running robot, or written by hand.

The recorder and the writer are the package's own
(:mod:`muscle_mem_ros.ros.bags.recorder`: the demo's ``--record-bag`` records with it
too); this module keeps the tests' names for them.
"""

from muscle_mem_ros.ros.bags.recorder import BagRecorder, tool_topics, write_bag

__all__ = ['BagRecorder', 'tool_topics', 'write_bag']
