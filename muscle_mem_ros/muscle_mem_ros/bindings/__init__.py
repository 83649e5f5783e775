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
Bindings: goal fields that follow a task parameter or a sensor.

The rules and records (:mod:`.rules`), how bindings are learned from recordings
(:mod:`.learning`, with the statistics of :mod:`.inference`), the one judge that replays
under them (:mod:`.judge`), filing a recording by them (:mod:`.filing`) and the trees a
task's parameters choose (:mod:`.variants`).
"""
