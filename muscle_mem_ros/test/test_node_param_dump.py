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
The node's parameters dump as ``ros2 param dump`` writes them and load back to the same node.

ros2cli is not installable here, so :func:`dump` does what ``ros2 param dump``
does: list the names (sorted) and read the values through the node's own
``list_parameters``/``get_parameters`` services (or, in-process, through
``Node.list_parameters``), split each name on '.' into nested maps, and write
``{node: {ros__parameters: ...}}`` as YAML. Like ros2cli, it fails when one
name is both a value and a prefix of another (``sensors`` and
``sensors.joints.topic``), which no params file can hold.
"""

from __future__ import annotations

from pathlib import Path
import time
from typing import Any

from muscle_mem_ros.ros.node.config import load_config, NODE_OPTIONS
from node_helpers import CacheProcess, Names, params, wait_until, write_params
import pytest
from rcl_interfaces.msg import ParameterType
from rcl_interfaces.srv import GetParameters, ListParameters
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
import yaml

PACKAGE = Path(__file__).resolve().parents[1]


def insert(tree: dict, name: str, value) -> None:
    """Place ``value`` under the dotted ``name`` (ros2cli's rule; fails on value-and-prefix)."""
    head, dot, rest = name.partition('.')
    if dot:
        if head not in tree:
            tree[head] = {}
        insert(tree[head], rest, value)  # TypeError when tree[head] is a value
    else:
        tree[name] = value


def plain(value):
    """Return the Python value ros2cli writes for a ParameterValue message."""
    kinds = {
        ParameterType.PARAMETER_BOOL: 'bool_value',
        ParameterType.PARAMETER_INTEGER: 'integer_value',
        ParameterType.PARAMETER_DOUBLE: 'double_value',
        ParameterType.PARAMETER_STRING: 'string_value',
        ParameterType.PARAMETER_BYTE_ARRAY: 'byte_array_value',
        ParameterType.PARAMETER_BOOL_ARRAY: 'bool_array_value',
        ParameterType.PARAMETER_INTEGER_ARRAY: 'integer_array_value',
        ParameterType.PARAMETER_DOUBLE_ARRAY: 'double_array_value',
        ParameterType.PARAMETER_STRING_ARRAY: 'string_array_value',
    }
    if value.type == ParameterType.PARAMETER_NOT_SET:
        return None
    out = getattr(value, kinds[value.type])
    return list(out) if value.type >= ParameterType.PARAMETER_BYTE_ARRAY else out


def dump(node_name: str, names: list[str], values: list) -> str:
    tree: dict = {}
    for name, value in sorted(zip(names, values, strict=True)):
        insert(tree, name, value)
    return yaml.dump({node_name: {'ros__parameters': tree}}, default_flow_style=False)


def ask(executor: SingleThreadedExecutor, client: Any, request: Any, timeout: float = 30.0) -> Any:
    """
    Call a service until it answers (bounded).

    A server that answers before it has matched the client's response reader (discovery
    runs on its own in each process; ``wait_for_service`` tells only that the client
    matched the server) sends the response to nobody. These requests only read, so the
    request is sent again after a second without an answer.
    """
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        future = client.call_async(request)
        executor.spin_until_future_complete(future, timeout_sec=min(1.0, left))
        if future.done():
            return future.result()
        client.remove_pending_request(future)
    raise AssertionError(f'{client.srv_name}: no answer in {timeout} s')


def dump_over_services(client: Node, node_name: str) -> str:
    """Dump the parameters of the running node ``node_name`` through its services."""
    executor = SingleThreadedExecutor(context=client.context)
    executor.add_node(client)
    lister = client.create_client(ListParameters, f'{node_name}/list_parameters')
    getter = client.create_client(GetParameters, f'{node_name}/get_parameters')
    assert lister.wait_for_service(timeout_sec=30.0)
    assert getter.wait_for_service(timeout_sec=30.0)
    names = sorted(ask(executor, lister, ListParameters.Request()).result.names)
    values = [plain(v) for v in ask(executor, getter, GetParameters.Request(names=names)).values]
    executor.remove_node(client)
    executor.shutdown()
    client.destroy_client(lister)
    client.destroy_client(getter)
    return dump(node_name, names, values)


def dump_in_process(node: Node) -> str:
    names = sorted(node.list_parameters([], ListParameters.Request.DEPTH_RECURSIVE).names)
    values = [plain(node.get_parameter(n).get_parameter_value()) for n in names]
    return dump(node.get_fully_qualified_name(), names, values)


def test_insert_fails_like_ros2cli_on_a_value_that_is_also_a_prefix():
    with pytest.raises(TypeError):
        dump('/n', ['sensors', 'sensors.joints.topic'], [['joints'], '/joint_states'])


def test_dump_of_the_running_node_starts_the_same_node(tmp_path):
    names = Names.unique()
    values = params(names, store=tmp_path / 'cache.db')
    first = tmp_path / 'first.yaml'
    write_params(first, names.node, values)
    context = rclpy.Context()
    rclpy.init(context=context)
    client = Node(f'{names.prefix}_dumper', context=context)
    dumps = []
    try:
        for index, params_file in enumerate([first, tmp_path / 'dumped.yaml']):
            cache = CacheProcess(names=names, params_file=params_file,
                                 log=tmp_path / f'cache_{index}.log')
            try:
                assert wait_until(lambda c=cache: 'behavior cache ready' in c.output()
                                  or not c.alive(), 30.0), cache.output()
                assert cache.alive(), cache.output()
                dumps.append(dump_over_services(client, f'/{names.node}'))
            finally:
                assert cache.stop() == 0
            (tmp_path / 'dumped.yaml').write_text(dumps[-1])
    finally:
        client.destroy_node()
        rclpy.try_shutdown(context=context)
    assert dumps[0] == dumps[1]
    tree = yaml.safe_load(dumps[0])[f'/{names.node}']['ros__parameters']
    assert tree['sensors']['joints']['topic'] == names.joints
    assert tree['actions']['arm']['server'] == names.arm
    assert tree['services']['gripper']['type'] == 'std_srvs/srv/SetBool'
    assert tree['robot_id'] == ''  # the default, not this node's name


def test_a_node_started_from_a_dump_under_another_name_records_as_itself(tmp_path):
    path = tmp_path / 'first.yaml'
    path.write_text(yaml.safe_dump({'muscle_mem': {'ros__parameters': {
        'store_path': ':memory:',
        'sensors': {'joints': {'topic': '/joint_states', 'type': 'sensor_msgs/msg/JointState',
                               'fields': ['position'], 'tolerance': [0.01]}}}}}))
    _config, dumped = load_and_dump(path)
    again = tmp_path / 'dumped.yaml'
    again.write_text(dumped.replace('/muscle_mem:', 'other_arm:', 1))
    context = rclpy.Context()
    rclpy.init(context=context, args=['--ros-args', '--params-file', str(again)])
    try:
        node = Node('other_arm', context=context, **NODE_OPTIONS)
        try:
            assert load_config(node).robot_id.startswith('/other_arm@')
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def config_view(config) -> dict:
    """Return the comparable content of a NodeConfig (classes and compiled paths by name)."""
    return {
        'scalars': (config.store_path, config.agent_action, config.cache_mode,
                    config.step_timeout, config.post_check_timeout, config.agent_timeout,
                    config.allow_unchecked_replay),
        'sensors': {s.name: (s.topic, s.type_name, [e.path for e in s.extractors], s.tolerance,
                             s.mode, s.max_age, s.joints) for s in config.sensors},
        'tools': {(t.kind, t.name): (t.server, t.proxy, t.type_name) for t in config.tools},
    }


def load_and_dump(path: Path, node_name: str = 'muscle_mem'):
    context = rclpy.Context()
    rclpy.init(context=context, args=['--ros-args', '--params-file', str(path)])
    try:
        node = Node(node_name, context=context, **NODE_OPTIONS)
        try:
            return config_view(load_config(node)), dump_in_process(node)
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def runnable_here(path: Path, tmp_path: Path) -> Path:
    """Return ``path``, or a copy with interface types that are not installed here swapped."""
    text = path.read_text()
    try:
        import control_msgs  # noqa: F401
    except ImportError:
        text = text.replace('control_msgs/action/FollowJointTrajectory',
                            'muscle_mem_demo_interfaces/action/FollowJointTrajectory')
        text = text.replace('control_msgs/action/GripperCommand', 'test_msgs/action/Fibonacci')
    copy = tmp_path / path.name
    copy.write_text(text)
    return copy


FLAT = (
    'muscle_mem:\n'
    '  ros__parameters:\n'
    '    sensors.scan.topic: /scan\n'
    '    sensors.scan.type: sensor_msgs/LaserScan\n'
    '    sensors.scan.fields: [ranges]\n'
    '    sensors.scan.tolerance: 0.05\n'
    '    sensors.scan.mode: rms\n'
    '    sensors.joints: {topic: /js, type: sensor_msgs/msg/JointState, fields: [position],\n'
    '                     joints: [b, a], tolerance: [0.1, 0.2]}\n'
    '    actions.fib:\n'
    '      server: fibonacci\n'
    '      type: test_msgs/Fibonacci\n'
    '    services.gripper: {server: /gripper/set, type: std_srvs/srv/SetBool}\n'
)


@pytest.mark.parametrize('source', [
    *sorted(p.name for p in (PACKAGE / 'config').glob('*.yaml')), 'flat form',
])
def test_config_file_loads_dumps_and_loads_back_the_same(tmp_path, source):
    if source == 'flat form':
        path = tmp_path / 'flat.yaml'
        path.write_text(FLAT)
    else:
        path = runnable_here(PACKAGE / 'config' / source, tmp_path)
    config, dumped = load_and_dump(path)
    assert config['sensors'] and config['tools']
    again = tmp_path / 'dumped.yaml'
    again.write_text(dumped.replace('/muscle_mem:', 'muscle_mem:', 1))
    config_again, dumped_again = load_and_dump(again)
    assert config_again == config
    assert dumped_again == dumped
