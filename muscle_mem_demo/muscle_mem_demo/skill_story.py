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
The story's second part: tasks made of subtasks, and a skill that serves every task using it.

ROS-free, like :mod:`muscle_mem_demo.story`, whose types it uses. The agent knows
``restock`` (the cube to the shelf) and ``tidy`` (the cube to the bin) only as ``pick``
then ``place``, which it sends to the cache's ``~/execute_subtask`` one by one: the cache
replays a skill it has learned, and sends the agent only the ones it has not.

- Run 12, ``restock``: nothing is learned. The agent decomposes it and is asked for
  ``pick`` and ``place`` in turn; the cache learns both, and ``restock`` as two subtask steps.
- Run 13, ``restock`` again: a full replay, both subtasks from the cache; no agent call.
- Run 14, ``tidy``, never seen: the agent is asked only to decompose it. ``pick``, learned
  under ``restock``, replays from the cache (the agent is not asked for it), and so does
  ``place``, to the bin 15 cm from the shelf: its target is its parameter ``place``, which
  the cache substitutes (the binding ``param:place`` of the demo's config).

The parents take no parameters: the agent knows where each puts the cube
(:data:`planner.PARENT_PLACES`); each run is judged on that place.
"""

from __future__ import annotations

from collections.abc import Sequence

from muscle_mem_demo.planner import BIN, SHELF
from muscle_mem_demo.story import Expectation, RunMode, RunOutcome, RunSpec

__all__ = ['SKILL', 'SKILL_STORY', 'skill_summary']

SKILL = 'pick'
"""The skill the part follows from one parent to the other."""

SKILL_STORY: tuple[RunSpec, ...] = (
    RunSpec(number=12, title='restock = pick + place, new', task='restock', place=SHELF,
            place_param=False,
            expect=Expectation(mode=None, replayed=None, by_agent=None, agent_calls=None,
                               asked=('restock', 'pick', 'place'))),
    RunSpec(number=13, title='restock again', task='restock', place=SHELF, place_param=False,
            expect=Expectation(mode=RunMode.REPLAY, replayed=None, by_agent=None,
                               agent_calls=(), asked=(), from_cache=('pick', 'place'))),
    RunSpec(number=14, title='tidy = pick + place(bin), new', task='tidy', place=BIN,
            place_param=False,
            expect=Expectation(mode=None, replayed=None, by_agent=None, agent_calls=None,
                               asked=('tidy',), from_cache=('pick', 'place'))),
)
"""The runs of the second part, in order, each from a reset world, after the first part."""


def skill_summary(outcomes: Sequence[RunOutcome], skill: str = SKILL) -> str:
    """
    Return where ``skill`` was learned and where it replayed without the agent, one sentence.

    Example: ``pick: learned under restock in run 12 (the agent asked for it); replayed
    from the cache under restock (run 13), tidy (run 14), the agent not asked for it``.
    """
    learned = [o for o in outcomes if skill in o.agent_tasks]
    served = [o for o in outcomes if skill in o.from_cache and skill not in o.agent_tasks]
    parts = []
    if learned:
        first = learned[0]
        parts.append(f'learned under {first.spec.task} in run {first.spec.number} (the agent '
                     'asked for it)')
    if served:
        runs = ', '.join(f'{o.spec.task} (run {o.spec.number})' for o in served)
        parts.append(f'replayed from the cache under {runs}, the agent not asked for it')
    return f'{skill}: ' + ('; '.join(parts) if parts else 'neither learned nor replayed')
