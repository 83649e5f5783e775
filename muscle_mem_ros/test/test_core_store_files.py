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

"""Store files on disk: private modes, read-only places named, live versus abandoned recordings."""

from __future__ import annotations

from contextlib import contextmanager
import os
from pathlib import Path
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap

from core_helpers import subprocess_env
from muscle_mem_ros import Snapshot, SqliteStore, Step, StoreAccessError, ToolKind
from muscle_mem_ros.store import open_store, schema
import pytest


def step(name: str) -> Step:
    return Step(tool=name, kind=ToolKind.ACTION, type_name='pkg/action/A', payload=b'g',
                pre=Snapshot(features={'q': (0.0,)}))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextmanager
def umask(value: int):
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


def test_new_store_files_are_private_under_umask_022(tmp_path):
    path = tmp_path / 'a' / 'b' / 'cache.db'
    with umask(0o022):
        store = open_store(str(path))
        rec = store.begin(task='t', variant='', params_json='{}')
        rec.append(step('a'))
        assert (tmp_path / 'a' / 'b' / 'cache.db-wal').exists()
        assert (tmp_path / 'a' / 'b' / 'cache.db-shm').exists()
        modes = {p.name: mode(p) for p in [tmp_path / 'a', *(tmp_path / 'a').rglob('*')]}
        rec.commit()
        store.close()
    assert modes == {'a': 0o700, 'b': 0o700, 'cache.db': 0o600, 'cache.db-wal': 0o600,
                     'cache.db-shm': 0o600, 'cache.db-owners': 0o700,
                     next(n for n in modes if len(n) == 32): 0o600}


def test_migration_backup_is_private(tmp_path):
    path = tmp_path / 'old.db'
    conn = sqlite3.connect(path, isolation_level=None)
    schema.migrate(conn, current=0, target=2)
    conn.close()
    os.chmod(path, 0o600)
    with umask(0o022), SqliteStore(path=path) as s:
        assert mode(s.backup) == 0o600


@contextmanager
def read_only(path: Path):
    """Make ``path`` unwritable, for root too (immutable flag) where chmod is not enough."""
    if os.geteuid() != 0:
        old = mode(path)
        os.chmod(path, old & ~0o222)
        try:
            yield
        finally:
            os.chmod(path, old)
        return
    chattr = shutil.which('chattr')
    if chattr is None or subprocess.run([chattr, '+i', str(path)]).returncode != 0:
        pytest.skip('running as root and cannot set the immutable flag (chattr): a read-only '
                    'place cannot be made')
    try:
        yield
    finally:
        subprocess.run([chattr, '-i', str(path)], check=True)


def test_healthy_store_in_a_read_only_directory_names_the_cause(tmp_path):
    directory = tmp_path / 'ro'
    directory.mkdir()
    path = directory / 'cache.db'
    with SqliteStore(path=path) as s:
        s.add_trajectory(task='t', variant='', params_json='{}', steps=[step('a')])
    before = path.read_bytes()
    with read_only(directory):
        with pytest.raises(StoreAccessError) as info:
            open_store(str(path))
    text = str(info.value)
    assert 'read-only' in text and str(directory) in text and 'cache.db-wal' in text
    assert 'corrupt' not in text
    assert path.read_bytes() == before
    with SqliteStore(path=path) as s:  # writable again: the store is intact
        assert len(s.trajectories()) == 1


def test_read_only_store_file_names_the_cause(tmp_path):
    path = tmp_path / 'cache.db'
    with SqliteStore(path=path) as s:
        s.add_trajectory(task='t', variant='', params_json='{}', steps=[step('a')])
    with read_only(path), pytest.raises(StoreAccessError, match='store file is read-only'):
        open_store(str(path))


def test_new_store_in_a_read_only_directory_names_the_cause(tmp_path):
    directory = tmp_path / 'ro'
    directory.mkdir()
    with read_only(directory), pytest.raises(StoreAccessError, match='read-only'):
        open_store(str(directory / 'cache.db'))
    assert list(directory.iterdir()) == []


RECORDER = textwrap.dedent("""
    import sys, time
    from muscle_mem_ros import SqliteStore, Snapshot, Step, ToolKind
    s = SqliteStore(path=sys.argv[1])
    rec = s.begin(task='live', variant='', params_json='{}')
    rec.append(Step(tool='a', kind=ToolKind.ACTION, type_name='pkg/action/A', payload=b'g'))
    print('READY', flush=True)
    sys.stdin.readline()
    if sys.argv[2] == 'close':
        s.close()
        print('CLOSED', flush=True)
        sys.stdin.readline()
""")


@contextmanager
def recorder(path: Path, then: str = 'exit'):
    proc = subprocess.Popen([sys.executable, '-c', RECORDER, str(path), then],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=subprocess_env())
    try:
        assert proc.stdout.readline().strip() == 'READY'
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def test_a_recording_in_another_live_process_is_live_and_kept(tmp_path):
    path = tmp_path / 'cache.db'
    with recorder(path) as proc:
        with SqliteStore(path=path, abandoned_retention=0.0) as s:  # purge all abandoned on open
            (info,) = s.incomplete_recordings()
            assert info.live and info.task == 'live' and info.step_count == 1
            assert f'pid {proc.pid}' in info.owner
            assert s.purged == 0 and s.purge_abandoned() == 0
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            (info,) = s.incomplete_recordings()
            assert not info.live  # the process died: the kernel dropped its lock
            assert s.purge_abandoned(older_than=3600.0) == 0  # too recent for that retention
            assert s.purge_abandoned() == 1
            assert s.incomplete_recordings() == []
    assert list((tmp_path / 'cache.db-owners').iterdir()) == []  # the dead owner's lock went too


def test_a_closed_store_abandons_its_recording(tmp_path):
    path = tmp_path / 'cache.db'
    with recorder(path, then='close') as proc:
        with SqliteStore(path=path) as s:
            assert [r.live for r in s.incomplete_recordings()] == [True]
            proc.stdin.write('\n')
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == 'CLOSED'
            assert [r.live for r in s.incomplete_recordings()] == [False]


def test_own_recordings_are_live_and_abandoned_ones_are_purged_on_open(tmp_path):
    path = tmp_path / 'cache.db'
    with recorder(path):
        pass  # killed while recording
    with SqliteStore(path=path) as s:  # default retention: a fresh abandoned one stays
        assert [r.live for r in s.incomplete_recordings()] == [False]
        mine = s.begin(task='mine', variant='', params_json='{}')
        assert [(r.task, r.live) for r in s.incomplete_recordings()] == [
            ('live', False), ('mine', True)]
        assert s.purge_abandoned() == 1
        assert [r.task for r in s.incomplete_recordings()] == ['mine']
        mine.discard()
    with recorder(path):
        pass
    with SqliteStore(path=path, abandoned_retention=0.0) as s:
        assert s.purged == 1 and s.incomplete_recordings() == []


def test_lock_files_of_stopped_processes_are_swept_on_open(tmp_path):
    path = tmp_path / 'cache.db'
    with recorder(path):
        pass  # killed while recording: its lock file stays, named by the recording
    owners = tmp_path / 'cache.db-owners'
    assert len(list(owners.iterdir())) == 1
    conn = sqlite3.connect(path)
    conn.execute('DELETE FROM recordings')  # no recording names that owner any more
    conn.commit()
    conn.close()
    (owners / 'not-a-token').write_text('')
    with SqliteStore(path=path) as s:
        assert s.incomplete_recordings() == []
        assert [p.name for p in owners.iterdir()] == ['not-a-token']  # only ours are touched
