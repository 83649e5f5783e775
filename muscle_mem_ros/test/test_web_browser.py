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
The operator's page in a real browser (headless chromium through Selenium).

The tree renders as a picture of its learned steps; a plot draws the recorded trace (its
points, turned back through the plot's scale, are the trace's numbers) inside its tube; an
approval made on the page is the same record as ``muscle-mem approve`` makes; one without a
name is refused; a form another site sends is refused; read-only shows no buttons.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import shutil
import threading

from muscle_mem_ros.cli.app import main
from muscle_mem_ros.cli.inventory import task_tree
from muscle_mem_ros.store import SqliteStore
import pytest
from web_helpers import browser, build_web_store, JOINTS, params_file, serving, TIMES, \
    TOLERANCE

By = pytest.importorskip('selenium.webdriver.common.by',
                         reason='selenium is not installed (pip install selenium)').By
WebDriverWait = pytest.importorskip('selenium.webdriver.support.ui').WebDriverWait


@pytest.fixture(scope='module')
def chromium():
    with browser() as driver:
        yield driver


@pytest.fixture
def store(tmp_path):
    return build_web_store(tmp_path / 'cache.db')


def answer(driver) -> str:
    """Return the text of the page a form's submission led to (waiting for it to load)."""
    return WebDriverWait(driver, 10).until(
        lambda d: d.find_elements(By.ID, 'message'))[0].text


def count_nodes(entries) -> int:
    return sum(1 + count_nodes(e['children']) for e in entries)


def test_the_tree_renders_as_a_picture_of_its_steps(chromium, store):
    with SqliteStore(path=store, read_only=True) as db:
        trees = task_tree(db, 'pick')
    with serving(store) as server:
        chromium.get(server.url)
        chromium.find_element(By.LINK_TEXT, 'pick').click()
        (svg,) = chromium.find_elements(By.CSS_SELECTOR, 'svg.tree')
        nodes = svg.find_elements(By.CSS_SELECTOR, 'g.node')
        assert len(nodes) == count_nodes(trees[0]['steps']) > 3
        assert nodes[0].find_element(By.CSS_SELECTOR, 'circle').rect['width'] > 0
        ends = svg.find_elements(By.CSS_SELECTOR, 'text.end')
        assert len(ends) == len(trees[0]['trajectories'])
        ends[0].click()  # an end of the tree opens its trajectory
        WebDriverWait(chromium, 10).until(lambda d: d.find_element(
            By.TAG_NAME, 'h1').text.startswith('trajectory '))


def test_a_bound_step_is_drawn_with_its_binding(chromium, store):
    with serving(store) as server:
        chromium.get(server.url + 'task?name=count')
        (node,) = chromium.find_elements(By.CSS_SELECTOR, 'svg.tree g.node.bound')
        assert 'order <- param:n' in node.find_element(By.CSS_SELECTOR, 'text.binding').text


def test_a_plot_draws_the_recorded_trace_inside_its_tube(chromium, store, tmp_path):
    with serving(store, params=params_file(tmp_path)) as server:
        chromium.get(server.url + 'task?name=watch')
        chromium.find_element(By.CSS_SELECTOR, 'a.trajectory').click()
        (svg,) = WebDriverWait(chromium, 10).until(lambda d: d.find_elements(
            By.CSS_SELECTOR, 'svg.plot[data-series="joints"]'))
        scale = {k: float(svg.get_attribute(f'data-{k}')) for k in (
            't0', 't1', 'v0', 'v1', 'left', 'top', 'width', 'height')}
        lines = svg.find_elements(By.CSS_SELECTOR, 'polyline.trace')
        assert len(lines) == len(JOINTS[0])
        for line in lines:
            element = int(line.get_attribute('data-element'))
            points = [tuple(map(float, p.split(','))) for p in
                      line.get_attribute('points').split()]
            assert len(points) == len(TIMES)
            for (x, y), t, row in zip(points, TIMES, JOINTS):
                time = scale['t0'] + (x - scale['left']) / scale['width'] * (
                    scale['t1'] - scale['t0'])
                value = scale['v0'] + (scale['top'] + scale['height'] - y) / scale['height'] * (
                    scale['v1'] - scale['v0'])
                assert time == pytest.approx(t, abs=1e-3)
                assert value == pytest.approx(row[element], abs=1e-3)
        tubes = svg.find_elements(By.CSS_SELECTOR, 'polygon.tube')
        assert [float(t.get_attribute('data-tolerance')) for t in tubes] == [TOLERANCE] * 3
        assert tubes[0].rect['height'] > 0  # drawn, not only in the markup
        assert len(chromium.find_elements(By.CSS_SELECTOR, 'img.thumb')) == 2


def approve_on_page(chromium, server, path: str, who: str) -> str:
    chromium.get(server.url + path)
    form = chromium.find_element(By.CSS_SELECTOR, 'form[action="/approve"]')
    form.find_element(By.NAME, 'who').send_keys(who)
    form.find_element(By.CSS_SELECTOR, 'button[type="submit"]').click()
    return answer(chromium)


def fields(approval):
    return (approval.task, approval.trajectory_id, approval.who, approval.covers,
            approval.bindings, approval.declared)


def test_an_approval_on_the_page_is_the_record_the_cli_makes(chromium, store, tmp_path):
    params = params_file(tmp_path)
    by_cli = shutil.copy(store, tmp_path / 'cli.db')
    assert main(['approve', str(by_cli), 'count', '--who', 'carol', '--params',
                 str(params)]) == 0
    assert main(['approve', str(by_cli), 'pick', '--trajectory', '3', '--who', 'carol',
                 '--params', str(params)]) == 0
    with serving(store, params=params) as server:
        text = approve_on_page(chromium, server, 'task?name=count', 'carol')
        assert text.startswith("task 'count' approved by carol: covers trajectory")
        assert 'order <- param:n' in text
        approve_on_page(chromium, server, 'trajectory?id=3', 'carol')
    with SqliteStore(path=by_cli, read_only=True) as cli, \
            SqliteStore(path=store, read_only=True) as page:
        made = page.approvals()
        assert [fields(a) for a in made] == [fields(a) for a in cli.approvals()]
    assert made[0].bindings and made[0].covers


def test_an_approval_without_a_name_is_refused(chromium, store):
    with serving(store) as server:
        text = approve_on_page(chromium, server, 'task?name=count', '')
    assert 'needs the name of the person who approves' in text
    with SqliteStore(path=store, read_only=True) as db:
        assert db.approvals() == []


class _Elsewhere(BaseHTTPRequestHandler):
    """Another site: a page whose form posts to the operator's page."""

    target = ''

    def do_GET(self):  # noqa: N802
        body = (f'<form id="f" method="post" action="{self.target}approve">'
                '<input name="task" value="count"><input name="trajectory" value="0">'
                '<input name="who" value="mallory"><input name="csrf" value="x.y">'
                '<button id="go" type="submit">go</button></form>').encode()
        self.send_response(200)
        self.send_header('Content-Type', 'text/html')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_form_from_another_origin_is_refused(chromium, store):
    with serving(store) as server:
        _Elsewhere.target = server.url
        other = ThreadingHTTPServer(('127.0.0.1', 0), _Elsewhere)
        threading.Thread(target=other.serve_forever, daemon=True).start()
        try:
            chromium.get(f'http://127.0.0.1:{other.server_address[1]}/')
            chromium.find_element(By.ID, 'go').click()
            text = answer(chromium)
        finally:
            other.shutdown()
            other.server_close()
    assert 'cross-site requests may not approve' in text
    with SqliteStore(path=store, read_only=True) as db:
        assert db.approvals() == []


def test_read_only_shows_no_buttons(chromium, store):
    with serving(store, read_only=True) as server:
        for path in ('', 'task?name=count', 'trajectory?id=1'):
            chromium.get(server.url + path)
            assert chromium.find_elements(By.TAG_NAME, 'h1')
            assert chromium.find_elements(By.TAG_NAME, 'button') == []
            assert chromium.find_elements(By.TAG_NAME, 'form') == []
