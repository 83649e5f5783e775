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
The operator's page server: a few routes on the standard library's ``ThreadingHTTPServer``.

Routes (GET unless said):

* ``/``: the task list, from the store's task counters alone (fast on any store).
* ``/task?name=T[&page=N]``: the task's trees as pictures, its trust table (a page of
  :data:`.views.PAGE_SIZE` trajectories), its bindings and approvals, the approve form.
* ``/trajectory?id=N[&mark=S]``: one trajectory, every step with its plots and thumbnails
  (``mark``: a moment in seconds to mark on the plots).
* ``/events``: the live log as Server-Sent Events, fed by :class:`.events.EventHub`.
* POST ``/approve`` and ``/revoke``: the forms (refused when ``read_only``).

Each request opens the store as the CLI does (:func:`..cli.inventory.open_cli_store`,
read-only unless it approves or revokes), so a page always shows what the store holds now,
and a store a node writes into is never held open between requests. Every request passes
:class:`.security.Guard` first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import json
import logging
import socket
import socketserver
import threading
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from .approving import approve_shown, revoke_shown, StaleApprovalError
from .events import EventHub
from .pages import message_page, purpose, task_page, tasks_page
from .security import check_bind, Guard, Refusal, TOKEN_COOKIE
from .trajectorypage import Tolerance, trajectory_page
from .views import Settings, task_list, task_view, trajectory_view
from ..cli.inventory import open_cli_store
from ..errors import MuscleMemError, UnknownTrajectoryError
from ..replay.gates import covered

__all__ = ['PageServer', 'ServeOptions']

_LOG = logging.getLogger(__name__)
_MAX_FORM = 65536
_HEADERS = {
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'same-origin',
    'Content-Security-Policy': "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
                               "script-src 'unsafe-inline'; connect-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
}


@dataclass(frozen=True)
class ServeOptions:
    """
    What ``muscle-mem serve`` was asked.

    :ivar store: The store file or URL.
    :ivar host: The address to listen on (loopback unless a token is given).
    :ivar port: The port (0: any free one).
    :ivar token: The token every request must carry (None: none).
    :ivar read_only: Show no buttons, refuse every POST.
    :ivar settings: The node's params file's settings.
    :ivar tolerance: The sensors' tolerances by element (None: no params file, no tube).
    """

    store: str
    host: str = '127.0.0.1'
    port: int = 8765
    token: str | None = None
    read_only: bool = False
    settings: Settings = field(default_factory=Settings)
    tolerance: Tolerance | None = None


class PageServer(ThreadingHTTPServer):
    """
    The page on a store: serve it with :meth:`serve_forever` (or :meth:`start` in a thread).

    :param options: What to serve and how.
    :param hub: Where live events come from (:class:`.events.EventHub`; a new, unattached
        one when None): an event source publishes there and every open page shows it.
    :raises ConfigError: a bind that is not loopback without a token.
    :raises OSError: the address cannot be bound (the port in use).
    """

    daemon_threads = True
    block_on_close = False

    def __init__(self, options: ServeOptions, *, hub: EventHub | None = None) -> None:
        check_bind(options.host, options.token)
        self.options = options
        self.hub = hub or EventHub()
        if ':' in options.host.strip('[]'):
            self.address_family = socket.AF_INET6
        super().__init__((options.host.strip('[]'), options.port), _Handler)
        self.guard = Guard(host=options.host, port=self.server_address[1],
                           token=options.token)
        self._thread: threading.Thread | None = None

    def server_bind(self) -> None:
        """Bind without the reverse name lookup ``HTTPServer`` makes (a closed network)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name = self.options.host
        self.server_port = int(self.server_address[1])

    @property
    def url(self) -> str:
        """Return the page's address (``http://127.0.0.1:8765/``)."""
        host = self.options.host
        host = f'[{host}]' if ':' in host and not host.startswith('[') else host
        return f'http://{host}:{self.server_address[1]}/'

    def start(self) -> None:
        """Serve in a daemon thread (tests, or a process that does other work)."""
        self._thread = threading.Thread(target=self.serve_forever, name='muscle-mem-page',
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the open pages' streams, stop serving and close the socket."""
        self.hub.close()
        if self._thread is not None:
            self.shutdown()
            self._thread.join(timeout=5.0)
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: PageServer
    protocol_version = 'HTTP/1.1'
    server_version = 'muscle-mem'

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (its name)
        _LOG.debug('%s %s', self.address_string(), format % args)

    def _send(self, status: int, body: str, *, kind: str = 'text/html; charset=utf-8',
              headers: dict[str, str] | None = None) -> None:
        data = body.encode()
        self.send_response(status)
        for key, value in {**_HEADERS, 'Content-Type': kind, **(headers or {})}.items():
            self.send_header(key, value)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(data)

    def _refuse(self, refusal: Refusal) -> None:
        self._send(refusal.status, message_page(HTTPStatus(refusal.status).phrase,
                                                refusal.reason))

    def _admitted(self, query: dict[str, list[str]]) -> bool:
        """Return True when the Host and the token let the request in (else answered)."""
        guard = self.server.guard
        refusal = guard.check_host(self.headers.get('Host'))
        if refusal is None and guard.token is not None and 'token' in query:
            if guard.good_token(query['token'][0]):
                rest = {k: v for k, v in query.items() if k != 'token'}
                where = urlsplit(self.path).path + ('?' + urlencode(rest, doseq=True)
                                                    if rest else '')
                self._send(303, message_page('token accepted', 'go on', back=where), headers={
                    'Location': where,
                    'Set-Cookie': f'{TOKEN_COOKIE}={guard.token}; HttpOnly; SameSite=Strict; '
                                  'Path=/'})
                return False
        if refusal is None:
            cookie = SimpleCookie(self.headers.get('Cookie', ''))
            morsel = cookie.get(TOKEN_COOKIE)
            refusal = guard.check_token(morsel.value if morsel else None,
                                        self.headers.get('Authorization'))
        if refusal is not None:
            self._refuse(refusal)
            return False
        return True

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        if not self._admitted(query):
            return
        routes: dict[str, Callable[[dict[str, list[str]]], str]] = {
            '/': self._tasks, '/task': self._task, '/trajectory': self._trajectory}
        if parts.path == '/events':
            self._events()
            return
        route = routes.get(parts.path)
        if route is None:
            self._send(404, message_page('Not Found', f'no page {parts.path}'))
            return
        try:
            page = route(query)
        except UnknownTrajectoryError as err:
            self._send(404, message_page('Not Found', str(err)))
            return
        except ValueError as err:  # a page number or id that is not a number
            self._send(400, message_page('Bad Request', str(err)))
            return
        except (MuscleMemError, OSError) as err:
            self._send(500, message_page('store error', ' '.join(str(err).split())))
            return
        self._send(200, page)

    def _live(self) -> dict[str, Any]:
        """Return the live log's arguments of a page (no log while nothing is attached)."""
        hub = self.server.hub
        return {'events': hub.source if hub.attached else None, 'recent': hub.recent()}

    def _tokens(self) -> Callable[[str], str] | None:
        return None if self.server.options.read_only else self.server.guard.form_token

    def _tasks(self, query: dict[str, list[str]]) -> str:
        options = self.server.options
        with open_cli_store(options.store) as store:
            tasks = task_list(store)
        return tasks_page(tasks, store=options.store, read_only=options.read_only,
                          **self._live())

    def _task(self, query: dict[str, list[str]]) -> str:
        name = query.get('name', [''])[0]
        page = int(query.get('page', ['0'])[0] or 0)
        with open_cli_store(self.server.options.store) as store:
            data = task_view(store, self.server.options.settings, name, page)
        return task_page(data, self._tokens(), **self._live())

    def _trajectory(self, query: dict[str, list[str]]) -> str:
        tid = int(query.get('id', ['0'])[0] or 0)
        mark = float(query['mark'][0]) if query.get('mark') else None
        with open_cli_store(self.server.options.store) as store:
            data = trajectory_view(store, self.server.options.settings, tid)
        return trajectory_page(data, self._tokens(), tolerance=self.server.options.tolerance,
                               mark=mark, **self._live())

    def _events(self) -> None:
        self.send_response(200)
        for key, value in {**_HEADERS, 'Content-Type': 'text/event-stream'}.items():
            self.send_header(key, value)
        self.send_header('Connection', 'close')
        self.end_headers()
        self.close_connection = True
        if self.command == 'HEAD':
            return
        sub = self.server.hub.subscribe()
        try:
            for event in sub.events():
                text = f'data: {json.dumps(event)}\n\n' if event else ': idle\n\n'
                self.wfile.write(text.encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            sub.cancel()

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        parts = urlsplit(self.path)
        if not self._admitted(parse_qs(parts.query)):
            return
        guard, options = self.server.guard, self.server.options
        if options.read_only:
            self._refuse(Refusal(403, 'refused: this page is read-only (serve --read-only): '
                                      'nothing is approved or revoked from it'))
            return
        refusal = guard.check_origin(self.headers.get('Host'), self.headers.get('Origin'),
                                     self.headers.get('Referer'))
        if refusal is not None:
            self._refuse(refusal)
            return
        if parts.path not in ('/approve', '/revoke'):
            self._send(404, message_page('Not Found', f'no form {parts.path}'))
            return
        length = int(self.headers.get('Content-Length') or 0)
        if length > _MAX_FORM:
            self._refuse(Refusal(413, 'refused: the form is too large'))
            return
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode(
            'utf-8', 'replace'), keep_blank_values=True).items()}
        task = form.get('task', '')
        try:
            tid = int(form.get('trajectory') or 0)
        except ValueError:
            tid = -1
        action = parts.path.strip('/')
        refusal = guard.check_form_token(form.get('csrf', ''), purpose(action, task, tid))
        if refusal is not None:
            self._refuse(refusal)
            return
        back = form.get('back', '/')
        back = back if back.startswith('/') and not back.startswith('//') else '/'
        self._act(action, form, task, tid, back)

    def _act(self, action: str, form: dict[str, str], task: str, tid: int, back: str) -> None:
        options = self.server.options
        try:
            with open_cli_store(options.store, write=True) as store:
                if action == 'revoke':
                    text = revoke_shown(store, task=task, trajectory_id=tid)
                else:
                    approval = approve_shown(store, options.settings.approving, task=task,
                                             trajectory_id=tid, who=form.get('who', ''),
                                             shown=form.get('shown', ''))
                    what = f'trajectory {tid} of task {task!r}' if tid else f'task {task!r}'
                    text = f'{what} approved by {approval.who}: {covered(approval)}'
        except StaleApprovalError as err:
            self._send(409, message_page('not approved', str(err), back=back))
            return
        except ValueError as err:
            self._send(400, message_page(f'not {action}d', str(err), back=back))
            return
        except MuscleMemError as err:
            self._send(400, message_page(f'not {action}d', str(err), back=back))
            return
        _LOG.info('%s: %s', self.address_string(), text)
        self._send(200, message_page(f'{action}d', text, back=back))
