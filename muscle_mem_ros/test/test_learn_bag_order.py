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
An MCAP file written out of receive order is read in it (issue 43 item 14).

A recorder stamps each message with when the middleware received it but writes it when its
callback runs: an executor that falls behind on one topic writes a backlog of sensor
messages after a result received later. The demo's recorder did exactly that on an idle
machine, and reading in the file's order put each step's snapshots seconds off (the task
skipped as stale). These bags are written so, in many small chunks, as a recorder would.
"""

from __future__ import annotations

import json
from pathlib import Path

from mcap.well_known import MessageEncoding, SchemaEncoding
from mcap.writer import Writer
from muscle_mem_ros.ros.bags.reader import BagError, read_bag
from muscle_mem_ros.store import SqliteStore
import pytest
from test_learn_bag_errors import FIB, fib_call, JOINTS, joints, MS, run, T0


def _write(path: Path, messages: list[tuple[str, str, bytes, int]], chunk: int = 400) -> None:
    """Write messages in the order given (not sorted), in chunks of about ``chunk`` bytes."""
    with open(path, 'wb') as stream:
        writer = Writer(stream, chunk_size=chunk)
        writer.start(profile='ros2', library='test')
        channels: dict[str, int] = {}
        for index, (topic, type_name, data, when) in enumerate(messages):
            if topic not in channels:
                schema = writer.register_schema(type_name, SchemaEncoding.ROS2, b'')
                channels[topic] = writer.register_channel(topic, MessageEncoding.CDR, schema)
            writer.add_message(channels[topic], log_time=when, publish_time=when, data=data,
                               sequence=index)
        writer.finish()


def _backlogged() -> list[tuple[str, str, bytes, int]]:
    """Return a goal from 510 to 810 ms, the joints received from 300 to 1100 ms after it."""
    before = [joints(t) for t in range(0, 300, 20)]
    backlog = [joints(t, 0.1 if t > 800 else 0.0) for t in range(300, 1100, 20)]
    after = [joints(t, 0.1) for t in range(1100, 2000, 20)]
    return before + fib_call(510, 810) + backlog + after


def test_messages_are_handed_on_in_receive_order_across_chunks(tmp_path):
    _write(tmp_path / 'b.mcap', _backlogged())
    seen: list[int] = []
    bag = read_bag(tmp_path / 'b.mcap', on_message=lambda topic, when, *_: seen.append(when))
    assert len(seen) == 100 + 4
    assert seen == sorted(seen)
    assert bag.topic(JOINTS).count == 100
    assert bag.start == T0 and bag.end == T0 + 1980 * MS


def test_a_step_whose_sensors_were_written_late_has_its_own_snapshots(tmp_path, capsys):
    _write(tmp_path / 'b.mcap', _backlogged())
    code, out, err = run(tmp_path, tmp_path / 'b.mcap', capsys)
    assert code == 0, err
    (task,) = json.loads(out)['tasks']
    assert task['steps'] == 1 and not task['skipped']
    with SqliteStore(path=str(tmp_path / 'cache.db'), read_only=True) as store:
        (info,) = store.trajectories(task='t')
        (node,) = store.path(info.id)
        assert node.step.tool == FIB
        assert node.step.pre.features['joints'] == (0.0,)
        assert node.step.pre.stamps['joints'] == pytest.approx(T0 * 1e-9 + 0.5, abs=1e-6)
        assert node.step.post.features['joints'] == (0.1,)
        assert node.step.post.stamps['joints'] == pytest.approx(T0 * 1e-9 + 0.82, abs=1e-6)


def test_a_topic_written_back_in_time_is_still_refused(tmp_path):
    messages = _backlogged()
    messages.append(joints(100))  # one topic's own clock going backwards in the file
    _write(tmp_path / 'b.mcap', messages)
    with pytest.raises(BagError, match=f'clock goes backwards on {JOINTS}'):
        read_bag(tmp_path / 'b.mcap')
