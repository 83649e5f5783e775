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
A robot unlike the demo whose world is in TF: a base that docks at a station it sees as a tag.

Issue 45 item 6. Nothing here is read from a pose topic: where the base is comes from
localization, where the dock is from a tag detector, both on ``/tf``, as on a real base.

* :class:`DockBase`: :class:`~mobile_base_helpers.MobileBase` (its ``goto`` MoveToPose server,
  its cancel manners; ``brake`` here, as a base that decelerates) with a heading: a goto drives
  to the goal's (x, y) and turns to the goal's yaw (``target.pose.orientation``, a rotation
  about z) over the goal's duration, both as functions of the clock. Localization publishes
  ``map -> odom`` (identity) and ``odom -> base_link`` on ``/tf`` at 50 Hz (header stamps on
  the node's clock; published from a thread of their own, :class:`Ticker`); ``base_link ->
  camera`` (an optical frame: z forward, x right, y down) is on ``/tf_static`` (transient
  local, sent once at start). A tag detector publishes ``camera -> dock_tag`` at 20 Hz,
  computed from the dock's world pose and the base's, with about 2 mm and 0.3 deg of noise,
  only while the tag is in the camera's view (3 m, +-60 deg, its face towards the camera), as
  apriltag_ros does. The tag frame's z leaves the dock's face (the dock's front), its y points
  down. A test moves and turns the dock (:meth:`DockBase.move_dock`), or stops localization or
  the detector.
* :class:`DockAgent`: ExecuteTask (any task name): patrol to :data:`PATROL`, then to
  :data:`STANDOFF` in front of the dock facing it, then a short approach to :data:`FINAL` in
  front, through the cache's proxies; the dock's pose is what the agent's own ``/tf`` reader
  composes (latest transforms, scipy's rotations: not the cache's code).
* :class:`DockHarness`: both, a client, and the cache configured with TF sensors ``base``
  (``map -> base_link``) and ``dock`` (``map -> dock_tag``), and the docking goals' position
  and orientation bound to the dock.
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
import math
import threading
import time
from typing import Any

from builtin_interfaces.msg import Duration
from geometry_msgs.msg import PoseStamped, TransformStamped
from mobile_base_helpers import BaseAgent, BaseHarness, Goto, MobileBase
from muscle_mem_demo_interfaces.action import MoveToPose
from node_helpers import AgentCall, Names, override, perform
import numpy as np
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from scipy.spatial.transform import Rotation
from tf2_msgs.msg import TFMessage

DOCK_HOME = (2.5, 0.3, math.pi)
"""The dock's world pose (x, y, yaw of its front): it faces the base's home."""
TAG_HEIGHT = 0.2
"""The tag's height above the floor (metres)."""
CAMERA = (0.1, 0.0, 0.2)
"""The camera's place on the base (base_link)."""
PATROL = (1.2, -0.6, 0.6)
"""The patrol waypoint (x, y, yaw): over 0.7 m from the dock in x and y, the dock in view."""
STANDOFF = 0.5
"""Metres in front of the dock of the docking pose."""
FINAL = 0.2
"""Metres in front of the dock where the final approach ends."""
FINAL_SECONDS = 1.0
"""Seconds of the final approach (the others take the base's default, 2 s)."""
VIEW = (3.0, math.radians(60.0))
"""The camera sees a tag up to 3 m away, within +-60 deg of its axis."""
NOISE = (0.002, math.radians(0.3))
"""The detector's noise: metres, radians (of each reading)."""
FRAMES = ('map', 'odom', 'base_link', 'camera', 'dock_tag')
TF_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                    reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
"""``/tf``, as tf2_ros's TransformBroadcaster publishes it."""
STATIC_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                        reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.TRANSIENT_LOCAL)
"""``/tf_static``, as tf2_ros's StaticTransformBroadcaster publishes it."""
OPTICAL = Rotation.from_matrix([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
"""base_link -> camera: the optical frame (z forward, x right, y down)."""


@dataclasses.dataclass(frozen=True)
class Pose:
    """A rigid transform: ``t`` and ``r`` of a child frame in its parent (scipy rotation)."""

    t: np.ndarray
    r: Rotation

    def __mul__(self, other: Pose) -> Pose:
        return Pose(self.t + self.r.apply(other.t), self.r * other.r)

    def inv(self) -> Pose:
        r = self.r.inv()
        return Pose(-r.apply(self.t), r)

    @classmethod
    def planar(cls, x: float, y: float, yaw: float, z: float = 0.0) -> Pose:
        return cls(np.array([x, y, z]), Rotation.from_euler('z', yaw))


def tag_pose(dock: tuple[float, float, float]) -> Pose:
    """Return the tag's pose in map: z out of the dock's face, y down, x = y cross z."""
    x, y, yaw = dock
    z_axis = np.array([math.cos(yaw), math.sin(yaw), 0.0])
    y_axis = np.array([0.0, 0.0, -1.0])
    return Pose(np.array([x, y, TAG_HEIGHT]),
                Rotation.from_matrix(np.column_stack([np.cross(y_axis, z_axis), y_axis, z_axis])))


def in_front(dock: tuple[float, float, float], metres: float) -> tuple[float, float, float]:
    """Return the base pose ``metres`` in front of ``dock``, facing it."""
    x, y, yaw = dock
    return (x + metres * math.cos(yaw), y + metres * math.sin(yaw), wrap(yaw + math.pi))


def wrap(angle: float) -> float:
    """Return ``angle`` in (-pi, pi]."""
    return math.atan2(math.sin(angle), math.cos(angle))


def yaw_of(q: Any) -> float | None:
    """Return the yaw of a geometry_msgs Quaternion (None when it is not a rotation)."""
    v = np.array([q.x, q.y, q.z, q.w], dtype=float)
    if not np.linalg.norm(v) > 0.5:
        return None
    return float(Rotation.from_quat(v).as_euler('zyx')[0])


def stamped(parent: str, child: str, pose: Pose, stamp: Any) -> TransformStamped:
    """Return a TransformStamped, as a broadcaster fills it."""
    t = TransformStamped()
    t.header.stamp = stamp
    t.header.frame_id = parent
    t.child_frame_id = child
    t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = (
        float(v) for v in pose.t)
    q = t.transform.rotation
    q.x, q.y, q.z, q.w = (float(v) for v in pose.r.as_quat())
    return t


class Ticker:
    """
    Call each function at its period on a thread of its own, as a driver's publishing loop.

    Localization and the detector once ran on executor timers, and came late: the test
    process's executor builds each wait set in Python on one thread, and with three nodes'
    entities and a few hundred messages a second it fell up to 0.58 s behind on a quiet
    machine (its timers fired 100 to 580 ms apart while the base drove), and the base's TF
    went stale in the cache (max_age 0.5 s). Publishing needs no executor.

    :param calls: (period in seconds, function) pairs.
    """

    def __init__(self, *calls: tuple[float, Callable[[], None]]) -> None:
        self._calls = calls
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='ticker', daemon=True)
        self._thread.start()

    def _run(self) -> None:
        due = [time.monotonic()] * len(self._calls)
        while not self._stop.is_set():
            now = time.monotonic()
            for i, (period, call) in enumerate(self._calls):
                if now >= due[i]:
                    call()
                    due[i] = max(due[i] + period, now)
            self._stop.wait(max(0.0, min(due) - time.monotonic()))

    def stop(self) -> None:
        """Stop calling (returns once a call in progress ended)."""
        self._stop.set()
        self._thread.join(timeout=5.0)


class DockBase(MobileBase):
    """A MobileBase with a heading, localization and a tag detector on TF (module docstring)."""

    def __init__(self, *, names: Names, context: Any, seed: int = 11) -> None:
        self.yaw = 0.0
        """The heading when no goto turns the base (radians)."""
        self.dock = DOCK_HOME
        self.localizing = True
        """False: localization publishes nothing (its links go stale)."""
        self.detecting = True
        """False: the detector publishes nothing (as if the tag were covered)."""
        self._turns: dict[int, tuple[float, float]] = {}
        self._halted: dict[int, float] = {}
        self._goal_yaw: dict[bytes, float] = {}
        self._last: Goto | None = None
        self.seen: list[float] = []
        """Monotonic times the detector published the tag."""
        super().__init__(names=names, context=context, seed=seed)
        self._noise = np.random.default_rng(seed)
        self.manners = 'brake'
        # its world is on TF: no odometry, tag or scan topic (their timers were work for the
        # test process's executor, beside which localization came late)
        for timer in list(self.timers):
            self.destroy_timer(timer)
        self.published = {'tf': 0, 'detector': 0}
        self._tf = self.create_publisher(TFMessage, '/tf', TF_QOS)
        self._tf_static = self.create_publisher(TFMessage, '/tf_static', STATIC_QOS)
        self._tf_static.publish(TFMessage(transforms=[stamped(
            'base_link', 'camera', Pose(np.array(CAMERA), OPTICAL),
            self.get_clock().now().to_msg())]))
        self._ticker = Ticker((0.02, self._localize), (0.05, self._detect))

    def destroy_node(self) -> None:
        """Stop localization and the detector, then the node."""
        self._ticker.stop()
        super().destroy_node()

    def reset(self) -> None:
        """Reset as MobileBase does; also face +x, put the dock home, TF on, braking cancels."""
        with self.lock:
            self.yaw = 0.0
            self._last = None
            self.dock = DOCK_HOME
            self.localizing = self.detecting = True
        super().reset()
        with self.lock:
            self.manners = 'brake'

    def move_dock(self, dock: tuple[float, float, float]) -> None:
        """Put the dock at (x, y, yaw) and wait until the detector saw it there."""
        with self.lock:
            self.dock = (float(dock[0]), float(dock[1]), float(dock[2]))
        self.settle()

    def pose(self) -> tuple[float, float, float]:
        """Return where the base is now: x, y, yaw."""
        with self.lock:
            now = time.monotonic()
            x, y = self._where(now)
            return x, y, self._heading(now)

    def _heading(self, now: float) -> float:
        """Return the heading at ``now`` (the lock held): the last goto's turn, where it is."""
        goto = self._last
        if goto is None:
            return self.yaw
        start, end = self._turns[id(goto)]
        halted = self._halted.get(id(goto))
        unit = dataclasses.replace(goto, start=(0.0, 0.0), target=(1.0, 0.0))
        share = unit.at(now if halted is None else min(now, halted))[0]
        return wrap(start + wrap(end - start) * share)

    def _accept(self, goal_handle: Any) -> None:
        yaw = yaw_of(goal_handle.request.target.pose.orientation)
        if yaw is not None:
            with self.lock:
                self._goal_yaw[bytes(goal_handle.goal_id.uuid)] = yaw
        super()._accept(goal_handle)

    def _begin(self, key: bytes, goto: Goto, now: float) -> None:
        start = self._heading(now)
        self._turns[id(goto)] = (start, self._goal_yaw.pop(key, start))
        self._last = goto
        super()._begin(key, goto, now)

    def _halt(self, goto: Goto, now: float) -> None:
        super()._halt(goto, now)
        self._halted.setdefault(id(goto), now)

    def _base_now(self) -> tuple[Pose, tuple[float, float, float], bool, bool, Any]:
        """Return the base's pose, the dock, the switches and a stamp, at one instant."""
        with self.lock:
            now = time.monotonic()
            x, y = self._where(now)
            base = Pose.planar(x, y, self._heading(now))
            stamp = self.get_clock().now().to_msg()
            return base, self.dock, self.localizing, self.detecting, stamp

    def _localize(self) -> None:
        base, _dock, on, _detecting, stamp = self._base_now()
        if on:
            self._tf.publish(TFMessage(transforms=[
                stamped('map', 'odom', Pose.planar(0.0, 0.0, 0.0), stamp),
                stamped('odom', 'base_link', base, stamp)]))
        self.published['tf'] += 1

    def _detect(self) -> None:
        base, dock, _localizing, on, stamp = self._base_now()
        seen = (base * Pose(np.array(CAMERA), OPTICAL)).inv() * tag_pose(dock)
        p = seen.t
        distance = float(np.linalg.norm(p))
        bearing = math.atan2(float(p[0]), float(p[2]))
        facing = float(np.dot(seen.r.apply([0.0, 0.0, 1.0]), -p / max(distance, 1e-9)))
        if on and p[2] > 0 and distance <= VIEW[0] and abs(bearing) <= VIEW[1] and facing > 0:
            noise = Pose(self._noise.normal(0.0, NOISE[0] / math.sqrt(3), 3),
                         Rotation.from_rotvec(self._noise.normal(0.0, NOISE[1] / math.sqrt(3),
                                                                 3)))
            self._tf.publish(TFMessage(transforms=[stamped('camera', 'dock_tag', seen * noise,
                                                           stamp)]))
            self.seen.append(time.monotonic())
        self.published['detector'] += 1


class DockAgent(BaseAgent):
    """ExecuteTask: patrol, the docking pose, the final approach (module docstring)."""

    def __init__(self, *, names: Names, robot: DockBase, context: Any) -> None:
        super().__init__(names=names, robot=robot, context=context)
        self._tf_lock = threading.Lock()
        self._latest: dict[str, tuple[str, Pose]] = {}
        group = ReentrantCallbackGroup()
        self.create_subscription(TFMessage, '/tf', self._on_tf, TF_QOS, callback_group=group)
        self.create_subscription(TFMessage, '/tf_static', self._on_tf, STATIC_QOS,
                                 callback_group=group)

    def _on_tf(self, message: TFMessage) -> None:
        with self._tf_lock:
            for t in message.transforms:
                v, q = t.transform.translation, t.transform.rotation
                self._latest[t.child_frame_id] = (t.header.frame_id, Pose(
                    np.array([v.x, v.y, v.z]), Rotation.from_quat([q.x, q.y, q.z, q.w])))

    def dock_seen(self) -> tuple[float, float, float] | None:
        """Return the dock (x, y, yaw of its front) as the agent's /tf says, None if unseen."""
        with self._tf_lock:
            pose, frame = Pose.planar(0.0, 0.0, 0.0), 'dock_tag'
            while frame != 'map':
                if frame not in self._latest:
                    return None
                parent, link = self._latest[frame]
                pose, frame = link * pose, parent
        front = pose.r.apply([0.0, 0.0, 1.0])
        return float(pose.t[0]), float(pose.t[1]), math.atan2(float(front[1]), float(front[0]))

    def plan(self) -> list[tuple[str, Any]]:
        """Return the docking plan: patrol, the standoff, the final approach ((x, y, yaw, s))."""
        dock = self.dock_seen()
        if dock is None:
            return [('goto', None)]  # fails: the dock is not seen
        return [('goto', (*PATROL, 0.0)), ('goto', (*in_front(dock, STANDOFF), 0.0)),
                ('goto', (*in_front(dock, FINAL), FINAL_SECONDS))]

    def do(self, kind: str, arg: Any, seconds: float = 0.0) -> bool:
        """Perform ``goto`` (x, y, yaw, seconds) through the proxy, anything else as the base's."""
        if kind != 'goto' or arg is None or len(arg) != 4:
            return arg is not None and super().do(kind, arg, seconds)
        x, y, yaw, seconds = arg
        if not self._goto.wait_for_server(timeout_sec=10.0):
            return False
        target = PoseStamped()
        target.header.frame_id = 'map'
        target.pose.position.x, target.pose.position.y = float(x), float(y)
        q = target.pose.orientation
        q.x, q.y, q.z, q.w = (float(v) for v in Rotation.from_euler('z', yaw).as_quat())
        whole = int(seconds)
        goal = MoveToPose.Goal(target=target, duration=Duration(
            sec=whole, nanosec=int(round((seconds - whole) * 1e9))))
        handle = self._wait(self._goto.send_goal_async(goal), 10.0)
        if handle is None or not handle.accepted:
            return False
        wrapped = self._wait(handle.get_result_async(), 30.0)
        return wrapped is not None and wrapped.status == 4  # STATUS_SUCCEEDED

    def _execute(self, goal_handle: Any) -> Any:
        goal = goal_handle.request
        self.calls.append(AgentCall(goal.task, goal.params_json, goal.resume_from_step,
                                    goal.resume_reason, goal.steps_done))
        return perform(goal_handle, self.plan()[goal.resume_from_step:], caller=goal.task,
                       subtasks=self.subtasks, do=self.do)


class DockHarness(BaseHarness):
    """The docking base, its agent, a client, and the cache with TF sensors and bindings."""

    robot: DockBase
    agent: DockAgent

    def _doubles(self) -> tuple[Any, Any]:
        robot = DockBase(names=self.names, context=self.context)
        return robot, DockAgent(names=self.names, robot=robot, context=self.context)

    def values(self, **overrides: Any) -> dict[str, Any]:
        """Return the docking base's cache parameters (dotted overrides)."""
        prefix = self.names.prefix
        goto = 'goto'
        values: dict[str, Any] = {
            'store_path': str(self.tmp / 'cache.db'), 'agent_action': self.names.agent,
            'step_timeout': 8.0, 'post_check_timeout': 1.0, 'agent_timeout': 30.0,
            'robot_description_timeout': 0.0,
            'sensors': {
                'base': {'frame': 'base_link', 'relative_to': 'map',
                         'tolerance': [0.03, 0.05]},
                'dock': {'frame': 'dock_tag', 'relative_to': 'map',
                         'tolerance': [0.03, 0.05], 'max_age': 0.5},
            },
            'actions': {
                goto: {'server': f'/{prefix}/goto',
                       'type': 'muscle_mem_demo_interfaces/action/MoveToPose'},
            },
            # the docking goals (0.5 and 0.2 m in front of the dock) follow it, turned with
            # it; the patrol waypoint is farther than max_offset, so it stays as recorded
            'bindings': {
                'dock_x': {'tool': goto, 'field': 'target.pose.position.x',
                           'source': 'sensor:dock[0]', 'max_offset': 0.7, 'max_shift': 0.3},
                'dock_y': {'tool': goto, 'field': 'target.pose.position.y',
                           'source': 'sensor:dock[1]', 'max_offset': 0.7, 'max_shift': 0.3},
                'dock_turn': {'tool': goto, 'field': 'target.pose.orientation',
                              'source': 'sensor:dock', 'max_angle': 0.35, 'max_offset': 0.7},
            },
        }
        return override(values, overrides)

    def _warm_proxies(self, cache: Any) -> None:
        """Pass one 20 ms goto where the base is (its heading too) through the proxy."""
        for _ in range(6):
            if self.agent.do('goto', (*self.robot.pose(), 0.02)):
                return
        raise RuntimeError(f'the goto proxy did not pass a call:\n{cache.output()}')
