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
The muscle-mem command line on a real SQLite store: tables, JSON, forget, and bad input.

Commands run in this process through ``main(argv)`` (output captured), and once
through the installed console script. Every read-only command is checked to leave
the store file's bytes and mtime as they were.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
import shutil
import sqlite3
import struct
import subprocess

from cli_helpers import FIB, FIB_TYPE, fingerprint, REPEATS, ROOT_DIVERGENCES
from core_helpers import subprocess_env
from muscle_mem_interfaces.action import ExecuteTask
from muscle_mem_ros.cli import main
from muscle_mem_ros.cli.runtask import feedback_line
from muscle_mem_ros.errors import StoreAccessError
from muscle_mem_ros.records import Snapshot, Step, ToolKind
from muscle_mem_ros.ros.messages.cdr import canonical_cdr
from muscle_mem_ros.store import SqliteStore
import pytest
from rclpy.serialization import serialize_message
from test_msgs.action import Fibonacci
import yaml

PICK_TRAJECTORIES = REPEATS + ROOT_DIVERGENCES + 1


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture, *argv: str):
    code, out, err = run(capsys, *argv, '--json')
    assert code == 0, err
    return json.loads(out)


def test_tasks_lists_every_task_with_its_counters(capsys, store):
    before = fingerprint(store)
    rows = {r['task']: r for r in run_json(capsys, 'tasks', str(store))}
    assert set(rows) == {'pick', 'wave'}
    pick = rows['pick']
    assert pick['params'] == ['{"bin":3}']
    assert pick['trajectories'] == PICK_TRAJECTORIES
    # 10 repeats (2 nodes each) + 2 root divergences (2 each) + 1 step-1 divergence.
    assert pick['steps'] == 2 * (REPEATS + ROOT_DIVERGENCES) + 1
    assert (pick['hits'], pick['misses'], pick['replays']) == (3, 1, 1)
    assert pick['last_used'] > 0
    assert rows['wave']['trajectories'] == 1
    code, out, _ = run(capsys, 'tasks', str(store))
    assert code == 0
    assert 'trajectories' in out and 'pick' in out and '{"bin":3}' in out
    assert fingerprint(store) == before


def test_tree_shows_branches_and_where_trajectories_end(capsys, store):
    before = fingerprint(store)
    (tree,) = run_json(capsys, 'tree', str(store), 'pick')
    assert tree['params'] == '{"bin":3}'
    assert len(tree['trajectories']) == PICK_TRAJECTORIES
    roots = tree['steps']
    assert len(roots) == REPEATS + ROOT_DIVERGENCES
    first = roots[0]
    assert first['tool'] == '/arm/follow_joint_trajectory' and first['step'] == 0
    assert first['goal'] == 'positions=[0.5, 0.2, 0.1]'
    assert [c['goal'] for c in first['children']] == ['order=5', 'order=7']
    assert all(c['ends_trajectory'] for c in first['children'])
    assert first['ends_trajectory'] is None
    # The first run's nodes: recorded, replayed once, and a branch learned under its root.
    assert first['successes'] == 3
    assert first['children'][0]['successes'] == 2
    code, out, _ = run(capsys, 'tree', str(store), 'pick')
    assert code == 0
    assert out.count('/fib') == PICK_TRAJECTORIES
    assert '-> trajectory' in out
    assert fingerprint(store) == before


def test_show_prints_goals_and_snapshots(capsys, store):
    before = fingerprint(store)
    (traj,) = run_json(capsys, 'show', str(store), 'wave')
    (step,) = traj['steps']
    assert step['goal'] == {'data': True}
    assert step['kind'] == 'service' and step['type'] == 'std_srvs/srv/SetBool'
    assert step['pre'] == {'joints': [0.1, -0.4, 0.7]}
    branch = str(traj['trajectory'] - 1)
    (one,) = run_json(capsys, 'show', str(store), 'pick', '--trajectory', branch)
    assert [s['tool'] for s in one['steps']] == ['/arm/follow_joint_trajectory', '/fib']
    assert one['steps'][1]['goal'] == {'order': 7}
    assert set(one['steps'][1]['pre']) == {'joints', 'object'}
    code, out, _ = run(capsys, 'show', str(store), 'wave')
    assert code == 0
    assert 'goal: {data: true}' in out and 'joints: [0.1, -0.4, 0.7]' in out
    assert fingerprint(store) == before


def test_stats_counts_the_store(capsys, store):
    before = fingerprint(store)
    data = run_json(capsys, 'stats', str(store))
    assert data['tasks'] == 2
    assert data['trajectories'] == PICK_TRAJECTORIES + 1
    assert data['hit_rate'] == 0.75
    assert data['file_bytes'] == store.stat().st_size
    assert data['incomplete_recordings'] == 0
    code, out, _ = run(capsys, 'stats', str(store))
    assert code == 0 and '75.0%' in out
    assert fingerprint(store) == before


def test_forget_with_yes_removes_one_trajectory_then_a_task(capsys, store):
    (traj,) = run_json(capsys, 'show', str(store), 'wave')
    data = run_json(capsys, 'forget', str(store), 'pick', '--trajectory', '2', '--yes')
    assert data['removed'] == 1
    rows = {r['task']: r for r in run_json(capsys, 'tasks', str(store))}
    assert rows['pick']['trajectories'] == PICK_TRAJECTORIES - 1
    code, out, _ = run(capsys, 'forget', str(store), 'wave', '--yes')
    assert code == 0 and 'forgot 1' in out
    assert 'wave' not in {r['task'] for r in run_json(capsys, 'tasks', str(store))}
    assert traj['trajectory'] > 0


def test_forget_without_yes_and_no_terminal_refuses(capsys, store, monkeypatch):
    monkeypatch.setattr('sys.stdin.isatty', lambda: False)
    before = fingerprint(store)
    code, out, err = run(capsys, 'forget', str(store), 'pick')
    assert code == 1 and out == ''
    assert '--yes' in err and len(err.strip().splitlines()) == 1
    assert fingerprint(store) == before


def test_forget_asks_and_a_no_keeps_everything(capsys, store, monkeypatch):
    monkeypatch.setattr('sys.stdin.isatty', lambda: True)
    monkeypatch.setattr('builtins.input', lambda prompt: 'n')
    before = fingerprint(store)
    code, _, err = run(capsys, 'forget', str(store), 'pick')
    assert code == 1 and 'nothing forgotten' in err
    assert fingerprint(store) == before


@pytest.mark.parametrize('argv, words', [
    (('tree', '{store}', 'place'), ("unknown task 'place'", 'pick, wave')),
    (('show', '{store}', 'pick', '--trajectory', '999'), ('no trajectory 999',)),
    (('forget', '{store}', 'place', '--yes'), ("unknown task 'place'",)),
    (('forget', '{store}', 'wave', '--trajectory', '3', '--yes'), ('no trajectory 3',)),
    (('export', '{store}', 'place', '--mcap', '{tmp}/out.mcap'), ("unknown task 'place'",)),
    (('calibrate', '{store}', 'place'), ("unknown task 'place'",)),
    (('calibrate', '{store}', 'pick', '--sensor', 'lidar'), ("'lidar'", 'joints, object')),
])
def test_bad_input_is_one_line_and_the_store_is_untouched(capsys, store, tmp_path, argv, words):
    before = fingerprint(store)
    code, out, err = run(capsys, *(a.format(store=store, tmp=tmp_path) for a in argv))
    assert code == 1
    assert out == ''
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f'muscle-mem {argv[0]}: error: ')
    for word in words:
        assert word in lines[0]
    assert fingerprint(store) == before
    assert not (tmp_path / 'out.mcap').exists()


def _newer_schema(path: Path) -> None:
    with open(path, 'r+b') as f:
        f.seek(60)
        f.write(struct.pack('>I', 99))


def _foreign_sqlite(path: Path) -> None:
    path.unlink()
    conn = sqlite3.connect(path)
    conn.execute('CREATE TABLE t (x)')
    conn.commit()
    conn.close()


@pytest.mark.parametrize('make, words', [
    (lambda p: p.write_text('not a store\n' * 50), ('not an SQLite file',)),
    (_newer_schema, ('schema version 99 is newer',)),
    (_foreign_sqlite, ('not a muscle_mem_ros store',)),
])
@pytest.mark.parametrize('command', ['tasks', 'stats', 'tree', 'forget'])
def test_a_file_that_is_not_a_usable_store_is_refused_untouched(
        capsys, store, make, words, command):
    make(store)
    before = fingerprint(store)
    argv = [command, str(store)] + (['pick'] if command in ('tree', 'forget') else []) + (
        ['--yes'] if command == 'forget' else [])
    code, out, err = run(capsys, *argv)
    assert code == 1 and out == ''
    assert len(err.strip().splitlines()) == 1
    for word in words:
        assert word in err
    assert fingerprint(store) == before


def test_a_missing_store_is_not_created(capsys, tmp_path):
    path = tmp_path / 'nothing.db'
    code, _, err = run(capsys, 'tasks', str(path))
    assert code == 1 and 'no store there' in err
    assert not path.exists()


def test_read_only_store_never_writes(store):
    before = fingerprint(store)
    with SqliteStore(path=store, read_only=True) as ro:
        assert ro.read_only
        assert ro.tasks()
        with pytest.raises(StoreAccessError, match='read-only'):
            ro.forget(task='pick')
        with pytest.raises(StoreAccessError, match='read-only'):
            ro.begin(task='pick', variant='{}', params_json='{}')
        with pytest.raises(StoreAccessError, match='read-only'):
            ro.add_trajectory(task='x', variant='', params_json='{}', steps=[Step(
                tool='t', kind=ToolKind.ACTION, type_name='a/action/B', payload=b'\0',
                pre=Snapshot(features={'a': (1.0,)}))])
    assert fingerprint(store) == before
    assert not (store.parent / (store.name + '-owners')).exists()


def test_read_only_open_keeps_abandoned_recordings(store):
    with SqliteStore(path=store) as rw:
        rw.begin(task='pick', variant='{}', params_json='{}').append(Step(
            tool='t', kind=ToolKind.ACTION, type_name='a/action/B', payload=b'\0'))
        rw._owner.release()  # the recording's process "stopped"
    before = fingerprint(store)
    with SqliteStore(path=store, read_only=True) as ro:
        (info,) = ro.incomplete_recordings()
        assert not info.live
    with SqliteStore(path=store, read_only=True, abandoned_retention=0.0) as ro:
        assert ro.purged == 0 and len(ro.incomplete_recordings()) == 1
    assert fingerprint(store) == before


def test_console_script_is_installed_and_runs(store):
    (script,) = importlib.metadata.entry_points(group='console_scripts', name='muscle-mem')
    assert script.value == 'muscle_mem_ros.cli:main'
    path = shutil.which('muscle-mem')
    argv = [path] if path else ['python3', '-m', 'muscle_mem_ros.cli']
    done = subprocess.run([*argv, 'tasks', str(store), '--json'], capture_output=True,
                          text=True, env=subprocess_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert {r['task'] for r in json.loads(done.stdout)} == {'pick', 'wave'}
    done = subprocess.run([*argv, 'tasks', str(store.with_name('missing.db'))],
                          capture_output=True, text=True, env=subprocess_env(), timeout=60)
    assert done.returncode == 1 and done.stdout == ''
    assert done.stderr.startswith('muscle-mem tasks: error: ')


def test_tree_shows_the_bindings_the_node_would_use(capsys, tmp_path):
    path = tmp_path / 'cache.db'
    goal = Fibonacci.Goal(order=6)
    with SqliteStore(path=path) as db:
        db.add_trajectory(task='count', variant='{"n":6}', params_json='{"n":6}', steps=[Step(
            tool=FIB, kind=ToolKind.ACTION, type_name=FIB_TYPE,
            payload=canonical_cdr(bytes(serialize_message(goal)), Fibonacci.Goal),
            payload_json='{"order": 6}', pre=Snapshot(features={'joints': (0.0,)}))])
    before = fingerprint(path)
    (tree,) = run_json(capsys, 'tree', str(path), 'count')
    (step,) = tree['steps']
    assert step['bindings'] == [{'field': 'order', 'source': 'param:n', 'offset': 0.0,
                                 'max_shift': None, 'origin': 'inferred'}]
    code, out, _ = run(capsys, 'tree', str(path), 'count')
    assert code == 0 and 'bound: order<-param:n' in out
    params = tmp_path / 'params.yaml'
    params.write_text(yaml.safe_dump({'muscle_mem': {'ros__parameters': {
        'infer_bindings': False, 'sensors': {'joints': {'tolerance': 0.1}}}}}))
    (tree,) = run_json(capsys, 'tree', str(path), 'count', '--params', str(params))
    assert tree['steps'][0]['bindings'] == []
    assert fingerprint(path) == before


def test_trust_lists_the_shadow_counts_of_each_inferred_binding(capsys, store):
    with SqliteStore(path=store) as db:
        first, second = db.trajectories(task='pick')[:2]
        node = first.node_ids[-1]  # the Fibonacci step, on the first trajectory only
        assert node not in second.node_ids
        field = 'order'
        for agreed in (True, True, False):
            db.note_shadow(task='pick', trajectory_id=first.id, agreed=agreed,
                           bindings=[(node, field, agreed)])
        depth = db.node(node).depth
    rows = {r['trajectory']: r for r in run_json(capsys, 'trust', str(store), 'pick')}
    assert (rows[first.id]['shadow_runs'], rows[first.id]['shadow_agreed']) == (3, 2)
    assert rows[first.id]['bindings'] == [{'step': depth, 'node': node, 'field': field,
                                           'source': '',  # learned only with a params file
                                           'shadow_runs': 3, 'shadow_agreed': 2}]
    assert rows[second.id]['bindings'] == []
    code, out, _ = run(capsys, 'trust', str(store), 'pick')
    assert code == 0 and 'inferred bindings' in out
    line = next(x for x in out.splitlines() if f' {field} ' in x)
    cells = [c.strip() for c in line.strip().strip('│').split('│')]
    assert cells == [str(depth), str(node), field, str(first.id), '3', '2', '67%'], line


def test_run_says_each_feedback_step_once():
    fb = ExecuteTask.Feedback
    # the cache's own details start with their step (ExecuteTask.action); an agent's may not
    assert feedback_line(fb(mode=fb.MODE_REPLAY, step=0, total=4,
                            detail='step 0: /gantry/goto')) == '[replay] step 0: /gantry/goto'
    assert feedback_line(fb(mode=fb.MODE_REPLAY, step=1, total=2, detail='step 1: /arm ok',
                            task='pick', depth=1)) == '[replay] step 1 (pick): /arm ok'
    assert feedback_line(fb(mode=fb.MODE_AGENT, step=2, total=-1,
                            detail='planning the place')) == '[agent] step 2: planning the place'
