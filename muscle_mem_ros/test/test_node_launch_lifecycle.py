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
launch_testing: who drives the lifecycle when the launch file starts the node unconfigured.

``autostart:=false`` alone: nothing does; the node waits, unconfigured, and the
lifecycle services drive it. ``autostart:=false manage:=true``: the launch file
configures and activates it once, at start, and never again: a later deactivate,
or cleanup and configure, is left as it is.

Runs under ``launch_test`` or pytest with the launch_testing plugin; skipped with
the reason where launch_testing is not importable (it is not published as a PyPI
wheel). The same transitions from a plain rclpy client, without launch, are in
test_node_lifecycle.py.
"""

from __future__ import annotations

from pathlib import Path
import tempfile
import time
import unittest
import uuid

import pytest

_WHY = 'not importable (not available as PyPI wheels)'
pytest.importorskip('launch_testing', reason=f'launch_testing {_WHY}')
pytest.importorskip('launch_ros', reason=f'launch_ros {_WHY}')

# Imported after the skips above, so google import order (launch before pytest) cannot hold.
import launch  # noqa: E402, I100
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
import launch_testing  # noqa: E402
import launch_testing.actions  # noqa: E402
from lifecycle_msgs.msg import State, Transition  # noqa: E402
from lifecycle_msgs.srv import ChangeState, GetState  # noqa: E402
import rclpy  # noqa: E402
import yaml  # noqa: E402

PACKAGE = Path(__file__).resolve().parents[1]
NODE = f'mm_launch_{uuid.uuid4().hex[:8]}'
SETTLE = 3.0
"""Seconds a state must hold to count as 'nothing drives it' (a guard, not a timing)."""


@pytest.mark.launch_test
@launch_testing.parametrize('manage', ['false', 'true'])
def generate_test_description(manage):
    params = yaml.safe_load((PACKAGE / 'config' / 'behavior_cache.yaml').read_text())
    values = params['muscle_mem']['ros__parameters']
    tmp = Path(tempfile.mkdtemp(prefix='muscle_mem_launch_'))
    values['store_path'] = str(tmp / 'cache.db')
    params_file = tmp / 'params.yaml'
    params_file.write_text(yaml.safe_dump({NODE: {'ros__parameters': values}}))
    return launch.LaunchDescription([
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(str(PACKAGE / 'launch' / 'behavior_cache.launch.py')),
            launch_arguments={'params_file': str(params_file), 'node_name': NODE,
                              'autostart': 'false', 'manage': manage}.items()),
        launch_testing.actions.ReadyToTest(),
    ])


class TestWhoDrivesTheLifecycle(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        rclpy.init()
        cls.node = rclpy.create_node(f'{NODE}_probe')

    @classmethod
    def tearDownClass(cls):
        cls.node.destroy_node()
        rclpy.shutdown()

    def _call(self, srv_type, name, request):
        client = self.node.create_client(srv_type, f'/{NODE}/{name}')
        try:
            self.assertTrue(client.wait_for_service(timeout_sec=30.0), name)
            future = client.call_async(request)
            rclpy.spin_until_future_complete(self.node, future, timeout_sec=30.0)
            self.assertTrue(future.done(), f'{name}: no answer')
            return future.result()
        finally:
            self.node.destroy_client(client)

    def state(self) -> int:
        return self._call(GetState, 'get_state', GetState.Request()).current_state.id

    def change(self, transition: int) -> None:
        request = ChangeState.Request(transition=Transition(id=transition))
        self.assertTrue(self._call(ChangeState, 'change_state', request).success, transition)

    def holds(self, state: int) -> None:
        """Assert the node is in ``state`` now and still after SETTLE seconds."""
        self.assertEqual(self.state(), state)
        time.sleep(SETTLE)
        self.assertEqual(self.state(), state)

    def reaches(self, state: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.state() != state and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.state(), state)

    def test_lifecycle(self, manage):
        if manage == 'false':
            self.holds(State.PRIMARY_STATE_UNCONFIGURED)
            self.change(Transition.TRANSITION_CONFIGURE)
            self.holds(State.PRIMARY_STATE_INACTIVE)
            self.change(Transition.TRANSITION_ACTIVATE)
            self.reaches(State.PRIMARY_STATE_ACTIVE)
        else:
            self.reaches(State.PRIMARY_STATE_ACTIVE)
        self.change(Transition.TRANSITION_DEACTIVATE)
        self.holds(State.PRIMARY_STATE_INACTIVE)
        self.change(Transition.TRANSITION_CLEANUP)
        self.holds(State.PRIMARY_STATE_UNCONFIGURED)
        self.change(Transition.TRANSITION_CONFIGURE)
        self.holds(State.PRIMARY_STATE_INACTIVE)
