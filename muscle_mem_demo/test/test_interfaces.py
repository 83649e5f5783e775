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
The demo's FollowJointTrajectory mirrors control_msgs/action/FollowJointTrajectory.

The field lists below are control_msgs' (Kilted); where control_msgs is installed the mirror
is also compared with it field by field, so a change on either side shows. control_msgs is not
published as PyPI wheels, so on the wheel setup that comparison skips and says so.
"""

from __future__ import annotations

import importlib.util

from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_demo_interfaces.msg import JointComponentTolerance, JointTolerance
import pytest

GOAL = {
    'trajectory': 'trajectory_msgs/JointTrajectory',
    'multi_dof_trajectory': 'trajectory_msgs/MultiDOFJointTrajectory',
    'path_tolerance': 'sequence<{pkg}/JointTolerance>',
    'component_path_tolerance': 'sequence<{pkg}/JointComponentTolerance>',
    'goal_tolerance': 'sequence<{pkg}/JointTolerance>',
    'component_goal_tolerance': 'sequence<{pkg}/JointComponentTolerance>',
    'goal_time_tolerance': 'builtin_interfaces/Duration',
}
RESULT = {'error_code': 'int32', 'error_string': 'string'}
FEEDBACK = {
    'header': 'std_msgs/Header',
    'joint_names': 'sequence<string>',
    'desired': 'trajectory_msgs/JointTrajectoryPoint',
    'actual': 'trajectory_msgs/JointTrajectoryPoint',
    'error': 'trajectory_msgs/JointTrajectoryPoint',
    'multi_dof_joint_names': 'sequence<string>',
    'multi_dof_desired': 'trajectory_msgs/MultiDOFJointTrajectoryPoint',
    'multi_dof_actual': 'trajectory_msgs/MultiDOFJointTrajectoryPoint',
    'multi_dof_error': 'trajectory_msgs/MultiDOFJointTrajectoryPoint',
}
ERROR_CODES = {'SUCCESSFUL': 0, 'INVALID_GOAL': -1, 'INVALID_JOINTS': -2,
               'OLD_HEADER_TIMESTAMP': -3, 'PATH_TOLERANCE_VIOLATED': -4,
               'GOAL_TOLERANCE_VIOLATED': -5}
JOINT_TOLERANCE = {'name': 'string', 'position': 'double', 'velocity': 'double',
                   'acceleration': 'double'}
COMPONENT_TOLERANCE = {'joint_name': 'string', 'component': 'uint16', 'position': 'double',
                       'velocity': 'double', 'acceleration': 'double'}
COMPONENTS = {'X_AXIS': 1, 'Y_AXIS': 2, 'Z_AXIS': 3, 'TRANSLATION': 4, 'ROTATION': 5}


def _fields(message: type, pkg: str) -> dict[str, str]:
    """Return the message's fields and types in order, this package's name as ``{pkg}``."""
    return {name: kind.replace(pkg, '{pkg}')
            for name, kind in message.get_fields_and_field_types().items()}


def _constants(message: type) -> dict[str, int]:
    return {k: v for k, v in vars(message).items() if k.isupper() and isinstance(v, int)}


def test_fields_types_order_and_constants_are_control_msgs():
    pkg = 'muscle_mem_demo_interfaces'
    assert list(_fields(FollowJointTrajectory.Goal, pkg).items()) == list(GOAL.items())
    assert list(_fields(FollowJointTrajectory.Result, pkg).items()) == list(RESULT.items())
    assert list(_fields(FollowJointTrajectory.Feedback, pkg).items()) == list(FEEDBACK.items())
    assert _constants(FollowJointTrajectory.Result) == ERROR_CODES
    assert list(_fields(JointTolerance, pkg).items()) == list(JOINT_TOLERANCE.items())
    assert list(_fields(JointComponentTolerance, pkg).items()) == list(
        COMPONENT_TOLERANCE.items())
    assert _constants(JointComponentTolerance) == COMPONENTS


def test_the_mirror_matches_the_installed_control_msgs():
    if importlib.util.find_spec('control_msgs') is None:
        pytest.skip('control_msgs not importable (not available as PyPI wheels)')
    from control_msgs.action import FollowJointTrajectory as Original
    from control_msgs.msg import JointComponentTolerance as OriginalComponent
    from control_msgs.msg import JointTolerance as OriginalTolerance

    pairs = [(FollowJointTrajectory.Goal, Original.Goal),
             (FollowJointTrajectory.Result, Original.Result),
             (FollowJointTrajectory.Feedback, Original.Feedback),
             (JointTolerance, OriginalTolerance),
             (JointComponentTolerance, OriginalComponent)]
    for mirror, original in pairs:
        assert list(_fields(mirror, 'muscle_mem_demo_interfaces').items()) == list(
            _fields(original, 'control_msgs').items())
        assert _constants(mirror) == _constants(original)
