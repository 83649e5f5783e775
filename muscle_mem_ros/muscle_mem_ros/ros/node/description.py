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
The body this node is: its robot description, joints and tools, read once at configure.

What defines a body and how it is named is :mod:`muscle_mem_ros.body`. The node reads
the description at configure, once:

* from ``robot_description_file`` when it is set (a missing or unreadable file, or one
  that is not XML, a URDF cut off halfway among them, is a configuration error naming
  the parameter, the file and the parse error; a xacro file is read as it is, not
  expanded, and a warning at start says it is another body than its expansion);
* else from the ``robot_description`` topic (``std_msgs/msg/String``, reliable,
  transient local, as ``robot_state_publisher`` publishes it; relative, so a node in a
  namespace reads its own robot's, and remappable), waiting at most
  ``robot_description_timeout`` seconds (default 2; 0: not at all). A publisher that is
  already up answers at once (transient local), so the wait costs nothing on a running
  robot. Nothing by then: the body is defined by the joint names and tools alone, and the
  log says so once, at configure; the body is pending (:class:`~muscle_mem_ros.body.LiveBody`):
  until a description arrives no branch learned on a known body replays. The topic is
  read on (:func:`follow`): a description that arrives later, or changes while the node
  runs, changes the body at once (the recorder and the trees share it; a run that began
  keeps the tree it read), and the log says so. With ``robot_description_timeout: 0`` the
  topic is not read at all: the body is the joint names and tools, deliberately.

The topic is read through a helper node of the same context, spun here only for the
wait, so configure works whether it runs before spinning (``autostart``) or inside an
executor's callback (a lifecycle manager's ``configure``).

At configure the node logs its body with the key a store keeps (what ``muscle-mem
bodies --compatible`` takes for a robot that has learned nothing yet) and, once, how
many trajectories of the store replay on any body: those of an unknown body (learned
before trajectories recorded it), as before, and those imported for any body, said apart.
"""

from __future__ import annotations

from pathlib import Path
import time
from typing import Any
from weakref import WeakKeyDictionary
import xml.etree.ElementTree as ElementTree

from muscle_mem_ros.body import anywhere, Body, body_of, LiveBody
from muscle_mem_ros.errors import ConfigError, StoreError
from muscle_mem_ros.ros.node.nodeconfig import NodeConfig
from muscle_mem_ros.store import Store
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node as RosNode
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

__all__ = ['DESCRIPTION_TOPIC', 'body_from', 'description_file', 'follow', 'read_body',
           'read_description', 'unexpanded']

DESCRIPTION_TOPIC = 'robot_description'
"""The topic read, relative to the node's namespace (as robot_state_publisher names it)."""

_LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


def description_file(config: NodeConfig) -> str | None:
    """
    Return the text of ``robot_description_file``, or None when it is not set.

    :raises ConfigError: it cannot be read.
    """
    if not config.robot_description_file:
        return None
    try:
        text = Path(config.robot_description_file).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f'robot_description_file: cannot read '
                          f'{config.robot_description_file!r}: {err}') from err
    try:  # a URDF, MJCF or SDF is XML: anything else would be fingerprinted as a body
        ElementTree.fromstring(text)
    except ElementTree.ParseError as err:
        raise ConfigError(f'robot_description_file: {config.robot_description_file!r} is not '
                          f'XML (a URDF, MJCF or SDF): {err}') from err
    return text


def unexpanded(config: NodeConfig, description: str) -> str:
    """
    Return what to warn of a ``robot_description_file`` that is xacro ('' when it is not).

    A xacro file is read as it is: no ``xacro`` module comes with the ROS wheels the
    package is tested on, so it is not expanded, and its body differs from the URDF it
    expands to (what ``robot_state_publisher`` publishes from it).
    """
    path = config.robot_description_file
    if not path or not (path.endswith('.xacro') or 'xmlns:xacro' in description):
        return ''
    return (f'robot_description_file {path} is xacro, read as it is (not expanded): it is '
            'a different body from the URDF it expands to (the robot_description '
            'robot_state_publisher publishes); give the expanded file (xacro '
            f'{Path(path).name} > robot.urdf) or leave the parameter unset to read the topic')


def body_from(config: NodeConfig, description: str, fallback: str) -> Body:
    """Return the body of a node configured by ``config`` with ``description`` ('': none)."""
    return body_of(description=description,
                   joints={s.name: tuple(s.joints) for s in config.sensors if s.joints},
                   tools=[(t.server, t.type_name) for t in config.tools],
                   name=config.body_name, fallback=fallback)


def read_description(node: RosNode, config: NodeConfig) -> tuple[str, str]:
    """
    Return (description, where it came from); '' and why when there is none.

    :raises ConfigError: ``robot_description_file`` cannot be read.
    """
    text = description_file(config)
    if text is not None:
        return text, f'description from {config.robot_description_file}'
    topic = node.resolve_topic_name(DESCRIPTION_TOPIC)
    if config.robot_description_timeout <= 0.0:
        return '', 'robot_description_timeout is 0: no description read'
    helper = rclpy.create_node(f'{node.get_name()}_description', context=node.context,
                               namespace=node.get_namespace(),
                               enable_rosout=False, start_parameter_services=False)
    got: list[str] = []
    executor = SingleThreadedExecutor(context=node.context)
    try:
        helper.create_subscription(String, topic, lambda msg: got.append(msg.data), _LATCHED)
        executor.add_node(helper)
        deadline = time.monotonic() + config.robot_description_timeout
        while not got and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=min(0.05, max(deadline - time.monotonic(), 0.0)))
    finally:
        executor.shutdown(timeout_sec=0.1)
        helper.destroy_node()
    if not got:
        return '', (f'no description on {topic} within {config.robot_description_timeout:g} s '
                    '(set robot_description_file, or start robot_state_publisher first)')
    return got[-1], f'description from {topic}'


def read_body(node: RosNode, config: NodeConfig, store: Store) -> LiveBody:
    """Return this node's body (module docstring); log it, and the store's unknown bodies."""
    log = node.get_logger()
    description, source = read_description(node, config)
    waited = not config.robot_description_file and config.robot_description_timeout > 0.0
    body = LiveBody(body_from(config, description, node.get_name()),
                    pending=waited and not description)
    said = f'this robot is {body} ({body.key}): {source}'
    if description:
        log.info(said)
    elif body.pending:
        log.warning(f'{said}; no description yet: until one arrives, no branch learned on a '
                    'known body replays here (what is learned meanwhile is filed under '
                    'this body of joint names and tools)')
    else:
        log.warning(f'{said}; the body is its joint names and tools only')
    if waited:
        follow(node, config, body)
    if unexpanded(config, description):
        log.warning(unexpanded(config, description))
    try:
        counts = store.bodies()
    except StoreError as err:
        log.warning(f'store: cannot count the bodies of its trajectories: {err}')
        return body
    for line in anywhere(counts):
        log.info(f'store: {line}')
    return body


_FOLLOWED: WeakKeyDictionary[RosNode, list[Any]] = WeakKeyDictionary()
"""Each node's [config, body] of its latest configure, which its one description
subscription (made by the first configure, kept while the node lives) reads. Not replaced
by a new subscription on a new configure: the node spins meanwhile, and rclpy 9.1.2's
executor dies when a subscription's event handler is destroyed while it builds its wait
set (InvalidHandle from ``add_to_wait_set``; a test's executor died so)."""


def follow(node: RosNode, config: NodeConfig, body: LiveBody) -> None:
    """
    Keep reading the description topic: one that arrives late or changes changes ``body``.

    The change is logged: an arrival at INFO, a change while running as a WARNING (the
    branches learned on the old body replay here only once declared compatible). The same
    description again (the latched message, a republish) changes nothing. A later
    configure's call retargets the node's one subscription.
    """
    followed = _FOLLOWED.get(node)
    if followed is not None:
        followed[:] = [config, body]
        return
    followed = _FOLLOWED[node] = [config, body]
    log = node.get_logger()

    def heard(msg: String) -> None:
        if not msg.data.strip():
            return
        config, body = followed
        new = body_from(config, msg.data, node.get_name())
        if new.digest == body.digest and not body.pending:
            return
        was, pending = str(body), body.pending
        body.become(new)
        if pending:
            log.info(f'robot description arrived: this robot is {new} ({new.key}), was {was} '
                     'without it')
        else:
            log.warning(f'robot description changed: this robot is now {new} ({new.key}), was '
                        f'{was}: branches learned on {was} replay here only once declared '
                        'compatible (muscle-mem bodies --compatible)')
    node.create_subscription(
        String, node.resolve_topic_name(DESCRIPTION_TOPIC), heard, _LATCHED)
