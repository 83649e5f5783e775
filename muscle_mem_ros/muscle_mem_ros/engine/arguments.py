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
Task parameters in recorded tool calls: infer them, store them, substitute them.

While a task runs with ``params={'name': 'John'}``, an argument of a tool call
equal to a parameter's value is stored as a reference to that parameter, not as
the value; a later replay with ``params={'name': 'Jane'}`` calls the tool with
'Jane'. As in the original muscle-mem, matching is by ``==`` and when several
parameters match, the last one in the dict wins.

The stored form of a call is a :class:`CallSpec` in the store's safe format
(JSON plus typed blobs, see :mod:`muscle_mem_ros.store.values`), so that
payloads are compared and replayed byte for byte and reading one never runs
code. Arguments must be JSON data, tuples, bytes or NumPy arrays; anything else
is pickled only when the engine allows it (``Engine(..., allow_pickle=True)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
import json
from typing import Any

from ..errors import MissingParamError, StoreCorruptError
from ..store.values import Blobs, pack, read_container, unpack, write_container

__all__ = ['Arg', 'CALL_MAGIC', 'CallSpec', 'infer']


CALL_MAGIC = b'MMC1'
"""First bytes of a stored Python call."""


@dataclass(frozen=True)
class Arg:
    """
    One recorded argument: a fixed value, or a reference to a task parameter.

    :ivar param: Name of the task parameter, or None for a fixed value.
    :ivar value: The fixed value (None when ``param`` is set).
    """

    param: str | None = None
    value: Any = None

    def resolve(self, params: Mapping[str, Any] | None) -> Any:
        """Return the value to call the tool with."""
        if self.param is None:
            return self.value
        if not params or self.param not in params:
            raise MissingParamError(f'parameter {self.param!r} not given for this run')
        return params[self.param]


@dataclass(frozen=True)
class CallSpec:
    """Arguments of one recorded tool call (``self`` of a method excluded)."""

    args: tuple[Arg, ...]
    kwargs: tuple[tuple[str, Arg], ...]

    def resolve(self, params: Mapping[str, Any] | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Return ``(args, kwargs)`` with parameters substituted."""
        return (tuple(a.resolve(params) for a in self.args),
                {k: a.resolve(params) for k, a in self.kwargs})

    def encode(self, *, allow_pickle: bool = False) -> bytes:
        """
        Return the stored form: a ``MMC1`` container of the safe format.

        The header is ``{"a": [arg, ...], "k": [[name, arg], ...]}`` where an
        argument is ``{"r": parameter name}`` or ``{"v": tagged value}``.

        :param allow_pickle: Pickle arguments that are not JSON data or NumPy arrays.
        :return: The bytes; equal calls give equal bytes.
        :raises UnsafeValueError: an argument is not storable safely (a ``TypeError``).
        :raises pickle.PicklingError: with ``allow_pickle``, an unpicklable argument.
        """
        blobs = Blobs()

        def arg(a: Arg) -> dict[str, Any]:
            if a.param is not None:
                return {'r': a.param}
            return {'v': pack(a.value, blobs, allow_pickle=allow_pickle)}

        header = {'a': [arg(a) for a in self.args], 'k': [[k, arg(a)] for k, a in self.kwargs]}
        return write_container(CALL_MAGIC, header, blobs)

    @staticmethod
    def decode(data: bytes, *, allow_pickle: bool = False) -> CallSpec:
        """
        Inverse of :meth:`encode`; never runs stored code.

        :param data: A stored payload.
        :param allow_pickle: Unpickle pickled arguments (trusted stores only).
        :return: The spec.
        :raises StoreCorruptError: not a call in the safe format.
        :raises StorePickleError: a pickled argument and ``allow_pickle`` is False.
        """
        header, blobs = read_container(CALL_MAGIC, data)

        def arg(item: Any) -> Arg:
            if type(item) is dict and len(item) == 1 and type(item.get('r')) is str:
                return Arg(param=item['r'])
            if type(item) is dict and len(item) == 1 and 'v' in item:
                return Arg(value=unpack(item['v'], blobs, allow_pickle=allow_pickle))
            raise StoreCorruptError(f'stored call argument is malformed: {item!r:.80}')

        try:
            return CallSpec(args=tuple(arg(a) for a in header['a']),
                            kwargs=tuple((str(k), arg(a)) for k, a in header['k']))
        except (KeyError, TypeError, ValueError) as err:
            raise StoreCorruptError(f'stored call is malformed: {err!r}') from err

    def describe(self) -> str:
        """
        Return a readable JSON rendering (inspection, and the leaves bindings see).

        Tuples and NumPy arrays render as lists (their numbers are leaves such as
        ``args[0][1]``); other objects as their ``repr``.
        """
        def show(arg: Arg) -> Any:
            return {'param': arg.param} if arg.param is not None else arg.value
        return json.dumps({'args': [show(a) for a in self.args],
                           'kwargs': {k: show(a) for k, a in self.kwargs}}, default=_readable)


def _readable(value: Any) -> Any:
    """Render a NumPy array or scalar as JSON data, anything else as its repr."""
    if type(value).__module__ == 'numpy' and hasattr(value, 'tolist'):
        return value.tolist()
    return repr(value)


def _match(value: Any, params: Mapping[str, Any] | None) -> Arg:
    found: str | None = None
    for key, candidate in (params or {}).items():
        try:
            equal = bool(value == candidate)
        except Exception:  # noqa: BLE001 - e.g. arrays; such values are never parameters
            equal = False
        if equal:
            found = key
    return Arg(param=found) if found is not None else Arg(value=value)


def infer(args: tuple[Any, ...], kwargs: Mapping[str, Any],
          params: Mapping[str, Any] | None) -> CallSpec:
    """Build the stored form of a call, turning values equal to a parameter into references."""
    return CallSpec(args=tuple(_match(v, params) for v in args),
                    kwargs=tuple((k, _match(v, params)) for k, v in kwargs.items()))
