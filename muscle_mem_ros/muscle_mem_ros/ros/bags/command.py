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
``muscle-mem learn``: the whole of it, from a params file and a bag to filed trajectories.

The params file is read as the node reads it: a node of a private rclpy context is
started with ``--ros-args --params-file FILE`` under the node's name and its parameters
validated by the node's own :func:`~..node.config.load_config` (a value the node refuses
is refused here with the same message). The body is the node's
(:func:`~..node.description.body_from`): the description from ``robot_description_file``,
else the last ``robot_description`` message in the bag, else none (joint names and tools).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from muscle_mem_ros.body import Body
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.records import TrajectoryInfo
from muscle_mem_ros.ros.bags.exported import export_topics, exported_steps, is_export
from muscle_mem_ros.ros.bags.learning import (
    BagStream, file_tasks, plan_tasks, Planned, task_windows, Window,
)
from muscle_mem_ros.ros.bags.reader import Bag, BagError, read_bag
from muscle_mem_ros.ros.messages.convert import canonical_params
from muscle_mem_ros.ros.node.config import load_config, NODE_OPTIONS
from muscle_mem_ros.ros.node.description import body_from, description_file, DESCRIPTION_TOPIC
from muscle_mem_ros.ros.node.nodeconfig import NodeConfig
from muscle_mem_ros.store import Store
import rclpy

__all__ = ['Learned', 'file_learned', 'prepare', 'read_config']


def read_config(params_file: str | Path, node_name: str = 'muscle_mem') -> NodeConfig:
    """
    Return the node's configuration from its params file, as the node validates it.

    :raises ConfigError: the file is missing or a parameter is refused.
    """
    if not Path(params_file).is_file():
        raise ConfigError(f'--params-file {params_file}: no such file')
    context = rclpy.Context()
    context.init(args=['muscle-mem', '--ros-args', '--params-file', str(params_file)])
    try:
        node = rclpy.create_node(node_name, context=context, start_parameter_services=False,
                                 enable_rosout=False, **NODE_OPTIONS)
        try:
            return load_config(node)
        except ConfigError as err:
            raise ConfigError(f'--params-file {params_file}: {err}') from err
        finally:
            node.destroy_node()
    finally:
        context.try_shutdown()


def _body(bag: Bag, config: NodeConfig, node_name: str) -> Body:
    """Return the body as the node would read it: the description file, else the bag's."""
    description = description_file(config)
    if description is None:
        description = ''
        topic = bag.topic('/' + DESCRIPTION_TOPIC)
        if topic is not None and topic.data:
            from rclpy.serialization import deserialize_message
            from std_msgs.msg import String
            description = str(deserialize_message(topic.data[-1], String).data)
    return body_from(config, description, node_name)


@dataclass
class Learned:
    """
    What a learn found, and (once filed) what it gave.

    :ivar bag: The bag.
    :ivar body: The body the trajectories are learned on.
    :ivar task: The task.
    :ivar planned: Each task found in the bag and what was built for it.
    :ivar infos: Per planned task, the trajectory it gave (after :func:`file`).
    :ivar export: The bag was the cache's own export.
    """

    bag: Bag
    body: Body
    task: str
    planned: list[Planned] = field(default_factory=list)
    infos: list[TrajectoryInfo | None] = field(default_factory=list)
    export: bool = False
    marked: dict[int, str] = field(default_factory=dict)
    """The trajectories the learn added, with what they were learned from (shown by tree)."""
    fresh: list[bool] = field(default_factory=list)
    """Per planned task: it added a trajectory (False: skipped, or folded into one)."""
    bodies: list[Body | None] = field(default_factory=list)
    """Per planned task, the body it is filed under when not ``body``: an export's
    trajectories keep the bodies the export recorded (None: an unknown body)."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Per camera sensor, the frames of the bag that did not decode: dropped, as the node
    drops them live, the last good frame standing in (a stale one fails the step's task)."""

    def source(self, planned: Planned) -> str:
        """Return what a task of the bag is, as the store keeps it (path and range)."""
        window = planned.window
        if self.export:
            return f'{self.bag.path.resolve()} ({window.source})'
        return (f'{self.bag.path.resolve()} {(window.start - self.bag.start) * 1e-9:.3f}-'
                f'{(window.end - self.bag.start) * 1e-9:.3f} s')


def prepare(bag_path: str | Path, config: NodeConfig, *, task: str,
            node_name: str = 'muscle_mem', params_json: str | None = None,
            since: float | None = None, until: float | None = None) -> Learned:
    """
    Read a bag and build the steps of ``task`` in it (see :mod:`.learning`, :mod:`.exported`).

    Nothing is written: :func:`file` does that.

    :raises BagError: a bag that cannot be learned from.
    :raises ValueError: ``params_json`` is not a JSON object.
    """
    stream = BagStream(config, node_name,
                       kept=['/' + DESCRIPTION_TOPIC, *export_topics(config)])
    bag = read_bag(bag_path, keep=stream.keep, on_message=stream.message)
    stream.steps.finish()
    if not any(t.count for t in bag.topics.values()):
        raise BagError(f'{bag_path}: the bag holds no message')
    body = _body(bag, config, node_name)
    if is_export(bag):
        if since is not None or until is not None:
            raise BagError('--from/--to split a recording; an export is split by trajectory')
        params = canonical_params(params_json or '{}')
        found = exported_steps(bag, config, task)
        planned = [Planned(Window(0, 0, params, f'exported trajectory {i + 1}'), steps)
                   for i, (_, steps) in enumerate(found)]
        if not planned:
            raise BagError(f'{bag_path}: the export holds no step')
        return Learned(bag=bag, body=body, task=task, planned=planned, export=True,
                       bodies=[body if key is None else Body.parse(key) for key, _ in found])
    windows = task_windows(bag, config, task=task, node_name=node_name,
                           params_json=params_json, since=since, until=until)
    return Learned(bag=bag, body=body, task=task,
                   planned=plan_tasks(bag, config, windows, stream),
                   dropped=stream.steps.sensors.dropped())


def file_learned(store: Store, config: NodeConfig, learned: Learned) -> Learned:
    """
    File what :func:`prepare` built into ``store``; return ``learned`` with its infos.

    Each trajectory the learn added (not one a task folded into) is marked with what it was
    learned from (:meth:`~muscle_mem_ros.store.Store.note_source`), after its commit: a
    crash in between leaves it learned and unmarked.
    """
    before = {t.id for t in store.trajectories(task=learned.task)}
    if learned.bodies:  # an export: each trajectory on the body the export recorded
        learned.infos = [file_tasks(store, config, body, learned.task, [planned])[0]
                         for planned, body in zip(learned.planned, learned.bodies)]
    else:
        learned.infos = file_tasks(store, config, learned.body, learned.task, learned.planned)
    for planned, info in zip(learned.planned, learned.infos):
        learned.fresh.append(info is not None and info.id not in before)
        if info is not None and info.id not in before:
            source = learned.source(planned)
            store.note_source(trajectory_id=info.id, source=source)
            learned.marked[info.id] = source
            before.add(info.id)
    return learned
