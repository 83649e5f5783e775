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
Launch the behavior-cache node, a managed (lifecycle) node, with a params file.

    ros2 launch muscle_mem_ros behavior_cache.launch.py
    ros2 launch muscle_mem_ros behavior_cache.launch.py params_file:=/path/to/params.yaml \
        node_name:=muscle_mem log_level:=info

Three ways to bring it up:

* ``autostart:=true`` (the default): the node configures and activates itself
  at startup, as users who do not manage lifecycles expect. A bad params file
  ends it with exit code 1 and a message naming the parameter.
* ``autostart:=false``: the node starts unconfigured and nothing here drives it.
  It waits for a lifecycle manager (nav2's ``lifecycle_manager`` with
  ``node_names: [muscle_mem]``) or for ``ros2 lifecycle set /muscle_mem
  configure`` then ``activate``; a bad parameter then fails the ``configure``
  transition and the node stays up.
* ``autostart:=false manage:=true``: this launch file sends ``configure`` once at
  start and ``activate`` once when that configure succeeded, then leaves the node
  alone: a later ``deactivate`` or ``cleanup`` is final until someone asks again.

The default params file is the package's config/behavior_cache.yaml (set up for
the MuJoCo demo).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import (
    DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler)
from launch.conditions import IfCondition
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration, PythonExpression
from launch_ros.actions import LifecycleNode
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from lifecycle_msgs.msg import Transition


def generate_launch_description():
    default_params = os.path.join(
        get_package_share_directory('muscle_mem_ros'), 'config', 'behavior_cache.yaml'
    )
    autostart = LaunchConfiguration('autostart')
    manage = LaunchConfiguration('manage')
    node = LifecycleNode(
        package='muscle_mem_ros',
        executable='behavior_cache',
        name=LaunchConfiguration('node_name'),
        namespace='',
        parameters=[LaunchConfiguration('params_file'), {'autostart': autostart}],
        arguments=['--ros-args', '--log-level', LaunchConfiguration('log_level')],
        output='screen',
        emulate_tty=True,
    )
    # autostart:=false manage:=true: configure once, activate once if that configure succeeded.
    launch_drives = IfCondition(PythonExpression([
        "'", autostart, "'.lower() == 'false' and '", manage, "'.lower() == 'true'"]))
    configure = EmitEvent(
        event=ChangeState(lifecycle_node_matcher=matches_action(node),
                          transition_id=Transition.TRANSITION_CONFIGURE),
        condition=launch_drives,
    )

    def activate_if_configured(context):
        if context.locals.event.goal_state != 'inactive':
            return []  # the configure failed: the node logged why and stays unconfigured
        return [EmitEvent(event=ChangeState(lifecycle_node_matcher=matches_action(node),
                                            transition_id=Transition.TRANSITION_ACTIVATE))]

    # handle_once: the first transition out of 'configuring' only, so a later deactivate
    # (active -> inactive) or cleanup and configure by someone else is left alone.
    activate_once = RegisterEventHandler(
        OnStateTransition(
            target_lifecycle_node=node, start_state='configuring',
            entities=[OpaqueFunction(function=activate_if_configured)],
            handle_once=True,
        ),
        condition=launch_drives,
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
        DeclareLaunchArgument(
            'autostart', default_value='true',
            description='true: the node configures and activates itself; false: it waits',
        ),
        DeclareLaunchArgument(
            'manage', default_value='false',
            description='With autostart:=false: true sends configure, then activate, once at '
                        'start; false leaves the node to a lifecycle manager or '
                        'ros2 lifecycle set',
        ),
        activate_once,
        node,
        configure,
    ])
