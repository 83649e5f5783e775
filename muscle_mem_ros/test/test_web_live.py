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
The live page on a running node, in a real browser: a trip appears within a second.

A cache node in its own process drives mobile_base_helpers' base (its goto drives for about
2 s, watched while it runs); ``muscle-mem serve STORE --attach NODE`` runs in a process of
its own on the node's store, and headless chromium keeps its page open. A task is learned,
then replayed while the tag is knocked aside: the watch trips. The page's log shows the
trip, and its script stamped when the event arrived (``data-arrived``, the page's clock)
beside the node's stamp of the trip (``data-at``), on the same host's clock. Its link
opens the trajectory the replay was on, at the step, with the moment marked on its plots.
"""

from __future__ import annotations

from collections.abc import Iterator
import json
import threading
import time

from action_msgs.msg import GoalStatus
from mobile_base_helpers import BaseHarness, fresh_world
from mobile_helpers import TAG_HOME
from muscle_mem_interfaces.msg import CacheEvent
from node_helpers import wait_until
import pytest
from web_helpers import browser, serve_process

By = pytest.importorskip('selenium.webdriver.common.by',
                         reason='selenium is not installed (pip install selenium)').By
WebDriverWait = pytest.importorskip('selenium.webdriver.support.ui').WebDriverWait

PARAMS = json.dumps({'bin': 1})


@pytest.fixture(scope='module')
def chromium():
    with browser() as driver:
        yield driver


@pytest.fixture(scope='module')
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BaseHarness]:
    h = BaseHarness(tmp=tmp_path_factory.mktemp('web_live'))
    h.start_cache()
    yield h
    h.close()


@pytest.fixture(scope='module')
def served(harness: BaseHarness):
    h = harness
    with serve_process(h.tmp / 'cache.db', '--attach', h.names.node,
                       log=h.tmp / 'serve.log') as served:
        topic = h.names.cache('events')
        assert wait_until(lambda: h.client.count_subscribers(topic) >= 2, 10.0), \
            served.log.read_text()  # the harness's and the page's
        yield served
    assert served.proc.returncode == 0, served.log.read_text()


@pytest.fixture
def world(harness: BaseHarness) -> Iterator[BaseHarness]:
    yield from fresh_world(harness)


def stamp(event: CacheEvent) -> float:
    return event.stamp.sec + event.stamp.nanosec * 1e-9


def test_a_trip_appears_within_a_second_and_links_to_its_marked_moment(world, served,
                                                                       chromium):
    h = world
    chromium.get(served.url)
    heading = WebDriverWait(chromium, 10).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, '#events h2'))[0]
    assert heading.text == f'live: node /{h.names.node}'
    run = h.run_task('web_trip', PARAMS)
    assert run.status == GoalStatus.STATUS_SUCCEEDED and not run.result.cache_hit
    (learned,) = h.wait_events(CacheEvent.BRANCH_LEARNED, 'web_trip')
    h.robot.reset()
    first = len(h.robot.gotos)

    def knock() -> None:
        if h.robot.wait_goto(first, 20.0) is not None:
            time.sleep(0.8)
            h.robot.move_tag((TAG_HOME[0] + 0.3, TAG_HOME[1]))

    thread = threading.Thread(target=knock, daemon=True)
    thread.start()
    h.run_task('web_trip', PARAMS)
    thread.join(10.0)
    (failed,) = h.wait_events(CacheEvent.CHECK_FAILED, 'web_trip')
    assert failed.step == 0 and failed.time_into_step > 0, failed
    assert failed.trajectory_id == learned.trajectory_id
    (line,) = WebDriverWait(chromium, 5).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, '#events-log li.check_failed'))
    at, arrived = (float(line.get_attribute(k)) for k in ('data-at', 'data-arrived'))
    assert at == pytest.approx(stamp(failed), abs=1e-6), 'the node stamps the trip'
    assert 0.0 <= arrived - at < 1.0, f'{arrived - at:.3f} s from the trip to the page'
    assert failed.detail in line.text
    kinds = [li.get_attribute('class') for li in
             chromium.find_elements(By.CSS_SELECTOR, '#events-log li')]
    assert 'event branch_learned' in kinds and 'event miss' in kinds, kinds

    line.find_element(By.TAG_NAME, 'a').click()
    WebDriverWait(chromium, 10).until(lambda d: '/trajectory' in d.current_url)
    mark = float(f'{failed.time_into_step:.4f}')
    assert chromium.current_url.endswith(
        f'/trajectory?id={learned.trajectory_id}&mark={mark:g}#step-0'), chromium.current_url
    step = WebDriverWait(chromium, 10).until(lambda d: d.find_elements(By.ID, 'step-0'))[0]
    marks = step.find_elements(By.CSS_SELECTOR, 'svg.plot line.mark')
    assert marks, "the moment is marked on the step's plots"
    title = marks[0].find_element(By.TAG_NAME, 'title').get_attribute('textContent')
    assert title == f'{mark:.3f} s'
    for svg in step.find_elements(By.CSS_SELECTOR, 'svg.plot'):  # where the time axis says
        t0, t1, left, width = (float(svg.get_attribute(f'data-{k}'))
                               for k in ('t0', 't1', 'left', 'width'))
        for m in svg.find_elements(By.CSS_SELECTOR, 'line.mark'):
            x = left + (mark - t0) / (t1 - t0) * width
            assert float(m.get_attribute('x1')) == pytest.approx(x, abs=0.01)
