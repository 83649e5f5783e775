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
The body a branch was learned on: fingerprint, stores, the filter every run reads, migrations.

A trajectory replays only on the body it was learned on, on one declared compatible
with it, or anywhere when its body is unknown (learned before bodies were recorded).
"""

from __future__ import annotations

import json
import sqlite3

from muscle_mem_ros.body import (ANY_BODY, anywhere, Body, body_of, Compatibility, kin,
                                 normalised, resolve, shown)
from muscle_mem_ros.cli import main
from muscle_mem_ros.records import Snapshot, Step, ToolKind
from muscle_mem_ros.replay.gates import Gate, gate_tree
from muscle_mem_ros.replay.treeview import Trees
from muscle_mem_ros.store import MemoryStore, PostgresStore, SqliteStore
from muscle_mem_ros.store import schema
from muscle_mem_ros.store.postgres import schema as pgschema
from pg_server import pg_server  # noqa: F401 (fixture)
import pytest

PANDA = """<?xml version="1.0"?>
<robot name="panda">
  <!-- calibrated 2026-11-01 -->
  <joint name="j1" type="revolute"><origin xyz="0 0 0.333" rpy="0 0 0"/></joint>
  <joint name="j2" type="revolute"><origin xyz="0 0 0" rpy="-1.5708 0 0"/></joint>
</robot>
"""
PANDA_LAID_OUT = ('<robot name="panda"><joint type="revolute" name="j1">'
                  '<origin rpy="0 0 0" xyz="0 0 0.333"/></joint>'
                  '<joint name="j2" type="revolute"><origin xyz="0 0 0" rpy="-1.5708 0 0"/>'
                  '</joint></robot>')
PANDA_RECALIBRATED = PANDA.replace('0.333', '0.334')
UR5E = '<robot name="ur5e"><joint name="shoulder_pan_joint" type="revolute"/></robot>'
JOINTS = {'joints': ('j1', 'j2')}
TOOLS = [('/arm/follow_joint_trajectory', 'control_msgs/action/FollowJointTrajectory')]


def body(description: str = PANDA, joints=None, tools=None, name: str = '') -> Body:
    return body_of(description=description, joints=JOINTS if joints is None else joints,
                   tools=TOOLS if tools is None else tools, name=name, fallback='muscle_mem')


def step(tool: str, x: float = 0.0) -> Step:
    return Step(tool=tool, kind=ToolKind.ACTION, type_name='pkg/action/A',
                payload=tool.encode(), payload_json='{}',
                pre=Snapshot(features={'q': (x, 1.0)}), post=Snapshot(features={'q': (x, 2.0)}))


def learn(store, on: Body | None, tools=('a', 'b'), task='t'):
    rec = store.begin(task=task, variant='', params_json='{}',
                      body='' if on is None else on.key)
    for tool in tools:
        rec.append(step(tool))
    return rec.commit()


# -- the fingerprint ---------------------------------------------------------------------


def test_a_body_is_named_by_its_description_and_4_hex_digits_and_kept_with_16():
    panda = body()
    assert panda.name == 'panda' and len(panda.digest) == 16
    assert str(panda) == f'panda@{panda.digest[:4]}' and panda.key == f'panda@{panda.digest}'
    assert Body.parse(panda.key) == panda and Body.parse('') is None
    assert shown(panda.key) == str(panda) and shown('') == 'unknown'
    mjcf = body('<mujoco model="fr3"><worldbody/></mujoco>')
    sdf = body('<sdf version="1.9"><model name="kinova_gen3"/></sdf>')
    assert (mjcf.name, sdf.name) == ('fr3', 'kinova_gen3')
    assert body('').name == 'muscle_mem'  # no description: the node's name
    assert body(name='left_arm').name == 'left_arm'
    assert body(name='left_arm').digest == panda.digest  # a name only renames


def test_layout_comments_and_attribute_order_do_not_make_another_body():
    assert normalised(PANDA) == normalised(PANDA_LAID_OUT)
    assert body(PANDA) == body(PANDA_LAID_OUT)
    assert normalised('  a: 1\n\n   b: 2  ') == 'a: 1\nb: 2'  # text, line by line


def test_a_number_joint_names_or_tools_make_another_body():
    panda = body()
    assert body(PANDA_RECALIBRATED).digest != panda.digest
    assert body(PANDA_RECALIBRATED).name == 'panda'
    assert body(joints={'joints': ('j2', 'j1')}).digest != panda.digest  # the order counts
    assert body(joints={}).digest != panda.digest
    assert body(tools=[('/arm/follow_joint_trajectory', 'demo/action/Other')]).digest != \
        panda.digest
    assert body(tools=list(reversed(TOOLS + [('/grip', 'std_srvs/srv/SetBool')]))) == \
        body(tools=TOOLS + [('/grip', 'std_srvs/srv/SetBool')])  # their order does not
    assert body(UR5E).digest != panda.digest and body(UR5E).name == 'ur5e'


def test_compatibility_is_transitive_and_an_unknown_body_is_seen_by_all():
    a, b, c, d = (body(PANDA.replace('0.333', f'0.33{i}')) for i in range(4))
    pairs = [Compatibility(a.key, b.key, 'carol', 1.0), Compatibility(c.key, b.key, 'dave', 2.0)]
    seen = kin(a, pairs)
    assert seen.sees(b.key) and seen.sees(c.key) and not seen.sees(d.key)
    assert seen.sees('')
    assert kin(d, pairs).digests == {d.digest}
    assert seen.reason(d.key) == f'learned on {d}, this robot is {a}'


def test_a_person_names_a_body_as_the_cli_shows_it():
    panda, ur5e = body(), body(UR5E)
    known = [panda.key, ur5e.key, '']
    assert resolve(str(panda), known) == panda.key
    assert resolve(panda.digest[:6], known) == panda.key
    new = body(PANDA_RECALIBRATED)
    assert resolve(new.key, known) == new.key  # a full key: a robot that learned nothing yet
    with pytest.raises(ValueError, match='names no body of this store'):
        resolve(str(new), known)
    with pytest.raises(ValueError, match='is not a body'):
        resolve('panda@', known)
    with pytest.raises(ValueError, match='names no body of this store'):
        resolve('panda', known)  # a name alone: which of its bodies?


# -- stores ------------------------------------------------------------------------------


@pytest.fixture(params=['memory', 'sqlite'])
def store(request, tmp_path):
    made = MemoryStore() if request.param == 'memory' else SqliteStore(path=tmp_path / 'c.db')
    yield made
    made.close()


def test_each_trajectory_keeps_its_body_and_two_bodies_never_share_a_branch(store):
    panda, ur5e = body(), body(UR5E)
    first = learn(store, panda)
    again = learn(store, panda)
    other = learn(store, ur5e)  # byte-identical goals and snapshots, another body
    legacy = learn(store, None)
    assert again.id == first.id  # the same body dedupes
    assert other.id != first.id and not set(other.node_ids) & set(first.node_ids)
    assert (first.body, other.body, legacy.body) == (panda.key, ur5e.key, '')
    assert store.trajectory(other.id).body == ur5e.key
    assert store.bodies() == {panda.key: 1, ur5e.key: 1, '': 1}
    assert store.compatible_bodies() == []
    pair = store.declare_compatible(a=ur5e.key, b=panda.key, who='carol')
    assert (pair.a, pair.b) == tuple(sorted((panda.key, ur5e.key))) and pair.who == 'carol'
    store.declare_compatible(a=panda.key, b=ur5e.key, who='dave')  # the same pair, again
    assert [(p.a, p.b, p.who) for p in store.compatible_bodies()] == [(pair.a, pair.b, 'dave')]
    added = store.add_trajectory(task='t', variant='', params_json='{}',
                                 steps=[step('c')], body=ur5e.key)
    assert store.trajectory(added.id).body == ur5e.key


def test_a_run_sees_only_its_body_and_the_gate_says_which_bodies_differ(store):
    panda, ur5e = body(), body(UR5E)
    mine = learn(store, panda)
    theirs = learn(store, ur5e, tools=('x',))
    old = learn(store, None, tools=('old',))
    trees = Trees(store, body=ur5e)
    view = trees.view('t', '')
    assert [t.id for t in view.trajectories] == [theirs.id, old.id]
    assert [t.id for t in view.foreign] == [mine.id]
    assert view.nodes == frozenset(theirs.node_ids + old.node_ids)
    trust = gate_tree(Gate(), store, view)
    assert trust.nodes == view.nodes and trust.reasons == {}
    assert trust.foreign == {mine.id: f'learned on {panda}, this robot is {ur5e}'}
    assert trust.held() == f'learned on {panda}, this robot is {ur5e}'
    assert trees.visible('t', '') == view.nodes
    shadowed = gate_tree(Gate.parse('shadow:1'), store, view)
    assert shadowed.nodes == frozenset()  # nothing earned yet, nothing foreign
    assert shadowed.held().startswith('gate: trajectory') and str(panda) in shadowed.held()
    # without a body (the Python Engine, the CLI) every trajectory is seen
    everything = Trees(store).view('t', '')
    assert len(everything.trajectories) == 3 and everything.foreign == ()
    assert everything.nodes is None and gate_tree(Gate(), store, everything).nodes is None


def test_a_declaration_lets_a_recalibrated_arm_replay_at_its_next_run(store):
    before, after = body(), body(PANDA_RECALIBRATED)
    learned = learn(store, before)
    trees = Trees(store, body=after)
    assert [t.id for t in trees.view('t', '').foreign] == [learned.id]
    assert gate_tree(Gate(), store, trees.view('t', '')).nodes == frozenset()
    store.declare_compatible(a=before.key, b=after.key, who='carol')
    view = trees.view('t', '')  # the pairs are read with each view
    assert [t.id for t in view.trajectories] == [learned.id] and view.foreign == ()
    assert gate_tree(Gate(), store, view).nodes is None
    assert trees.visible('t', '') is None


def test_plans_are_learned_from_this_bodys_trajectories_only(store):
    panda, ur5e = body(), body(UR5E)
    for x in (0.0, 0.1):
        rec = store.begin(task='t', variant='', params_json='{}', body=ur5e.key)
        rec.append(Step(tool='a', kind=ToolKind.ACTION, type_name='pkg/action/A',
                        payload=b'a', payload_json=json.dumps({'x': x}),
                        pre=Snapshot(features={'q': (x, 1.0)})))
        rec.commit()
    learn(store, panda)
    trees = Trees(store, body=panda, tolerance=lambda key: 0.01)
    view = trees.view('t', '')
    assert len(view.trajectories) == 1
    assert set(view.plans) <= set(view.trajectories[0].node_ids)
    assert set(trees.plans('t', '')) <= set(view.trajectories[0].node_ids)


# -- migrations --------------------------------------------------------------------------


def test_a_version_10_sqlite_store_keeps_working_its_trajectories_of_an_unknown_body(tmp_path):
    path = tmp_path / 'old.db'
    with SqliteStore(path=path) as s:
        kept = learn(s, None)
    conn = sqlite3.connect(path)  # as schema 10 left it
    conn.execute('DROP TABLE compatible_bodies')
    conn.execute('ALTER TABLE trajectories DROP COLUMN body')
    conn.execute('PRAGMA user_version = 10')
    conn.close()
    with SqliteStore(path=path) as s:
        assert s.backup is not None and s.backup.name == 'old.db.v10.bak'
        assert s.trajectory(kept.id).body == '' and s.bodies() == {'': 1}
        panda = body()
        view = Trees(s, body=panda).view('t', '')
        assert [t.id for t in view.trajectories] == [kept.id] and view.foreign == ()
        s.declare_compatible(a=panda.key, b=body(UR5E).key, who='carol')
        assert learn(s, panda, tools=('z',)).body == panda.key
    conn = sqlite3.connect(path)
    assert conn.execute('PRAGMA user_version').fetchone()[0] == schema.SCHEMA_VERSION == 14
    conn.close()


def test_a_version_9_postgres_store_keeps_working_and_bodies_stay_apart(pg_server):  # noqa: F811
    import psycopg
    url = pg_server.new_url()
    with PostgresStore(url=url) as s:
        kept = learn(s, None)
    ns = pgschema.NAMESPACE
    with psycopg.connect(url, autocommit=True) as conn:  # as schema 9 left it
        conn.execute(f'DROP TABLE {ns}.compatible_bodies')
        conn.execute(f'ALTER TABLE {ns}.trajectories DROP COLUMN body')
        conn.execute(f'DELETE FROM {ns}.schema_version WHERE version > 9')
    panda, ur5e = body(), body(UR5E)
    with PostgresStore(url=url, robot_id='A') as a, PostgresStore(url=url, robot_id='B') as b:
        assert a.trajectory(kept.id).body == ''
        mine, theirs = learn(a, panda), learn(b, ur5e)
        assert not set(mine.node_ids) & set(theirs.node_ids)
        assert b.bodies() == {'': 1, panda.key: 1, ur5e.key: 1}
        seen_by_b = Trees(b, body=ur5e).view('t', '')
        assert {t.id for t in seen_by_b.trajectories} == {kept.id, theirs.id}
        assert [t.id for t in seen_by_b.foreign] == [mine.id]
        a.declare_compatible(a=panda.key, b=ur5e.key, who='carol')
        assert [p.who for p in b.compatible_bodies()] == ['carol']  # the fleet shares it
    with psycopg.connect(url, autocommit=True) as conn:
        versions = conn.execute(f'SELECT version FROM {ns}.schema_version ORDER BY version')
        assert [v[0] for v in versions.fetchall()] == [*range(1, pgschema.SCHEMA_VERSION + 1)]
    assert pgschema.SCHEMA_VERSION == 13


# -- the command line --------------------------------------------------------------------


def test_the_cli_shows_each_trajectorys_body_and_declares_two_compatible(tmp_path, capsys):
    path = tmp_path / 'c.db'
    panda, ur5e = body(), body(UR5E)
    with SqliteStore(path=path) as s:
        one, two, old = learn(s, panda), learn(s, ur5e), learn(s, None, tools=('o',))
    assert main(['bodies', str(path)]) == 0
    out = capsys.readouterr().out
    assert str(panda) in out and ur5e.key in out and 'replays on any body' in out
    assert main(['tree', str(path), 't']) == 0
    out = capsys.readouterr().out
    assert f'trajectory {one.id} on {panda}' in out and f'trajectory {two.id} on {ur5e}' in out
    assert f'trajectory {old.id} on unknown' in out
    assert main(['trust', str(path), 't', '--json']) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r['trajectory'], r['body']) for r in rows] == [
        (one.id, str(panda)), (two.id, str(ur5e)), (old.id, 'unknown')]
    assert main(['show', str(path), 't', '--trajectory', str(two.id)]) == 0
    assert f'body {ur5e}' in capsys.readouterr().out
    assert main(['bodies', str(path), '--compatible', str(panda), str(ur5e)]) != 0
    assert '--who' in capsys.readouterr().err
    assert main(['bodies', str(path), '--compatible', 'panda@ffff', str(ur5e),
                 '--who', 'carol']) != 0
    assert 'names no body of this store' in capsys.readouterr().err
    assert main(['bodies', str(path), '--compatible', str(panda), str(ur5e),
                 '--who', 'carol']) == 0
    assert 'are compatible (declared by carol)' in capsys.readouterr().out
    assert main(['stats', str(path), '--json']) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats['compatible_bodies'] == 1
    assert {b['body']: b['trajectories'] for b in stats['bodies']} == {
        str(panda): 1, str(ur5e): 1, 'unknown': 1}
    assert main(['stats', str(path)]) == 0
    assert f'{panda}: 1' in capsys.readouterr().out
    with SqliteStore(path=path) as s:
        pairs = [(p.a, p.b) for p in s.compatible_bodies()]
    assert pairs == [tuple(sorted((panda.key, ur5e.key)))]


def test_a_node_says_which_trajectories_replay_on_any_body_and_why():
    """Issue 43 item 10: an import is not 'learned before trajectories recorded their body'."""
    key = body().key
    assert anywhere({key: 3}) == []
    assert anywhere({'': 1, key: 2}) == [
        '1 trajectory learned before trajectories recorded their body: it replays on any '
        'body, as before']
    said = anywhere({ANY_BODY: 1, key: 2})
    assert said == ['1 trajectory imported for any body (its file recorded none): it replays '
                    'on any body']
    assert 'learned before' not in ' '.join(said)
    assert anywhere({'': 2, ANY_BODY: 3}) == [
        '2 trajectories learned before trajectories recorded their body: they replay on any '
        'body, as before',
        '3 trajectories imported for any body (their file recorded none): they replay on any '
        'body']
    assert shown(ANY_BODY) == 'any body (imported)' and Body.parse(ANY_BODY) is None
    assert kin(body(), []).sees(ANY_BODY)


def test_compatibility_is_transitive_and_a_declaration_is_revoked_with_a_name(store):
    """Issue 43 item 10: A~B and B~C make A see C (said); revoking one, named, undoes it."""
    a, b, c = body(), body(PANDA_RECALIBRATED), body(PANDA.replace('0.333', '0.3335'))
    store.declare_compatible(a=a.key, b=b.key, who='carol')
    store.declare_compatible(a=b.key, b=c.key, who='dave')
    assert kin(a, store.compatible_bodies()).sees(c.key)  # transitive
    gone = store.revoke_compatible(a=c.key, b=b.key, who='erin')
    assert (gone.a, gone.b, gone.who) == (*sorted((b.key, c.key)), 'erin')
    assert [(p.a, p.b) for p in store.compatible_bodies()] == [tuple(sorted((a.key, b.key)))]
    assert not kin(a, store.compatible_bodies()).sees(c.key)
    (revoked,) = store.revoked_bodies()
    assert (revoked.a, revoked.b, revoked.who) == (gone.a, gone.b, 'erin')
    with pytest.raises(ValueError, match='not declared compatible'):
        store.revoke_compatible(a=a.key, b=c.key, who='erin')


def test_the_cli_revokes_a_declaration_with_a_name_and_says_what_it_joined(tmp_path, capsys):
    path = tmp_path / 'c.db'
    a, b, c = body(), body(PANDA_RECALIBRATED), body(PANDA.replace('0.333', '0.3335'))
    with SqliteStore(path=path) as s:
        learn(s, a), learn(s, b), learn(s, c)
    assert main(['bodies', str(path), '--compatible', str(a), str(b), '--who', 'carol']) == 0
    capsys.readouterr()
    assert main(['bodies', str(path), '--compatible', str(b), str(c), '--who', 'dave']) == 0
    said = capsys.readouterr().out
    (line,) = [t for t in said.splitlines() if 'compatibility is transitive' in t]
    assert all(str(x) in line for x in (a, b, c)) and 'now replay each other' in line, said
    assert main(['bodies', str(path), '--revoke', str(b), str(c)]) != 0
    assert '--who' in capsys.readouterr().err
    assert main(['bodies', str(path), '--revoke', str(b), str(c), '--who', 'erin']) == 0
    said = capsys.readouterr().out
    assert 'are no longer compatible (revoked by erin' in said and str(b) in said and \
        str(c) in said, said
    assert main(['bodies', str(path)]) == 0
    said = capsys.readouterr().out
    assert 'revoked' in said and 'erin' in said, said
