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
Learning from recordings: a rosbag2 / MCAP bag read as the node would have lived it.

The bag is read once (:mod:`.reader`), its calls found (:mod:`.calls`), each built into
the step the node would have recorded live (:mod:`.steps`), split into tasks and filed
through the node's own learning (:mod:`.learning`). ``muscle-mem learn`` is the command.
"""

__all__: list[str] = []
