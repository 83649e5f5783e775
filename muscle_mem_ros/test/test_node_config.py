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
Node configuration: the shipped example loads; every bad parameter is named at startup.

Most cases read a params file into a plain rclpy node in this process (fast);
a few start the real executable in a subprocess to prove the exit code and the
message on stderr.
"""

from __future__ import annotations

from pathlib import Path

from muscle_mem_ros.cli.paramsfile import read_binding_settings
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.records import CompareMode, ToolKind
from muscle_mem_ros.ros.node.config import load_config, NODE_OPTIONS
from muscle_mem_ros.ros.node.nodeconfig import CacheMode, DEFAULT_STORE_PATH
from node_helpers import CacheProcess, Names, params, run_cache_to_exit, wait_until, write_params
import pytest
import rclpy
from rclpy.node import Node

PACKAGE = Path(__file__).resolve().parents[1]


def load_file(path: Path, node_name: str = 'muscle_mem'):
    context = rclpy.Context()
    rclpy.init(context=context, args=['--ros-args', '--params-file', str(path)])
    try:
        node = Node(node_name, context=context, **NODE_OPTIONS)
        try:
            return load_config(node)
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


BINDING = {'bindings.b.tool': 'arm', 'bindings.b.field': 'trajectory.points[0]',
           'bindings.b.source': 'sensor:object', 'bindings.b.max_shift': 0.05}


def load_values(tmp_path: Path, values: dict):
    return load_file(write_params(tmp_path / 'p.yaml', 'muscle_mem', values))


def test_shipped_example_config_is_valid():
    config = load_file(PACKAGE / 'config' / 'behavior_cache.yaml')
    assert config.cache_mode is CacheMode.LEARN
    assert config.agent_action == '/demo_agent/execute_task'
    assert not config.allow_unchecked_replay
    assert [s.name for s in config.sensors] == ['joints', 'object']
    joints, obj = config.sensors
    assert joints.type_name == 'sensor_msgs/msg/JointState'
    assert joints.size is None  # variable length: checked at the first message
    assert obj.size == 3
    assert obj.mode is CompareMode.NORM
    (arm,) = config.actions
    assert arm.kind is ToolKind.ACTION
    assert arm.server == '/arm/follow_joint_trajectory'
    assert arm.proxy == '/muscle_mem/arm/follow_joint_trajectory'
    (gripper,) = config.services
    assert gripper.type_name == 'std_srvs/srv/SetBool'


def test_defaults_and_flat_form(tmp_path):
    path = tmp_path / 'p.yaml'
    path.write_text(
        'muscle_mem:\n'
        '  ros__parameters:\n'
        '    sensors.scan.topic: /scan\n'
        '    sensors.scan.type: sensor_msgs/LaserScan\n'
        '    sensors.scan.fields: [ranges]\n'
        '    sensors.scan.tolerance: 0.05\n'
        '    sensors.scan.mode: rms\n'
        '    actions.fib:\n'
        '      server: fibonacci\n'
        '      type: test_msgs/Fibonacci\n'
    )
    config = load_file(path)
    assert config.store_path.endswith(DEFAULT_STORE_PATH.replace('~/', ''))
    assert config.cache_mode is CacheMode.LEARN
    assert config.agent_action == ''
    assert config.step_timeout == 30.0
    assert config.abandoned_recording_retention == 7 * 24 * 3600.0
    (scan,) = config.sensors
    assert scan.type_name == 'sensor_msgs/msg/LaserScan'
    assert scan.tolerance == (0.05,)
    assert scan.max_age == 1.0
    (fib,) = config.actions
    assert fib.type_name == 'test_msgs/action/Fibonacci'
    assert fib.server == '/fibonacci'
    assert fib.proxy == '/muscle_mem/fibonacci'
    assert fib.stop is None and config.stop_timeout == 5.0 and config.rest_window == 0.25


def test_an_actions_stop_is_read_as_a_goal_or_a_service(tmp_path):
    names = Names.unique()
    config = load_values(tmp_path, params(names, store=tmp_path / 'c.db', **{
        'actions.fib.stop_goal': '{"order": 0}', 'stop_timeout': 1.5, 'rest_window': 0.5}))
    fib = next(t for t in config.actions if t.name == 'fib')
    assert fib.stop is not None and fib.stop.goal.order == 0 and not fib.stop.service
    assert config.stop_rule.timeout == 1.5 and config.stop_rule.window == 0.5
    config = load_values(tmp_path, params(names, store=tmp_path / 'c.db', **{
        'actions.fib.stop_service': 'estop'}))
    fib = next(t for t in config.actions if t.name == 'fib')
    assert fib.stop is not None and fib.stop.service == '/estop' and fib.stop.goal is None
    assert fib.stop.service_type.__name__ == 'Trigger'


def test_a_joint_trajectory_tool_is_held_where_it_is_unless_told_otherwise(tmp_path):
    """Issue 43 item 6: the stop a real joint_trajectory_controller executes, by default."""
    names = Names.unique()
    config = load_values(tmp_path, params(names, store=tmp_path / 'c.db'))
    arm = next(t for t in config.actions if t.name == 'arm')
    assert arm.stop is not None and arm.stop.hold and arm.stop.goal is None
    assert 'one-point trajectory' in arm.stop.text
    fib = next(t for t in config.actions if t.name == 'fib')
    assert fib.stop is None  # no stop is known for a Fibonacci: the cancel only
    config = load_values(tmp_path, params(names, store=tmp_path / 'c.db', **{
        'actions.arm.stop_service': 'estop'}))
    arm = next(t for t in config.actions if t.name == 'arm')
    assert arm.stop is not None and not arm.stop.hold and arm.stop.service == '/estop'


@pytest.mark.parametrize('overrides, parameter, words', [
    ({'actions.arm.stop_goal': '{}'}, 'actions.arm.stop_goal', 'rejects a trajectory with no'),
    ({'actions.arm.stop_goal': '{"trajectory": {"joint_names": ["j1"]}}'},
     'actions.arm.stop_goal', 'no joint_names or no points'),
    ({'sensors.joints': None}, 'actions.arm', 'JointState sensor'),
])
def test_a_joint_trajectory_stop_a_controller_refuses_is_refused_at_start(
        tmp_path, overrides, parameter, words):
    names = Names.unique()
    values = params(names, store=tmp_path / 'c.db', **overrides)
    with pytest.raises(ConfigError) as info:
        load_values(tmp_path, values)
    message = str(info.value)
    assert message.startswith(f'{parameter}:'), message
    assert words in message


def test_per_element_tolerance_of_fixed_size_fields(tmp_path):
    names = Names.unique()
    config = load_values(tmp_path, params(
        names, store=tmp_path / 'c.db', **{'sensors.object.tolerance': [0.01, 0.02, 0.03],
                                           'sensors.object.mode': 'abs'}))
    obj = next(s for s in config.sensors if s.name == 'object')
    assert obj.tolerance == (0.01, 0.02, 0.03)


@pytest.mark.parametrize('overrides, parameter, words', [
    ({'sensors.object.type': 'geometry_msgs/msg/NoSuchPose'}, 'sensors.object.type',
     'NoSuchPose'),
    ({'sensors.object.type': 'nonexistent_msgs/msg/Thing'}, 'sensors.object.type',
     'nonexistent_msgs'),
    ({'sensors.object.type': 'std_srvs/srv/SetBool'}, 'sensors.object.type', "'srv' type"),
    ({'sensors.object.fields': ['pose.positon']}, 'sensors.object.fields', 'positon'),
    ({'sensors.object.fields': ['header.frame_id.x']}, 'sensors.object.fields', 'frame_id'),
    ({'sensors.object.fields': None}, 'sensors.object.fields', 'required'),
    ({'sensors.joints.tolerance': [-0.1]}, 'sensors.joints.tolerance', '>= 0'),
    ({'sensors.joints.tolerance': None}, 'sensors.joints.tolerance', 'required'),
    ({'sensors.object.tolerance': [0.1, 0.1], 'sensors.object.mode': 'abs'},
     'sensors.object.tolerance', 'give 3 elements'),
    ({'sensors.object.tolerance': [0.1, 0.1, 0.1]}, 'sensors.object.tolerance',
     'norm takes one'),
    ({'sensors.object.mode': 'fuzzy'}, 'sensors.object.mode', 'abs|norm'),
    ({'sensors.object.max_age': -1.0}, 'sensors.object.max_age', '> 0'),
    ({'sensors.object.topic': None}, 'sensors.object.topic', 'required'),
    ({'sensors.object.tolerence': [0.1]}, 'sensors.object.tolerence', 'unknown parameter'),
    ({'actions.arm.type': 'muscle_mem_interfaces/action/Nope'}, 'actions.arm.type', 'Nope'),
    ({'actions.arm.type': 'sensor_msgs/msg/JointState'}, 'actions.arm.type', "'msg' type"),
    ({'actions.arm.server': None}, 'actions.arm.server', 'required'),
    ({'actions.fib.proxy': '/x/fibonacci', 'services.gripper.proxy': '/x/fibonacci'},
     'services.gripper.proxy', 'also the proxy'),
    ({'services.gripper.type': 'std_srvs/srv/Nope'}, 'services.gripper.type', 'Nope'),
    ({'cache_mode': 'sometimes'}, 'cache_mode', 'learn|replay_only'),
    ({'step_timeout': 0.0}, 'step_timeout', '> 0'),
    ({'post_check_timeout': 'soon'}, 'post_check_timeout', 'number'),
    ({'allow_unchecked_replay': 'yes'}, 'allow_unchecked_replay', 'true or false'),
    ({'abandoned_recording_retention': -1.0}, 'abandoned_recording_retention', '>= 0'),
    ({'infer_bindings': 'maybe'}, 'infer_bindings', 'true or false'),
    ({'binding_max_shift': 0.0}, 'binding_max_shift', '> 0'),
    ({**BINDING, 'bindings.b.tool': 'wrist'}, 'bindings.b.tool', 'not a configured'),
    ({**BINDING, 'bindings.b.field': ''}, 'bindings.b.field', 'required'),
    ({**BINDING, 'bindings.b.source': 'object[0]'}, 'bindings.b.source', 'param:<key>'),
    ({**BINDING, 'bindings.b.source': 'sensor:lidar[0]'}, 'bindings.b.source',
     'not configured'),
    ({**BINDING, 'bindings.b.max_shift': -0.1}, 'bindings.b.max_shift', '> 0'),
    ({**BINDING, 'bindings.b.max_offset': 0.0}, 'bindings.b.max_offset', '> 0'),
    ({**BINDING, 'bindings.b.offset': 0.1}, 'bindings.b.offset', 'unknown parameter'),
    ({'actions.fib.success_field': 'nope', 'actions.fib.success_when': 'nonempty'},
     'actions.fib.success_field', "has no field 'nope'"),
    ({'actions.fib.success_field': 'sequence', 'actions.fib.success_when': 'sometimes'},
     'actions.fib.success_when', 'nonempty|empty'),
    ({'services.gripper.success_field': 'success'}, 'services.gripper.success_when', 'required'),
    ({'sensors.joints.bind': 'sometimes'}, 'sensors.joints.bind', 'auto|never'),
    ({'replay_requires': 'shadow:zero'}, 'replay_requires', 'shadow:N'),
    ({'replay_requires': 'trust me'}, 'replay_requires', 'approval'),
    ({'actions.fib.agreement': -0.1}, 'actions.fib.agreement', '>= 0'),
    ({'watch': 'often'}, 'watch', 'true or false'),
    ({'watch_rate': 0.0}, 'watch_rate', '> 0'),
    ({'watch_rate': 5000.0}, 'watch_rate', '1000'),
    ({'watch_tolerance_scale': 0.0}, 'watch_tolerance_scale', '> 0'),
    ({'sensors.joints.watch': 'always'}, 'sensors.joints.watch', 'auto|never'),
    ({'stop_timeout': 0.0}, 'stop_timeout', '> 0'),
    ({'rest_window': -1.0}, 'rest_window', '> 0'),
    ({'actions.fib.stop_goal': '{"order": "ten"}'}, 'actions.fib.stop_goal', 'order'),
    ({'actions.fib.stop_goal': '[1]'}, 'actions.fib.stop_goal', 'JSON object'),
    ({'actions.fib.stop_goal': '{nope'}, 'actions.fib.stop_goal', 'Expecting'),
    ({'actions.fib.stop_goal': '{}', 'actions.fib.stop_service': '/estop'},
     'actions.fib.stop_service', 'not both'),
    ({'actions.fib.stop_service': '/estop', 'actions.fib.stop_service_type': 'std_srvs/Nope'},
     'actions.fib.stop_service_type', 'Nope'),
    ({'services.gripper.stop_goal': '{}'}, 'services.gripper.stop_goal', 'unknown parameter'),
])
def test_bad_parameter_is_named(tmp_path, overrides, parameter, words):
    names = Names.unique()
    values = params(names, store=tmp_path / 'c.db', **overrides)
    with pytest.raises(ConfigError) as info:
        load_values(tmp_path, values)
    message = str(info.value)
    assert message.startswith(f'{parameter}:'), message
    assert words in message


@pytest.mark.parametrize('overrides', [
    {**BINDING, 'bindings.b.tool': 'wrist'},
    {**BINDING, 'bindings.b.field': ''},
    {**BINDING, 'bindings.b.source': 'object[0]'},
    {**BINDING, 'bindings.b.source': 'sensor:lidar[0]'},
    {**BINDING, 'bindings.b.max_shift': -0.1},
    {**BINDING, 'bindings.b.max_offset': -1.0},
    {'binding_max_shift': 0.0},
    {'infer_bindings': 'maybe'},
    {'sensors.joints.tolerance': [-0.1]},
    {'sensors.joints.mode': 'roughly'},
], ids=lambda o: next(iter(o)) if len(o) == 1 else next(reversed(o.items()))[1])
def test_the_command_refuses_what_the_node_refuses_with_the_same_message(tmp_path, overrides):
    """One settings schema: ``muscle-mem --params`` and the node give the same error."""
    names = Names.unique()
    values = params(names, store=tmp_path / 'c.db', **overrides)
    path = write_params(tmp_path / 'p.yaml', 'muscle_mem', values)
    with pytest.raises(ConfigError) as node_error:
        load_file(path)
    with pytest.raises(ConfigError) as cli_error:
        read_binding_settings(path)
    assert str(cli_error.value) == f'--params {path}: {node_error.value}'


def test_the_command_reads_the_bindings_the_node_reads(tmp_path):
    names = Names.unique()
    path = write_params(tmp_path / 'p.yaml', 'muscle_mem', params(
        names, store=tmp_path / 'c.db', binding_max_shift=0.2, **BINDING))
    config = load_file(path)
    settings = read_binding_settings(path)
    assert settings.declared == config.bindings
    assert settings.infer == config.infer_bindings
    assert settings.max_shift == config.binding_max_shift
    assert {s.name: (s.tolerance, s.mode) for s in settings.sensors} == {
        s.name: (s.tolerance, s.mode) for s in config.sensors}


def test_declared_bindings_are_read_with_the_tools_server_name(tmp_path):
    names = Names.unique()
    config = load_values(tmp_path, params(names, store=tmp_path / 'c.db', **BINDING))
    (binding,) = config.bindings
    assert binding.tool.endswith(names.arm) and binding.field == 'trajectory.points[0]'
    assert (binding.source, binding.max_shift) == ('sensor:object', 0.05)
    assert config.infer_bindings and config.binding_max_shift == 0.1


def test_agent_must_not_be_the_cache_itself(tmp_path):
    names = Names.unique()
    values = params(names, store=tmp_path / 'c.db', agent_action='~/execute_task')
    with pytest.raises(ConfigError, match="agent_action: .* this node's own ExecuteTask"):
        load_values(tmp_path, values)


def test_proxy_equal_to_server_is_refused(tmp_path):
    names = Names.unique()
    values = params(names, store=tmp_path / 'c.db',
                    **{'actions.arm.proxy': names.arm})
    with pytest.raises(ConfigError, match='actions.arm.proxy: must differ'):
        load_values(tmp_path, values)


@pytest.mark.parametrize('group, names, key', [
    ('sensors', '[a]', 'topic'), ('actions', '[fib]', 'server'), ('services', 'gripper', 'server'),
])
def test_the_old_list_form_is_refused_showing_the_map_form(tmp_path, group, names, key):
    path = tmp_path / 'p.yaml'
    path.write_text(
        'muscle_mem:\n'
        '  ros__parameters:\n'
        f'    {group}: {names}\n'
        '    sensors.a: {topic: /a, type: std_msgs/msg/Float64, fields: [data], tolerance: 1.0}\n'
    )
    with pytest.raises(ConfigError) as info:
        load_file(path)
    message = str(info.value)
    assert message.startswith(f'{group}: must be a map'), message
    assert f'{group}: {{<name>: {{{key}: ...}}}}' in message and 'no longer read' in message


@pytest.mark.parametrize('overrides, parameter', [
    ({'sensors.object.type': 'geometry_msgs/msg/NoSuchPose'}, 'sensors.object.type'),
    ({'sensors.joints.fields': ['positions']}, 'sensors.joints.fields'),
    ({'sensors.joints.tolerance': [-1.0]}, 'sensors.joints.tolerance'),
    ({'sensors.object.tolerance': [0.1, 0.1], 'sensors.object.mode': 'abs'},
     'sensors.object.tolerance'),
])
def test_executable_exits_with_the_parameter_named(tmp_path, overrides, parameter):
    names = Names.unique()
    values = params(names, store=tmp_path / 'c.db', **overrides)
    done = run_cache_to_exit(names=names, values=values, tmp=tmp_path)
    assert done.returncode == 1, done.stderr
    assert f'bad configuration: {parameter}:' in done.stderr
    assert not (tmp_path / 'c.db').exists()


def test_unreadable_store_is_a_startup_error(tmp_path):
    names = Names.unique()
    store = tmp_path / 'not_a_store.db'
    store.write_bytes(b'this is not an sqlite file at all' * 10)
    before = store.read_bytes()
    done = run_cache_to_exit(names=names, values=params(names, store=store), tmp=tmp_path)
    assert done.returncode == 1, done.stderr
    assert 'bad configuration: store_path:' in done.stderr
    assert store.read_bytes() == before


@pytest.mark.parametrize('overrides, warning', [
    ({'actions': None, 'services': None}, 'no actions or services configured'),
    # the arm goes too: its stop, the hold, reads a JointState sensor (issue 43 item 6)
    ({'sensors': None, 'actions.arm': None}, 'no sensors configured'),
])
def test_a_cache_that_cannot_do_anything_says_so(tmp_path, overrides, warning):
    names = Names.unique()
    values = params(names, store=tmp_path / 'cache.db', **overrides)
    cache = CacheProcess(names=names, log=tmp_path / 'cache.log',
                         params_file=write_params(tmp_path / 'p.yaml', names.node, values))
    try:
        assert wait_until(lambda: 'behavior cache ready' in cache.output(), timeout=30.0), \
            cache.output()
        assert wait_until(lambda: warning in cache.output(), timeout=5.0), cache.output()
    finally:
        assert cache.stop() == 0


@pytest.mark.parametrize('parameter, type_name', [
    ('sensors.object.type', 'this/msg/X'),
    ('sensors.object.type', '.evil/msg/X'),
    ('sensors.object.type', 'os/msg/Path'),
    ('services.gripper.type', 'std_srvs/srv/__class__'),
    ('actions.arm.type', 'rclpy/action/ActionServer'),
    ('actions.arm.type', 'rclpy/action/Goal'),
    ('sensors.object.type', 'geometry_msgs/srv/Pose'),
])
def test_a_type_that_is_not_an_interface_exits_1_without_importing_it(
        tmp_path, parameter, type_name):
    names = Names.unique()
    values = params(names, store=tmp_path / 'c.db', **{parameter: type_name})
    done = run_cache_to_exit(names=names, values=values, tmp=tmp_path)
    assert done.returncode == 1, done.stderr
    assert f'bad configuration: {parameter}:' in done.stderr
    assert 'The Zen of Python' not in done.stdout + done.stderr


@pytest.mark.parametrize('overrides, parameter, words', [
    ({'agent_acton': '/agent/execute_task'}, 'agent_acton', 'did you mean agent_action?'),
    ({'step_timout': 5.0}, 'step_timout', 'did you mean step_timeout?'),
    ({'sensors.object.tolerence': [0.1]}, 'sensors.object.tolerence',
     'did you mean tolerance?'),
    ({'actions.arm.sever': '/x'}, 'actions.arm.sever', 'did you mean server?'),
    ({'sensorz': {'a': {'topic': '/a'}}}, 'sensorz.a.topic', 'did you mean sensors?'),
    ({'zzz': 1}, 'zzz', 'known: store_path'),
    ({'step_timeout': {'x': 1.0}}, 'step_timeout.x', "'step_timeout' is a value"),
    ({'sensors.object': '/x'}, 'sensors.object', 'must be a map'),
])
def test_unknown_parameter_at_any_level_exits_1_with_a_suggestion(
        tmp_path, overrides, parameter, words):
    names = Names.unique()
    values = params(names, store=tmp_path / 'c.db', **overrides)
    done = run_cache_to_exit(names=names, values=values, tmp=tmp_path)
    assert done.returncode == 1, done.stderr
    assert f'bad configuration: {parameter}: unknown parameter' in done.stderr or \
        f'bad configuration: {parameter}: must be a map' in done.stderr, done.stderr
    assert words in done.stderr
    assert not (tmp_path / 'c.db').exists()


def test_parameters_that_ros_itself_reads_are_accepted(tmp_path):
    names = Names.unique()
    values = params(names, store=tmp_path / 'cache.db', use_sim_time=False,
                    start_type_description_service=True,
                    qos_overrides={'/parameter_events': {'publisher': {'depth': 1000}}})
    cache = CacheProcess(names=names, log=tmp_path / 'cache.log',
                         params_file=write_params(tmp_path / 'p.yaml', names.node, values))
    try:
        assert wait_until(lambda: 'behavior cache ready' in cache.output()
                          or not cache.alive(), timeout=30.0), cache.output()
        assert cache.alive(), cache.output()
    finally:
        assert cache.stop() == 0


def test_the_old_list_form_stops_the_node_at_startup(tmp_path):
    names = Names.unique()
    values = params(names, store=tmp_path / 'c.db')
    values.update({f'sensors.{n}': keys for n, keys in values.pop('sensors').items()})
    values['sensors'] = ['joints', 'object']  # the list beside the keys, as nav2 writes it
    done = run_cache_to_exit(names=names, values=values, tmp=tmp_path)
    assert done.returncode == 1, done.stderr
    assert 'bad configuration: sensors: must be a map' in done.stderr, done.stderr
    assert 'sensors: {<name>: {topic: ...}}' in done.stderr
    assert 'the list form (sensors: [a, b]) is no longer read' in done.stderr
    assert not (tmp_path / 'c.db').exists()


def test_a_declared_binding_reads_max_offset_apart_from_max_shift(tmp_path):
    names = Names.unique()
    (plain,) = load_values(tmp_path, params(names, store=tmp_path / 'c.db', **BINDING)).bindings
    assert plain.max_offset == plain.max_shift == 0.05  # today's rule when not given
    (standoff,) = load_values(tmp_path, params(
        names, store=tmp_path / 'c.db', **BINDING, **{'bindings.b.max_offset': 0.5})).bindings
    assert (standoff.max_shift, standoff.max_offset) == (0.05, 0.5)


def test_a_sensor_says_whether_inference_may_bind_to_it(tmp_path):
    names = Names.unique()
    config = load_values(tmp_path, params(names, store=tmp_path / 'c.db',
                                          **{'sensors.joints.bind': 'never'}))
    assert {s.name: s.spec.bind for s in config.sensors} == {'joints': 'never', 'object': None}


def test_what_is_watched_follows_the_switches(tmp_path):
    names = Names.unique()
    config = load_values(tmp_path, params(names, store=tmp_path / 'c.db'))
    assert config.watch and config.watched == {'joints', 'object'}
    assert (config.watch_rate, config.watch_tolerance_scale) == (40.0, 1.0)
    config = load_values(tmp_path, params(names, store=tmp_path / 'c.db', **{
        'sensors.joints.watch': 'never', 'watch_rate': 25.0, 'watch_tolerance_scale': 2.0}))
    assert config.watched == {'object'}
    assert (config.watch_rate, config.watch_tolerance_scale) == (25.0, 2.0)
    config = load_values(tmp_path, params(names, store=tmp_path / 'c.db', watch=False))
    assert config.watched == frozenset()


def test_a_number_described_above_0_has_a_range_that_refuses_0():
    """``(> 0)`` in a description: the descriptor's range refuses 0 too, as the reader does."""
    from rcl_interfaces.msg import ParameterDescriptor
    from rclpy.parameter import Parameter
    context = rclpy.Context()
    rclpy.init(context=context, args=[
        '--ros-args', '--params-file', str(PACKAGE / 'config' / 'behavior_cache.yaml')])
    try:
        node = Node('muscle_mem', context=context, **NODE_OPTIONS)
        probe = Node('range_probe', context=context)
        try:
            load_config(node)
            names = node.list_parameters([], 0).names
            described = {n: node.describe_parameter(n) for n in names}
            above_0 = sorted(n for n, d in described.items() if '(> 0)' in d.description)
            assert 'step_timeout' in above_0 and 'post_check_timeout' in above_0, above_0
            for name in above_0:
                (span,) = described[name].floating_point_range
                assert span.from_value > 0.0, (name, span)
                # the same range on a writable parameter: rclpy itself refuses 0
                probe.declare_parameter(name, node.get_parameter(name).value,
                                        ParameterDescriptor(floating_point_range=[span]))
                refused = probe.set_parameters([Parameter(name, value=0.0)])[0]
                assert not refused.successful, name
                assert probe.set_parameters([Parameter(name, value=0.5)])[0].successful, name
        finally:
            probe.destroy_node()
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
