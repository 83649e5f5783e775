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
Run the cache node with its store's reads counted: a test instrument, not a mock.

The node, its SQLite store and DDS are the real ones; each read method of the
store class is wrapped to count its calls from outside the store (a read a
write makes of its own, such as ``note_replay`` reading the trajectory it
updates, is part of that write). At every ``note_outcome`` (the last
store call of a task) the counts since the previous one are printed as one line,
``store reads: {json}``, and reset: the window between two of them is one task.
"""

from __future__ import annotations

import collections
import functools
import json
import sys
import threading
from typing import Any

READS = ('trajectories', 'trees', 'tally', 'trajectory', 'trajectory_ending_at', 'tasks',
         'path')

WRITES = ('note_replay', 'begin', 'forget')

_counts: collections.Counter[str] = collections.Counter()
_lock = threading.Lock()
_inside = threading.local()


def _counted(name: str, method: Any, count: bool = True) -> Any:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        depth = getattr(_inside, 'depth', 0)
        if count and depth == 0:
            key = name
            if name == 'trajectories':
                key += '(variant)' if kwargs.get('variant') is not None else (
                    '(task)' if kwargs.get('task') is not None else '(all)')
            with _lock:
                _counts[key] += 1
        _inside.depth = depth + 1
        try:
            return method(self, *args, **kwargs)
        finally:
            _inside.depth = depth
    return wrapper


def _outcome(method: Any) -> Any:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _lock:
            line = json.dumps(dict(_counts), sort_keys=True)
            _counts.clear()
        print(f'store reads: {line}', flush=True)
        return method(self, *args, **kwargs)
    return wrapper


def main() -> int:
    from muscle_mem_ros.ros.node import main as node_main
    from muscle_mem_ros.store.sqlite import SqliteStore
    for name in READS:
        setattr(SqliteStore, name, _counted(name, getattr(SqliteStore, name)))
    for name in WRITES:
        setattr(SqliteStore, name, _counted(name, getattr(SqliteStore, name), count=False))
    SqliteStore.note_outcome = _outcome(SqliteStore.note_outcome)
    return node_main.main([sys.argv[0], *sys.argv[1:]])


if __name__ == '__main__':
    sys.exit(main())
