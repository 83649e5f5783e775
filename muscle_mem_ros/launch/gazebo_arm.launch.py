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
Put the behavior cache in front of a ros2_control arm simulated in Gazebo (ros_gz).

    ros2 launch muscle_mem_ros gazebo_arm.launch.py urdf:=/path/to/my_arm.urdf.xacro
    ros2 launch muscle_mem_ros gazebo_arm.launch.py urdf:=/path/to/my_arm.urdf.xacro \
        world:=my_world.sdf params_file:=/path/to/my_params.yaml

Starts, as a Gazebo user would: Gazebo (ros_gz_sim's gz_sim.launch.py, running), the
ros_gz_bridge for /clock, robot_state_publisher with the URDF (a xacro file or a plain URDF,
with a <ros2_control> tag using gz_ros2_control/GazeboSimSystem and the gz_ros2_control
plugin pointing at your controllers.yaml), the robot spawned into the world from
/robot_description, then the joint_state_broadcaster and the arm's
joint_trajectory_controller spawners one after the other, and the cache node once the arm's
controller is active. Every node runs on Gazebo's clock (use_sim_time).

The cache's parameters are config/gazebo_arm.yaml by default: /joint_states selected by joint
name, the controller's control_msgs/action/FollowJointTrajectory proxied at
/muscle_mem/joint_trajectory_controller/follow_joint_trajectory. Point your agent there.

Needs (not dependencies of muscle_mem_ros, which runs without Gazebo): ros_gz_sim,
ros_gz_bridge, robot_state_publisher, xacro, controller_manager, gz_ros2_control,
joint_state_broadcaster, joint_trajectory_controller and control_msgs, e.g.
``apt install ros-$ROS_DISTRO-ros-gz ros-$ROS_DISTRO-gz-ros2-control
ros-$ROS_DISTRO-ros2-controllers ros-$ROS_DISTRO-xacro``. Not run in this project's tests
(Gazebo cannot be installed there); the tests build this description and start the cache
with the params file.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import Command, LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    urdf = LaunchConfiguration('urdf')
    arm_controller = LaunchConfiguration('arm_controller')
    sim_time = {'use_sim_time': True}
    gazebo = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(PathJoinSubstitution(
            [FindPackageShare('ros_gz_sim'), 'launch', 'gz_sim.launch.py'])),
        launch_arguments={'gz_args': ['-r ', LaunchConfiguration('world')]}.items(),
    )
    clock_bridge = Node(
        package='ros_gz_bridge',
        executable='parameter_bridge',
        name='clock_bridge',
        arguments=['/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock'],
        output='screen',
    )
    robot_state_publisher = Node(
        package='robot_state_publisher',
        executable='robot_state_publisher',
        parameters=[{
            'robot_description': ParameterValue(Command(['xacro ', urdf]), value_type=str),
            **sim_time,
        }],
        output='screen',
    )
    spawn = Node(
        package='ros_gz_sim',
        executable='create',
        arguments=['-topic', 'robot_description', '-name', LaunchConfiguration('robot_name')],
        output='screen',
    )
    joint_state_broadcaster = Node(
        package='controller_manager',
        executable='spawner',
        arguments=['joint_state_broadcaster'],
        parameters=[sim_time],
        output='screen',
    )
    arm = Node(
        package='controller_manager',
        executable='spawner',
        arguments=[arm_controller],
        parameters=[sim_time],
        output='screen',
    )
    cache = Node(
        package='muscle_mem_ros',
        executable='behavior_cache',
        name='muscle_mem',
        # use_sim_time is in the params file too; given here, a params file of your own
        # cannot leave the cache on the wall clock while the controllers run on /clock.
        parameters=[LaunchConfiguration('params_file'), sim_time],
        output='screen',
        emulate_tty=True,
    )
    return LaunchDescription([
        DeclareLaunchArgument(
            'urdf', description='Path of the robot description (xacro or URDF) with its '
            '<ros2_control> tag and the gz_ros2_control plugin',
        ),
        DeclareLaunchArgument(
            'world', default_value='empty.sdf', description='Gazebo world (SDF file or name)',
        ),
        DeclareLaunchArgument(
            'robot_name', default_value='arm', description='Name of the model in Gazebo',
        ),
        DeclareLaunchArgument(
            'arm_controller', default_value='joint_trajectory_controller',
            description="Name of the arm's joint_trajectory_controller in controllers.yaml",
        ),
        DeclareLaunchArgument(
            'params_file',
            default_value=PathJoinSubstitution(
                [FindPackageShare('muscle_mem_ros'), 'config', 'gazebo_arm.yaml']),
            description='ROS params YAML of the behavior cache',
        ),
        gazebo,
        clock_bridge,
        robot_state_publisher,
        spawn,
        RegisterEventHandler(OnProcessExit(target_action=spawn,
                                           on_exit=[joint_state_broadcaster])),
        RegisterEventHandler(OnProcessExit(target_action=joint_state_broadcaster,
                                           on_exit=[arm])),
        RegisterEventHandler(OnProcessExit(target_action=arm, on_exit=[cache])),
    ])
