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
``muscle-mem bodies``: the bodies a store's branches were learned on, and declaring two one.

Without options it lists each body (as a person reads it, ``panda@3f2c``, and the key
the store keeps), how many trajectories it learned, and the pairs declared compatible.
``--compatible A B --who NAME`` declares two bodies one for the cache (a new
calibration that changes nothing the cache relies on): each then replays the other's
branches, on every robot sharing the store (:mod:`muscle_mem_ros.body`). A body is
named as ``muscle-mem tree`` shows it (``panda@3f2c``, enough hex digits to be the only
one of the store) or by its full key, as a node logs it at start (needed for a body
that has learned nothing yet).
"""

from __future__ import annotations

import argparse

from .inventory import body_rows, open_cli_store
from .output import Output, when
from ..body import ANY_BODY, resolve, shown
from ..errors import MuscleMemError

__all__ = ['add_parser', 'run']


_ANYWHERE = {'': '(learned before bodies: replays on any body)',
             ANY_BODY: '(imported for any body: replays on any body)'}
"""What the key column says of the keys that are no body."""


def add_parser(cmd: argparse.ArgumentParser) -> None:
    """Add the bodies options to its subparser."""
    cmd.add_argument('--compatible', nargs=2, metavar=('A', 'B'),
                     help='declare bodies A and B compatible: each replays the branches '
                          'learned on the other (a new calibration of the same arm)')
    cmd.add_argument('--who', help='who declares it (required with --compatible)')
    cmd.set_defaults(run=run)


def run(args: argparse.Namespace, out: Output) -> int:
    """List the bodies, or declare two compatible."""
    if args.compatible:
        if not (args.who or '').strip():
            raise MuscleMemError('bodies --compatible: pass --who NAME (who declares the two '
                                 'bodies one for the cache)')
        with open_cli_store(args.store, write=True) as store:
            known = [k for k in store.bodies() if k]
            try:
                a, b = (resolve(name, known) for name in args.compatible)
            except ValueError as err:
                raise MuscleMemError(f'bodies --compatible: {err}') from err
            if a == b:
                raise MuscleMemError(f'bodies --compatible: {shown(a)} is one body already')
            pair = store.declare_compatible(a=a, b=b, who=args.who.strip())
        if out.json_mode:
            out.json({'a': pair.a, 'b': pair.b, 'who': pair.who, 'at': pair.at})
        else:
            out.print(f'{shown(pair.a)} and {shown(pair.b)} are compatible (declared by '
                      f'{pair.who}): each replays the branches learned on the other')
        return 0
    with open_cli_store(args.store) as store:
        rows = body_rows(store.bodies())
        pairs = store.compatible_bodies()
    if out.json_mode:
        out.json({'bodies': rows, 'compatible': [
            {'a': p.a, 'b': p.b, 'who': p.who, 'at': p.at} for p in pairs]})
        return 0
    out.table(('body', 'key', 'trajectories'),
              ([r['body'], _ANYWHERE.get(r['key'], r['key']), r['trajectories']]
               for r in rows), right=('trajectories',))
    if pairs:
        out.table(('body', 'compatible with', 'declared by', 'when'),
                  ([shown(p.a), shown(p.b), p.who, when(p.at)] for p in pairs),
                  title='declared compatible')
    return 0
