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

"""Helpers for the core tests (lane: core)."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
OUTSIDE_CORE = ('ros', 'cli')
"""The package's folders that are not the ROS-free core (ros/ imports rclpy; cli/ may)."""


def core_files() -> list[Path]:
    """Return the ROS-free core's modules: everything outside :data:`OUTSIDE_CORE`."""
    sources = PACKAGE_ROOT / 'muscle_mem_ros'
    return sorted(p for p in sources.rglob('*.py')
                  if p.relative_to(sources).parts[0] not in OUTSIDE_CORE)


def core_modules() -> list[str]:
    """Return the core's module names (``muscle_mem_ros.replay.walk``, ...)."""
    return sorted('.'.join(p.relative_to(PACKAGE_ROOT).with_suffix('').parts)
                  .removesuffix('.__init__') for p in core_files())


def subprocess_env() -> dict[str, str]:
    """Environment for a child Python that must import this checkout of muscle_mem_ros."""
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (str(PACKAGE_ROOT), env.get('PYTHONPATH', '')) if p)
    return env
