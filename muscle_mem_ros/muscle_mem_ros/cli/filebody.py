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
The body a behavior tree file records, checked against the robot ``run-bt`` drives.

An exported file records the body its branches were learned on (``body:``, the key a
store keeps, :mod:`muscle_mem_ros.body`). run-bt reads this robot's body as the cache
would (:func:`~muscle_mem_ros.ros.node.description.read_description` and
:func:`~muscle_mem_ros.ros.node.description.body_from`: the params file's
``robot_description_file``, else the ``robot_description`` topic, with its joint names and
tools) and refuses a file learned on another body before anything moves. run-bt has no
store, so a declaration that two bodies are compatible is not read here: such a file is
run by the cache, after ``muscle-mem import`` (which keeps its body). A file that records
no body (or was imported for any body) runs on any robot, as before.
"""

from __future__ import annotations

from muscle_mem_ros.body import Body
from muscle_mem_ros.bt.document import BtDocument
from muscle_mem_ros.ros.node.description import body_from, read_description
from muscle_mem_ros.ros.node.nodeconfig import NodeConfig
from rclpy.node import Node

__all__ = ['foreign_file']


def foreign_file(node: Node, config: NodeConfig, doc: BtDocument) -> str:
    """Return why ``doc`` may not run on this robot ('' when it may): another body's file."""
    recorded = Body.parse(doc.body)
    if recorded is None:
        return ''
    description, _ = read_description(node, config)
    here = body_from(config, description, node.get_name())
    if here.digest == recorded.digest:
        return ''
    return (f"this file's branches were learned on {recorded}, this robot is {here} "
            f'({here.key}); a goal learned on one body means little on another: export the '
            'tree this robot learned, or, when the two are one for the cache, declare it '
            '(muscle-mem bodies --compatible) and let the cache replay it after muscle-mem '
            'import')
