#!/usr/bin/env python3
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
SQLite against PostgreSQL as the cache's store, side by side in one run.

Workload: the lookup benchmark's (bench/lookup.py): one task, N learned
trajectories of two steps, 32-float pre snapshots, box tolerance 0.05; one
lookup is ``store.children(root)`` plus ``Matcher.select``. PostgreSQL is a
server this script starts in a temporary directory (``initdb`` + ``pg_ctl``, the
test suite's helper, fsync off as for the tests) on loopback, unless ``--url``
names one.

Figures:
* lookup p50/p99 with the index cached, at each N (target: PostgreSQL within
  1.5x of SQLite), and the first lookup after opening the store;
* commit of a 20-step recording (begin, 20 appends, commit), p50;
* A's commit to B's first possible replay: two PostgreSQL stores (two
  connections, B listening); time from A's commit returning to B's cached root
  children holding the new step (NOTIFY, then B reads the new rows), p50
  (target < 200 ms);
* 4 writer processes committing for ``--seconds`` on each store: commits/s,
  then every commit's trajectory checked present with its steps (lost), and no
  tree node with two children of the same dedupe signature and no trajectory
  stored twice (duplicated).

Usage: bench/store [--sizes 10000,100000] [--seconds 60] [--url postgresql://...]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
from pathlib import Path
import platform
import sys
import tempfile
import time

from _common import cpu_name, ms, pct
from lookup import DIMS, make_step, query, TASK, TOL
from muscle_mem_ros import Matcher, SensorSpec, Snapshot, ToleranceCheck
from muscle_mem_ros.store import open_store, step_signature
import numpy as np

HERE = Path(__file__).resolve().parent


def load(spec: str, n: int, firsts: np.ndarray, seconds: np.ndarray) -> float:
    t0 = time.perf_counter()
    with open_store(spec) as store, store.batch():
        for i in range(n):
            store.add_trajectory(task=TASK, variant='', params_json='{}',
                                 steps=[make_step(i, 0, firsts[i]), make_step(i, 1, seconds[i])])
    return time.perf_counter() - t0


def lookups(specs: dict[str, str], n: int, firsts: np.ndarray,
            count: int) -> dict[str, dict[str, float]]:
    """Measure each store's lookups, alternating between them so load hits both alike."""
    check = ToleranceCheck(sensors=[SensorSpec('joints', (TOL,))])
    rng = np.random.default_rng(7)
    target = n // 2
    out: dict[str, dict[str, float]] = {}
    stores, matchers, expect = {}, {}, {}
    for name, spec in specs.items():
        t0 = time.perf_counter()
        stores[name] = open_store(spec)
        opened = time.perf_counter() - t0
        matchers[name] = Matcher(check=check)
        t0 = time.perf_counter()
        kids = stores[name].children(task=TASK, variant='', parent=None)
        snap = Snapshot(features={'joints': tuple(query(rng, firsts[target]))})
        sel = matchers[name].select(kids, snap)
        out[name] = {'open': opened, 'cold': time.perf_counter() - t0}
        expect[name] = kids[target].id
        assert sel.node is not None and sel.node.id == expect[name]
    times: dict[str, list[float]] = {name: [] for name in specs}
    for _ in range(count):
        snap = Snapshot(features={'joints': tuple(query(rng, firsts[target]))})
        for name, store in stores.items():
            t0 = time.perf_counter()
            sel = matchers[name].select(store.children(task=TASK, variant='', parent=None), snap)
            times[name].append(time.perf_counter() - t0)
            assert sel.node is not None and sel.node.id == expect[name]
    for name, store in stores.items():
        store.close()
        out[name].update(p50=pct(times[name], 50), p99=pct(times[name], 99))
    return out


def commit20(spec: str, count: int) -> float:
    rng = np.random.default_rng(3)
    times = []
    with open_store(spec) as store:
        for t in range(count):
            qs = rng.uniform(-np.pi, np.pi, (20, DIMS))
            steps = [make_step(t, k, qs[k]) for k in range(20)]
            t0 = time.perf_counter()
            rec = store.begin(task='teach', variant='', params_json='{}')
            for s in steps:
                rec.append(s)
            rec.commit()
            times.append(time.perf_counter() - t0)
    return pct(times, 50)


def propagation(url: str, count: int) -> dict[str, float]:
    rng = np.random.default_rng(5)
    a = open_store(url, robot_id='A')
    b = open_store(url, robot_id='B')
    assert b.wait_listening(30.0)
    a.add_trajectory(task='share', variant='', params_json='{}',
                     steps=[make_step(0, 0, rng.uniform(-np.pi, np.pi, DIMS))])
    b.children(task='share', variant='', parent=None)  # B has the task cached
    lags, commits = [], []
    for t in range(count):
        step = make_step(t + 1, 0, rng.uniform(-np.pi, np.pi, DIMS))
        t0 = time.perf_counter()
        info = a.add_trajectory(task='share', variant='', params_json='{}', steps=[step])
        t1 = time.perf_counter()
        leaf = info.node_ids[-1]
        while not any(n.id == leaf for n in b.children(task='share', variant='', parent=None)):
            if time.perf_counter() - t1 > 10.0:
                raise RuntimeError('B never saw the commit')
            time.sleep(0.0005)
        lags.append(time.perf_counter() - t1)
        commits.append(t1 - t0)
    a.close()
    b.close()
    return {'p50': pct(lags, 50), 'p99': pct(lags, 99), 'max': max(lags),
            'commit_p50': pct(commits, 50)}


def _writer(spec: str, index: int, seconds: float, out) -> None:
    rng = np.random.default_rng(100 + index)
    shared = make_step(0, 0, np.zeros(DIMS))
    same = make_step(1, 1, np.ones(DIMS))
    done = []
    with open_store(spec, robot_id=f'w{index}') as store:
        end = time.monotonic() + seconds
        k = 0
        while time.monotonic() < end:
            if k % 5 == 4:
                steps = [shared, same]  # every writer commits this identical run
            else:
                steps = [shared] + [make_step(10_000 * (index + 1) + k, j,
                                              rng.uniform(-np.pi, np.pi, DIMS))
                                    for j in range(3)]
            rec = store.begin(task='writers', variant='', params_json='{}')
            for s in steps:
                rec.append(s)
            info = rec.commit()
            done.append((info.id, [step_signature(s) for s in steps]))
            k += 1
    out.put(done)


def writers(spec: str, seconds: float, count: int = 4) -> dict[str, float]:
    open_store(spec).close()
    ctx = multiprocessing.get_context('spawn')
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(spec, i, seconds, out)) for i in range(count)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + 300) for _ in procs]
    for p in procs:
        p.join()
    wall = time.perf_counter() - t0
    commits = sum(len(r) for r in results)
    expected: dict[tuple[str | None, ...], set[int]] = {}
    for r in results:
        for tid, sigs in r:
            expected.setdefault(tuple(sigs), set()).add(tid)
    lost = dup = 0
    with open_store(spec) as store:
        stored = store.trajectories(task='writers')
        by_id = {t.id: t for t in stored}
        for sigs, ids in expected.items():
            if len(ids) != 1:
                dup += len(ids) - 1
            for tid in ids:
                if tid not in by_id or tuple(step_signature(n.step)
                                             for n in store.path(tid)) != sigs:
                    lost += 1
        dup += len(stored) - len(expected)
        seen = set()
        stack: list[int | None] = [None]
        while stack:
            parent = stack.pop()
            kids = store.children(task='writers', variant='', parent=parent)
            sigs = [step_signature(n.step) for n in kids]
            dup += len(sigs) - len(set(sigs))
            for n in kids:
                if n.id not in seen:
                    seen.add(n.id)
                    stack.append(n.id)
    return {'commits': commits, 'rate': commits / seconds, 'wall': wall, 'lost': lost,
            'dup': dup, 'distinct': len(expected)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', default='10000,100000')
    parser.add_argument('--seconds', type=float, default=60.0)
    parser.add_argument('--lookups', type=int, default=300)
    parser.add_argument('--url', default='', help='an existing PostgreSQL database to use')
    parser.add_argument('--out', default='')
    parser.add_argument('--no-writes', action='store_true',
                        help='lookups only (no commit, sharing or writer figures)')
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(',') if s]
    server = None
    url = args.url
    if not url:
        sys.path.insert(0, str(HERE.parent / 'muscle_mem_ros' / 'test'))
        from pg_server import pg_binaries, PgServer
        bindir, why = pg_binaries()
        if why:
            raise SystemExit(why)
        server = PgServer(bindir)
        server.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            rows = []
            for n in sizes:
                rng = np.random.default_rng(n)
                firsts = rng.uniform(-np.pi, np.pi, (n, DIMS))
                seconds = rng.uniform(-np.pi, np.pi, (n, DIMS))
                pg = server.new_url() if server else url
                specs = {'sqlite': str(work / f'{n}.db'), 'postgres': pg}
                row: dict[str, object] = {'n': n}
                for name, spec in specs.items():
                    row[name + '_build'] = load(spec, n, firsts, seconds)
                    print(n, name, f'build {row[name + "_build"]:.1f} s', flush=True)
                row.update(lookups(specs, n, firsts, args.lookups))
                print(n, row, flush=True)
                rows.append(row)
            if args.no_writes:
                text = render(rows, None, None, None, args)
                print(text)
                if args.out:
                    Path(args.out).write_text(text)
                return 0
            commit = {'sqlite': commit20(str(work / 'commit.db'), 50),
                      'postgres': commit20(server.new_url() if server else url, 50)}
            print('commit20', commit, flush=True)
            prop = propagation(server.new_url() if server else url, 100)
            print('propagation', prop, flush=True)
            write = {'sqlite': writers(str(work / 'writers.db'), args.seconds),
                     'postgres': writers(server.new_url() if server else url, args.seconds)}
            print('writers', write, flush=True)
    finally:
        if server is not None:
            server.destroy()
    text = render(rows, commit, prop, write, args)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


def render(rows, commit, prop, write, args) -> str:
    import psycopg
    import sqlite3
    load1 = os.getloadavg()[0]
    out = ['# Store benchmark: SQLite vs PostgreSQL', '',
           'Generated by `bench/store` (`bench/store.py`); one run on: '
           f'{cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()}, '
           f'SQLite {sqlite3.sqlite_version}, PostgreSQL server on loopback (the test '
           f'server: fsync off), psycopg {psycopg.__version__}; load average {load1:.1f} at '
           'the end (other jobs shared the machine).', '',
           'Workload and figures: see the docstring of bench/store.py.', '',
           '## Lookup (ms), index cached; the two stores measured alternately', '',
           '| N trajectories | SQLite p50 | PostgreSQL p50 | ratio | SQLite p99 | PostgreSQL p99 '
           '| SQLite first lookup | PostgreSQL first lookup | build SQLite / PostgreSQL (s) |',
           '|---:|---:|---:|---:|---:|---:|---:|---:|---:|']
    for r in rows:
        s, p = r['sqlite'], r['postgres']
        out.append(f"| {r['n']:,} | {ms(s['p50'])} | {ms(p['p50'])} | {p['p50'] / s['p50']:.2f}x "
                   f"| {ms(s['p99'])} | {ms(p['p99'])} | {ms(s['cold'])} | {ms(p['cold'])} "
                   f"| {r['sqlite_build']:.0f} / {r['postgres_build']:.0f} |")
    if commit is None:
        return '\n'.join(out) + '\n'
    out += ['', '## Writes', '',
            '| figure | SQLite | PostgreSQL |', '|---|---:|---:|',
            f"| commit of a 20-step recording, p50 (ms) | {ms(commit['sqlite'])} "
            f"| {ms(commit['postgres'])} |"]
    for key, label in (('rate', 'commits/s, 4 writer processes'), ('commits', 'commits'),
                       ('distinct', 'distinct runs committed'), ('lost', 'lost'),
                       ('dup', 'duplicated')):
        a, b = write['sqlite'][key], write['postgres'][key]
        fmt = (lambda v: f'{v:.1f}') if key == 'rate' else str
        out.append(f'| {label} ({args.seconds:.0f} s) | {fmt(a)} | {fmt(b)} |')
    out += ['', '## Sharing (PostgreSQL)', '',
            '| figure | value |', '|---|---:|',
            f"| A's commit to B's first possible replay, p50 (ms) | {ms(prop['p50'])} |",
            f"| same, p99 / max (ms) | {ms(prop['p99'])} / {ms(prop['max'])} |",
            f"| A's commit of one step, p50 (ms) | {ms(prop['commit_p50'])} |", '',
            '## Targets', '']
    for r in rows:
        ratio = r['postgres']['p50'] / r['sqlite']['p50']
        out.append(f"- lookup p50 at N = {r['n']:,}: PostgreSQL {ratio:.2f}x SQLite "
                   f"(target within 1.5x): {'met' if ratio <= 1.5 else 'NOT met'}")
    out.append(f"- A's commit to B replayable p50: {ms(prop['p50'])} ms (target < 200 ms): "
               f"{'met' if prop['p50'] < 0.2 else 'NOT met'}")
    zero = all(w['lost'] == 0 and w['dup'] == 0 for w in write.values())
    out.append(f"- 4 writers: zero lost or duplicated: {'met' if zero else 'NOT met'}")
    return '\n'.join(out) + '\n'


if __name__ == '__main__':
    sys.exit(main())
