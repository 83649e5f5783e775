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
``serve --attach`` without a browser: a node's CacheEvents reach the page's ``/events`` stream.

A real rclpy publisher stands in for the cache node on ``/<node>/events`` (with the node's QoS:
reliable, transient local); the page's side is
the one ``muscle-mem serve --attach`` runs (``ros/execution/eventfeed.attached`` feeding an
``EventHub`` served by a ``PageServer``), read over HTTP as a browser's EventSource would.
"""

from __future__ import annotations

from collections.abc import Iterator
import contextlib
import http.client
import json
import time
import uuid

from builtin_interfaces.msg import Time
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.ros.execution.eventfeed import attached, event_data, events_topic
from muscle_mem_ros.ros.execution.events import EVENTS_QOS
from muscle_mem_ros.web import PageServer, ServeOptions
from muscle_mem_ros.web.events import EventHub
from node_helpers import wait_until
import pytest
import rclpy
from web_helpers import build_web_store

DETAIL = ('check during step 0 (goto) failed: sensor tag[0] was 0.912 at 0.81 s into the step, '
          '0.27 off the recorded path (nearest on it 0.642, tolerance 0.03)')


@pytest.fixture(scope='module')
def store(tmp_path_factory):
    return build_web_store(tmp_path_factory.mktemp('attach') / 'cache.db')


@pytest.fixture
def publisher() -> Iterator[tuple[str, object]]:
    """Stand in for a cache node: a CacheEvent publisher on ``/<node>/events``."""
    context = rclpy.Context()
    rclpy.init(context=context)
    name = f'mm_{uuid.uuid4().hex[:8]}'
    node = rclpy.create_node(f'{name}_fake', context=context, start_parameter_services=False)
    try:
        yield name, node.create_publisher(CacheEvent, events_topic(name), EVENTS_QOS)
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)


@contextlib.contextmanager
def page(store, node: str) -> Iterator[PageServer]:
    """``serve STORE --attach NODE`` in this process: the feed, the hub, the server."""
    hub = EventHub(source=f'node /{node}')
    server = PageServer(ServeOptions(store=str(store), host='127.0.0.1', port=0), hub=hub)
    server.start()
    try:
        with attached(node, hub.publish):
            yield server
    finally:
        server.stop()


def stamp(at: float) -> Time:
    return Time(sec=int(at), nanosec=int((at % 1) * 1e9))


def trip(at: float) -> CacheEvent:
    return CacheEvent(stamp=stamp(at), type=CacheEvent.CHECK_FAILED, task='fetch', step=0,
                      trajectory_id=2, sensor='tag', deviation=0.27, tolerance=0.03,
                      detail=DETAIL, element=0, value=0.912, expected=0.642,
                      time_into_step=0.81)


def read_events(port: int, count: int, send) -> list[dict]:
    """Open /events, call ``send`` once the stream answered, return the next ``count`` events."""
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
    conn.request('GET', '/events', headers={'Host': f'127.0.0.1:{port}'})
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader('Content-Type') == 'text/event-stream'
    send()
    events = []
    while len(events) < count:
        line = response.fp.readline().decode()
        assert line, 'the stream ended'
        if line.startswith('data: '):
            events.append(json.loads(line[len('data: '):]))
    conn.close()
    return events


def test_a_trip_on_the_nodes_topic_is_on_the_stream_with_its_link(store, publisher):
    name, pub = publisher
    with page(store, name) as server:
        assert wait_until(lambda: pub.get_subscription_count() >= 1, 10.0)
        at = time.time()
        sent = [trip(at),
                CacheEvent(stamp=stamp(at + 0.01), type=CacheEvent.STOPPED, task='fetch',
                           step=0, trajectory_id=2, detail='at rest after 120 ms (odom)'),
                CacheEvent(stamp=stamp(at + 0.02), type=CacheEvent.HANDOFF, task='fetch',
                           step=0, detail='the agent resumes at step 0')]
        received = read_events(server.server_address[1], 3,
                               lambda: [pub.publish(m) for m in sent])
        arrived = time.time()
        check, rest, hand = received
        assert check['kind'] == 'check_failed' and check['text'] == f'fetch step 0: {DETAIL}'
        assert (check['trajectory'], check['step'], check['mark']) == (2, 0, 0.81)
        assert check['at'] == pytest.approx(at, abs=1e-6)  # the node's stamp, not arrival
        assert check['sensor'] == 'tag' and check['deviation'] == pytest.approx(0.27)
        assert 0 <= arrived - check['at'] < 1.0
        assert rest['kind'] == 'at_rest' and 'mark' not in rest
        assert hand['kind'] == 'hand_back' and 'trajectory' not in hand
        conn = http.client.HTTPConnection('127.0.0.1', server.server_address[1], timeout=10)
        conn.request('GET', '/', headers={'Host': f'127.0.0.1:{server.server_address[1]}'})
        first = conn.getresponse().read().decode()
        conn.close()
    # a page opened later draws the kept events, the trip linked to its moment
    assert f'live: node /{name}' in first
    assert 'href="/trajectory?id=2&amp;mark=0.81#step-0"' in first
    assert wait_until(lambda: pub.get_subscription_count() == 0, 5.0), \
        'the subscription outlived the page'


def test_a_page_attached_late_starts_with_the_nodes_last_events(store, publisher):
    name, pub = publisher
    at = time.time()
    early = [CacheEvent(stamp=stamp(at + i * 0.01), type=CacheEvent.MISS, task=f'early{i}',
                        step=-1, detail='nothing learned') for i in range(3)]
    for message in early:  # before anything subscribed: kept by the publisher
        pub.publish(message)
    with page(store, name) as server:
        received = read_events(server.server_address[1], 4,
                               lambda: pub.publish(trip(at + 0.1)))
    assert [e['task'] for e in received] == ['early0', 'early1', 'early2', 'fetch']
    assert [e['kind'] for e in received] == ['miss'] * 3 + ['check_failed']


def test_every_kind_of_decision_gets_its_name_and_reason():
    names = {}
    for kind, detail in ((CacheEvent.MISS, 'no trajectory matches: tag 0.4 off'),
                         (CacheEvent.HIT, 'replayed 4 steps'),
                         (CacheEvent.STOPPED, 'cancel accepted by the server'),
                         (CacheEvent.STOPPED, 'at rest after 80 ms'),
                         (CacheEvent.HANDOFF, 'resume at 1'),
                         (CacheEvent.BRANCH_LEARNED, 'stored as trajectory 3')):
        data = event_data(CacheEvent(type=kind, task='t', step=-1, detail=detail))
        names[data['kind']] = data
        assert data['text'] == f't: {detail}' and 'step' not in data
        json.dumps(data, allow_nan=False)
    assert list(names) == ['miss', 'replay', 'stop', 'at_rest', 'hand_back', 'branch_learned']
    missing = event_data(CacheEvent(type=CacheEvent.CHECK_FAILED, task='t', step=1,
                                    sensor='tag', deviation=float('inf'), tolerance=0.03,
                                    time_into_step=-1.0, detail='tag: stale'))
    assert missing['deviation'] is None and 'mark' not in missing  # a pre-check: no moment
    json.dumps(missing, allow_nan=False)
    with pytest.raises(ValueError, match='node name'):
        events_topic('')
    assert events_topic('/robot1/muscle_mem/') == '/robot1/muscle_mem/events'
