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
A hit reads its tree once: one listing of one variant, nothing else listed.

Real cache process (its store's reads counted by ``store_reads_host.py``), fake
robot and agent (node_helpers) over DDS. The task's goals use the parameter
``order``, so its tree is a bound variant that every value of ``order`` shares.
"""

from __future__ import annotations

import json
from pathlib import Path

from action_msgs.msg import GoalStatus
from node_helpers import Harness
import pytest

HOST = Path(__file__).with_name('store_reads_host.py')


@pytest.fixture(scope='module')
def h(tmp_path_factory):
    h = Harness(tmp=tmp_path_factory.mktemp('tree_reads'))
    h.start_cache(host=HOST)
    yield h
    h.close()


def windows(h: Harness) -> list[dict[str, int]]:
    """Return the store reads of each task so far (one window per ``note_outcome``)."""
    assert h.cache is not None
    prefix = 'store reads: '
    return [json.loads(line.split(prefix, 1)[1]) for line in h.cache.output().splitlines()
            if prefix in line]


def run(h: Harness, order: int):
    h.robot.reset()
    result = h.run_task('count_reads', json.dumps({'order': order}))
    assert result.status == GoalStatus.STATUS_SUCCEEDED, result.result.message
    return result.result


def test_a_hit_lists_one_variant_of_its_tree_once_and_nothing_else(h):
    assert not run(h, 7).cache_hit  # learned
    assert not run(h, 8).cache_hit  # learned: a second value followed, 'order' is bound
    assert run(h, 9).cache_hit
    before = len(windows(h))
    hit = run(h, 11)
    assert hit.cache_hit and any(s.field == 'order' for s in hit.substituted)
    reads = windows(h)
    assert len(reads) == before + 1, reads
    last = reads[-1]
    assert last.get('trajectories(variant)') == 1, last
    listed = {k for k in last if k.startswith('trajectories')}
    assert listed == {'trajectories(variant)'}, last  # never the task's other trees
    for key in ('tally', 'trajectory', 'trajectory_ending_at', 'path'):
        assert key not in last, last
    assert last.get('trees') == 1, last
