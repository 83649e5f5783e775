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
Executing a task: ExecuteTask, replay and the services.

ExecuteTask's goals (:mod:`.goals`: accepted, one at a time, canceled, counted) and a
goal's run (:mod:`.tasks`), the node's side of the walk (:mod:`.replay`: the tree read
once, steps sent through the proxies) and everything that judges a candidate there
(:mod:`.judge`), how a walk is told (:mod:`.events`), the services (:mod:`.services`)
and the ``~/calibrate`` service (:mod:`.calibrator`).
"""
