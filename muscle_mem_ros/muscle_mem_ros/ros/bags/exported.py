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
Read the cache's own MCAP export (``muscle-mem export --mcap``) back into steps.

Such a file holds no sensor messages and no calls, but what the cache recorded of them:
per step its pre and post snapshots (``/muscle_mem/pre``, ``/muscle_mem/post``,
``muscle_mem_interfaces/msg/Snapshot``, each naming its trajectory and step) and between
them the goal as sent (``<server>/goal``, a service's request on ``<server>/request``,
the stored CDR bytes). The steps are rebuilt from those: the goal's bytes unchanged (a
goal learned back is byte-identical), the snapshots' features and the age of each reading.
A step's status is success (only those are exported), its duration the time from its pre
to its post snapshot, its trace the samples on ``/muscle_mem/trace`` (each series' times
from the goal's, to the nanosecond), with the rate and feedback leaves of the
``muscle_mem_traces`` metadata record. The cameras' recorded views
(``/muscle_mem/<sensor>/recorded/compressed``) and those a check failed on
(``/muscle_mem/<sensor>/failed/compressed``) are for people and are left out. One task per
exported trajectory; the export does not carry the task's params (give ``--params``).
Tools are matched to the params file's by server; a goal on a topic no tool has is
refused, naming it.
"""

from __future__ import annotations

import json

from muscle_mem_ros.records import Series, Snapshot, Step, ToolKind, Trace
from muscle_mem_ros.ros.bags.calls import decode
from muscle_mem_ros.ros.bags.exportformat import (
    is_view_topic, POST_TOPIC, PRE_TOPIC, TRACE_FEEDBACK, TRACE_METADATA, TRACE_TOPIC)
from muscle_mem_ros.ros.bags.reader import Bag, BagError, Topic
from muscle_mem_ros.ros.messages.introspection import message_to_json
from muscle_mem_ros.ros.node.nodeconfig import NodeConfig, ToolConfig
from rclpy.serialization import deserialize_message

__all__ = ['export_topics', 'exported_steps', 'is_export']

_NS = 1e-9


def is_export(bag: Bag) -> bool:
    """Return True when the bag is a ``muscle-mem export --mcap`` file."""
    return 'muscle_mem' in bag.metadata or bag.topic(PRE_TOPIC) is not None \
        or bag.topic(POST_TOPIC) is not None


def export_topics(config: NodeConfig) -> list[str]:
    """Return the topics an export holds (kept whole as a bag is read: they are small)."""
    return [PRE_TOPIC, POST_TOPIC, TRACE_TOPIC, *(
        '/' + tool.server.strip('/') + ('/goal' if tool.kind is ToolKind.ACTION else '/request')
        for tool in config.tools)]


def _snapshot(msg: object) -> Snapshot:
    taken = msg.stamp.sec + msg.stamp.nanosec * _NS  # type: ignore[attr-defined]
    features = {f.name: tuple(float(v) for v in f.values)
                for f in msg.features}  # type: ignore[attr-defined]
    stamps = {f.name: taken - f.age for f in msg.features  # type: ignore[attr-defined]
              if f.age >= 0.0}
    return Snapshot(features=features, stamps=stamps, taken_at=taken)


def _goal_topics(bag: Bag, config: NodeConfig) -> dict[str, ToolConfig]:
    tools: dict[str, ToolConfig] = {}
    for tool in config.tools:
        suffix = 'goal' if tool.kind is ToolKind.ACTION else 'request'
        tools['/' + tool.server.strip('/') + '/' + suffix] = tool
    for name, topic in bag.topics.items():
        if name in (PRE_TOPIC, POST_TOPIC, TRACE_TOPIC) or is_view_topic(name) or \
                not topic.count:
            continue
        if name not in tools:
            raise BagError(f'{bag.path}: goals on {name}, a tool the params file does not have')
    return tools


def exported_steps(bag: Bag, config: NodeConfig,
                   task: str) -> list[tuple[str | None, list[Step]]]:
    """
    Return the exported trajectories, in file order: the body each was learned on, its steps.

    The body is the key the export recorded for it (``bodies`` in its ``muscle_mem``
    record); None when the file records none (an export from before bodies).

    :raises BagError: the file exports another task, a goal of an unknown tool, or a goal
        not between a step's snapshots.
    """
    from muscle_mem_interfaces.msg import Snapshot as SnapshotMsg

    named = bag.metadata.get('muscle_mem', {}).get('task')
    if named is not None and named != task:
        raise BagError(f'{bag.path}: an export of task {named!r}, not {task!r}')
    events: list[tuple[int, int, str, object, Topic | None, int]] = []
    for order, topic_name in enumerate((PRE_TOPIC, POST_TOPIC)):
        topic = bag.topic(topic_name)
        if topic is not None:
            for when, msg in decode(topic, SnapshotMsg):
                events.append((when, 2 * order, topic_name, msg, None, 0))
    samples = _trace_samples(bag, SnapshotMsg)
    tools = _goal_topics(bag, config)
    for name, tool in tools.items():
        topic = bag.topic(name)
        if topic is None:
            continue
        for index, when in enumerate(topic.times):
            events.append((when, 1, name, tool, topic, index))
    events.sort(key=lambda e: (e[0], e[1]))
    trajectories: dict[int, list[Step]] = {}
    pre: tuple[int, Snapshot] | None = None
    goal: tuple[ToolConfig, bytes, int] | None = None
    current = 0
    for when, _, name, item, topic, index in events:
        if name == PRE_TOPIC:
            pre = (when, _snapshot(item))
            current = int(item.trajectory_id)  # type: ignore[attr-defined]
            continue
        if name == POST_TOPIC:
            if goal is None:
                raise BagError(f'{bag.path}: a post snapshot at {when} ns with no goal before it')
            current = int(item.trajectory_id)  # type: ignore[attr-defined]
            steps = trajectories.setdefault(current, [])
            steps.append(_step(goal, pre, _snapshot(item), when, _trace(
                bag, samples, current, int(item.step), goal[2])))  # type: ignore[attr-defined]
            pre = goal = None
            continue
        if goal is not None:  # the previous step had no post snapshot
            steps = trajectories.setdefault(current, [])
            steps.append(_step(goal, pre, None, goal[2],
                               _trace(bag, samples, current, len(steps), goal[2])))
            pre = None
        assert topic is not None and isinstance(item, ToolConfig)
        goal = (item, topic.data[index], when)
    if goal is not None:
        steps = trajectories.setdefault(current, [])
        steps.append(_step(goal, pre, None, goal[2],
                           _trace(bag, samples, current, len(steps), goal[2])))
    bodies = json.loads(bag.metadata.get('muscle_mem', {}).get('bodies', 'null')) or {}
    return [(bodies.get(str(i)), steps) for i, steps in trajectories.items() if steps]


_Samples = dict[tuple[int, int], dict[str, list[tuple[int, tuple[float, ...]]]]]


def _trace_samples(bag: Bag, message_type: type) -> _Samples:
    """Return the trace samples by (trajectory, step), then series name: (time, values)."""
    samples: _Samples = {}
    topic = bag.topic(TRACE_TOPIC)
    if topic is None:
        return samples
    for _, msg in decode(topic, message_type):
        when = msg.stamp.sec * 1_000_000_000 + msg.stamp.nanosec
        key = (int(msg.trajectory_id), int(msg.step))
        for feature in msg.features:
            samples.setdefault(key, {}).setdefault(feature.name, []).append(
                (when, tuple(float(v) for v in feature.values)))
    return samples


def _trace(bag: Bag, samples: _Samples, trajectory: int, index: int,
           goal_ns: int) -> Trace | None:
    """Return the trace of one step from its samples, or None when it had none."""
    series = samples.get((trajectory, index))
    if not series:
        return None
    try:
        shape = json.loads(bag.metadata.get(TRACE_METADATA, {})[f'{trajectory}/{index}'])
        rate, leaves = float(shape['rate']), tuple(str(leaf) for leaf in shape['leaves'])
    except (KeyError, TypeError, ValueError) as err:
        raise BagError(f'{bag.path}: trajectory {trajectory} step {index} has trace samples '
                       f'but no readable {TRACE_METADATA} entry ({err!r})') from err
    built = {name: Series(times=tuple((t - goal_ns) * _NS for t, _ in rows),
                          values=tuple(v for _, v in rows))
             for name, rows in ((n, sorted(r)) for n, r in series.items())}
    feedback = built.pop(TRACE_FEEDBACK, None)
    return Trace(rate=rate, sensors=built, feedback=feedback, feedback_leaves=leaves)


def _step(goal: tuple[ToolConfig, bytes, int], pre: tuple[int, Snapshot] | None,
          post: Snapshot | None, end: int, trace: Trace | None) -> Step:
    tool, payload, when = goal
    kind = 'Goal' if tool.kind is ToolKind.ACTION else 'Request'
    message_type = getattr(tool.interface, kind)
    try:
        message = deserialize_message(payload, message_type)
    except Exception as err:  # rclpy raises plain errors for bad CDR
        raise BagError(f'{tool.server}: a goal at {when} ns does not decode as '
                       f'{tool.type_name}: {err}') from err
    start = pre[0] if pre is not None else when
    return Step(tool=tool.server, kind=tool.kind, type_name=tool.type_name,
                payload=bytes(payload), payload_json=message_to_json(message),
                pre=pre[1] if pre is not None and pre[1].features else None,
                post=post if post is not None and post.features else None,
                duration=(end - start) * _NS, trace=trace)
