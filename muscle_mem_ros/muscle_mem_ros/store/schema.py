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
SQLite schema of the store: versions, migrations, and refusing foreign files.

A store file is recognized three ways, all checked before anything is
written: the SQLite header's ``application_id`` is :data:`APP_ID`, its
``user_version`` is the schema version (never newer than
:data:`SCHEMA_VERSION`), and the ``meta`` table holds ``app = MAGIC``. The
header fields are read straight from the file's first 100 bytes, so a foreign
or newer file is refused without opening it for writing.

A row in ``recordings`` (with its ``recording_steps``) is a recording in
progress, i.e. incomplete: steps land there one committed row at a time and
are never read by the tree queries. Committing deletes those rows in the same
transaction that merges the steps into ``nodes``, so a crash leaves either the
incomplete recording or the finished trajectory, never half of one.

Migrations are table-driven: ``MIGRATIONS[v - 1]`` holds the statements that
take a file from version ``v - 1`` to ``v``, and ``CONVERSIONS[v]`` the Python
step that rewrites rows for it (version 3: pickled snapshots and calls to the
safe format, see :mod:`.legacy`). Before an existing file is migrated, a backup
copy is written next to it with SQLite's backup API (``<file>.v<old>.bak``, mode
0600; an existing backup is never overwritten). Then every pending version runs
in ONE transaction together with the ``user_version`` bump, so a crash or an
error mid-upgrade leaves the previous version intact.

Version history: 1 trees, trajectories, recordings; 2 task counters and the
dedupe index; 3 no pickles (snapshots and Python calls in the safe format of
:mod:`.values`), recordings carry their owner (lock token, pid, host); 4 an index
of a tree's trajectories and their tally kept by triggers (learning reads only those
committed since it last read, and knows without a scan that nothing else changed); 5
shadow agreement counts and approvals (:mod:`.trustsql`); 6 what an approval covers (the
trajectories and inferred bindings its approver saw; NULL in older rows); 7 a step's trace
(what its watched sensors and feedback did while it ran; NULL in older rows and untraced steps);
8 how each trajectory's replays ended, and whether it stepped back (:mod:`.trustsql`); 9
what learning found, kept for a restart (:mod:`.keptsql`); 10 the declared bindings an
approval saw (:mod:`.trustsql`; NULL in older rows, which saw none); 11 the body each
trajectory was learned on and the pairs of bodies declared compatible (:mod:`.bodysql`; ''
in older rows: an unknown body, replayed on any body as before); 12 what a trajectory learned
from a recording was learned from (:mod:`.sourcesql`; no row for one learned live); 13 the
declarations of compatible bodies revoked, and by whom (:mod:`.bodysql`); 14 what a camera saw
when a check on it failed, the latest per learned step, sensor and phase (:mod:`.failedsql`;
none in older files).
"""

from __future__ import annotations

from collections.abc import Callable
import logging
import os
from pathlib import Path
import sqlite3
import struct
from typing import Any

from .bodysql import BODIES, REVOKED
from .failedsql import FAILED
from .keptsql import KEPT
from .legacy import convert_rows, Dropped
from .sourcesql import SOURCES
from .trustsql import BOOKS, COVERAGE, DECLARED, TABLES
from ..errors import StoreCorruptError, StoreVersionError

__all__ = ['APP_ID', 'backup', 'MAGIC', 'MIGRATIONS', 'SCHEMA_VERSION', 'inspect_file',
           'migrate']

_log = logging.getLogger(__name__)

APP_ID = 0x4D4D5253
"""SQLite ``application_id`` of a muscle_mem_ros store ('MMRS')."""

MAGIC = 'muscle_mem_ros store'
"""Value of ``meta.app`` in every store."""

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: trees, trajectories, recordings in progress
        'CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)',
        'CREATE TABLE nodes ('
        ' id INTEGER PRIMARY KEY AUTOINCREMENT, task TEXT NOT NULL, variant TEXT NOT NULL,'
        ' parent INTEGER, depth INTEGER NOT NULL, tool TEXT NOT NULL, kind TEXT NOT NULL,'
        ' type_name TEXT NOT NULL, payload BLOB NOT NULL, payload_json TEXT NOT NULL,'
        ' pre BLOB, post BLOB, status TEXT NOT NULL, duration REAL NOT NULL, sig TEXT,'
        ' success_count INTEGER NOT NULL, last_used REAL NOT NULL, terminal INTEGER NOT NULL)',
        'CREATE INDEX nodes_children ON nodes (task, variant, parent)',
        'CREATE TABLE trajectories ('
        ' id INTEGER PRIMARY KEY AUTOINCREMENT, task TEXT NOT NULL, variant TEXT NOT NULL,'
        ' params_json TEXT NOT NULL, leaf INTEGER NOT NULL UNIQUE, node_ids TEXT NOT NULL,'
        ' created REAL NOT NULL, last_used REAL NOT NULL, replay_count INTEGER NOT NULL)',
        'CREATE INDEX trajectories_task ON trajectories (task)',
        'CREATE TABLE recordings ('
        ' id INTEGER PRIMARY KEY AUTOINCREMENT, task TEXT NOT NULL, variant TEXT NOT NULL,'
        ' params_json TEXT NOT NULL, parent INTEGER, started REAL NOT NULL)',
        'CREATE TABLE recording_steps ('
        ' recording INTEGER NOT NULL, seq INTEGER NOT NULL, tool TEXT NOT NULL,'
        ' kind TEXT NOT NULL, type_name TEXT NOT NULL, payload BLOB NOT NULL,'
        ' payload_json TEXT NOT NULL, pre BLOB, post BLOB, status TEXT NOT NULL,'
        ' duration REAL NOT NULL, PRIMARY KEY (recording, seq))',
        f"INSERT INTO meta (key, value) VALUES ('app', '{MAGIC}')",
    ),
    (  # 2: per-task hit/miss counters; dedupe lookups by signature
        'CREATE TABLE task_stats (task TEXT PRIMARY KEY, hits INTEGER NOT NULL DEFAULT 0,'
        ' misses INTEGER NOT NULL DEFAULT 0, last_used REAL NOT NULL DEFAULT 0)',
        'CREATE INDEX nodes_sig ON nodes (task, variant, parent, sig)',
    ),
    (  # 3: no pickles (rows converted by CONVERSIONS[3]); who owns a recording
        'ALTER TABLE recordings ADD COLUMN owner TEXT',
        'ALTER TABLE recordings ADD COLUMN owner_pid INTEGER',
        'ALTER TABLE recordings ADD COLUMN owner_host TEXT',
    ),
    (  # 4: a tree's trajectories listed from an index, tallied by triggers
        'CREATE INDEX trajectories_tree ON trajectories (task, variant, id)',
        'CREATE TABLE tree_tally (task TEXT NOT NULL, variant TEXT NOT NULL,'
        ' count INTEGER NOT NULL, id_sum INTEGER NOT NULL, PRIMARY KEY (task, variant))',
        'INSERT INTO tree_tally (task, variant, count, id_sum)'
        ' SELECT task, variant, count(*), sum(id) FROM trajectories GROUP BY task, variant',
        'CREATE TRIGGER trajectories_tally_insert AFTER INSERT ON trajectories BEGIN'
        ' INSERT INTO tree_tally (task, variant, count, id_sum)'
        ' VALUES (NEW.task, NEW.variant, 1, NEW.id) ON CONFLICT (task, variant)'
        ' DO UPDATE SET count = count + 1, id_sum = id_sum + NEW.id; END',
        'CREATE TRIGGER trajectories_tally_delete AFTER DELETE ON trajectories BEGIN'
        ' UPDATE tree_tally SET count = count - 1, id_sum = id_sum - OLD.id'
        ' WHERE task = OLD.task AND variant = OLD.variant; END',
    ),
    TABLES,  # 5: trust: shadow agreement counts and approvals (:mod:`.trustsql`)
    COVERAGE,  # 6: what an approval covers (:mod:`.trustsql`)
    (  # 7: what the watched sensors did while a step ran (:func:`.codec.encode_trace`)
        'ALTER TABLE nodes ADD COLUMN trace BLOB',
        'ALTER TABLE recording_steps ADD COLUMN trace BLOB',
    ),
    BOOKS,  # 8: how replays ended, per trajectory; stepping back (:mod:`.trustsql`)
    KEPT,  # 9: learned plans kept for a restart (:mod:`.keptsql`)
    DECLARED,  # 10: the declared bindings an approval saw (:mod:`.trustsql`)
    BODIES,  # 11: the body of each trajectory, bodies declared compatible (:mod:`.bodysql`)
    SOURCES,  # 12: what a trajectory learned from a recording was learned from (.sourcesql)
    REVOKED,  # 13: declarations of compatible bodies revoked, by whom (:mod:`.bodysql`)
    FAILED,  # 14: what a camera saw when a check on it failed (:mod:`.failedsql`)
)

CONVERSIONS: dict[int, Callable[..., Any]] = {3: convert_rows}
"""Python row rewrites per target version, run inside the migration's transaction."""

SCHEMA_VERSION = len(MIGRATIONS)
"""Schema version this code writes (``PRAGMA user_version``)."""

_HEADER = b'SQLite format 3\x00'


def inspect_file(path: Path) -> bool:
    """
    Validate an existing file's header without opening it through SQLite.

    :param path: Store file.
    :return: True if the file does not exist yet or is empty (a new store), False
        if it is an existing store that may be opened.
    :raises StoreCorruptError: Not SQLite, truncated, or not a muscle_mem_ros store.
    :raises StoreVersionError: Written by a newer schema version.
    """
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return True
    except OSError as err:
        raise StoreCorruptError(f'{path}: cannot read store: {err}') from err
    if size == 0:
        return True
    try:
        with open(path, 'rb') as f:
            header = f.read(100)
    except OSError as err:
        raise StoreCorruptError(f'{path}: cannot read store: {err}') from err
    if len(header) < 100 or not header.startswith(_HEADER):
        raise StoreCorruptError(f'{path}: not an SQLite file, refusing to touch it')
    page_size = struct.unpack('>H', header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1) or size % page_size:
        raise StoreCorruptError(f'{path}: SQLite file is truncated or damaged '
                                f'({size} bytes, page size {page_size})')
    change, pages, valid_for = struct.unpack('>I', header[24:28])[0], \
        struct.unpack('>I', header[28:32])[0], struct.unpack('>I', header[92:96])[0]
    if change == valid_for and pages * page_size > size:
        raise StoreCorruptError(f'{path}: SQLite file is truncated ({size} bytes, header says '
                                f'{pages * page_size})')
    version = struct.unpack('>I', header[60:64])[0]
    app_id = struct.unpack('>I', header[68:72])[0]
    if app_id != APP_ID:
        raise StoreCorruptError(f'{path}: an SQLite file but not a muscle_mem_ros store '
                                f'(application_id {app_id:#x}), refusing to touch it')
    check_version(path, version)
    return False


def check_version(path: Path, version: int) -> None:
    """Raise StoreVersionError if ``version`` is newer than this code."""
    if version > SCHEMA_VERSION:
        raise StoreVersionError(
            f'{path}: store schema version {version} is newer than this muscle_mem_ros '
            f'understands ({SCHEMA_VERSION}); upgrade muscle_mem_ros to open it')


def verify(conn: sqlite3.Connection, path: Path) -> int:
    """
    Check the meta table of an opened existing store; return its schema version.

    Only reads. Raises StoreCorruptError / StoreVersionError.
    """
    try:
        version = conn.execute('PRAGMA user_version').fetchone()[0]
        check_version(path, version)
        row = conn.execute("SELECT value FROM meta WHERE key = 'app'").fetchone()
        conn.execute('SELECT count(*) FROM sqlite_master').fetchone()
    except sqlite3.DatabaseError as err:
        raise StoreCorruptError(f'{path}: store is unreadable or corrupt: {err}') from err
    if row is None or row[0] != MAGIC:
        raise StoreCorruptError(f'{path}: meta table is missing or does not name a muscle_mem_ros '
                                'store (corrupt or foreign file)')
    return int(version)


def backup(conn: sqlite3.Connection, path: Path, version: int) -> Path:
    """
    Copy the store next to itself (``<file>.v<version>.bak``, 0600) before a migration.

    :param conn: An open connection to the store.
    :param path: The store file.
    :param version: Its current schema version (names the copy).
    :return: The backup's path (``.1``, ``.2`` ... appended if one exists already).
    :raises OSError: the copy cannot be created.
    :raises sqlite3.Error: the copy cannot be written.
    """
    target = path.with_name(f'{path.name}.v{version}.bak')
    n = 0
    while True:
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            break
        except FileExistsError:
            n += 1
            target = path.with_name(f'{path.name}.v{version}.{n}.bak')
    os.fchmod(fd, 0o600)
    os.close(fd)
    dest = sqlite3.connect(str(target))
    try:
        conn.backup(dest)
    finally:
        dest.close()
    return target


def migrate(
    conn: sqlite3.Connection, *, current: int, target: int = SCHEMA_VERSION,
    trusted: bool = False,
) -> Dropped | None:
    """
    Apply migrations ``current + 1 .. target`` in one transaction.

    A fresh file (``current`` 0) also gets the application id. The version is
    read again inside the transaction, so two processes opening a file at once
    do not both migrate it.

    :param conn: The store (autocommit mode).
    :param current: The version seen before taking the write lock.
    :param target: The version to reach.
    :param trusted: Convert old pickled rows with the plain unpickler (``allow_pickle``).
    :return: What the row conversion dropped, or None if no conversion ran.
    """
    dropped: Dropped | None = None
    conn.execute('BEGIN IMMEDIATE')
    try:
        current = max(current, conn.execute('PRAGMA user_version').fetchone()[0])
        for version in range(current + 1, target + 1):
            if version == 1:
                conn.execute(f'PRAGMA application_id = {APP_ID}')
            for statement in MIGRATIONS[version - 1]:
                conn.execute(statement)
            convert = CONVERSIONS.get(version)
            if convert is not None and current > 0:
                dropped = convert(conn, trusted=trusted)
            conn.execute(f'PRAGMA user_version = {version}')
        conn.execute('COMMIT')
    except BaseException:
        conn.execute('ROLLBACK')
        raise
    return dropped
