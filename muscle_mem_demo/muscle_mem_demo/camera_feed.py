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
The sim robot's camera on ROS: ``camera/image_raw`` and ``camera/camera_info`` at a rate.

The workspace camera (:mod:`.camera`) is rendered in a thread of its own, which opens the
renderer (so the GL context is that thread's) and, ``camera_rate`` times a second, copies
the simulation's joint positions, stamps them with the node's clock and renders them: a
sensor_msgs/Image (rgb8, frame ``workspace_camera``) and a sensor_msgs/CameraInfo of the
same stamp (the pinhole intrinsics in K and P, ``plumb_bob`` with zero distortion).
Rendering never holds the simulation's lock (it renders a copy), and the renderer releases
Python's lock while it draws, so the physics and the 120 Hz joint states go on meanwhile.

A frame that takes longer than the period does not queue the next ones up: the next frame
starts when this one is out, so a camera that cannot keep its rate publishes as fast as it
renders, and says once, with the rate it reached.

Reliable, depth 5: a best-effort reader (sensor-data QoS, as the behavior cache's image
sensors read) matches it as well as a reliable one.
"""

from __future__ import annotations

import array
from dataclasses import dataclass
import math
import threading
import time

from muscle_mem_demo.camera import CameraError, Eye, Intrinsics, open_eye
from muscle_mem_demo.params import declare_int, declare_number
from muscle_mem_demo.physics import ArmSim
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import CameraInfo, Image

__all__ = ['CameraFeed', 'CameraSettings', 'FRAME_ID', 'read_camera_parameters']

FRAME_ID = 'workspace_camera'
"""The camera frame named in the messages' headers."""
MAX_SIZE = 4096
"""Largest width or height, pixels (what an OpenGL offscreen buffer surely holds)."""
OPEN_TIMEOUT = 30.0
"""Seconds the node waits for the renderer to open (EGL takes a fraction of one)."""
_LATE_FOR = 1.0
"""Seconds of frames late in a row before the camera says it misses its rate (a late frame or
two is the machine's noise; the first, opening the GL pipeline, is slow)."""


@dataclass(frozen=True)
class CameraSettings:
    """The camera parameters of the sim robot, checked."""

    rate: float
    """Frames a second; 0: no camera (nothing rendered, no OpenGL needed)."""
    width: int
    """Pixels."""
    height: int
    """Pixels."""
    noise: float
    """Pixel noise, standard deviation in grey levels (0-255)."""


def read_camera_parameters(node: Node) -> CameraSettings:
    """
    Declare ``camera_rate``, ``camera_width``, ``camera_height``, ``camera_noise``; check them.

    :raises ValueError: a value out of range; the message names the parameter.
    """
    rate = declare_number(node, 'camera_rate', 0.0, minimum=0.0,
                          description='frames a second on camera/image_raw; 0: no camera')
    sizes: dict[str, int] = {}
    for name, default in (('camera_width', 320), ('camera_height', 240)):
        sizes[name] = declare_int(node, name, default, minimum=1, description='pixels')
        if sizes[name] > MAX_SIZE:
            raise ValueError(f'parameter {name!r} {sizes[name]}: at most {MAX_SIZE} pixels')
    noise = declare_number(node, 'camera_noise', 2.0, minimum=0.0, read_only=False,
                           description='pixel noise, standard deviation, grey levels 0-255; '
                           'may be set while running (the robot node applies it)')
    return CameraSettings(rate=rate, width=sizes['camera_width'],
                          height=sizes['camera_height'], noise=noise)


class CameraFeed:
    """
    Publish the workspace camera of ``sim`` at ``settings.rate`` from a thread of its own.

    :param node: Publishes on its relative ``camera/image_raw`` and ``camera/camera_info``.
    :param sim: The simulation whose state is rendered.
    :param settings: Rate (> 0), size, noise.
    :param seed: The noise generator's seed.
    :raises CameraError: the renderer did not open (no OpenGL backend: the message, one
        line, says which ``MUJOCO_GL`` to set); nothing is left running then.
    """

    def __init__(self, *, node: Node, sim: ArmSim, settings: CameraSettings,
                 seed: int = 0) -> None:
        if not settings.rate > 0.0:
            raise ValueError(f'camera rate must be > 0, got {settings.rate}')
        self._node = node
        self._sim = sim
        self._settings = settings
        self._seed = seed
        self._noise = settings.noise
        qos = QoSProfile(depth=5)
        self._image_pub = node.create_publisher(Image, 'camera/image_raw', qos)
        self._info_pub = node.create_publisher(CameraInfo, 'camera/camera_info', qos)
        self._stop = threading.Event()
        self._opened = threading.Event()
        self._error: CameraError | None = None
        self._thread = threading.Thread(target=self._run, name='camera', daemon=True)
        self._thread.start()
        if not self._opened.wait(OPEN_TIMEOUT):
            self._stop.set()
            raise CameraError(f'the camera did not open within {OPEN_TIMEOUT:g} s')
        if self._error is not None:
            self._thread.join()
            raise self._error

    def set_noise(self, noise: float) -> None:
        """
        Change the pixel noise (grey levels) from the next frame on.

        :raises ValueError: negative or not finite.
        """
        if not (math.isfinite(noise) and noise >= 0.0):
            raise ValueError(f'camera noise must be >= 0 grey levels, got {noise}')
        self._noise = float(noise)

    def stop(self) -> None:
        """Stop rendering and publishing; the renderer is closed in its own thread."""
        self._stop.set()
        self._thread.join(timeout=2.0)

    def _run(self) -> None:
        settings = self._settings
        try:
            eye = open_eye(self._sim.model, width=settings.width, height=settings.height,
                           noise=settings.noise, seed=self._seed)
        except CameraError as err:
            self._error = err
            self._opened.set()
            return
        self._opened.set()
        try:
            self._loop(eye)
        finally:
            eye.close()

    def _loop(self, eye: Eye) -> None:
        settings = self._settings
        period = 1.0 / settings.rate
        info = camera_info(eye.intrinsics)
        late = 0
        late_since = 0.0
        warned = False
        due = time.monotonic()
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            qpos = self._sim.positions()
            eye.noise = self._noise
            stamp = self._node.get_clock().now().to_msg()
            pixels = eye.frame(qpos)
            image = Image(height=int(pixels.shape[0]), width=int(pixels.shape[1]),
                          encoding='rgb8', is_bigendian=0, step=int(pixels.shape[1]) * 3)
            image.header.stamp = info.header.stamp = stamp
            image.header.frame_id = FRAME_ID
            image.data = array.array('B', pixels.tobytes())
            self._image_pub.publish(image)
            self._info_pub.publish(info)
            due += period
            now = time.monotonic()
            if due >= now:
                late = 0
                continue
            due = now  # behind: the next frame at once, none saved up
            late_since = now if late == 0 else late_since
            late += 1
            if not warned and now - late_since >= _LATE_FOR:
                warned = True
                self._node.get_logger().warning(
                    f'camera_rate {settings.rate:g} Hz is not reached: '
                    f'{settings.width}x{settings.height} frames at '
                    f'{(late - 1) / (now - late_since):.1f} Hz; publishing as fast as they render')


def camera_info(k: Intrinsics) -> CameraInfo:
    """Return the CameraInfo of a pinhole camera without distortion (header left empty)."""
    info = CameraInfo(width=k.width, height=k.height, distortion_model='plumb_bob')
    info.header.frame_id = FRAME_ID
    info.d = [0.0] * 5
    info.k = list(k.k)
    info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    info.p = [k.fx, 0.0, k.cx, 0.0, 0.0, k.fy, k.cy, 0.0, 0.0, 0.0, 1.0, 0.0]
    return info
