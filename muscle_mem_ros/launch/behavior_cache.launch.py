"""
Launch the behavior-cache node, a managed (lifecycle) node, with a params file.

    ros2 launch muscle_mem_ros behavior_cache.launch.py
    ros2 launch muscle_mem_ros behavior_cache.launch.py params_file:=/path/to/params.yaml \
        node_name:=muscle_mem log_level:=info

Two ways to bring it up:

* ``autostart:=true`` (the default): the node configures and activates itself
  at startup, as users who do not manage lifecycles expect. A bad params file
  ends it with exit code 1 and a message naming the parameter.
* ``autostart:=false``: the node starts unconfigured. With ``manage:=true``
  (the default) this launch file then drives it through lifecycle events:
  ``configure`` at once, ``activate`` when it reached ``inactive``. With
  ``manage:=false`` it waits for a lifecycle manager (nav2's
  ``lifecycle_manager`` with ``node_names: [muscle_mem]``) or for
  ``ros2 lifecycle set /muscle_mem configure`` then ``activate``; a bad
  parameter then fails the ``configure`` transition and the node stays up.

The default params file is the package's config/behavior_cache.yaml (set up for
the MuJoCo demo).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, RegisterEventHandler
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
    # The managed variant: lifecycle events from this launch file (autostart:=false manage:=true).
    launch_drives = IfCondition(PythonExpression([
        "'", autostart, "'.lower() == 'false' and '", manage, "'.lower() == 'true'"]))
    configure = EmitEvent(
        event=ChangeState(lifecycle_node_matcher=matches_action(node),
                          transition_id=Transition.TRANSITION_CONFIGURE),
        condition=launch_drives,
    )
    activate_when_inactive = RegisterEventHandler(
        OnStateTransition(
            target_lifecycle_node=node, goal_state='inactive',
            entities=[EmitEvent(event=ChangeState(
                lifecycle_node_matcher=matches_action(node),
                transition_id=Transition.TRANSITION_ACTIVATE))],
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
            'manage', default_value='true',
            description='With autostart:=false, drive configure and activate from this launch '
                        'file (false: leave it to a lifecycle manager or ros2 lifecycle set)',
        ),
        activate_when_inactive,
        node,
        configure,
    ])
