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
Types are checked: ``mypy --strict`` on every module, the ROS-free core, ros/, cli/ and bt/.

The package ships ``py.typed``, so its annotations are a promise to its users. mypy is pinned
in requirements/kilted-py311.txt; its settings are the package's ``mypy.ini`` (generated ROS
interface packages and a few libraries ship no types: their messages are ``Any``). Skipped,
naming it, where mypy is not installed.
"""

from __future__ import annotations

from pathlib import Path
import subprocess
import sys

from core_helpers import core_files
import pytest

PACKAGE = Path(__file__).resolve().parents[1]
SOURCES = PACKAGE / 'muscle_mem_ros'
CONFIG = PACKAGE / 'mypy.ini'

pytest.importorskip('mypy', reason='mypy not importable (pip install mypy)')


def mypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, '-m', 'mypy', '--config-file', str(CONFIG), '--no-incremental',
         *args], capture_output=True, text=True, cwd=PACKAGE)


def test_core_file_selection():
    files = core_files()
    assert SOURCES / 'replay' / 'walk.py' in files and SOURCES / 'store' / 'sqlite.py' in files
    assert not [f for f in files if 'ros' in f.parts[-2:-1] or 'cli' in f.parts[-2:-1]]


@pytest.mark.linter
def test_mypy_strict_on_the_whole_package():
    proc = mypy('--strict', str(SOURCES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
