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
The node's ``~/calibrate`` service: sample the sensors at rest and propose tolerances.

The handler takes the node's one-activity guard (no task, replay or recording
moves the robot meanwhile), then captures a snapshot every ``POLL`` seconds for
the requested duration, keeping one reading per sensor message (a reading
whose receive stamp did not change is the same message). Per sensor and
element it answers the mean, standard deviation, peak to peak and the
tolerance :func:`muscle_mem_ros.checks.calibration.noise` proposes, next to the
configured one, and the proposals as a params-file snippet. A camera (mode ``image``)
gets one proposal, the margin times its largest cell deviation with the light removed
between two frames (:func:`muscle_mem_ros.checks.calibration.noise`). A sensor that sent
nothing in the window is named in the message and left out; with none at all
the answer is ``success=false``. Deactivating the node ends the sampling early
(``success=false``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import math
import threading
import time
from typing import Any

from muscle_mem_interfaces.msg import SensorNoise
from muscle_mem_ros.checks import calibration
from muscle_mem_ros.ros.capture.sensors import SensorHub
from muscle_mem_ros.ros.node.nodeconfig import SensorConfig
from muscle_mem_ros.ros.rclfix.sync import TaskGuard

__all__ = ['MAX_DURATION', 'POLL', 'Calibrator']

MAX_DURATION = 600.0
"""Longest sampling window a request may ask for, seconds."""
POLL = 0.005
"""Seconds between two captures while sampling."""


class Calibrator:
    """
    Handler of ``~/calibrate`` (registered by the node).

    :param hub: The node's sensors.
    :param sensors: Their configuration (tolerances, modes).
    :param guard: One activity at a time.
    :param node_name: The node's name, the top key of the snippet.
    :param stopping: Returns True once the node deactivates.
    """

    def __init__(
        self, *, hub: SensorHub, sensors: Sequence[SensorConfig], guard: TaskGuard,
        node_name: str, stopping: Callable[[], bool],
    ) -> None:
        self._hub = hub
        self._sensors = {s.name: s for s in sensors}
        self._guard = guard
        self._node_name = node_name
        self._stopping = stopping
        self._pause = threading.Event()

    def _sample(self, duration: float) -> dict[str, list[tuple[float, ...]]] | None:
        readings: dict[str, list[tuple[float, ...]]] = {name: [] for name in self._sensors}
        seen: dict[str, float] = {}
        deadline = time.monotonic() + duration
        while time.monotonic() < deadline:
            if self._stopping():
                return None
            snapshot = self._hub.capture()
            for name, values in snapshot.features.items():
                stamp = snapshot.stamps.get(name)
                if name in readings and stamp is not None and seen.get(name) != stamp:
                    seen[name] = stamp
                    readings[name].append(values)
            self._pause.wait(POLL)
        return readings

    def handle(self, request: Any, response: Any) -> Any:
        """Sample for ``request.duration`` seconds and answer the noise per sensor."""
        duration, k, margin = request.duration, request.k or calibration.DEFAULT_K, \
            request.margin or calibration.DEFAULT_MARGIN
        if not math.isfinite(duration) or not 0 < duration <= MAX_DURATION:
            response.message = f'bad request: duration must be in (0, {MAX_DURATION:g}] s, ' \
                f'got {duration}'
            return response
        if not math.isfinite(k) or k <= 0:
            response.message = f'bad request: k must be > 0, got {k}'
            return response
        if not math.isfinite(margin) or margin < 1:
            response.message = f'bad request: margin must be >= 1, got {margin}'
            return response
        if not self._sensors:
            response.message = 'no sensors are configured: nothing to calibrate'
            return response
        with self._guard.held(f'calibration ({duration:g} s)') as holder:
            if holder is not None:
                response.message = f'busy: {holder} is running (calibrate while the robot rests)'
                return response
            readings = self._sample(duration)
        if readings is None:
            response.message = 'the node is deactivating: calibration stopped'
            return response
        proposed = {}
        silent = []
        for name, values in readings.items():
            config = self._sensors[name]
            if not values:
                silent.append(name)
                continue
            found = calibration.noise(
                name, values, k=k, margin=margin, mode=config.mode,
                channels=config.image.channels if config.image is not None else None)
            proposed[name] = found.proposed
            response.sensors.append(SensorNoise(
                sensor=name, samples=found.samples, mean=list(found.mean),
                std=list(found.std), peak_to_peak=list(found.peak_to_peak),
                proposed_tolerance=list(found.proposed),
                current_tolerance=list(config.tolerance)))
        if not proposed:
            response.message = (f'no sensor sent data in {duration:g} s: '
                                f"{', '.join(silent)}")
            return response
        response.params_yaml = calibration.params_snippet(proposed, node_name=self._node_name)
        response.success = True
        counts = ', '.join(f'{s.sensor} {s.samples}' for s in response.sensors)
        response.message = f'sampled {duration:g} s at rest (readings: {counts})' + (
            f"; no data from {', '.join(silent)}" if silent else '')
        return response
