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
A full disk: replays still succeed, new tasks still reach the agent, the store heals.

The store lives on a small tmpfs mounted for the test (root only; skipped with
the reason elsewhere), and the disk is filled for real by a filler file until
the kernel answers ENOSPC: SQLite then fails every write with "database or disk
is full", as on a robot whose disk ran full.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
import subprocess

from diagnostic_msgs.msg import DiagnosticArray
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_interfaces.srv import ListTasks, StartRecording, StopRecording
from node_helpers import Harness, wait_until
import pytest


def mount_tmpfs(path: Path, size: str) -> str:
    """Mount a tmpfs of ``size`` at ``path``; return '' or why it is not possible here."""
    if os.geteuid() != 0:
        return 'mounting a tmpfs needs root (CAP_SYS_ADMIN); this run is not root'
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size},mode=0700', 'tmpfs',
                           str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        return f'mount -t tmpfs is not permitted here: {done.stderr.strip()}'
    return ''


def fill(path: Path) -> None:
    """Write ``path`` until the filesystem is full (ENOSPC), down to single blocks."""
    with open(path, 'wb', buffering=0) as filler:
        for chunk in (1 << 20, 1 << 16, 1 << 12, 1 << 9):
            block = b'\0' * chunk
            while True:
                try:
                    filler.write(block)
                except OSError as err:
                    assert err.errno == errno.ENOSPC, err
                    break


@pytest.fixture
def full_disk(tmp_path):
    mount = tmp_path / 'disk'
    reason = mount_tmpfs(mount, '8m')
    if reason:
        pytest.skip(reason)
    h = Harness(tmp=tmp_path)
    diagnostics: list[DiagnosticArray] = []
    h.client.create_subscription(DiagnosticArray, '/diagnostics', diagnostics.append, 10)
    try:
        yield h, mount, diagnostics
    finally:
        h.close()
        subprocess.run(['umount', '-l', str(mount)], check=False)


def store_value(diagnostics: list[DiagnosticArray], node: str) -> str:
    """Return the ``store`` value of the latest diagnostics of the cache node ``node``."""
    for array in reversed(list(diagnostics)):
        for status in array.status:
            if status.name.startswith(f'{node}:'):
                return {kv.key: kv.value for kv in status.values}.get('store', '')
    return ''


def test_full_disk_fails_no_task_and_the_store_recovers(full_disk):
    h, mount, diagnostics = full_disk
    h.start_cache(store_path=str(mount / 'cache.db'))
    learned = h.run_task('full_a')
    assert learned.result.success and learned.result.trajectory_id > 0, learned.result.message
    filler = mount / 'filler'
    fill(filler)
    events = len(h.events)

    # A replay that moves the robot correctly is a success; its counters are not stored.
    h.robot.reset()
    calls = len(h.agent.calls)
    hit = h.run_task('full_a')
    assert hit.result.success and hit.result.cache_hit, hit.result.message
    assert 'not stored' in hit.result.message and 'full' in hit.result.message
    assert len(h.agent.calls) == calls
    # A new task reaches the agent, which does it; nothing is learned.
    new = h.run_task('full_b')
    assert new.result.success and not new.result.cache_hit, new.result.message
    assert 'not stored' in new.result.message
    assert new.result.trajectory_id == 0
    assert len(h.agent.calls) == calls + 1
    assert wait_until(lambda: any(e.type == CacheEvent.ERROR and 'not stored' in e.detail
                                  for e in h.events[events:]))
    assert wait_until(lambda: store_value(diagnostics, h.names.node).startswith('degraded'),
                      10.0), store_value(diagnostics, h.names.node)
    assert 'full' in store_value(diagnostics, h.names.node)

    # Space is back: the next write succeeds and the store is healthy again.
    filler.unlink()
    h.robot.reset()
    again = h.run_task('full_a')
    assert again.result.cache_hit and 'not stored' not in again.result.message
    assert wait_until(lambda: store_value(diagnostics, h.names.node) == 'ok', 10.0)
    h.robot.reset()
    learned_b = h.run_task('full_b')
    assert learned_b.result.success and learned_b.result.trajectory_id > 0
    assert 'not stored' not in learned_b.result.message
    h.robot.reset()
    replayed_b = h.run_task('full_b')
    assert replayed_b.result.cache_hit, replayed_b.result.message
    assert h.cache is not None and h.cache.alive()


def test_recording_that_lost_a_step_is_never_committed(full_disk):
    """A step lost to the full disk, then space is back: the recording is not saved with a gap."""
    h, mount, diagnostics = full_disk
    h.start_cache(store_path=str(mount / 'cache.db'))
    assert h.call(StartRecording, 'start_recording', task='gap', params_json='').success
    filler = mount / 'filler'
    fill(filler)
    assert h.agent.do('arm', [0.3, 0.2, 0.1])  # the robot moves; the step is not stored
    filler.unlink()
    assert h.agent.do('gripper', True)  # stored: space is back
    stopped = h.call(StopRecording, 'stop_recording', save=True)
    assert not stopped.success
    assert 'could not be stored' in stopped.message and 'full' in stopped.message
    listing = h.call(ListTasks, 'list_tasks', task='gap', with_steps=False)
    assert not listing.trajectories
    h.robot.reset()
    run = h.run_task('gap')  # learned from the agent now, whole
    assert run.result.success and not run.result.cache_hit, run.result.message
    assert run.result.steps_by_agent == 4
