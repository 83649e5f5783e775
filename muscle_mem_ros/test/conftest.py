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
Fixtures shared by the command-line tests (test_cli, test_export, test_calibration).

``master`` builds the demo-shaped SQLite store of :func:`cli_helpers.build_store` once per
test module; ``store`` hands each test its own copy, so a test that writes (forget, import)
cannot change what another one reads.
"""

from __future__ import annotations

from pathlib import Path
import shutil

from cli_helpers import build_store
import pytest


@pytest.fixture(scope='module')
def master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return the path of a store built once for the module (read it, never write it)."""
    return build_store(tmp_path_factory.mktemp('store') / 'cache.db')


@pytest.fixture
def store(master: Path, tmp_path: Path) -> Path:
    """Return the path of this test's own copy of ``master``."""
    path = tmp_path / 'cache.db'
    shutil.copy(master, path)
    return path
