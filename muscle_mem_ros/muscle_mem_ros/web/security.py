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
Who may read the operator's page, and which forms it takes: loopback, a token, same origin.

The page shows what a cache learned and lets a person approve it for replay on a robot,
so a request is let in only when:

* **The bind is safe.** ``serve`` listens on loopback by default. A bind to any other
  address needs a token (:func:`check_bind` refuses to start without one, naming
  ``--token``): anyone who can reach the port would otherwise read the store and approve.
* **The token is there** (when one is set): the ``mm_token`` cookie, set by a first visit
  with ``?token=TOKEN``, or an ``Authorization: Bearer TOKEN`` header. Compared in constant
  time.
* **The Host is ours.** On a loopback bind only ``localhost``, ``127.0.0.1`` or ``[::1]``
  (or the address bound) with the served port is accepted: a page from another site whose
  name was re-pointed at 127.0.0.1 (DNS rebinding) sends its own name as Host and is refused.
* **A form comes from this page.** A POST's ``Origin`` (else its ``Referer``) must be this
  server's origin, and it must carry the CSRF token rendered into the form
  (:meth:`Guard.form_token`): an HMAC, under a secret made at start, of a fresh nonce and of
  what the form does, so a token is good only for the form it was rendered into and only
  while this server runs. A browser never lets another site read it.

Every refusal says why, in one line, for the person at the browser.
"""

from __future__ import annotations

from dataclasses import dataclass
import hashlib
import hmac
import ipaddress
import secrets
import socket
from urllib.parse import urlsplit

from ..errors import ConfigError

__all__ = ['check_bind', 'Guard', 'is_loopback', 'Refusal', 'TOKEN_COOKIE']

TOKEN_COOKIE = 'mm_token'
"""The cookie the token is kept in after a first visit with ``?token=``."""

_LOOPBACK_NAMES = ('localhost', '127.0.0.1', '[::1]')


@dataclass(frozen=True)
class Refusal:
    """
    Why a request is refused.

    :ivar status: The HTTP status (401, 403).
    :ivar reason: One line for the person at the browser.
    """

    status: int
    reason: str


def is_loopback(host: str) -> bool:
    """Return True when ``host`` (a name or an address) reaches this machine only."""
    name = host.strip('[]')
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    try:
        found = {info[4][0] for info in socket.getaddrinfo(name, None)}
    except OSError:
        return False
    return bool(found) and all(ipaddress.ip_address(str(a).split('%')[0]).is_loopback
                               for a in found)


def check_bind(host: str, token: str | None) -> None:
    """
    Refuse a bind that would let anyone who reaches the port in.

    :raises ConfigError: ``host`` is not loopback and no token is given.
    """
    if token is not None and not token.strip():
        raise ConfigError('--token: an empty token protects nothing')
    if not is_loopback(host) and not token:
        raise ConfigError(
            f'--host {host} is not a loopback address: anyone who reaches the port could read '
            'the store and approve replays; a remote bind needs --token TOKEN (every request '
            'must then carry it)')


class Guard:
    """
    The page's doorman: the token, the Host, and a form's origin and CSRF token.

    :param host: The address the server is bound to.
    :param port: The port it listens on.
    :param token: The token every request must carry (None: none, loopback only).
    """

    def __init__(self, *, host: str, port: int, token: str | None = None) -> None:
        self._token = token or None
        self._secret = secrets.token_bytes(32)
        self._any_host = self._token is not None and host in ('0.0.0.0', '::', '')
        names = {host if ':' not in host or host.startswith('[') else f'[{host}]'}
        if is_loopback(host):
            names.update(_LOOPBACK_NAMES)
        self._hosts = frozenset(f'{n}:{port}'.lower() for n in names)

    @property
    def token(self) -> str | None:
        """Return the token requests must carry (None: none is set)."""
        return self._token

    def check_host(self, host_header: str | None) -> Refusal | None:
        """Return why a request's ``Host`` is not this server's (None: it is)."""
        if self._any_host:
            return None
        if (host_header or '').lower() not in self._hosts:
            return Refusal(403, f'Host {host_header!r} is not this page '
                                f'(it answers as {", ".join(sorted(self._hosts))})')
        return None

    def check_token(self, cookie_token: str | None, header: str | None) -> Refusal | None:
        """Return why a request lacks the token (None: none is needed, or it is right)."""
        if self._token is None:
            return None
        given = cookie_token or ''
        if header and header.lower().startswith('bearer '):
            given = header[7:].strip()
        if not hmac.compare_digest(given.encode(), self._token.encode()):
            return Refusal(401, 'this page needs its token: open it with ?token=TOKEN (the '
                                'token serve was started with), or send Authorization: '
                                'Bearer TOKEN')
        return None

    def good_token(self, given: str) -> bool:
        """Return True when ``given`` (a ``?token=`` of a first visit) is the token."""
        return self._token is not None and hmac.compare_digest(given.encode(),
                                                               self._token.encode())

    def check_origin(self, host_header: str | None, origin: str | None,
                     referer: str | None) -> Refusal | None:
        """
        Return why a form's request did not come from this page (None: it did).

        The ``Origin`` header, else the ``Referer``'s scheme and authority, must be
        ``http://`` and the request's own (checked) ``Host``.
        """
        ours = f'http://{host_header or ""}'.lower()
        if origin and origin != 'null':
            came = origin.lower().rstrip('/')
        elif referer:
            parts = urlsplit(referer)
            came = f'{parts.scheme}://{parts.netloc}'.lower()
        else:
            return Refusal(403, 'refused: the request names no Origin or Referer, so it cannot '
                                'be told from a form another site sent')
        if came != ours:
            return Refusal(403, f'refused: a form sent from {came}, not from this page '
                                f'({ours}): cross-site requests may not approve or revoke')
        return None

    def form_token(self, purpose: str) -> str:
        """Return a fresh CSRF token for one form that does ``purpose``."""
        nonce = secrets.token_hex(12)
        return f'{nonce}.{self._sign(nonce, purpose)}'

    def check_form_token(self, given: str, purpose: str) -> Refusal | None:
        """Return why ``given`` is not a token this server rendered for ``purpose``."""
        nonce, _, signature = given.partition('.')
        if not nonce or not hmac.compare_digest(signature, self._sign(nonce, purpose)):
            return Refusal(403, 'refused: the form carries no valid CSRF token for this '
                                'action (a stale page from before a restart, or another '
                                'site): reload the page and try again')
        return None

    def _sign(self, nonce: str, purpose: str) -> str:
        return hmac.new(self._secret, f'{nonce}\n{purpose}'.encode(),
                        hashlib.sha256).hexdigest()
