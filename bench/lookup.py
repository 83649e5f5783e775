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
Lookup latency as the cache grows: muscle_mem_ros against muscle-mem 0.1.0.

Workload (same for both): one task; N learned trajectories of two steps each;
every step's pre snapshot is 32 floats (uniform in [-pi, pi], think joint
angles); the check passes when every element is within 0.05 of the recorded
value (box tolerance). The current state is trajectory N/2's first pre
snapshot plus noise of at most half the tolerance, so exactly that trajectory
matches and it sits in the middle of insertion order.

What one lookup is:
* muscle_mem_ros: ``store.children(task, variant, parent=None)`` on an
  SqliteStore (cached after the first call) plus ``Matcher.select`` with a
  ``ToleranceCheck`` (ABS mode, KD-tree at this fan-out). The first lookup
  after opening, which reads the rows and builds the index, is reported apart.
* muscle-mem 0.1.0: its ``Engine`` with a tool whose ``pre_check`` is a
  ``Check`` doing the same box test with NumPy, the N trajectories appended to
  its own ``engine.db``; one lookup is creating ``engine._step_generator(ctx,
  tags)`` and taking its first item, which is exactly what ``engine()`` does
  before running the first step (page through the DB 20 at a time, filter by
  partial match, function hash and pre-check capture/compare until one passes).

Usage: bench/lookup [--sizes 100,1000,...] [--bound-sizes 1000,...]
                    [--bound-stores sqlite,postgres] [--out bench/lookup.md]
"""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path
import platform
import sys
import tempfile
import time
from typing import Any

from _bound import bench_bound, bench_engine, bench_restart, driver_read, keep_for_restart
from _common import cpu_name, ms, pct, pg_server
from muscle_mem_ros import (
    Matcher,
    SensorSpec,
    Snapshot,
    SqliteStore,
    Step,
    ToleranceCheck,
    ToolKind,
)
import numpy as np

DIMS = 32
TOL = 0.05
TASK = 'pick_bin_3'
SIZES = (100, 1_000, 10_000, 100_000)


def make_step(i: int, k: int, q: np.ndarray) -> Step:
    goal = (b'\x00\x01\x00\x00' + i.to_bytes(8, 'little') + k.to_bytes(4, 'little')
            + q.astype('<f8').tobytes())
    return Step(tool='/arm/follow_joint_trajectory', kind=ToolKind.ACTION,
                type_name='control_msgs/action/FollowJointTrajectory', payload=goal,
                payload_json='{"trajectory": "..."}',
                pre=Snapshot(features={'joints': tuple(q.tolist())}, stamps={'joints': 0.0}),
                post=Snapshot(features={'joints': tuple((q + 0.1).tolist())},
                              stamps={'joints': 0.5}),
                duration=0.5)


def query(rng: np.random.Generator, target: np.ndarray) -> np.ndarray:
    return target + rng.uniform(-0.5 * TOL, 0.5 * TOL, DIMS)


def bench_ours(n: int, firsts: np.ndarray, seconds: np.ndarray, work: Path,
               lookups: int) -> dict[str, object]:
    path = work / f'lookup_{n}.db'
    t0 = time.perf_counter()
    with SqliteStore(path=path) as store, store.batch():
        for i in range(n):
            store.add_trajectory(task=TASK, variant='', params_json='{}',
                                 steps=[make_step(i, 0, firsts[i]), make_step(i, 1, seconds[i])])
    build = time.perf_counter() - t0
    size = path.stat().st_size + sum(p.stat().st_size for p in work.glob(path.name + '-*'))
    check = ToleranceCheck(sensors=[SensorSpec('joints', (TOL,))])
    rng = np.random.default_rng(7)
    target = n // 2
    t0 = time.perf_counter()
    store = SqliteStore(path=path)
    opened = time.perf_counter() - t0
    matcher = Matcher(check=check)
    t0 = time.perf_counter()
    kids = store.children(task=TASK, variant='', parent=None)
    sel = matcher.select(kids, Snapshot(features={'joints': tuple(query(rng, firsts[target]))}))
    cold = time.perf_counter() - t0
    expect = kids[target].id
    assert sel.node is not None and sel.node.id == expect
    total, child_t, select_t = [], [], []
    for _ in range(lookups):
        snap = Snapshot(features={'joints': tuple(query(rng, firsts[target]))})
        t0 = time.perf_counter()
        kids = store.children(task=TASK, variant='', parent=None)
        t1 = time.perf_counter()
        sel = matcher.select(kids, snap)
        t2 = time.perf_counter()
        assert sel.node is not None and sel.node.id == expect, 'wrong candidate'
        total.append(t2 - t0)
        child_t.append(t1 - t0)
        select_t.append(t2 - t1)
    extra = np.random.default_rng(n).uniform(-np.pi, np.pi, (4, DIMS))
    learn, after_learn = [], []
    for j in range(2):
        t0 = time.perf_counter()
        store.add_trajectory(task=TASK, variant='', params_json='{}',
                             steps=[make_step(n + j, 0, extra[2 * j]),
                                    make_step(n + j, 1, extra[2 * j + 1])])
        learn.append(time.perf_counter() - t0)
        snap = Snapshot(features={'joints': tuple(query(rng, firsts[target]))})
        t0 = time.perf_counter()
        sel = matcher.select(store.children(task=TASK, variant='', parent=None), snap)
        after_learn.append(time.perf_counter() - t0)
        assert sel.node is not None and sel.node.id == expect
    store.close()
    return {'build': build, 'size': size, 'nodes': 2 * n, 'open': opened, 'cold': cold,
            'learn': learn, 'after_learn': after_learn,
            'p50': pct(total, 50), 'p99': pct(total, 99), 'children_p50': pct(child_t, 50),
            'select_p50': pct(select_t, 50), 'samples': lookups}


def bench_muscle_mem(n: int, firsts: np.ndarray, seconds: np.ndarray,
                     budget: float) -> dict[str, object] | None:
    try:
        import muscle_mem as mm
        from muscle_mem.dispatch.context import RuntimeContext
        from muscle_mem.storage.types import Arg, Trajectory
        from muscle_mem.storage.types import Step as MStep
    except ImportError:
        return None
    engine = mm.Engine()
    state = {'q': firsts[0]}

    def capture(i: int) -> np.ndarray:
        return state['q']

    def compare(current: np.ndarray, candidate: np.ndarray) -> bool:
        return bool(np.max(np.abs(current - candidate)) <= TOL)

    @engine.function(pre_check=mm.Check(capture, compare))
    def move(i: int) -> None:
        pass

    engine.set_agent(lambda: None).finalize()
    (tool,) = engine.registry._tools.values()

    def mstep(i: int, q: np.ndarray) -> MStep:
        return MStep(func_name=tool.func_name, func_hash=tool.func_hash, is_method=False,
                     args=[Arg(is_param=False, static_value=i)], kwargs={},
                     pre_check_snapshot=q)

    for i in range(n):
        engine.db.add_trajectory(Trajectory(tags=[], steps=[mstep(i, firsts[i]),
                                                            mstep(i, seconds[i])]))
    engine.current_trajectory = Trajectory(tags=[], steps=[])
    ctx = RuntimeContext(method_instance=None, params=None)
    rng = np.random.default_rng(7)
    target = n // 2
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 200 and (len(times) < 5 or time.perf_counter() - start < budget):
        state['q'] = query(rng, firsts[target])
        t0 = time.perf_counter()
        step, done = next(engine._step_generator(ctx, []))
        times.append(time.perf_counter() - t0)
        assert step is not None and not done and step.args[0].static_value == target
    return {'p50': pct(times, 50), 'p99': pct(times, 99), 'samples': len(times)}


def bench_commit(work: Path, rng: np.random.Generator, count: int = 50) -> dict[str, float]:
    path = work / 'commit20.db'
    store = SqliteStore(path=path)
    recorded, merged = [], []
    for t in range(count):
        qs = rng.uniform(-np.pi, np.pi, (20, DIMS))
        steps = [make_step(t, k, qs[k]) for k in range(20)]
        t0 = time.perf_counter()
        rec = store.begin(task='teach', variant='', params_json='{}')
        for s in steps:
            rec.append(s)
        rec.commit()
        recorded.append(time.perf_counter() - t0)
        qs = rng.uniform(-np.pi, np.pi, (20, DIMS))
        steps = [make_step(t + count, k, qs[k]) for k in range(20)]
        t0 = time.perf_counter()
        store.add_trajectory(task='teach', variant='', params_json='{}', steps=steps)
        merged.append(time.perf_counter() - t0)
    store.close()
    size = path.stat().st_size
    return {'recorded_p50': pct(recorded, 50), 'recorded_p99': pct(recorded, 99),
            'merged_p50': pct(merged, 50), 'bytes_per_step': size / (2 * count * 20)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', default=','.join(map(str, SIZES)))
    parser.add_argument('--lookups', type=int, default=300)
    parser.add_argument('--mm-budget', type=float, default=10.0,
                        help='seconds of muscle-mem lookups per N (at least 5 lookups)')
    parser.add_argument('--bound-sizes', default='1000,10000,100000',
                        help='N of the lookups after a commit with bindings on ("" = none)')
    parser.add_argument('--bound-stores', default='sqlite,postgres')
    parser.add_argument('--engine-sizes', default='1000,10000,100000',
                        help="N of the Engine's call after a learned miss")
    parser.add_argument('--out', type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(',')]
    rng = np.random.default_rng(1)
    biggest = max(sizes)
    firsts = rng.uniform(-np.pi, np.pi, (biggest, DIMS))
    seconds = rng.uniform(-np.pi, np.pi, (biggest, DIMS))
    rows = []
    with tempfile.TemporaryDirectory(prefix='mm_bench_') as tmp:
        work = Path(tmp)
        for n in sizes:
            ours = bench_ours(n, firsts[:n], seconds[:n], work, args.lookups)
            print(f'N={n}: ours p50 {ms(ours["p50"])} ms p99 {ms(ours["p99"])} ms '
                  f'(build {ours["build"]:.1f} s, cold {ms(ours["cold"])} ms)', flush=True)
            theirs = bench_muscle_mem(n, firsts[:n], seconds[:n], args.mm_budget)
            if theirs:
                print(f'N={n}: muscle-mem p50 {ms(theirs["p50"])} ms p99 {ms(theirs["p99"])} ms '
                      f'({theirs["samples"]} lookups)', flush=True)
            rows.append((n, ours, theirs))
        commit = bench_commit(work, rng)
        bound = run_bound(args, work)
    print(f'commit 20 steps: {ms(commit["recorded_p50"])} ms, '
          f'{commit["bytes_per_step"]:.0f} B/step', flush=True)
    report = render(rows, commit, args) + render_bound(bound, args)
    if args.out:
        args.out.write_text(report)
        print(f'wrote {args.out}')
    else:
        print(report)
    return 0


def reopen(spec: str) -> Any:
    """
    Open a store again, trying a few times while its server does not answer.

    A PostgreSQL server that has just written a large tree's kept plans and first
    steps can take longer than the store's connect timeout to accept a connection.
    """
    from muscle_mem_ros import open_store
    from muscle_mem_ros.errors import StoreUnavailableError
    for attempt in range(5):
        try:
            return open_store(spec)
        except StoreUnavailableError:
            if attempt == 4:
                raise
            time.sleep(2.0)


def run_bound(args: argparse.Namespace, work: Path) -> dict[str, list]:
    """Run the lookups after a commit (per store) and the Engine's calls after a miss."""
    from muscle_mem_ros import open_store
    out: dict[str, list] = {'engine': []}
    stores = [s for s in args.bound_stores.split(',') if s]
    with contextlib.ExitStack() as stack:
        server = None
        if 'postgres' in stores:
            server = pg_server(stack)
        for name in stores:
            out[name] = []
            for n in [int(x) for x in args.bound_sizes.split(',') if x]:
                spec = str(work / f'bound_{n}.db') if name == 'sqlite' else server.new_url()
                with open_store(spec) as store:
                    found = bench_bound(store, n)
                    found['keep'] = keep_for_restart(store)
                found.update(bench_restart(lambda: reopen(spec)))
                found['driver'] = driver_read(name, spec)
                print(f'bound N={n} {name}: after a commit p50 {ms(found["p50"])} ms '
                      f'(learning {ms(found["learn_p50"])} ms, build {found["build"]:.0f} s); '
                      f'first lookup after a restart p50 {ms(found["restart_p50"])} ms',
                      flush=True)
                out[name].append((n, found))
        for n in [int(x) for x in args.engine_sizes.split(',') if x]:
            found = bench_engine(work / f'engine_{n}.db', n, calls=20 if n < 100_000 else 8)
            print(f'Engine N={n}: call after a learned miss p50 {ms(found["p50"])} ms',
                  flush=True)
            out['engine'].append((n, found))
    return out


def render_bound(bound: dict[str, list], args: argparse.Namespace) -> str:
    import _bound
    lines = ['', '## Lookup right after a commit, bindings on (ms)', '',
             (_bound.__doc__ or '').split('\n\n', 1)[1].strip(), '',
             '| store | N trajectories | after a commit p50 | p99 | of which learning p50 | '
             'nothing new p50 | first lookup (learns the whole tree) | samples |',
             '|---|---:|---:|---:|---:|---:|---:|---:|']
    growth = []
    for name in ('sqlite', 'postgres'):
        for n, r in bound.get(name, []):
            lines.append(f'| {name} | {n:,} | {ms(r["p50"])} | {ms(r["p99"])} | '
                         f'{ms(r["learn_p50"])} | {ms(r["steady_p50"])} | {ms(r["cold"])} | '
                         f'{r["samples"]} |')
        by_n = dict(bound.get(name, []))
        if 10_000 in by_n:
            p50 = by_n[10_000]['p50']
            growth.append(f'- {name}: p50 at N = 10,000: {ms(p50)} ms (target < 20 ms): '
                          f'{"met" if p50 < 0.02 else "NOT met"}')
        if 1_000 in by_n and 100_000 in by_n:
            g = by_n[100_000]['p50'] / by_n[1_000]['p50']
            growth.append(f'- {name}: growth of p50 from N = 1,000 to 100,000: {g:.1f}x '
                          f'(target < 3x): {"met" if g < 3 else "NOT met"}')
    lines += ['', *growth, '']
    import textwrap
    lines += ['## The first lookup after a restart, bindings on (ms)', '',
              textwrap.dedent(_bound.bench_restart.__doc__.split('\n\n', 1)[1]).strip(), '',
              'Before the first restart the store is left as a node leaves it: its first steps '
              'read and kept as columns (sorted for the check’s tolerances) and its plans '
              'learned and kept (the node does both at its start-up warm-up and at deactivate; '
              '"keeping" below, seconds, learning the whole tree included). Beside it, the '
              'database driver’s own read of the whole kept value (sqlite3 blob read, psycopg '
              'binary SELECT; no muscle_mem_ros code): what a first lookup would cost that '
              'read every first step’s vectors, as the second lookup does.', '',
              'A warm lookup opens no store, so the restart is set against it like for like: '
              'the lookup a task pays after a restart (plans, children, select: the node opens '
              'its store when it starts, before it takes a task), with the open beside.', '',
              '| store | N trajectories | first lookup after a restart p50 | max | of which: '
              'open / plans / children / select | the lookup a task pays (without the open) | '
              'the driver’s own read of all the kept columns '
              'p50 | second lookup (KD-tree) | third (warm) | warm lookup after a commit p50 | '
              'task’s lookup / warm (with the open) | keeping (s) | restarts |',
              '|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|']
    targets = []
    for name in ('sqlite', 'postgres'):
        for n, r in bound.get(name, []):
            parts = ' / '.join(ms(x) for x in r['restart_parts'])
            task = sum(r['restart_parts'][1:])
            ratio, opened = task / r['p50'], r['restart_p50'] / r['p50']
            lines.append(f'| {name} | {n:,} | {ms(r["restart_p50"])} | {ms(r["restart_max"])} | '
                         f'{parts} | {ms(task)} | {ms(r["driver"])} | {ms(r["second_p50"])} | '
                         f'{ms(r["third_p50"])} | {ms(r["p50"])} | {ratio:.1f}x ({opened:.1f}x) | '
                         f'{r["keep"]:.1f} | {r["restarts"]} |')
            if n == 100_000:
                targets.append(
                    f'- {name}: first lookup after a restart at N = 100,000, the store’s open '
                    f'included: {ms(r["restart_p50"])} ms (target < 200 ms): '
                    f'{"met" if r["restart_p50"] < 0.2 else "NOT met"}; the lookup a task pays '
                    f'after a restart {ms(task)} ms, {ratio:.1f}x the warm lookup after a commit '
                    f'(target within 10x): {"met" if ratio <= 10 else "NOT met"} '
                    f'({opened:.1f}x with the open)')
    lines += ['', *targets, '']
    if bound['engine']:
        lines += ["## The Engine's call right after a learned miss (ms)", '',
                  _bound.bench_engine.__doc__.split('\n\n', 1)[1].strip().replace(
                      '\n    ', '\n'), '',
                  '| N trajectories | call p50 | p99 | the same call again, nothing new to '
                  'learn, p50 | user compares in the call, p50 | the miss before it, p50 | '
                  "the user's capture and compare on every candidate, p50 | samples |",
                  '|---:|---:|---:|---:|---:|---:|---:|---:|']
        for n, r in bound['engine']:
            lines.append(f'| {n:,} | {ms(r["p50"])} | {ms(r["p99"])} | '
                         f'{ms(r["again_p50"])} | {r["compares_p50"]:g} | '
                         f'{ms(r["miss_p50"])} | {ms(r["floor_p50"])} | {r["samples"]} |')
        by_n = dict(bound['engine'])
        lines.append('')
        if 10_000 in by_n:
            r = by_n[10_000]
            lines.append(f'- Engine: p50 at N = 10,000: {ms(r["p50"])} ms (target < 20 ms): '
                         f'{"met" if r["p50"] < 0.02 else "NOT met"}')
        if 1_000 in by_n and 100_000 in by_n:
            g = by_n[100_000]['p50'] / by_n[1_000]['p50']
            lines.append(f'- Engine: growth of p50 from N = 1,000 to 100,000: {g:.1f}x (target '
                         f'< 3x): {"met" if g < 3 else "NOT met"}')
        lines.append('')
    return '\n'.join(lines)


def render(rows: list, commit: dict[str, float], args: argparse.Namespace) -> str:
    import muscle_mem_ros
    try:
        from importlib.metadata import version
        mm_version = version('muscle-mem')
    except Exception:  # noqa: BLE001
        mm_version = 'not installed'
    import scipy
    lines = [
        '# Lookup benchmark',
        '',
        'Generated by `bench/lookup` (`bench/lookup.py`); numbers below are from one run on:',
        f'{cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()}, '
        f'NumPy {np.__version__}, SciPy {scipy.__version__}, SQLite '
        f'{__import__("sqlite3").sqlite_version}, muscle-mem {mm_version}; load average '
        f'{os.getloadavg()[0]:.1f} at the end (other jobs shared the machine).',
        '',
        '## Workload',
        '',
        (__doc__ or '').split('\n\n', 1)[1].split('\nUsage:')[0].strip(),
        '',
        '## Lookup latency (ms)',
        '',
        '| N trajectories | ours p50 | ours p99 | muscle-mem p50 | muscle-mem p99 | '
        'speed-up (p50) | ours: children / select p50 | ours cold first lookup | '
        'ours: learn one more, then lookup (1st / 2nd time) | samples ours / mm |',
        '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ]
    for n, ours, theirs in rows:
        mm_p50 = ms(theirs['p50']) if theirs else 'n/a'
        mm_p99 = ms(theirs['p99']) if theirs else 'n/a'
        ratio = f'{theirs["p50"] / ours["p50"]:.0f}x' if theirs else 'n/a'
        lines.append(
            f'| {n:,} | {ms(ours["p50"])} | {ms(ours["p99"])} | {mm_p50} | {mm_p99} | {ratio} | '
            f'{ms(ours["children_p50"])} / {ms(ours["select_p50"])} | {ms(ours["cold"])} | '
            f'{ms(ours["learn"][0])}, {ms(ours["after_learn"][0])} / '
            f'{ms(ours["learn"][1])}, {ms(ours["after_learn"][1])} | '
            f'{ours["samples"]} / {theirs["samples"] if theirs else 0} |')
    by_n = {n: (ours, theirs) for n, ours, theirs in rows}
    lines += ['', '## Targets', '']
    if 100_000 in by_n:
        p50 = by_n[100_000][0]['p50']
        lines.append(f'- p50 at N = 100,000: {ms(p50)} ms (target < 2 ms): '
                     f'{"met" if p50 < 2e-3 else "NOT met"}')
    if 10_000 in by_n and by_n[10_000][1]:
        ours, theirs = by_n[10_000]
        ratio = theirs['p50'] / ours['p50']
        lines.append(f'- speed-up at N = 10,000: {ratio:.0f}x (target >= 50x): '
                     f'{"met" if ratio >= 50 else "NOT met"}')
    if 1_000 in by_n and 100_000 in by_n:
        growth = by_n[100_000][0]['p50'] / by_n[1_000][0]['p50']
        lines.append(f'- growth of p50 from N = 1,000 to 100,000: {growth:.1f}x (target < 10x): '
                     f'{"met" if growth < 10 else "NOT met"}')
    lines += ['', '## Store (SQLite, WAL, synchronous=NORMAL)', '',
              '| figure | value |', '|---|---:|']
    lines.append(f'| record a 20-step trajectory step by step (begin, 20 durable appends, '
                 f'commit), p50 / p99 | {ms(commit["recorded_p50"])} / '
                 f'{ms(commit["recorded_p99"])} ms |')
    lines.append(f'| merge a finished 20-step trajectory in one transaction '
                 f'(`add_trajectory`), p50 | {ms(commit["merged_p50"])} ms |')
    lines.append(f'| file size per step (20-step store; pre+post snapshots of 32 floats, '
                 f'~300-byte goal) | {commit["bytes_per_step"]:.0f} B |')
    for n, ours, _ in rows:
        lines.append(f'| N = {n:,}: bulk build (`batch()` + `add_trajectory`) | '
                     f'{ours["build"]:.2f} s |')
        lines.append(f'| N = {n:,}: file size per step | {ours["size"] / ours["nodes"]:.0f} B |')
        lines.append(f'| N = {n:,}: open the store | {ms(ours["open"])} ms |')
    lines += [
        '',
        'Opening is lazy: the constructor checks the header and the meta table and',
        'reads nothing else. The children of a tree node are read on first use',
        '("cold first lookup" above: read the rows, decode the snapshots, build the',
        'NumPy matrix and the KD-tree) and then cached; later writes by the same',
        'process update the cache, writes by other processes are noticed through',
        '`PRAGMA data_version`. "Learn one more, then lookup" commits one new 2-step',
        'trajectory under the root (a new branch beside the N others) and times the',
        'commit and the lookup after it, twice. The lookup reuses the cached',
        'matrices and KD-tree and scores the new row densely (the tree is rebuilt',
        'once the unindexed tail exceeds max(256, N/8)); the first growth copies the',
        'matrices into storage with 50% headroom, later ones grow in place.',
        '',
        f'muscle-mem lookups ran for up to {args.mm_budget:g} s per N (at least 5);',
        'the benchmark is not a test and asserts nothing about time.',
        '',
    ]
    del muscle_mem_ros
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.exit(main())
