"""Helpers for the core tests (lane: core)."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def subprocess_env() -> dict[str, str]:
    """Environment for a child Python that must import this checkout of muscle_mem_ros."""
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (str(PACKAGE_ROOT), env.get('PYTHONPATH', '')) if p)
    return env
