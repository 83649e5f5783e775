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

"""The core never imports rclpy: the package and every core module, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

from core_helpers import PACKAGE_ROOT, subprocess_env


def _core_modules() -> list[str]:
    package = PACKAGE_ROOT / 'muscle_mem_ros'
    names = []
    for path in package.rglob('*.py'):
        parts = path.relative_to(package).with_suffix('').parts
        if parts[0] in ('ros', 'sim'):
            continue
        names.append('.'.join(('muscle_mem_ros', *parts)).removesuffix('.__init__'))
    return sorted(names)


CORE = _core_modules()


def test_core_modules_list_is_complete():
    for name in ('muscle_mem_ros.engine', 'muscle_mem_ros.matcher', 'muscle_mem_ros.checks',
                 'muscle_mem_ros.store.sqlite', 'muscle_mem_ros.store.memory'):
        assert name in CORE
    assert not any('.ros' in m or '.sim' in m for m in CORE)


def test_importing_the_core_leaves_rclpy_out():
    code = ('import importlib, sys\n'
            'import muscle_mem_ros\n'
            f'for name in {CORE!r}:\n'
            '    importlib.import_module(name)\n'
            'bad = [m for m in sys.modules if m == "rclpy" or m.startswith("rclpy.")]\n'
            'assert not bad, bad\n'
            'print(len(sys.modules))\n')
    out = subprocess.run([sys.executable, '-c', code], env=subprocess_env(),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
