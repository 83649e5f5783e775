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
TF sensors learned from a bag: ``/tf`` and ``/tf_static`` as they were received, looked up.

A bag of a robot holds its TF. The node reads a TF sensor from the transform buffer its feed
fills (:mod:`..capture.framesensors`); learn fills one the same way, message by message in
the bag's order, and looks each sensor up when a snapshot is taken: at the latest time every
moving link of the chain has data for, as live. The reading's receive time is that of the
chain's stalest moving link's newest message (the bag's clock), so ``max_age`` and "newer
than the step's end" hold as live; a chain of static links only is as fresh as the snapshot.
A sensor that cannot be looked up (a frame not seen yet, a link without data) is missing from
the snapshot, and :meth:`BagFrames.why` says which link.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
import math

from muscle_mem_ros.checks.poses import canonical
from muscle_mem_ros.errors import TransformError
from muscle_mem_ros.ros.bags.reader import BagError
from muscle_mem_ros.ros.capture.tfcdr import TFReader
from muscle_mem_ros.ros.node.nodeconfig import SensorConfig
from muscle_mem_ros.transforms.buffer import TransformBuffer
import numpy as np

__all__ = ['BagFrames', 'TF_TOPICS']

TF_TOPICS = ('/tf', '/tf_static')
"""The topics a bag's TF is on (static second)."""


class BagFrames:
    """
    The TF sensors as the bag has them so far.

    :param sensors: The TF sensors (``SensorConfig.frames`` set).
    """

    def __init__(self, sensors: Sequence[SensorConfig]) -> None:
        self._sensors = {s.name: s for s in sensors if s.frames is not None}
        self._buffer = TransformBuffer()
        self._reader = TFReader()
        self._arrived: dict[str, int] = {}
        self._why: dict[str, str] = {}
        self._stalest: dict[str, str] = {}

    @property
    def names(self) -> list[str]:
        """Return the TF sensors' names."""
        return list(self._sensors)

    def push(self, topic: str, when: int, raw: bytes) -> list[str]:
        """
        Take one ``/tf`` or ``/tf_static`` message received at ``when`` (ns).

        :return: The TF sensors whose chain it moved (they have data newer than before).
        :raises BagError: a message that is not a TFMessage.
        """
        try:
            layout, values = self._reader.decode(raw)
        except ValueError as err:
            raise BagError(f'{topic}: a message at {when} ns is not a tf2_msgs/msg/TFMessage: '
                           f'{err}') from err
        # as the node's feed keeps a message (a refused transform is skipped, as there)
        refused = {index for index, _err in self._buffer.set_many(
            layout.links, values, static=topic == TF_TOPICS[1])}
        for index, (_parent, child) in enumerate(layout.links):
            if index not in refused:
                self._arrived[child] = when
        moved = set(layout.children)
        return [name for name, config in self._sensors.items()
                if self._chain(config) & moved]

    def _chain(self, config: SensorConfig) -> set[str]:
        """Return the child frames of the sensor's chain (empty while it cannot be looked up)."""
        assert config.frames is not None
        try:
            found = self._buffer.lookup(*config.frames)
        except TransformError:
            return set()
        return {link.rpartition('->')[2] for link in found.links}

    def arrived(self, name: str) -> float:
        """
        Return when (ns) the TF sensor's data last arrived: its stalest moving link's newest.

        As the node's ``FrameSensors.arrived``: inf for a chain of static links only (always
        fresh), -inf while it cannot be looked up. A post snapshot waits until it is later
        than the step's end, not for any link of the chain (a 50 Hz localization would end
        the wait before a 20 Hz detector's next tag).
        """
        config = self._sensors[name]
        assert config.frames is not None
        try:
            found = self._buffer.lookup(*config.frames)
        except TransformError:
            return -math.inf
        if not found.oldest_link:
            return math.inf
        return self._arrived.get(found.oldest_link.rpartition('->')[2], -math.inf)

    def readings(self, when: int, names: Collection[str] | None = None,
                 ) -> dict[str, tuple[tuple[float, ...], int]]:
        """Return (pose, receive time ns) of each TF sensor that can be looked up at ``when``."""
        out = {}
        for name, config in self._sensors.items():
            if names is not None and name not in names:
                continue
            assert config.frames is not None
            try:
                found = self._buffer.lookup(*config.frames)
            except TransformError as err:
                self._why[name] = f'transform {config.frames[0]} -> {config.frames[1]}: {err}'
                continue
            t = found.transform
            stalest = found.oldest_link.rpartition('->')[2]
            arrived = self._arrived.get(stalest, when) if found.oldest_link else when
            pose = (*t.translation, *canonical(np.asarray(t.rotation)).tolist())
            out[name] = (tuple(float(v) for v in pose), min(arrived, when))
            self._why.pop(name, None)
            self._stalest[name] = found.oldest_link
        return out

    def why(self, name: str) -> str:
        """Say why a TF sensor was missing from the last snapshot ('' when it was not)."""
        return self._why.get(name, '')

    def stalest(self, name: str) -> str:
        """
        Name the link ``parent->child`` a TF sensor's last reading is as old as.

        Its stalest moving link ('' for a chain of static links): the one to name when the
        reading is older than ``max_age``, as the node names it.
        """
        return self._stalest.get(name, '')
