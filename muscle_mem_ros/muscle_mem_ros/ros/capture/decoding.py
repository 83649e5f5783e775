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

"""A topic sensor's message decoded into its feature vector, or why it cannot be."""

from __future__ import annotations

from muscle_mem_ros.errors import ImageError
from muscle_mem_ros.ros.node.nodeconfig import SensorConfig
from rclpy.serialization import deserialize_message

__all__ = ['features_of']


def features_of(config: SensorConfig, raw: bytes) -> tuple[float, ...]:
    """
    Return the feature vector of one serialized message of a sensor's topic.

    :raises ImageError: a camera's frame that does not decode, or is not the camera
        configured (``ImageMismatch``): the caller drops or reports it.
    :raises ValueError: a message that cannot be read, or whose vector has another length
        than the sensor's tolerance; the message names the sensor and says which.
    """
    try:
        msg = deserialize_message(raw, config.msg_type)
        values = [v for extractor in config.extractors for v in extractor.extract(msg)]
    except ImageError:
        raise
    except Exception as err:  # a malformed message must not stop capture
        raise ValueError(f'sensors.{config.name}: cannot read {config.topic}: {err}') from err
    if len(config.tolerance) not in (1, len(values)):
        raise ValueError(f'sensors.{config.name}.tolerance: {len(config.tolerance)} values, but '
                         f'{config.topic} gives {len(values)} elements; sensor ignored (checks '
                         'fail)')
    return tuple(values)
