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

"""Helpers both benchmarks use to compute and print their figures."""

from __future__ import annotations

import contextlib
from pathlib import Path
import platform
import sys
from typing import Any

import numpy as np


def pct(xs: Any, q: float) -> float:
    """Return the ``q``-th percentile of ``xs``."""
    return float(np.percentile(np.asarray(xs, dtype=float), q))


def ms(x: float) -> str:
    """Seconds as milliseconds with three decimals."""
    return f'{x * 1e3:.3f}'


def cpu_name() -> str:
    """Return the CPU model, for the header of a results file."""
    try:
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            if line.startswith('model name'):
                return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or 'unknown'


def pg_server(stack: contextlib.ExitStack) -> Any:
    """Start a PostgreSQL server as the tests do (test/pg_server.py); ``stack`` stops it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'muscle_mem_ros' / 'test'))
    from pg_server import pg_binaries, PgServer
    bindir, why = pg_binaries()
    if why:
        raise SystemExit(why)
    server = PgServer(bindir)
    server.start()
    stack.callback(server.destroy)
    return server
