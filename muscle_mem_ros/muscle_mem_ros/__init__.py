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
Muscle memory for robots: a behavior cache in front of a planning agent.

The top-level package is the ROS-free core: importing it never imports rclpy.
``from muscle_mem_ros import Check, Engine`` is a drop-in for the original
muscle-mem SDK; the ROS node lives in :mod:`muscle_mem_ros.ros`.
"""

from __future__ import annotations

from .checks.matcher import Matcher, Selection
from .checks.tolerance import Check, ToleranceCheck
from .engine.engine import Engine
from .engine.metrics import EngineStats
from .errors import (
    ConfigError,
    MissingParamError,
    MuscleMemError,
    RecordingBusyError,
    StoreAccessError,
    StoreCorruptError,
    StoreError,
    StorePickleError,
    StoreVersionError,
    TypeResolutionError,
    UnknownTrajectoryError,
    UnsafeValueError,
)
from .records import (
    CheckFailure,
    CheckResult,
    CompareMode,
    Node,
    SensorSpec,
    Snapshot,
    Step,
    StepStatus,
    TaskStats,
    ToolKind,
    TrajectoryInfo,
)
from .resume import FailureKind, Resume
from .store import MemoryStore, open_store, SqliteStore, Store

__all__ = [
    'Check',
    'CheckFailure',
    'CheckResult',
    'CompareMode',
    'ConfigError',
    'Engine',
    'EngineStats',
    'FailureKind',
    'Matcher',
    'MemoryStore',
    'MissingParamError',
    'MuscleMemError',
    'Node',
    'RecordingBusyError',
    'Resume',
    'Selection',
    'SensorSpec',
    'Snapshot',
    'SqliteStore',
    'Step',
    'StepStatus',
    'Store',
    'StoreAccessError',
    'StoreCorruptError',
    'StoreError',
    'StorePickleError',
    'StoreVersionError',
    'TaskStats',
    'ToleranceCheck',
    'ToolKind',
    'TrajectoryInfo',
    'TypeResolutionError',
    'UnknownTrajectoryError',
    'UnsafeValueError',
    'open_store',
]
