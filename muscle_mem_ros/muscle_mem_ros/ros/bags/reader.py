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
Read a bag once: every topic's messages (CDR bytes and receive times), checked.

What is read:

* one MCAP file (rosbag2's ``mcap`` storage, the default since Iron, or the cache's own
  ``muscle-mem export --mcap``);
* a rosbag2 folder: its ``metadata.yaml`` names the storage (``mcap`` only; ``sqlite3``
  is refused, convert it with ``ros2 bag convert``) and its files, read in that order.

The bag's clock is each message's ``log_time`` (when the recorder received it), in
nanoseconds; :class:`Topic` keeps per topic the times and raw messages in that order.
Nothing is decoded here: the steps decode only what they use.

Refused, with :class:`BagError` naming the file (and the topic where there is one):
a file that is not MCAP, truncated or corrupt (CRC checked); a message whose encoding
is not ``cdr``; a topic whose receive times go backwards (the bag's clock must only
move forward: a recording spliced from two clocks cannot say what came first).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from muscle_mem_ros.errors import MuscleMemError
import yaml

__all__ = ['Bag', 'BagError', 'Topic', 'bag_files', 'read_bag']


class BagError(MuscleMemError):
    """A bag that cannot be learned from (unreadable, inconsistent, or missing what is needed)."""


@dataclass
class Topic:
    """
    One topic of a bag.

    :ivar name: Topic name.
    :ivar type_name: Its message type (``pkg/msg/X``) from the bag's schema ('' if none).
    :ivar times: Receive times (ns), ascending.
    :ivar data: The messages (CDR bytes), parallel to ``times``.
    """

    name: str
    type_name: str
    times: list[int] = field(default_factory=list)
    data: list[bytes] = field(default_factory=list)


@dataclass
class Bag:
    """
    A bag as read: its topics and metadata records.

    :ivar path: What was given (file or folder).
    :ivar topics: Topic name -> its messages.
    :ivar metadata: MCAP metadata records by name.
    :ivar start: First receive time (ns); 0 for an empty bag.
    :ivar end: Last receive time (ns).
    """

    path: Path
    topics: dict[str, Topic] = field(default_factory=dict)
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)
    start: int = 0
    end: int = 0

    def topic(self, name: str) -> Topic | None:
        """Return a topic by name, with or without its leading slash (None: not in the bag)."""
        return self.topics.get(name) or self.topics.get('/' + name.lstrip('/'))


def bag_files(path: str | Path) -> list[Path]:
    """
    Return the MCAP files a path stands for (a file, or a rosbag2 folder's files in order).

    :raises BagError: no such path, a folder without ``metadata.yaml``, or not MCAP storage.
    """
    target = Path(path)
    if target.is_file():
        return [target]
    if not target.is_dir():
        raise BagError(f'{target}: no such bag (an .mcap file or a rosbag2 folder)')
    meta_file = target / 'metadata.yaml'
    try:
        meta: Any = yaml.safe_load(meta_file.read_text(encoding='utf-8'))
        info = meta['rosbag2_bagfile_information']
        storage = str(info.get('storage_identifier', ''))
        names = [str(n) for n in info.get('relative_file_paths') or []]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError) as err:
        raise BagError(f'{meta_file}: not a rosbag2 metadata file ({err})') from err
    if storage != 'mcap':
        raise BagError(f'{meta_file}: storage {storage!r} is not read; only mcap '
                       '(convert with: ros2 bag convert)')
    if not names:
        raise BagError(f'{meta_file}: lists no files')
    return [target / name for name in names]


def read_bag(path: str | Path) -> Bag:
    """
    Read every message of a bag (see the module docstring).

    :param path: An MCAP file or a rosbag2 folder.
    :return: The bag.
    :raises BagError: unreadable, truncated, corrupt, or a clock going backwards.
    """
    bag = Bag(path=Path(path))
    for file in bag_files(path):
        _read_file(file, bag)
    starts = [t.times[0] for t in bag.topics.values() if t.times]
    if starts:
        bag.start = min(starts)
        bag.end = max(t.times[-1] for t in bag.topics.values() if t.times)
    return bag


def _read_file(file: Path, bag: Bag) -> None:
    from mcap.records import Channel, Message, Metadata, Schema
    from mcap.stream_reader import StreamReader

    schemas: dict[int, str] = {}
    channels: dict[int, Topic] = {}
    try:
        with open(file, 'rb') as stream:
            for record in StreamReader(stream, validate_crcs=True).records:
                if isinstance(record, Message):
                    topic = channels.get(record.channel_id)
                    if topic is None:
                        raise BagError(f'{file}: a message on unknown channel '
                                       f'{record.channel_id} (corrupt file)')
                    if topic.times and record.log_time < topic.times[-1]:
                        raise BagError(
                            f'{file}: clock goes backwards on {topic.name}: a message at '
                            f'{record.log_time} ns after one at {topic.times[-1]} ns')
                    topic.times.append(record.log_time)
                    topic.data.append(bytes(record.data))
                elif isinstance(record, Schema):
                    schemas[record.id] = record.name
                elif isinstance(record, Channel):
                    if record.message_encoding != 'cdr':
                        raise BagError(f'{file}: {record.topic} is encoded as '
                                       f'{record.message_encoding!r}, not cdr')
                    name = schemas.get(record.schema_id, '')
                    topic = bag.topics.setdefault(record.topic, Topic(record.topic, name))
                    if topic.type_name != name:
                        raise BagError(f'{file}: {record.topic} has two types: '
                                       f'{topic.type_name!r} and {name!r}')
                    channels[record.id] = topic
                elif isinstance(record, Metadata):
                    bag.metadata[record.name] = dict(record.metadata)
    except BagError:
        raise
    except OSError as err:
        raise BagError(f'{file}: cannot read: {err}') from err
    except Exception as err:  # the mcap reader's errors, struct and zstd ones: all corruption
        raise BagError(f'{file}: not a readable MCAP file (truncated or corrupt: '
                       f'{type(err).__name__}: {err})') from err
