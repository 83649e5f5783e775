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

"""``muscle-mem prune`` on SQLite and PostgreSQL: what goes, the question, approved ones named."""

from __future__ import annotations

import json
import sqlite3
import time

from muscle_mem_ros.cli import main
from muscle_mem_ros.records import Snapshot, Step, ToolKind
from muscle_mem_ros.store import open_store, SqliteStore
from pg_server import pg_server  # noqa: F401 (fixture)
import pytest

DAY = 86400.0


def _step(name: str) -> Step:
    return Step(tool=name, kind=ToolKind.ACTION, type_name='pkg/action/A',
                payload=name.encode(), payload_json='{}',
                pre=Snapshot(features={'q': (1.0,)}), post=Snapshot(features={'q': (2.0,)}))


def _age(spec: str, trajectory_id: int, days: float) -> None:
    """Make a trajectory last used ``days`` ago (as a store a robot left would have it)."""
    when = time.time() - days * DAY
    if '://' in spec:
        import psycopg
        from muscle_mem_ros.store.postgres import schema
        with psycopg.connect(spec, autocommit=True) as pg:
            pg.execute(f'UPDATE {schema.NAMESPACE}.trajectories SET last_used = %s'
                       ' WHERE id = %s', (when, trajectory_id))
        return
    conn = sqlite3.connect(spec)
    with conn:
        conn.execute('UPDATE trajectories SET last_used = ? WHERE id = ?', (when, trajectory_id))
    conn.close()


def _fill(spec: str) -> dict[str, int]:
    """Four trajectories of 'pick' (used 1, 10, 40, 90 days ago) and one of 'wave' (60)."""
    ids = {}
    with open_store(spec) as store:
        for name, days, task in (('a', 1, 'pick'), ('b', 10, 'pick'), ('c', 40, 'pick'),
                                 ('d', 90, 'pick'), ('w', 60, 'wave')):
            info = store.add_trajectory(task=task, variant='', params_json='{}',
                                        steps=[_step(name)])
            ids[name] = info.id
        store.approve(task='pick', trajectory_id=ids['c'], who='carol')
    for name, days in (('a', 1), ('b', 10), ('c', 40), ('d', 90), ('w', 60)):
        _age(spec, ids[name], days)
    return ids


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(params=['sqlite', 'postgres'])
def spec(request, tmp_path, pg_server):  # noqa: F811
    return str(tmp_path / 'cache.db') if request.param == 'sqlite' else pg_server.new_url()


def test_prune_shows_asks_names_the_approved_and_removes(capsys, spec, monkeypatch):
    ids = _fill(spec)
    monkeypatch.setattr('sys.stdin.isatty', lambda: True)
    asked = []
    monkeypatch.setattr('builtins.input', lambda prompt: asked.append(prompt) or 'n')
    code, out, err = _run(capsys, 'prune', spec, '--unused-for', '30')
    assert code == 1 and 'nothing removed' in err
    assert asked and f"3 trajectories, 1 of them APPROVED ({ids['c']})" in asked[0]
    for name in ('c', 'd', 'w'):
        assert str(ids[name]) in out
    assert 'carol' in out
    with open_store(spec) as store:
        assert len(store.trajectories()) == 5  # a no keeps everything
    monkeypatch.setattr('builtins.input', lambda prompt: 'y')
    code, out, _ = _run(capsys, 'prune', spec, 'pick', '--unused-for', '30')
    assert code == 0 and 'removed 2 trajectories, 1 of them APPROVED' in out
    with open_store(spec) as store:
        assert sorted(t.id for t in store.trajectories()) == sorted(
            [ids['a'], ids['b'], ids['w']])


def test_prune_keeps_the_most_recently_used_of_each_task(capsys, spec):
    ids = _fill(spec)
    code, out, err = _run(capsys, 'prune', spec, '--keep', '1', '--yes', '--json')
    assert code == 0, err
    data = json.loads(out)
    assert data['removed'] == 3
    assert sorted(r['trajectory'] for r in data['trajectories']) == sorted(
        [ids['b'], ids['c'], ids['d']])
    assert [r['approved_by'] for r in data['trajectories'] if r['trajectory'] == ids['c']] == [
        'carol']
    with open_store(spec) as store:
        assert sorted(t.id for t in store.trajectories()) == sorted([ids['a'], ids['w']])
    code, out, _ = _run(capsys, 'prune', spec, '--keep', '1', '--yes')
    assert code == 0 and 'nothing to prune' in out


def test_prune_refuses_without_a_terminal_or_a_rule(capsys, tmp_path, monkeypatch):
    spec = str(tmp_path / 'cache.db')
    _fill(spec)
    monkeypatch.setattr('sys.stdin.isatty', lambda: False)
    code, _, err = _run(capsys, 'prune', spec, '--unused-for', '30')
    assert code == 1 and '--yes' in err
    with pytest.raises(SystemExit):
        main(['prune', spec])  # one of --unused-for, --keep is required
    capsys.readouterr()
    code, _, err = _run(capsys, 'prune', spec, '--unused-for', '0', '--yes')
    assert code == 1 and '> 0 days' in err
    code, _, err = _run(capsys, 'prune', spec, 'nope', '--keep', '1', '--yes')
    assert code == 1 and "no trajectories of task 'nope'" in err
    with SqliteStore(path=tmp_path / 'cache.db') as store:
        assert len(store.trajectories()) == 5


def test_a_node_with_the_tree_open_sees_the_prune(capsys, tmp_path):
    spec = str(tmp_path / 'cache.db')
    ids = _fill(spec)
    with SqliteStore(path=tmp_path / 'cache.db') as watching:
        assert len(watching.children(task='pick', variant='', parent=None)) == 4
        code, _, err = _run(capsys, 'prune', spec, 'pick', '--unused-for', '30', '--yes')
        assert code == 0, err
        left = watching.children(task='pick', variant='', parent=None)
        assert sorted(n.id for n in left) == sorted(
            watching.trajectory(ids[k]).node_ids[0] for k in 'ab')
