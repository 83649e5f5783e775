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
The introspection tap on its own, with real nodes: the cache's own calls are never steps.

A tap records every client's calls of its server while a recording is active,
except the node's own: a replay sends through the tool's client, the server
publishes events for those calls too, and a late one must not become a step of
the agent's recording. The filter goes by the client GID in the events.
"""

from __future__ import annotations

import threading
import uuid

from muscle_mem_ros.records import ToolKind
from muscle_mem_ros.ros.capture.recorder import Recorder
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.capture.serviceproxy import ServiceProxy
from muscle_mem_ros.ros.capture.tap import ServiceTap
from muscle_mem_ros.ros.node.config import load_config, NODE_OPTIONS
from muscle_mem_ros.ros.node.nodeconfig import RecordFrom, ToolConfig
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
from muscle_mem_ros.ros.rclfix.sync import CancelToken
from muscle_mem_ros.store import open_store
from node_helpers import wait_until, write_params
import pytest
import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_system_default
from rclpy.serialization import deserialize_message, serialize_message
from rclpy.service_introspection import ServiceIntrospectionState
from std_srvs.srv import SetBool


@pytest.fixture
def rig():
    """Return a server with introspection, an outside client, and the cache's side of a tool."""
    tag = uuid.uuid4().hex[:8]
    server_name = f'/t{tag}/gripper/set'
    context = rclpy.Context()
    rclpy.init(context=context)
    robot = Node(f'robot_{tag}', context=context)
    answered: list[bool] = []

    def serve(request, response):
        answered.append(request.data)
        response.success = True
        return response

    service = robot.create_service(SetBool, server_name, serve)
    service.configure_introspection(robot.get_clock(), qos_profile_system_default,
                                    ServiceIntrospectionState.CONTENTS)
    outsider = Node(f'agent_{tag}', context=context)
    client = outsider.create_client(SetBool, server_name)
    cache = Node(f'_mm_{tag}_proxies', context=context)
    tool = ToolConfig(name='gripper', kind=ToolKind.SERVICE, server=server_name, proxy='',
                      type_name='std_srvs/srv/SetBool', interface=SetBool,
                      record_from=RecordFrom.INTROSPECTION)
    store = open_store(':memory:')
    recorder = Recorder(store=store)
    hub = SensorHub(node=cache, sensors=[])
    proxy = ServiceProxy(node=cache, tool=tool, hub=hub, recorder=recorder,
                         callback_group=ReentrantCallbackGroup(), post_timeout=1.0)
    tap = ServiceTap(node=cache, proxy=proxy, hub=hub, recorder=recorder, post_timeout=1.0,
                     logger=cache.get_logger())
    recorder.add_settle(tap.settle)
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    for node in (robot, outsider, cache):
        executor.add_node(node)
    spinner = Spinner(executor)
    assert client.wait_for_service(timeout_sec=15.0)
    assert wait_until(lambda: cache.count_publishers(f'{server_name}/_service_event') == 1, 15.0)
    yield {'client': client, 'proxy': proxy, 'tap': tap, 'recorder': recorder, 'store': store,
           'answered': answered, 'executor': executor, 'cache': cache}
    spinner.stop()
    hub.close()
    for node in (robot, outsider, cache):
        node.destroy_node()
    rclpy.try_shutdown(context=context)


def outside_call(rig, data: bool) -> None:
    done = threading.Event()
    future = rig['client'].call_async(SetBool.Request(data=data))
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(15.0) and future.result().success


def test_own_replayed_calls_are_not_recorded(rig):
    recorder, tap = rig['recorder'], rig['tap']
    outside_call(rig, False)  # matches every endpoint before the recording starts
    session = recorder.start(task='t', params_json='{}', parent=None, manual=True)
    own = rig['proxy'].call(bytes(serialize_message(SetBool.Request(data=True))),
                            timeout=10.0, cancel=CancelToken())
    assert own.status.value == 'succeeded', own.detail
    outside_call(rig, False)
    # The server publishes the events of both calls in order: once the outside call is a
    # step, the events of the cache's own call before it have been seen too.
    assert wait_until(lambda: session.steps >= 1, 15.0)
    ended, info = recorder.finish(save=True)
    assert rig['answered'][-2:] == [True, False]
    assert tap.own_calls == 1
    assert ended.steps == 1
    (node,) = rig['store'].path(info.id)
    assert deserialize_message(node.step.payload, SetBool.Request).data is False


def test_a_call_sent_before_the_recording_started_is_not_part_of_it(rig):
    """Its events reach the tap only after the recording started (the tap's node was busy)."""
    recorder, executor, cache = rig['recorder'], rig['executor'], rig['cache']
    outside_call(rig, False)
    executor.remove_node(cache)  # the tap takes nothing: the next call's events wait for it
    outside_call(rig, True)
    session = recorder.start(task='t', params_json='{}', parent=None, manual=True)
    executor.add_node(cache)
    outside_call(rig, False)
    assert wait_until(lambda: session.steps >= 1, 15.0)
    ended, info = recorder.finish(save=True)
    assert ended.steps == 1
    (node,) = rig['store'].path(info.id)
    assert deserialize_message(node.step.payload, SetBool.Request).data is False


def test_calls_outside_a_recording_are_ignored(rig):
    recorder = rig['recorder']
    outside_call(rig, True)
    session = recorder.start(task='t', params_json='{}', parent=None, manual=True)
    outside_call(rig, False)
    assert wait_until(lambda: session.steps >= 1, 15.0)
    ended, _info = recorder.finish(save=True)
    assert ended.steps == 1


def test_config_of_introspection_tools(tmp_path):
    """An introspection tool serves no proxy name, so two of them never clash; case is free."""
    values = {
        'store_path': ':memory:',
        'actions': {'arm': {'server': '/arm', 'type': 'test_msgs/action/Fibonacci',
                            'record_from': 'introspection'}},
        'services': {'grip': {'server': '/grip', 'type': 'std_srvs/srv/SetBool',
                              'record_from': 'Introspection'},
                     'lamp': {'server': '/lamp', 'type': 'std_srvs/srv/SetBool'}},
    }
    path = write_params(tmp_path / 'p.yaml', 'muscle_mem', values)
    context = rclpy.Context()
    rclpy.init(context=context, args=['--ros-args', '--params-file', str(path)])
    try:
        node = Node('muscle_mem', context=context, **NODE_OPTIONS)
        config = load_config(node)
        described = node.describe_parameter('services.grip.record_from')
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
    tools = {t.name: (t.record_from, t.proxy) for t in config.tools}
    assert tools == {'arm': (RecordFrom.INTROSPECTION, ''), 'grip': (RecordFrom.INTROSPECTION, ''),
                     'lamp': (RecordFrom.PROXY, '/muscle_mem/lamp')}
    assert described.read_only and 'introspection' in described.description
