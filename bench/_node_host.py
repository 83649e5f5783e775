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
Run the behavior-cache executable (``muscle_mem_ros.ros.node.main.main``) with timing probes.

The node is the real one, started by its own ``main`` with the command line given
here (``--ros-args ...``). Before it starts, methods are wrapped at class level,
without changing what they do:

* ``SensorHub.wait_newer``: the wait for sensor data newer than a step's end (the
  post-check wait that the benchmark subtracts), and
* ``ActionProxy.call``: one replayed step sent to the real server and awaited.

Each wrapped call appends ``[kind, start_ns, end_ns]`` (``time.monotonic_ns``) to a list
that a daemon thread writes, as JSON lines, to the file named by ``MM_BENCH_TIMINGS``
every 0.1 s, so the benchmark can read them while the node runs. If a probed method
does not exist (the node changed), that probe is left out and the benchmark says so.

Unless ``MM_BENCH_PARTS=0``, five more probes split a replayed step into its parts:
``SensorHub.capture``, ``SensorJudge.pick`` (pre-check: capture and match),
``walk.candidates_at`` (store lookup), ``SensorJudge.post_check`` (wait, capture,
compare) and ``BehaviorCacheNode.publish_event``; a few microseconds each. Two more follow the
check during a replayed action goal (``watch``): ``replay.make_watch`` (building a
step's watch; its record also holds how many elements the watch judges, -1 when the step
is not watched, and the most samples one sensor of the step's trace holds) and
``StepWatch.sample`` (judging one poll of the sensors). A ``SensorHub.capture`` made by the
node's sampler thread (the polls at ``watch_rate`` while a step is traced or watched) is
recorded as ``poll``, apart from the snapshots of the checks. All of them
are named in :data:`PROBES`; a test checks that each still names something.
A diagnostic, off in the benchmark: ``MM_BENCH_WHATIF=result_timeout=N`` runs the node with
its proxies' action servers keeping finished goals N s (the report then says that the node
was modified). (The former ``helper_node`` what-if is now how the node works.)
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import threading
import time
from typing import Any

_records: list[list[Any]] = []

PROBES: tuple[tuple[str, str, str, str], ...] = (
    ('wait', 'muscle_mem_ros.ros.capture.sensors', 'SensorHub', 'wait_newer'),
    ('call', 'muscle_mem_ros.ros.capture.proxies', 'ActionProxy', 'call'),
    ('capture', 'muscle_mem_ros.ros.capture.sensors', 'SensorHub', 'capture'),
    ('choose', 'muscle_mem_ros.ros.execution.judge', 'SensorJudge', 'pick'),
    ('candidates', 'muscle_mem_ros.replay.walk', '', 'candidates_at'),
    ('post', 'muscle_mem_ros.ros.execution.judge', 'SensorJudge', 'post_check'),
    ('event', 'muscle_mem_ros.ros.node.cache_node', 'BehaviorCacheNode', 'publish_event'),
    ('watch', 'muscle_mem_ros.ros.execution.replay', '', 'make_watch'),
    ('judge', 'muscle_mem_ros.ros.execution.watch', 'StepWatch', 'sample'),
)
"""Each probe: its kind, the module, the class ('' for a module function), the attribute.
The first two always run; the others unless ``MM_BENCH_PARTS=0``."""


_SAMPLER = 'muscle_mem sampler'
"""Name of the node's sampler thread (``muscle_mem_ros.ros.capture.tracing.Sampler``)."""
_SAMPLER_KINDS = {'capture': 'poll'}
"""A probe's kind when the sampler thread makes the call."""


def probe_owner(module: str, cls: str) -> object | None:
    """
    Return what a probe patches: the class ``cls`` of ``module``, or the module itself.

    :param module: dotted module name.
    :param cls: class name, or '' for the module.
    :return: the owner, or None if the class is gone.
    """
    owner = importlib.import_module(module)
    return getattr(owner, cls, None) if cls else owner


def _probe(owner: object, name: str, kind: str) -> bool:
    original = getattr(owner, name, None)
    if original is None:
        return False

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.monotonic_ns()
        try:
            return original(*args, **kwargs)
        finally:
            _records.append([_SAMPLER_KINDS.get(kind, kind)
                             if threading.current_thread().name == _SAMPLER else kind,
                             start, time.monotonic_ns()])

    @functools.wraps(original)
    def watched(node: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.monotonic_ns()
        watch = original(node, *args, **kwargs)
        trace = node.step.trace
        samples = -1 if trace is None else max(
            (len(series.times) for series in trace.sensors.values()), default=0)
        _records.append([kind, start, time.monotonic_ns(),
                         -1 if watch is None else len(watch.labels), samples])
        return watch

    setattr(owner, name, watched if kind == 'watch' else timed)
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


def _what_if(spec: str) -> list[str]:
    """
    Apply experimental changes to the node (``MM_BENCH_WHATIF``); never in the benchmark.

    ``result_timeout=N``: the proxies' action servers keep finished goals N s (rclpy: 10).
    """
    from muscle_mem_ros.ros.capture import proxies
    from muscle_mem_ros.ros.rclfix.action_server import ActionServer

    applied = []
    for item in filter(None, (part.strip() for part in spec.split(','))):
        if item.startswith('result_timeout='):
            proxies.ActionServer = functools.partial(  # type: ignore[misc]
                ActionServer, result_timeout=int(item.split('=', 1)[1]))
            applied.append(item)
        else:
            raise SystemExit(f'MM_BENCH_WHATIF: unknown item {item!r}')
    return applied


def main() -> int:
    from muscle_mem_ros.ros.node import main as node_main

    path = os.environ.get('MM_BENCH_TIMINGS', '')
    whatif = _what_if(os.environ.get('MM_BENCH_WHATIF', ''))
    parts = os.environ.get('MM_BENCH_PARTS', '1') != '0'  # where a replayed step's work goes
    probes = {kind: _probe(probe_owner(module, cls), name, kind)
              for kind, module, cls, name in PROBES[:2] + (PROBES[2:] if parts else ())}
    if path:
        with open(path, 'w', encoding='utf-8') as out:
            out.write(json.dumps(['probes', probes]) + '\n')
        threading.Thread(target=_writer, args=(path,), daemon=True).start()
    if path and whatif:
        with open(path, 'a', encoding='utf-8') as out:
            out.write(json.dumps(['whatif', whatif]) + '\n')
    return node_main.main([sys.argv[0], *sys.argv[1:]])


if __name__ == '__main__':
    sys.exit(main())
