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

The test process hosts robots' doubles whose sensors publish on threads of their own (a
base's localization on /tf at 50 Hz, :class:`dock_helpers.Ticker`), beside executors whose
spin loops are Python: a thread woken to publish waits for the interpreter lock behind
them. With the default switch interval (5 ms) a 50 Hz publisher went quiet for up to 0.45 s
while a bag was recorded; at 1 ms, 0.21 s at most. And each test module starts with the
garbage collector's heap settled (:func:`settled_heap`).
"""

from __future__ import annotations

import gc
from pathlib import Path
import shutil
import sys

from cli_helpers import build_store
import pytest

sys.setswitchinterval(0.001)


@pytest.fixture(scope='module', autouse=True)
def settled_heap() -> None:
    """
    Collect, then freeze, what earlier test modules left, as each module starts.

    A full pass of the garbage collector stops every thread in the test process, the
    doubles' publishers too, for as long as the heap takes to scan, and one suite in one
    process leaves a large heap: two thirds into the suite a full pass took 0.15 s on a
    quiet machine; over 1.5 million objects, 0.3 s, and the dock double's TF went stale in
    the cache (max_age 0.5 s). Frozen objects are left out of every pass, so a pass sees
    only what this module made; what was frozen is unfrozen and collected when the next one
    starts.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()


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
