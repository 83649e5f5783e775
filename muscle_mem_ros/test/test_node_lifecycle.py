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
The cache as a managed (lifecycle) node, its parameter descriptors, and core logging on /rosout.

Real processes and DDS: the cache runs as ``python -m muscle_mem_ros.ros.node.main``;
the transitions are requested through the standard ``~/change_state`` service
with a ``lifecycle_msgs/srv/ChangeState`` client, as ``ros2 lifecycle set`` and
nav2's lifecycle manager do.
"""

from __future__ import annotations

import re
import signal
import sqlite3

from action_msgs.msg import GoalStatus
from diagnostic_msgs.msg import DiagnosticArray
from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState, GetState
from muscle_mem_interfaces.srv import ListTasks
from muscle_mem_ros.ros.rclfix.matching import AgentSeen
from muscle_mem_ros.store import open_store
from node_helpers import CacheProcess, Harness, params, wait_until, write_params
import pytest
from rcl_interfaces.msg import Log, Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import DescribeParameters, SetParameters
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp=tmp_path)
    try:
        yield h
    finally:
        h.close()


def start_managed(h: Harness, **overrides) -> CacheProcess:
    """Start the cache with ``autostart: false`` (it waits, unconfigured)."""
    values = params(h.names, store=h.tmp / 'cache.db', autostart=False, **overrides)
    params_file = write_params(h.tmp / 'params.yaml', h.names.node, values)
    h.cache = CacheProcess(names=h.names, params_file=params_file, log=h.tmp / 'cache.log')
    return h.cache


def state(h: Harness) -> int:
    return h.call(GetState, 'get_state').current_state.id


def change(h: Harness, transition: int) -> bool:
    return h.call(ChangeState, 'change_state', transition=Transition(id=transition)).success


def serving(h: Harness) -> bool:
    """Return True while the cache's ~/list_tasks service server is in the graph."""
    return h.client.count_services(h.names.cache('list_tasks')) > 0


def test_managed_start_waits_for_the_lifecycle_services(harness):
    h = harness
    cache = start_managed(h)
    assert state(h) == State.PRIMARY_STATE_UNCONFIGURED
    assert 'behavior cache ready' not in cache.output()

    assert change(h, Transition.TRANSITION_CONFIGURE)
    assert state(h) == State.PRIMARY_STATE_INACTIVE
    assert not serving(h)  # configured: store open, nothing served yet

    assert change(h, Transition.TRANSITION_ACTIVATE)
    assert state(h) == State.PRIMARY_STATE_ACTIVE
    assert wait_until(lambda: 'behavior cache ready' in cache.output(), 20.0)
    assert h.execute_client.wait_for_server(timeout_sec=30.0)
    assert h.call(ListTasks, 'list_tasks', task='', with_steps=False).success

    assert change(h, Transition.TRANSITION_DEACTIVATE)
    assert state(h) == State.PRIMARY_STATE_INACTIVE
    assert wait_until(lambda: not serving(h), 20.0)

    # cleanup closes the store; a second configure opens it again.
    assert change(h, Transition.TRANSITION_CLEANUP)
    assert state(h) == State.PRIMARY_STATE_UNCONFIGURED
    assert change(h, Transition.TRANSITION_CONFIGURE)
    assert change(h, Transition.TRANSITION_ACTIVATE)
    assert wait_until(lambda: serving(h), 20.0)
    run = h.run_task('pick_lc')
    assert run.result.success, run.result.message

    assert change(h, Transition.TRANSITION_ACTIVE_SHUTDOWN)
    assert state(h) == State.PRIMARY_STATE_FINALIZED
    assert h.stop_cache() == 0
    assert 'Traceback' not in cache.output()


def test_bad_parameter_fails_configure_naming_it_and_the_node_stays_up(harness):
    h = harness
    cache = start_managed(h, step_timeout=0.0)
    assert state(h) == State.PRIMARY_STATE_UNCONFIGURED
    assert not change(h, Transition.TRANSITION_CONFIGURE)
    assert state(h) == State.PRIMARY_STATE_UNCONFIGURED
    assert wait_until(lambda: 'bad configuration: step_timeout:' in cache.output())
    assert cache.alive()
    assert h.stop_cache() == 0


def test_deactivate_cancels_the_running_task(harness):
    h = harness
    h.start_cache()
    h.agent.step_delay = 0.3
    feedback: list = []
    handle = h.send_task('pick_deactivate', feedback=feedback)
    assert handle.accepted
    assert wait_until(lambda: any(fb.mode == fb.MODE_AGENT for fb in feedback), 10.0)
    assert change(h, Transition.TRANSITION_DEACTIVATE)
    wrapped = h.wait(handle.get_result_async())
    assert not wrapped.result.success
    assert 'cancel' in wrapped.result.message
    assert state(h) == State.PRIMARY_STATE_INACTIVE
    assert wait_until(lambda: not serving(h), 20.0)
    h.agent.step_delay = 0.0
    assert h.stop_cache() == 0


def test_parameters_are_described_and_read_only_but_cache_mode(harness):
    h = harness
    h.start_cache(agent_timeout=20)  # an integer for a number: accepted, declared as a double
    names = ['step_timeout', 'agent_timeout', 'sensors.joints.max_age', 'cache_mode',
             'sensors.joints.tolerance', 'store_path', 'autostart']
    described = {d.name: d for d in h.call(
        DescribeParameters, 'describe_parameters', names=names).descriptors}
    for name in names:
        assert described[name].description, name
    step = described['step_timeout']
    assert step.type == ParameterType.PARAMETER_DOUBLE
    assert step.read_only
    assert 0.0 < step.floating_point_range[0].from_value < 1e-300  # > 0: 0 is refused
    assert described['agent_timeout'].type == ParameterType.PARAMETER_DOUBLE
    assert described['sensors.joints.max_age'].floating_point_range
    tolerance = described['sensors.joints.tolerance']
    assert tolerance.type == ParameterType.PARAMETER_DOUBLE_ARRAY
    assert tolerance.floating_point_range[0].from_value == 0.0
    assert described['autostart'].read_only
    assert described['autostart'].type == ParameterType.PARAMETER_BOOL
    assert not described['cache_mode'].read_only

    def set_one(name: str, value: ParameterValue):
        return h.call(SetParameters, 'set_parameters', parameters=[
            Parameter(name=name, value=value)]).results[0]

    refused = set_one('step_timeout', ParameterValue(
        type=ParameterType.PARAMETER_DOUBLE, double_value=9.0))
    assert not refused.successful
    assert set_one('cache_mode', ParameterValue(
        type=ParameterType.PARAMETER_STRING, string_value='replay_only')).successful


def test_core_logging_reaches_rosout(harness):
    h = harness
    store_path = h.tmp / 'cache.db'
    open_store(str(store_path)).close()
    conn = sqlite3.connect(store_path)
    with conn:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('allow_pickle', '1')")
    conn.close()
    lines: list[Log] = []
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
    h.client.create_subscription(Log, '/rosout', lines.append, qos)
    h.start_cache()

    def core_line() -> bool:
        return any(m.name == h.names.node and 'allow_pickle=True' in m.msg
                   and 'muscle_mem_ros.store' in m.msg for m in list(lines))
    assert wait_until(core_line, 20.0), [m.msg for m in lines if m.name == h.names.node]


def graph_nodes(h: Harness) -> list[str]:
    """Return the cache's node names in the graph (hidden helper nodes included), sorted."""
    return sorted(name for name, _ns in h.client.get_node_names_and_namespaces()
                  if h.names.node in name)


def test_reactivation_leaves_no_extra_nodes(harness):
    h = harness
    cache = h.start_cache()
    expected = graph_nodes(h)
    assert f'_{h.names.node}_proxies' in expected and h.names.node in expected
    for cycle in range(5):
        assert change(h, Transition.TRANSITION_DEACTIVATE)
        if cycle % 2:
            assert change(h, Transition.TRANSITION_CLEANUP)
            assert change(h, Transition.TRANSITION_CONFIGURE)
        assert change(h, Transition.TRANSITION_ACTIVATE)
    assert state(h) == State.PRIMARY_STATE_ACTIVE
    # the graph is eventually consistent: a destroyed node leaves it a moment later
    assert wait_until(lambda: graph_nodes(h) == expected, 10.0), graph_nodes(h)
    assert 'already registered' not in cache.output()
    run = h.run_task('pick_reactivated')
    assert run.result.success, run.result.message


def test_execute_task_is_served_from_configure_to_cleanup_and_accepts_only_while_active(harness):
    """As nav2's servers: advertised while inactive (goals rejected), gone after cleanup."""
    h = harness
    start_managed(h)
    assert state(h) == State.PRIMARY_STATE_UNCONFIGURED
    assert not h.execute_client.server_is_ready()

    assert change(h, Transition.TRANSITION_CONFIGURE)
    assert h.execute_client.wait_for_server(timeout_sec=30.0)
    assert not h.send_task('pick_inactive').accepted

    assert change(h, Transition.TRANSITION_ACTIVATE)
    assert wait_until(lambda: serving(h), 20.0)
    run = h.run_task('pick_active')
    assert run.result.success, run.result.message

    assert change(h, Transition.TRANSITION_DEACTIVATE)
    assert h.execute_client.server_is_ready()
    assert not h.send_task('pick_deactivated').accepted

    assert change(h, Transition.TRANSITION_CLEANUP)
    assert wait_until(lambda: not h.execute_client.server_is_ready(), 20.0)
    assert h.stop_cache() == 0


def test_ctrl_c_mid_task_ends_the_goal_and_its_client_gets_the_result(harness):
    """
    Two SIGINTs (as ros2 launch sends) while a proxied arm goal runs: every client has a result.

    The task's client gets an aborted result with the reason; the agent's proxied goal ends
    as the arm answers the proxy's cancel, before the proxy is destroyed.
    """
    h = harness
    h.start_cache()
    h.robot.arm_delay = 3.0
    handle = h.send_task('pick_ctrl_c')
    assert handle.accepted
    result = handle.get_result_async()
    assert wait_until(h.robot.arm_active.is_set, 10.0)
    cache = h.cache
    assert cache is not None
    for _ in range(2):
        cache.proc.send_signal(signal.SIGINT)
    wrapped = h.wait(result, 20.0)
    assert wrapped.status == GoalStatus.STATUS_ABORTED
    assert 'cancel' in wrapped.result.message and not wrapped.result.success
    assert cache.proc.wait(20.0) == 0
    assert h.robot.arm_canceled == 1  # the proxy canceled the real goal before it went
    h.robot.arm_delay = 0.0
    assert h.stop_cache() == 0
    output = cache.output()
    for text in ('was not sent', 'did not end', 'InvalidHandle', 'Traceback'):
        assert text not in output, output


def test_diagnostics_say_when_the_agent_is_discovered(harness):
    """A client of a freshly started cache can wait until the cache sees its agent."""
    h = harness
    seen = AgentSeen(h.client, f'/{h.names.node}')
    h.start_cache()
    assert seen.wait(20.0)
    missing = AgentSeen(h.client, f'/{h.names.node}')
    values: list[str] = []
    h.client.create_subscription(DiagnosticArray, '/diagnostics', lambda msg: values.extend(
        kv.value for st in msg.status if st.hardware_id == f'/{h.names.node}'
        for kv in st.values if kv.key == 'agent'), 10)
    h.stop_cache()
    h.start_cache(agent_action=f'/{h.names.prefix}/no_such_agent')
    assert wait_until(lambda: values.count('not discovered') >= 2, 10.0), values
    assert not missing.wait(0.0)
    # what a timed-out wait says: the cache was heard, and its agent not discovered
    assert re.fullmatch(rf'\d+ /diagnostics from /{h.names.node}, the last: agent '
                        r"'not discovered'", missing.heard), missing.heard
    assert AgentSeen(h.client, '/nobody').heard == 'no /diagnostics from /nobody reached this node'
