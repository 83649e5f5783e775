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
The Engine's side of the walk: user checks judge, Python tools execute.

Implements the :mod:`~muscle_mem_ros.replay.walk` protocols (``Judge``, ``Executor``,
``Reporter``) for one :class:`~.engine.Engine` call. Candidates are judged by the core's
:class:`~muscle_mem_ros.bindings.judge.BindingJudge` (the one the node uses), which sees
the world through :class:`CaptureSenses`: a candidate's pre-check capture taken with its
recorded arguments, the capture's leaves as sources, one shift per capture function, and
the user's ``compare`` as the literal check.

What the walk uses of its Engine (tools, decoded arguments, captures and compares that fail
safe, counters) is handed in as :class:`Calls`, with the call's state (:class:`Run`): this
module does not import the engine, the engine imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
import copy
from dataclasses import dataclass, field
import logging
import math
import time
from typing import Any

from .arguments import CallSpec
from .captures import capture_leaf, capture_leaves, capture_path, with_leaves
from .tools import Tool, ToolRegistry
from ..bindings.judge import BindingJudge, Bound, Compared, Observation
from ..bindings.learning import Plans
from ..bindings.rules import parse_path, Substitution
from ..checks.tolerance import Check
from ..errors import MissingParamError
from ..records import CheckFailure, Node, Snapshot, StepStatus, ToolKind
from ..replay.ranking import RankOrder
from ..replay.walk import Cancel, Miss, StepEvent, Verdict
from ..resume import FailureKind
from ..store.base import Recording

__all__ = ['Calls', 'CaptureSenses', 'EngineWalk', 'FAILED', 'Ran', 'Run']

_log = logging.getLogger(__name__)

FAILED: Any = object()
"""What :attr:`Calls.capture` returns when a capture raised."""

Call = tuple[Tool, tuple[Any, ...], dict[str, Any]]


@dataclass
class Run:
    """
    The state of one engine call.

    :param task: The task key (its tags as JSON).
    :param params: The call's task parameters.
    """

    task: str
    params: dict[str, Any] | None
    recording: Recording | None = None
    """The agent's recording, while it runs."""
    learnable: bool = True
    """False once a capture or a recorded call failed: the run is not stored."""
    in_tool: int = 0
    """How deep in tool calls (a tool a tool calls is not recorded)."""
    substitutions: list[Substitution] = field(default_factory=list)
    """What the replay rebound, one record per bound argument."""


@dataclass(frozen=True)
class Calls:
    """
    What the walk side uses of its Engine, handed in by the engine for each call.

    :param tools: The engine's tools.
    :param tolerance: ``binding_tolerance``: how far apart two leaves still count as equal.
    :param context: What replaces ``self`` when a method tool is replayed.
    :param arguments: A learned step's decoded call arguments.
    :param capture: ``capture(check, args, kwargs)``: take the check's capture;
        :data:`FAILED` when it raised (logged and counted).
    :param similarity: ``similarity(check, args, kwargs, recorded, current=...)``: the
        user's compare of ``current`` (default: captured now) with ``recorded``, 0.0
        when it raised.
    :param count: Add one to a counter of ``Engine.stats``.
    """

    tools: ToolRegistry
    tolerance: float
    context: Any
    arguments: Callable[[Node], CallSpec]
    capture: Callable[[Check[Any], tuple[Any, ...], dict[str, Any]], Any]
    similarity: Callable[..., float]
    count: Callable[[str], None]


class _Leaves(Mapping[str, Any]):
    """
    A capture's leaves as sources, each read when asked for (and kept).

    A candidate's bindings read one or two sources of its capture: following their
    paths costs less than reading every leaf of every candidate's capture.
    """

    def __init__(self, capture: Any) -> None:
        self._capture = capture
        self._found: dict[str, float | None] = {}
        self._all: dict[str, float] | None = None

    def _get(self, key: str) -> float | None:
        if key not in self._found:
            self._found[key] = capture_leaf(self._capture, key)
        return self._found[key]

    def __getitem__(self, key: str) -> Any:
        value = self._get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.startswith('capture') and self._get(key) is not None

    def _every(self) -> dict[str, float]:
        if self._all is None:
            self._all = capture_leaves(Snapshot(user=self._capture))
        return self._all

    def __iter__(self) -> Iterator[str]:
        return iter(self._every())

    def __len__(self) -> int:
        return len(self._every())


class CaptureSenses:
    """
    How the Engine sees the world: user captures, judged by the user's ``compare``.

    :param calls: What the engine lends the walk (its tools, captures, counters).
    :param run: The call's state.
    """

    def __init__(self, calls: Calls, run: Run) -> None:
        self._calls = calls
        self._run = run
        self._seen: dict[Any, Observation | None] = {}
        self._pending: dict[int, Call] = {}
        self.calls: dict[int, Call] = {}
        """Node id -> the call a passing candidate makes (bound arguments set)."""

    def begin(self) -> None:
        """Start judging a new step: captures are taken afresh."""
        self._seen = {}
        self._pending = {}

    def _tool(self, node: Node) -> Tool | None:
        return self._calls.tools.get(node.step.tool, node.step.type_name)

    def elements(self, snapshot: Snapshot | None) -> dict[str, float]:
        """Return a capture's leaves (:func:`~.captures.capture_leaves`)."""
        return capture_leaves(snapshot)

    def rewrite(self, recorded: Snapshot, values: Mapping[str, float]) -> Snapshot:
        """Return a copy of the recorded capture with the leaves in ``values`` set."""
        user = with_leaves(recorded.user, {capture_path(k): v for k, v in values.items()})
        return Snapshot(features=recorded.features, stamps=recorded.stamps,
                        taken_at=recorded.taken_at, user=user)

    def scope(self, node: Node, post: bool) -> Hashable | None:
        """Return the capture function of the step's pre (post) check: its shift is its own."""
        tool = self._tool(node)
        check = None if tool is None else (tool.post_check if post else tool.pre_check)
        return None if check is None else check.capture

    def settled(self, node: Node, pre: Mapping[str, float],
                post: Mapping[str, float]) -> Iterable[str]:
        """
        Return the post leaves the step moved at recording.

        With the same capture function before and after, a leaf that differs
        beyond ``binding_tolerance``; with different ones, every post leaf.
        """
        tool = self._tool(node)
        same = tool is not None and tool.pre_check is not None and \
            tool.post_check is not None and tool.post_check.capture is tool.pre_check.capture
        before = pre if same else {}
        tolerance = self._calls.tolerance
        return [key for key, value in post.items()
                if key not in before or abs(value - before[key]) > tolerance]

    def observe(self, node: Node) -> Observation | None:
        """Return the candidate's pre-check capture (one per tool and recorded arguments)."""
        calls = self._calls
        recorded = node.step
        tool = self._tool(node)
        if tool is None or recorded.kind is not ToolKind.FUNCTION or \
                recorded.status is not StepStatus.SUCCEEDED:
            return None
        if (tool.pre_check is None) != (recorded.pre is None):
            return None
        try:
            call_args, call_kwargs = calls.arguments(node).resolve(self._run.params)
        except MissingParamError:
            return None
        except Exception:  # noqa: BLE001 - a payload this code cannot read
            _log.exception('cannot decode the arguments of node %d', node.id)
            return None
        if tool.is_method:
            call_args = (calls.context, *call_args)
        self._pending[node.id] = (tool, call_args, call_kwargs)
        if tool.pre_check is None:
            return _UNCHECKED
        key = (tool.name, recorded.payload)
        if key not in self._seen:
            current = calls.capture(tool.pre_check, call_args, call_kwargs)
            self._seen[key] = None if current is FAILED else Observation(
                Snapshot(user=current), _Leaves(current))
        return self._seen[key]

    def compare(self, node: Node, expected: Snapshot | None, seen: Observation,
                bound: Bound | None) -> Compared:
        """Compare with the user's check; a bound candidate's call gets its bound arguments."""
        tool, call_args, call_kwargs = self._pending[node.id]
        if tool.pre_check is None:
            self.calls[node.id] = (tool, call_args, call_kwargs)
            return Compared(True, -1.0)
        assert expected is not None
        args, kwargs = call_args, call_kwargs
        if bound is not None and bound.values:
            plain = call_args[1:] if tool.is_method else call_args
            try:
                call = with_leaves({'args': list(plain), 'kwargs': dict(call_kwargs)},
                                   {tuple(parse_path(f)): v for f, v in bound.values.items()})
            except (KeyError, IndexError, TypeError, ValueError) as err:
                _log.warning('node %d: cannot apply its bindings (%r); not replayed',
                             node.id, err)
                return Compared(False, failure=CheckFailure(
                    '', math.inf, 0.0, math.inf,
                    f'cannot apply the bindings of node {node.id}: {err!r}', FailureKind.MISSING))
            rebound = tuple(call['args'])
            args = (call_args[0], *rebound) if tool.is_method else rebound
            kwargs = call['kwargs']
        similarity = self._calls.similarity(tool.pre_check, call_args, call_kwargs,
                                            expected.user, current=seen.now.user)
        if similarity <= 0.0:
            return Compared(False)
        self.calls[node.id] = (tool, args, kwargs)
        return Compared(True, -similarity)


_UNCHECKED = Observation(Snapshot(), {})
"""What a step recorded without a pre-check sees: nothing to compare."""


class EngineWalk:
    """
    The engine's side of one walk: judge with user checks, execute Python tools.

    :param calls: What the engine lends the walk.
    :param run: The call's state.
    :param plans: The task's plans.
    :param order: The engine's candidates in rank order.
    """

    def __init__(self, calls: Calls, run: Run, plans: Plans, order: RankOrder) -> None:
        self._calls = calls
        self._run = run
        self._order = order
        self._senses = CaptureSenses(calls, run)
        self._judge = BindingJudge(plans=plans, params={}, senses=self._senses)

    def prepare(self, reporter: Any) -> None:
        """Nothing to wait for: user checks capture on demand."""

    def pick(self, candidates: Sequence[Node], step: int) -> Verdict:
        """
        Return the candidates whose pre-check passes, with distance = -similarity.

        They are tried in rank order, and the first at similarity 1.0 (the most a
        compare can say) ends the search: no later candidate would be chosen.
        """
        self._senses.begin()
        passing, failures = self._judge.pick(self._order(candidates), step, enough=-1.0)
        if passing:
            return Verdict(passing)
        if candidates:
            why = f': {failures[0][1].reason}' if failures else ''
            return Verdict((), Miss(FailureKind.PRE_CHECK,
                                    f'no recorded step passed its pre-check at step {step}{why}'))
        return Verdict((), Miss(FailureKind.NO_CANDIDATE, 'no cached trajectory' if step == 0
                                else f'nothing learned after step {step - 1}'))

    def execute(self, node: Node, step: int, cancel: Cancel) -> Ran:
        """Call the tool with the recorded (or rebound) arguments; a raise is a failed step."""
        count = self._calls.count
        tool, call_args, call_kwargs = self._senses.calls[node.id]
        bound = self._judge.sending(node)
        if bound is not None and bound.substitutions:
            self._run.substitutions.extend(bound.substitutions)
            count('steps_rebound')
            _log.info('step %d (%s) rebound: %s', step, tool.name,
                      ', '.join(s.describe() for s in bound.substitutions))
        call_args, call_kwargs = _own_copy(tool, call_args, call_kwargs)
        self._run.in_tool += 1
        try:
            tool.func(*call_args, **call_kwargs)
        except Exception as err:
            count('tool_errors')
            _log.exception('replayed step %d (%s) raised; handing off', step, tool.name)
            return Ran(StepStatus.FAILED, time.monotonic(), f'raised {err!r}')
        finally:
            self._run.in_tool -= 1
        count('steps_replayed')
        self._judge.ran(node)
        return Ran(StepStatus.SUCCEEDED, time.monotonic())

    def post_check(self, node: Node, step: int, ended: float) -> Miss | None:
        """Capture the post-check now and compare it with the recorded one."""
        tool, call_args, call_kwargs = self._senses.calls[node.id]
        if tool.post_check is None or node.step.post is None:
            return None
        try:
            expected = self._judge.expected_post(node)
        except (KeyError, IndexError, TypeError, ValueError):
            _log.exception('cannot move the recorded post-check capture of node %d', node.id)
            return Miss(FailureKind.POST_CHECK, f'post-check failed after step {step}')
        assert expected is not None
        if self._calls.similarity(tool.post_check, call_args, call_kwargs,
                                  expected.user) > 0.0:
            return None
        return Miss(FailureKind.POST_CHECK, f'post-check failed after step {step}')

    def event(self, *, kind: StepEvent, step: int, trajectory_id: int = 0, detail: str = '',
              failure: Any = None) -> None:
        """Log what the node would publish as an event."""
        _log.debug('task %s: %s: %s', self._run.task, kind.value, detail)

    def progress(self, *, step: int, total: int, detail: str) -> None:
        """Nothing to report: the engine has no feedback channel."""


def _own_copy(tool: Tool, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """
    Return a deep copy of a replayed call's arguments (``self`` of a method aside).

    Decoded arguments are kept per learned step between calls: the tool may change
    what it is given without changing what the next replay sends. Objects that
    cannot be copied (kept by reference in a memory store, e.g. a lock) are given
    as they are, as the memory store always did.
    """
    head, rest = (args[:1], args[1:]) if tool.is_method else ((), args)
    try:
        return (*head, *copy.deepcopy(rest)), copy.deepcopy(kwargs)
    except Exception:  # noqa: BLE001 - not copyable: the object itself, as recorded
        return args, kwargs


@dataclass(frozen=True)
class Ran:
    """How a replayed Python call ended (the walk's ``Outcome``)."""

    status: StepStatus
    ended: float
    detail: str = ''
