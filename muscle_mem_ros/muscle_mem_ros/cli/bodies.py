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
branches, on every robot sharing the store (:mod:`muscle_mem_ros.body`). Compatibility is
transitive (A~B and B~C: A replays C's branches too): a declaration that joins more than
two bodies says which it now joins. ``--revoke A B --who NAME`` revokes a declaration,
recorded with who revoked it and when (listed under the declarations). A body is
named as ``muscle-mem tree`` shows it (``panda@3f2c``, enough hex digits to be the only
one of the store) or by its full key, as a node logs it at start (needed for a body
that has learned nothing yet).
"""

from __future__ import annotations

import argparse

from .inventory import body_rows, open_cli_store
from .output import Output, when
from ..body import ANY_BODY, Body, Compatibility, kin, resolve, shown
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
    cmd.add_argument('--revoke', nargs=2, metavar=('A', 'B'),
                     help='revoke the declaration that bodies A and B are compatible (recorded '
                          'with --who and the time)')
    cmd.add_argument('--who', help='who declares or revokes it (required with --compatible '
                                   'and --revoke)')
    cmd.set_defaults(run=run)


def run(args: argparse.Namespace, out: Output) -> int:
    """List the bodies, or declare two compatible, or revoke a declaration."""
    if args.compatible or args.revoke:
        flag = '--compatible' if args.compatible else '--revoke'
        if not (args.who or '').strip():
            raise MuscleMemError(f'bodies {flag}: pass --who NAME (who declares or revokes '
                                 'that the two bodies are one for the cache)')
        with open_cli_store(args.store, write=True) as store:
            known = [k for k in store.bodies() if Body.parse(k) is not None]
            known += [k for p in store.compatible_bodies() for k in (p.a, p.b)]
            try:
                a, b = (resolve(name, known) for name in args.compatible or args.revoke)
                if a == b:
                    raise ValueError(f'{shown(a)} is one body already')
                pair = (store.declare_compatible if args.compatible
                        else store.revoke_compatible)(a=a, b=b, who=args.who.strip())
            except ValueError as err:
                raise MuscleMemError(f'bodies {flag}: {err}') from err
            joined = _joined(pair.a, store.compatible_bodies()) if args.compatible else []
        if out.json_mode:
            out.json({'a': pair.a, 'b': pair.b, 'who': pair.who, 'at': pair.at,
                      'revoked': bool(args.revoke), 'joined': joined})
        elif args.revoke:
            out.print(f'{shown(pair.a)} and {shown(pair.b)} are no longer compatible (revoked '
                      f'by {pair.who}, {when(pair.at)}): neither replays the branches learned '
                      'on the other, unless other declarations still join them')
        else:
            out.print(f'{shown(pair.a)} and {shown(pair.b)} are compatible (declared by '
                      f'{pair.who}): each replays the branches learned on the other')
            if len(joined) > 2:
                out.print(f'compatibility is transitive: {", ".join(map(shown, joined[:-1]))} '
                          f"and {shown(joined[-1])} now replay each other's branches "
                          '(revoke a declaration with --revoke A B --who NAME)')
        return 0
    with open_cli_store(args.store) as store:
        rows = body_rows(store.bodies())
        pairs = store.compatible_bodies()
        revoked = store.revoked_bodies()
    if out.json_mode:
        out.json({'bodies': rows, 'compatible': [
            {'a': p.a, 'b': p.b, 'who': p.who, 'at': p.at} for p in pairs], 'revoked': [
            {'a': p.a, 'b': p.b, 'who': p.who, 'at': p.at} for p in revoked]})
        return 0
    out.table(('body', 'key', 'trajectories'),
              ([r['body'], _ANYWHERE.get(r['key'], r['key']), r['trajectories']]
               for r in rows), right=('trajectories',))
    if pairs:
        out.table(('body', 'compatible with', 'declared by', 'when'),
                  ([shown(p.a), shown(p.b), p.who, when(p.at)] for p in pairs),
                  title='declared compatible (transitive: a body replays the branches of '
                        'every body a chain of declarations joins it to)')
    if revoked:
        out.table(('body', 'was compatible with', 'revoked by', 'when'),
                  ([shown(p.a), shown(p.b), p.who, when(p.at)] for p in revoked),
                  title='declarations revoked')
    return 0


def _joined(key: str, pairs: list[Compatibility]) -> list[str]:
    """Return the bodies the declared pairs join ``key`` to (itself included), in key order."""
    found = Body.parse(key)
    seen = kin(found, pairs).digests if found is not None else frozenset()
    return sorted({k for p in pairs for k in (p.a, p.b)
                   if (b := Body.parse(k)) is not None and b.digest in seen})
