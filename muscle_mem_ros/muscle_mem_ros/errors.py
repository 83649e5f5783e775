"""
Errors raised by muscle_mem_ros.

One base class, :class:`MuscleMemError`, so a caller can catch everything the
package raises on purpose. Bad arguments still raise the built-in
``ValueError`` / ``TypeError``.
"""

from __future__ import annotations

__all__ = [
    'CheckError',
    'ConfigError',
    'MuscleMemError',
    'ReplayError',
    'StoreAccessError',
    'StoreCorruptError',
    'StoreError',
    'StorePickleError',
    'StoreVersionError',
    'UnknownTrajectoryError',
]


class MuscleMemError(Exception):
    """Base class of every error muscle_mem_ros raises on purpose."""


class StoreError(MuscleMemError):
    """A store operation failed (I/O, SQLite, a capture that cannot be stored)."""


class StoreCorruptError(StoreError):
    """
    The file is not a muscle_mem store, is unreadable, or is corrupt.

    The file is left exactly as it was found.
    """


class StoreAccessError(StoreError):
    """
    The store file or its directory cannot be read or written (permissions, read-only).

    The message names the cause (for example a read-only directory, where SQLite
    cannot create the ``-wal`` and ``-shm`` files it needs); the file is untouched.
    """


class StorePickleError(StoreError):
    """
    A stored value is a pickled Python object and the store does not allow pickle.

    Only a store opened with ``allow_pickle=True`` (a trusted file, Python API)
    unpickles; every other reader refuses the value and never runs its code.
    """


class StoreVersionError(StoreError):
    """
    The store was written by a newer schema version than this code knows.

    The file is left exactly as it was found; upgrade muscle_mem_ros to read it.
    """


class UnknownTrajectoryError(StoreError):
    """No trajectory (or node) with the requested id exists in the store."""


class ConfigError(MuscleMemError):
    """Bad configuration; the message names the offending parameter."""


class CheckError(MuscleMemError):
    """A user check's capture or compare raised; the candidate is not replayed."""


class ReplayError(MuscleMemError):
    """A replay could not continue (a tool raised, or a post-check failed)."""
