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
The MuJoCo demo of muscle_mem_ros: the demo robot, the demo planning agent, the story.

Its own colcon package, so the behavior cache (muscle_mem_ros) needs neither MuJoCo nor
matplotlib; its interfaces are in muscle_mem_demo_interfaces.

ROS-free modules: :mod:`.arms` (the arm models, read from the gymnasium-robotics wheel, and
the table scene), :mod:`.kinematics` (forward and inverse kinematics on the model),
:mod:`.gripper_yaw` (a goal's orientation read as the gripper's turn), :mod:`.tf_frames` (the
frame tree: the arm's links, the camera, the cube as detected),
:mod:`.trajectory` (joint paths),
:mod:`.physics` (the simulation, stepped in its own thread), :mod:`.camera` (its camera,
rendered offscreen), :mod:`.distractor` (a box for the camera that is not the cube),
:mod:`.planner` (pick-and-place
one step at a time), :mod:`.story` (the demo's runs and their verdict), :mod:`.report`
(table and PNG), :mod:`.processes` (child processes). ROS nodes: :mod:`.robot_node`
(console script ``sim_robot``; its camera on ROS: :mod:`.camera_feed`, its frames:
:mod:`.tf_feed`), :mod:`.agent_node`
(``demo_agent``); the demo:
:mod:`.demo` (``sim_demo``) with its ROS client :mod:`.driver`. The arm is a Franka Emika
Panda.
Importing this package imports neither rclpy nor mujoco. It does set ``MUJOCO_GL=egl`` when
``MUJOCO_GL`` is not set, on Linux: MuJoCo picks its OpenGL backend when it is first imported,
and the demo's camera renders headless (Mesa's EGL, on the CPU) unless told otherwise
(``MUJOCO_GL=glfw`` for a window, ``osmesa``).
"""

import os
import sys

if sys.platform.startswith('linux'):
    os.environ.setdefault('MUJOCO_GL', 'egl')

__all__: list[str] = []
