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
``muscle-mem init`` on the mobile base (mobile_base_helpers): from the graph to a replay.

The base, its agent and a client run on a ROS domain of their own (nothing else on it);
``muscle-mem init`` surveys it in its own process; the cache starts with the file it wrote,
unedited; a fetch is learned from the agent, then replayed with no agent call. Also: the
file is never overwritten, an empty domain fails with one line, and a graph with no agent
says so and still writes a file that starts the node.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import random
import re
import subprocess
import sys

from action_msgs.msg import GoalStatus
from mobile_base_helpers import BaseHarness, MobileBase
import node_helpers
from node_helpers import CacheProcess
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
    assert set(params['sensors']) == {'odom', 'tag'}, text
    odom, tag = params['sensors']['odom'], params['sensors']['tag']
    assert odom['fields'] == ['pose.pose.position'] and odom['mode'] == 'norm'
    assert tag['type'] == 'geometry_msgs/msg/PoseStamped' and tag['tolerance'] == [0.02]
    assert 0.5 <= odom['max_age'] <= 1.0 and 0.5 <= tag['max_age'] <= 1.0, text
    assert f'/{prefix}/scan (sensor_msgs/msg/LaserScan): a big array' in text
    assert params['actions'] == {'goto': {
        'server': f'/{prefix}/goto', 'type': 'muscle_mem_demo_interfaces/action/MoveToPose',
        'proxy': base.names.proxy(f'/{prefix}/goto')}}
    assert set(params['services']) == {'gripper', 'base_stop'}, text
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
