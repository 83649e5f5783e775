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

"""The page's handlers over HTTP (no browser): who gets in, which forms are taken, the hook."""

from __future__ import annotations

from dataclasses import replace
import html
import http.client
import json
import re
import threading

from muscle_mem_ros.cli.app import main
from muscle_mem_ros.errors import ConfigError
from muscle_mem_ros.store import SqliteStore
from muscle_mem_ros.web import PageServer, ServeOptions
import pytest
from web_helpers import build_web_store, params_file, serving


@pytest.fixture(scope='module')
def store(tmp_path_factory):
    return build_web_store(tmp_path_factory.mktemp('web') / 'cache.db')


@pytest.fixture
def fresh(tmp_path):
    return build_web_store(tmp_path / 'cache.db')


def request(server, method, path, *, body=None, headers=None):
    conn = http.client.HTTPConnection('127.0.0.1', server.server_address[1], timeout=10)
    port = server.server_address[1]
    sent = {'Host': f'127.0.0.1:{port}', **(headers or {})}
    conn.request(method, path, body=body, headers={k: v for k, v in sent.items() if v})
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    return response, text


def form_fields(page: str, form_id: str) -> dict[str, str]:
    form = re.search(rf'<form[^>]*id="{form_id}".*?</form>', page, re.S).group(0)
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form))


def post(server, path, fields, *, origin='same'):
    port = server.server_address[1]
    origin = f'http://127.0.0.1:{port}' if origin == 'same' else origin
    from urllib.parse import urlencode
    return request(server, 'POST', path, body=urlencode(fields), headers={
        'Origin': origin, 'Content-Type': 'application/x-www-form-urlencoded'})


def test_the_task_list_names_every_task_and_links_each(store):
    with serving(store) as server:
        response, page = request(server, 'GET', '/')
    assert response.status == 200
    assert re.findall(r'class="task" href="/task\?name=(\w+)"', page) == [
        'count', 'pick', 'watch', 'wave']
    assert response.getheader('Content-Security-Policy').startswith("default-src 'none'")


def test_an_unknown_task_or_page_is_404_naming_it_and_a_bad_id_400(store):
    with serving(store) as server:
        response, page = request(server, 'GET', '/task?name=nope')
        assert response.status == 404 and 'unknown task' in page and 'pick' in page
        response, _ = request(server, 'GET', '/nowhere')
        assert response.status == 404
        response, _ = request(server, 'GET', '/trajectory?id=999')
        assert response.status == 404
        response, _ = request(server, 'GET', '/trajectory?id=one')
        assert response.status == 400


def test_a_bind_off_loopback_needs_a_token_and_says_so(store, capsys):
    with pytest.raises(ConfigError, match='--token'):
        PageServer(ServeOptions(store=str(store), host='0.0.0.0', port=0))
    assert main(['serve', str(store), '--host', '0.0.0.0', '--port', '0']) == 1
    err = capsys.readouterr().err
    assert 'not a loopback address' in err and '--token TOKEN' in err
    server = PageServer(ServeOptions(store=str(store), host='0.0.0.0', port=0, token='s3cret'))
    server.server_close()


def test_with_a_token_every_request_needs_it(store):
    with serving(store, token='s3cret') as server:
        response, page = request(server, 'GET', '/')
        assert response.status == 401 and '?token=' in page
        response, _ = request(server, 'GET', '/?token=wrong')
        assert response.status == 401
        response, _ = request(server, 'GET', '/task?name=pick&token=s3cret')
        assert response.status == 303
        assert response.getheader('Location') == '/task?name=pick'
        cookie = response.getheader('Set-Cookie')
        assert cookie.startswith('mm_token=s3cret;') and 'HttpOnly' in cookie
        response, _ = request(server, 'GET', '/', headers={'Cookie': 'mm_token=s3cret'})
        assert response.status == 200
        response, _ = request(server, 'GET', '/', headers={'Authorization': 'Bearer s3cret'})
        assert response.status == 200


def test_a_host_that_is_not_this_page_is_refused(store):
    with serving(store) as server:
        response, page = request(server, 'GET', '/', headers={
            'Host': f'evil.example:{server.server_address[1]}'})
        assert response.status == 403 and 'is not this page' in page
        response, _ = request(server, 'GET', '/', headers={
            'Host': f'localhost:{server.server_address[1]}'})
        assert response.status == 200


def test_forms_from_elsewhere_or_without_their_token_are_refused(fresh):
    with serving(fresh) as server:
        _, page = request(server, 'GET', '/task?name=count')
        fields = {**form_fields(page, 'approve-0'), 'who': 'mallory'}
        response, text = post(server, '/approve', fields, origin='http://evil.example')
        assert response.status == 403 and 'cross-site' in text
        response, text = post(server, '/approve', fields, origin=None)
        assert response.status == 403 and 'no Origin or Referer' in text
        response, text = post(server, '/approve', {**fields, 'csrf': 'abc.def'})
        assert response.status == 403 and 'CSRF' in text
        # a token made for the task's form does not approve a trajectory
        response, text = post(server, '/approve', {**fields, 'trajectory': '15'})
        assert response.status == 403 and 'CSRF' in text
    with SqliteStore(path=fresh, read_only=True) as db:
        assert db.approvals() == []


def test_an_approval_needs_a_name_and_covers_what_the_page_showed(fresh):
    with serving(fresh) as server:
        _, page = request(server, 'GET', '/task?name=count')
        fields = form_fields(page, 'approve-0')
        response, text = post(server, '/approve', {**fields, 'who': '  '})
        assert response.status == 400 and 'needs the name' in text
        with SqliteStore(path=fresh) as db:  # learned after the page was drawn
            (info,) = db.trajectories(task='count')
            step = db.node(info.node_ids[0]).step
            db.add_trajectory(task='count', variant=info.variant, params_json='{"n":6}',
                              steps=[replace(step, payload=step.payload + b'\0')])
        response, text = post(server, '/approve', {**fields, 'who': 'carol'})
        assert response.status == 409 and 'changed since this page was shown' in text
        with SqliteStore(path=fresh, read_only=True) as db:
            assert db.approvals() == []
        _, page = request(server, 'GET', '/task?name=count')
        response, text = post(server, '/approve', {**form_fields(page, 'approve-0'),
                                                   'who': 'carol'})
        assert response.status == 200 and 'approved by carol' in text
        _, page = request(server, 'GET', '/task?name=count')
        assert 'carol approved the task' in page
        response, text = post(server, '/revoke', form_fields(page, 'revoke-0'))
        assert response.status == 200
        assert "revoked the approval of task 'count'" in html.unescape(text)
    with SqliteStore(path=fresh, read_only=True) as db:
        assert db.approvals() == []


def test_read_only_shows_no_form_and_refuses_posts(fresh):
    with serving(fresh, read_only=True) as server:
        _, page = request(server, 'GET', '/task?name=count')
        assert '<form' not in page and '<button' not in page
        response, text = post(server, '/approve', {'task': 'count', 'who': 'carol'})
        assert response.status == 403 and 'read-only' in text


def test_the_trajectory_page_draws_the_tube_only_with_the_params_file(store, tmp_path):
    with serving(store) as server:
        _, page = request(server, 'GET', '/trajectory?id=16')
        assert 'class="trace"' in page and 'class="tube"' not in page and 'no tube' in page
    with serving(store, params=params_file(tmp_path)) as server:
        _, page = request(server, 'GET', '/trajectory?id=16&mark=0.4')
    assert page.count('class="tube"') == 3 and 'class="mark"' in page
    assert page.count('<img class="thumb"') == 2


def test_an_event_published_to_the_hub_reaches_an_open_stream(store):
    with serving(store) as server:
        server.hub.source = 'test'
        got = []
        conn = http.client.HTTPConnection('127.0.0.1', server.server_address[1], timeout=10)
        conn.request('GET', '/events', headers={'Host': f'127.0.0.1:{server.server_address[1]}'})
        response = conn.getresponse()
        assert response.getheader('Content-Type') == 'text/event-stream'

        def read():
            got.append(response.fp.readline())
        reader = threading.Thread(target=read)
        reader.start()
        server.hub.publish({'kind': 'miss', 'text': 'no child passed', 'task': 'pick'})
        reader.join(5.0)
        conn.close()
        assert got and json.loads(got[0].decode()[len('data: '):])['text'] == 'no child passed'
        _, page = request(server, 'GET', '/')
        assert 'id="events-log"' in page and 'no child passed' in page
