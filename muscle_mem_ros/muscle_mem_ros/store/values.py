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
The safe storage format: values as JSON plus typed byte blobs, never pickle.

A stored value is a *container*::

    magic (4 bytes) | header length (uint32, little endian) | header (UTF-8 JSON) | blobs

The header is a JSON object whose ``"n"`` entry lists the byte length of each
blob; the blobs follow the header back to back. What else the header holds
depends on the magic (a snapshot, a Python call's arguments, a single value).

Inside a header a Python value is written as tagged JSON, so that it reads back
as the same type (a recorded capture must compare equal to a fresh one):

* ``None``, ``bool``, ``int``, ``float`` (NaN and infinities included), ``str``: as JSON;
* ``list``: a JSON array of values;
* ``tuple``: ``{"t": [values]}``; ``dict``: ``{"d": [[key, value], ...]}`` (keys are values
  too, so ``{1: 'a'}`` stays an int key, and insertion order is kept);
* ``bytes``: ``{"b": blob}``;
* NumPy array: ``{"a": [dtype, shape, blob]}``; NumPy scalar: ``{"g": [dtype, blob]}``,
  where ``dtype`` is a plain numeric, boolean or fixed-width string dtype such as ``"<f8"``
  (object and structured dtypes are refused);
* anything else only with ``allow_pickle``: ``{"p": blob}``, the pickled object.

Decoding uses only :mod:`struct`, :mod:`json` and :func:`numpy.frombuffer`; it
never executes code. A ``{"p": ...}`` value is unpickled only when the reader
passes ``allow_pickle=True``; otherwise :class:`~muscle_mem_ros.errors.StorePickleError`
is raised and the bytes are left alone. Encoding is deterministic: equal values
built in the same order give equal bytes (the store's dedupe compares bytes).
"""

from __future__ import annotations

import json
import math
import pickle
import re
import struct
from typing import Any

import numpy as np

from ..errors import StoreCorruptError, StorePickleError, UnsafeValueError

__all__ = ['Blobs', 'container_head', 'pack', 'read_container', 'unpack', 'write_container']

_DTYPE = re.compile(r'^[<>|=]?(?:[biufc][1-9][0-9]?|[SU][0-9]{1,6})$')
_LENGTH = struct.Struct('<I')


class Blobs:
    """Byte blobs a header refers to by index (writer side)."""

    def __init__(self) -> None:
        self.items: list[bytes] = []

    def add(self, data: bytes) -> int:
        """Append ``data``; return its index."""
        self.items.append(bytes(data))
        return len(self.items) - 1


def _dtype_text(dtype: np.dtype[Any]) -> str:
    text = dtype.str
    if not _DTYPE.match(text):
        raise UnsafeValueError(f'NumPy dtype {dtype} is not a plain numeric or string dtype')
    return text


def pack(value: Any, blobs: Blobs, *, allow_pickle: bool = False) -> Any:
    """
    Return the tagged JSON form of ``value``, its bytes added to ``blobs``.

    :param value: JSON data, tuples, bytes, NumPy arrays and scalars (nested freely).
    :param blobs: Receives array and byte contents.
    :param allow_pickle: Pickle what is none of the above instead of refusing it.
    :return: A JSON-serializable structure.
    :raises UnsafeValueError: a part is not storable safely and ``allow_pickle`` is False.
    :raises pickle.PicklingError: (and what ``pickle.dumps`` raises) with ``allow_pickle``.
    """
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        return value
    if kind is list:
        return [pack(v, blobs, allow_pickle=allow_pickle) for v in value]
    if kind is tuple:
        return {'t': [pack(v, blobs, allow_pickle=allow_pickle) for v in value]}
    if kind is dict:
        return {'d': [[pack(k, blobs, allow_pickle=allow_pickle),
                       pack(v, blobs, allow_pickle=allow_pickle)] for k, v in value.items()]}
    if kind is bytes:
        return {'b': blobs.add(value)}
    try:
        if kind is np.ndarray:
            data = np.ascontiguousarray(value)
            return {'a': [_dtype_text(data.dtype), list(data.shape), blobs.add(data.tobytes())]}
        if isinstance(value, np.generic):
            return {'g': [_dtype_text(value.dtype), blobs.add(value.tobytes())]}
    except UnsafeValueError:
        if not allow_pickle:
            raise
    if not allow_pickle:
        raise UnsafeValueError(f'a {kind.__module__}.{kind.__qualname__} is not JSON data or a '
                               'NumPy array')
    return {'p': blobs.add(pickle.dumps(value, protocol=5))}


def _bad(what: str) -> StoreCorruptError:
    return StoreCorruptError(f'stored value is malformed: {what}')


def _blob(blobs: list[bytes], index: Any) -> bytes:
    if type(index) is not int or not 0 <= index < len(blobs):
        raise _bad(f'blob index {index!r}')
    return blobs[index]


def _array(dtype: Any, blob: bytes, shape: Any) -> np.ndarray[Any, Any]:
    if type(dtype) is not str or not _DTYPE.match(dtype):
        raise _bad(f'dtype {dtype!r}')
    if type(shape) is not list or not all(type(n) is int and n >= 0 for n in shape):
        raise _bad(f'shape {shape!r}')
    dt = np.dtype(dtype)
    if dt.itemsize * math.prod(shape) != len(blob):
        raise _bad(f'{len(blob)} bytes for shape {shape} of {dtype}')
    return np.frombuffer(blob, dtype=dt).reshape(shape).copy()


def unpack(data: Any, blobs: list[bytes], *, allow_pickle: bool = False) -> Any:
    """
    Return the value :func:`pack` wrote as ``data``.

    :param data: The tagged JSON structure.
    :param blobs: The container's blobs.
    :param allow_pickle: Unpickle ``{"p": ...}`` values (trusted files only).
    :return: The value, of the type it was written as.
    :raises StorePickleError: a pickled value and ``allow_pickle`` is False.
    :raises StoreCorruptError: the structure is malformed.
    """
    try:
        return _unpack(data, blobs, allow_pickle)
    except (TypeError, ValueError, RecursionError, MemoryError) as err:
        raise _bad(repr(err)) from err


def _unpack(data: Any, blobs: list[bytes], allow_pickle: bool) -> Any:
    kind = type(data)
    if data is None or kind in (bool, int, float, str):
        return data
    if kind is list:
        return [_unpack(v, blobs, allow_pickle) for v in data]
    if kind is not dict or len(data) != 1:
        raise _bad(f'unexpected {kind.__name__}')
    (tag, body), = data.items()
    if tag == 't' and type(body) is list:
        return tuple(_unpack(v, blobs, allow_pickle) for v in body)
    if tag == 'd' and type(body) is list:
        out = {}
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise _bad('dict entry')
            key = _unpack(pair[0], blobs, allow_pickle)
            try:
                out[key] = _unpack(pair[1], blobs, allow_pickle)
            except TypeError as err:
                raise _bad(f'dict key: {err}') from err
        return out
    if tag == 'b':
        return _blob(blobs, body)
    if tag == 'a' and type(body) is list and len(body) == 3:
        return _array(body[0], _blob(blobs, body[2]), body[1])
    if tag == 'g' and type(body) is list and len(body) == 2:
        return _array(body[0], _blob(blobs, body[1]), [])[()]
    if tag == 'p':
        raw = _blob(blobs, body)
        if not allow_pickle:
            raise StorePickleError(
                'a stored value is a pickled Python object (written with allow_pickle=True); '
                'it was not unpickled: open the store with allow_pickle=True only if you '
                'trust the file')
        return pickle.loads(raw)  # noqa: S301 - the caller opted in for a trusted file
    raise _bad(f'tag {tag!r}')


def write_container(magic: bytes, header: dict[str, Any], blobs: Blobs) -> bytes:
    """Return ``magic | len | header JSON (with "n") | blobs``."""
    header['n'] = [len(b) for b in blobs.items]
    text = json.dumps(header, separators=(',', ':'), ensure_ascii=False).encode()
    return b''.join((magic, _LENGTH.pack(len(text)), text, *blobs.items))


def container_head(magic: bytes, data: bytes | memoryview) -> tuple[dict[str, Any], int] | int:
    """
    Read a container's header from the start of it (a reader that reads parts of a value).

    :return: (the header, where its first blob starts), or how many bytes the header
        needs when ``data`` is shorter.
    :raises StoreCorruptError: wrong magic, or malformed.
    """
    if bytes(data[:4]) != magic:
        raise StoreCorruptError(
            f'stored value is not in the safe format (starts with {bytes(data[:4])!r}, '
            f'expected {magic!r}); refusing to read it')
    if len(data) < 8:
        return 8
    end = 8 + int(_LENGTH.unpack_from(data, 4)[0])
    if len(data) < end:
        return end
    try:
        header: dict[str, Any] = json.loads(bytes(data[8:end]))
    except (ValueError, RecursionError) as err:
        raise _bad(f'header: {err}') from err
    lengths = header.get('n') if type(header) is dict else None
    if type(lengths) is not list or not all(type(n) is int and n >= 0 for n in lengths):
        raise _bad('blob lengths')
    return header, end


def read_container(magic: bytes, data: bytes | memoryview,
                   views: bool = False) -> tuple[dict[str, Any], list[Any]]:
    """
    Split a container written by :func:`write_container`.

    :param magic: The expected 4-byte magic.
    :param data: The stored bytes.
    :param views: Return the blobs as memoryviews of ``data`` (no copy: large arrays).
    :return: The header object and the blobs (bytes).
    :raises StoreCorruptError: wrong magic (for example a pickle), or malformed.
    """
    data = bytes(data)
    head = container_head(magic, data)
    if isinstance(head, int):
        raise _bad('truncated')
    header, end = head
    lengths = header['n']
    blobs = []
    whole = memoryview(data) if views else data
    for n in lengths:
        blobs.append(whole[end:end + n])
        end += n
    if end != len(data):
        raise _bad(f'{len(data)} bytes, the header accounts for {end}')
    return header, blobs
