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
A real PostgreSQL server for the tests: ``initdb`` + ``pg_ctl`` in a temporary directory.

The binaries are found on PATH or in ``pg_config --bindir``; when they are
missing, :func:`pg_binaries` says which, and the fixtures skip with that reason.
PostgreSQL refuses to run as root, so under root the server runs as the
``postgres`` user (or ``nobody``) through ``setpriv``. The server listens on a
free loopback port with trust authentication and ``fsync=off`` (a test server).

Fixtures: ``pg_server`` (one per session, a fresh database per :meth:`PgServer.new_url`)
and ``pg_private`` (a server of its own, for tests that stop and restart it).
"""

from __future__ import annotations

from collections.abc import Iterator
import itertools
import os
from pathlib import Path
import pwd
import shutil
import socket
import subprocess
import tempfile

import pytest

__all__ = ['pg_binaries', 'pg_private', 'pg_server', 'PgServer']

_names = itertools.count(1)


def pg_binaries() -> tuple[Path, str]:
    """Return the directory holding initdb/pg_ctl/postgres, or (None-like, why not)."""
    candidates = []
    found = shutil.which('initdb')
    if found:
        candidates.append(Path(found).resolve().parent)
    try:
        out = subprocess.run(['pg_config', '--bindir'], capture_output=True, text=True,
                             timeout=10, check=False).stdout.strip()
        if out:
            candidates.append(Path(out))
    except (OSError, subprocess.SubprocessError):
        pass
    for bindir in candidates:
        if all((bindir / b).exists() for b in ('initdb', 'pg_ctl', 'postgres')):
            return bindir, ''
    return Path(), ('PostgreSQL server binaries not found: need initdb, pg_ctl and postgres on '
                    'PATH or in `pg_config --bindir` (Debian: apt install postgresql)')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class PgServer:
    """One throw-away PostgreSQL cluster."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix='mm_pg_'))
        self.data = self.root / 'data'
        self.port = _free_port()
        self._prefix: list[str] = []
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam('postgres')
            except KeyError:
                user = pwd.getpwnam('nobody')
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._prefix = ['setpriv', f'--reuid={user.pw_uid}', f'--regid={user.pw_gid}',
                            '--clear-groups']
        self._run('initdb', '-D', str(self.data), '-U', 'postgres', '--auth=trust',
                  '--no-sync', '-E', 'UTF8')

    def _run(self, tool: str, *args: str) -> None:
        cmd = [*self._prefix, str(self.bindir / tool), *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False,
                              cwd=self.root)
        if done.returncode:
            raise RuntimeError(f'{tool} failed ({done.returncode}): {done.stderr or done.stdout}')

    def start(self) -> None:
        """Start (or restart after :meth:`stop`) on the same port and data."""
        options = (f'-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off'
                   ' -c full_page_writes=off -c max_connections=200')
        self._run('pg_ctl', '-D', str(self.data), '-l', str(self.root / 'log'), '-w',
                  '-t', '60', '-o', options, 'start')

    def stop(self, mode: str = 'fast') -> None:
        """Stop the server (``immediate`` is a crash, ``fast`` a clean stop)."""
        self._run('pg_ctl', '-D', str(self.data), '-m', mode, '-w', '-t', '60', 'stop')

    def url(self, db: str = 'postgres') -> str:
        """Return the libpq URL of database ``db``."""
        return f'postgresql://postgres@127.0.0.1:{self.port}/{db}'

    def new_url(self) -> str:
        """Create a fresh database and return its URL."""
        import psycopg
        name = f'mm_test_{next(_names)}'
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE {name}')
        return self.url(name)

    def destroy(self) -> None:
        """Stop if running and remove the directory."""
        try:
            self.stop('immediate')
        except RuntimeError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


def _make() -> PgServer:
    bindir, why = pg_binaries()
    if why:
        pytest.skip(why)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip('psycopg 3 is not installed (requirements/kilted-py311.txt pins it)')
    server = PgServer(bindir)
    server.start()
    return server


@pytest.fixture(scope='session')
def pg_server() -> Iterator[PgServer]:
    """Yield a PostgreSQL server shared by the session."""
    server = _make()
    yield server
    server.destroy()


@pytest.fixture
def pg_private() -> Iterator[PgServer]:
    """Yield a PostgreSQL server of this test's own (it may stop and restart it)."""
    server = _make()
    yield server
    server.destroy()
