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
``muscle-mem serve STORE``: the operator's page on a store (:mod:`..web`).

Listens on loopback (``127.0.0.1:8765``) unless ``--host`` says otherwise; any other
address needs ``--token`` (refused at start without it), and says so when it starts.
``--read-only`` shows no buttons and refuses every form. ``--params FILE`` is the node's
params file, as for ``tree``, ``trust`` and ``approve``: the page then shows the bindings
the node infers with it, approvals cover those as ``muscle-mem approve --params`` does, and
the plots draw each element's tube from its tolerance. ``--attach [NODE]`` (default
``muscle_mem``) also shows what that running cache node decides, as it happens: its
``~/events`` subscribed to on a thread of its own (:mod:`..ros.execution.eventfeed`) and
fed to the page's live log; stopping the page stops the subscription.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading
from types import FrameType

from .inventory import open_cli_store
from .output import Output
from .paramsfile import read_binding_settings
from ..bindings.rules import element_tolerances

__all__ = ['add_parser', 'run']


def add_parser(cmd: argparse.ArgumentParser) -> None:
    """Add the serve options to its subparser."""
    cmd.add_argument('--host', default='127.0.0.1',
                     help='address to listen on (default 127.0.0.1, loopback; any other '
                          'needs --token)')
    cmd.add_argument('--port', type=int, default=8765, help='port (default 8765; 0: any free)')
    cmd.add_argument('--token', help='a secret every request must carry (open the page once '
                                     'with ?token=TOKEN; a cookie keeps it); required off '
                                     'loopback')
    cmd.add_argument('--read-only', action='store_true',
                     help='show no approve or revoke buttons and refuse every form')
    cmd.add_argument('--params', metavar='FILE',
                     help="the node's params file: its bindings, and the tolerances the plots "
                          'draw as tubes')
    cmd.add_argument('--node-name', default='muscle_mem',
                     help='top key of the params file (default muscle_mem)')
    cmd.add_argument('--attach', nargs='?', const='muscle_mem', metavar='NODE',
                     help="show a running cache node's decisions live (its ~/events); NODE "
                          'defaults to muscle_mem (a namespaced one: /robot1/muscle_mem)')
    cmd.set_defaults(run=run)


def run(args: argparse.Namespace, out: Output) -> int:
    """Serve the page until interrupted (Ctrl-C ends it with status 0)."""
    # Imported here: web/ reads the store through this package's inventory, so importing it
    # while the command line itself is being imported would go round in a circle.
    from ..web import PageServer, ServeOptions, Settings
    from ..web.events import EventHub
    from ..web.security import is_loopback
    bindings = read_binding_settings(args.params, args.node_name) if args.params else None
    with open_cli_store(args.store):  # not a store, a newer schema: one line, before binding
        pass
    options = ServeOptions(
        store=args.store, host=args.host, port=args.port, token=args.token,
        read_only=args.read_only, settings=Settings(bindings),
        tolerance=element_tolerances(bindings.sensors) if bindings is not None else None)
    hub = EventHub()
    server = PageServer(options, hub=hub)
    mode = ' (read-only)' if args.read_only else ''
    with contextlib.ExitStack() as stack:
        stack.callback(server.stop)  # after the feed stopped: nothing publishes any more
        if args.attach is not None:
            from ..ros.execution.eventfeed import attached, events_topic
            topic = events_topic(args.attach)
            hub.source = f'node {topic.rsplit("/", 1)[0]}'
            stack.enter_context(attached(args.attach, hub.publish))
            mode += f', live from {topic}'
        out.print(f'serving {args.store}{mode} on {server.url}')
        if not is_loopback(args.host):
            out.print(f'{args.host} is not loopback: every request needs the token; open '
                      f'{server.url}?token=TOKEN once (a cookie keeps it)')
        stop = threading.Event()

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            # Ctrl-C or a TERM asks serve_forever to return; it returns at its next poll
            # (0.5 s), whatever the main thread was doing when the signal came. (A
            # KeyboardInterrupt raised at a random point of the main thread, or one a
            # library's handler swallowed, once left the page serving until killed.)
            if not stop.is_set():
                stop.set()
                threading.Thread(target=server.shutdown, name='serve-stop', daemon=True).start()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            server.serve_forever()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        out.note('stopped')
    return 0
