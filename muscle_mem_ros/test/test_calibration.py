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
Tolerance calibration on data with known noise: the core, the CLI on a store, the live service.

The store holds runs whose pre snapshots are a base plus Gaussian noise of known
sigma and divergences a known distance away (:mod:`cli_helpers`). The live test
runs the cache node in its own process against a real publisher of noisy joint
states and asks it through ``muscle-mem calibrate --live``.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

from cli_helpers import DIVERGENCE, fingerprint, JOINT_NOISE, OBJECT_NOISE, \
    REPEATS, ROOT_DIVERGENCES
from core_helpers import subprocess_env
from muscle_mem_interfaces.srv import StartRecording, StopRecording
from muscle_mem_ros.checks import calibration
from muscle_mem_ros.cli import main
from muscle_mem_ros.cli.paramsfile import read_sensor_settings
from muscle_mem_ros.records import CompareMode
from muscle_mem_ros.ros.rclfix.matching import wait_for_service_matched
from muscle_mem_ros.ros.rclfix.shutdown import Spinner
from muscle_mem_ros.store import SqliteStore
from node_helpers import CacheProcess, Names, wait_until, write_params
import numpy as np
import pytest
import yaml

SIGMA = 0.01


def test_noise_of_known_gaussian_readings():
    rng = np.random.default_rng(3)
    readings = rng.normal([1.0, -2.0], [SIGMA, 10 * SIGMA], size=(4000, 2))
    found = calibration.noise('joints', readings.tolist())
    assert found.samples == 4000
    assert found.mean == pytest.approx([1.0, -2.0], abs=0.01)
    assert found.std == pytest.approx([SIGMA, 10 * SIGMA], rel=0.05)
    assert found.peak_to_peak == pytest.approx(tuple(np.ptp(readings, axis=0)))
    expected = np.maximum(4 * np.asarray(found.std), np.asarray(found.peak_to_peak)) * 1.5
    assert found.proposed == pytest.approx(tuple(expected))


def test_noise_wraps_angles_and_drops_odd_lengths():
    readings = [[math.pi - 0.01], [-math.pi + 0.01], [math.pi - 0.005], [1.0, 2.0]]
    found = calibration.noise('yaw', readings, mode=CompareMode.ANGLE)
    assert found.samples == 3
    assert found.peak_to_peak[0] == pytest.approx(0.02)
    plain = calibration.noise('yaw', readings[:3])
    assert plain.peak_to_peak[0] > 6.0


def test_noise_norm_mode_proposes_one_value():
    found = calibration.noise('object', [[0.0, 0.0], [0.03, 0.04], [0.0, 0.0]],
                              mode=CompareMode.NORM, k=1.0, margin=1.0)
    assert len(found.proposed) == 1
    assert found.proposed[0] == pytest.approx(0.05)


@pytest.mark.parametrize('kwargs, word', [({'k': 0.0}, 'k must'), ({'margin': 0.5}, 'margin')])
def test_bad_factors_are_refused(kwargs, word):
    with pytest.raises(ValueError, match=word):
        calibration.noise('s', [[1.0], [2.0]], **kwargs)


def test_from_store_spread_and_what_if_on_known_noise(store):
    before = fingerprint(store)
    with SqliteStore(path=store, read_only=True) as db:
        found = calibration.from_store(db, 'pick')
    assert fingerprint(store) == before
    groups = sorted((s.depth, s.repeats, s.divergences) for s in found.steps)
    # Depth 0: the 10 repeats (2 later root branches diverged from them) and those 2 branches;
    # depth 1: after each, the Fibonacci step (one branch with another order under run 1).
    assert groups == [(0, ROOT_DIVERGENCES, 0), (0, REPEATS, ROOT_DIVERGENCES),
                      (1, 1, 0), (1, ROOT_DIVERGENCES, 0), (1, REPEATS, 1)]
    main_step = next(s for s in found.steps if s.repeats == REPEATS and s.depth == 0)
    assert main_step.noise['joints'].std == pytest.approx([JOINT_NOISE] * 3, rel=0.6)
    assert main_step.noise['object'].std == pytest.approx([OBJECT_NOISE] * 3, rel=0.6)
    repeats = 2 * REPEATS + 2 * ROOT_DIVERGENCES
    divergences = ROOT_DIVERGENCES + 1
    assert len(found.nearest['object']) == repeats
    assert len(found.separation['object']) == divergences
    obj = max(found.proposed['object'])
    assert 2 * OBJECT_NOISE < obj < DIVERGENCE / 4
    (row,) = calibration.what_if(found, 'object', [obj])
    assert (row.replayed, row.repeats, row.wrong, row.divergences) == (
        repeats, repeats, 0, divergences)
    (row,) = calibration.what_if(found, 'object', [DIVERGENCE * 1.5])
    assert row.wrong == divergences
    # The joints did not move when the object did: judged on them alone, every divergence
    # would have replayed the learned step.
    (row,) = calibration.what_if(found, 'joints', [max(found.proposed['joints'])])
    assert (row.replayed, row.wrong) == (repeats, divergences)
    rows = calibration.what_if(found, 'object')
    assert [r.tolerance for r in rows] == sorted(r.tolerance for r in rows)
    assert rows[-1].wrong == divergences and rows[0].replayed < repeats
    with pytest.raises(KeyError, match='lidar'):
        calibration.what_if(found, 'lidar')


def test_params_snippet_reads_back_as_a_params_file(tmp_path):
    text = calibration.params_snippet({'joints': (0.01, 0.02), 'object': (0.005,)},
                                      node_name='cache')
    path = tmp_path / 'snippet.yaml'
    path.write_text(text)
    assert yaml.safe_load(text) == {'cache': {'ros__parameters': {'sensors': {
        'joints': {'tolerance': [0.01, 0.02]}, 'object': {'tolerance': 0.005}}}}}
    settings = read_sensor_settings(path, 'cache')
    assert settings['joints'].tolerance == (0.01, 0.02)
    assert settings['object'].tolerance == (0.005,)


def test_cli_calibrate_from_store(capsys, store, tmp_path):
    before = fingerprint(store)
    params = tmp_path / 'params.yaml'
    params.write_text(yaml.safe_dump({'muscle_mem': {'ros__parameters': {'sensors': {
        'object': {'tolerance': 0.05, 'mode': 'norm'}}}}}))
    code = main(['calibrate', str(store), 'pick', '--json', '--params', str(params),
                 '--sensor', 'object', '--tolerance', '0.01', '--tolerance', '0.3'])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert list(data['what_if']) == ['object']
    low, high = data['what_if']['object']
    assert (low['tolerance'], high['tolerance']) == (0.01, 0.3)
    assert high['wrong'] == high['divergences'] == ROOT_DIVERGENCES + 1
    assert len(data['proposed']['object']) == 1  # norm mode: one tolerance
    snippet = yaml.safe_load(data['params_yaml'])['muscle_mem']['ros__parameters']['sensors']
    assert set(snippet) == {'joints', 'object'}
    code = main(['calibrate', str(store), 'pick'])
    out, _ = capsys.readouterr()
    assert code == 0
    assert 'what if sensor' in out and 'tolerance:' in out and '(proposed)' in out
    assert fingerprint(store) == before


def test_cli_calibrate_needs_a_source(capsys):
    assert main(['calibrate']) == 1
    assert 'STORE and TASK' in capsys.readouterr().err
    assert main(['calibrate', 'x.db', 'pick', '--live', '/mm']) == 1
    assert 'not both' in capsys.readouterr().err


class _NoisyJoints:
    """A real publisher of JointState with Gaussian noise of known sigma, in its own context."""

    def __init__(self, topic: str) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from sensor_msgs.msg import JointState
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node('noisy_joints', context=self.context)
        pub = self.node.create_publisher(JointState, topic, 10)
        rng = np.random.default_rng(11)

        def tick() -> None:
            msg = JointState(name=['a', 'b'])
            msg.position = (np.array([0.5, -1.0]) + rng.normal(0, SIGMA, 2)).tolist()
            pub.publish(msg)

        self.node.create_timer(0.005, tick)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.spinner = Spinner(self.executor)

    def call(self, service: str, srv_type: type | None = None, **fields: object):
        from muscle_mem_interfaces.srv import Calibrate
        srv_type = srv_type or Calibrate
        client = self.node.create_client(srv_type, service)
        # the answer to a first request could go to nobody until the cache matched the client
        assert wait_for_service_matched(self.node, client, service.rsplit('/', 1)[0], 30.0)
        future = client.call_async(srv_type.Request(**fields))
        assert wait_until(future.done, 60.0)
        return future.result()

    def close(self) -> None:
        import rclpy
        self.spinner.stop()
        rclpy.try_shutdown(context=self.context)


def test_live_calibrate_service_against_a_real_publisher(tmp_path):
    names = Names.unique()
    params = write_params(tmp_path / 'params.yaml', names.node, {
        'store_path': str(tmp_path / 'cache.db'), 'agent_action': '',
        'sensors': {'joints': {'topic': names.joints, 'type': 'sensor_msgs/msg/JointState',
                               'fields': ['position'], 'tolerance': [0.05],
                               'max_age': 1.0}}})
    publisher = _NoisyJoints(names.joints)
    cache = CacheProcess(names=names, params_file=params, log=tmp_path / 'cache.log')
    try:
        assert wait_until(lambda: 'behavior cache ready' in cache.output()
                          or not cache.alive(), 60.0), cache.output()
        assert cache.alive(), cache.output()
        service = f'/{names.node}/calibrate'
        bad = publisher.call(service, duration=0.0)
        assert not bad.success and 'duration' in bad.message
        # While something holds the node (here a manual recording) it refuses: the robot
        # may move.
        started = publisher.call(f'/{names.node}/start_recording', StartRecording, task='t')
        assert started.success, started.message
        busy = publisher.call(service, duration=0.5)
        assert not busy.success and 'busy' in busy.message and busy.sensors == []
        assert publisher.call(f'/{names.node}/stop_recording', StopRecording,
                              save=False).success
        done = subprocess.run(
            [sys.executable, '-m', 'muscle_mem_ros.cli', 'calibrate', '--live',
             f'/{names.node}', '--duration', '2', '--json'],
            capture_output=True, text=True, env=subprocess_env(), timeout=120)
        assert done.returncode == 0, done.stderr + cache.output()
        data = json.loads(done.stdout)
        (joints,) = data['sensors']
        assert joints['sensor'] == 'joints' and joints['current'] == [0.05]
        assert joints['samples'] >= 30, data['message']
        assert joints['mean'] == pytest.approx([0.5, -1.0], abs=4 * SIGMA)
        for std in joints['std']:
            assert 0.5 * SIGMA < std < 1.6 * SIGMA
        expected = np.maximum(4 * np.asarray(joints['std']),
                              np.asarray(joints['peak_to_peak'])) * 1.5
        assert joints['proposed'] == pytest.approx(expected.tolist())
        snippet = yaml.safe_load(data['params_yaml'])
        assert snippet[names.node]['ros__parameters']['sensors']['joints']['tolerance'] == \
            pytest.approx(joints['proposed'], rel=1e-5)
        human = subprocess.run(
            [sys.executable, '-m', 'muscle_mem_ros.cli', 'calibrate', '--live',
             f'/{names.node}', '--duration', '0.5'],
            capture_output=True, text=True, env=subprocess_env(), timeout=120)
        assert human.returncode == 0, human.stderr
        assert 'proposed' in human.stdout and 'tolerance:' in human.stdout
        assert cache.alive()
    finally:
        cache.stop()
        publisher.close()


def test_live_calibrate_without_a_node_is_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, '-m', 'muscle_mem_ros.cli', 'calibrate', '--live',
         f'/{Names.unique().node}', '--duration', '1'],
        capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().startswith('muscle-mem calibrate: error: no service')
    assert len(done.stderr.strip().splitlines()) == 1
