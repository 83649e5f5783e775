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
From cache to code: a learned task as a behavior tree a person can read, edit and run.

:mod:`.document` (the document a person edits: its steps, plans and edits),
:mod:`.yamlfile` (it as YAML, written and read back), :mod:`.traces` (a step's recorded
trace in it, what a run watches the step against), :mod:`.tree` (it as a py_trees tree,
deciding with the cache's own judge), :mod:`.btcpp` (it as BehaviorTree.CPP v4 XML),
:mod:`.subtrees` (the trees its subtask steps call, held in the same document).
The ROS side, ticking it against real servers, is :mod:`muscle_mem_ros.cli.runbt`.
"""
