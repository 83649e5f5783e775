"""
Launch the behavior-cache node with a params file.

    ros2 launch muscle_mem_ros behavior_cache.launch.py
    ros2 launch muscle_mem_ros behavior_cache.launch.py params_file:=/path/to/params.yaml \
        node_name:=muscle_mem log_level:=info

The default params file is the package's config/behavior_cache.yaml (set up for
the MuJoCo demo). The node exits with code 1 and a message naming the
parameter if the params file is invalid.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    default_params = os.path.join(
        get_package_share_directory('muscle_mem_ros'), 'config', 'behavior_cache.yaml'
    )
    return LaunchDescription([
        DeclareLaunchArgument(
            'params_file', default_value=default_params,
            description='ROS params YAML of the behavior cache (sensors, tools, agent, mode)',
        ),
        DeclareLaunchArgument(
            'node_name', default_value='muscle_mem', description='Name of the cache node',
        ),
        DeclareLaunchArgument(
            'log_level', default_value='info', description='Logger level of the cache node',
        ),
        Node(
            package='muscle_mem_ros',
            executable='behavior_cache',
            name=LaunchConfiguration('node_name'),
            parameters=[LaunchConfiguration('params_file')],
            arguments=['--ros-args', '--log-level', LaunchConfiguration('log_level')],
            output='screen',
            emulate_tty=True,
        ),
    ])
