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
Who is recording: tell a live recording from one its process abandoned, and file modes.

A store that begins a recording first takes an exclusive ``flock`` on its own
lock file ``<store>-owners/<token>`` (a random token per open store, directory
0700, file 0600) and keeps it until :meth:`Owner.release` (the store's
``close``); the recording's row names the token, the pid and the host. The
kernel drops a ``flock`` when its process dies however it dies (SIGKILL, power
loss aside), so another process asks "is it alive?" by trying to take the
same lock without blocking: it gets it only if the owner is gone. This works
for any number of processes on one host, across PID namespaces that share the
file system, and is immune to PID reuse. The lock files of processes that
stopped are deleted with their purged recordings, or when a store is opened
and no recording names them any more.

Across hosts: a store file is not shared between machines (SQLite's WAL mode
needs shared memory, so every process using the file runs on one host). On a
network file system whose ``flock`` is forwarded to the server (NFSv4 on
Linux), the check still holds; where locks are host-local, a recording made
on another host looks abandoned to this one. The pid and host are stored for
the messages only. Where ``fcntl`` does not exist, a recording counts as live
when its pid is alive on this host.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
import re
import socket
import uuid

try:
    import fcntl
except ImportError:  # not POSIX: fall back to a pid check
    fcntl = None  # type: ignore[assignment]

__all__ = ['HOST', 'make_dirs', 'Owner']

HOST = socket.gethostname()
"""This machine's host name, as stored with a recording."""

_TOKEN = re.compile(r'^[0-9a-f]{32}$')


def make_dirs(path: Path) -> None:
    """
    Create ``path`` and its missing parents with mode 0700 (an existing directory is left alone).

    :param path: The directory.
    :raises OSError: one cannot be created.
    """
    missing = []
    cursor = path
    while not cursor.exists():
        missing.append(cursor)
        if cursor.parent == cursor:
            break
        cursor = cursor.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            continue
        os.chmod(directory, 0o700)


class Owner:
    """This open store's identity as the owner of its recordings."""

    def __init__(self, store_file: Path) -> None:
        self.dir = store_file.with_name(store_file.name + '-owners')
        self.token = uuid.uuid4().hex
        self.pid = os.getpid()
        self._fd: int | None = None

    def hold(self) -> None:
        """
        Take this store's lock (once); call before writing a recording row that names it.

        :raises OSError: the lock file cannot be created.
        """
        if self._fd is not None or fcntl is None:
            return
        make_dirs(self.dir)
        path = self.dir / self.token
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                os.fchmod(fd, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    self._fd = fd
                    return
            except FileNotFoundError:
                pass  # removed between open and lock by a cleaner: take a fresh one
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)

    def release(self) -> None:
        """Drop the lock and its file: this store's unfinished recordings are abandoned now."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.unlink(self.dir / self.token)
        except OSError:
            pass
        os.close(fd)

    def alive(self, token: str | None, pid: int | None, host: str | None) -> bool:
        """
        Tell whether the owner of a recording still holds it.

        :param token: The recording's owner token (None for a recording from before
            schema version 3: its owner is unknown and counts as gone).
        :param pid: The owner's pid.
        :param host: The owner's host.
        :return: True while the owner holds its lock (or is this store).
        """
        if token is None or not _TOKEN.match(token):
            return False
        if token == self.token:
            return self._fd is not None or fcntl is None
        if fcntl is None:
            return host == HOST and pid is not None and _pid_alive(pid)
        try:
            fd = os.open(self.dir / token, os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as err:
            return err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
        finally:
            os.close(fd)
        return False

    def sweep(self, referenced: set[str]) -> None:
        """Remove the lock files of gone owners that no recording names any more."""
        try:
            names = [p.name for p in self.dir.iterdir()]
        except OSError:
            return
        for name in names:
            if name not in referenced:
                self.forget(name)

    def forget(self, token: str | None) -> None:
        """Remove a gone owner's lock file (only after its lock was found free)."""
        if token is None or not _TOKEN.match(token) or token == self.token or fcntl is None:
            return
        path = self.dir / token
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(path)
        except OSError:
            pass
        finally:
            os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
