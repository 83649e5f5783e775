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
Errors raised by muscle_mem_ros.

One base class, :class:`MuscleMemError`, so a caller can catch everything the
package raises on purpose. Bad arguments still raise the built-in
``ValueError`` / ``TypeError``; an error that is also one of those (a missing
task parameter is a ``KeyError``, an unsafe value a ``TypeError``) derives
from both, so code catching the built-in keeps working.
"""

from __future__ import annotations

__all__ = [
    'ConfigError',
    'DisconnectedFramesError',
    'ExtrapolationError',
    'FrameTreeError',
    'ImageError',
    'ImageMismatch',
    'MissingParamError',
    'MuscleMemError',
    'RecordingBusyError',
    'StaleTransformError',
    'StoreAccessError',
    'StoreCorruptError',
    'StoreError',
    'StorePickleError',
    'StoreUnavailableError',
    'StoreVersionError',
    'TransformError',
    'TypeResolutionError',
    'UnknownFrameError',
    'UnknownTrajectoryError',
    'UnsafeValueError',
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
    Also raised for an older schema when the store is opened read-only (it cannot
    be migrated then).
    """


class StoreUnavailableError(StoreError):
    """
    The store's database server cannot be reached right now (PostgreSQL store).

    Nothing was written; the store reconnects in the background. A recording
    committed meanwhile is kept in memory and committed once the server is back.
    """


class UnknownTrajectoryError(StoreError):
    """No trajectory (or node) with the requested id exists in the store."""


class ConfigError(MuscleMemError):
    """Bad configuration; the message names the offending parameter."""


class UnsafeValueError(MuscleMemError, TypeError):
    """A value is not JSON data or a NumPy array, and pickling was not allowed."""


class MissingParamError(MuscleMemError, KeyError):
    """A recorded call refers to a task parameter the current run does not have."""


class RecordingBusyError(MuscleMemError, RuntimeError):
    """A recording is already active."""


class TypeResolutionError(MuscleMemError, ValueError):
    """A type name or a field path does not resolve; the message says why."""


class ImageError(MuscleMemError, ValueError):
    """A camera frame that cannot be read: an unknown encoding, a corrupt or cut-off image."""


class ImageMismatch(ImageError):
    """A frame that reads, but not as its sensor was configured: another size or encoding."""


class TransformError(MuscleMemError):
    """
    Where one frame is in another cannot be said; the message names the frames or the link.

    Raised by :class:`~muscle_mem_ros.transforms.buffer.TransformBuffer`. A lookup that
    raises fails closed: a check on it fails, it never passes.
    """


class UnknownFrameError(TransformError):
    """A frame no transform has named, as parent or child; the message lists the known ones."""


class DisconnectedFramesError(TransformError):
    """Two frames in separate trees, so no chain joins them; the message names both roots."""


class ExtrapolationError(TransformError):
    """
    A link of the chain has no data at the asked time.

    The message names the ``parent->child`` link, its oldest and newest stamps and the
    asked time, and says whether that time is in the link's past or future. The buffer
    interpolates between stamps and never extrapolates, as tf2 refuses to (beyond a small
    hold, :data:`~muscle_mem_ros.transforms.history.HOLD`).
    """


class StaleTransformError(TransformError):
    """A chain whose oldest link's data is older than the sensor's ``max_age``, named."""


class FrameTreeError(TransformError, ValueError):
    """
    A transform the frame tree refuses, at ``set``: the message names the frames.

    A frame with a second parent (the one it has and the one offered), a link that would
    close a loop, or a link sent both as static and as dynamic. TF is a tree: each frame has
    one parent, so where a frame is has one answer.
    """
