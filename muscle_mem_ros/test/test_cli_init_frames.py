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
``muscle-mem init`` proposes TF frames: the moving ones that are not the robot's links.

A ROS domain of its own holds real publishers of ``tf2_msgs/msg/TFMessage`` (:class:`Cell`):
a robot_state_publisher with a description on ``/robot_description`` (links ``base_link``,
``link1``, ``tool0``), ``world -> base_link`` and ``link1 -> tool0`` on ``/tf_static`` and
``base_link -> link1`` on ``/tf``; a camera fixed in the world (``world -> camera``, static);
a detector sending ``camera -> tag`` at 30 Hz with noise of :data:`POSITION_NOISE` (rms
distance) and :data:`TURN_NOISE` (rms angle); and ``world -> blip`` on ``/tf`` always with
the same stamp (one distinct stamp: no rate, no noise). init runs in its own process; the
file it writes is loaded by the node's config loader. The tag's tolerance is judged by what it
is for: two fresh readings of the resting tag never differ by more, and it is small.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
import random
import subprocess
import sys
from typing import Any

from geometry_msgs.msg import TransformStamped
from muscle_mem_ros.checks.poses import pose_deviations
from muscle_mem_ros.cli.init import render
from muscle_mem_ros.cli.initframes import (
    description_links, frame_from, FrameSample, SILENT_DEFAULTS,
)
from muscle_mem_ros.cli.survey import Survey
from muscle_mem_ros.records import CompareMode
from muscle_mem_ros.ros.capture.transformfeed import STATIC_QOS, TF_QOS
from muscle_mem_ros.ros.node.config import load_config, NODE_OPTIONS
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
import numpy as np
import pytest
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from std_srvs.srv import SetBool
from tf2_msgs.msg import TFMessage
import yaml

POSITION_NOISE = 0.001
"""Metres: the rms distance of the tag's detected origin from where it is (per axis / sqrt 3)."""
TURN_NOISE = math.radians(0.3)
"""Radians: the rms angle of its detected rotation from its true one."""
TAG = ((0.4, 0.1, 0.8), (0.0, 0.0, math.sin(0.3), math.cos(0.3)))
"""The tag's true pose in the camera frame: 0.6 rad about z."""
URDF = """<?xml version="1.0"?>
<robot name="bot">
  <link name="base_link"/><link name="link1"/><link name="tool0"/>
  <joint name="j1" type="revolute"><parent link="base_link"/><child link="link1"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="j2" type="fixed"><parent link="link1"/><child link="tool0"/></joint>
</robot>
"""


def _noisy_tag(rng: np.random.Generator) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Return one detection of the tag: its pose with the detector's noise."""
    position = np.asarray(TAG[0]) + rng.normal(0.0, POSITION_NOISE / math.sqrt(3), 3)
    vector = rng.normal(0.0, TURN_NOISE / math.sqrt(3), 3)
    angle = float(np.linalg.norm(vector))
    axis = vector / angle if angle > 0 else np.zeros(3)
    dx, dy, dz = axis * math.sin(angle / 2)
    dw = math.cos(angle / 2)
    x, y, z, w = TAG[1]
    turned = (dw * x + dx * w + dy * z - dz * y, dw * y - dx * z + dy * w + dz * x,
              dw * z + dx * y - dy * x + dz * w, dw * w - dx * x - dy * y - dz * z)
    return tuple(position.tolist()), turned


def _pose(rng: np.random.Generator) -> np.ndarray:
    position, rotation = _noisy_tag(rng)
    return np.asarray(position + rotation)


def _tf(node: Node, parent: str, child: str, translation: tuple[float, ...],
        rotation: tuple[float, ...] = (0.0, 0.0, 0.0, 1.0), stamp: Any = None) -> Any:
    msg = TransformStamped()
    msg.header.stamp = stamp if stamp is not None else node.get_clock().now().to_msg()
    msg.header.frame_id = parent
    msg.child_frame_id = child
    msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = \
        translation
    r = msg.transform.rotation
    r.x, r.y, r.z, r.w = rotation
    return msg


class Cell(Node):
    """The robot, the camera, the detector and the blip (module docstring), and one tool."""

    def __init__(self, context: Any) -> None:
        super().__init__('robot_state_publisher', context=context)
        self._rng = np.random.default_rng(7)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_publisher(String, '/robot_description', latched).publish(String(data=URDF))
        self.create_publisher(TFMessage, '/tf_static', STATIC_QOS).publish(TFMessage(transforms=[
            _tf(self, 'world', 'base_link', (0.0, 0.0, 0.5)),
            _tf(self, 'link1', 'tool0', (0.0, 0.0, 0.3)),
            _tf(self, 'world', 'camera', (1.0, 0.0, 1.5), (0.0, 0.7071068, 0.0, 0.7071068))]))
        self._tf = self.create_publisher(TFMessage, '/tf', TF_QOS)
        self._blip_stamp = self.get_clock().now().to_msg()
        self.create_service(SetBool, '/cell/gripper', self._gripper)
        self.create_timer(1 / 50, self._joints)
        self.create_timer(1 / 30, self._detect)

    @staticmethod
    def _gripper(_request: Any, response: Any) -> Any:
        response.success = True
        return response

    def _joints(self) -> None:
        self._tf.publish(TFMessage(transforms=[
            _tf(self, 'base_link', 'link1', (0.0, 0.0, 0.1)),
            _tf(self, 'world', 'blip', (0.2, 0.0, 0.0), stamp=self._blip_stamp)]))

    def _detect(self) -> None:
        position, rotation = _noisy_tag(self._rng)
        self._tf.publish(TFMessage(transforms=[_tf(self, 'camera', 'tag', position, rotation)]))


def _init(path: Path, domain_id: int, *args: str) -> dict:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id))
    done = subprocess.run([sys.executable, '-m', 'muscle_mem_ros.cli', 'init', str(path),
                           '--json', '--store', str(path.parent / 'cache.db'),
                           '--duration', '3', *args],
                          capture_output=True, text=True, timeout=90, env=env)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.fixture(scope='module')
def cell(tmp_path_factory):
    """Run init twice on the cell: every frame, then two named with --frame."""
    tmp = tmp_path_factory.mktemp('init_frames')
    domain_id = random.randint(120, 200)
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain_id)
    node = Cell(context)
    executor = MultiThreadedExecutor(num_threads=2, context=context)
    executor.add_node(node)
    spinner = Spinner(executor)
    try:
        path, named = tmp / 'cell.yaml', tmp / 'named.yaml'
        summary = _init(path, domain_id)
        named_summary = _init(named, domain_id, '--frame', 'link1', '--frame', 'nowhere')
        yield path, summary, named, named_summary
    finally:
        spinner.stop()
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def _sensors(path: Path) -> dict:
    return dict(yaml.safe_load(path.read_text())['muscle_mem']['ros__parameters']['sensors'])


def _left(text: str, frame: str) -> str:
    return text.split(f'#   frame {frame}: ')[1].split('\n')[0]


def test_the_moving_tag_is_proposed_and_the_robot_links_are_not(cell):
    path, summary, _, _ = cell
    text = path.read_text()
    sensors = _sensors(path)
    assert set(sensors) == {'tag'}, text
    tag = sensors['tag']
    assert tag == {**tag, 'frame': 'tag', 'relative_to': 'world', 'mode': 'pose'}, text
    assert 0.5 <= tag['max_age'] <= 1.0, text  # 30 Hz: the floor of 0.5 s, or a late gap
    assert 'a frame on /tf that is not a link of the description, under camera' in text
    for link in ('base_link', 'link1', 'tool0'):
        assert 'a link of the robot description' in _left(text, link), text
    assert 'static only' in _left(text, 'camera'), text
    assert 'a root' in _left(text, 'world'), text
    assert 'not received twice: 1 distinct stamp(s)' in _left(text, 'blip'), text
    assert summary['described'] is True
    assert summary['frames']['tag']['rules'] == ['noise', 'noise'], summary


def test_the_tag_tolerance_covers_its_noise_and_is_small(cell):
    path, summary, _, _ = cell
    metres, radians = _sensors(path)['tag']['tolerance']
    assert metres < 0.01 and radians < math.radians(3), (metres, radians)
    # measured, not a floor: the noise's rms is heard about right
    rms = summary['frames']['tag']['rms']
    assert 0.5 * POSITION_NOISE < rms[0] < 1.5 * POSITION_NOISE, rms
    assert 0.5 * TURN_NOISE < rms[1] < 1.5 * TURN_NOISE, rms
    rng = np.random.default_rng(99)
    worst = np.max([pose_deviations(_pose(rng).reshape(1, -1), _pose(rng))[0]
                    for _ in range(1000)], axis=0)
    assert worst[0] < metres and worst[1] < radians, (worst, metres, radians)


def _load(path: Path) -> Any:
    context = rclpy.Context()
    rclpy.init(context=context, args=['--ros-args', '--params-file', str(path)])
    try:
        node = Node('muscle_mem', context=context, **NODE_OPTIONS)
        try:
            return load_config(node)
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def test_the_node_loads_the_file_as_written(cell):
    path, _, named, _ = cell
    for written, frame in ((path, 'tag'), (named, 'link1')):
        config = _load(written)
        (sensor,) = [s for s in config.sensors if s.frames is not None]
        assert sensor.frames == ('world', frame)
        assert sensor.mode is CompareMode.POSE and len(sensor.tolerance) == 2
        assert [t.server for t in config.services] == ['/cell/gripper']


def test_a_named_frame_is_taken_even_a_link_and_topics_are_left_alone(cell):
    _, _, named, summary = cell
    text = named.read_text()
    assert set(_sensors(named)) == {'link1'}, text
    assert 'a link of the description, named with --frame' in text
    assert 'named with --frame, not heard' in _left(text, 'nowhere'), text
    # a resting joint makes no noise: the silent default, said
    assert _sensors(named)['link1']['tolerance'] == pytest.approx(list(SILENT_DEFAULTS))
    assert summary['frames']['link1']['rules'] == ['silent', 'silent']


def test_without_a_description_every_moving_frame_is_proposed_saying_so():
    links = description_links('not xml')
    assert links is None
    assert description_links(URDF) == {'base_link', 'link1', 'tool0'}
    assert description_links('<mujoco model="arm"><worldbody><body name="link0"><body '
                             'name="link1"/></body></worldbody></mujoco>') == {'link0', 'link1'}
    moving = FrameSample('link1', 'base_link', 'world', False, (0.0, 0.1, 0.2),
                         ((0, 0, 0.1, 0, 0, 0, 1),) * 3)
    assert frame_from(moving, {'link1'}) == \
        'a link of the robot description (robot_state_publisher sends it)'
    sensor = frame_from(moving, frozenset())
    assert not isinstance(sensor, str) and sensor.tolerance == SILENT_DEFAULTS
    once = FrameSample('tag', 'camera', 'world', False, (0.0,), ((0, 0, 0, 0, 0, 0, 1),))
    assert str(frame_from(once, ())).startswith('not received twice')


def test_a_file_without_a_description_says_the_links_could_not_be_told_apart():
    moving = FrameSample('link1', 'base_link', 'world', False, (0.0, 0.1, 0.2),
                         ((0, 0, 0.1, 0, 0, 0, 1),) * 3)
    sensor = frame_from(moving, frozenset())
    assert not isinstance(sensor, str)
    found = Survey(nodes=('/robot_state_publisher',), servers=(), agents=(), sampled=(),
                   skipped=(), caches=(), frames=(moving,))
    text = render(found=found, sensors={}, skipped=[], tools={}, agent='', agent_note='none',
                  node_name='muscle_mem', store='c.db', frames={'link1': sensor},
                  described=False)
    assert "no robot description was heard: the robot's own links could not be told" in text
    assert "a frame on /tf (no description: the robot's links could not be told apart)" in text
    sensors = yaml.safe_load(text)['muscle_mem']['ros__parameters']['sensors']
    assert sensors == {'link1': {'frame': 'link1', 'relative_to': 'world', 'mode': 'pose',
                                 'tolerance': list(SILENT_DEFAULTS), 'max_age': 0.5}}
