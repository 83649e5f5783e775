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
The node's configuration as typed records: what :func:`.config.load_config` returns.

Kept apart from the reading and validating of parameters (:mod:`.config`) so the
modules that only use a configuration (proxies, sensors, tasks) import records,
not the parameter machinery.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from muscle_mem_ros.bindings.rules import Declared, DEFAULT_MAX_SHIFT
from muscle_mem_ros.checks.rest import DEFAULT_REST_WINDOW
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.records import CompareMode, ImageLayout, SensorSpec, ToolKind
from muscle_mem_ros.replay.booking import StepBack
from muscle_mem_ros.replay.gates import Gate
from muscle_mem_ros.ros.messages.introspection import FieldExtractor, NamedFields
from muscle_mem_ros.ros.messages.success import SuccessRule
from muscle_mem_ros.store import DEFAULT_ABANDONED_RETENTION

__all__ = [
    'CacheMode',
    'changed_mode',
    'DEFAULT_AGREEMENT',
    'DEFAULT_DESCRIPTION_TIMEOUT',
    'DEFAULT_STORE_PATH',
    'NodeConfig',
    'parse_cache_mode',
    'parse_record_from',
    'RecordFrom',
    'SensorConfig',
    'ToolConfig',
]

DEFAULT_STORE_PATH = '~/.ros/muscle_mem/cache.db'
"""Where the cache lives unless ``store_path`` says otherwise."""
DEFAULT_DESCRIPTION_TIMEOUT = 2.0
"""Seconds configure waits for the robot description (``robot_description_timeout``)."""
DEFAULT_STOP_TIMEOUT = 5.0
"""Seconds a goal the cache stops gets to end, and then the robot to rest (``stop_timeout``)."""
STOP_SERVICE_TYPE = 'std_srvs/srv/Trigger'
OWN_STATE_TYPES = frozenset({
    'sensor_msgs/msg/JointState', 'sensor_msgs/msg/MultiDOFJointState',
    'nav_msgs/msg/Odometry', 'control_msgs/msg/JointTrajectoryControllerState',
    'control_msgs/msg/DynamicJointState',
})
"""Message types that carry the robot's own state (its joints, its odometry): a sensor of
one of them, or one read by joint name, is always a rest sensor (:class:`StopRule`)."""
"""The type of an action tool's ``stop_service`` unless ``stop_service_type`` says another."""
DEFAULT_AGREEMENT = 0.005
"""Shadow agreement tolerance of a tool's goal numbers (5 mm, or 0.005 rad)."""


class CacheMode(Enum):
    """What the node does with an ExecuteTask goal (MoveIt trajectory-cache style)."""

    LEARN = 'learn'
    """Replay when the checks pass, otherwise hand off to the agent and learn its steps."""
    REPLAY_ONLY = 'replay_only'
    """Replay or fail: the agent is never called; a miss is a failure with the reason."""
    RECORD_ONLY = 'record_only'
    """Always call the agent from the start and record what it does; never replay."""
    OFF = 'off'
    """Pure pass-through: goals go to the agent, proxies forward, nothing is stored."""
    SHADOW = 'shadow'
    """The agent does every task (learned as in ``learn``); the cache only predicts each
    step and counts how often it agreed (:mod:`muscle_mem_ros.replay.shadow`)."""


class RecordFrom(Enum):
    """Where a tool's calls are recorded from (``actions.<name>.record_from``)."""

    PROXY = 'proxy'
    """The node serves the tool under a proxy name the agent calls; the proxy records."""
    INTROSPECTION = 'introspection'
    """The agent calls the real server; the node records from its introspection events."""


@dataclass(frozen=True)
class SensorConfig:
    """
    One sensor topic and how its feature is compared.

    :ivar name: Sensor name; also the feature name in snapshots and events.
    :ivar topic: Topic to subscribe to.
    :ivar type_name: Message type name as configured.
    :ivar msg_type: The resolved message class.
    :ivar extractors: Compiled field paths, concatenated in order.
    :ivar tolerance: One value, or one per element of the flattened feature.
    :ivar mode: How deviations are reduced to a score.
    :ivar max_age: Seconds after which a reading counts as stale.
    :ivar joints: Element names selected from the message's ``name`` array, in
        feature order; empty for positional reading.
    :ivar by_name: Reads the ``name`` array and the value arrays parallel to it
        (set when ``joints`` is).
    :ivar bind: ``auto`` or ``never``: may inferred bindings read it; None: by its size
        (:func:`~muscle_mem_ros.bindings.rules.sensor_sources`).
    :ivar watch: ``watch: auto``: traced and watched during action steps (up to
        :data:`~muscle_mem_ros.checks.tube.MAX_WATCHED` elements); False for ``never``.
    :ivar image: A camera sensor's grid (:mod:`.imageconfig`); None for other sensors.
    :ivar frames: A TF sensor (:mod:`.frameconfig`): (relative_to, frame); None for others.
    """

    name: str
    topic: str
    type_name: str
    msg_type: Any
    extractors: tuple[FieldExtractor, ...]
    tolerance: tuple[float, ...]
    mode: CompareMode
    max_age: float
    joints: tuple[str, ...] = ()
    by_name: NamedFields | None = None
    bind: str | None = None
    watch: bool = True
    image: ImageLayout | None = None
    frames: tuple[str, str] | None = None

    @property
    def size(self) -> int | None:
        """Length of the feature vector when fixed by the type or the names, else None."""
        if self.frames is not None:
            return 7  # a pose: x, y, z, qx, qy, qz, qw
        if self.joints:
            return len(self.extractors) * len(self.joints)
        sizes = [e.size for e in self.extractors]
        known = [s for s in sizes if s is not None]
        return None if len(known) < len(sizes) else sum(known)

    @property
    def own_state(self) -> bool:
        """Return whether it reads the robot's own state (:data:`OWN_STATE_TYPES`, ``joints``)."""
        package, *_, name = self.type_name.split('/')
        return bool(self.joints) or f'{package}/msg/{name}' in OWN_STATE_TYPES

    @property
    def spec(self) -> SensorSpec:
        """Return the core's view of this sensor's tolerance."""
        return SensorSpec(
            name=self.name, tolerance=self.tolerance, mode=self.mode, max_age=self.max_age,
            bind=self.bind, image=self.image,
        )


@dataclass(frozen=True)
class ToolConfig:
    """
    One proxied action or service.

    :ivar name: Tool name in the configuration.
    :ivar kind: Action or service.
    :ivar server: The real server's name (replay sends here).
    :ivar proxy: The name the node serves (point the agent here); '' when
        ``record_from`` is introspection (nothing is served).
    :ivar type_name: Interface type name as configured.
    :ivar interface: The resolved action or service class.
    :ivar record_from: Where its calls are recorded from (see :mod:`..capture.tap`).
    :ivar success: When an answer counts as success beyond its status
        (:mod:`..messages.success`); None: the default rule.
    """

    name: str
    kind: ToolKind
    server: str
    proxy: str
    type_name: str
    interface: Any
    record_from: RecordFrom = RecordFrom.PROXY
    success: SuccessRule | None = None
    agreement: float = DEFAULT_AGREEMENT
    """Shadow runs: goal numbers closer than this to the cache's prediction agree."""
    stop: StopConfig | None = None
    """An action's own stop, beyond the cancel (None: the cancel is all there is)."""


@dataclass(frozen=True)
class StopConfig:
    """
    An action tool's own stop (``actions.<tool>.stop_goal`` / ``stop_service``).

    Used when its server refuses the cache's cancel, or does not end the goal within
    ``stop_timeout`` of it (:mod:`..capture.stopping`).

    :ivar goal: A goal of the tool's type, sent to its server (None: a service or a hold).
    :ivar text: The goal as given (JSON), for people.
    :ivar service: A service called with an empty request ('' : a goal).
    :ivar service_type: That service's type (the class).
    :ivar hold: The goal is built at stop time: the stopped goal's joints where they are
        (:mod:`.stops`, the default of a FollowJointTrajectory tool).
    """

    goal: Any = None
    text: str = ''
    service: str = ''
    service_type: Any = None
    hold: bool = False


@dataclass(frozen=True)
class StopRule:
    """
    What every stop on a node is held to (:mod:`..capture.stopping`).

    :ivar specs: The sensors' specs (the rest is judged on those a step names).
    :ivar timeout: ``stop_timeout``.
    :ivar window: ``rest_window``.
    :ivar own: The sensors of the robot's own state (:attr:`SensorConfig.own_state`): the
        rest is judged on them after every stop, whatever the step names.
    """

    specs: tuple[SensorSpec, ...] = ()
    timeout: float = DEFAULT_STOP_TIMEOUT
    window: float = DEFAULT_REST_WINDOW
    own: frozenset[str] = frozenset()


@dataclass(frozen=True)
class NodeConfig:
    """Everything the node reads from its parameters, validated."""

    store_path: str
    agent_action: str
    cache_mode: CacheMode
    step_timeout: float
    post_check_timeout: float
    agent_timeout: float
    sensor_startup_timeout: float
    allow_unchecked_replay: bool
    sensors: tuple[SensorConfig, ...]
    actions: tuple[ToolConfig, ...]
    services: tuple[ToolConfig, ...]
    abandoned_recording_retention: float = DEFAULT_ABANDONED_RETENTION
    """Seconds; recordings abandoned by a stopped process are purged at start once this old."""
    bindings: tuple[Declared, ...] = ()
    """Declared goal-field bindings (bindings.rules), tools by server name."""
    infer_bindings: bool = True
    """Infer bindings from the recordings (parameters from one, sensors from two)."""
    binding_max_shift: float = DEFAULT_MAX_SHIFT
    """``max_shift`` of inferred numeric bindings, in the source's units."""
    robot_id: str = ''
    """Who this node records for in a shared (PostgreSQL) store."""
    replay_requires: Gate = Gate()
    step_back: StepBack = StepBack()
    """What a trajectory must have earned before it replays (replay.gates)."""
    watch: bool = True
    """Trace action steps while recording and watch them while replaying (checks.tube)."""
    watch_rate: float = 40.0
    """Hz at which the sensors are sampled while an action step runs."""
    watch_tolerance_scale: float = 1.0
    """Factor on every sensor tolerance while a step is watched."""
    stop_timeout: float = DEFAULT_STOP_TIMEOUT
    """Seconds a stopped goal gets to end, and then the robot to come to rest."""
    rest_window: float = DEFAULT_REST_WINDOW
    """Seconds of stillness that make a stopped robot at rest (checks.rest)."""
    robot_description_file: str = ''
    """A file with the robot description ('': read the robot_description topic)."""
    robot_description_timeout: float = DEFAULT_DESCRIPTION_TIMEOUT
    """Seconds configure waits for the robot_description topic (0: none)."""
    body_name: str = ''
    """Readable name of the body ('': the description's robot name, else the node's)."""

    @property
    def watched(self) -> frozenset[str]:
        """Return the names of the sensors traced and watched; none when ``watch`` is off."""
        return frozenset(s.name for s in self.sensors if s.watch) if self.watch else frozenset()

    @property
    def stop_rule(self) -> StopRule:
        """Return what a goal the cache stops is held to."""
        return StopRule(tuple(s.spec for s in self.sensors), self.stop_timeout, self.rest_window,
                        frozenset(s.name for s in self.sensors if s.own_state))

    @property
    def tools(self) -> tuple[ToolConfig, ...]:
        """Actions then services."""
        return self.actions + self.services


def parse_cache_mode(value: Any, *, parameter: str = 'cache_mode') -> CacheMode:
    """Parse a cache mode name; raise ConfigError naming ``parameter``."""
    try:
        return CacheMode(str(value).strip().lower())
    except ValueError as err:
        names = '|'.join(m.value for m in CacheMode)
        raise ConfigError(f'{parameter}: {value!r} is not one of {names}') from err


def changed_mode(changes: Iterable[tuple[str, Any]]) -> CacheMode | None:
    """
    Return the cache mode a change of parameters at run time sets (None: it sets none).

    Once configured only ``cache_mode`` may change; it applies from the next goal.

    :param changes: Each changed parameter's name and value, in the order given.
    :raises ConfigError: Another parameter, or a value that is no mode (the reason
        ``ros2 param set`` shows).
    """
    mode = None
    for name, value in changes:
        if name != 'cache_mode':
            raise ConfigError(f'{name}: read when configured; clean up and configure again')
        mode = parse_cache_mode(value)
    return mode


def parse_record_from(value: Any, *, parameter: str) -> RecordFrom:
    """
    Parse a ``record_from`` value.

    :param value: the given value (``proxy`` or ``introspection``, any case).
    :param parameter: the parameter's full name, for the error message.
    :return: the parsed value.
    :raises ConfigError: any other value, naming ``parameter``.
    """
    try:
        return RecordFrom(str(value).strip().lower())
    except ValueError as err:
        names = '|'.join(m.value for m in RecordFrom)
        raise ConfigError(f'{parameter}: {value!r} is not one of {names}') from err
