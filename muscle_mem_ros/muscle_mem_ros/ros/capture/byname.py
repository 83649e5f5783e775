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

"""The latest value of every configured name of a sensor read by name (:mod:`.sensors`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
import time

from muscle_mem_ros.ros.node.nodeconfig import SensorConfig
from rclpy.serialization import deserialize_message

__all__ = ['ByName']


class ByName:
    """
    Latest value per (field, name) of a sensor that selects elements by name.

    ``pending`` holds the newest raw message of each publisher not merged yet;
    ``merge`` decodes them in arrival order. ``features`` is None while a
    configured name has not been seen in every configured field.
    """

    __slots__ = ('index', 'width', 'values', 'stamps', 'sims', 'pending', 'features', 'first',
                 'noted', 'newest')

    def __init__(self, config: SensorConfig) -> None:
        self.index = {name: i for i, name in enumerate(config.joints)}
        self.width = len(config.joints)
        size = self.width * len(config.extractors)
        self.values = [0.0] * size
        self.stamps = [float('-inf')] * size
        self.sims = [0.0] * size
        self.pending: dict[bytes, tuple[bytes, float, float | None]] = {}
        self.newest: dict[bytes, tuple[bytes, float, float | None]] = {}
        """Each publisher's newest message, merged or not (a hold reads every joint's)."""
        self.features: tuple[float, ...] | None = None
        self.first = float('inf')
        self.noted = False

    def unseen_note(self, config: SensorConfig) -> str:
        """Say, once, which configured names have not been received ('' otherwise, or yet)."""
        if self.noted or time.monotonic() - self.first < config.max_age:
            return ''  # the other publishers may not have spoken yet
        self.noted = True
        missing = ', '.join(self.unseen(config.joints))
        fields = ', '.join(config.by_name.paths) if config.by_name else ''
        return (f'sensors.{config.name}.joints: {missing} not received on {config.topic} '
                f'(with a value in each of: {fields}); checks on this sensor fail until it is')

    def apply(self, names: list[str], columns: list[list[float] | None], stamp: float,
              sim: float | None) -> None:
        """Take the values of the configured names from one decoded message."""
        for column_index, column in enumerate(columns):
            if column is None:
                continue
            base = column_index * self.width
            for name, value in zip(names, column, strict=True):
                at = self.index.get(name)
                if at is not None:
                    self.values[base + at] = value
                    self.stamps[base + at] = stamp
                    self.sims[base + at] = 0.0 if sim is None else sim
        self.first = min(self.first, stamp)

    def merge(self, config: SensorConfig,
              report: Callable[[str], None]) -> tuple[bytes, bool] | None:
        """
        Decode each publisher's pending message, oldest first, into the values by name.

        :param report: Told of a message that cannot be read (the others still count).
        :return: The newest message merged and whether it was read; None: nothing pending.
        """
        if not self.pending:
            return None
        pending = sorted(self.pending.values(), key=lambda item: item[1])
        self.newest.update(self.pending)
        self.pending.clear()
        assert config.by_name is not None
        read = False
        for raw, stamp, sim in pending:
            try:
                names, columns = config.by_name.read(deserialize_message(raw, config.msg_type))
            except Exception as err:  # a malformed message must not stop capture
                report(f'sensors.{config.name}: cannot read {config.topic}: {err}')
                read = False
                continue
            self.apply(names, columns, stamp, sim)
            read = True
        return pending[-1][0], read

    def unseen(self, joints: Sequence[str]) -> list[str]:
        """Return the configured names missing from at least one configured field."""
        return [
            name for j, name in enumerate(joints)
            if any(self.stamps[k + j] == float('-inf')
                   for k in range(0, len(self.stamps), self.width))
        ]
