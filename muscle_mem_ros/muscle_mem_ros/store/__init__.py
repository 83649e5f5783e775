"""Where learned trajectory trees live: in memory or in an SQLite file."""

from __future__ import annotations

import os

from .base import NodeList, Recording, RecordingInfo, Store, step_signature
from .memory import MemoryStore
from .sqlite import SqliteStore

__all__ = [
    'MemoryStore',
    'NodeList',
    'Recording',
    'RecordingInfo',
    'SqliteStore',
    'Store',
    'open_store',
    'step_signature',
]


def open_store(spec: str | os.PathLike[str] | None) -> Store:
    """Open a store from a path-like spec.

    Args:
        spec: None, '' or ':memory:' for a :class:`MemoryStore`; anything else is
            the path of an SQLite store file (``~`` expanded, directories created).

    Raises:
        StoreCorruptError: The file exists but is not a usable store.
        StoreVersionError: The file was written by a newer schema.
    """
    if spec is None or (isinstance(spec, str) and spec in ('', ':memory:')):
        return MemoryStore()
    return SqliteStore(path=spec)
