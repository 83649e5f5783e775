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
"""

import os
import sys

if sys.platform.startswith('linux'):
    os.environ.setdefault('MUJOCO_GL', 'egl')
