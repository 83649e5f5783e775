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
User captures and call arguments as leaves: the Engine's binding sources and fields.

The node's sources are sensor elements; the Python ``Engine``'s are the numeric
leaves of what a pre-check captured (``capture:cube``, ``capture:pos[0]``), and
its bound fields are leaves of a call's arguments (``args[0]``, ``kwargs.x``).
This module reads those leaves and writes them back into copies.
"""

from __future__ import annotations

from collections.abc import Mapping
import copy
import functools
import math
from typing import Any

import numpy as np

from ..bindings.rules import parse_path, Source
from ..records import Snapshot

__all__ = ['capture_leaf', 'capture_leaves', 'capture_path', 'with_leaves']


def capture_leaves(snapshot: Snapshot | None) -> dict[str, float]:
    """
    Return the numeric leaves of a snapshot's user capture as binding sources.

    ``{'capture:cube': 0.3, 'capture:pos[0]': 0.1, ...}``; a capture that is a number
    itself is ``capture``. Dicts with string keys, lists, tuples and NumPy arrays are
    descended; booleans, non-finite numbers and other objects are not sources.

    :param snapshot: A recorded or current snapshot, or None.
    :return: Source -> value.
    """
    out: dict[str, float] = {}
    if snapshot is not None and snapshot.user is not None:
        _collect(snapshot.user, '', out)
    return {(f'capture:{path}' if path else 'capture'): value for path, value in out.items()}


def _collect(value: Any, prefix: str, out: dict[str, float]) -> None:
    kind = type(value)
    if kind is float or kind is int:  # the common leaves first: no ABC checks
        if math.isfinite(value):
            out[prefix] = float(value)
        return
    if kind is list:
        for i, item in enumerate(value):
            _collect(item, f'{prefix}[{i}]', out)
        return
    if kind.__module__ == 'numpy' and hasattr(value, 'tolist'):
        value = value.tolist()
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and key and not any(c in key for c in '.[]'):
                _collect(item, f'{prefix}.{key}' if prefix else key, out)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _collect(item, f'{prefix}[{i}]', out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value):
            out[prefix] = float(value)


def capture_leaf(capture: Any, source: str) -> float | None:
    """
    Return one source of a capture, as :func:`capture_leaves` reads it; None if it is none.

    Follows the source's path only (a candidate's bindings read one or two sources).
    """
    value = capture
    for part in capture_path(source):
        if type(value).__module__ == 'numpy' and hasattr(value, 'tolist'):
            value = value.tolist()
        if isinstance(part, str) and isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(part, int) and isinstance(value, (list, tuple)) and \
                0 <= part < len(value):
            value = value[part]
        else:
            return None
    if type(value).__module__ == 'numpy' and hasattr(value, 'tolist'):
        value = value.tolist()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


@functools.lru_cache(maxsize=4096)
def capture_path(source: str) -> tuple[str | int, ...]:
    """Return the path inside a capture of a source from :func:`capture_leaves`."""
    return tuple(parse_path(Source.parse(source).name))


def with_leaves(value: Any, values: Mapping[tuple[str | int, ...], Any]) -> Any:
    """
    Return a copy of ``value`` with the leaves at ``values``' paths replaced.

    Only the containers on a path are copied (dicts, lists, tuples, NumPy arrays);
    the recorded value is never changed.

    :raises KeyError: a path does not lead to a leaf (also IndexError, TypeError).
    """
    for path, leaf in values.items():
        value = _replace(value, path, leaf)
    return value


def _replace(value: Any, path: tuple[str | int, ...], leaf: Any) -> Any:
    if not path:
        return leaf
    head, rest = path[0], path[1:]
    if isinstance(value, np.ndarray):
        if not all(isinstance(i, int) for i in path) or len(path) != value.ndim:
            raise TypeError(f'path {list(path)} does not lead to an element of an array')
        array = value.copy()
        array[tuple(int(i) for i in path)] = leaf
        return array
    if isinstance(value, Mapping):
        if not isinstance(head, str) or head not in value:
            raise KeyError(head)
        mapping = copy.copy(value) if isinstance(value, dict) else dict(value)
        mapping[head] = _replace(value[head], rest, leaf)
        return mapping
    if isinstance(value, (list, tuple)) and isinstance(head, int):
        items = list(value)
        items[head] = _replace(items[head], rest, leaf)
        if isinstance(value, list):
            return items
        return type(value)(*items) if hasattr(value, '_fields') else type(value)(items)
    raise TypeError(f'cannot descend into {type(value).__name__} at {head!r}')
