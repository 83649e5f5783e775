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
A robot unlike the demo arm: a mobile picker, for the trust scenarios.

* :class:`MobileRobot`: a base that goes where a ``nav_msgs/srv/GetPlan`` request's
  goal says (an empty plan refuses it), a ``std_srvs/srv/SetBool`` gripper,
  ``nav_msgs/msg/Odometry`` of the base, a ``PoseStamped`` tag (the thing to pick
  from) and a 360-range ``sensor_msgs/msg/LaserScan`` whose ranges change by 5 to 12 cm
  between runs (people, doors).
* :class:`MobileAgent`: ``ExecuteTask``: go 0.4 m in front of the tag (a Pose in
  the goal, orientation w = 1), grip, go to the shelf of the task parameter ``bin``
  (an integer: y = 0.6 per bin, x = 1.0 for every bin; or the ``shelf`` [x, y] the task
  names), release. Its goal ``tolerance``
  varies between runs by 3 to 8 cm for reasons no sensor sees. It can decompose
  (``node_helpers.Subtasks``): :func:`pick` and :func:`place` are the fetch's halves, and a
  task given a plan of its own may call them through the cache's ``~/execute_subtask``.
* :class:`MobileHarness`: both, a client, and the cache process configured for them.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from geometry_msgs.msg import PoseStamped
from muscle_mem_interfaces.action import ExecuteTask
from nav_msgs.msg import Odometry
from nav_msgs.srv import GetPlan
from node_helpers import AgentCall, Harness, Names, override, perform, Subtasks, wait_until
import numpy as np
from rclpy.action import ActionServer, CancelResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import LaserScan
from std_srvs.srv import SetBool

BASE_HOME = (0.0, 0.0)
TAG_HOME = (1.6, 0.3)
STANDOFF = 0.4
SHELF_X = 1.0
"""The shelves' x: 1.0, equal to the parameter of bin 1 by coincidence."""
BIN_PITCH = 0.6


class MobileRobot(Node):
    """Base, gripper, odometry, tag and scan of a pretend mobile picker."""

    def __init__(self, *, names: Names, context: Any, seed: int = 7) -> None:
        super().__init__(f'{names.prefix}_mobile', context=context)
        group = ReentrantCallbackGroup()
        self._lock = threading.Lock()
        self._rng = np.random.default_rng(seed)
        self.base = list(BASE_HOME)
        self.tag = list(TAG_HOME)
        self._walls = self._rng.uniform(0.5, 8.0, 360)
        self.ranges = self._walls.copy()
        self.refuse = False
        self.refuse_at: set[int] = set()
        """Indices in :attr:`gotos` of the gotos to refuse (each once), besides ``refuse``."""
        self.gotos: list[tuple[float, float, float, float]] = []
        """Each goto's goal: x, y, orientation w, tolerance."""
        self.published = 0
        self._odom = self.create_publisher(Odometry, f'/{names.prefix}/odom', 10)
        self._tag = self.create_publisher(PoseStamped, f'/{names.prefix}/tag', 10)
        self._scan = self.create_publisher(LaserScan, f'/{names.prefix}/scan', 10)
        self.create_timer(0.02, self._publish, callback_group=group)
        self.create_service(GetPlan, f'/{names.prefix}/goto', self._goto, callback_group=group)
        self.create_service(SetBool, f'/{names.prefix}/grip', self._grip, callback_group=group)

    def reset(self, tag: tuple[float, float] = TAG_HOME) -> None:
        """Send the base home, put the tag at ``tag``, move every scan range 5 to 12 cm."""
        with self._lock:
            self.base = list(BASE_HOME)
            self.tag = list(tag)
            self.refuse = False
            self.refuse_at = set()
            self.ranges = self._walls + self._rng.choice((-1, 1), 360) * self._rng.uniform(
                0.05, 0.12, 360)
        start = self.published
        wait_until(lambda: self.published >= start + 2, 5.0)

    def _publish(self) -> None:
        with self._lock:
            base, tag, ranges = list(self.base), list(self.tag), self.ranges.tolist()
        stamp = self.get_clock().now().to_msg()
        odom = Odometry()
        odom.header.stamp = stamp
        odom.header.frame_id = 'map'
        odom.pose.pose.position.x, odom.pose.pose.position.y = base
        odom.pose.pose.orientation.w = 1.0
        self._odom.publish(odom)
        pose = PoseStamped()
        pose.header.stamp = stamp
        pose.header.frame_id = 'map'
        pose.pose.position.x, pose.pose.position.y = tag
        pose.pose.orientation.w = 1.0
        self._tag.publish(pose)
        scan = LaserScan(ranges=ranges, range_min=0.05, range_max=30.0)
        scan.header.stamp = stamp
        self._scan.publish(scan)
        self.published += 1

    def _goto(self, request: Any, response: Any) -> Any:
        goal = request.goal.pose
        with self._lock:
            self.gotos.append((goal.position.x, goal.position.y, goal.orientation.w,
                               request.tolerance))
            if self.refuse or len(self.gotos) - 1 in self.refuse_at:
                return response  # an empty plan: no way there
            self.base = [goal.position.x, goal.position.y]
        response.plan.header.frame_id = 'map'
        response.plan.poses = [request.start, request.goal]
        return response

    def _grip(self, request: Any, response: Any) -> Any:
        response.success = True
        return response


def shelf(params: dict[str, Any]) -> tuple[float, float]:
    """Return the shelf of a task's parameters: ``shelf`` [x, y], else that of ``bin``."""
    if 'shelf' in params:
        return (float(params['shelf'][0]), float(params['shelf'][1]))
    return (SHELF_X, BIN_PITCH * int(params.get('bin', 1)))


def pick(tag: tuple[float, float], params: dict[str, Any]) -> list[tuple[str, Any]]:
    """Return the fetch's first half: to the tag's standoff, grip."""
    return [('goto', (tag[0] - STANDOFF, tag[1])), ('grip', True)]


def place(tag: tuple[float, float], params: dict[str, Any]) -> list[tuple[str, Any]]:
    """Return the fetch's second half: to the shelf of ``params``, release."""
    return [('goto', shelf(params)), ('grip', False)]


def _pose(x: float, y: float) -> PoseStamped:
    pose = PoseStamped()
    pose.header.frame_id = 'map'
    pose.pose.position.x, pose.pose.position.y = float(x), float(y)
    pose.pose.orientation.w = 1.0
    return pose


class MobileAgent(Node):
    """ExecuteTask: fetch from the tag to the shelf of ``bin``, through the cache's proxies."""

    def __init__(self, *, names: Names, robot: MobileRobot, context: Any) -> None:
        super().__init__(f'{names.prefix}_mobile_agent', context=context)
        group = ReentrantCallbackGroup()
        self._robot = robot
        self._rng = np.random.default_rng(11)
        self.calls: list[AgentCall] = []
        self._goto = self.create_client(GetPlan, names.proxy(f'/{names.prefix}/goto'),
                                        callback_group=group)
        self._grip = self.create_client(SetBool, names.proxy(f'/{names.prefix}/grip'),
                                        callback_group=group)
        ActionServer(self, ExecuteTask, names.agent, self._execute, callback_group=group,
                     cancel_callback=lambda _h: CancelResponse.ACCEPT)
        self.tolerance = 0.3
        self.subtasks = Subtasks(self, names, group)

    def _call(self, client: Any, request: Any) -> Any:
        if not client.wait_for_service(timeout_sec=10.0):
            return None
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        done.wait(10.0)
        return future.result() if future.done() else None

    def do(self, kind: str, arg: Any) -> bool:
        """Perform one step through the proxies: ``goto`` (x, y) or ``grip`` (bool)."""
        if kind == 'goto':
            with self._robot._lock:
                base = tuple(self._robot.base)
            request = GetPlan.Request(start=_pose(*base), goal=_pose(*arg),
                                      tolerance=self.tolerance)
            answer = self._call(self._goto, request)
            return answer is not None and len(answer.plan.poses) > 0
        answer = self._call(self._grip, SetBool.Request(data=bool(arg)))
        return answer is not None and answer.success

    def plan(self, params: dict[str, Any], task: str = '') -> list[tuple[str, Any]]:
        """Return ``task``'s own plan, else the fetch: standoff, grip, the bin's shelf, release."""
        with self._robot._lock:
            tag = (self._robot.tag[0], self._robot.tag[1])
        own = self.subtasks.plan(task, tag, params)
        return own if own is not None else pick(tag, params) + place(tag, params)

    def _execute(self, goal_handle: Any) -> Any:
        goal = goal_handle.request
        self.calls.append(AgentCall(goal.task, goal.params_json, goal.resume_from_step,
                                    goal.resume_reason, goal.steps_done))
        # why the planner asked for this tolerance today, no sensor says
        self.tolerance = round(0.3 + float(self._rng.choice((-1, 1))) *
                               float(self._rng.uniform(0.03, 0.08)), 4)
        params = json.loads(goal.params_json or '{}')
        steps = self.plan(params, goal.task)[goal.resume_from_step:]
        return perform(goal_handle, steps, caller=goal.task, subtasks=self.subtasks, do=self.do)


class MobileHarness(Harness):
    """The mobile picker, its agent, a client, and the cache configured for them."""

    def _doubles(self) -> tuple[Any, Any]:
        robot = MobileRobot(names=self.names, context=self.context)
        return robot, MobileAgent(names=self.names, robot=robot, context=self.context)

    def values(self, **overrides: Any) -> dict[str, Any]:
        """Return the picker's cache parameters (dotted overrides)."""
        prefix = self.names.prefix
        values: dict[str, Any] = {
            'store_path': str(self.tmp / 'cache.db'), 'agent_action': self.names.agent,
            'step_timeout': 5.0, 'post_check_timeout': 1.0, 'agent_timeout': 20.0,
            'robot_description_timeout': 0.0,  # the body: joints and tools
            'sensors': {
                'odom': {'topic': f'/{prefix}/odom', 'type': 'nav_msgs/msg/Odometry',
                         'fields': ['pose.pose.position'], 'tolerance': [0.02],
                         'mode': 'norm', 'max_age': 0.5},
                'tag': {'topic': f'/{prefix}/tag', 'type': 'geometry_msgs/msg/PoseStamped',
                        'fields': ['pose.position'], 'tolerance': [0.02], 'mode': 'norm',
                        'max_age': 0.5},
                # one wide tolerance for every range (docs/parameters.md allows it), and allowed
                # as an inferred source: the worst case for coincidences
                'scan': {'topic': f'/{prefix}/scan', 'type': 'sensor_msgs/msg/LaserScan',
                         'fields': ['ranges'], 'tolerance': [0.3], 'mode': 'abs',
                         'max_age': 0.5, 'bind': 'auto'},
            },
            'services': {
                'goto': {'server': f'/{prefix}/goto', 'type': 'nav_msgs/srv/GetPlan',
                         'success_field': 'plan.poses', 'success_when': 'nonempty'},
                'grip': {'server': f'/{prefix}/grip', 'type': 'std_srvs/srv/SetBool'},
            },
            # the base stops 0.4 m in front of the tag: declared with max_offset (x; y
            # straight in front), while the tag may move only max_shift; the shelves are
            # farther from the tag than max_offset, so their goals stay as recorded
            'bindings': {
                'tag_x': {'tool': 'goto', 'field': 'goal.pose.position.x',
                          'source': 'sensor:tag[0]', 'max_offset': 0.5, 'max_shift': 0.1},
                'tag_y': {'tool': 'goto', 'field': 'goal.pose.position.y',
                          'source': 'sensor:tag[1]', 'max_offset': 0.05, 'max_shift': 0.1},
            },
        }
        return override(values, overrides)

    def _warm_proxies(self, cache: Any) -> None:
        """Pass one call through each proxy (the base goes where it is, the gripper opens)."""
        for kind, arg in (('goto', BASE_HOME), ('grip', False)):
            for _ in range(6):
                if self.agent.do(kind, arg):
                    break
            else:
                raise RuntimeError(f'the {kind} proxy did not pass a call:\n{cache.output()}')
