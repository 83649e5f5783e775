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

r"""
Launch the MuJoCo demo: sim robot, behavior cache and demo planning agent.

    ros2 launch muscle_mem_demo sim_demo.launch.py
    ros2 launch muscle_mem_demo sim_demo.launch.py rtf:=2.0 think_time:=0.5 \
        store_path:=/tmp/demo_cache.db

Then send the task to the cache (the agent is called on a miss):

    ros2 action send_goal /muscle_mem/execute_task muscle_mem_interfaces/action/ExecuteTask \
        '{task: pick_and_place, params_json: "{\"place\": [0.4, -0.3]}"}'

Or a task the agent decomposes into subtasks (pick, then place), which it sends to the
cache's /muscle_mem/execute_subtask:

    ros2 action send_goal /muscle_mem/execute_task muscle_mem_interfaces/action/ExecuteTask \
        '{task: restock}'

The same three nodes start without ROS launch through `sim_demo`, which also runs the
scripted story. The cache's parameters are the package's config/sim_demo.yaml.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    default_params = os.path.join(
        get_package_share_directory('muscle_mem_demo'), 'config', 'sim_demo.yaml'
    )
    return LaunchDescription([
        DeclareLaunchArgument(
            'rtf', default_value='1.0', description='Real-time factor of the simulation',
        ),
        DeclareLaunchArgument(
            'think_time', default_value='1.5', description="The agent's think time per step, s",
        ),
        DeclareLaunchArgument(
            'params_file', default_value=default_params,
            description='ROS params YAML of the behavior cache',
        ),
        DeclareLaunchArgument(
            'store_path', default_value='~/.ros/muscle_mem/sim_demo.db',
            description="The cache's SQLite file",
        ),
        Node(
            package='muscle_mem_demo',
            executable='sim_robot',
            name='sim_robot',
            parameters=[{'rtf': LaunchConfiguration('rtf')}],
            output='screen',
        ),
        Node(
            package='muscle_mem_ros',
            executable='behavior_cache',
            name='muscle_mem',
            parameters=[
                LaunchConfiguration('params_file'),
                {'store_path': LaunchConfiguration('store_path')},
            ],
            output='screen',
        ),
        Node(
            package='muscle_mem_demo',
            executable='demo_agent',
            name='demo_agent',
            parameters=[{
                'think_time': LaunchConfiguration('think_time'),
                'arm_action': '/muscle_mem/arm/follow_joint_trajectory',
                'pose_action': '/muscle_mem/arm/move_to_pose',
                'gripper_action': '/muscle_mem/gripper/gripper_cmd',
                'subtask_action': '/muscle_mem/execute_subtask',
            }],
            output='screen',
        ),
    ])
