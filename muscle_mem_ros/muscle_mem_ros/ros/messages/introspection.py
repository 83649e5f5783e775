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
Resolve ROS interface types by name and read messages without rosidl_runtime_py.

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
import functools
import hashlib
import importlib
import importlib.util
import json
import math
from pathlib import Path
import re
from typing import Any

from muscle_mem_ros.errors import TypeResolutionError
from rclpy.type_support import check_for_type_support

__all__ = [
    'NAME_FIELD',
    'FieldExtractor',
    'NamedFields',
    'canonical_type_name',
    'check_name_array',
    'compile_field_path',
    'compile_named_fields',
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
_PACKAGE_RE = re.compile(r'^(?!.*__)(?!.*_$)[a-z][a-z0-9_]*$')
"""A ROS package name (REP 144; rosidl's own check)."""
_TYPE_RE = re.compile(r'^[A-Z][A-Za-z0-9]*$')
"""An interface name: UpperCamelCase letters and digits (rosidl's rule)."""
_PARTS = {'srv': ('Request', 'Response'), 'action': ('Goal', 'Result', 'Feedback')}
"""The generated message classes a service or action class carries."""


def resolve_type(name: str, *, kind: str) -> Any:
    """
    Import the generated ROS interface class named ``pkg/<kind>/Name``.

    Nothing is imported before the name is known to denote a generated
    interface: the shape is checked first (``pkg`` a ROS package name, ``Name``
    an UpperCamel identifier), then the package is located without importing it
    and must carry rosidl's Python type support next to a ``<kind>`` subpackage.
    Only then is ``pkg.<kind>`` imported, and the attribute must be a class that
    rosidl generated (its metaclass, its type support, for a message its field
    table, for a service ``Request``/``Response``, for an action
    ``Goal``/``Result``/``Feedback``). So ``this/msg/X`` does not print the Zen
    of Python and ``rclpy/action/ActionServer`` is refused before anything
    touches the middleware.

    :param name: full type name, for example ``geometry_msgs/msg/PoseStamped``;
        ``pkg/Name`` is accepted as a short form of ``pkg/<kind>/Name``.
    :param kind: ``msg``, ``srv`` or ``action``; the name must be of that kind.
    :return: the generated Python class.
    :raises TypeResolutionError: malformed name, wrong kind, not an interface
        package, type not found or not a generated interface.
    """
    if kind not in _KINDS:
        raise ValueError(f'kind must be one of {_KINDS}, not {kind!r}')
    return _resolve(name, kind)


@functools.lru_cache(maxsize=None)
def _resolve(name: str, kind: str) -> Any:
    """Resolve as :func:`resolve_type` does; successes are cached (files are looked at once)."""
    if not isinstance(name, str):
        raise TypeResolutionError(f"{name!r} is not a type name like 'pkg/{kind}/Name'")
    parts = name.strip().split('/')
    if len(parts) == 2:
        parts = [parts[0], kind, parts[1]]
    if len(parts) != 3 or not all(parts):
        raise TypeResolutionError(f"'{name}' is not a type name like 'pkg/{kind}/Name'")
    pkg, got_kind, type_name = parts
    if got_kind not in _KINDS:
        raise TypeResolutionError(
            f"'{name}': '{got_kind}' is not one of {'|'.join(_KINDS)} "
            f"(a type name looks like 'pkg/{kind}/Name')"
        )
    if got_kind != kind:
        raise TypeResolutionError(f"'{name}' is a '{got_kind}' type, expected a '{kind}' type")
    if not _PACKAGE_RE.match(pkg):
        raise TypeResolutionError(
            f"'{name}': '{pkg}' is not a ROS package name (lowercase letters, digits and "
            'single underscores, starting with a letter)'
        )
    if not _TYPE_RE.match(type_name):
        raise TypeResolutionError(
            f"'{name}': '{type_name}' is not an interface name (UpperCamelCase letters and "
            'digits)'
        )
    problem = _not_an_interface_package(pkg, kind)
    if problem:
        raise TypeResolutionError(f"unknown type '{name}': {problem}")
    try:
        module = importlib.import_module(f'{pkg}.{kind}')
    except Exception as err:  # a broken package may raise anything while importing
        raise TypeResolutionError(
            f"unknown type '{name}': interface package '{pkg}' is not importable ({err})"
        ) from err
    cls = vars(module).get(type_name)
    if cls is None:
        raise TypeResolutionError(f"unknown type '{name}': '{pkg}.{kind}' has no '{type_name}'")
    problem = _not_generated(cls, kind)
    if problem:
        raise TypeResolutionError(f"'{name}' is not a generated ROS {kind} type: {problem}")
    try:
        check_for_type_support(cls)
    except Exception as err:  # NoTypeSupportImportedException, ImportError, ...
        raise TypeResolutionError(
            f"'{name}': its type support cannot be loaded ({err!r})"
        ) from err
    return cls


def _not_an_interface_package(pkg: str, kind: str) -> str:
    """
    Say why ``pkg`` is not a rosidl-generated Python interface package ('' if it is).

    Locates the package with :func:`importlib.util.find_spec` on its top-level
    name, which does not execute it, and looks at its files: rosidl's
    generator writes ``<pkg>_s__rosidl_typesupport_c*`` beside the package's
    ``__init__.py`` and one subpackage per interface kind.

    :param pkg: the package name (already checked to be a valid ROS package name).
    :param kind: ``msg``, ``srv`` or ``action``.
    :return: the reason, or '' for an interface package with a ``kind`` subpackage.
    """
    try:
        spec = importlib.util.find_spec(pkg)
    except (ImportError, ValueError) as err:
        return f"interface package '{pkg}' is not importable ({err})"
    if spec is None:
        return f"interface package '{pkg}' is not importable (no module named '{pkg}')"
    locations = list(spec.submodule_search_locations or ())
    if not locations:
        return f"'{pkg}' is a module, not a ROS interface package"
    support = f'{pkg}_s__rosidl_typesupport_c'
    generated = [Path(loc) for loc in locations if any(Path(loc).glob(f'{support}*'))]
    if not generated:
        return f"'{pkg}' is not a ROS interface package (no rosidl type support in it)"
    if not any((loc / kind / '__init__.py').is_file() for loc in generated):
        return f"interface package '{pkg}' has no {kind} types"
    return ''


def _not_generated(cls: Any, kind: str) -> str:
    """
    Say why ``cls`` is not a class rosidl generated for ``kind`` ('' if it is).

    :param cls: the attribute found in ``pkg.<kind>``.
    :param kind: ``msg``, ``srv`` or ``action``.
    :return: the reason, or ''.
    """
    if not isinstance(cls, type):
        return f'{type(cls).__name__} object, not a class'
    meta = type(cls)
    if not meta.__name__.startswith('Metaclass_') or \
            not callable(getattr(meta, '__import_type_support__', None)) or \
            not hasattr(cls, '_TYPE_SUPPORT'):
        return f'{cls.__qualname__} has no rosidl metaclass and type support'
    if kind == 'msg':
        if not callable(getattr(cls, 'get_fields_and_field_types', None)):
            return f'{cls.__qualname__} has no field table'
        return ''
    for part in _PARTS[kind]:
        inner = getattr(cls, part, None)
        if inner is None:
            return f'{cls.__qualname__} has no {part}'
        problem = _not_generated(inner, 'msg')
        if problem:
            return f'{cls.__qualname__}.{part}: {problem}'
    return ''


def canonical_type_name(name: str, *, kind: str) -> str:
    """Return ``pkg/<kind>/Name`` for ``pkg/<kind>/Name`` or the short ``pkg/Name``."""
    parts = name.strip().split('/')
    return f'{parts[0]}/{kind}/{parts[-1]}'


def encode_string(value: str) -> float:
    """
    Encode a string as a float, stably across processes and runs.

    48 bits of BLAKE2b: exactly representable in a double, so ``exact``
    comparisons of encoded strings are exact. Not Python's ``hash`` (salted).
    """
    digest = hashlib.blake2b(value.encode('utf-8'), digest_size=6).digest()
    return float(int.from_bytes(digest, 'big'))


@dataclass(frozen=True)
class FieldExtractor:
    """
    A compiled field path: message -> flat list of floats.

    :ivar path: The field path as configured.
    :ivar size: Number of floats every message yields, or None when the path
        contains a variable-length sequence (known only per message).
    :ivar extract: The function doing it.
    """

    path: str
    size: int | None
    extract: Callable[[Any], list[float]]


def _fields(cls: type) -> dict[str, str]:
    getter = getattr(cls, 'get_fields_and_field_types', None)
    if getter is None:
        raise TypeResolutionError(f'{cls.__name__} is not a generated ROS message class')
    return dict(getter())


def _message_class(type_str: str) -> Any:
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
    known = [s for s in sizes if s is not None]
    total = sum(known) if len(known) == len(sizes) else None

    def flat_message(value: Any) -> list[float]:
        out: list[float] = []
        for name, fn, _ in parts:
            out.extend(fn(getattr(value, name)))
        return out
    return flat_message, total


def compile_field_path(msg_cls: type, path: str) -> FieldExtractor:
    """
    Compile ``path`` (dot-separated field names) against ``msg_cls``.

    The path may end at a number, a string (encoded with :func:`encode_string`),
    a fixed array, a sequence, or a nested message (flattened depth first in
    field order). Only the last component may be an array or sequence.

    :raises TypeResolutionError: A component is not a field of the message it is read from.
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


NAME_FIELD = 'name'
"""The array of element names a sensor selects from (``sensor_msgs/msg/JointState``)."""


@dataclass(frozen=True)
class NamedFields:
    """
    Compiled by-name reading: a message -> its names and the value arrays parallel to them.

    ``read(msg)`` returns ``(names, columns)``: the message's ``name`` array and,
    per configured field, its values as floats, or None when that array's
    length differs from the names' (ROS leaves an unused array empty, as a
    gripper driver does with ``velocity``), so those values are not updated.
    """

    paths: tuple[str, ...]
    read: Callable[[Any], tuple[list[str], list[list[float] | None]]]


def check_name_array(msg_cls: type) -> None:
    """
    Check that ``msg_cls`` has a ``name`` array of strings to select elements by.

    :param msg_cls: a generated message class.
    :raises TypeResolutionError: it has none.
    """
    fields = _fields(msg_cls)
    type_str = fields.get(NAME_FIELD, '')
    inner = _SEQ_RE.match(type_str) or _ARRAY_RE.match(type_str)
    if inner is None or not _STRING_RE.match(inner.group(1)):
        label = f"{msg_cls.__module__.split('.')[0]}/{msg_cls.__name__}"
        raise TypeResolutionError(
            f"{label} has no '{NAME_FIELD}' array of strings to select elements by "
            f"(fields: {', '.join(fields) or 'none'})"
        )


def compile_named_fields(msg_cls: type, paths: list[str] | tuple[str, ...]) -> NamedFields:
    """
    Compile reading ``paths`` by element name: each must be a numeric array beside ``name``.

    :param msg_cls: a generated message class with a ``name`` array.
    :param paths: field names such as ``position``, ``velocity``, ``effort``.
    :return: the compiled reader.
    :raises TypeResolutionError: no ``name`` array, or a path that is not a
        top-level array of numbers.
    """
    check_name_array(msg_cls)
    fields = _fields(msg_cls)
    for path in paths:
        type_str = fields.get(path.strip(), '')
        inner = _SEQ_RE.match(type_str) or _ARRAY_RE.match(type_str)
        if path.strip() == NAME_FIELD or inner is None or inner.group(1) not in _NUMERIC:
            arrays = [
                n for n, t in fields.items()
                if n != NAME_FIELD and (m := _SEQ_RE.match(t) or _ARRAY_RE.match(t))
                and m.group(1) in _NUMERIC
            ]
            raise TypeResolutionError(
                f"'{path}': selecting by '{NAME_FIELD}' needs arrays of numbers beside it "
                f"(here: {', '.join(arrays) or 'none'})"
            )
    names = tuple(p.strip() for p in paths)

    def read(msg: Any) -> tuple[list[str], list[list[float] | None]]:
        keys = list(getattr(msg, NAME_FIELD))
        columns: list[list[float] | None] = []
        for name in names:
            values = getattr(msg, name)
            columns.append([float(v) for v in values] if len(values) == len(keys) else None)
        return keys, columns
    return NamedFields(paths=names, read=read)


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
    """
    Render a message as a JSON object (for reading only; replay uses CDR bytes).

    Non-finite floats become strings ('nan', 'inf') so the output is strict JSON.
    """
    return json.dumps(_plain(msg), separators=(',', ':'))
