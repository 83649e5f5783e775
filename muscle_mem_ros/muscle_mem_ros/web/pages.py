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
The page's HTML: the layout, the task list, a task's page, and the answers to a form.

Plain HTML written here with every value escaped (:func:`html.escape`), a small inline
style sheet, and a few lines of script for the live log only (an ``EventSource`` on
``/events``). No framework, no template engine, nothing fetched from elsewhere: the page
works on a robot's closed network. A trajectory's page is :mod:`.trajectorypage`.

Forms are rendered only when the server takes them (not ``--read-only``): each carries a
CSRF token made for what it does (:meth:`.security.Guard.form_token`) and, for an approval,
the fingerprint of what the page shows it would cover (:mod:`.approving`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import datetime
from html import escape
import json
from typing import Any
from urllib.parse import urlencode

from .approving import Prospect
from .treesvg import tree_svg
from ..records import TaskStats

__all__ = ['approval_form', 'event_href', 'FormTokens', 'layout', 'message_page', 'purpose',
           'stamp', 'task_page', 'task_url', 'tasks_page', 'TRUST_HEAD', 'trajectory_url',
           'trust_cells']

FormTokens = Callable[[str], str]
"""Makes a form's CSRF token for a purpose (``approve:task:0``); None where read-only."""

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.2em 2em;color:#222}
a{color:#0a58ca}table{border-collapse:collapse;margin:.6em 0}
th,td{border-bottom:1px solid #ddd;padding:3px 9px;text-align:left;vertical-align:top}
td.n,th.n{text-align:right}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.4em}
.note{color:#666}.held{color:#b02a37}.ok{color:#146c43}
form.act{border:1px solid #ccc;padding:.5em .8em;margin:.6em 0;display:inline-block}
svg.tree .edge{fill:none;stroke:#999}svg.tree .node circle,svg.tree .node rect{fill:#4a7bd0}
svg.tree .node.bound circle,svg.tree .node.bound rect{fill:#fff;stroke:#e07b00;stroke-width:4}
svg.tree text{font-size:11px}svg.tree .binding{fill:#a65a00}svg.tree .end{fill:#0a58ca}
svg.plot .area{fill:#fafafa;stroke:#ccc}svg.plot .trace{fill:none;stroke-width:1.5}
svg.plot .tube{opacity:.18;stroke:none}svg.plot text{font-size:10px}
svg.plot .mark{stroke:#b02a37;stroke-width:2}
img.thumb{image-rendering:pixelated;width:192px;border:1px solid #ccc}
figure.thumb{display:inline-block;margin:2px 8px 2px 0}figure.series{margin:.4em 0}
#events li{font-family:monospace}
"""

_EVENTS_SCRIPT = """
(function(){var log=document.getElementById('events-log');if(!log||!window.EventSource)return;
var es=new EventSource('/events');es.onmessage=function(m){
var arrived=(performance.timeOrigin+performance.now())/1000;var e=JSON.parse(m.data);
var li=document.createElement('li');li.className='event '+e.kind;
li.dataset.at=e.at;li.dataset.arrived=arrived;
var t=new Date(e.at*1000).toLocaleTimeString();var text=t+' '+e.kind+': '+(e.text||'');
var mark=e.mark!=null?e.mark:e.progress;
if(e.trajectory){var a=document.createElement('a');a.textContent=text;
a.href='/trajectory?id='+e.trajectory+(mark!=null?'&mark='+mark:'')+
(e.step!=null?'#step-'+e.step:'');li.appendChild(a);}else{li.textContent=text;}
log.insertBefore(li,log.firstChild);};})();
"""
"""The live log's script: each event a line, linked to its step's plots with the moment
marked; ``data-at`` is the event's stamp and ``data-arrived`` when the page received it
(Unix seconds, the page's clock: the same host's for a page on loopback)."""


def event_href(event: dict[str, Any]) -> str | None:
    """Return where an event links (as the live log's script does), or None."""
    if not event.get('trajectory'):
        return None
    mark = event.get('mark', event.get('progress'))
    return (f'/trajectory?id={int(event["trajectory"])}'
            + (f'&mark={float(mark)}' if mark is not None else '')
            + (f'#step-{int(event["step"])}' if event.get('step') is not None else ''))


def stamp(at: float | None) -> str:
    """Return a Unix time as local 'YYYY-MM-DD HH:MM:SS' ('-': none)."""
    if not at:
        return '-'
    return datetime.datetime.fromtimestamp(at).strftime('%Y-%m-%d %H:%M:%S')


def task_url(task: str, page: int = 0) -> str:
    """Return the URL of a task's page."""
    return '/task?' + urlencode({'name': task, **({'page': page} if page else {})})


def trajectory_url(trajectory_id: int) -> str:
    """Return the URL of a trajectory's page."""
    return f'/trajectory?id={trajectory_id}'


def layout(title: str, body: str, *, events: str | None = None,
           recent: Sequence[dict[str, Any]] = ()) -> str:
    """
    Return a whole page.

    :param title: The page's title.
    :param body: Its HTML.
    :param events: What live events come from (None: not attached: no live log).
    :param recent: The events kept, for the first paint of the log.
    """
    log = ''
    if events is not None:
        items = ''.join(_event_item(e) for e in reversed(recent))
        log = (f'<section id="events"><h2>live: {escape(events)}</h2>'
               f'<ul id="events-log">{items}</ul></section>'
               f'<script>{_EVENTS_SCRIPT}</script>')
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width">'
            f'<title>{escape(title)} - muscle-mem</title><style>{_STYLE}</style></head>'
            f'<body><nav><a href="/">tasks</a></nav>{body}{log}</body></html>')


def _event_item(event: dict[str, Any]) -> str:
    """Return one kept event as the live log draws it (the first paint)."""
    text = escape(f'{stamp(event.get("at"))} {event.get("kind")}: {event.get("text", "")}')
    href = event_href(event)
    return (f'<li class="event {escape(str(event.get("kind")))}" '
            f'data-at="{float(event.get("at") or 0)}">'
            + (f'<a href="{escape(href)}">{text}</a>' if href else text) + '</li>')


def message_page(title: str, text: str, *, back: str = '/') -> str:
    """Return the answer to a form: what was done, or why not."""
    return layout(title, f'<h1>{escape(title)}</h1><p id="message">{escape(text)}</p>'
                         f'<p><a id="back" href="{escape(back)}">back</a></p>')


def tasks_page(tasks: Sequence[TaskStats], *, store: str, read_only: bool,
               events: str | None = None, recent: Sequence[dict[str, Any]] = ()) -> str:
    """Return the task list: the first page, drawn from the store's task counters only."""
    rows = ''.join(
        f'<tr><td><a class="task" href="{escape(task_url(t.name))}">{escape(t.name)}</a></td>'
        f'<td class="n">{t.trajectory_count}</td><td class="n">{t.hits}</td>'
        f'<td class="n">{t.misses}</td><td>{stamp(t.last_used)}</td></tr>' for t in tasks)
    mode = ' (read-only)' if read_only else ''
    body = (f'<h1>tasks in {escape(store)}{mode}</h1>'
            f'<table id="tasks"><tr><th>task</th><th class="n">trajectories</th>'
            f'<th class="n">hits</th><th class="n">misses</th><th>last used</th></tr>'
            f'{rows}</table>' if tasks else f'<h1>{escape(store)}</h1><p>no tasks learned</p>')
    return layout('tasks', body, events=events, recent=recent)


def approval_form(tokens: FormTokens | None, what: Prospect, *, approved: bool,
                  back: str) -> str:
    """Return the approve (and revoke) forms of a task or trajectory ('' read-only)."""
    if tokens is None:
        return ''
    task, tid = what.task, what.trajectory_id
    hidden = (f'<input type="hidden" name="task" value="{escape(task)}">'
              f'<input type="hidden" name="trajectory" value="{tid}">'
              f'<input type="hidden" name="back" value="{escape(back)}">')
    form = (f'<form class="act" method="post" action="/approve" id="approve-{tid}">{hidden}'
            f'<input type="hidden" name="shown" value="{what.fingerprint}">'
            f'<input type="hidden" name="csrf" value="{tokens(purpose("approve", task, tid))}">'
            f'<p>Approving {"this trajectory" if tid else "the task"} '
            f'{escape(what.text())}.</p>'
            f'<label>your name <input name="who" autocomplete="name"></label> '
            f'<button type="submit" name="do" value="approve">approve</button></form>')
    if approved:
        form += (f'<form class="act" method="post" action="/revoke" id="revoke-{tid}">{hidden}'
                 f'<input type="hidden" name="csrf" '
                 f'value="{tokens(purpose("revoke", task, tid))}">'
                 f'<button type="submit" name="do" value="revoke">revoke the approval of '
                 f'{"this trajectory" if tid else "the task"}</button></form>')
    return form


def purpose(action: str, task: str, trajectory_id: int) -> str:
    """Return what one form does, as its CSRF token is made for (``approve`` of a task)."""
    return json.dumps([action, task, trajectory_id])


def trust_cells(r: dict[str, Any]) -> str:
    """Return a trust row's cells under :data:`TRUST_HEAD`."""
    approved = escape(r['approved_by'] or '-') + (' (held)' if r['approval_held'] else '')
    booked = sum(r[k] for k in ('completed', 'false_hits', 'canceled', 'handed_back'))
    held = f'<span class="held">stepped back: {escape(r["held"])}</span>' if r['held'] else ''
    return (f'<td class="n">{r["shadow_runs"]}</td><td class="n">{r["shadow_agreed"]}</td>'
            f'<td class="n">{booked}</td><td class="n">{r["completed"]}</td>'
            f'<td class="n">{r["false_hits"]}</td><td class="n">{r["canceled"]}</td>'
            f'<td class="n">{r["handed_back"]}</td><td>{approved}</td>'
            f'<td>{stamp(r["approved_at"])}</td><td>{held}</td>')


TRUST_HEAD = ('<tr><th class="n">shadow runs</th><th class="n">agreed</th>'
              '<th class="n">replays</th><th class="n">completed</th>'
              '<th class="n">false hits</th><th class="n">canceled</th>'
              '<th class="n">handed back</th><th>approved by</th><th>approved</th>'
              '<th>step-back</th></tr>')
"""The trust table's header (:func:`trust_cells`): what ``muscle-mem trust`` lists."""


def task_page(data: dict[str, Any], tokens: FormTokens | None, *, events: str | None = None,
              recent: Sequence[dict[str, Any]] = ()) -> str:
    """Return a task's page: its trees as pictures, its trust table, bindings, approvals."""
    task = data['task']
    parts = [f'<h1>task {escape(task)}</h1>']
    for tree in data['trees']:
        parts.append(f'<h2>params {escape(tree["params"])} '
                     f'({len(tree["trajectories"])} trajectories)</h2>'
                     f'<div class="tree-picture">{tree_svg(tree, trajectory_url)}</div>')
    head = TRUST_HEAD.replace('<tr>', '<tr><th>trajectory</th><th>body</th>', 1)
    rows = ''.join(f'<tr><td><a class="trajectory" href="{trajectory_url(r["trajectory"])}">'
                   f'{r["trajectory"]}</a></td><td>{escape(r["body"])}'
                   f'{"<br>from " + escape(r["source"]) if r["source"] else ""}</td>'
                   f'{trust_cells(r)}</tr>' for r in data['rows'])
    pages = ''.join(f' <a href="{escape(task_url(task, p))}">{p + 1}</a>' if p != data['page']
                    else f' <b>{p + 1}</b>' for p in range(data['pages']))
    parts.append(f'<h2>trust ({data["count"]} trajectories)</h2><table id="trust">{head}{rows}'
                 f'</table>' + (f'<p>pages:{pages}</p>' if data['pages'] > 1 else ''))
    parts.extend(f'<p class="held">{escape(r["approval_held"])}</p>' for r in data['rows']
                 if r['approval_held'])
    if data['bindings']:
        parts.append('<h2>inferred bindings (shadow runs that predicted them)</h2><table>'
                     '<tr><th>step</th><th>learned step</th><th>binding</th>'
                     '<th>trajectories</th><th class="n">shadow runs</th>'
                     '<th class="n">agreed</th></tr>' + ''.join(
                         f'<tr><td>{b["step"]}</td><td>{b["node"]}</td>'
                         f'<td>{escape(b["field"])} &lt;- {escape(b["source"] or "?")}</td>'
                         f'<td>{", ".join(map(str, b["trajectories"]))}</td>'
                         f'<td class="n">{b["shadow_runs"]}</td>'
                         f'<td class="n">{b["shadow_agreed"]}</td></tr>'
                         for b in data['bindings']) + '</table>')
    parts.append('<h2>approvals</h2>' + (''.join(
        f'<p class="approval">{escape(a["who"])} approved '
        f'{"trajectory " + str(a["trajectory"]) if a["trajectory"] else "the task"} at '
        f'{stamp(a["at"])}: {escape(a["covers"])}</p>' for a in data['approvals'])
        or '<p class="note">none</p>'))
    parts.append(approval_form(tokens, data['prospect'], approved=data['approved'],
                               back=task_url(task)))
    return layout(f'task {task}', ''.join(parts), events=events, recent=recent)
