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
The cache's own MCAP export, as a format: the topics and records ``export --mcap`` writes.

:mod:`muscle_mem_ros.cli.export` writes them and :mod:`.exported` (``muscle-mem learn``)
reads them back, so they are named once, here, below both.
"""

from __future__ import annotations

__all__ = ['failed_view_topic', 'is_view_topic', 'POST_TOPIC', 'PRE_TOPIC', 'SNAPSHOT_TYPE',
           'SUBTASK_TOPIC', 'TRACE_FEEDBACK', 'TRACE_METADATA', 'TRACE_TOPIC', 'VIEW_TYPE',
           'view_topic']

SNAPSHOT_TYPE = 'muscle_mem_interfaces/msg/Snapshot'
"""Message type of exported snapshots."""
PRE_TOPIC = '/muscle_mem/pre'
"""Topic of the snapshots taken just before each step."""
POST_TOPIC = '/muscle_mem/post'
"""Topic of the snapshots taken just after each step."""
SUBTASK_TOPIC = '/muscle_mem/execute_subtask/goal'
"""Topic of the subtask steps' calls (ExecuteTask goals, as sent to the cache's action)."""
TRACE_TOPIC = '/muscle_mem/trace'
"""Topic of the steps' traces: one Snapshot (phase ``trace``) per sample of one series."""
TRACE_FEEDBACK = '~feedback'
"""Feature name of a trace's feedback series (``~`` is in no sensor's name)."""
TRACE_METADATA = 'muscle_mem_traces'
"""Metadata record: per ``<trajectory>/<step>``, the trace's rate and feedback leaves (JSON)."""
VIEW_TYPE = 'sensor_msgs/msg/CompressedImage'
"""Message type of the recorded and failed views (format ``png``): what a camera saw."""
_VIEW_PREFIX = '/muscle_mem/'
_VIEW_SUFFIX = '/recorded/compressed'
_FAILED_SUFFIX = '/failed/compressed'


def view_topic(sensor: str) -> str:
    """Return the topic of a camera sensor's recorded views (pre and post snapshots')."""
    return f'{_VIEW_PREFIX}{sensor}{_VIEW_SUFFIX}'


def failed_view_topic(sensor: str) -> str:
    """Return the topic of what a camera sensor saw when a check on it failed."""
    return f'{_VIEW_PREFIX}{sensor}{_FAILED_SUFFIX}'


def is_view_topic(topic: str) -> bool:
    """Return True for a topic of recorded or failed views (``muscle-mem learn`` leaves them)."""
    return topic.startswith(_VIEW_PREFIX) and any(
        topic.endswith(suffix) and len(topic) > len(_VIEW_PREFIX) + len(suffix)
        for suffix in (_VIEW_SUFFIX, _FAILED_SUFFIX))
