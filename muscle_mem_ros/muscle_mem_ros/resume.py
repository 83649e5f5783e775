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
Where a replay stopped and why: :class:`FailureKind` and the one :class:`Resume` record.

The walk (:mod:`.replay.walk`) ends every replay that did not finish with a
:class:`Resume`; the engine passes it to resume-capable agents, the node turns
it into the ExecuteTask goal it sends its agent (``ros/messages/convert.py``).

The opt-in resume protocol between the engine and an agent.

An agent declares that it can continue a task from the middle in one of two
ways: a parameter named ``resume`` that can be passed by keyword
(``def agent(task, *, resume=None)``), or an attribute
``supports_resume = True`` (then it must accept ``resume=``). Such an agent is
always called with ``resume=``: ``None`` when nothing was replayed (start from
the beginning), or a :class:`Resume` saying how many steps the cache already
executed and why it stopped. Any other agent is called exactly as the original
muscle-mem called it and redoes the task from the state it finds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
import inspect
from typing import Any

__all__ = ['accepts_resume', 'FailureKind', 'Resume']


class FailureKind(Enum):
    """Why a replay (or one check of it) stopped; the reason text beside it is for people."""

    NO_CANDIDATE = 'no_candidate'
    """Nothing learned at this point of the tree (or nothing this front end can replay)."""
    PRE_CHECK = 'pre_check'
    """Learned steps exist but none passed its pre-check."""
    POST_CHECK = 'post_check'
    """A replayed step's post-check failed and no learned child of that step passed."""
    DURING_CHECK = 'during_check'
    """While a replayed action goal ran, the world left what its recording explains
    (the goal was canceled; the agent redoes that step)."""
    OUT_OF_TOLERANCE = 'out_of_tolerance'
    """A sensor reading deviates from the recorded one by more than its tolerance."""
    STALE = 'stale'
    """A sensor reading is older than ``max_age``, or no data came after the step."""
    MISSING = 'missing'
    """A sensor reading is missing, or cannot be compared (shape, type, unusable)."""
    UNCHECKED = 'unchecked'
    """The step was recorded without a pre-check and blind replay is not allowed."""
    STEP_FAILED = 'step_failed'
    """A replayed step failed: the tool raised, or its server aborted or rejected it."""
    TIMEOUT = 'timeout'
    """A replayed step's server did not answer within ``step_timeout`` (the goal was canceled)."""
    SERVER_LOST = 'server_lost'
    """A replayed step's server left the ROS graph while the step ran (stopped or crashed)."""
    CANCELED = 'canceled'
    """The caller canceled the replay (the in-flight step was canceled too)."""
    NOT_STOPPED = 'not_stopped'
    """A goal the cache stopped did not end, or the robot did not come to rest, within
    ``stop_timeout``: the task ends there and nobody (not the agent) is handed the robot."""

    @property
    def at_start(self) -> bool:
        """Return True for a failure to match at the start (a miss), not of a step that ran."""
        return self in _AT_START


@dataclass(frozen=True)
class Resume:
    """
    Where a replay stopped, passed to agents that can continue from there.

    :ivar step: Index of the first step the agent has to do (= steps replayed).
    :ivar reason: Why the replay stopped, e.g. 'no recorded step passed its
        pre-check at step 2'.
    :ivar replayed: Names of the tools replayed in this run, in order.
    :ivar kind: Why, as a kind; None when nothing failed (a run that starts
        with the agent on purpose, e.g. ``record_only``).
    :ivar last_node: Id of the last replayed node (the parent of what the agent
        records), None when nothing was replayed.
    """

    step: int
    reason: str
    replayed: tuple[str, ...] = ()
    kind: FailureKind | None = None
    last_node: int | None = None

    @property
    def steps_done(self) -> int:
        """Return how many steps the cache executed before this point."""
        return len(self.replayed)


def accepts_resume(agent: Callable[..., Any]) -> bool:
    """Return True if ``agent`` declared the resume protocol (see the module docstring)."""
    if getattr(agent, 'supports_resume', False):
        return True
    try:
        parameter = inspect.signature(agent).parameters.get('resume')
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind in (
        inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


_AT_START = frozenset({FailureKind.NO_CANDIDATE, FailureKind.PRE_CHECK,
                       FailureKind.OUT_OF_TOLERANCE, FailureKind.STALE, FailureKind.MISSING,
                       FailureKind.UNCHECKED})
