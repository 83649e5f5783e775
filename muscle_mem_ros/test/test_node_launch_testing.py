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
launch_testing: the launch file starts the node, it becomes ready, it exits cleanly.

Runs under ``launch_test`` or pytest with the launch_testing plugin; skipped
with the reason where launch_testing is not importable (it is not published as
a PyPI wheel).
"""

from __future__ import annotations

from pathlib import Path
import tempfile
import unittest

import pytest

_WHY = 'not importable (not available as PyPI wheels)'
pytest.importorskip('launch_testing', reason=f'launch_testing {_WHY}')
pytest.importorskip('launch_ros', reason=f'launch_ros {_WHY}')

# Imported after the skips above, so google import order (launch before pytest) cannot hold.
import launch  # noqa: E402, I100
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
import yaml  # noqa: E402

PACKAGE = Path(__file__).resolve().parents[1]


@pytest.mark.launch_test
def generate_test_description():
    params = yaml.safe_load((PACKAGE / 'config' / 'behavior_cache.yaml').read_text())
    tmp = Path(tempfile.mkdtemp(prefix='muscle_mem_launch_'))
    params['muscle_mem']['ros__parameters']['store_path'] = str(tmp / 'cache.db')
    params_file = tmp / 'params.yaml'
    params_file.write_text(yaml.safe_dump(params))
    return launch.LaunchDescription([
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(str(PACKAGE / 'launch' / 'behavior_cache.launch.py')),
            launch_arguments={'params_file': str(params_file)}.items()),
        launch_testing.actions.ReadyToTest(),
    ])


class TestBehaviorCacheStarts(unittest.TestCase):

    def test_node_reports_ready(self, proc_output):
        proc_output.assertWaitFor('behavior cache ready', timeout=30, stream='stderr')


@launch_testing.post_shutdown_test()
class TestBehaviorCacheShutdown(unittest.TestCase):

    def test_exit_code(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)
