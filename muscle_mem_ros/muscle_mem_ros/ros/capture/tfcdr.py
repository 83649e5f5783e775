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
A fast reader of ``tf2_msgs/msg/TFMessage`` CDR bytes, for a 1 kHz ``/tf``.

Deserializing with rclpy makes a Python message, 12 TransformStamped, headers, vectors and
quaternions for each message: tens of microseconds, which at 1 kHz is most of the budget of a
feed that should cost a few percent of a core (:mod:`.transformfeed`). But a
robot_state_publisher sends the same frames in the same order every time, so the bytes of its
messages differ only in the numbers: the frame names, their lengths and the alignment padding
sit at the same offsets. :class:`TFReader` learns that layout from the first message of a
length, once, and reads each later message of the layout with one ``struct`` call for the
names (compared with the layout's, to be sure it is the same layout) and one for the numbers.
A message that does not match is read field by field and its layout learned in turn.

The bytes are plain CDR (XCDR1, what ROS 2's rmw implementations send): a 4-byte
encapsulation header, then the sequence length, then per TransformStamped the stamp
(``int32`` sec, ``uint32`` nanosec), two strings (a ``uint32`` length counting the closing
NUL, then the bytes), and seven ``float64`` (translation, rotation x y z w), each primitive
aligned to its size from the end of the header. Anything else is refused with ValueError.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

__all__ = ['Decoded', 'Layout', 'MAX_LAYOUTS', 'TFReader', 'VALUES_PER_TRANSFORM']

MAX_LAYOUTS = 256
"""Layouts a reader keeps (one per message length); past it they are all forgotten."""

VALUES_PER_TRANSFORM = 9
"""Numbers read per transform: sec, nanosec, x, y, z, qx, qy, qz, qw."""

_HEADER = 4
_TRANSFORM_BYTES = 4 + 4 + 4 + 1 + 4 + 1 + 56
"""The fewest bytes of one serialized TransformStamped (one-character frame names)."""


class Layout(NamedTuple):
    """
    Where the numbers and names are in the messages of one layout.

    :ivar links: ``(parent, child)`` of each transform, in message order.
    :ivar children: The child frame of each transform, in message order.
    :ivar numbers: Reads :data:`VALUES_PER_TRANSFORM` numbers per transform, in order.
    :ivar names: Reads the count, each name's length and bytes (to compare with
        :attr:`expected`).
    :ivar expected: What :attr:`names` reads from a message of this layout.
    """

    links: tuple[tuple[str, str], ...]
    children: tuple[str, ...]
    numbers: struct.Struct
    names: struct.Struct
    expected: tuple[Any, ...]


Decoded = tuple[Layout, tuple[Any, ...]]
"""A message's layout and its numbers (:data:`VALUES_PER_TRANSFORM` per transform)."""


class _Format:
    """A ``struct`` format built from fields at known offsets, skipping the bytes between."""

    def __init__(self, order: str) -> None:
        self._parts = [order]
        self._end = 0

    def field(self, at: int, code: str, size: int) -> None:
        if at > self._end:
            self._parts.append(f'{at - self._end}x')
        self._parts.append(code)
        self._end = at + size

    def build(self) -> struct.Struct:
        return struct.Struct(''.join(self._parts))


class TFReader:
    """Read TFMessage CDR bytes; keep the layouts seen (module docstring)."""

    def __init__(self) -> None:
        self._layouts: dict[int, Layout] = {}
        self.learned = 0
        """Messages read field by field (a new layout), for tests and benchmarks."""

    def decode(self, raw: bytes) -> Decoded:
        """
        Return the layout and the numbers of one serialized TFMessage.

        :param raw: The CDR bytes, as a raw subscription takes them.
        :return: The layout (its links) and the numbers, 9 per transform.
        :raises ValueError: For bytes that are not a plain-CDR TFMessage (truncated, a frame
            name that is not NUL-terminated UTF-8, another encapsulation).
        """
        layout = self._layouts.get(len(raw))
        if layout is not None:
            try:
                if layout.names.unpack_from(raw) == layout.expected:
                    return layout, layout.numbers.unpack_from(raw)
            except struct.error:
                pass
        layout = _learn(raw)
        self.learned += 1
        if len(self._layouts) >= MAX_LAYOUTS:
            self._layouts.clear()
        self._layouts[len(raw)] = layout
        return layout, layout.numbers.unpack_from(raw)


def _learn(raw: bytes) -> Layout:
    """Read a message field by field; return its layout."""
    if len(raw) < _HEADER + 4 or raw[0] != 0 or raw[1] not in (0, 1):
        raise ValueError(f'not a plain CDR message (encapsulation {bytes(raw[:2]).hex()}, '
                         f'{len(raw)} bytes)')
    order = '<' if raw[1] == 1 else '>'
    (count,) = struct.unpack_from(order + 'I', raw, _HEADER)
    if count * _TRANSFORM_BYTES > len(raw) - _HEADER - 4:
        raise ValueError(f'{count} transforms cannot fit in {len(raw)} bytes')
    numbers = _Format(order)
    names = _Format(order)
    names.field(_HEADER, 'I', 4)
    expected: list[Any] = [count]
    links = []
    pos = _HEADER + 4

    def align(size: int) -> None:
        nonlocal pos
        pos += (-(pos - _HEADER)) % size
        if pos > len(raw):
            raise ValueError(f'truncated at byte {pos} of {len(raw)}')

    def string() -> str:
        nonlocal pos
        align(4)
        if pos + 4 > len(raw):
            raise ValueError(f'truncated at byte {pos} of {len(raw)}')
        (length,) = struct.unpack_from(order + 'I', raw, pos)
        start = pos + 4
        data = bytes(raw[start:start + length])
        if length < 1 or len(data) != length or data[-1] != 0:
            raise ValueError(f'a frame name at byte {pos} is not NUL-terminated')
        names.field(pos, f'I{length}s', 4 + length)
        expected.extend((length, data))
        pos = start + length
        return data[:-1].decode('utf-8')

    try:
        for _ in range(count):
            align(4)
            numbers.field(pos, 'iI', 8)
            pos += 8
            parent = string()
            child = string()
            align(8)
            if pos + 56 > len(raw):
                raise ValueError(f'truncated at byte {pos} of {len(raw)}')
            numbers.field(pos, '7d', 56)
            pos += 56
            links.append((parent, child))
    except UnicodeDecodeError as err:
        raise ValueError(f'a frame name is not UTF-8: {err}') from err
    return Layout(tuple(links), tuple(c for _, c in links), numbers.build(), names.build(),
                  tuple(expected))
