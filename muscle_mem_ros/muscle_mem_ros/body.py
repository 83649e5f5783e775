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
The body a branch was learned on: its fingerprint, its name, and which bodies see which.

A trajectory is a fact about one body. What defines a body for the cache
(:func:`body_of`) is what a replayed goal relies on:

* the robot's description, as ``robot_state_publisher`` publishes it on
  ``/robot_description`` (or read from the file a node parameter names), normalised
  (:func:`normalised`: an XML description (URDF, MJCF, SDF) in canonical form, comments
  and layout whitespace dropped, attributes sorted; other text line by line, stripped);
  a changed number in it (a new calibration) is another body;
* the joint names of the sensors read by name (``sensors.<n>.joints``), in order, per
  sensor: a goal of joint positions means nothing on joints of other names;
* the servers and types of the tools (actions and services) the cache calls.

Their SHA-256 is the body's digest. Its readable name is the robot's name from the
description (``<robot name="panda">`` in URDF, ``<mujoco model="...">`` in MJCF, the
first model of an SDF), else the node's name, then ``@`` and the digest's first 4 hex
digits: ``panda@3f2c``. A store keeps ``name@`` and 16 hex digits (:attr:`Body.key`);
bodies are the same when their digests are, whatever their names (``body_name`` only
renames).

Which trajectories a robot replays (:class:`Kin`): those of its own body, those of
bodies its owner declared compatible with it (pairs kept in the store, so a fleet
shares them; compatibility is transitive: a calibration declared compatible with one
declared compatible with the first is too; a declaration is revoked with a name,
``muscle-mem bodies --revoke``), those of an unknown body (''), learned
before trajectories recorded their body: they replay on any body, as before; and those
imported for any body (:data:`ANY_BODY`: from a file that recorded no body, with no
``--body`` given), which replay on any body too, and are said to be imported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
import hashlib
import json
import xml.etree.ElementTree as ElementTree

__all__ = ['ANY_BODY', 'anywhere', 'Body', 'body_of', 'Compatibility', 'Kin', 'kin',
           'LiveBody', 'normalised', 'resolve', 'robot_name', 'shown']

ANY_BODY = '*'
"""The key of trajectories imported for any body (a file that recorded none, no ``--body``)."""

DIGITS = 16
"""Hex digits of the digest a store keeps."""

SHOWN = 4
"""Hex digits of the digest a person reads."""


@dataclass(frozen=True)
class Body:
    """
    A body: its readable name and the digest of what defines it.

    :ivar name: The robot's name (from its description, a parameter or the node).
    :ivar digest: Hex SHA-256 of the fingerprint (:func:`body_of`), :data:`DIGITS` long.
    """

    name: str
    digest: str

    @property
    def key(self) -> str:
        """Return what a store keeps: ``name@`` and the digest."""
        return f'{self.name}@{self.digest}'

    def __str__(self) -> str:
        return f'{self.name}@{self.digest[:SHOWN]}'

    @classmethod
    def parse(cls, key: str) -> Body | None:
        """Return the body a store's key names (None for '' and :data:`ANY_BODY`: any body)."""
        name, at, digest = key.rpartition('@')
        if not key or key == ANY_BODY:
            return None
        return cls(name, digest) if at else cls('', key)


@dataclass(frozen=True)
class Compatibility:
    """
    An owner's word that two bodies are one for the cache.

    :ivar a: One body's key.
    :ivar b: The other's.
    :ivar who: Who declared it.
    :ivar at: Wall time it was declared.
    """

    a: str
    b: str
    who: str
    at: float


def shown(key: str) -> str:
    """Return a stored body as a person reads it (``panda@3f2c``; 'unknown' for '')."""
    if key == ANY_BODY:
        return 'any body (imported)'
    body = Body.parse(key)
    return 'unknown' if body is None else str(body)


def anywhere(counts: Mapping[str, int]) -> list[str]:
    """
    Return what a node says at start of a store's trajectories that replay on any body.

    Those learned before trajectories recorded their body ('') and those imported for
    any body (:data:`ANY_BODY`) are said apart: an import was not learned before bodies.

    :param counts: Trajectories by body key (:meth:`~.store.base.Store.bodies`).
    """
    said = []
    for key, why, where in (('', 'learned before trajectories recorded their body', ', as before'),
                            (ANY_BODY, 'imported for any body ({} file recorded none)', '')):
        n = counts.get(key, 0)
        if n:
            one = n == 1
            said.append(f'{n} trajector{"y" if one else "ies"} '
                        f'{why.format("its" if one else "their")}: '
                        f'{"it replays" if one else "they replay"} on any body{where}')
    return said


def normalised(description: str) -> str:
    """
    Return a description in the form that is fingerprinted.

    XML (URDF, MJCF, SDF, xacro output) in canonical form (C14N 2.0: comments and
    whitespace between elements dropped, attributes sorted); any other text line by line,
    each stripped, empty lines dropped. '' stays ''.
    """
    text = description.strip()
    if not text:
        return ''
    if text.startswith('<'):
        try:
            return ElementTree.canonicalize(text, strip_text=True)
        except ElementTree.ParseError:
            pass
    return '\n'.join(line.strip() for line in text.splitlines() if line.strip())


def robot_name(description: str) -> str:
    """Return the robot's name in a description ('' when it names none or is not XML)."""
    try:
        root = ElementTree.fromstring(description.strip())
    except ElementTree.ParseError:
        return ''
    if root.tag == 'robot':
        return root.get('name', '')
    if root.tag == 'mujoco':
        return root.get('model', '')
    if root.tag == 'sdf':
        model = root.find('.//model')
        return '' if model is None else model.get('name', '')
    return root.get('name', '')


def body_of(*, description: str, joints: Mapping[str, Sequence[str]],
            tools: Iterable[tuple[str, str]], name: str = '', fallback: str = 'robot') -> Body:
    """
    Return the body that a description, joint names and tools define.

    :param description: The robot description ('' when there is none).
    :param joints: Joint names of each sensor read by name, by sensor.
    :param tools: (server, type) of each tool.
    :param name: The readable name to use ('' : the description's, else ``fallback``).
    :param fallback: The name when neither gives one (the node's name).
    """
    text = normalised(description)
    fingerprint = json.dumps({
        'description': hashlib.sha256(text.encode()).hexdigest() if text else '',
        'joints': {s: list(j) for s, j in sorted(joints.items())},
        'tools': sorted({(str(server), str(kind)) for server, kind in tools}),
    }, sort_keys=True, separators=(',', ':'))
    digest = hashlib.sha256(fingerprint.encode()).hexdigest()[:DIGITS]
    readable = (name or robot_name(description) or fallback).strip().replace('@', '_')
    return Body(readable or 'robot', digest)


class LiveBody(Body):
    """
    A node's body while its description may still come or change: one object, shared.

    The recorder and the trees hold this object, so a description that arrives late or
    changes while the node runs changes the body they file and replay under at once
    (:meth:`become`). While ``pending`` (the node waited for a description and none came),
    :func:`kin` sees no body of its own: a robot that does not know its body yet replays
    no branch learned on a known body, not even its own undescribed ones (another model
    sharing its joint names would have learned the same body).
    """

    pending: bool

    def __init__(self, body: Body, *, pending: bool = False) -> None:
        self.become(body, pending=pending)

    def become(self, body: Body, *, pending: bool = False) -> None:
        """Be ``body`` from now on (``pending``: still without a description)."""
        object.__setattr__(self, 'name', body.name)  # (a frozen record, changed on purpose)
        object.__setattr__(self, 'digest', body.digest)
        object.__setattr__(self, 'pending', pending)

    __hash__ = object.__hash__


@dataclass(frozen=True)
class Kin:
    """
    Which stored bodies a robot replays: its own, those declared compatible, unknown ones.

    :ivar body: This robot's body.
    :ivar digests: The digests of its body and of those declared compatible with it.
    """

    body: Body
    digests: frozenset[str]

    def sees(self, key: str) -> bool:
        """Return True when a trajectory learned on ``key`` replays on this robot."""
        found = Body.parse(key)
        return found is None or found.digest in self.digests

    def reason(self, key: str) -> str:
        """Return why a trajectory learned on ``key`` does not replay here."""
        unknown = (' (no robot description yet: its body is not known)'
                   if getattr(self.body, 'pending', False) else '')
        return f'learned on {shown(key)}, this robot is {self.body}{unknown}'

    @property
    def text(self) -> str:
        """Return what plans learned for this robot are learned with (kept plans' key)."""
        return ','.join(sorted(self.digests))


def kin(body: Body, pairs: Iterable[Compatibility]) -> Kin:
    """Return what ``body`` sees, given the declared pairs (transitively; none while pending)."""
    if getattr(body, 'pending', False):
        return Kin(body, frozenset())
    links: dict[str, set[str]] = {}
    for pair in pairs:
        a, b = Body.parse(pair.a), Body.parse(pair.b)
        if a is None or b is None:
            continue
        links.setdefault(a.digest, set()).add(b.digest)
        links.setdefault(b.digest, set()).add(a.digest)
    seen = {body.digest}
    todo = [body.digest]
    while todo:
        for other in links.get(todo.pop(), ()):
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return Kin(body, frozenset(seen))


def resolve(name: str, known: Iterable[str]) -> str:
    """
    Return the stored key a person's ``panda@3f2c`` names among ``known`` keys.

    A full key (``name@`` and :data:`DIGITS` hex digits) is taken as it is, known or not
    (a robot that has learned nothing yet is known only by the key its node logs).

    :raises ValueError: It names none of them, or more than one.
    """
    wanted = Body.parse(name.strip())
    if wanted is None or not wanted.digest:
        raise ValueError(f'{name!r} is not a body (name@hex, as muscle-mem tree shows it)')
    if len(wanted.digest) == DIGITS and wanted.name:
        return wanted.key
    found = sorted({k for k in known if (b := Body.parse(k)) is not None
                    and b.digest.startswith(wanted.digest.lower())
                    and (not wanted.name or b.name == wanted.name)})
    if len(found) != 1:
        listed = ', '.join(shown(k) for k in sorted(set(known)) if k) or 'none'
        what = 'no body' if not found else 'more than one body'
        raise ValueError(f'{name!r} names {what} of this store (bodies: {listed}); give the '
                         "full key the node logs at start ('this robot is ...')")
    return found[0]
