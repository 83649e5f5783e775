"""
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
import inspect
from typing import Any

__all__ = ['accepts_resume', 'Resume']


@dataclass(frozen=True)
class Resume:
    """
    Where a replay stopped, passed to agents that can continue from there.

    :ivar step: Index of the first step the agent has to do (= steps replayed).
    :ivar reason: Why the replay stopped, e.g. 'no recorded step passed its
        pre-check at step 2'.
    :ivar replayed: Names of the tools replayed in this run, in order.
    """

    step: int
    reason: str
    replayed: tuple[str, ...] = ()


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
