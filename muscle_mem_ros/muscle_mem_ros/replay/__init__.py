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
Replaying a task: the walk and what it reads.

The tree walk (:mod:`.walk`: choose, pre-check, execute, post-check, branch, hand off),
the rank order it tries candidates in (:mod:`.ranking`), a task's trees as one run reads
them (:mod:`.treeview`), shadow runs that predict without moving (:mod:`.shadow`) and the
gates a trajectory must pass before it replays (:mod:`.gates`).
"""
