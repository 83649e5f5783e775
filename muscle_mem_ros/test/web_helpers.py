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
The operator's page under test: a real SQLite store, a real server, a real browser.

:func:`build_web_store` writes :func:`cli_helpers.build_store`'s store and adds a task whose
goal field follows a parameter (an inferred binding: ``count``) and a task whose step was
watched (``watch``: a trace of the ``joints`` sensor and the action's feedback, camera
thumbnails before and after). :func:`serving` runs :class:`~muscle_mem_ros.web.PageServer`
on a free loopback port in a thread; :func:`browser` starts Debian's chromium headless
through Selenium and chromedriver, and skips the test, naming what is missing, where they
are not installed (``apt-get install chromium chromium-driver``; ``.ci/run`` does).
:func:`serve_process` runs ``muscle-mem serve`` itself, in a process of its own (``--attach``
a running node: the live page).
"""

from __future__ import annotations

from collections.abc import Iterator
import contextlib
import io
import json
import os
from pathlib import Path
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from cli_helpers import build_store, FIB, FIB_TYPE
from muscle_mem_ros.bindings.rules import element_tolerances
from muscle_mem_ros.cli.paramsfile import read_binding_settings
from muscle_mem_ros.records import Series, Snapshot, Step, ToolKind, Trace
from muscle_mem_ros.ros.messages.cdr import canonical_cdr
from muscle_mem_ros.store import SqliteStore
from muscle_mem_ros.web import PageServer, ServeOptions, Settings
from PIL import Image
import pytest
from rclpy.serialization import serialize_message
from test_msgs.action import Fibonacci
import yaml

CHROMIUM = '/usr/bin/chromium'
CHROMEDRIVER = '/usr/bin/chromedriver'
TIMES = tuple(round(-0.01 + 0.05 * i, 3) for i in range(21))
JOINTS = tuple((0.1 + 0.02 * i, -0.4 + 0.01 * i * i / 20, 0.7) for i in range(21))
TOLERANCE = 0.05


def png(colour: tuple[int, int, int]) -> bytes:
    """Return a small PNG of one colour (a camera thumbnail)."""
    out = io.BytesIO()
    Image.new('RGB', (32, 24), colour).save(out, format='PNG')
    return out.getvalue()


def build_web_store(path: Path) -> Path:
    """Write the store of the module docstring to ``path``; return it."""
    build_store(path)
    goal = Fibonacci.Goal(order=6)
    payload = canonical_cdr(bytes(serialize_message(goal)), Fibonacci.Goal)
    with SqliteStore(path=path) as db:
        db.add_trajectory(task='count', variant='{"n":6}', params_json='{"n":6}', steps=[Step(
            tool=FIB, kind=ToolKind.ACTION, type_name=FIB_TYPE, payload=payload,
            payload_json='{"order": 6}', pre=Snapshot(features={'joints': (0.0,)}))])
        trace = Trace(rate=20.0, sensors={'joints': Series(TIMES, JOINTS)},
                      feedback=Series(TIMES[2:], tuple((0.1 * i,) for i in range(19))),
                      feedback_leaves=('progress',))
        pre = Snapshot(features={'joints': JOINTS[0]}, images={'camera': png((200, 30, 30))})
        post = Snapshot(features={'joints': JOINTS[-1]}, images={'camera': png((30, 30, 200))})
        db.add_trajectory(task='watch', variant='{}', params_json='{}', steps=[Step(
            tool=FIB, kind=ToolKind.ACTION, type_name=FIB_TYPE, payload=payload,
            payload_json=json.dumps({'order': 6}), pre=pre, post=post, duration=1.0,
            trace=trace)])
    return path


def params_file(directory: Path) -> Path:
    """Write a params file with the ``joints`` sensor's tolerance (the tube); return it."""
    path = directory / 'params.yaml'
    path.write_text(yaml.safe_dump({'muscle_mem': {'ros__parameters': {
        'sensors': {'joints': {'tolerance': TOLERANCE}}}}}))
    return path


@contextlib.contextmanager
def serving(store: Path, *, params: Path | None = None, read_only: bool = False,
            token: str | None = None) -> Iterator[PageServer]:
    """Serve ``store`` on a free loopback port for the duration."""
    bindings = read_binding_settings(params) if params is not None else None
    server = PageServer(ServeOptions(
        store=str(store), host='127.0.0.1', port=0, token=token, read_only=read_only,
        settings=Settings(bindings),
        tolerance=element_tolerances(bindings.sensors) if bindings is not None else None))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def browser() -> Iterator[object]:
    """Start headless chromium through chromedriver (skip the test when either is missing)."""
    webdriver = pytest.importorskip('selenium.webdriver', reason='selenium is not installed')
    for name, path in (('chromium', CHROMIUM), ('chromedriver', CHROMEDRIVER)):
        if not Path(path).exists() and not shutil.which(name):
            pytest.skip(f'{name} is not installed (apt-get install chromium chromium-driver)')
    from selenium.webdriver.chrome.service import Service
    profile = tempfile.mkdtemp(prefix='mm-chromium-')
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM if Path(CHROMIUM).exists() else shutil.which('chromium')
    for flag in ('--headless=new', '--no-sandbox', '--disable-gpu',
                 '--disable-background-networking', '--disable-component-update',
                 '--disable-sync', '--no-first-run', '--disable-dev-shm-usage',
                 f'--user-data-dir={profile}'):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(
        CHROMEDRIVER if Path(CHROMEDRIVER).exists() else shutil.which('chromedriver')))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


class ServeProcess:
    """``muscle-mem serve`` in a process of its own; :attr:`url` once it listens."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        self._out = open(log, 'w')  # noqa: SIM115 - closed in stop()
        env = {**os.environ, 'PYTHONUNBUFFERED': '1', 'COLUMNS': '1000'}
        self.proc = subprocess.Popen(
            [sys.executable, '-c', 'import sys; from muscle_mem_ros.cli.app import main; '
                                   'sys.exit(main())', 'serve', *args],
            stdout=self._out, stderr=subprocess.STDOUT, env=env)
        self.url = ''

    def wait_url(self, timeout: float = 30.0) -> str:
        """Wait for its ``serving ... on URL`` line; return the URL."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            found = re.search(r' on (http://\S+/)', self.log.read_text())
            if found:
                self.url = found.group(1)
                return self.url
            time.sleep(0.05)
        raise RuntimeError(f'serve did not start:\n{self.log.read_text()}')

    def stop(self, timeout: float = 10.0) -> int:
        """Ctrl-C it and wait; return its exit status (killed after ``timeout``: -9)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()
        return self.proc.returncode


@contextlib.contextmanager
def serve_process(store: Path, *args: str, log: Path) -> Iterator[ServeProcess]:
    """Run ``muscle-mem serve STORE --port 0 ARGS...`` until the block ends."""
    served = ServeProcess([str(store), '--port', '0', *args], log)
    try:
        served.wait_url()
        yield served
    finally:
        served.stop()
