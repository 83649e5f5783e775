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
Tree writes of the SQL stores, as plain functions of a connection.

The caller holds the write transaction; every function here only issues SQL.
The SQL is portable between SQLite and PostgreSQL (``?`` parameters, which the
PostgreSQL store's connection adapter rewrites; ``RETURNING id``; a root parent
compared with ``IS NULL``, any other with ``=``, so both use the index), and the
connection needs only ``execute`` (returning a cursor) and ``executemany``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
import json
from typing import Any, Protocol

from .codec import (NODE_COLS, node_from_row, STEP_COLS, step_row, TRAJ_COLS,
                    trajectory_from_row)
from .merge import merge_steps
from ..errors import UnknownTrajectoryError
from ..records import Step, TaskStats, TrajectoryInfo

__all__ = ['check_parent', 'children_rows', 'count_replay', 'forget', 'merge', 'node_rows',
           'parent_clause',
           'prune', 'prune_unused', 'recording_steps', 'tally', 'task_stats',
           'trajectory_rows']


class Connection(Protocol):
    """What the functions here use of a connection: SQLite's, or the PostgreSQL adapter."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any:
        """Run one statement; return a cursor."""

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]], /) -> Any:
        """Run one statement per row."""


def parent_clause(parent: int | None) -> tuple[str, tuple[int, ...]]:
    """Return the WHERE term and arguments selecting the children of ``parent`` (indexed)."""
    return ('parent IS NULL', ()) if parent is None else ('parent = ?', (parent,))


def check_parent(conn: Connection, task: str, variant: str, parent: int | None) -> None:
    """Raise if ``parent`` is not a node of (task, variant)."""
    if parent is None:
        return
    row = conn.execute('SELECT task, variant FROM nodes WHERE id = ?',
                       (parent,)).fetchone()
    if row is None:
        raise UnknownTrajectoryError(f'no node with id {parent}')
    if tuple(row) != (task, variant):
        raise ValueError(f'node {parent} belongs to task {row[0]!r}, not {task!r}')


class _SqlTree:
    """The SQL of a merge for one (task, variant): :class:`~.merge.TreeWriter`."""

    def __init__(self, conn: Connection, task: str, variant: str,
                 allow_pickle: bool, robot_id: str | None = None) -> None:
        """
        Write SQL through ``conn`` for one tree.

        :param robot_id: Also write this into the ``robot_id`` column of new nodes and
            trajectories (a store whose schema has it: PostgreSQL); None for none.
        """
        self._conn = conn
        self._task = task
        self._variant = variant
        self._allow_pickle = allow_pickle
        self._robot = () if robot_id is None else (robot_id,)
        self._robot_col = '' if robot_id is None else ', robot_id'
        self._robot_mark = '' if robot_id is None else ',?'

    def path_to(self, node: int) -> list[int]:
        path: list[int] = []
        cursor: int | None = node
        while cursor is not None:
            path.append(cursor)
            row = self._conn.execute('SELECT parent FROM nodes WHERE id = ?',
                                     (cursor,)).fetchone()
            cursor = None if row[0] is None else int(row[0])
        path.reverse()
        return path

    def child_with(self, parent: int | None, sig: str) -> int | None:
        where, args = parent_clause(parent)
        row = self._conn.execute(
            f'SELECT id FROM nodes WHERE task = ? AND variant = ? AND {where}'
            ' AND sig = ? LIMIT 1', (self._task, self._variant, *args, sig)).fetchone()
        return None if row is None else int(row[0])

    def add_node(self, parent: int | None, depth: int, step: Step, sig: str | None,
                 now: float) -> int:
        return int(self._conn.execute(
            f'INSERT INTO nodes (task, variant, parent, depth, {STEP_COLS}, sig,'
            f' success_count, last_used, terminal{self._robot_col})'
            f' VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0,?,0{self._robot_mark}) RETURNING id',
            (self._task, self._variant, parent, depth, *step_row(step, self._allow_pickle),
             sig, now, *self._robot)).fetchone()[0])

    def touch_path(self, path: Sequence[int], now: float) -> None:
        self._conn.executemany('UPDATE nodes SET success_count = success_count + 1,'
                               ' last_used = ? WHERE id = ?', [(now, nid) for nid in path])

    def mark_terminal(self, leaf: int) -> None:
        self._conn.execute('UPDATE nodes SET terminal = 1 WHERE id = ?', (leaf,))

    def trajectory_at(self, leaf: int) -> TrajectoryInfo | None:
        row = self._conn.execute(
            f'SELECT {TRAJ_COLS}{self._robot_col} FROM trajectories WHERE leaf = ?',
            (leaf,)).fetchone()
        return None if row is None else trajectory_from_row(row)

    def touch_trajectory(self, info: TrajectoryInfo, now: float) -> TrajectoryInfo:
        self._conn.execute('UPDATE trajectories SET last_used = ? WHERE id = ?', (now, info.id))
        return replace(info, last_used=now)

    def add_trajectory(self, params_json: str, path: Sequence[int],
                       now: float, body: str) -> TrajectoryInfo:
        tid = self._conn.execute(
            'INSERT INTO trajectories (task, variant, params_json, leaf, node_ids, created,'
            f' last_used, replay_count, body{self._robot_col})'
            f' VALUES (?,?,?,?,?,?,?,0,?{self._robot_mark}) RETURNING id',
            (self._task, self._variant, params_json, path[-1], json.dumps(list(path)), now,
             now, body, *self._robot)).fetchone()[0]
        return TrajectoryInfo(id=tid, task=self._task, variant=self._variant,
                              params_json=params_json, node_ids=tuple(path), created=now,
                              last_used=now, robot_id=self._robot[0] if self._robot else '',
                              body=body)


def merge(
    conn: Connection, task: str, variant: str, params_json: str, parent: int | None,
    steps: Sequence[Step], *, allow_pickle: bool = False, robot_id: str | None = None,
    body: str = '',
) -> tuple[TrajectoryInfo, list[int]]:
    """
    Insert or reuse nodes and the trajectory (:func:`~.merge.merge_steps`).

    The caller holds the write transaction.

    :param robot_id: Who recorded it, for a schema with ``robot_id`` columns (None: none).
    :param body: Key of the body it was learned on ('': unknown).
    """
    if not steps and parent is None:
        raise ValueError('cannot commit an empty trajectory at the root')
    check_parent(conn, task, variant, parent)
    writer = _SqlTree(conn, task, variant, allow_pickle, robot_id)
    return merge_steps(writer, params_json=params_json, parent=parent, steps=steps, body=body)


def prune(conn: Connection, leaf: int) -> None:
    """Drop ``leaf`` and its ancestors while no other trajectory needs them, with their views."""
    conn.execute('UPDATE nodes SET terminal = 0 WHERE id = ?', (leaf,))
    gone = prune_unused(conn, leaf)
    if gone:
        conn.executemany('DELETE FROM failed_views WHERE node = ?', [(n,) for n in gone])


def prune_unused(conn: Connection, node: int | None) -> list[int]:
    """
    Delete ``node`` and then its ancestors, each while it is no trajectory's end and has no child.

    :param conn: The store's connection, inside the caller's write transaction.
    :param node: Where to start (None: nothing to do).
    :return: The ids deleted, from ``node`` upwards.
    """
    deleted = []
    cursor = node
    while cursor is not None:
        row = conn.execute('SELECT parent, terminal FROM nodes WHERE id = ?',
                           (cursor,)).fetchone()
        busy = conn.execute('SELECT 1 FROM nodes WHERE parent = ? LIMIT 1',
                            (cursor,)).fetchone()
        if row is None or row[1] or busy:
            break
        conn.execute('DELETE FROM nodes WHERE id = ?', (cursor,))
        deleted.append(cursor)
        cursor = row[0]
    return deleted


def children_rows(conn: Connection, task: str, variant: str,
                  parent: int | None) -> list[tuple[object, ...]]:
    """Return the node rows (:data:`~.codec.NODE_COLS`) under ``parent``, oldest first."""
    where, args = parent_clause(parent)
    rows: list[tuple[object, ...]] = conn.execute(
        f'SELECT {NODE_COLS} FROM nodes WHERE task = ? AND variant = ? AND {where} ORDER BY id',
        (task, variant, *args)).fetchall()
    return rows


def node_rows(conn: Connection, node_ids: Sequence[int]) -> list[tuple[Any, ...]]:
    """Return the node rows (:data:`~.codec.NODE_COLS`) of ``node_ids`` (unknown ones left out)."""
    rows: list[tuple[Any, ...]] = []
    for at in range(0, len(node_ids), 500):
        part = list(node_ids[at:at + 500])
        rows += conn.execute(f'SELECT {NODE_COLS} FROM nodes WHERE id IN'
                             f' ({",".join("?" * len(part))})', part).fetchall()
    return rows


def trajectory_rows(conn: Connection, columns: str, task: str | None, variant: str | None,
                    after: int, limit: int | None = None) -> list[tuple[Any, ...]]:
    """Return the rows of the trajectories (of a task, of a variant) newer than ``after``."""
    terms = ['id > ?']
    args: list[Any] = [after]
    if task is not None:
        terms.append('task = ?')
        args.append(task)
        if variant is not None:
            terms.append('variant = ?')
            args.append(variant)
    elif variant is not None:
        raise ValueError('a variant names a tree of a task: give the task too')
    where = ' AND '.join(terms)
    if limit is not None:
        where += f' ORDER BY id LIMIT {int(limit)}'
    else:
        where += ' ORDER BY id'
    return list(conn.execute(f'SELECT {columns} FROM trajectories WHERE {where}',
                             args).fetchall())


def tally(conn: Connection, task: str, variant: str) -> tuple[int, int]:
    """Return (count, sum of ids) of a tree's trajectories (kept by the schema's triggers)."""
    row = conn.execute('SELECT count, id_sum FROM tree_tally WHERE task = ? AND variant = ?',
                       (task, variant)).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def trees(conn: Connection, task: str) -> dict[str, tuple[int, int]]:
    """Return a task's trees: variant -> (count, sum of ids) of its trajectories."""
    return {str(r[0]): (int(r[1]), int(r[2])) for r in conn.execute(
        'SELECT variant, count, id_sum FROM tree_tally WHERE task = ? AND count > 0',
        (task,)).fetchall()}


def task_stats(conn: Connection) -> list[TaskStats]:
    """Return per-task counters (trajectories, hits, misses, last use), sorted by name."""
    counts = {r[0]: (r[1], r[2]) for r in conn.execute(
        'SELECT task, count(*), max(last_used) FROM trajectories GROUP BY task').fetchall()}
    stats = {r[0]: (r[1], r[2], r[3]) for r in conn.execute(
        'SELECT task, hits, misses, last_used FROM task_stats').fetchall()}
    out = []
    for name in sorted(set(counts) | set(stats)):
        n, used = counts.get(name, (0, 0.0))
        hits, misses, used2 = stats.get(name, (0, 0, 0.0))
        out.append(TaskStats(name, n, hits, misses, max(used or 0.0, used2)))
    return out


def forget(conn: Connection, task: str, trajectory_id: int | None) -> int:
    """
    Remove one trajectory (and the nodes only it used) or all of a task, in the caller's write.

    :return: How many trajectories were removed.
    :raises UnknownTrajectoryError: ``trajectory_id`` is not a trajectory of ``task``.
    """
    if trajectory_id is None:
        n = int(conn.execute('DELETE FROM trajectories WHERE task = ?', (task,)).rowcount)
        conn.execute('DELETE FROM nodes WHERE task = ?', (task,))
        conn.execute('DELETE FROM task_stats WHERE task = ?', (task,))
        conn.execute('DELETE FROM kept_plans WHERE task = ?', (task,))
        conn.execute('DELETE FROM kept_trees WHERE task = ?', (task,))
        conn.execute('DELETE FROM failed_views WHERE task = ?', (task,))
        return n
    row = conn.execute('SELECT task, leaf FROM trajectories WHERE id = ?',
                       (trajectory_id,)).fetchone()
    if row is None or row[0] != task:
        raise UnknownTrajectoryError(f'no trajectory with id {trajectory_id} in task {task!r}')
    conn.execute('DELETE FROM trajectories WHERE id = ?', (trajectory_id,))
    prune(conn, row[1])
    return 1


def count_replay(conn: Connection, info: TrajectoryInfo, now: float) -> None:
    """Add one success to the nodes and one replay to the trajectory, used ``now``."""
    conn.executemany('UPDATE nodes SET success_count = success_count + 1, last_used = ?'
                     ' WHERE id = ?', [(now, nid) for nid in info.node_ids])
    conn.execute('UPDATE trajectories SET replay_count = replay_count + 1, last_used = ?'
                 ' WHERE id = ?', (now, info.id))


def recording_steps(conn: Connection, recording_id: int,
                    allow_pickle: bool = False) -> list[Step]:
    """Return the steps an (incomplete) recording wrote, in order."""
    rows = conn.execute(
        'SELECT 0, 0, 0, tool, kind, type_name, payload, payload_json, pre, post,'
        " status, duration, 0, 0, 0, '', '', trace FROM recording_steps WHERE recording = ?"
        ' ORDER BY seq', (recording_id,)).fetchall()
    return [node_from_row(r, allow_pickle).step for r in rows]
