#!/usr/bin/env python3
"""Run the behavior-cache executable (``muscle_mem_ros.ros.main.main``) with timing probes.

The node is the real one, started by its own ``main`` with the command line given
here (``--ros-args ...``). Before it starts, two methods are wrapped at class level,
without changing what they do:

* ``SensorHub.wait_newer``: the wait for sensor data newer than a step's end (the
  post-check wait that the benchmark subtracts), and
* ``ActionProxy.call``: one replayed step sent to the real server and awaited.

Each wrapped call appends ``[kind, start_ns, end_ns]`` (``time.monotonic_ns``) to a list
that a daemon thread writes, as JSON lines, to the file named by ``MM_BENCH_TIMINGS``
every 0.1 s, so the benchmark can read them while the node runs. If a probed method
does not exist (the node changed), that probe is left out and the benchmark says so.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from typing import Any

_records: list[list[Any]] = []


def _probe(owner: type, name: str, kind: str) -> bool:
    original = getattr(owner, name, None)
    if original is None:
        return False

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.monotonic_ns()
        try:
            return original(*args, **kwargs)
        finally:
            _records.append([kind, start, time.monotonic_ns()])

    setattr(owner, name, timed)
    return True


def _writer(path: str) -> None:
    written = 0
    with open(path, 'a', encoding='utf-8') as out:
        while True:
            time.sleep(0.1)
            end = len(_records)
            for record in _records[written:end]:
                out.write(json.dumps(record) + '\n')
            written = end
            out.flush()


def _sampler(path: str, period: float = 0.001) -> None:
    """Sample every other thread's Python stack; write counts to ``path`` on each flush.

    A diagnostic (``MM_BENCH_SAMPLE=<file>``), off in the benchmark: counts, per thread
    sample, the leaf frame (file:function:line) and every function on the stack
    (inclusive), so where the node spends its time can be read without a profiler.
    """
    import collections

    leaves: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    me = threading.get_ident()
    last = time.monotonic()
    samples = 0
    while True:
        time.sleep(period)
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            code = frame.f_code
            leaves[f'{code.co_filename}:{code.co_name}:{frame.f_lineno}'] += 1
            seen = set()
            while frame is not None:
                key = f'{frame.f_code.co_filename}:{frame.f_code.co_name}'
                if key not in seen:
                    seen.add(key)
                    inclusive[key] += 1
                frame = frame.f_back
        samples += 1
        if time.monotonic() - last > 1.0:
            last = time.monotonic()
            with open(path, 'w', encoding='utf-8') as out:
                json.dump({'samples': samples, 'leaves': leaves.most_common(80),
                           'inclusive': inclusive.most_common(120)}, out, indent=0)


def _what_if(spec: str) -> list[str]:
    """Apply experimental changes to the node (``MM_BENCH_WHATIF``); never in the benchmark.

    ``result_timeout=N``: the proxies' action servers keep finished goals N s (rclpy: 10).
    """
    from muscle_mem_ros.ros import proxy
    from rclpy.action import ActionServer

    applied = []
    for item in filter(None, (part.strip() for part in spec.split(','))):
        if item.startswith('result_timeout='):
            proxy.ActionServer = functools.partial(  # type: ignore[misc]
                ActionServer, result_timeout=int(item.split('=', 1)[1]))
            applied.append(item)
        else:
            raise SystemExit(f'MM_BENCH_WHATIF: unknown item {item!r}')
    return applied


def main() -> int:
    from muscle_mem_ros.ros import main as node_main
    from muscle_mem_ros.ros.proxy import ActionProxy
    from muscle_mem_ros.ros.sensors import SensorHub

    path = os.environ.get('MM_BENCH_TIMINGS', '')
    probes = {'wait': _probe(SensorHub, 'wait_newer', 'wait'),
              'call': _probe(ActionProxy, 'call', 'call')}
    if path:
        with open(path, 'w', encoding='utf-8') as out:
            out.write(json.dumps(['probes', probes]) + '\n')
        threading.Thread(target=_writer, args=(path,), daemon=True).start()
    whatif = _what_if(os.environ.get('MM_BENCH_WHATIF', ''))
    if path and whatif:
        with open(path, 'a', encoding='utf-8') as out:
            out.write(json.dumps(['whatif', whatif]) + '\n')
    sample = os.environ.get('MM_BENCH_SAMPLE', '')
    if sample:
        threading.Thread(target=_sampler, args=(sample,), daemon=True).start()
    return node_main.main([sys.argv[0], *sys.argv[1:]])


if __name__ == '__main__':
    sys.exit(main())
