"""Resolve ROS interface types by name and read messages without rosidl_runtime_py.

The node is configured with type names (``sensor_msgs/msg/JointState``,
``test_msgs/action/Fibonacci``, ``std_srvs/srv/SetBool``) and field paths
(``position``, ``pose.position``, ``ranges``). Everything here works from the
generated Python classes' own metadata (``get_fields_and_field_types``), so any
interface package on the Python path works, and a bad name or path is found at
startup, before the first message arrives.

Field paths are compiled once into extractor functions, so turning a message
into a feature vector is a few attribute reads and one list conversion.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import hashlib
import importlib
import json
import math
import re
from typing import Any

__all__ = [
    'FieldExtractor',
    'TypeResolutionError',
    'canonical_type_name',
    'compile_field_path',
    'encode_string',
    'message_to_json',
    'resolve_type',
]

_NUMERIC = frozenset({
    'boolean', 'octet', 'char', 'byte', 'float', 'double', 'long double',
    'int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'uint64',
})
_STRING_RE = re.compile(r'^w?string(<=\d+)?$')
_SEQ_RE = re.compile(r'^sequence<(.+?)(?:,\s*(\d+))?>$')
_ARRAY_RE = re.compile(r'^(.+)\[(\d+)\]$')
_KINDS = ('msg', 'srv', 'action')


class TypeResolutionError(ValueError):
    """A type name or a field path does not resolve; the message says why."""


def resolve_type(name: str, *, kind: str) -> type:
    """Import the interface class named ``pkg/<kind>/Name``.

    Args:
        name: Full type name, for example ``geometry_msgs/msg/PoseStamped``.
            ``pkg/Name`` is accepted as a short form for ``pkg/<kind>/Name``.
        kind: ``msg``, ``srv`` or ``action``; the name must be of that kind.

    Returns:
        The generated Python class.

    Raises:
        TypeResolutionError: Malformed name, wrong kind, package or type not found.
    """
    if kind not in _KINDS:
        raise ValueError(f'kind must be one of {_KINDS}, not {kind!r}')
    parts = name.strip().split('/')
    if len(parts) == 2:
        parts = [parts[0], kind, parts[1]]
    if len(parts) != 3 or not all(parts):
        raise TypeResolutionError(f"'{name}' is not a type name like 'pkg/{kind}/Name'")
    pkg, got_kind, type_name = parts
    if got_kind != kind:
        raise TypeResolutionError(f"'{name}' is a '{got_kind}' type, expected a '{kind}' type")
    try:
        module = importlib.import_module(f'{pkg}.{kind}')
    except ImportError as err:
        raise TypeResolutionError(
            f"unknown type '{name}': interface package '{pkg}' is not importable ({err})"
        ) from err
    cls = getattr(module, type_name, None)
    if not isinstance(cls, type):
        raise TypeResolutionError(f"unknown type '{name}': '{pkg}.{kind}' has no '{type_name}'")
    return cls


def canonical_type_name(name: str, *, kind: str) -> str:
    """Return ``pkg/<kind>/Name`` for ``pkg/<kind>/Name`` or the short ``pkg/Name``."""
    parts = name.strip().split('/')
    return f'{parts[0]}/{kind}/{parts[-1]}'


def encode_string(value: str) -> float:
    """Encode a string as a float, stably across processes and runs.

    48 bits of BLAKE2b: exactly representable in a double, so ``exact``
    comparisons of encoded strings are exact. Not Python's ``hash`` (salted).
    """
    digest = hashlib.blake2b(value.encode('utf-8'), digest_size=6).digest()
    return float(int.from_bytes(digest, 'big'))


@dataclass(frozen=True)
class FieldExtractor:
    """A compiled field path: message -> flat list of floats.

    Attributes:
        path: The field path as configured.
        size: Number of floats every message yields, or None when the path
            contains a variable-length sequence (known only per message).
        extract: The function doing it.
    """

    path: str
    size: int | None
    extract: Callable[[Any], list[float]]


def _fields(cls: type) -> dict[str, str]:
    getter = getattr(cls, 'get_fields_and_field_types', None)
    if getter is None:
        raise TypeResolutionError(f'{cls.__name__} is not a generated ROS message class')
    return dict(getter())


def _message_class(type_str: str) -> type:
    pkg, _, name = type_str.partition('/')
    if '/' in name:
        return resolve_type(type_str, kind='msg')
    return resolve_type(f'{pkg}/msg/{name}', kind='msg')


def _flattener(type_str: str) -> tuple[Callable[[Any], list[float]], int | None]:
    """Build a function flattening one value of ``type_str`` into floats."""
    seq = _SEQ_RE.match(type_str)
    arr = _ARRAY_RE.match(type_str) if seq is None else None
    if seq is not None or arr is not None:
        inner = (seq or arr).group(1)  # type: ignore[union-attr]
        fixed = int(arr.group(2)) if arr is not None else None
        item, item_size = _flattener(inner)
        if inner in ('octet', 'byte'):
            def flat_bytes(value: Any) -> list[float]:
                return [float(x[0] if isinstance(x, bytes) else x) for x in value]
            return flat_bytes, fixed
        if inner in _NUMERIC:
            def flat_numeric(value: Any) -> list[float]:
                return [float(x) for x in value]
            return flat_numeric, fixed

        def flat_items(value: Any) -> list[float]:
            out: list[float] = []
            for element in value:
                out.extend(item(element))
            return out
        size = fixed * item_size if fixed is not None and item_size is not None else None
        return flat_items, size
    if type_str in _NUMERIC:
        if type_str in ('octet', 'byte'):
            return (lambda v: [float(v[0] if isinstance(v, bytes) else v)]), 1
        return (lambda v: [float(v)]), 1
    if _STRING_RE.match(type_str):
        return (lambda v: [encode_string(v)]), 1
    cls = _message_class(type_str)
    parts = [(name, *_flattener(sub)) for name, sub in _fields(cls).items()]
    sizes = [size for _, _, size in parts]
    total = sum(sizes) if all(s is not None for s in sizes) else None  # type: ignore[misc]

    def flat_message(value: Any) -> list[float]:
        out: list[float] = []
        for name, fn, _ in parts:
            out.extend(fn(getattr(value, name)))
        return out
    return flat_message, total


def compile_field_path(msg_cls: type, path: str) -> FieldExtractor:
    """Compile ``path`` (dot-separated field names) against ``msg_cls``.

    The path may end at a number, a string (encoded with :func:`encode_string`),
    a fixed array, a sequence, or a nested message (flattened depth first in
    field order). Only the last component may be an array or sequence.

    Raises:
        TypeResolutionError: A component is not a field of the message it is read from.
    """
    names = path.strip().split('.')
    if not path.strip() or not all(names):
        raise TypeResolutionError(f"'{path}' is not a field path like 'pose.position'")
    cls = msg_cls
    type_str = ''
    for index, name in enumerate(names):
        fields = _fields(cls)
        if name not in fields:
            known = ', '.join(fields) or 'none'
            raise TypeResolutionError(
                f"'{path}': {cls.__module__.split('.')[0]}/{cls.__name__} has no field "
                f"'{name}' (fields: {known})"
            )
        type_str = fields[name]
        if index < len(names) - 1:
            if '/' not in type_str or _SEQ_RE.match(type_str) or _ARRAY_RE.match(type_str):
                raise TypeResolutionError(
                    f"'{path}': field '{name}' is '{type_str}', not a message to descend into"
                )
            cls = _message_class(type_str)
    flatten, size = _flattener(type_str)

    def extract(msg: Any) -> list[float]:
        value = msg
        for name in names:
            value = getattr(value, name)
        return flatten(value)
    return FieldExtractor(path=path, size=size, extract=extract)


def _plain(value: Any) -> Any:
    if hasattr(value, 'get_fields_and_field_types'):
        return {name: _plain(getattr(value, name)) for name in value.get_fields_and_field_types()}
    if isinstance(value, (bytes, bytearray)):
        return list(value) if len(value) != 1 else value[0]
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if hasattr(value, 'tolist'):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)) or hasattr(value, '__iter__'):
        return [_plain(v) for v in value]
    return str(value)


def message_to_json(msg: Any) -> str:
    """Render a message as a JSON object (for reading only; replay uses CDR bytes).

    Non-finite floats become strings ('nan', 'inf') so the output is strict JSON.
    """
    return json.dumps(_plain(msg), separators=(',', ':'))
