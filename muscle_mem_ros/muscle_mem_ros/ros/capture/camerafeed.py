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
A camera sensor's last few frames, and the newest of them that decodes.

The hub takes a sensor's newest message only when a snapshot is taken (:mod:`.sensors`).
For a camera that is not enough: a frame that does not decode (a cut-off JPEG) must be
dropped and the last good one stand in, and if the snapshot only ever looked at the newest
message, a camera that sends corrupt frames between good ones would hide every good one
(seen: two corrupt frames in three at 20 Hz left the last good reading 0.7 s old). So a
camera's subscription keeps :data:`FRAME_DEPTH` frames, every one is kept here as it is
taken, and a snapshot reads the newest that decodes, trying each frame once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ['FRAME_DEPTH', 'Frames', 'Reading']

FRAME_DEPTH = 4
"""Frames a camera's subscription and :class:`Frames` keep: 0.13 s at 30 Hz."""

Reading = tuple[tuple[float, ...], float, float, bytes]
"""A decoded frame: (features, receive stamp, simulated time, the message)."""

_UNTRIED: Any = object()


class Frames:
    """The frames of one camera sensor, newest last, and its last good reading."""

    __slots__ = ('_recent', 'good', 'dropped')

    def __init__(self) -> None:
        self._recent: deque[list[Any]] = deque(maxlen=FRAME_DEPTH)
        self.good: Reading | None = None
        """The newest frame that decoded so far."""
        self.dropped = 0
        """Frames that did not decode, since start."""

    def push(self, raw: bytes, stamp: float, sim: float) -> None:
        """Keep a frame as it is taken."""
        self._recent.append([raw, stamp, sim, _UNTRIED])

    def reading(self, decode: Callable[[bytes], tuple[float, ...] | None],
                unusable: Callable[[], bool]) -> Reading | None:
        """
        Return the newest frame that decodes, else the last good one; None when unusable.

        :param decode: The frame's features, or None (a drop: counted by the caller).
        :param unusable: True once a frame said the camera is not the one configured (another
            size or encoding): no older frame stands in for it.
        """
        for frame in reversed(self._recent):
            if frame[3] is _UNTRIED:
                frame[3] = decode(frame[0])
                if frame[3] is None and unusable():
                    return None
            if frame[3] is not None:
                if self.good is None or frame[1] >= self.good[1]:
                    self.good = (frame[3], frame[1], frame[2], frame[0])
                return self.good
        return None if unusable() else self.good
