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
    return node_main.main([sys.argv[0], *sys.argv[1:]])


if __name__ == '__main__':
    sys.exit(main())
