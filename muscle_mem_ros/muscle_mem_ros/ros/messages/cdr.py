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
Canonical CDR bytes: the same message always serializes to the same bytes.

``rclpy.serialization.serialize_message`` leaves the alignment padding of a
CDR buffer uninitialized, so two serializations of one goal can differ in
their padding bytes (seen with Fast DDS after strings). A step's payload is
compared byte for byte (the store's dedupe of identical executions, "replayed
byte-identical"), so the node zeroes every padding byte before storing it.
Values are untouched: the canonical bytes deserialize to the same message.

The walk follows the type's own field metadata (plain CDR / XCDR1, as the ROS
2 type supports write it: primitives aligned to their size up to 8, strings
and sequences prefixed by a 4-byte length). Whatever it does not understand
(wide strings, a malformed buffer) leaves the payload unchanged; so does a
result that would not deserialize to the same message.
"""

from __future__ import annotations

import re
import struct
from typing import Any

from muscle_mem_ros.ros.messages.introspection import resolve_type
from rclpy.serialization import deserialize_message

__all__ = ['canonical_cdr']

_SIZES = {
    'boolean': 1, 'octet': 1, 'char': 1, 'byte': 1, 'int8': 1, 'uint8': 1,
    'int16': 2, 'uint16': 2, 'int32': 4, 'uint32': 4, 'float': 4,
    'int64': 8, 'uint64': 8, 'double': 8,
}
_SEQ_RE = re.compile(r'^sequence<(.+?)(?:,\s*\d+)?>$')
_ARRAY_RE = re.compile(r'^(.+)\[(\d+)\]$')
_HEADER = 4


class _Unsupported(Exception):
    """The buffer or type cannot be walked; keep the payload as it is."""


class _Walker:

    def __init__(self, buf: bytearray) -> None:
        self.buf = buf
        self.pos = _HEADER
        self.order = '<' if buf[1] == 1 else '>'
        self._fields: dict[str, list[tuple[str, str]]] = {}

    def align(self, size: int) -> None:
        offset = self.pos - _HEADER
        pad = (-offset) % min(size, 8)
        if self.pos + pad > len(self.buf):
            raise _Unsupported('truncated')
        self.buf[self.pos:self.pos + pad] = bytes(pad)
        self.pos += pad

    def length(self) -> int:
        self.align(4)
        if self.pos + 4 > len(self.buf):
            raise _Unsupported('truncated')
        (value,) = struct.unpack_from(self.order + 'I', self.buf, self.pos)
        self.pos += 4
        return int(value)

    def skip(self, count: int) -> None:
        if count < 0 or self.pos + count > len(self.buf):
            raise _Unsupported('truncated')
        self.pos += count

    def fields(self, type_str: str) -> list[tuple[str, str]]:
        cached = self._fields.get(type_str)
        if cached is None:
            pkg, _, name = type_str.partition('/')
            cls = resolve_type(f'{pkg}/msg/{name.rpartition("/")[2]}', kind='msg')
            cached = list(cls.get_fields_and_field_types().items())
            self._fields[type_str] = cached
        return cached

    def value(self, type_str: str) -> None:
        size = _SIZES.get(type_str)
        if size is not None:
            self.align(size)
            self.skip(size)
            return
        if type_str.startswith('wstring') or type_str in ('wchar', 'long double'):
            raise _Unsupported(type_str)
        if type_str.startswith('string'):
            self.skip(self.length())
            return
        seq = _SEQ_RE.match(type_str)
        if seq is not None:
            self.many(seq.group(1), self.length())
            return
        arr = _ARRAY_RE.match(type_str)
        if arr is not None:
            self.many(arr.group(1), int(arr.group(2)))
            return
        self.message(self.fields(type_str))

    def many(self, inner: str, count: int) -> None:
        size = _SIZES.get(inner)
        if count == 0:
            return  # an empty sequence is not aligned for its element type
        if size is not None:
            self.align(size)
            self.skip(size * count)
            return
        for _ in range(count):
            self.value(inner)

    def message(self, fields: list[tuple[str, str]]) -> None:
        if not fields:
            self.skip(1)  # structure_needs_at_least_one_member
            return
        for _name, type_str in fields:
            self.value(type_str)


def canonical_cdr(payload: bytes, msg_type: Any) -> bytes:
    """
    Return ``payload`` (CDR of a ``msg_type``) with every unused byte zeroed.

    Unused bytes are the alignment padding and whatever follows the last field
    (the serialized buffer can be longer than the message). The result is
    checked: it must deserialize to the same message, else ``payload`` is
    returned unchanged.
    """
    buf = bytearray(payload)
    if len(buf) < _HEADER:
        return bytes(payload)
    walker = _Walker(buf)
    try:
        walker.message(list(msg_type.get_fields_and_field_types().items()))
        buf[walker.pos:] = bytes(len(buf) - walker.pos)
        canonical = bytes(buf)
        if deserialize_message(canonical, msg_type) != deserialize_message(payload, msg_type):
            return bytes(payload)
    except Exception:  # any doubt: keep the original bytes
        return bytes(payload)
    return canonical
