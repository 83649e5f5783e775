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
The SQLite store's file: opening it, its access rights, its PRAGMAs and its migration.

:func:`open_file` creates a missing file (directories 0700, the database 0600, before
SQLite touches it), connects (``mode=ro`` when read-only), checks the schema, sets WAL
and ``synchronous``, and migrates an older schema after a backup copy
(:func:`.schema.backup`, :func:`.schema.migrate`). A file or directory it cannot read
or write raises :class:`~muscle_mem_ros.errors.StoreAccessError` naming the cause
(:func:`access_error`). :func:`transaction` is one write transaction on the connection.
The queries on an opened file are :mod:`.sqlite`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
import logging
import os
from pathlib import Path
import sqlite3

from . import schema
from .legacy import Dropped
from .owners import make_dirs
from ..errors import StoreAccessError, StoreCorruptError, StoreError, StoreVersionError

__all__ = ['access_error', 'open_file', 'SqliteFile', 'transaction']

_log = logging.getLogger('muscle_mem_ros.store.sqlite')


@dataclass(frozen=True)
class SqliteFile:
    """
    An opened store file.

    :param conn: The connection (autocommit: :func:`transaction` writes).
    :param backup: Path of the copy made before a schema migration, or None.
    :param migration_dropped: What that migration could not convert (None if none ran).
    """

    conn: sqlite3.Connection
    backup: Path | None = None
    migration_dropped: Dropped | None = None


def open_file(file: Path, *, synchronous: str, timeout: float, allow_pickle: bool,
              read_only: bool) -> SqliteFile:
    """
    Open (create, check, migrate) the store file ``file``.

    :param synchronous: SQLite ``synchronous`` level (upper case).
    :param timeout: Seconds to wait for another process's write lock.
    :param allow_pickle: Recorded in the file's meta table when set.
    :param read_only: Open with ``mode=ro``: nothing is created, migrated or written.
    :raises StoreAccessError: The file or its directory cannot be read or written.
    :raises StoreCorruptError: Not a store, unreadable, or corrupt (file untouched).
    :raises StoreVersionError: Written by a newer schema (file untouched), or older
        and opened read-only.
    """
    try:
        fresh = schema.inspect_file(file)
    except StoreCorruptError as err:
        access = access_error(file, err)
        if access is None:
            raise
        raise access from err
    if fresh and read_only:
        raise StoreAccessError(f'{file}: no store there (empty or missing); '
                               'opened read-only, nothing was created')
    if fresh:
        _create_file(file)
    elif not read_only and not os.access(file, os.W_OK):
        raise access_error(file, PermissionError(f'{file} is not writable')) or \
            StoreAccessError(f'{file}: cannot open store: not writable')
    try:
        target, uri = str(file), False
        if read_only:
            target, uri = file.resolve().as_uri() + '?mode=ro', True
        conn = sqlite3.connect(target, timeout=timeout, isolation_level=None,
                               check_same_thread=False, uri=uri)
    except sqlite3.Error as err:
        raise access_error(file, err) or StoreCorruptError(
            f'{file}: cannot open store: {err}') from err
    try:
        return _prepare(SqliteFile(conn), file, fresh, synchronous, allow_pickle, read_only)
    except StoreError as err:
        conn.close()
        access = access_error(file, err)
        if access is None:
            raise
        raise access from err
    except BaseException:
        conn.close()
        raise


def _create_file(file: Path) -> None:
    """Create the directories (0700) and an empty database file (0600) before SQLite."""
    try:
        make_dirs(file.parent)
    except OSError as err:
        raise access_error(file, err) or StoreError(
            f'{file}: cannot create directory: {err}') from err
    try:
        fd = os.open(file, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as err:
        raise access_error(file, err) or StoreError(
            f'{file}: cannot create store: {err}') from err
    os.fchmod(fd, 0o600)
    os.close(fd)


def access_error(file: Path, err: BaseException) -> StoreAccessError | None:
    """Name the real cause when the file or directory cannot be read or written."""
    directory = file.parent
    if isinstance(err, PermissionError) or not os.access(directory, os.X_OK):
        problem = f'permission denied ({err})'
    else:
        problem = None
    if file.exists():
        if not os.access(file, os.R_OK):
            problem = 'permission denied: the store file is not readable by this user'
        elif not os.access(file, os.W_OK):
            problem = 'the store file is read-only (SQLite must write to it)'
        elif not os.access(directory, os.W_OK | os.X_OK) and not (
                _sidecar(file, '-wal').exists() and _sidecar(file, '-shm').exists()):
            problem = (f'the directory {directory} is read-only or not writable by this '
                       f'user, and SQLite must create {file.name}-wal and '
                       f'{file.name}-shm next to the store')
    elif directory.exists() and not os.access(directory, os.W_OK | os.X_OK):
        problem = (f'the directory {directory} is read-only or not writable by this user: '
                   'the store cannot be created there')
    if problem is None:
        return None
    cause = err.__cause__ if isinstance(err, StoreError) and err.__cause__ else err
    access = StoreAccessError(f'{file}: cannot open store: {problem}; the file is '
                              f'untouched (SQLite/OS said: {cause})')
    access.__cause__ = err
    return access


def _sidecar(file: Path, suffix: str) -> Path:
    return file.with_name(file.name + suffix)


def _prepare(opened: SqliteFile, file: Path, fresh: bool, synchronous: str,
             allow_pickle: bool, read_only: bool) -> SqliteFile:
    """Check the schema; unless read-only, set the PRAGMAs and migrate an older schema."""
    conn = opened.conn
    version = 0 if fresh else schema.verify(conn, file)
    if read_only:
        if version < schema.SCHEMA_VERSION:
            raise StoreVersionError(
                f'{file}: store schema version {version} is older than this '
                f'muscle_mem_ros ({schema.SCHEMA_VERSION}) and opened read-only it cannot '
                'be migrated: open it once writable (start the node on it) to migrate')
        return opened
    try:
        if conn.execute('PRAGMA journal_mode').fetchone()[0].lower() != 'wal':
            conn.execute('PRAGMA journal_mode = WAL')
        conn.execute(f'PRAGMA synchronous = {synchronous}')
        if version < schema.SCHEMA_VERSION:
            backup = None
            if version > 0:
                backup = schema.backup(conn, file, version)
                _log.warning('%s: migrating store schema %d -> %d (backup copy: %s)',
                             file, version, schema.SCHEMA_VERSION, backup)
            dropped = schema.migrate(conn, current=version, trusted=allow_pickle)
            conn.execute('PRAGMA wal_checkpoint(TRUNCATE)')
            opened = SqliteFile(conn, backup, dropped)
            _report_migration(file, opened)
        if fresh:
            for suffix in ('-wal', '-shm'):
                try:
                    os.chmod(_sidecar(file, suffix), 0o600)
                except FileNotFoundError:
                    pass
        if allow_pickle and not conn.execute(
                "SELECT 1 FROM meta WHERE key = 'allow_pickle'").fetchone():
            with transaction(conn, file):
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('allow_pickle', '1')")
        elif conn.execute("SELECT 1 FROM meta WHERE key = 'allow_pickle'").fetchone():
            _log.warning('%s: this store was used with allow_pickle=True; values it holds '
                         'as pickles are refused (StorePickleError), never unpickled', file)
    except OSError as err:
        raise StoreError(f'{file}: cannot back up the store before migrating it: '
                         f'{err}') from err
    except sqlite3.Error as err:
        raise StoreError(f'{file}: cannot initialize store: {err}') from err
    return opened


def _report_migration(file: Path, opened: SqliteFile) -> None:
    dropped = opened.migration_dropped
    if dropped is None or not (dropped.nodes or dropped.recordings):
        return
    _log.warning(
        '%s: migration dropped %d node(s), %d trajectory(ies) and %d incomplete '
        'recording(s) it could not convert without unpickling untrusted data (the '
        'backup %s still has them): %s', file, len(dropped.nodes),
        len(dropped.trajectories), len(dropped.recordings), opened.backup,
        '; '.join(dropped.reasons[:10]))


@contextmanager
def transaction(conn: sqlite3.Connection, file: Path,
                rolled_back: Callable[[], None] = lambda: None) -> Iterator[None]:
    """
    Run the body in one write transaction: ``BEGIN IMMEDIATE``, the body, ``COMMIT``.

    :param rolled_back: Called after a rollback (the store drops its caches).
    :raises StoreError: The transaction could not start, or a statement or the commit
        failed (rolled back).
    """
    try:
        conn.execute('BEGIN IMMEDIATE')
    except sqlite3.Error as err:
        raise StoreError(f'{file}: cannot start a write: {err}') from err
    try:
        yield
        conn.execute('COMMIT')
    except sqlite3.Error as err:
        _rollback(conn, rolled_back)
        raise StoreError(f'{file}: write failed: {err}') from err
    except BaseException:
        _rollback(conn, rolled_back)
        raise


def _rollback(conn: sqlite3.Connection, rolled_back: Callable[[], None]) -> None:
    try:
        conn.execute('ROLLBACK')
    except sqlite3.Error:
        pass
    rolled_back()
