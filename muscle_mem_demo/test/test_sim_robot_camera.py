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
The sim robot's camera over real DDS: frames and camera info, the distractor, failures at start.

The robot runs as a process rendering for real (``MUJOCO_GL=egl``, Mesa on the CPU).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from typing import Any
import uuid

import mujoco
from muscle_mem_demo.arms import build_scene
from muscle_mem_demo.camera import CAMERA
from muscle_mem_demo.distractor import HALF_SIZE
from muscle_mem_demo_interfaces.srv import MoveObject
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
import numpy as np
import pytest
import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image
from sim_helpers import assert_bad_parameter, NodeProcess, unique_namespace
from std_srvs.srv import Trigger

RATE = 10.0
"""The camera rate of the robot under test, Hz."""
DROP = (0.35, -0.15, 0.3)
"""Where the distractor is dropped from: over the table, in view, clear of the cube and arm."""


@pytest.fixture(scope='module')
def ros():
    rclpy.init()
    yield
    rclpy.try_shutdown()


class CameraClient(Node):
    """Reads one sim robot's camera (as the cache reads images: sensor-data QoS); calls it."""

    def __init__(self, namespace: str) -> None:
        super().__init__('camera_test_client_' + uuid.uuid4().hex[:6])
        group = ReentrantCallbackGroup()
        self.lock = threading.Lock()
        self.images: list[Image] = []
        self.infos: list[CameraInfo] = []
        self.create_subscription(Image, f'{namespace}/camera/image_raw', self._on_image,
                                 qos_profile_sensor_data, callback_group=group)
        self.create_subscription(CameraInfo, f'{namespace}/camera/camera_info', self._on_info,
                                 qos_profile_sensor_data, callback_group=group)
        self.move_client = self.create_client(
            MoveObject, f'{namespace}/sim_robot/move_distractor', callback_group=group)
        self.reset_client = self.create_client(Trigger, f'{namespace}/sim_robot/reset',
                                               callback_group=group)
        executor = MultiThreadedExecutor(num_threads=2)
        executor.add_node(self)
        self._spinner = Spinner(executor)

    def close(self) -> None:
        self._spinner.stop(2.0)
        self.destroy_node()

    def _on_image(self, msg: Image) -> None:
        with self.lock:
            self.images.append(msg)
            del self.images[:-50]

    def _on_info(self, msg: CameraInfo) -> None:
        with self.lock:
            self.infos.append(msg)
            del self.infos[:-50]

    def wait_for(self, predicate, what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f'timed out waiting for {what}'
            time.sleep(0.02)

    def images_after(self, mark_ns: int, count: int = 1) -> list[Image]:
        """Return the first ``count`` images stamped after ``mark_ns`` (node clock), waiting."""
        def fresh() -> list[Image]:
            with self.lock:
                return [m for m in self.images if _ns(m) > mark_ns]
        self.wait_for(lambda: len(fresh()) >= count, f'{count} images')
        return fresh()[:count]

    def call(self, client, request) -> Any:
        assert client.wait_for_service(timeout_sec=30.0)
        future = client.call_async(request)
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(10.0), 'timed out waiting for a service'
        return future.result()

    def move_distractor(self, position, after_goals: int = 0) -> MoveObject.Response:
        request = MoveObject.Request(after_goals=after_goals)
        request.pose.position.x, request.pose.position.y, request.pose.position.z = position
        return self.call(self.move_client, request)


def _ns(msg: Any) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def _pixels(msg: Image) -> np.ndarray:
    return np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.width, 3)


@pytest.fixture(scope='module')
def robot(ros, tmp_path_factory):
    namespace = unique_namespace()
    process = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                          params={'camera_rate': RATE}, log_dir=tmp_path_factory.mktemp('logs'))
    client = CameraClient(namespace)
    try:
        client.wait_for(lambda: len(client.images) >= 2 and bool(client.infos),
                        'the first frames')
        yield client
    finally:
        process.stop()
        client.close()
        print(process.log())


def _pixel_of(point: tuple[float, float, float], info: CameraInfo) -> tuple[int, int]:
    """Project a world point with the scene's camera pose and the published K."""
    model = build_scene()
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    mujoco.mj_camlight(model, data)
    camera = model.camera(CAMERA).id
    local = data.cam_xmat[camera].reshape(3, 3).T @ (np.asarray(point) - data.cam_xpos[camera])
    fx, _, cx, _, fy, cy = info.k[:6]
    # MuJoCo cameras look along -z with y up; image rows grow downwards.
    return (int(round(cx + fx * local[0] / -local[2])),
            int(round(cy - fy * local[1] / -local[2])))


def test_frames_come_at_the_rate_in_rgb8_with_their_camera_info(robot):
    mark = robot.get_clock().now().nanoseconds
    images = robot.images_after(mark, 12)
    for msg in images:
        assert (msg.width, msg.height, msg.encoding, msg.step) == (320, 240, 'rgb8', 960)
        assert len(msg.data) == 320 * 240 * 3 and msg.header.frame_id == 'workspace_camera'
    # the rate, as the median spacing of the robot's own stamps (a late delivery barely moves it)
    spacing = float(np.median(np.diff([_ns(m) for m in images]))) / 1e9
    assert 0.7 / RATE < spacing < 1.4 / RATE, spacing
    with robot.lock:
        infos = {_ns(m): m for m in robot.infos}
    stamped = [infos[_ns(m)] for m in images if _ns(m) in infos]
    assert stamped, 'no camera_info with an image stamp'  # the same stamp as its image
    info = stamped[-1]
    assert (info.width, info.height, info.header.frame_id) == (320, 240, 'workspace_camera')
    f = 120.0 / math.tan(math.radians(36.0) / 2)  # the camera's 36 degree vertical view
    assert list(info.k) == pytest.approx([f, 0.0, 159.5, 0.0, f, 119.5, 0.0, 0.0, 1.0])
    assert list(info.p) == pytest.approx([f, 0.0, 159.5, 0.0, 0.0, f, 119.5, 0.0,
                                          0.0, 0.0, 1.0, 0.0])
    assert info.distortion_model == 'plumb_bob' and list(info.d) == [0.0] * 5
    assert list(info.r) == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]


def test_the_distractor_dropped_into_view_lands_on_the_table_and_reset_parks_it(robot):
    assert robot.call(robot.reset_client, Trigger.Request()).success
    before = _pixels(robot.images_after(robot.get_clock().now().nanoseconds)[0]).astype(int)
    with robot.lock:
        info = robot.infos[-1]
    u, v = _pixel_of((DROP[0], DROP[1], 2 * HALF_SIZE), info)
    region = (slice(v - 6, v + 7), slice(u - 6, u + 7))  # inside the box's 21-pixel top
    refused = robot.move_distractor(DROP, after_goals=1)
    assert not refused.success and 'now only' in refused.message
    response = robot.move_distractor(DROP)
    assert response.success, response.message
    dropped = robot.get_clock().now().nanoseconds
    # 1.5 s on: fallen 0.24 m (0.22 s) and at rest; two frames 0.5 s apart
    frames = robot.images_after(dropped + 1_500_000_000, 6)
    landed, later = (_pixels(m).astype(int) for m in (frames[0], frames[5]))
    assert np.abs(landed - before)[region].mean() > 40  # it is there
    red, green, blue = landed[region].reshape(-1, 3).mean(axis=0)
    assert red > green + 80 and blue > green + 60, (red, green, blue)  # magenta, not the table
    # at rest on the table: still, and its top as wide as a 6 cm box 1.04 m from the camera
    assert np.abs(later - landed)[region].mean() < 6  # two noisy frames differ by ~2.3
    magenta = (landed[v, :, 0] > landed[v, :, 1] + 80) & (landed[v, :, 2] > landed[v, :, 1] + 60)
    expected = 2 * HALF_SIZE * info.k[0] / (1.1 - 2 * HALF_SIZE)
    assert abs(int(magenta.sum()) - expected) <= 3, (int(magenta.sum()), expected)
    assert robot.call(robot.reset_client, Trigger.Request()).success
    parked = _pixels(robot.images_after(robot.get_clock().now().nanoseconds)[0]).astype(int)
    assert np.abs(parked - before)[region].mean() < 6


def test_a_camera_that_cannot_keep_its_rate_publishes_as_fast_as_it_renders_and_says_so(
        ros, tmp_path):
    namespace = unique_namespace()
    process = NodeProcess('muscle_mem_demo.robot_node', namespace=namespace,
                          params={'camera_rate': 10000.0, 'camera_width': 64,
                                  'camera_height': 48}, log_dir=tmp_path)
    client = CameraClient(namespace)
    try:
        client.wait_for(lambda: 'is not reached' in process.log(), 'the rate warning')
        images = client.images_after(0, 5)
        assert (images[0].width, images[0].height) == (64, 48)
        time.sleep(1.0)  # a second more: still said once
        log = process.log()
    finally:
        process.stop()
        client.close()
    said = [line for line in log.splitlines() if 'is not reached' in line]
    assert len(said) == 1, log
    assert said[0].split('sim_robot]: ')[-1].startswith(
        'camera_rate 10000 Hz is not reached: 64x48 frames at '), said
    assert float(said[0].split(' frames at ')[1].split(' Hz')[0]) < 10000.0


def test_a_negative_camera_rate_fails_at_start_naming_it():
    assert_bad_parameter('muscle_mem_demo.robot_node', 'camera_rate', '-1.0')


def test_without_a_gl_backend_a_camera_robot_exits_at_start_saying_so_in_one_line():
    env = {k: v for k, v in os.environ.items() if k not in ('DISPLAY', 'WAYLAND_DISPLAY')}
    env['MUJOCO_GL'] = 'glx'
    proc = subprocess.run(
        [sys.executable, '-m', 'muscle_mem_demo.robot_node', '--ros-args',
         '-r', f'__ns:={unique_namespace()}', '-p', f'camera_rate:={RATE}'],
        env=env, capture_output=True, text=True, timeout=60)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, (proc.returncode, lines)
    assert 'the camera needs an OpenGL backend: MUJOCO_GL=glx could not start' in lines[0]
    assert 'set MUJOCO_GL=egl' in lines[0]
