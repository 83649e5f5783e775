"""Helpers both benchmarks use to compute and print their figures."""

from __future__ import annotations

from pathlib import Path
import platform
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
