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
The node's ``/diagnostics`` status: mode, hit rate, steps saved, agent, store health.

Values (``KeyValue``): ``cache_mode``, ``store_path`` (a URL without its password),
``busy`` (the running activity), ``robot`` (``at rest``, or ``not stopped: <server>: <why>``
while a stop that failed is on record, :mod:`..execution.standstill`), ``frames_dropped``
(``<camera>: <count>``, the camera frames that did not decode since start; only once one
did, :mod:`..capture.camerafeed`), the store's own (a
fleet store's connection), ``tasks``, ``trajectories``, ``hits``, ``misses``, ``hit_rate``,
``store``, ``runs_since_start``, ``hits_since_start``, ``steps_saved``, ``replays_booked`` and
``false_hits`` since start (:mod:`muscle_mem_ros.replay.booking`: a step, or its post-check,
failed after its pre-check passed), ``false_hit_rate`` and ``agent`` (available, not
discovered, none). The level is OK; WARN while store writes fail
(``store: degraded: <error>``, see :mod:`.health`) or a fleet store is unreachable;
ERROR when the store cannot even be read, or while a robot that did not stop is on record
(the node refuses tasks, replays and proxied goals until it is seen or confirmed at rest).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from muscle_mem_ros.errors import StoreUnavailableError
from muscle_mem_ros.records import ReplayOutcome
from muscle_mem_ros.ros.node.health import StoreHealth
from muscle_mem_ros.store import Store
from rclpy.action.client import ActionClient

__all__ = ['cache_status']


def cache_status(*, name: str, hardware_id: str, values: dict[str, str], store: Store,
                 health: StoreHealth, runs: int, hits: int, steps_saved: int,
                 agent: ActionClient[Any, Any, Any] | None,
                 booked: Mapping[ReplayOutcome, int] | None = None) -> DiagnosticStatus:
    """
    Return the cache's status; reading the store never raises (its trouble is the status).

    :param name: The status name.
    :param hardware_id: The node's full name.
    :param values: Values known to the node (mode, store path, busy), shown first.
    :param store: The open store.
    :param health: Whether store writes fail.
    :param runs: Tasks run since start.
    :param hits: Of those, cache hits.
    :param steps_saved: Steps replayed since start.
    :param agent: The agent's action client, or None.
    :param booked: Replays booked since start, by outcome.
    """
    status = DiagnosticStatus(name=name, hardware_id=hardware_id)
    values = dict(values)
    replays = sum((booked or {}).values())
    false_hits = (booked or {}).get(ReplayOutcome.FALSE_HIT, 0)
    values.update({'replays_booked': str(replays), 'false_hits': str(false_hits),
                   'false_hit_rate': f'{false_hits / replays:.3f}' if replays else 'n/a'})
    shared = getattr(store, 'diagnostics', None)
    if shared is not None:
        values.update(shared())
    try:
        tasks = store.tasks()
        hit_count = sum(t.hits for t in tasks)
        misses = sum(t.misses for t in tasks)
        values.update({
            'tasks': str(len(tasks)),
            'trajectories': str(sum(t.trajectory_count for t in tasks)),
            'hits': str(hit_count), 'misses': str(misses),
            'hit_rate': (f'{hit_count / (hit_count + misses):.3f}' if hit_count + misses
                         else 'n/a'),
            'store': 'ok',
        })
        status.level = DiagnosticStatus.OK
        status.message = 'ok'
        degraded = health.error
        if degraded:
            values['store'] = f'degraded: {degraded}'
            status.level = DiagnosticStatus.WARN
            status.message = (f'store degraded: writes fail ({degraded}); replays go on, '
                              'nothing new is learned or counted')
    except StoreUnavailableError as err:
        values['store'] = f'unreachable: {err}'
        status.level = DiagnosticStatus.WARN
        status.message = ('store unreachable, reconnecting: replays go on from what is '
                          'loaded, recordings are kept until it is back')
    except Exception as err:  # diagnostics report store trouble, never raise
        values['store'] = f'error: {err}'
        status.level = DiagnosticStatus.ERROR
        status.message = f'store error: {err}'
    values['runs_since_start'] = str(runs)
    values['hits_since_start'] = str(hits)
    values['steps_saved'] = str(steps_saved)
    values['agent'] = 'none' if agent is None else (
        'available' if agent.server_is_ready() else 'not discovered')
    if values.get('robot', 'at rest') != 'at rest':
        status.level = DiagnosticStatus.ERROR
        status.message = (f"robot {values['robot']}; tasks, replays and proxied goals are "
                          'refused until it is seen at rest or a person confirms it '
                          '(muscle-mem standstill --who NAME)')
    status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
    return status
