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
TF sensors: poses read from the cache's transform buffer, which ``/tf`` and ``/tf_static`` fill.

A TF sensor (``sensors.<name>.frame``, :mod:`~muscle_mem_ros.ros.node.frameconfig`) has no
topic of its own: one :class:`~.transformfeed.TransformFeed` fills one
:class:`~muscle_mem_ros.transforms.buffer.TransformBuffer` for all of them, and a snapshot
looks each one up there (:meth:`FrameSensors.capture`), chains composed and interpolated.

* **When.** At the latest time every moving link of the chain has data for (tf2's
  ``Time(0)``): a snapshot asks "where is it now", and the newest data of a 30 Hz detector is
  up to 33 ms old, so asking for the capture's own instant would be refused as extrapolation
  nearly always. How old that time is counts instead: the reading's stamp is the capture's
  monotonic time minus the chain's age on the node's clock (simulated time included), so
  ``max_age`` and "newer than the step's end" hold as for a topic's sensor.
* **Fails closed, naming the link.** A frame never seen, two frames in separate trees, a link
  without data, or a chain whose stalest moving link is older than ``max_age``: the sensor is
  left out of the snapshot, and :meth:`FrameSensors.problems` says why, naming the link
  (``sensors.cube: transform world -> cube: link camera->cube is stale: ...``). The node's
  checks report that reason (``unusable: ...``), so a missing link is said, never guessed.
* **Fresh.** A chain's data counts as arriving when its stalest moving link's newest
  transform arrived (:meth:`~.transformfeed.TransformFeed.received`); a chain of static
  links only is always fresh (a static link never ages).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
import math
import threading

from muscle_mem_ros.checks.poses import canonical
from muscle_mem_ros.errors import TransformError
from muscle_mem_ros.ros.capture.transformfeed import TransformFeed
from muscle_mem_ros.ros.node.nodeconfig import SensorConfig
from muscle_mem_ros.transforms.buffer import Lookup, TransformBuffer
import numpy as np
from rclpy.node import Node as RosNode

__all__ = ['FrameSensors']


class FrameSensors:
    """
    The TF sensors of one node: one feed, one buffer, a lookup per sensor and snapshot.

    :param node: The cache node (its clock, context and names).
    :param sensors: The TF sensors (``SensorConfig.frames`` set).
    :param on_error: Called with a message the first time a sensor becomes unusable, and
        for a transform the buffer refuses (once per link).
    :param on_data: Called after each batch of transforms (the hub wakes its waiters).
    """

    def __init__(self, node: RosNode, sensors: Sequence[SensorConfig], *,
                 on_error: Callable[[str], None] | None = None,
                 on_data: Callable[[], None] | None = None) -> None:
        self._sensors = {s.name: s for s in sensors if s.frames is not None}
        self._clock = node.get_clock()
        self._on_error = on_error or (lambda _m: None)
        self._lock = threading.Lock()
        self._problems: dict[str, str] = {}
        self._arrived: dict[str, float] = {}
        self.buffer = TransformBuffer()
        """The buffer the feed fills (tools and tests may look up in it)."""
        self._feed = TransformFeed(node, self.buffer, on_data=on_data,
                                   on_error=self._on_error) if self._sensors else None

    @property
    def names(self) -> tuple[str, ...]:
        """Return the TF sensors' names, in configuration order."""
        return tuple(self._sensors)

    def close(self) -> None:
        """Stop the feed."""
        if self._feed is not None:
            self._feed.close()
            self._feed = None

    def _now(self) -> float:
        return self._clock.now().nanoseconds * 1e-9

    def _lookup(self, config: SensorConfig) -> Lookup:
        """Return the sensor's lookup, its age checked; TransformError naming the link if not."""
        assert config.frames is not None
        reference, frame = config.frames
        found = self.buffer.lookup(reference, frame)
        found.check_age(self._now(), config.max_age)
        return found

    def capture(self, names: Collection[str] | None, taken_at: float,
                ) -> tuple[dict[str, tuple[float, ...]], dict[str, float]]:
        """
        Look up every (named) TF sensor: (features, stamps) for those that can be read.

        :param names: Only these sensors (None: all).
        :param taken_at: The snapshot's monotonic time.
        """
        features: dict[str, tuple[float, ...]] = {}
        stamps: dict[str, float] = {}
        if self._feed is not None and self._sensors:
            self._feed.catch_up()  # as fresh as a topic sensor's newest message
        for name, config in self._sensors.items():
            if names is not None and name not in names:
                continue
            assert config.frames is not None
            try:
                found = self._lookup(config)
            except TransformError as err:
                self._problem(name, f'sensors.{name}: transform {config.frames[0]} -> '
                                    f'{config.frames[1]}: {err}')
                continue
            t = found.transform
            rotation = canonical(np.asarray(t.rotation, dtype=np.float64))
            features[name] = (*(float(v) for v in t.translation), *rotation.tolist())
            stamps[name] = taken_at - max(0.0, found.age(self._now()))
            with self._lock:
                self._problems.pop(name, None)
                self._arrived[name] = self._chain_arrival(found)
        return features, stamps

    def _chain_arrival(self, found: Lookup) -> float:
        """Return when the chain's stalest moving link arrived (inf: all static)."""
        if not found.oldest_link or self._feed is None:
            return math.inf
        return self._feed.received(found.oldest_link.rpartition('->')[2])

    def _problem(self, name: str, message: str) -> None:
        with self._lock:
            first = name not in self._problems
            self._problems[name] = message
        if first:
            self._on_error(f'{message}; checks on it fail until it can be read')

    def problems(self) -> dict[str, str]:
        """Return the TF sensors the last capture could not read, with why (naming the link)."""
        with self._lock:
            return dict(self._problems)

    def arrived(self, name: str) -> float:
        """
        Return the monotonic time the sensor's newest data came in; -inf if it cannot be read.

        Read afresh, so a wait for data newer than a step's end sees each new batch.
        """
        config = self._sensors[name]
        try:
            found = self._lookup(config)
        except TransformError:
            return -math.inf
        arrival = self._chain_arrival(found)
        with self._lock:
            self._arrived[name] = arrival
        return arrival

    def silent(self) -> list[str]:
        """Name the TF sensors that cannot be read now (no data, unknown frame, stale)."""
        return [name for name in self._sensors if self.arrived(name) == -math.inf]
