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
Read a bag once, in one pass: every message handed on as it comes, only some kept.

What is read:

* one MCAP file (rosbag2's ``mcap`` storage, the default since Iron, or the cache's own
  ``muscle-mem export --mcap``), in receive order by its chunk index (its messages are
  written in the order a recorder took them, which is not that); or one compressed whole
  with zstd (``.mcap.zstd``: rosbag2's ``compression_mode: FILE``), unpacked to a
  temporary file first;
* one sqlite3 file (``.db3``: rosbag2's ``sqlite3`` storage, Humble's default), read with
  Python's own ``sqlite3`` in receive order;
* a rosbag2 folder: its ``metadata.yaml`` names the storage (``mcap`` or ``sqlite3``), the
  compression (``FILE``: each file is zstd; ``MESSAGE``: each message is) and its files,
  read in that order.

What a file is comes from its first bytes, not its name. The bag's clock is each
message's receive time (MCAP's ``log_time``, sqlite3's ``timestamp``) in nanoseconds; the
publish time (MCAP's ``publish_time``; sqlite3 has none: the receive time) is handed on
beside it. Nothing is decoded here.

Memory: a message is handed to ``on_message`` and dropped (an MCAP's once no chunk to come
can hold an earlier one: held while chunks overlap in time), unless ``keep`` says to keep
its topic (:class:`Topic` then holds its times and raw messages in order): learning keeps
the few small topics it reads at the end (calls, tasks, the description) and streams the
rest (sensors, and topics it does not read at all: a camera's images are never held).

Refused, with :class:`BagError` naming the file (and the topic where there is one):
a file that is none of these, truncated or corrupt (CRC checked); a message whose encoding
is not ``cdr``; a topic whose receive times go backwards (the bag's clock must only
move forward: a recording spliced from two clocks cannot say what came first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
import heapq
from pathlib import Path
from typing import Any, BinaryIO

from muscle_mem_ros.errors import MuscleMemError
import yaml

__all__ = ['Bag', 'BagError', 'BagFile', 'Topic', 'bag_files', 'read_bag']

_SQLITE = b'SQLite format 3\x00'
_ZSTD = b'\x28\xb5\x2f\xfd'
_MCAP = b'\x89MCAP'


class BagError(MuscleMemError):
    """A bag that cannot be learned from (unreadable, inconsistent, or missing what is needed)."""


@dataclass
class Topic:
    """
    One topic of a bag.

    :ivar name: Topic name.
    :ivar type_name: Its message type (``pkg/msg/X``) from the bag's schema ('' if none).
    :ivar times: Receive times (ns), ascending (kept topics only).
    :ivar data: The messages (CDR bytes), parallel to ``times`` (kept topics only).
    :ivar count: How many messages the bag holds on it (kept or not).
    :ivar last: The receive time of its last message (ns; 0: none).
    """

    name: str
    type_name: str
    times: list[int] = field(default_factory=list)
    data: list[bytes] = field(default_factory=list)
    count: int = 0
    last: int = 0


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


OnMessage = Callable[[Topic, int, int, bytes], None]
"""Called per message in the bag's order: (topic, receive time ns, publish time ns, CDR)."""


@dataclass(frozen=True)
class BagFile:
    """
    One file of a bag and how it is stored.

    :ivar path: The file.
    :ivar storage: ``mcap`` or ``sqlite3``.
    :ivar compression: '' (none), ``file`` (the whole file is zstd) or ``message``.
    """

    path: Path
    storage: str
    compression: str = ''


def _sniff(path: Path) -> BagFile:
    try:
        with open(path, 'rb') as stream:
            head = stream.read(16)
    except OSError as err:
        raise BagError(f'{path}: cannot read: {err}') from err
    if head.startswith(_SQLITE):
        return BagFile(path, 'sqlite3')
    if head.startswith(_ZSTD):
        return BagFile(path, 'mcap', 'file')
    return BagFile(path, 'mcap')


def bag_files(path: str | Path) -> list[BagFile]:
    """
    Return the files a path stands for (a file, or a rosbag2 folder's files in order).

    :raises BagError: no such path, a folder without ``metadata.yaml``, or another storage.
    """
    target = Path(path)
    if target.is_file():
        return [_sniff(target)]
    if not target.is_dir():
        raise BagError(f'{target}: no such bag (an .mcap or .db3 file or a rosbag2 folder)')
    meta_file = target / 'metadata.yaml'
    try:
        meta: Any = yaml.safe_load(meta_file.read_text(encoding='utf-8'))
        info = meta['rosbag2_bagfile_information']
        storage = str(info.get('storage_identifier', ''))
        names = [str(n) for n in info.get('relative_file_paths') or []]
        mode = str(info.get('compression_mode') or '').lower()
        codec = str(info.get('compression_format') or '').lower()
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError,
            AttributeError) as err:
        raise BagError(f'{meta_file}: not a rosbag2 metadata file ({err})') from err
    if storage not in ('mcap', 'sqlite3'):
        raise BagError(f'{meta_file}: storage {storage!r} is not read; only mcap and sqlite3 '
                       '(convert with: ros2 bag convert)')
    if mode in ('file', 'message') and codec not in ('zstd', ''):
        raise BagError(f'{meta_file}: compression {codec!r} is not read; only zstd')
    if not names:
        raise BagError(f'{meta_file}: lists no files')
    compression = mode if mode in ('file', 'message') else ''
    files = []
    for name in names:
        sniffed = _sniff(target / name)
        files.append(BagFile(sniffed.path, storage,
                             sniffed.compression if compression != 'message' else 'message'))
    return files


class _Reading:
    """One pass over a bag: topics declared, messages checked, handed on, kept or not."""

    def __init__(self, bag: Bag, keep: Callable[[Topic], bool] | None,
                 on_message: OnMessage | None) -> None:
        self.bag = bag
        self._keep = keep
        self._on_message = on_message
        self._kept: dict[str, bool] = {}

    def topic(self, file: Path, name: str, type_name: str) -> Topic:
        topic = self.bag.topics.setdefault(name, Topic(name, type_name))
        if topic.type_name != type_name:
            raise BagError(f'{file}: {name} has two types: {topic.type_name!r} and '
                           f'{type_name!r}')
        if name not in self._kept:
            self._kept[name] = self._keep is None or self._keep(topic)
        return topic

    def message(self, file: Path, topic: Topic, when: int, published: int,
                data: bytes) -> None:
        self.arrive(file, topic, when)
        self.hand_on(topic, when, published, data)

    def arrive(self, file: Path, topic: Topic, when: int) -> None:
        """Count a message as the file holds it: its topic's clock only goes forward."""
        if topic.count and when < topic.last:
            raise BagError(f'{file}: clock goes backwards on {topic.name}: a message at '
                           f'{when} ns after one at {topic.last} ns')
        topic.count += 1
        topic.last = when
        bag = self.bag
        bag.start = when if not bag.start else min(bag.start, when)
        bag.end = max(bag.end, when)

    def hand_on(self, topic: Topic, when: int, published: int, data: bytes) -> None:
        """Keep a message of a kept topic, and hand it on, in receive order."""
        if self._kept[topic.name]:
            topic.times.append(when)
            topic.data.append(data)
        if self._on_message is not None:
            self._on_message(topic, when, published, data)


def read_bag(path: str | Path, *, keep: Callable[[Topic], bool] | None = None,
             on_message: OnMessage | None = None) -> Bag:
    """
    Read a bag in one pass (see the module docstring).

    :param path: An MCAP, ``.mcap.zstd`` or ``.db3`` file, or a rosbag2 folder.
    :param keep: Which topics to hold in memory (None: every one).
    :param on_message: Called with every message, in the bag's order, as it is read.
    :return: The bag.
    :raises BagError: unreadable, truncated, corrupt, or a clock going backwards.
    """
    bag = Bag(path=Path(path))
    reading = _Reading(bag, keep, on_message)
    for file in bag_files(path):
        if file.storage == 'sqlite3':
            _read_sqlite(file, reading)
        else:
            _read_mcap(file, reading)
    return bag


@contextmanager
def _seekable(file: BagFile) -> Iterator[BinaryIO]:
    """Open a file to seek in: one compressed whole is unpacked to a temporary file first."""
    with open(file.path, 'rb') as raw:
        if file.compression != 'file':
            yield raw
            return
        import shutil
        import tempfile
        import zstandard
        with tempfile.TemporaryFile() as unpacked:
            with zstandard.ZstdDecompressor().stream_reader(raw) as stream:
                shutil.copyfileobj(stream, unpacked, 1 << 20)
            unpacked.seek(0)
            yield unpacked


def _unpacker(file: BagFile) -> Callable[[bytes], bytes]:
    """Return what turns a stored message into its CDR (rosbag2's per-message zstd)."""
    if file.compression != 'message':
        return bytes
    import zstandard
    return zstandard.ZstdDecompressor().decompress


def _read_mcap(file: BagFile, reading: _Reading) -> None:
    """
    Hand on an MCAP file's messages in receive order (``log_time``), not the file's order.

    A recorder writes each message as its callback takes it, stamped with when the middleware
    received it: an executor taking a backlog of one topic writes messages received before
    others after them (seconds apart, on a loaded machine), so the file's order is not the
    bag's. The file is still read once, in its order (CRCs checked, each topic's clock
    checked in the order it was written); its summary's chunk index says when each chunk
    still to come starts, and a message is handed on once no chunk to come can hold an
    earlier one (:class:`_Reorder`): only the chunks that overlap in time are held. A file
    without a summary (a recorder that never finished it) is handed on in its own order, and
    refused as truncated where it ends early.
    """
    from mcap.reader import SeekingReader
    from mcap.records import Channel, Chunk, Message, Metadata, Schema
    from mcap.stream_reader import breakup_chunk, StreamReader

    path = file.path
    what = 'zstd-compressed MCAP' if file.compression == 'file' else 'MCAP'
    unpack = _unpacker(file)
    schemas: dict[int, str] = {}
    channels: dict[int, Topic] = {}
    try:
        with _seekable(file) as stream:
            try:
                summary = SeekingReader(stream).get_summary()
            except Exception:  # no footer, or a bad one: read in the file's order
                summary = None
            stream.seek(0)
            chunks = [] if summary is None else sorted(summary.chunk_indexes,
                                                       key=lambda c: c.chunk_start_offset)
            order = _Reorder(path, reading, [c.message_start_time for c in chunks])
            for outer in StreamReader(stream, validate_crcs=True, emit_chunks=True).records:
                inner = breakup_chunk(outer, validate_crc=True) if isinstance(outer, Chunk) \
                    else [outer]
                for record in inner:
                    if isinstance(record, Message):
                        topic = channels.get(record.channel_id)
                        if topic is None:
                            raise BagError(f'{path}: a message on unknown channel '
                                           f'{record.channel_id} (corrupt file)')
                        order.push(topic, record.log_time, record.publish_time,
                                   unpack(bytes(record.data)))
                    elif isinstance(record, Schema):
                        schemas[record.id] = record.name
                    elif isinstance(record, Channel):
                        if record.message_encoding != 'cdr':
                            raise BagError(f'{path}: {record.topic} is encoded as '
                                           f'{record.message_encoding!r}, not cdr')
                        channels[record.id] = reading.topic(
                            path, record.topic, schemas.get(record.schema_id, ''))
                    elif isinstance(record, Metadata):
                        reading.bag.metadata[record.name] = dict(record.metadata)
                if isinstance(outer, Chunk):
                    order.chunk_read()
            order.flush()
    except BagError:
        raise
    except OSError as err:
        raise BagError(f'{path}: cannot read: {err}') from err
    except Exception as err:  # the mcap reader's errors, struct and zstd ones: all corruption
        raise BagError(f'{path}: not a readable {what} file (truncated or corrupt: '
                       f'{type(err).__name__}: {err})') from err


class _Reorder:
    """
    Messages read in a file's order, handed on in receive order.

    :param starts: Each chunk's first receive time, in the file's order (the summary's
        chunk index; empty: no index, hand on in the file's order).
    """

    def __init__(self, path: Path, reading: _Reading, starts: list[int]) -> None:
        self._path = path
        self._reading = reading
        self._held: list[tuple[int, int, Topic, int, bytes]] = []
        self._count = 0
        self._chunk = 0
        # The earliest message any chunk from the k-th on can hold.
        self._after = list(starts) + [_FOREVER]
        for k in range(len(starts) - 1, -1, -1):
            self._after[k] = min(self._after[k], self._after[k + 1])

    def push(self, topic: Topic, when: int, published: int, data: bytes) -> None:
        self._reading.arrive(self._path, topic, when)
        if len(self._after) == 1:
            self._reading.hand_on(topic, when, published, data)
            return
        heapq.heappush(self._held, (when, self._count, topic, published, data))
        self._count += 1

    def chunk_read(self) -> None:
        self._chunk += 1
        self._release(self._after[min(self._chunk, len(self._after) - 1)])

    def flush(self) -> None:
        self._release(_FOREVER)

    def _release(self, before: int) -> None:
        while self._held and self._held[0][0] < before:
            when, _, topic, published, data = heapq.heappop(self._held)
            self._reading.hand_on(topic, when, published, data)


_FOREVER = 2**63


def _read_sqlite(file: BagFile, reading: _Reading) -> None:
    import sqlite3
    path = file.path
    unpack = _unpacker(file)
    try:
        db = sqlite3.connect(f'file:{path}?mode=ro', uri=True)
    except sqlite3.Error as err:
        raise BagError(f'{path}: cannot open as sqlite3 storage: {err}') from err
    try:
        topics: dict[int, Topic] = {}
        for ident, name, type_name, encoding in db.execute(
                'SELECT id, name, type, serialization_format FROM topics'):
            if encoding != 'cdr':
                raise BagError(f'{path}: {name} is encoded as {encoding!r}, not cdr')
            topics[ident] = reading.topic(path, str(name), str(type_name))
        for ident, when, data in db.execute(
                'SELECT topic_id, timestamp, data FROM messages ORDER BY timestamp, id'):
            topic = topics.get(ident)
            if topic is None:
                raise BagError(f'{path}: a message on unknown topic id {ident} (corrupt file)')
            reading.message(path, topic, int(when), int(when), unpack(data))
    except BagError:
        raise
    except Exception as err:  # sqlite3's and zstd's errors: not rosbag2's sqlite3 storage
        raise BagError(f'{path}: not a readable rosbag2 sqlite3 file ({type(err).__name__}: '
                       f'{err})') from err
    finally:
        db.close()
