"""
Tree writes of the SQLite store, as plain functions of a connection.

The caller holds the write transaction; every function here only issues SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
import json
import sqlite3
import time

from .base import step_signature
from .codec import step_row, TRAJ_COLS, trajectory_from_row
from ..errors import UnknownTrajectoryError
from ..records import Step, TrajectoryInfo

__all__ = ['check_parent', 'merge', 'prune']


def check_parent(conn: sqlite3.Connection, task: str, variant: str, parent: int | None) -> None:
    """Raise if ``parent`` is not a node of (task, variant)."""
    if parent is None:
        return
    row = conn.execute('SELECT task, variant FROM nodes WHERE id = ?',
                       (parent,)).fetchone()
    if row is None:
        raise UnknownTrajectoryError(f'no node with id {parent}')
    if tuple(row) != (task, variant):
        raise ValueError(f'node {parent} belongs to task {row[0]!r}, not {task!r}')


def merge(
    conn: sqlite3.Connection, task: str, variant: str, params_json: str, parent: int | None,
    steps: Sequence[Step], *, allow_pickle: bool = False,
) -> tuple[TrajectoryInfo, list[int]]:
    """Insert/reuse nodes and the trajectory; caller holds the write transaction."""
    if not steps and parent is None:
        raise ValueError('cannot commit an empty trajectory at the root')
    check_parent(conn, task, variant, parent)
    now = time.time()
    path: list[int] = []
    cursor = parent
    while cursor is not None:
        path.append(cursor)
        cursor = conn.execute('SELECT parent FROM nodes WHERE id = ?', (cursor,)).fetchone()[0]
    path.reverse()
    depth = len(path)
    cursor = parent
    for step in steps:
        sig = step_signature(step)
        row = None
        if sig is not None:
            row = conn.execute(
                'SELECT id FROM nodes WHERE task = ? AND variant = ? AND parent IS ?'
                ' AND sig = ? LIMIT 1', (task, variant, cursor, sig)).fetchone()
        if row is not None:
            nid = row[0]
        else:
            nid = conn.execute(
                'INSERT INTO nodes (task, variant, parent, depth, tool, kind, type_name,'
                ' payload, payload_json, pre, post, status, duration, sig, success_count,'
                ' last_used, terminal) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,0,?,0)',
                (task, variant, cursor, depth, *step_row(step, allow_pickle), sig, now)).lastrowid
        path.append(nid)
        cursor = nid
        depth += 1
    conn.executemany('UPDATE nodes SET success_count = success_count + 1, last_used = ?'
                     ' WHERE id = ?', [(now, nid) for nid in path])
    leaf = path[-1]
    conn.execute('UPDATE nodes SET terminal = 1 WHERE id = ?', (leaf,))
    row = conn.execute(f'SELECT {TRAJ_COLS} FROM trajectories WHERE leaf = ?',
                       (leaf,)).fetchone()
    if row is not None:
        conn.execute('UPDATE trajectories SET last_used = ? WHERE id = ?', (now, row[0]))
        info = replace(trajectory_from_row(row), last_used=now)
    else:
        tid = conn.execute(
            'INSERT INTO trajectories (task, variant, params_json, leaf, node_ids, created,'
            ' last_used, replay_count) VALUES (?,?,?,?,?,?,?,0)',
            (task, variant, params_json, leaf, json.dumps(path), now, now)).lastrowid
        info = TrajectoryInfo(id=tid, task=task, variant=variant, params_json=params_json,
                              node_ids=tuple(path), created=now, last_used=now)
    return info, path


def prune(conn: sqlite3.Connection, leaf: int) -> None:
    """Drop ``leaf`` and its ancestors while no other trajectory needs them."""
    conn.execute('UPDATE nodes SET terminal = 0 WHERE id = ?', (leaf,))
    cursor: int | None = leaf
    while cursor is not None:
        row = conn.execute('SELECT parent, terminal FROM nodes WHERE id = ?',
                           (cursor,)).fetchone()
        busy = conn.execute('SELECT 1 FROM nodes WHERE parent = ? LIMIT 1',
                            (cursor,)).fetchone()
        if row is None or row[1] or busy:
            return
        conn.execute('DELETE FROM nodes WHERE id = ?', (cursor,))
        cursor = row[0]
