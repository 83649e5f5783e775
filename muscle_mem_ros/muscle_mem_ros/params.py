"""Task parameters in recorded tool calls: infer them, store them, substitute them.

While a task runs with ``params={'name': 'John'}``, an argument of a tool call
equal to a parameter's value is stored as a reference to that parameter, not as
the value; a later replay with ``params={'name': 'Jane'}`` calls the tool with
'Jane'. As in the original muscle-mem, matching is by ``==`` and when several
parameters match, the last one in the dict wins.

The stored form of a call is a pickled :class:`CallSpec`, so that payloads are
compared and replayed byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
import json
import pickle
from typing import Any

__all__ = ['Arg', 'CallSpec', 'infer', 'MissingParamError']


class MissingParamError(KeyError):
    """A recorded call refers to a task parameter the current run does not have."""


@dataclass(frozen=True)
class Arg:
    """One recorded argument: a fixed value, or a reference to a task parameter.

    Attributes:
        param: Name of the task parameter, or None for a fixed value.
        value: The fixed value (None when ``param`` is set).
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

    def encode(self) -> bytes:
        """Pickle the spec (raises what pickle raises for unpicklable values)."""
        return pickle.dumps(self, protocol=4)

    @staticmethod
    def decode(data: bytes) -> CallSpec:
        """Inverse of :meth:`encode`."""
        spec = pickle.loads(data)
        if not isinstance(spec, CallSpec):
            raise TypeError(f'payload is not a CallSpec but {type(spec).__name__}')
        return spec

    def describe(self) -> str:
        """Return a readable JSON rendering (for inspection only)."""
        def show(arg: Arg) -> Any:
            return {'param': arg.param} if arg.param is not None else arg.value
        return json.dumps({'args': [show(a) for a in self.args],
                           'kwargs': {k: show(a) for k, a in self.kwargs}}, default=repr)


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
