"""Where learned trajectory trees live: in memory or in an SQLite file."""

from __future__ import annotations

import os

from .base import NodeList, Recording, RecordingInfo, step_signature, Store
from .memory import MemoryStore
from .sqlite import DEFAULT_ABANDONED_RETENTION, SqliteStore

__all__ = [
    'DEFAULT_ABANDONED_RETENTION',
    'MemoryStore',
    'NodeList',
    'Recording',
    'RecordingInfo',
    'SqliteStore',
    'Store',
    'open_store',
    'step_signature',
]


def open_store(
    spec: str | os.PathLike[str] | None,
    *,
    allow_pickle: bool = False,
    abandoned_retention: float | None = DEFAULT_ABANDONED_RETENTION,
) -> Store:
    """
    Open a store from a path-like spec.

    :param spec: None, '' or ':memory:' for a :class:`MemoryStore`; anything else is
        the path of an SQLite store file (``~`` expanded, directories created 0700).
    :param allow_pickle: SQLite only: pickle (and unpickle) values that are not JSON
        data or NumPy arrays. Trusted files only; the ROS node never sets it.
    :param abandoned_retention: SQLite only: seconds after which incomplete recordings
        of stopped processes are purged on open (None keeps them).
    :return: The store.
    :raises StoreAccessError: the file or directory cannot be read or written.
    :raises StoreCorruptError: the file exists but is not a usable store.
    :raises StoreVersionError: the file was written by a newer schema.
    """
    if spec is None or (isinstance(spec, str) and spec in ('', ':memory:')):
        return MemoryStore()
    return SqliteStore(path=spec, allow_pickle=allow_pickle,
                       abandoned_retention=abandoned_retention)
