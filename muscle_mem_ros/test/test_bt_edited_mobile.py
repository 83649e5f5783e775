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
Edited behavior trees on a robot unlike the demo arm: the mobile picker (mobile_helpers).

The cache process learns two fetches from the picker's agent: ``fetch`` (``bin: 2``;
nothing binds the shelf goal) and ``shelf`` (the shelf named by the parameter
``shelf: [1.0, 1.8]``; its y declared bound to ``param:shelf[1]``, its x equal to
``shelf[0]`` once, which is no evidence). They are exported with the CLI, edited as
text, run by the real ``muscle-mem run-bt`` against the robot's own servers, and
imported into new stores that a cache process replays from. The last test runs the
same tree through the cache and through run-bt on the same inputs and compares what
reached the robot and when the agent was asked.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import re
import subprocess
import sys

from mobile_helpers import MobileHarness, TAG_HOME
from muscle_mem_ros.cli import main
from muscle_mem_ros.store import SqliteStore
from node_helpers import wait_until
import pytest
import yaml

SHELF = [1.0, 1.8]


@pytest.fixture(scope='module')
def h(tmp_path_factory):
    h = MobileHarness(tmp=tmp_path_factory.mktemp('bt_mobile'))
    h.start_cache(**{'bindings.shelf_y': {'tool': 'goto', 'field': 'goal.pose.position.y',
                                          'source': 'param:shelf[1]'}})
    for task, params in (('fetch', {'bin': 2}), ('shelf', {'shelf': SHELF})):
        h.robot.reset()
        result = h.run_task(task, json.dumps(params))
        assert result.result.success, result.result.message
        assert wait_until(lambda t=task: stored(h.tmp / 'cache.db', t) == 1, 10.0)
    h.run_bt_params = h.tmp / 'run_bt.yaml'
    h.run_bt_params.write_text(yaml.safe_dump({'/**': {'ros__parameters': h.values()}}))
    yield h
    h.close()


def stored(path: Path, task: str) -> int:
    with SqliteStore(path=path, read_only=True) as store:
        return len(store.trajectories(task=task))


def export(h: MobileHarness, task: str) -> str:
    out = h.tmp / f'{task}.bt.yaml'
    assert main(['export', str(h.tmp / 'cache.db'), task, '--bt', 'py_trees', '--out',
                 str(out), '--params', str(h.tmp / 'params.yaml'), '--node-name',
                 h.names.node]) == 0
    return out.read_text()


def edited(h: MobileHarness, name: str, text: str) -> Path:
    path = h.tmp / name
    path.write_text(text)
    return path


def run_bt(h: MobileHarness, tree: Path, tag=TAG_HOME) -> subprocess.CompletedProcess:
    """Reset the picker (tag at ``tag``) and run ``tree`` with no cache in between."""
    h.robot.reset(tag)
    return subprocess.run(
        [sys.executable, '-m', 'muscle_mem_ros.cli', 'run-bt', str(tree), '--ros-args',
         '--params-file', str(h.run_bt_params)],
        capture_output=True, text=True, timeout=120, env=dict(os.environ))


def step_text(text: str, depth: int) -> tuple[int, int]:
    """Return where the document's step at ``depth`` (the first path) starts and ends."""
    start = text.index(f'# step {depth}: ')
    end = text.find(f'# step {depth + 1}: ', start)
    return start, end if end >= 0 else len(text)


def move_goal(text: str, depth: int, axis: str, old: float, new: float) -> str:
    """Edit the goal's ``axis`` of the goto at ``depth`` from ``old`` to ``new``."""
    start, end = step_text(text, depth)
    part = text[start:end]
    goal = part.index('    goal:\n', part.index('  goal:\n') + 1)  # the request's goal pose
    head, tail = part[:goal], part[goal:]
    found = re.search(rf'\b{axis}: {re.escape(repr(old))}\b', tail)
    assert found, tail[:600]
    tail = tail[:found.start()] + f'{axis}: {new}' + tail[found.end():]
    return text[:start] + head + tail + text[end:]


def base(h: MobileHarness) -> tuple[float, float]:
    with h.robot._lock:
        return tuple(h.robot.base)


def test_an_edited_shelf_goal_runs_as_edited_in_run_bt(h):
    text = export(h, 'fetch')
    start, end = step_text(text, 2)
    assert "- {element: 'sensor:odom[0]', field: goal.pose.position.x}" in text[start:end]
    tree = edited(h, 'fetch_x.bt.yaml', move_goal(text, 2, 'x', 1.0, 1.15))
    calls = len(h.agent.calls)
    done = run_bt(h, tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(h.agent.calls) == calls, (done.stdout, h.agent.calls[-1])  # no hand-off
    assert base(h) == pytest.approx((1.15, 1.2))
    assert 'goal.pose.position.x edited +0.15' in done.stdout, done.stdout


def test_an_edited_goal_imported_replays_as_edited_in_an_approval_gated_cache(h):
    text = export(h, 'fetch')
    tree = edited(h, 'fetch_import.bt.yaml', move_goal(text, 2, 'x', 1.0, 1.15))
    store = h.tmp / 'imported.db'
    assert main(['import', str(store), str(tree), '--who', 'carol']) == 0
    h.stop_cache()
    try:
        h.start_cache(store_path=str(store), replay_requires='approval',
                      cache_mode='replay_only')
        # the edit brings the shelf goal within max_offset of the tag (0.45 m): the cache's
        # params file binds it to the tag, a declared binding carol's approval did not see
        h.robot.reset()
        result = h.run_task('fetch', json.dumps({'bin': 2}))
        assert not result.result.cache_hit
        assert re.search(r'gate: the declared binding goal.pose.position.x <- sensor:tag\[0\] '
                         r'\(max_shift 0.1\) on learned step 3 of trajectory 1 is not among '
                         r"those carol's approval", result.result.message), result.result.message
        assert main(['approve', str(store), 'fetch', '--who', 'carol', '--params',
                     str(h.tmp / 'params.yaml'), '--node-name', h.names.node]) == 0
        h.robot.reset()
        calls = len(h.agent.calls)
        result = h.run_task('fetch', json.dumps({'bin': 2}))
        assert result.result.cache_hit, result.result.message
        assert len(h.agent.calls) == calls
        assert base(h) == pytest.approx((1.15, 1.2))
    finally:
        h.stop_cache()
        h.start_cache(**{'bindings.shelf_y': {'tool': 'goto', 'field': 'goal.pose.position.y',
                                              'source': 'param:shelf[1]'}})


def test_an_edit_of_a_bound_goal_field_is_refused_by_run_bt_and_import(h):
    text = export(h, 'shelf')
    assert '# params: shelf[1] bound' in text
    tree = edited(h, 'shelf_y.bt.yaml', move_goal(text, 2, 'y', 1.8, 1.95))
    calls, gotos = len(h.agent.calls), len(h.robot.gotos)
    done = run_bt(h, tree)
    assert done.returncode == 1
    assert re.search(r'step 2 \(learned step \d+\): goal.pose.position.y is bound to '
                     r'param:shelf\[1\]; edit params, not the goal', done.stderr), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert len(h.robot.gotos) == gotos and len(h.agent.calls) == calls  # nothing moved
    assert main(['import', str(h.tmp / 'refused.db'), str(tree), '--who', 'carol']) == 1
    assert not (h.tmp / 'refused.db').exists()


def imported_run(h: MobileHarness, tree: Path, store: Path, runs: list[list[float]]):
    """
    Import ``tree`` into ``store``; run the shelf task with each params: (hit, base) each.

    The cache replays only (a miss is not handed to the agent, nothing is learned).
    """
    assert main(['import', str(store), str(tree), '--who', 'carol']) == 0
    h.stop_cache()
    out = []
    try:
        h.start_cache(store_path=str(store), cache_mode='replay_only', **{
            'bindings.shelf_y': {'tool': 'goto', 'field': 'goal.pose.position.y',
                                 'source': 'param:shelf[1]'}})
        for shelf in runs:
            h.robot.reset()
            result = h.run_task('shelf', json.dumps({'shelf': shelf}))
            assert result.result.success == result.result.cache_hit, result.result.message
            out.append((result.result.cache_hit, base(h)))
    finally:
        h.stop_cache()
        h.start_cache(**{'bindings.shelf_y': {'tool': 'goto', 'field': 'goal.pose.position.y',
                                              'source': 'param:shelf[1]'}})
    return out


def test_imported_params_edits_are_filed_where_a_run_with_them_looks(h):
    text = export(h, 'shelf')
    old = 'params:\n  shelf: [1.0, 1.8]'
    assert old in text, text[:1500]
    # a bound leaf edited: the bound tree, its goal and what followed it moved to 2.1
    tree = edited(h, 'shelf_21.bt.yaml', text.replace(old, 'params:\n  shelf: [1.0, 2.1]'))
    (hit, at), = imported_run(h, tree, h.tmp / 'shelf_21.db', [[1.0, 2.1]])
    assert hit and at == pytest.approx((1.0, 2.1))
    # a leaf the tree holds literal (x = shelf[0] once, which is no evidence): run-bt asks
    # the agent for this document, so the import refuses it (it would replay in the cache)
    tree = edited(h, 'shelf_x.bt.yaml', text.replace(old, 'params:\n  shelf: [1.2, 1.8]'))
    assert main(['import', str(h.tmp / 'shelf_x.db'), str(tree), '--who', 'carol']) == 1
    assert not (h.tmp / 'shelf_x.db').exists()


def decisions(h: MobileHarness, calls: int, gotos: int) -> tuple[list, list]:
    """Return (goto goals x, y since ``gotos``, agent resume steps since ``calls``)."""
    sent = [(round(x, 4), round(y, 4)) for x, y, _, _ in h.robot.gotos[gotos:]]
    return sent, [c.resume_from_step for c in h.agent.calls[calls:]]


INPUTS = [
    ('as recorded', SHELF, TAG_HOME),
    ('bound leaf changed', [1.0, 1.95], TAG_HOME),
    ('tag moved 5 cm', SHELF, (TAG_HOME[0] + 0.05, TAG_HOME[1])),
    ('bound leaf changed, tag moved 5 cm', [1.0, 1.6], (TAG_HOME[0], TAG_HOME[1] - 0.05)),
    # misses last: the cache learns from its agent (a miss is handed to it only while
    # learning), and neither recording changes what the earlier inputs ran
    ('literal leaf changed', [1.1, 1.8], TAG_HOME),
    ('tag moved 15 cm', SHELF, (TAG_HOME[0] + 0.15, TAG_HOME[1])),
]
"""(what, shelf params, where the tag is): the same tree and world for the cache and run-bt."""


def test_run_bt_decides_as_the_cache_on_the_same_tree_and_inputs(h):
    text = export(h, 'shelf')
    old = 'params:\n  shelf: [1.0, 1.8]'
    for name, shelf, tag in INPUTS:
        h.robot.reset(tag)
        calls, gotos = len(h.agent.calls), len(h.robot.gotos)
        result = h.run_task('shelf', json.dumps({'shelf': shelf}))
        assert result.result.success, (name, result.result.message)
        cache = decisions(h, calls, gotos)
        tree = edited(h, 'shelf_in.bt.yaml',
                      text.replace(old, f'params:\n  shelf: {json.dumps(shelf)}'))
        calls, gotos = len(h.agent.calls), len(h.robot.gotos)
        done = run_bt(h, tree, tag)
        assert done.returncode == 0, (name, done.stdout + done.stderr)
        assert decisions(h, calls, gotos) == cache, (name, done.stdout, cache)
