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
A fleet store's link to its PostgreSQL server: connect, lose, reconnect, listen.

:class:`PgLink` owns the store's foreground connection (used under the store's
lock), the state the faults section of :mod:`.store` describes (up, or
unreachable since when, with the error and the next try) and the background
thread that ``LISTEN``s for other stores' changes and reconnects with
exponential backoff. What a notification or a reconnection means for the
store's caches is the store's business: the link calls it back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
import logging
import threading
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from . import schema as pgschema
from ...errors import StoreCorruptError, StoreError, StoreUnavailableError

__all__ = ['check_read_only', 'first_line', 'is_postgres_url', 'PgConn', 'PgLink', 'redact']

_log = logging.getLogger(__name__)


def is_postgres_url(spec: object) -> bool:
    """Return True if ``spec`` is a libpq URL (``postgresql://`` or ``postgres://``)."""
    return isinstance(spec, str) and spec.startswith(('postgresql://', 'postgres://'))


def redact(url: str) -> str:
    """Return ``url`` with any password (in the user part or a ``password=`` query) hidden."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return '<unparsable database URL>'
    netloc = parts.netloc
    if '@' in netloc:
        user, _, host = netloc.rpartition('@')
        if ':' in user:
            user = user.split(':', 1)[0] + ':***'
        netloc = f'{user}@{host}'
    query = urlencode([(k, '***' if k.lower() == 'password' else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe='*')
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class PgConn:
    """Wrap a psycopg connection to take the ``?`` parameters of :mod:`..sqlwrites`."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self._sql: dict[str, str] = {}

    def _q(self, sql: str) -> str:
        out = self._sql.get(sql)
        if out is None:
            out = self._sql[sql] = sql.replace('?', '%s')
        return out

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(self._q(sql), params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.raw.cursor() as cur:
            cur.executemany(self._q(sql), rows)

    @property
    def usable(self) -> bool:
        return not (self.raw.closed or self.raw.broken)


class PgLink:
    """
    The connections of one store and whether its server is reachable (thread-safe).

    :param pg: The psycopg module.
    :param url: The libpq URL (with its password, never shown).
    :param token: The store's id, sent as the application name.
    :param timeout: Seconds to wait for the server when (re)connecting.
    :param retry: First and longest reconnection delay, seconds.
    :param read_only: Every session refuses writes.
    :param lock: The store's lock, held while the foreground connection is used.
    :param on_note: Called with the listener's connection and each notification's payload.
    :param on_reconnect: Called under ``lock`` when the server is back after a loss
        (caches may have missed changes).
    :param on_idle: Called by the listener while the server is up (commit what was kept).
    """

    def __init__(self, *, pg: Any, url: str, token: str, timeout: int,
                 retry: tuple[float, float], read_only: bool, lock: Any,
                 on_note: Callable[[Any, str], None], on_reconnect: Callable[[], None],
                 on_idle: Callable[[], None]) -> None:
        self.pg = pg
        self.url = redact(url)
        self._url = url
        self._token = token
        self._timeout = timeout
        self._retry = retry
        self._read_only = read_only
        self._lock = lock
        self._on_note = on_note
        self._on_reconnect = on_reconnect
        self._on_idle = on_idle
        self._state_lock = threading.Lock()
        self.up = True
        self._error = ''
        self._down_since = 0.0
        self._next_try = 0.0
        self._stop = threading.Event()
        self.listening = threading.Event()
        self.fatal: StoreError | None = None
        self.conn: PgConn | None = None
        self._migrated = False
        self._watcher = threading.Thread(target=self._watch, name='muscle_mem_pg_listen',
                                         daemon=True)

    def connect(self, *, start_unreachable: bool) -> bool:
        """
        Connect, check (read-only) or migrate the schema, and start listening.

        :return: True when connected; False when the server is away and
            ``start_unreachable`` (the listener keeps trying).
        :raises StoreUnavailableError: The server cannot be reached (and not
            ``start_unreachable``).
        """
        try:
            raw = self._connect()
        except StoreUnavailableError as err:
            if not start_unreachable:
                raise
            self._mark_down(err)
            self._watcher.start()
            return False
        try:
            if self._read_only:
                check_read_only(raw, self.url)
            else:
                pgschema.migrate(raw, self.url)
        except BaseException:
            raw.close()
            raise
        self._migrated = True
        self.conn = self._setup(raw)
        self._watcher.start()
        return True

    def _connect(self) -> Any:
        try:
            return self.pg.connect(self._url, autocommit=True, connect_timeout=self._timeout,
                                   application_name=f'muscle_mem_ros:{self._token}')
        except self.pg.Error as err:
            raise StoreUnavailableError(
                f'{self.url}: cannot connect to the database: {first_line(err)}') from err

    def _setup(self, raw: Any) -> PgConn:
        raw.execute(f'SET search_path TO {pgschema.NAMESPACE}')
        if self._read_only:  # the server itself refuses every write of this session
            raw.execute('SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY')
        return PgConn(raw)

    def _mark_down(self, err: BaseException) -> None:
        text = first_line(err.__cause__ if isinstance(err, StoreUnavailableError) and
                          err.__cause__ else err)
        with self._state_lock:
            was_up, self.up = self.up, False
            self._error = text
            if was_up:
                self._down_since = time.time()
        if was_up:
            _log.error('%s: database unreachable (%s); replays go on from what is loaded, '
                       'recordings are kept in memory; reconnecting with backoff', self.url, text)

    @contextmanager
    def db(self) -> Iterator[PgConn]:
        """Hold the lock and yield a live connection; map lost connections to unavailability."""
        pg = self.pg
        if self.fatal is not None:
            raise self.fatal
        with self._lock:
            conn = self.conn
            if conn is None or not conn.usable or not self.up:
                if not self.up:
                    raise StoreUnavailableError(f'{self.url}: database unreachable '
                                                f'({self._error})')
                try:
                    conn = self.conn = self._setup(self._connect())
                except StoreUnavailableError as err:
                    self._mark_down(err)
                    raise
            try:
                yield conn
            except pg.Error as err:
                if not conn.usable:
                    self._mark_down(err)
                    self.conn = None
                    raise StoreUnavailableError(
                        f'{self.url}: database unreachable ({first_line(err)})') from err
                raise StoreError(f'{self.url}: store operation failed: {first_line(err)}'
                                 ) from err

    def _watch(self) -> None:
        """LISTEN for other stores' changes; reconnect with backoff while the server is away."""
        pg = self.pg
        delay = self._retry[0]
        first = True
        while not self._stop.is_set():
            try:
                raw = self._connect()
            except StoreUnavailableError as err:
                self._mark_down(err)
                self._next_try = time.time() + delay
                self._stop.wait(delay)
                delay = min(delay * 2, self._retry[1])
                continue
            try:
                if not self._migrated and not self._schema_ok(raw):
                    raw.close()
                    return
                raw.execute(f'SET search_path TO {pgschema.NAMESPACE}')
                raw.execute(f'LISTEN {pgschema.CHANNEL}')
                self._back_up(first)
                first = False
                delay = self._retry[0]
                self.listening.set()
                while not self._stop.is_set():
                    # Collected first: the generator holds the connection's lock.
                    for note in list(raw.notifies(timeout=0.2, stop_after=1)):
                        self._on_note(raw, note.payload)
                    if not self.up:
                        break  # a foreground call lost its connection: check the server again
                    self._on_idle()
            except pg.Error as err:
                if not self._stop.is_set():
                    self._mark_down(err)
            finally:
                self.listening.clear()
                raw.close()

    def _schema_ok(self, raw: Any) -> bool:
        """Check and migrate the schema on the first connection of a store opened without one."""
        try:
            pgschema.migrate(raw, self.url)
        except StoreError as err:
            self.fatal = err
            _log.error('%s: %s; the store stays unusable until the node is restarted with a '
                       'muscle_mem_ros that understands it', self.url, err)
            return False
        self._migrated = True
        return True

    def _back_up(self, first: bool) -> None:
        """Mark the store up once the listener connects; caches may have missed changes."""
        with self._state_lock:
            was_down, self.up = not self.up, True
            self._error = ''
        if was_down or not first:
            with self._lock:
                self._on_reconnect()
                conn, self.conn = self.conn, None  # the server restarted: reconnect on use
                if conn is not None:
                    conn.raw.close()
            _log.info('%s: database reachable again', self.url)
        self._on_idle()

    def state(self) -> str:
        """Return ``ok``, ``unreachable for ...`` or ``unusable: ...`` (never the password)."""
        with self._state_lock:
            up, error, since, next_try = self.up, self._error, self._down_since, self._next_try
        if self.fatal is not None:
            return f'unusable: {self.fatal}'
        return 'ok' if up else (
            f'unreachable for {time.time() - since:.0f} s ({error}); next try in '
            f'{max(0.0, next_try - time.time()):.1f} s')

    def stop(self) -> None:
        """Stop the listener (the foreground connection stays until :meth:`close`)."""
        self._stop.set()
        if self._watcher.is_alive() and self._watcher is not threading.current_thread():
            self._watcher.join(timeout=5.0)

    def close(self) -> None:
        """Close the foreground connection (call under the store's lock)."""
        if self.conn is not None:
            try:
                self.conn.raw.close()
            except self.pg.Error as err:
                _log.warning('%s: error closing store: %s', self.url, err)
            self.conn = None


def check_read_only(raw: Any, where: str) -> None:
    """
    Check, without writing, that the database holds a store this code can read.

    :raises StoreVersionError: a newer schema.
    :raises StoreCorruptError: no store, or a foreign or older one (a read-only open never
        creates or migrates).
    """
    with raw.transaction():
        found = pgschema.current_version(raw, where)
    if found != pgschema.SCHEMA_VERSION:
        raise StoreCorruptError(
            f'{where}: no muscle_mem_ros store (schema version {found}, this code reads '
            f'{pgschema.SCHEMA_VERSION}); a read-only open creates and migrates nothing')


def first_line(err: BaseException) -> str:
    """Return the first line of an error's text (psycopg adds context lines)."""
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__
