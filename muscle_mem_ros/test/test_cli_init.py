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
``muscle-mem init`` on the mobile base and a lab gantry: what the file lists, with what numbers.

The base (mobile_base_helpers), its agent and a client run on a ROS domain of their own
(nothing else on it); ``muscle-mem init`` surveys it in its own process; the cache starts
with the file it wrote, unedited; a fetch is learned from the agent, then replayed with no
agent call. Also: the file is never overwritten, an empty domain fails with one line (and
``init --help`` says how long it waits for one), and a graph with no agent says so and still
writes a file that starts the node.

The gantry (gantry_helpers) is a robot the demo is not: noise of 0.2 mm over wells 9 mm
apart, a scale whose noise is 0.01 g under 0.5 g aspirates, and beside it what a real cell
runs (an e-stop, a reset, a controller manager, a lifecycle node, a description) and a
cache already running. init lists its tools and nothing else, writes each action's stop or
says none is known, tolerances from the noise (each sensor says which rule set it), a
``robot_description_timeout`` the cache does not miss a slow description by, and refuses
to sample while the gantry moves.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import random
import re
import signal
import subprocess
import sys
import time

from action_msgs.msg import GoalStatus
from gantry_helpers import ASPIRATE, GantryWorld, JOINT_NOISE, SCALE_NOISE, WELL_PITCH
from mobile_base_helpers import BaseHarness, MobileBase
from muscle_mem_ros.cli.initrules import SILENT_DEFAULTS
import node_helpers
from node_helpers import CacheProcess, wait_until
import pytest
from rclpy.node import Node
import yaml


def domain() -> int:
    """Return a ROS domain out of the range the shells and fleet tests use (0 to 100)."""
    return random.randint(120, 200)


def init(*args: str, domain_id: int) -> subprocess.CompletedProcess:
    """Run ``muscle-mem init`` in its own process on ``domain_id``."""
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id))
    return subprocess.run([sys.executable, '-m', 'muscle_mem_ros.cli', 'init', *args],
                          capture_output=True, text=True, timeout=60, env=env)


class InitHarness(BaseHarness):
    """The mobile base whose cache starts from the file init wrote (read as it is)."""

    init_file: Path

    def values(self, **overrides: object) -> dict:
        text = yaml.safe_load(self.init_file.read_text())
        return dict(text[self.names.node]['ros__parameters'])

    def start_cache(self, host: Path | None = None, **overrides: object) -> CacheProcess:
        """Start the cache with ``--params-file`` the init file itself, not a copy."""
        write = node_helpers.write_params
        node_helpers.write_params = lambda *_args: self.init_file
        try:
            return super().start_cache(host)
        finally:
            node_helpers.write_params = write


@pytest.fixture(scope='module')
def base(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('init_base')
    h = InitHarness(tmp=tmp, domain_id=domain())
    h.init_file = tmp / 'robot.yaml'
    yield h
    h.close()


def test_init_writes_a_file_the_node_learns_and_replays_with(base):
    base.robot.reset()
    done = init(str(base.init_file), '--node-name', base.names.node,
                '--store', str(base.tmp / 'cache.db'), '--duration', '2',
                domain_id=base.domain_id)
    assert done.returncode == 0, done.stderr
    text = base.init_file.read_text()
    params = yaml.safe_load(text)[base.names.node]['ros__parameters']
    prefix = base.names.prefix
    assert params['agent_action'] == base.names.agent
    assert params['replay_requires'] == 'none'
    # no description in the graph: the body is the joints and tools, not waited for
    assert params['robot_description_timeout'] == 0.0, text
    assert set(params['sensors']) == {'odom', 'tag'}, text
    odom, tag = params['sensors']['odom'], params['sensors']['tag']
    assert odom['fields'] == ['pose.pose.position'] and odom['mode'] == 'norm'
    # a simulated base and tag: no noise at rest, so the default (said so in the file)
    assert tag['type'] == 'geometry_msgs/msg/PoseStamped'
    assert tag['tolerance'] == [SILENT_DEFAULTS['position']], text
    assert 0.5 <= odom['max_age'] <= 1.0 and 0.5 <= tag['max_age'] <= 1.0, text
    assert f'/{prefix}/scan (sensor_msgs/msg/LaserScan): a big array' in text
    # the base's own halt is goto's stop, not a tool the agent calls
    assert params['actions'] == {'goto': {
        'server': f'/{prefix}/goto', 'type': 'muscle_mem_demo_interfaces/action/MoveToPose',
        'proxy': base.names.proxy(f'/{prefix}/goto'),
        'stop_service': f'/{prefix}/base_stop'}}, text
    assert 'gripper' in params['services'] and 'base_stop' not in params['services'], text
    assert re.search(rf'^#   /{prefix}/base_stop \(std_srvs/srv/Trigger\): a stop', text, re.M)
    assert not any('parameter' in s or 'type_description' in s
                   for s in json.dumps(params['services'])), text

    base.start_cache()
    calls = len(base.agent.calls)
    learned = base.run_task('fetch', json.dumps({'bin': 1}))
    assert learned.status == GoalStatus.STATUS_SUCCEEDED, learned.result.message
    assert not learned.result.cache_hit and len(base.agent.calls) == calls + 1
    base.robot.reset()
    gotos = len(base.robot.gotos)
    replayed = base.run_task('fetch', json.dumps({'bin': 1}))
    assert replayed.status == GoalStatus.STATUS_SUCCEEDED, replayed.result.message
    assert replayed.result.cache_hit, replayed.result.message
    assert len(base.agent.calls) == calls + 1  # no agent call
    assert len(base.robot.gotos) == gotos + 2


def test_init_never_overwrites_a_file(tmp_path):
    path = tmp_path / 'robot.yaml'
    path.write_text('mine\n')
    done = init(str(path), domain_id=domain())
    assert done.returncode == 1
    assert done.stderr.strip() == (f'muscle-mem init: error: {path} exists: init never '
                                   'overwrites a file')
    assert path.read_text() == 'mine\n'


def test_init_on_an_empty_domain_fails_with_one_line(tmp_path):
    path = tmp_path / 'robot.yaml'
    done = init(str(path), '--discovery', '1', domain_id=201)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    said = re.fullmatch(r'muscle-mem init: error: no ROS node found in ROS_DOMAIN_ID=201 '
                        r'after (\d+) s: is the robot running, in this domain\?', lines[0])
    assert said, lines[0]
    assert int(said.group(1)) >= 11  # --discovery, then the whole settle wait
    assert not path.exists()


class NoAgentHarness(InitHarness):
    """The mobile base with an idle node where its agent was: no ExecuteTask server."""

    def _doubles(self) -> tuple:
        robot = MobileBase(names=self.names, context=self.context)
        return robot, Node(f'{self.names.prefix}_idle', context=self.context)


def test_init_with_no_agent_says_so_and_writes_the_file(tmp_path):
    h = NoAgentHarness(tmp=tmp_path, domain_id=domain())
    try:
        h.init_file = tmp_path / 'robot.yaml'
        done = init(str(h.init_file), '--node-name', h.names.node, '--store',
                    str(tmp_path / 'cache.db'), '--duration', '1', domain_id=h.domain_id)
        assert done.returncode == 0, done.stderr
        assert 'no agent found: a miss fails until one is named here' in done.stdout
        text = h.init_file.read_text()
        params = yaml.safe_load(text)[h.names.node]['ros__parameters']
        assert params['agent_action'] == '' and '# no agent found' in text
        assert set(params['sensors']) == {'odom', 'tag'}
    finally:
        h.close()


REPO = Path(__file__).resolve().parents[2]


def test_how_long_init_waits_on_an_empty_graph_is_in_its_help_and_the_docs():
    done = subprocess.run([sys.executable, '-m', 'muscle_mem_ros.cli', 'init', '--help'],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    said = ' '.join(done.stdout.split())
    # --discovery (2 s), then up to 10 s more for a node to appear: 12 s on an empty graph
    assert 'an empty graph is given up on after 12 s' in said, said
    docs = ' '.join((REPO / 'docs' / 'init.md').read_text().split())
    assert 'an empty graph is given up on after 12 s' in docs


def _gantry_cache(tmp: Path, domain_id: int) -> CacheProcess:
    """Start a cache for the gantry's tools (its proxies and helper nodes join the graph)."""
    values = {
        'store_path': str(tmp / 'beside.db'), 'agent_action': '/gantry_agent/execute_task',
        'robot_description_timeout': 0.0,
        'sensors': {
            'joints': {'topic': '/gantry/joint_states', 'type': 'sensor_msgs/msg/JointState',
                       'fields': ['position'], 'tolerance': [0.002], 'mode': 'abs',
                       'max_age': 0.5},
            'scale': {'topic': '/gantry/scale', 'type': 'std_msgs/msg/Float64',
                      'fields': ['data'], 'tolerance': [0.1], 'mode': 'abs', 'max_age': 0.5},
        },
        'actions': {
            'goto': {'server': '/gantry/goto',
                     'type': 'muscle_mem_demo_interfaces/action/FollowJointTrajectory'},
            'mix': {'server': '/mixer/mix', 'type': 'test_msgs/action/Fibonacci'},
        },
        'services': {
            'aspirate': {'server': '/gantry/pipette/aspirate', 'type': 'std_srvs/srv/SetBool'},
            'dispense': {'server': '/gantry/pipette/dispense', 'type': 'std_srvs/srv/SetBool'},
        },
    }
    names = node_helpers.Names(prefix='gantry', node='muscle_mem')
    cache = CacheProcess(names=names, params_file=node_helpers.write_params(
        tmp / 'beside.yaml', 'muscle_mem', values), log=tmp / 'beside.log', domain_id=domain_id)
    if not wait_until(lambda: 'behavior cache ready' in cache.output() or not cache.alive(),
                      30.0) or not cache.alive():
        cache.stop()
        raise RuntimeError(f'the cache beside the gantry did not start:\n{cache.output()}')
    return cache


@pytest.fixture(scope='module')
def gantry(tmp_path_factory):
    world = GantryWorld(domain_id=domain())
    world.tmp = tmp_path_factory.mktemp('init_gantry')
    yield world
    world.close()


@pytest.fixture(scope='module')
def gantry_file(gantry):
    """Run init on the gantry, with a cache already running beside it; return the file's text."""
    cache = _gantry_cache(gantry.tmp, gantry.domain_id)
    try:
        path = gantry.tmp / 'gantry.yaml'
        done = init(str(path), '--store', str(gantry.tmp / 'cache.db'),
                    domain_id=gantry.domain_id)
        assert done.returncode == 0, done.stderr + cache.output()
    finally:
        cache.stop()
    return path.read_text()


def _sensor_comment(text: str, key: str) -> str:
    """Return the comment lines just above sensor ``key`` in the file."""
    lines = text.splitlines()
    at = lines.index(f'      {key}:')
    above = []
    for line in reversed(lines[:at]):
        if not line.strip().startswith('#'):
            break
        above.append(line.strip())
    return ' '.join(reversed(above))


def test_init_lists_only_the_robot_beside_a_running_cache(gantry_file):
    text = gantry_file
    params = yaml.safe_load(text)['muscle_mem']['ros__parameters']
    actions, services = params['actions'], params['services']
    # three tools and the mixer's: no proxy of the running cache, no renamed real service
    assert {k: v['server'] for k, v in actions.items()} == {
        'goto': '/gantry/goto', 'mix': '/mixer/mix'}, text
    assert {k: v['server'] for k, v in services.items()} == {
        'aspirate': '/gantry/pipette/aspirate', 'dispense': '/gantry/pipette/dispense'}, text
    assert '# Caches already running, left out: /muscle_mem' in text, text
    # not robot actions: left out by rule, each named in a comment
    for name, rule in (('/gantry/estop', 'a stop'), ('/gantry/reset', 'a reset'),
                       ('/controller_manager/reload_controller_libraries',
                        'the controller manager'),
                       ('/gantry_driver/change_state', 'a lifecycle service')):
        assert re.search(rf'^#   {re.escape(name)} \([^)]*\): {rule}', text, re.M), (name, text)
    assert re.search(r'^#   parameter services of /gantry: \S*describe_parameters', text, re.M)
    # a stop per action where one is known, else the file says none is
    assert 'stop_goal' not in actions['goto'] and 'stop_service' not in actions['goto']
    assert re.search(r'# stop: the current joint positions as a one-point trajectory', text)
    assert re.search(r'# stop: none known for /mixer/mix', text), text
    # the description was seen: the cache waits long enough for it
    assert params['robot_description_timeout'] >= 10.0, text
    assert re.search(r'# /robot_description heard after [\d.]+ s', text), text
    # a description in a namespace is not the one the node reads: the file says how to read it
    said = re.escape("a robot description, but not the node's")
    assert re.search(rf'^#   /pipette/robot_description \(std_msgs/msg/String\): {said} .*'
                     r'remap robot_description:=/pipette/robot_description', text, re.M), text


def test_init_tolerances_follow_the_noise_and_say_which_rule_set_them(gantry_file):
    text = gantry_file
    sensors = yaml.safe_load(text)['muscle_mem']['ros__parameters']['sensors']
    joints, scale, speed = sensors['joint_states'], sensors['scale'], sensors['speed']
    assert joints['joints'] == ['x', 'y', 'z']
    # one well off (9 mm) fails; the noise (0.2 mm) passes
    for value in joints['tolerance']:
        assert 4 * JOINT_NOISE < value < WELL_PITCH / 2, text
    # an aspirate that took no liquid (0.5 g short) fails; the noise (0.01 g) passes
    (grams,) = scale['tolerance']
    assert 4 * SCALE_NOISE < grams < ASPIRATE, text
    assert 'tolerance: 6 x the noise at rest' in _sensor_comment(text, 'joint_states'), text
    assert 'tolerance: 6 x the noise at rest' in _sensor_comment(text, 'scale'), text
    # a sensor that made no noise at all: a default, and the file says so
    assert speed['tolerance'] == [SILENT_DEFAULTS['numeric']], text
    assert 'tolerance: the default' in _sensor_comment(text, 'speed'), text


def test_init_refuses_to_sample_while_the_robot_moves(gantry, tmp_path):
    path = tmp_path / 'moving.yaml'
    gantry.gantry.move(True)
    try:
        done = init(str(path), '--duration', '2', domain_id=gantry.domain_id)
    finally:
        gantry.gantry.move(False)
    assert done.returncode == 1
    assert 'the robot is moving: run init with it still' in done.stderr, done.stderr
    assert '/gantry/joint_states' in done.stderr, done.stderr
    assert not path.exists()


def test_init_writes_no_hold_the_node_would_refuse(gantry, tmp_path):
    # goto's stop (the hold) reads the joints from a JointState sensor: without one the node
    # refuses to start, so init says so instead of writing the file
    path = tmp_path / 'no_joints.yaml'
    done = init(str(path), '--sensor', '/gantry/scale', '--duration', '1',
                domain_id=gantry.domain_id)
    assert done.returncode == 1
    assert "/gantry/goto: a FollowJointTrajectory tool's stop holds the joints" in done.stderr, (
        done.stderr)
    assert not path.exists()


def test_a_description_slower_than_two_seconds_is_not_missed(gantry, gantry_file):
    path = gantry.tmp / 'started.yaml'
    path.write_text(gantry_file)
    gantry.describe(False)
    log = gantry.tmp / 'started.log'
    env = dict(os.environ, ROS_DOMAIN_ID=str(gantry.domain_id))
    with log.open('w') as out:
        proc = subprocess.Popen([sys.executable, '-m', 'muscle_mem_ros.ros.node.main',
                                 '--ros-args', '--params-file', str(path)],
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        # the cache is waiting for its description (its helper node is in the graph) ...
        waiting = wait_until(lambda: 'muscle_mem_description' in
                             gantry.publisher.get_node_names(), 60.0)
        assert waiting, log.read_text()
        time.sleep(2.5)  # ... for longer than the 2 s default, then the description comes
        gantry.describe(True)
        said = wait_until(lambda: 'this robot is' in log.read_text() or proc.poll() is not None,
                          30.0)
        assert said, log.read_text()
        line = next(x for x in log.read_text().splitlines() if 'this robot is' in x)
        assert 'description from /robot_description' in line, line
        assert line.split('this robot is ')[1].startswith('gantry@'), line
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        gantry.describe(True)
