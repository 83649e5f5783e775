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
BehaviorCacheNode: the behavior cache between a planning agent and the robot.

Node name ``muscle_mem``. Interfaces (relative names resolve under the node):

* action ``~/execute_task`` (muscle_mem_interfaces/action/ExecuteTask): run a
  task: replay from the cache, hand off to the agent, learn (its goals
  :mod:`muscle_mem_ros.ros.execution.goals`, a goal's run
  :mod:`muscle_mem_ros.ros.execution.tasks`).
* services ``~/replay``, ``~/list_tasks``, ``~/get_trajectory``, ``~/forget``,
  ``~/start_recording``, ``~/stop_recording`` (:mod:`..execution.services`); ``~/calibrate``
  (sensor noise at rest and proposed tolerances, :mod:`..execution.calibrator`).
* topic ``~/events`` (muscle_mem_interfaces/msg/CacheEvent): one message per decision.
* topic ``~/watch`` (muscle_mem_interfaces/msg/WatchTick): each reading a replayed step's
  watch judges, only while a subscriber is matched (:mod:`..execution.watchticks`).
* topic ``/diagnostics`` (diagnostic_msgs/msg/DiagnosticArray, 1 Hz, ``hardware_id``
  the node's full name): mode, hit rate, steps saved, whether the agent's action
  server is discovered (``agent``: available, not discovered, none), store health
  (``store``: ok; ``degraded: <error>`` while writes fail, WARN, until one succeeds,
  see :mod:`.health`; ``error: ...``, ERROR, when the store cannot even be read).
* one proxy per configured action or service (:mod:`..capture.proxies`); for a tool with
  ``record_from: introspection`` only its client (for replay) and a tap on its
  introspection event topics (:mod:`..capture.tap`) instead of a served proxy; subscriptions to
  the configured sensors (:mod:`..capture.sensors`, on a hidden helper node
  ``_<name>_sensors`` with its own receive thread).

The proxies' servers and clients live on another hidden node,
``_<name>_proxies``, spun by its own ``SingleThreadedExecutor`` thread: a
pass-through goal then never goes through the main pool's thread hand-offs
(measured: about half the added latency). Proxied calls are coroutines and
block nothing there; a recording's post snapshot waits in a thread of its own.
rclpy's experimental ``EventsExecutor`` would be cheaper per message, but in
rclpy 9.1.2 it never runs an accepted action goal's execute callback (checked
with one action server and one client), so it cannot serve the proxies.

A managed (lifecycle) node: configure reads the parameters and opens the
store, activate serves, deactivate cancels and stops serving, cleanup and
shutdown close the store (see :class:`BehaviorCacheNode`). ``autostart``
(default true) makes :mod:`.main` go through configure and activate at once.

Parameters are described in :mod:`.config` (each is declared with a
descriptor: ``ros2 param describe``) and the package's
``config/behavior_cache.yaml``. ``cache_mode`` may be changed at run time
(``ros2 param set /muscle_mem cache_mode replay_only``); it applies from the
next goal. Every other parameter is read-only once configured.

One activity at a time: an ExecuteTask goal, a Replay call, a manual
recording or a Forget. A second ExecuteTask goal while one runs is accepted
and at once aborted with ``success=false`` and a message naming the running
activity (a plain goal rejection could not say why; see
:mod:`muscle_mem_ros.ros.execution.goals`).

Callback groups: every server, client and timer of the main node is in a
reentrant group and the node runs in a ``MultiThreadedExecutor`` (see
:mod:`.main`). The only callbacks that block a thread there are a running task
or Replay call (one at a time); its replayed calls are completed by the proxy
thread, and its sensor waits by the sensor thread, so nothing it waits on
needs a thread it holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import CacheEvent, WatchTick
from muscle_mem_interfaces.srv import (
    Approve,
    Calibrate,
    ConfirmStandstill,
    Forget,
    GetTrajectory,
    ListTasks,
    Replay,
    StartRecording,
    StopRecording,
)
from muscle_mem_ros.errors import ConfigError, MuscleMemError
from muscle_mem_ros.records import CheckFailure
from muscle_mem_ros.ros.capture.forwarding import ToolProxy
from muscle_mem_ros.ros.capture.host import ProxyHost
from muscle_mem_ros.ros.capture.recorder import Recorder
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.capture.tracing import Sampler
from muscle_mem_ros.ros.execution.calibrator import Calibrator
from muscle_mem_ros.ros.execution.events import cache_event, ClockTrail, EVENTS_QOS, Watched
from muscle_mem_ros.ros.execution.goals import TaskGoals
from muscle_mem_ros.ros.execution.inflight import wind_down
from muscle_mem_ros.ros.execution.replay import Replayer
from muscle_mem_ros.ros.execution.services import CacheServices
from muscle_mem_ros.ros.execution.standstill import Standstill
from muscle_mem_ros.ros.execution.tasks import TaskRunner
from muscle_mem_ros.ros.execution.watchticks import WatchTicks
from muscle_mem_ros.ros.node.config import load_config, NODE_OPTIONS, read_autostart
from muscle_mem_ros.ros.node.description import read_body
from muscle_mem_ros.ros.node.diagnostics import cache_status
from muscle_mem_ros.ros.node.health import report_incomplete, StoreHealth
from muscle_mem_ros.ros.node.nodeconfig import (
    CacheMode,
    changed_mode,
    DEFAULT_AGREEMENT,
    NodeConfig,
)
from muscle_mem_ros.ros.node.serving import Serving
from muscle_mem_ros.ros.rclfix.action_client import ActionClient
from muscle_mem_ros.ros.rclfix.logbridge import LoggingBridge
from muscle_mem_ros.ros.rclfix.sync import TaskGuard
from muscle_mem_ros.store import open_store, redact, Store
from muscle_mem_ros.store.postgres.link import is_postgres_url
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.lifecycle import (
    LifecycleNode, LifecyclePublisher, LifecycleState, TransitionCallbackReturn,
)
from rclpy.parameter import Parameter
from std_msgs.msg import Header

__all__ = ['BehaviorCacheNode']

Handler = Callable[[Any, Any], Any]
"""A service handler: ``handler(request, response)`` returns the response (untyped messages)."""


class BehaviorCacheNode(LifecycleNode):
    """
    The behavior-cache node, a managed (lifecycle) node.

    Construction only declares ``autostart``; the transitions do the work:

    * configure: read and validate the parameters (:func:`.config.load_config`),
      open the store, create the ``~/events`` and ``/diagnostics`` lifecycle
      publishers, forward the core's Python logging to this node's logger (so it
      reaches ``/rosout``). A bad parameter fails the transition (FAILURE, back
      to unconfigured) with the error logged, naming the parameter;
      :attr:`config_error` keeps it.
      The ExecuteTask action server is made here too
      (:class:`~muscle_mem_ros.ros.execution.goals.TaskGoals`), as nav2 makes its action
      servers at configure: while the node is inactive it stays advertised and
      rejects every goal, so the result of a goal canceled by a deactivation still
      reaches its client, and a client waiting for the server sees it at once.
    * activate: start the sensors, the proxies, the services, the diagnostics
      timer; accept ExecuteTask goals; index the store's first steps.
    * deactivate: cancel the running task, replay or recording, wait for it to
      end, and stop serving: services, proxies and sensors are destroyed (with
      the hidden helper nodes); ExecuteTask goals are rejected.
    * cleanup / shutdown: undo configure exactly (the store is closed, the
      ExecuteTask server destroyed).

    With ``autostart`` (default true) :mod:`.main` configures and activates the
    node at once; with false it waits for ``ros2 lifecycle set`` (the standard
    ``~/change_state`` service), as a lifecycle manager expects.

    :param node_name: Default node name (a ``__node`` remap overrides it).
    :param kwargs: Passed to ``rclpy.node.Node`` (for example ``parameter_overrides``).
    :raises ConfigError: A parameter given with no value (rclpy cannot declare it),
        or ``autostart`` that is not true or false.
    """

    def __init__(self, *, node_name: str = 'muscle_mem', **kwargs: Any) -> None:
        try:
            super().__init__(node_name, **{**NODE_OPTIONS, **kwargs})
        except ValueError as err:  # rclpy cannot declare a given parameter of no value
            raise ConfigError(
                f'parameters: one is given with no value (an empty list [] or null), which '
                f'ROS cannot declare: remove it or give it a value ({err})') from err
        self.autostart: bool = read_autostart(self)
        self.config_error: MuscleMemError | None = None
        self._mode = CacheMode.LEARN
        self._closing = False
        self._group = ReentrantCallbackGroup()
        self._stamps = ClockTrail(self)  # events stamped on the node's clock, /clock too
        self._guard = TaskGuard()
        self._configured: _Configured | None = None
        self._active: Serving | None = None
        self._proxy_host: ProxyHost | None = None
        self._goals = TaskGoals(
            node=self, guard=self._guard, group=self._group, sink=self.publish_event,
            mode=lambda: self._mode, accepting=lambda: self._active is not None,
            runner=lambda: self._active.runner if self._active is not None else None,
            hub=lambda: self._active.hub if self._active is not None else None)
        self._frozen = False
        self._standstill = Standstill(logger=self.get_logger(), sink=self.publish_event)
        self.add_on_set_parameters_callback(self._on_set_parameters)

    # -- transitions -------------------------------------------------------------------

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Read and validate the parameters, open the store; FAILURE on a bad one."""
        self.config_error = None
        try:
            self._configure()
        except MuscleMemError as err:
            self.config_error = err
            self.get_logger().fatal(f'bad configuration: {err}')
            self._cleanup()
            return TransitionCallbackReturn.FAILURE
        except Exception as err:  # rclpy would turn it into ERROR without a word
            self.config_error = err  # type: ignore[assignment]
            self.get_logger().fatal(f'cannot configure: {err!r}')
            self._cleanup()
            return TransitionCallbackReturn.FAILURE
        return super().on_configure(state)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Start the sensors, proxies and services; accept ExecuteTask goals."""
        try:
            self._activate()
        except Exception as err:  # rclpy would turn it into ERROR without a word
            self.get_logger().error(f'cannot activate: {err!r}')
            self._deactivate()
            return TransitionCallbackReturn.FAILURE
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Cancel what runs, wait for it to end, stop serving."""
        self._deactivate()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Undo configure: close the store, remove the logging bridge."""
        self._cleanup()
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Deactivate and clean up, whatever the state."""
        self.close()
        return super().on_shutdown(state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Tear everything down after an error; the node is unconfigured again."""
        self.close()
        self._closing = False
        return TransitionCallbackReturn.SUCCESS

    def _configure(self) -> None:
        self._closing = False
        bridge = LoggingBridge(self.get_logger())
        bridge.install()
        parts = _Configured(bridge=bridge)
        self._configured = parts
        parts.config = config = load_config(self)
        self._mode = config.cache_mode
        try:
            parts.store = open_store(
                config.store_path, abandoned_retention=config.abandoned_recording_retention,
                robot_id=config.robot_id, start_unreachable=True)
        except MuscleMemError as err:
            raise ConfigError(f'store_path: cannot open {_shown(config.store_path)!r}: '
                              f'{err}') from err
        parts.health = StoreHealth(logger=self.get_logger())
        parts.recorder = Recorder(store=parts.store, body=read_body(self, config, parts.store))
        parts.events = self.create_lifecycle_publisher(CacheEvent, '~/events', EVENTS_QOS)
        parts.watch = self.create_lifecycle_publisher(WatchTick, '~/watch', 50)
        parts.diagnostics = self.create_lifecycle_publisher(
            DiagnosticArray, '/diagnostics', 10)
        self._goals.serve(recorder=parts.recorder, post_timeout=config.post_check_timeout)
        report_incomplete(parts.store, self.get_logger(),
                          retention=config.abandoned_recording_retention)
        self._frozen = True
        self.get_logger().info(
            f'configured: mode {self._mode.value}, store {_shown(config.store_path)}, '
            f'{len(config.sensors)} sensors, {len(config.tools)} tools, agent '
            f"{config.agent_action or '(none)'}")
        if not config.tools:
            self.get_logger().warning(
                'no actions or services configured: nothing can be recorded or replayed '
                '(was the params file found and does its top key match the node name?)')
        elif not config.sensors and not config.allow_unchecked_replay:
            self.get_logger().warning(
                'no sensors configured: recorded steps have no checks and are never replayed '
                '(set allow_unchecked_replay to replay blindly)')

    def _activate(self) -> None:
        parts = self._configured
        assert parts is not None and parts.config is not None and parts.store is not None
        assert parts.recorder is not None
        config, store, recorder = parts.config, parts.store, parts.recorder
        self._closing = False
        active = Serving()
        self._active = active
        active.hub = SensorHub(node=self, sensors=config.sensors, on_error=self._sensor_error)
        if config.watched:
            active.sampler = Sampler(active.hub, config.watch_rate, on_error=self._sensor_error)
            self.get_logger().info(
                f"watch: {', '.join(sorted(config.watched))} traced while an action step is "
                f'recorded and watched while one is replayed ({config.watch_rate:g} Hz; '
                'a sensor of more than 16 elements is not)')
        if config.tools:
            host = self._proxy_host = ProxyHost(self)
            active.proxies = host.proxies(
                tools=config.tools, hub=active.hub, recorder=recorder,
                post_timeout=config.post_check_timeout, timeout=config.step_timeout,
                logger=self.get_logger(), sampler=active.sampler, traced=config.watched,
                stop_rule=config.stop_rule, held=self._standstill)
            active.taps = host.taps(
                proxies=active.proxies, tools=config.tools, hub=active.hub, recorder=recorder,
                post_timeout=config.post_check_timeout, logger=self.get_logger())
        tolerances = {tool.server: tool.agreement for tool in config.tools}

        def agreement(server: str) -> float:
            return tolerances.get(server, DEFAULT_AGREEMENT)
        active.replayer = Replayer(
            store=store, hub=active.hub, tools=active.proxies,
            sensors=[s.spec for s in config.sensors],
            allow_unchecked_replay=config.allow_unchecked_replay,
            step_timeout=config.step_timeout, post_timeout=config.post_check_timeout,
            sensor_startup_timeout=config.sensor_startup_timeout, health=parts.health,
            declared=config.bindings, infer_bindings=config.infer_bindings,
            binding_max_shift=config.binding_max_shift, gate=config.replay_requires,
            step_back=config.step_back, agreement=agreement, body=recorder.body,
            watched=config.watched if active.sampler is not None else frozenset(),
            watch_scale=config.watch_tolerance_scale, watch_rate=config.watch_rate,
            own=config.stop_rule.own,
        )
        if config.agent_action:
            active.agent = ActionClient(
                self, ExecuteTask, config.agent_action, callback_group=self._group)
        active.runner = TaskRunner(
            store=store, replayer=active.replayer, recorder=recorder, agent=active.agent,
            agent_name=config.agent_action, agent_timeout=config.agent_timeout,
            sink=self.publish_event, logger=self.get_logger(), health=parts.health,
            agreement=agreement, stack=self._goals.stack, held=self._standstill.refusal,
            proxies=active.proxies, stop_rule=config.stop_rule)
        active.replayer.subtasks = self._goals.subtasks.replay_step
        active.replayer.ticks = WatchTicks(publisher=parts.watch, logger=self.get_logger(),
                                           stamp=partial(self._stamps.stamp, None))
        handlers = active.handlers = CacheServices(
            store=store, replayer=active.replayer, recorder=recorder,
            guard=self._guard, sink=self.publish_event, logger=self.get_logger(),
            mode=lambda: self._mode, held=self._standstill.refusal,
        )
        calibrator = Calibrator(hub=active.hub, sensors=config.sensors, guard=self._guard,
                                node_name=self.get_name(), stopping=lambda: self._closing)
        for srv_type, name, handler in (
            (Calibrate, '~/calibrate', calibrator.handle),
            (ConfirmStandstill, '~/confirm_standstill', self._standstill.handle),
            (Replay, '~/replay', handlers.replay),
            (ListTasks, '~/list_tasks', handlers.list_tasks),
            (GetTrajectory, '~/get_trajectory', handlers.get_trajectory),
            (Forget, '~/forget', handlers.forget),
            (Approve, '~/approve', handlers.approve),
            (StartRecording, '~/start_recording', handlers.start_recording),
            (StopRecording, '~/stop_recording', handlers.stop_recording),
        ):
            active.services.append(self.create_service(
                srv_type, name, self._guarded(name, handler), callback_group=self._group))
        active.diag_timer = self.create_timer(1.0, self._publish_diagnostics, self._group)
        self._standstill.watch(active.hub.capture, config.stop_rule, config.watch_rate)
        active.replayer.warm_in_background(
            logger=self.get_logger(), name=f'{self.get_name()} warm', quiet=lambda: self._closing)
        self.get_logger().info(
            f'behavior cache ready: mode {self._mode.value}, store {_shown(config.store_path)}, '
            f'{len(config.sensors)} sensors, {len(active.proxies)} tools, agent '
            f"{config.agent_action or '(none)'}"
        )

    def _deactivate(self) -> None:
        """Cancel what runs, wait for it (bounded), destroy what activate made."""
        active = self._active
        if active is None:
            return
        self._closing = True
        self.cancel_all()
        wind_down(guard=self._guard, proxies=active.proxies.values(), logger=self.get_logger(),
                  rule=self.config.stop_rule)
        parts = self._configured
        if parts is not None and parts.recorder is not None and parts.recorder.unwind(None):
            self.get_logger().info('deactivate: the open recording was discarded')
        if active.replayer is not None:  # a restart reads, not relearns, what it learned
            active.replayer.keep_learned(self.get_logger())
        active.stop(node=self, recorder=parts.recorder if parts is not None else None,
                    host=self._proxy_host, standstill=self._standstill)
        self._proxy_host = None
        self._active = None

    def _cleanup(self) -> None:
        """Undo configure: close the store, destroy the publishers, remove the bridge."""
        parts = self._configured
        self._frozen = False
        self._goals.stop()
        if parts is None:
            return
        self._configured = None
        if parts.store is not None:
            try:
                parts.store.close()
            except MuscleMemError as err:
                self.get_logger().error(f'closing the store: {err}')
        for publisher in filter(None, (parts.events, parts.diagnostics, parts.watch)):
            self.destroy_lifecycle_publisher(publisher)
        parts.bridge.remove()

    # -- state shortcuts ----------------------------------------------------------------

    @property
    def config(self) -> NodeConfig:
        """Return the configuration (only while configured)."""
        assert self._configured is not None and self._configured.config is not None
        return self._configured.config

    @property
    def store(self) -> Store:
        """Return the open store; only while configured."""
        assert self._configured is not None and self._configured.store is not None
        return self._configured.store

    @property
    def recorder(self) -> Recorder:
        """Return the recorder; only while configured."""
        assert self._configured is not None and self._configured.recorder is not None
        return self._configured.recorder

    @property
    def health(self) -> StoreHealth:
        """Return the store health; only while configured."""
        assert self._configured is not None and self._configured.health is not None
        return self._configured.health

    @property
    def hub(self) -> SensorHub | None:
        """Return the sensor hub while active, else None."""
        return self._active.hub if self._active is not None else None

    @property
    def proxies(self) -> dict[str, ToolProxy]:
        """Return the proxies by server name ({} unless active)."""
        return self._active.proxies if self._active is not None else {}

    def _guarded(self, name: str, handler: Handler) -> Handler:
        """Wrap a service handler: an unexpected error answers success=false, never kills."""
        def call(request: Any, response: Any) -> Any:
            try:
                return handler(request, response)
            except Exception as err:  # the node must outlive any bad request
                self.get_logger().error(f'{name}: {err!r}')
                response.success = False
                response.message = f'internal error: {err}'
                return response
        return call

    @property
    def mode(self) -> CacheMode:
        """Return the current cache mode."""
        return self._mode

    def publish_event(
        self, *, kind: int, task: str, step: int, trajectory_id: int = 0, detail: str = '',
        failure: CheckFailure | None = None, substituted: Sequence[Any] = (),
        watched: Watched = ((), ()), at: float | None = None,
    ) -> None:
        """
        Publish one CacheEvent on ``~/events`` (while active); ``substituted``: messages.

        :param at: When it happened (monotonic seconds; None: now): the stamp says that
            time on the node's clock.
        """
        parts = self._configured
        if parts is None or parts.events is None or not parts.events.is_activated:
            return
        parts.events.publish(cache_event(
            stamp=self._stamps.stamp(at), kind=kind, task=task, step=step,
            trajectory_id=trajectory_id, detail=detail, failure=failure,
            substituted=substituted, watched=watched, depth=self._goals.stack.depth_of(task)))

    def _sensor_error(self, message: str) -> None:
        self.get_logger().error(message)
        self.publish_event(kind=CacheEvent.ERROR, task='', step=-1, detail=message)

    def _on_set_parameters(self, params: list[Parameter[Any]]) -> SetParametersResult:
        if not self._frozen:
            return SetParametersResult(successful=True)  # read by the next configure
        try:
            mode = changed_mode((param.name, param.value) for param in params)
        except ConfigError as err:
            return SetParametersResult(successful=False, reason=str(err))
        if mode is not None:
            self._mode = mode
            self.get_logger().info(f'cache_mode is now {mode.value}')
        return SetParametersResult(successful=True)

    def _publish_diagnostics(self) -> None:
        parts, active = self._configured, self._active
        if parts is None or parts.diagnostics is None:
            return
        runs, hits = self._goals.counts()
        runner = active.runner if active is not None else None
        values = {'cache_mode': self._mode.value, 'store_path': _shown(self.config.store_path),
                  'busy': self._guard.holder or '', 'robot': self._standstill.status()}
        dropped = active.hub.dropped() if active is not None and active.hub is not None else {}
        if dropped:  # camera frames that did not decode since start
            values['frames_dropped'] = ', '.join(f'{n}: {c}' for n, c in sorted(dropped.items()))
        status = cache_status(
            name=f'{self.get_name()}: behavior cache', hardware_id=self.get_fully_qualified_name(),
            values=values,
            store=self.store, health=self.health, runs=runs, hits=hits,
            steps_saved=runner.steps_replayed_total if runner is not None else 0,
            agent=active.agent if active is not None else None,
            booked=active.replayer.booked if active is not None and active.replayer else None)
        parts.diagnostics.publish(DiagnosticArray(
            header=Header(stamp=self.get_clock().now().to_msg()), status=[status]))

    def cancel_all(self) -> None:
        """Cancel the running task or replay (its in-flight goal is canceled too)."""
        self._goals.cancel()
        active = self._active
        if active is not None and active.handlers is not None \
                and active.handlers.cancel is not None:
            active.handlers.cancel.cancel()

    def end_goals(self, timeout: float) -> None:
        """
        Cancel the running task or replay and wait until its client has the result.

        Shutdown calls it while the executor still spins, so that a client of a task
        running at Ctrl-C gets an aborted result with the reason instead of waiting forever.

        :param timeout: Seconds to wait at most.
        """
        self.cancel_all()
        if not self._goals.wait_results_sent(timeout):
            self.get_logger().warning(
                f'shutdown: an ExecuteTask result was not sent within {timeout:g} s')

    def close(self) -> None:
        """Deactivate and clean up, whatever the state (cancel, stop, close the store)."""
        self._closing = True
        self._deactivate()
        self._cleanup()


@dataclass
class _Configured:
    """What configure made; cleanup undoes it."""

    bridge: LoggingBridge
    config: NodeConfig | None = None
    store: Store | None = None
    health: StoreHealth | None = None
    recorder: Recorder | None = None
    events: LifecyclePublisher[Any] | None = None
    diagnostics: LifecyclePublisher[Any] | None = None
    watch: LifecyclePublisher[Any] | None = None


def _shown(store_path: str) -> str:
    """Return ``store_path`` as it may be logged: a database URL without its password."""
    return redact(store_path) if is_postgres_url(store_path) else store_path
