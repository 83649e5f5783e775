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
When a camera frame was taken: its header's stamp, where that can be trusted.

A frame reaches the cache tens of milliseconds after it was exposed (rendered, encoded,
sent: 20 to 40 ms for the demo's 320x240 camera), and what it shows is the world at its
exposure, not at its arrival. A post-check waits for data newer than the step's end; a
frame that arrived after the end but was exposed before it shows the arm still settling,
and a replay whose frame fell a little earlier or later than the recording's fails its
post-check on the arm itself (seen in bench/eyes: 1 unchanged replay in 57, "post-check
failed at step 4: camera ... 4 of 510 cells over", where the arm fills the view). So a
camera frame is stamped at its exposure: its arrival moved back by how old its header's
stamp was when it was taken, on the node's clock (the simulation's under ``use_sim_time``).

Only where the stamp is plausible: between 0 and :data:`MAX_LATENCY` old. A camera whose
stamps are of another clock (a driver stamping with the sensor's own time, a machine whose
clock is off), or zero, keeps its arrival, as any other sensor.
"""

from __future__ import annotations

import struct
import time
from typing import Any

__all__ = ['exposed', 'exposed_at', 'exposure', 'MAX_LATENCY']

MAX_LATENCY = 1.0
"""Seconds a frame's stamp may be older than its arrival and still be its exposure."""

_LE = struct.Struct('<iI')
_BE = struct.Struct('>iI')


def exposure(raw: bytes) -> float | None:
    """
    Return a serialized Image's or CompressedImage's header stamp in seconds, or None.

    Both messages start with ``std_msgs/Header``, whose stamp is the first eight bytes after
    the CDR encapsulation: read without deserializing the frame. None: not CDR, or zero.
    """
    if len(raw) < 12 or raw[0] != 0 or raw[1] not in (0, 1):
        return None
    sec, nanosec = (_LE if raw[1] == 1 else _BE).unpack_from(raw, 4)
    if sec == 0 and nanosec == 0:
        return None
    return float(sec) + float(nanosec) * 1e-9


def exposed(raw: bytes, arrival: float, sim: float | None,
            clock: Any) -> tuple[float, float | None]:
    """
    Return a frame's stamp and simulated time as the sensor hub keeps them: at its exposure.

    :param raw: The serialized frame.
    :param arrival: When it arrived (monotonic seconds).
    :param sim: The node's simulated time now, or None when it runs on the system's.
    :param clock: The node's clock (read only when ``sim`` is None).
    :return: (stamp, simulated time), moved to the exposure where the header's stamp is
        plausible (:func:`exposed_at`), else ``(arrival, sim)``.
    """
    now = sim if sim is not None else clock.now().nanoseconds * 1e-9
    stamp, at = exposed_at(raw, arrival, time.monotonic(), now)
    return stamp, (at if sim is not None and at is not None else sim)


def exposed_at(raw: bytes, arrival: float, now: float,
               clock_now: float) -> tuple[float, float | None]:
    """
    Return when a frame was exposed: on the monotonic clock, and on the node's clock.

    :param raw: The serialized frame.
    :param arrival: When it arrived (monotonic seconds).
    :param now: The monotonic clock now.
    :param clock_now: The node's clock now (seconds; simulated under ``use_sim_time``).
    :return: (stamp, stamp on the node's clock); (``arrival``, None) where the header's stamp
        is not plausible.
    """
    stamp = exposure(raw)
    if stamp is None:
        return arrival, None
    age = clock_now - stamp
    if not 0.0 <= age <= MAX_LATENCY:
        return arrival, None
    return min(arrival, now - age), stamp
