"""
BehaviorCacheNode: the behavior cache between a planning agent and the robot.

Node name ``muscle_mem``. Interfaces (relative names resolve under the node):

* action ``~/execute_task`` (muscle_mem_interfaces/action/ExecuteTask): run a
  task: replay from the cache, hand off to the agent, learn (:mod:`.tasks`).
* services ``~/replay``, ``~/list_tasks``, ``~/get_trajectory``, ``~/forget``,
  ``~/start_recording``, ``~/stop_recording`` (:mod:`.services`).
* topic ``~/events`` (muscle_mem_interfaces/msg/CacheEvent): one message per decision.
* topic ``/diagnostics`` (diagnostic_msgs/msg/DiagnosticArray, 1 Hz): mode, hit
  rate, steps saved, store health (``store``: ok; ``degraded: <error>`` while
  writes fail, WARN, until one succeeds, see :mod:`.health`; ``error: ...``, ERROR,
  when the store cannot even be read).
* one proxy per configured action or service (:mod:`.proxy`), subscriptions to
  the configured sensors (:mod:`.sensors`, on a hidden helper node
  ``_<name>_sensors`` with its own receive thread).

The proxies' servers and clients live on another hidden node,
``_<name>_proxies``, spun by its own ``SingleThreadedExecutor`` thread: a
pass-through goal then never goes through the main pool's thread hand-offs
(measured: about half the added latency). Proxied calls are coroutines and
block nothing there; a recording's post snapshot waits in a thread of its own.
rclpy's experimental ``EventsExecutor`` would be cheaper per message, but in
rclpy 9.1.2 it never runs an accepted action goal's execute callback (checked
with one action server and one client), so it cannot serve the proxies.

Parameters are described in :mod:`.config` and the package's
``config/behavior_cache.yaml``. ``cache_mode`` may be changed at run time
(``ros2 param set /muscle_mem cache_mode replay_only``); it applies from the
next goal. Every other parameter is read once at startup.

One activity at a time: an ExecuteTask goal, a Replay call, a manual
recording or a Forget. A second ExecuteTask goal while one runs is accepted
and at once aborted with ``success=false`` and a message naming the running
activity (a plain goal rejection could not say why).

Callback groups: every server, client and timer of the main node is in a
reentrant group and the node runs in a ``MultiThreadedExecutor`` (see
:mod:`.main`). The only callbacks that block a thread there are a running task
or Replay call (one at a time); its replayed calls are completed by the proxy
thread, and its sensor waits by the sensor thread, so nothing it waits on
needs a thread it holds.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import (
    Forget,
    GetTrajectory,
    ListTasks,
    Replay,
    StartRecording,
    StopRecording,
)
from muscle_mem_ros.errors import ConfigError, MuscleMemError
from muscle_mem_ros.records import CheckFailure
from muscle_mem_ros.ros.action_client import ActionClient
from muscle_mem_ros.ros.config import (
    CacheMode,
    load_config,
    NODE_OPTIONS,
    NodeConfig,
    parse_cache_mode,
)
from muscle_mem_ros.ros.health import StoreHealth
from muscle_mem_ros.ros.proxy import make_proxy, ToolProxy
from muscle_mem_ros.ros.recorder import Recorder
from muscle_mem_ros.ros.replay import Replayer
from muscle_mem_ros.ros.sensors import SensorHub
from muscle_mem_ros.ros.services import CacheServices
from muscle_mem_ros.ros.sync import CancelToken, TaskGuard
from muscle_mem_ros.ros.tasks import TaskRunner
from muscle_mem_ros.store import open_store
from rcl_interfaces.msg import SetParametersResult
import rclpy
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node as RosNode
from std_msgs.msg import Header

__all__ = ['BehaviorCacheNode']


class BehaviorCacheNode(RosNode):
    """
    The behavior-cache node.

    :param node_name: Default node name (a ``__node`` remap overrides it).
    :param kwargs: Passed to ``rclpy.node.Node`` (for example ``parameter_overrides``).
    :raises ConfigError: A bad parameter (the message starts with its name), or a
        store file that cannot be opened (``store_path: ...``).
    """

    def __init__(self, *, node_name: str = 'muscle_mem', **kwargs: Any) -> None:
        try:
            super().__init__(node_name, **{**NODE_OPTIONS, **kwargs})
        except ValueError as err:  # rclpy cannot declare a given parameter of no value
            raise ConfigError(
                f'parameters: one is given with no value (an empty list [] or null), which '
                f'ROS cannot declare: remove it or give it a value ({err})') from err
        self.config: NodeConfig = load_config(self)
        self._mode = self.config.cache_mode
        try:
            self.store = open_store(
                self.config.store_path,
                abandoned_retention=self.config.abandoned_recording_retention)
        except MuscleMemError as err:
            raise ConfigError(f'store_path: cannot open {self.config.store_path!r}: {err}') \
                from err
        self.health = StoreHealth(logger=self.get_logger())
        self._closing = False
        self._group = ReentrantCallbackGroup()
        self._events = self.create_publisher(CacheEvent, '~/events', 50)
        self._diagnostics = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self._guard = TaskGuard()
        self._counts = {'runs': 0, 'hits': 0}
        self._counts_lock = threading.Lock()
        self.hub = SensorHub(node=self, sensors=self.config.sensors, on_error=self._sensor_error)
        self.recorder = Recorder(store=self.store)
        self._proxy_node: RosNode | None = None
        self._proxy_executor: SingleThreadedExecutor | None = None
        self._proxy_thread: threading.Thread | None = None
        if self.config.tools:
            self._start_proxy_node()
        self.proxies: dict[str, ToolProxy] = {
            tool.server: make_proxy(
                node=self._proxy_node, tool=tool, hub=self.hub, recorder=self.recorder,
                callback_group=ReentrantCallbackGroup(),
                post_timeout=self.config.post_check_timeout,
                logger=self.get_logger(), timeout=self.config.step_timeout,
            )
            for tool in self.config.tools
        }
        self.replayer = Replayer(
            store=self.store, hub=self.hub, tools=self.proxies,
            sensors=[s.spec for s in self.config.sensors],
            allow_unchecked_replay=self.config.allow_unchecked_replay,
            step_timeout=self.config.step_timeout,
            post_timeout=self.config.post_check_timeout,
            sensor_startup_timeout=self.config.sensor_startup_timeout,
            health=self.health,
        )
        agent = None
        if self.config.agent_action:
            agent = ActionClient(
                self, ExecuteTask, self.config.agent_action, callback_group=self._group
            )
        self.runner = TaskRunner(
            store=self.store, replayer=self.replayer, recorder=self.recorder, agent=agent,
            agent_name=self.config.agent_action, agent_timeout=self.config.agent_timeout,
            sink=self.publish_event, logger=self.get_logger(), health=self.health,
        )
        self.handlers = CacheServices(
            store=self.store, replayer=self.replayer, recorder=self.recorder,
            guard=self._guard, sink=self.publish_event, logger=self.get_logger(),
            mode=lambda: self._mode,
        )
        self._task_tokens: dict[bytes, CancelToken] = {}
        self._execute_server = ActionServer(
            self, ExecuteTask, '~/execute_task', self._execute,
            goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=self._cancel_task, callback_group=self._group,
        )
        handlers = self.handlers
        for srv_type, name, handler in (
            (Replay, '~/replay', handlers.replay),
            (ListTasks, '~/list_tasks', handlers.list_tasks),
            (GetTrajectory, '~/get_trajectory', handlers.get_trajectory),
            (Forget, '~/forget', handlers.forget),
            (StartRecording, '~/start_recording', handlers.start_recording),
            (StopRecording, '~/stop_recording', handlers.stop_recording),
        ):
            self.create_service(
                srv_type, name, self._guarded(name, handler), callback_group=self._group
            )
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._diag_timer = self.create_timer(1.0, self._publish_diagnostics, self._group)
        self._report_incomplete()
        threading.Thread(target=self._warm, name=f'{self.get_name()} warm', daemon=True).start()
        self.get_logger().info(
            f'behavior cache ready: mode {self._mode.value}, store {self.config.store_path}, '
            f'{len(self.config.sensors)} sensors, {len(self.proxies)} tools, agent '
            f"{self.config.agent_action or '(none)'}"
        )
        if not self.proxies:
            self.get_logger().warning(
                'no actions or services configured: nothing can be recorded or replayed '
                '(was the params file found and does its top key match the node name?)')
        elif not self.config.sensors and not self.config.allow_unchecked_replay:
            self.get_logger().warning(
                'no sensors configured: recorded steps have no checks and are never replayed '
                '(set allow_unchecked_replay to replay blindly)')

    def _start_proxy_node(self) -> None:
        """Create the hidden proxy node and its single-threaded executor thread."""
        name = f'_{self.get_name()}_proxies'
        self._proxy_node = rclpy.create_node(
            name, context=self.context, namespace=self.get_namespace(),
            cli_args=['--ros-args', '-r', f'__node:={name}'], start_parameter_services=False,
        )
        self._proxy_executor = SingleThreadedExecutor(context=self.context)
        self._proxy_executor.add_node(self._proxy_node)
        self._proxy_thread = threading.Thread(
            target=self._spin_proxies, name=name, daemon=True)
        self._proxy_thread.start()

    def _spin_proxies(self) -> None:
        executor = self._proxy_executor
        if executor is None:
            return
        try:
            executor.spin()
        except Exception:  # the context was shut down under us: nothing left to serve
            pass

    def _guarded(self, name: str, handler: Any) -> Any:
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

    def _warm(self) -> None:
        """Load and index the store's first steps in the background (see ``Replayer.warm``)."""
        started = time.monotonic()
        try:
            count = self.replayer.warm()
        except Exception as err:  # closing, or a store problem the first task will report
            if not self._closing:
                self.get_logger().warning(f'store: could not preload first steps: {err!r}')
            return
        took = time.monotonic() - started
        self.get_logger().info(f'store: {count} first step(s) loaded and indexed in {took:.2f} s')

    def _report_incomplete(self) -> None:
        """Warn about recordings an earlier run abandoned (never replayed); note live ones."""
        purged = getattr(self.store, 'purged', 0)
        if purged:
            self.get_logger().info(
                f'store: purged {purged} abandoned recording(s) older than '
                f'{self.config.abandoned_recording_retention:g} s')
        try:
            unfinished = self.store.incomplete_recordings()
        except (MuscleMemError, AttributeError):
            return
        for info in unfinished:
            if info.live:
                self.get_logger().info(
                    f"recording {info.id} of task '{info.task}' is in progress in another "
                    f'process ({info.owner})')
                continue
            self.get_logger().warning(
                f"recording {info.id} of task '{info.task}' ({info.step_count} steps) was "
                f'never finished (the process stopped during it: {info.owner}); it is never '
                'replayed, and purged after abandoned_recording_retention or by the forget '
                'service (abandoned_recordings: true)'
            )

    @property
    def mode(self) -> CacheMode:
        """Return the current cache mode."""
        return self._mode

    def publish_event(
        self, *, kind: int, task: str, step: int, trajectory_id: int = 0, detail: str = '',
        failure: CheckFailure | None = None,
    ) -> None:
        """Publish one CacheEvent on ``~/events``."""
        msg = CacheEvent(
            stamp=self.get_clock().now().to_msg(), type=kind, task=task, step=step,
            trajectory_id=trajectory_id, detail=detail,
        )
        if failure is not None:
            msg.sensor = failure.sensor
            msg.deviation = float(failure.deviation)
            msg.tolerance = float(failure.tolerance)
        self._events.publish(msg)

    def _sensor_error(self, message: str) -> None:
        self.get_logger().error(message)
        self.publish_event(kind=CacheEvent.ERROR, task='', step=-1, detail=message)

    def _on_set_parameters(self, params: list[Any]) -> SetParametersResult:
        mode = None
        for param in params:
            if param.name != 'cache_mode':
                return SetParametersResult(
                    successful=False,
                    reason=f'{param.name}: read at startup only; restart the node to change it',
                )
            try:
                mode = parse_cache_mode(param.value)
            except ConfigError as err:
                return SetParametersResult(successful=False, reason=str(err))
        if mode is not None:
            self._mode = mode
            self.get_logger().info(f'cache_mode is now {mode.value}')
        return SetParametersResult(successful=True)

    def _cancel_task(self, goal_handle: Any) -> CancelResponse:
        token = self._task_tokens.get(bytes(goal_handle.goal_id.uuid))
        if token is not None:
            token.cancel()
        # Not started yet: _execute sees is_cancel_requested and stops at once.
        return CancelResponse.ACCEPT

    def _execute(self, goal_handle: Any) -> Any:
        goal = goal_handle.request
        holder = self._guard.claim(f"task '{goal.task}'")
        if holder is not None:
            message = f'rejected: {holder} is already running (one task at a time)'
            self.publish_event(kind=CacheEvent.ERROR, task=goal.task, step=-1, detail=message)
            goal_handle.abort()
            return ExecuteTask.Result(success=False, message=message)
        key = bytes(goal_handle.goal_id.uuid)
        token = CancelToken()
        self._task_tokens[key] = token
        try:
            if goal_handle.is_cancel_requested:
                token.cancel()
            result = self.runner.run(goal_handle, mode=self._mode, cancel=token)
            with self._counts_lock:
                self._counts['runs'] += 1
                self._counts['hits'] += int(bool(result.cache_hit))
            return result
        except Exception as err:  # keep the node alive; the client gets the reason
            self.get_logger().error(f"task '{goal.task}' failed: {err!r}")
            self.publish_event(kind=CacheEvent.ERROR, task=goal.task, step=-1, detail=str(err))
            session = self.recorder.active
            if session is not None and not session.manual:
                try:
                    self.recorder.finish(save=False)
                except MuscleMemError:
                    pass
            if goal_handle.is_active:
                goal_handle.abort()
            return ExecuteTask.Result(success=False, message=f'internal error: {err}')
        finally:
            self._task_tokens.pop(key, None)
            self._guard.release()

    def _publish_diagnostics(self) -> None:
        status = DiagnosticStatus(name=f'{self.get_name()}: behavior cache', hardware_id='')
        values = {'cache_mode': self._mode.value, 'store_path': self.config.store_path,
                  'busy': self._guard.holder or ''}
        try:
            tasks = self.store.tasks()
            hits = sum(t.hits for t in tasks)
            misses = sum(t.misses for t in tasks)
            values.update({
                'tasks': str(len(tasks)),
                'trajectories': str(sum(t.trajectory_count for t in tasks)),
                'hits': str(hits), 'misses': str(misses),
                'hit_rate': f'{hits / (hits + misses):.3f}' if hits + misses else 'n/a',
                'store': 'ok',
            })
            status.level = DiagnosticStatus.OK
            status.message = 'ok'
            degraded = self.health.error
            if degraded:
                values['store'] = f'degraded: {degraded}'
                status.level = DiagnosticStatus.WARN
                status.message = (f'store degraded: writes fail ({degraded}); replays go on, '
                                  'nothing new is learned or counted')
        except Exception as err:  # diagnostics report store trouble, never raise
            values['store'] = f'error: {err}'
            status.level = DiagnosticStatus.ERROR
            status.message = f'store error: {err}'
        with self._counts_lock:
            values['runs_since_start'] = str(self._counts['runs'])
            values['hits_since_start'] = str(self._counts['hits'])
        values['steps_saved'] = str(self.runner.steps_replayed_total)
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        self._diagnostics.publish(DiagnosticArray(
            header=Header(stamp=self.get_clock().now().to_msg()), status=[status]))

    def cancel_all(self) -> None:
        """Cancel the running task or replay (its in-flight goal is canceled too)."""
        for token in list(self._task_tokens.values()):
            token.cancel()
        if self.handlers.cancel is not None:
            self.handlers.cancel.cancel()

    def close(self) -> None:
        """Cancel what runs, stop the sensors, discard an open recording, close the store."""
        self._closing = True
        self.cancel_all()
        self.hub.close()
        if self._proxy_executor is not None:
            self._proxy_executor.shutdown(timeout_sec=2.0)
            if self._proxy_thread is not None:
                self._proxy_thread.join(2.0)
            if self._proxy_node is not None:
                self._proxy_node.destroy_node()
            self._proxy_executor = self._proxy_node = self._proxy_thread = None
        try:
            if self.recorder.active is not None:
                self.recorder.finish(save=False)
            self.store.close()
        except MuscleMemError as err:
            self.get_logger().error(f'closing the store: {err}')
