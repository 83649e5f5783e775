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
``muscle-mem export``: a task's (or one trajectory's) steps as an MCAP file.

What the file holds (profile ``ros2``, messages CDR, schemas ``ros2msg``):

* every step's goal on ``<tool>/goal`` (a service request on ``<tool>/request``)
  as its real ROS type (``pkg/action/X_Goal``, ``pkg/srv/X_Request``): the stored
  CDR bytes, unchanged, so Foxglove shows the goals and rosbag2's MCAP plugin can
  play them;
* every pre and post snapshot on ``/muscle_mem/pre`` and ``/muscle_mem/post`` as
  ``muscle_mem_interfaces/msg/Snapshot``: the features by sensor name, with the
  tolerances and modes of ``--params FILE`` (empty without it);
* every camera sensor's recorded views (the thumbnails the pre and post snapshots keep)
  on ``/muscle_mem/<sensor>/recorded/compressed`` as ``sensor_msgs/msg/CompressedImage``
  (format ``png``, ``frame_id`` the sensor), at the snapshot's time, so Foxglove shows what
  the camera saw beside the traces (``muscle-mem learn`` leaves them);
* what a camera saw when a check on an exported step failed (the store's failed views,
  the latest per step, sensor and phase) on ``/muscle_mem/<sensor>/failed/compressed``,
  alike, at the time it was kept (``learn`` leaves them too);
* every step's trace (what the watched sensors and the action's feedback did while it
  ran) on ``/muscle_mem/trace``: one Snapshot of phase ``trace`` per sample of one series
  (the sensor's name; ``~feedback`` for the feedback), stamped at the goal's time plus the
  sample's offset from the goal's acceptance (to the nanosecond; a sample taken before the
  acceptance comes before the goal), so Foxglove plots the path the watch replays against;
  the rate and the feedback's leaf names per ``<trajectory>/<step>`` in a
  ``muscle_mem_traces`` metadata record (JSON), so ``muscle-mem learn`` reads the traces back;
* a ``muscle_mem`` metadata record naming the task, the trajectories and the body each
  was learned on (``bodies``: JSON, trajectory id -> body key), so ``muscle-mem learn``
  files each back under its own body.

Times. The store keeps, per step, the snapshots' capture times (a monotonic
clock of the recording process), the step's duration and, per trajectory, the
wall time it was committed. A trajectory is laid out on its own steps' clock
(gaps between consecutive steps kept when they come from one recording; a step
recorded in another run follows the previous one directly, and no two messages
share a time) and placed so that it ends at its commit time; trajectories are
exported oldest first and a trajectory that would overlap the previous one
starts a second after it. In one step, pre snapshot, goal and post snapshot come
in that order.

A subtask step (another task called through the cache) is its call: the
``muscle_mem_interfaces/action/ExecuteTask_Goal`` (task and ``params_json``) its caller
sent to the cache's ``~/execute_subtask``, on ``/muscle_mem/execute_subtask/goal`` (the
subtask's own steps are in its own task's export). Python API steps (Python functions)
have no ROS type: only their snapshots are exported. rclpy is imported (for serializing
snapshot messages) only when a file is written.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
import json
import math
import os
from pathlib import Path
from typing import Any

from . import bt
from .inventory import open_cli_store, task_trajectories
from .output import Output
from .paramsfile import read_sensor_settings, SensorSetting
from ..errors import UnknownTrajectoryError
from ..records import FailedView, Node, Snapshot, ToolKind, Trace, TrajectoryInfo
from ..replay.subtasks import subtask_call
from ..ros.bags.exportformat import (
    failed_view_topic, POST_TOPIC, PRE_TOPIC, SNAPSHOT_TYPE, SUBTASK_TOPIC, TRACE_FEEDBACK,
    TRACE_METADATA, TRACE_TOPIC, view_topic, VIEW_TYPE)
from ..ros.messages.msgdefs import message_schema, payload_type
from ..store import Store

__all__ = ['ExportSummary', 'add_parser', 'export_mcap', 'run', 'timeline']

MAX_GAP = 3600.0
"""Seconds; a longer pause between two steps' snapshots means they came from two runs."""
TRAJECTORY_GAP = 1.0
"""Seconds between two exported trajectories that would otherwise overlap."""
_NS = 1_000_000_000


@dataclass
class ExportSummary:
    """
    What an export wrote.

    :ivar path: The MCAP file.
    :ivar trajectories: Trajectory ids, in file order.
    :ivar messages: Messages per topic.
    :ivar skipped_goals: Steps without a ROS type (Python functions), exported without goal.
    """

    path: Path
    trajectories: list[int] = field(default_factory=list)
    messages: dict[str, int] = field(default_factory=dict)
    skipped_goals: int = 0


def timeline(nodes: Sequence[Node]) -> list[tuple[float, float]]:
    """
    Return each step's (start, end) in seconds from the trajectory's first step.

    :param nodes: The trajectory's steps, in order.
    :return: One (start, end) per step (see the module docstring).
    """
    spans: list[tuple[float, float]] = []
    last_post: float | None = None
    for node in nodes:
        step = node.step
        pre = step.pre.taken_at if step.pre is not None and step.pre.taken_at else None
        post = step.post.taken_at if step.post is not None and step.post.taken_at else None
        start = spans[-1][1] if spans else 0.0
        if spans and last_post is not None and pre is not None and \
                0.0 <= pre - last_post <= MAX_GAP:
            start += pre - last_post
        length = max(0.0, step.duration)
        if pre is not None and post is not None and 0.0 <= post - pre <= MAX_GAP:
            length = max(length, post - pre)
        spans.append((start, start + length))
        last_post = post
    return spans


def _lead_ns(trace: Trace | None) -> int:
    """
    Return how long before the goal's acceptance the trace's first sample was, in ns.

    The goal is placed that much after the pre snapshot, so a step's trace never reaches
    back over the previous step's messages (``learn`` refuses a topic whose time runs back).
    """
    if trace is None:
        return 0
    series = [*trace.sensors.values(), *([trace.feedback] if trace.feedback else [])]
    first = min((s.times[0] for s in series if s.times), default=0.0)
    return max(0, int(math.ceil(-first * _NS)))


def _topic(tool: str, suffix: str) -> str:
    return ('' if tool.startswith('/') else '/') + tool.rstrip('/') + '/' + suffix


class _Snapshots:
    """Builds and serializes Snapshot messages (rclpy imported on first use)."""

    def __init__(self, settings: Mapping[str, SensorSetting]) -> None:
        from muscle_mem_interfaces.msg import SensorFeature, Snapshot as SnapshotMsg
        from rclpy.serialization import serialize_message
        self._feature = SensorFeature
        self._msg = SnapshotMsg
        self._serialize = serialize_message
        self._settings = settings

    def subtask(self, node: Node) -> bytes:
        """Return a subtask step's call as the ExecuteTask goal its caller sent (CDR)."""
        from muscle_mem_interfaces.action import ExecuteTask
        call = subtask_call(node.step)
        return bytes(self._serialize(ExecuteTask.Goal(task=call.task,
                                                      params_json=call.params_json)))

    def trace(self, trace: Trace, *, goal_ns: int, task: str, trajectory: int, index: int,
              node: Node) -> Iterator[tuple[int, bytes]]:
        """Yield (time, message) per sample, series after series: the goal's time + offset."""
        named = [(name, series) for name, series in trace.sensors.items()]
        if trace.feedback is not None:
            named.append((TRACE_FEEDBACK, trace.feedback))
        for name, series in named:
            setting = self._settings.get(name)
            for offset, values in zip(series.times, series.values):
                when_ns = goal_ns + int(round(offset * _NS))
                msg = self._msg(task=task, trajectory_id=trajectory, step=index,
                                node_id=node.id, tool=node.step.tool, phase='trace')
                msg.stamp.sec, msg.stamp.nanosec = divmod(when_ns, _NS)
                msg.features.append(self._feature(
                    name=name, values=[float(v) for v in values],
                    tolerance=list(setting.tolerance) if setting else [],
                    mode=setting.mode.value if setting else '', age=-1.0))
                yield when_ns, bytes(self._serialize(msg))

    def views(self, snapshot: Snapshot, when_ns: int) -> Iterator[tuple[str, bytes]]:
        """Yield (topic, CompressedImage CDR) per camera thumbnail of ``snapshot``."""
        for sensor, png in sorted(snapshot.images.items()):
            yield view_topic(sensor), self.image(sensor, png, when_ns)

    def image(self, sensor: str, png: bytes, when_ns: int) -> bytes:
        """Return a camera's PNG thumbnail as a CompressedImage (CDR) stamped ``when_ns``."""
        from sensor_msgs.msg import CompressedImage
        msg = CompressedImage(format='png', data=bytes(png))
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(when_ns, _NS)
        msg.header.frame_id = sensor
        return bytes(self._serialize(msg))

    def encode(self, snapshot: Snapshot, *, when_ns: int, task: str, trajectory: int,
               index: int, node: Node, phase: str) -> bytes:
        msg = self._msg(task=task, trajectory_id=trajectory, step=index, node_id=node.id,
                        tool=node.step.tool, phase=phase)
        msg.stamp.sec, msg.stamp.nanosec = divmod(when_ns, _NS)
        for name in sorted(snapshot.features):
            setting = self._settings.get(name)
            stamp = snapshot.stamps.get(name)
            age = snapshot.taken_at - stamp if stamp is not None else -1.0
            msg.features.append(self._feature(
                name=name, values=[float(v) for v in snapshot.features[name]],
                tolerance=list(setting.tolerance) if setting else [],
                mode=setting.mode.value if setting else '', age=float(age)))
        return bytes(self._serialize(msg))


def export_mcap(
    store: Store, task: str, path: str | Path, *, trajectory_id: int | None = None,
    settings: Mapping[str, SensorSetting] | None = None,
    advance: Callable[[], None] | None = None,
) -> ExportSummary:
    """
    Write a task's trajectories (or one) to an MCAP file.

    :param store: The store (only read).
    :param task: Task name.
    :param path: The MCAP file to write (replaced if it exists).
    :param trajectory_id: Only this trajectory of the task.
    :param settings: Sensor tolerances and modes to put into the snapshots.
    :param advance: Called once per exported trajectory (progress).
    :return: What was written.
    :raises UnknownTrajectoryError: unknown task, or a trajectory not in it.
    :raises TypeResolutionError: a goal type whose interface files are not installed.
    """
    from mcap.well_known import MessageEncoding, SchemaEncoding
    from mcap.writer import CompressionType, Writer

    infos: list[TrajectoryInfo] = task_trajectories(store, task)
    if trajectory_id is not None:
        infos = [i for i in infos if i.id == trajectory_id]
        if not infos:
            raise UnknownTrajectoryError(f'task {task!r} has no trajectory {trajectory_id}')
    paths = [(info, store.path(info.id)) for info in infos]
    # Resolve every schema before the file is created: a missing type leaves no file behind.
    goal_types = {}
    for _, nodes in paths:
        for node in nodes:
            step = node.step
            if step.kind is not ToolKind.FUNCTION and step.type_name not in goal_types:
                full = payload_type(step.type_name, 'action' if step.kind is ToolKind.SUBTASK
                                    else step.kind.value)
                goal_types[step.type_name] = (full, message_schema(full))
    snapshot_schema = message_schema(SNAPSHOT_TYPE)
    exported = {n.id for _, nodes in paths for n in nodes}
    failed: list[FailedView] = sorted((v for v in store.failed_views(task=task)
                                       if v.node_id in exported), key=lambda v: v.at)
    if failed or any(s is not None and s.images for _, nodes in paths for n in nodes
                     for s in (n.step.pre, n.step.post)):
        goal_types[VIEW_TYPE] = (VIEW_TYPE, message_schema(VIEW_TYPE))
    encoder = _Snapshots(settings or {})
    target = Path(path)
    summary = ExportSummary(path=target)
    partial = target.with_name(target.name + '.part')
    try:
        with open(partial, 'wb') as stream:
            writer = Writer(stream, compression=CompressionType.ZSTD)
            writer.start(profile='ros2', library='muscle_mem_ros muscle-mem export')
            schema_ids = {SNAPSHOT_TYPE: writer.register_schema(
                SNAPSHOT_TYPE, SchemaEncoding.ROS2, snapshot_schema.encode())}
            for full, text in goal_types.values():
                schema_ids[full] = writer.register_schema(full, SchemaEncoding.ROS2, text.encode())
            channels: dict[str, int] = {}
            sequence = [0]

            def emit(topic: str, schema: str, data: bytes, when_ns: int) -> None:
                if topic not in channels:
                    channels[topic] = writer.register_channel(topic, MessageEncoding.CDR,
                                                              schema_ids[schema])
                writer.add_message(channels[topic], log_time=when_ns, data=data,
                                   publish_time=when_ns, sequence=sequence[0])
                sequence[0] += 1
                summary.messages[topic] = summary.messages.get(topic, 0) + 1

            previous_end = 0.0
            last_ns = 0
            traces: dict[str, str] = {}
            for info, nodes in paths:
                spans = timeline(nodes)
                base = info.created - (spans[-1][1] if spans else 0.0)
                if base < previous_end + TRAJECTORY_GAP and summary.trajectories:
                    base = previous_end + TRAJECTORY_GAP
                for index, (node, (start, end)) in enumerate(zip(nodes, spans)):
                    step = node.step
                    t_pre = max(int(round((base + start) * _NS)), last_ns + 1000)
                    t_goal = t_pre + 1000 + _lead_ns(step.trace)
                    t_post = last_ns = max(int(round((base + end) * _NS)), t_goal + 1000)
                    meta: dict[str, Any] = {'task': task, 'trajectory': info.id,
                                            'index': index, 'node': node}
                    if step.pre is not None:
                        emit(PRE_TOPIC, SNAPSHOT_TYPE, encoder.encode(
                            step.pre, when_ns=t_pre, phase='pre', **meta), t_pre)
                        for topic, data in encoder.views(step.pre, t_pre):
                            emit(topic, VIEW_TYPE, data, t_pre)
                    if step.kind is ToolKind.FUNCTION:
                        summary.skipped_goals += 1
                    elif step.kind is ToolKind.SUBTASK:
                        emit(SUBTASK_TOPIC, goal_types[step.type_name][0],
                             encoder.subtask(node), t_goal)
                    else:
                        suffix = 'goal' if step.kind is ToolKind.ACTION else 'request'
                        emit(_topic(step.tool, suffix), goal_types[step.type_name][0],
                             bytes(step.payload), t_goal)
                    if step.trace is not None:
                        traces[f'{info.id}/{index}'] = json.dumps(
                            {'rate': step.trace.rate, 'leaves': step.trace.feedback_leaves})
                        for when_ns, data in sorted(encoder.trace(step.trace, goal_ns=t_goal,
                                                                  **meta)):
                            emit(TRACE_TOPIC, SNAPSHOT_TYPE, data, max(when_ns, 0))
                            last_ns = max(last_ns, when_ns)
                    if step.post is not None:
                        emit(POST_TOPIC, SNAPSHOT_TYPE, encoder.encode(
                            step.post, when_ns=t_post, phase='post', **meta), t_post)
                        for topic, data in encoder.views(step.post, t_post):
                            emit(topic, VIEW_TYPE, data, t_post)
                previous_end = base + (spans[-1][1] if spans else 0.0)
                summary.trajectories.append(info.id)
                if advance is not None:
                    advance()
            for view in failed:  # each topic's clock runs forward: sorted by when it was kept
                when_ns = int(round(view.at * _NS))
                emit(failed_view_topic(view.sensor), VIEW_TYPE,
                     encoder.image(view.sensor, view.png, when_ns), when_ns)
            writer.add_metadata('muscle_mem', {
                'task': task, 'trajectories': ','.join(str(i) for i in summary.trajectories),
                'bodies': json.dumps({str(i.id): i.body for i, _ in paths})})
            if traces:
                writer.add_metadata(TRACE_METADATA, traces)
            writer.finish()  # type: ignore[no-untyped-call]  # mcap 1.6 leaves it unannotated
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)
    return summary


def add_parser(cmd: argparse.ArgumentParser) -> None:
    """Add the export options to its subparser."""
    cmd.add_argument('--mcap', metavar='OUT.mcap', help='file to write')
    cmd.add_argument('--params', metavar='FILE',
                     help="the node's params file: tolerances and modes for the snapshots")
    cmd.add_argument('--node-name', default='muscle_mem',
                     help='top key of the params file (default muscle_mem)')
    bt.add_export_options(cmd)
    cmd.set_defaults(run=run)


def run(args: argparse.Namespace, out: Output) -> int:
    """Export as the arguments say; print what was written."""
    if (args.mcap is None) == (args.bt is None):
        raise ValueError('give one of --mcap OUT.mcap or --bt KIND')
    if args.bt is not None:
        if args.trajectory is not None:
            raise ValueError('--bt exports a whole tree; --trajectory is for --mcap')
        return bt.run_export(args, out)
    settings: dict[str, Any] = {}
    if args.params:
        settings = read_sensor_settings(args.params, args.node_name)
    with open_cli_store(args.store) as store:
        count = 1 if args.trajectory is not None else len(task_trajectories(store, args.task))
        with out.progress(f'exporting {args.task}', count) as advance:
            summary = export_mcap(store, args.task, args.mcap, trajectory_id=args.trajectory,
                                  settings=settings, advance=advance)
    if out.json_mode:
        out.json({'path': str(summary.path), 'trajectories': summary.trajectories,
                  'messages': summary.messages, 'skipped_goals': summary.skipped_goals})
        return 0
    out.table(('topic', 'messages'), sorted(summary.messages.items()),
              title=f'{summary.path}: task {args.task!r}, trajectories '
                    f"{', '.join(map(str, summary.trajectories))}", right=('messages',))
    if summary.skipped_goals:
        out.note(f'{summary.skipped_goals} Python-function steps have no ROS type: exported '
                 'their snapshots only')
    return 0
