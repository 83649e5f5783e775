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
Survey a running robot's ROS graph for ``muscle-mem init``: its servers and its sensors.

Servers are read per node (only what a node *serves*: a client is not a tool). A running
cache is not the robot: a node serving a ``muscle_mem_interfaces`` service is a cache, and
its servers, every server under its name (its proxies, served by its hidden helper node
``_<name>_proxies``) and every hidden node (a name starting with ``_``) are left out, as
are hidden names (``/_action/...``, ``_service_event``). ``ExecuteTask`` servers of other
nodes are agents, not tools. What is left is every server of the robot's nodes (init sorts
them: :func:`.inittools.sort_servers`). Topics with a publisher and a
readable type (:func:`.initrules.kind_of`) are subscribed for the sampling window;
each message's receive time and feature vector are kept. Camera topics
(:data:`.initcameras.CAMERA_TYPES`) too: each frame is reduced to its grid as it arrives
(:func:`.initcameras.hear`), so no frame is held. ``/robot_description`` is asked
for (reliable, transient local, as the node reads it) before the graph is read, and how
long it took to arrive is kept (:func:`.inittools.description_timeout`), with its text (the
robot's links: :func:`.initframes.description_links`). ``/tf`` and ``/tf_static`` are read
for the same window, as the node reads them (:mod:`~muscle_mem_ros.ros.capture.transformfeed`),
into a transform buffer that keeps the whole window; its frames are
:func:`.initframes.frame_samples`.
"""

from __future__ import annotations

from dataclasses import dataclass
import time
from typing import Any

from .initcameras import CAMERA_TYPES, CameraSample, COMPRESSED, hear, Heard
from .initframes import frame_samples, FrameSample
from .initrules import Kind, kind_of, Sampled, Skipped, Tool
from ..errors import TypeResolutionError
from ..ros.messages.introspection import compile_field_path, resolve_type
from ..transforms.buffer import TransformBuffer

__all__ = ['Survey', 'survey']

EXECUTE_TASK = 'muscle_mem_interfaces/action/ExecuteTask'
INFRA_TYPES = ('rcl_interfaces/', 'type_description_interfaces/', 'lifecycle_msgs/',
               'muscle_mem_interfaces/', 'composition_interfaces/')
"""Topic types that are never sensors."""
DESCRIPTION = '/robot_description'
TF_TOPICS = ('/tf', '/tf_static')
INFRA_TOPICS = ('/rosout', '/parameter_events', *TF_TOPICS, '/robot_description',
                '/diagnostics')
SPIN = 0.05
SETTLE = 1.0
"""Seconds the graph must stay the same before it is read."""
MAX_SETTLE = 10.0
"""Most seconds waited for it after the discovery time."""


@dataclass(frozen=True)
class Survey:
    """
    What the graph offered.

    :ivar nodes: Node names seen, besides the survey's own.
    :ivar servers: Every server of the robot's nodes (a running cache's left out).
    :ivar agents: ExecuteTask servers of nodes that are not caches.
    :ivar sampled: Readable topics with what they sent.
    :ivar skipped: Topics left out, with why.
    :ivar caches: Caches already running (their names were left out).
    :ivar description: Whether ``/robot_description`` has a publisher.
    :ivar description_heard: Seconds from asking for it to receiving it; None: not heard.
    :ivar cameras: Camera topics with the frames they sent (:mod:`.initcameras`).
    :ivar description_text: The description as received ('' when not heard).
    :ivar frames: Every TF frame heard, with its poses (:mod:`.initframes`).
    :ivar tf: Why ``/tf`` was not read ('' when it was, or has no publisher).
    """

    nodes: tuple[str, ...]
    servers: tuple[Tool, ...]
    agents: tuple[str, ...]
    sampled: tuple[Sampled, ...]
    skipped: tuple[Skipped, ...]
    caches: tuple[str, ...]
    description: bool = False
    description_heard: float | None = None
    cameras: tuple[CameraSample, ...] = ()
    description_text: str = ''
    frames: tuple[FrameSample, ...] = ()
    tf: str = ''


def _fqn(name: str, namespace: str) -> str:
    return f"{namespace.rstrip('/')}/{name}"


def _hidden(name: str) -> bool:
    return any(part.startswith('_') for part in name.split('/'))


def _fields(type_name: str) -> dict[str, str] | None:
    try:
        cls = resolve_type(type_name, kind='msg')
    except TypeResolutionError:
        return None
    return dict(cls.get_fields_and_field_types())


def _nested(type_name: str) -> dict[str, str]:
    pkg, _, name = type_name.partition('/')
    return _fields(f'{pkg}/msg/{name}') or {}


def _servers(node: Any) -> tuple[list[Tool], list[str], list[str], list[str]]:
    """Return every server of the robot's nodes, the agents, the caches and the node names."""
    from rclpy.action.graph import get_action_server_names_and_types_by_node
    own = node.get_fully_qualified_name()
    servers: list[Tool] = []
    agents: list[str] = []
    caches: list[str] = []
    names: list[str] = []
    for name, namespace in node.get_node_names_and_namespaces():
        fqn = _fqn(name, namespace)
        if fqn == own:
            continue
        names.append(fqn)
        if name.startswith('_'):  # hidden: a cache's helper node (its proxies, its sensors)
            continue
        services = node.get_service_names_and_types_by_node(name, namespace)
        if any(t.startswith('muscle_mem_interfaces/srv/') and not _hidden(service)
               for service, types in services for t in types):
            caches.append(fqn)
            continue
        for action, types in get_action_server_names_and_types_by_node(node, name, namespace):
            if EXECUTE_TASK in types:
                agents.append(action)
            elif not _hidden(action) and not types[0].startswith('muscle_mem_interfaces/'):
                servers.append(Tool('action', action, types[0], fqn))
        servers += [Tool('service', service, types[0], fqn) for service, types in services
                    if not _hidden(service) and not types[0].startswith('muscle_mem_interfaces/')]
    unique = {(t.kind, t.server): t for t in servers
              if not any(t.server.startswith(c + '/') for c in caches)}
    return list(unique.values()), sorted(set(agents)), caches, names


def _reader(kind: Kind, type_name: str) -> Any:
    cls = resolve_type(type_name, kind='msg')
    if kind.name == 'joints':
        return None
    extractors = [compile_field_path(cls, path) for path in kind.fields]
    return lambda msg: tuple(v for e in extractors for v in e.extract(msg))


def _listen_tf(node: Any, duration: float) -> tuple[TransformBuffer, Any]:
    """Start filling a buffer from ``/tf`` and ``/tf_static`` that keeps ``duration`` s."""
    from ..ros.capture.transformfeed import TransformFeed
    buffer = TransformBuffer(cache_time=duration + 60.0)
    return buffer, TransformFeed(node, buffer)


def _sample(node: Any, topics: list[tuple[str, str, Kind]], duration: float,
            executor: Any, cameras: list[tuple[str, str]],
            tf: bool = False) -> tuple[list[Sampled], list[CameraSample], list[FrameSample]]:
    """
    Subscribe for ``duration`` s; a camera's frames are reduced to grids as they come.

    :param tf: Read ``/tf`` and ``/tf_static`` too (the frames are returned).
    """
    from rclpy.qos import qos_profile_sensor_data
    listening = _listen_tf(node, duration) if tf else None
    heard: dict[str, list[tuple[float, Any]]] = {topic: [] for topic, _, _ in topics}
    frames: dict[str, list[tuple[float, Heard]]] = {topic: [] for topic, _ in cameras}
    subscriptions = []
    for topic, type_name, _ in topics:
        subscriptions.append(node.create_subscription(
            resolve_type(type_name, kind='msg'), topic,
            lambda msg, t=topic: heard[t].append((time.monotonic(), msg)),
            qos_profile_sensor_data))
    for topic, type_name in cameras:
        subscriptions.append(node.create_subscription(
            resolve_type(type_name, kind='msg'), topic,
            lambda msg, t=topic, c=type_name == COMPRESSED: frames[t].append(
                (time.monotonic(), hear(msg, compressed=c))),
            qos_profile_sensor_data))
    end = time.monotonic() + duration
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=SPIN)
    for sub in subscriptions:
        node.destroy_subscription(sub)
    tf_frames: list[FrameSample] = []
    if listening is not None:
        listening[1].close()
        tf_frames = list(frame_samples(listening[0]))
    seen = [CameraSample(topic, type_name, tuple(t for t, _ in frames[topic]),
                         tuple(h for _, h in frames[topic])) for topic, type_name in cameras]
    out: list[Sampled] = []
    for topic, type_name, kind in topics:
        messages = heard[topic]
        if kind.name == 'joints':
            order: list[str] = []
            latest: dict[str, float] = {}
            rows: list[tuple[float, ...]] = []
            for _, msg in messages:
                if len(msg.position) != len(msg.name):
                    continue
                for joint, value in zip(msg.name, msg.position):
                    if joint not in latest:
                        order.append(joint)
                    latest[joint] = float(value)
                rows.append(tuple(latest[j] for j in order))
            rows = [r for r in rows if len(r) == len(order)]
            out.append(Sampled(topic, type_name, kind, tuple(t for t, _ in messages),
                               tuple(rows), tuple(order)))
            continue
        read = _reader(kind, type_name)
        out.append(Sampled(topic, type_name, kind, tuple(t for t, _ in messages),
                           tuple(read(m) for _, m in messages)))
    return out, seen, tf_frames


def _graph(node: Any) -> tuple[Any, ...]:
    return (sorted(node.get_node_names_and_namespaces()),
            sorted(n for n, _ in node.get_topic_names_and_types()),
            sorted(n for n, _ in node.get_service_names_and_types()))


def _ask_description(node: Any, heard: list[float], text: list[str]) -> Any:
    """Subscribe to the description as the node reads it; note when it arrives, and what."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    start = time.monotonic()
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)

    def arrived(msg: Any) -> None:
        heard.append(time.monotonic() - start)
        text.append(str(msg.data))
    return node.create_subscription(String, DESCRIPTION, arrived, latched)


def _settle(node: Any, executor: Any, discovery: float) -> None:
    """
    Spin ``discovery`` seconds, then until the graph stayed the same for :data:`SETTLE` s.

    A loaded machine discovers another process's nodes and servers over seconds; at most
    :data:`MAX_SETTLE` seconds more are waited. A graph holding no node but the survey's
    own has not settled (it is what a starved process sees before discovery answers), so
    an empty domain takes the whole wait.
    """
    start = time.monotonic()
    seen, since = _graph(node), start
    while True:
        executor.spin_once(timeout_sec=SPIN)
        now = time.monotonic()
        if now - start < discovery:
            continue
        graph = _graph(node)
        if now - start >= discovery + MAX_SETTLE:
            return
        if graph != seen:
            seen, since = graph, now
        elif now - since >= SETTLE and _others(node, graph):
            return


def _others(node: Any, graph: tuple[Any, ...]) -> bool:
    """Whether ``graph`` holds a node besides ``node``."""
    own = (node.get_name(), node.get_namespace())
    return any(tuple(entry) != own for entry in graph[0])


def survey(*, node: Any, executor: Any, discovery: float, duration: float,
           topics_only: tuple[str, ...] = (), topics: bool = True,
           frames: bool = True) -> Survey:
    """
    Read the graph after ``discovery`` seconds, then sample the readable topics and ``/tf``.

    :param node: The survey's node (spun by ``executor``).
    :param topics_only: Sample only these topics (empty: every readable one).
    :param topics: Sample topics at all (False: only frames were asked for).
    :param frames: Read ``/tf`` and ``/tf_static`` while sampling.
    """
    heard: list[float] = []
    text: list[str] = []
    description = _ask_description(node, heard, text)
    _settle(node, executor, discovery)
    servers, agents, caches, nodes = _servers(node)
    skipped: list[Skipped] = []
    readable: list[tuple[str, str, Kind]] = []
    cameras: list[tuple[str, str]] = []
    for topic, types in sorted(node.get_topic_names_and_types()):
        if (topic in INFRA_TOPICS or _hidden(topic) or types[0].startswith(INFRA_TYPES)
                or any(topic.startswith(c + '/') for c in caches)
                or (topics_only and topic not in topics_only) or not topics
                or node.count_publishers(topic) == 0):
            continue
        if topic.endswith(DESCRIPTION):  # a robot's in a namespace: not the one the node reads
            skipped.append(Skipped(topic, types[0], (
                "a robot description, but not the node's (it reads robot_description in its "
                f'namespace): remap robot_description:={topic} and set '
                "robot_description_timeout if it is this robot's")))
            continue
        if types[0] in CAMERA_TYPES:
            cameras.append((topic, types[0]))
            continue
        kind = kind_of(types[0], _fields(types[0]), _nested)
        if isinstance(kind, str):
            skipped.append(Skipped(topic, types[0], kind))
        else:
            readable.append((topic, types[0], kind))
    tf, why_not = frames and any(node.count_publishers(t) for t in TF_TOPICS), ''
    if tf:
        try:
            from tf2_msgs.msg import TFMessage  # noqa: F401 (the feed's type)
        except ImportError as err:
            tf, why_not = False, (f'tf2_msgs is not installed here ({err}): no frame was read '
                                  '(on the PyPI wheel setup, source scripts/setup.sh)')
    sampled, camera_samples, frame_list = _sample(
        node, readable, duration, executor, cameras, tf) \
        if readable or cameras or tf else ([], [], [])
    described = node.count_publishers(DESCRIPTION) > 0
    if described and not heard:
        _spin_until(executor, lambda: bool(heard), duration)
    node.destroy_subscription(description)
    return Survey(nodes=tuple(nodes), servers=tuple(servers), agents=tuple(agents),
                  sampled=tuple(sampled), skipped=tuple(skipped), caches=tuple(caches),
                  description=described,
                  description_heard=heard[0] if heard else None, cameras=tuple(camera_samples),
                  description_text=text[0] if text else '', frames=tuple(frame_list),
                  tf=why_not)


def _spin_until(executor: Any, done: Any, seconds: float) -> None:
    end = time.monotonic() + seconds
    while not done() and time.monotonic() < end:
        executor.spin_once(timeout_sec=SPIN)
