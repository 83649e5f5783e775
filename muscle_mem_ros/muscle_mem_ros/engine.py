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
The muscle-mem compatible Python API: ``Engine``.

``from muscle_mem_ros import Check, Engine`` runs code written for the original
muscle-mem 0.1.0 SDK unchanged, with the same builder errors, decorators,
``tags=``/``params=`` and return value. What differs, on purpose:

* Learned runs form a tree per task (per ``tags``). A replay walks it step
  by step; when no recorded step passes its pre-check at step i, replay stops
  there (nothing past the failed check runs, no exception escapes), the agent
  is called, and the steps it records become a branch under step i-1.
  Identical executions are stored once; a cache hit records nothing new (the
  original appended a trajectory on every call, so its lookups slowed down
  forever).
* Among the recorded steps whose checks pass, the best wins: highest
  similarity (``compare`` may return a float; ``True`` counts as 1.0), then
  most successes, then most recent. The original took insertion order.
* Resume: an agent that declares it (see :meth:`Engine.set_agent`) is told
  where the replay stopped and why, so it can continue instead of restarting.
* A check whose ``capture`` or ``compare`` raises fails safe: that candidate
  is not replayed, the error is logged and counted in :attr:`Engine.stats`.
  A replayed tool that raises hands off to the agent the same way (the
  original raised). After a failed post-check the steps learned after that one
  are tried first (a recovery the agent taught replays), and only when none
  passes its pre-check does the agent take over. The walk and its rules are
  :mod:`muscle_mem_ros.walk`, shared with the ROS node.
* ``Engine(store='cache.db')`` keeps what it learns in SQLite. Captures and
  call arguments are stored as JSON data and NumPy arrays, never pickled, so
  opening a file from elsewhere runs no code from it; a capture or argument
  that is anything else is not learned (counted in ``record_errors``) unless
  the engine is built with ``allow_pickle=True``, which pickles it into the
  file and unpickles it on read: only for files you trust like your own code.
  The default is in memory, like the original, where objects are kept as they
  are.
* A run whose agent raises is not stored; a tool call that raises is not
  recorded (the agent sees the exception as before).

Bindings (issue 10; the rules are :mod:`muscle_mem_ros.bindings`, shared with the
ROS node). Besides arguments equal to a task parameter (the original's rule, kept
as it is), a numeric argument derived from what the pre-check captured is rebound
at replay:

* Sources are the numeric leaves of the step's pre-check capture when it is JSON
  data (numbers, lists, tuples, dicts with string keys, NumPy arrays):
  ``capture:cube`` for ``{'cube': 0.3}``, ``capture:pos[0]`` for
  ``{'pos': array([0.3, 0.1])}``, ``capture:[1]`` for a tuple, ``capture`` for a
  capture that is a number. Fields are the numeric leaves of the call's arguments
  as ``Step.payload_json`` shows them: ``args[0]``, ``kwargs.x``, ``args[1].pose.x``,
  ``args[2][1]`` (tuples and arrays are lists there).
* Inferred from two or more recordings of the same step (the steps at the same
  depth of trajectories of the same shape): an argument leaf that varies, whose
  difference to a capture leaf that also varies is the same in every recording,
  is bound with that offset. "The same" means within ``binding_tolerance``
  (absolute, default 1e-6): the engine has no per-feature tolerance. An argument
  that varied inconsistently is never bound. Switch it off with
  ``Engine(infer_bindings=False)``.
* At replay the user's ``compare(current, candidate)`` is opaque, so a bound step
  is compared against its recorded capture with the bound source leaves replaced
  by their current values, provided each moved at most ``binding_max_shift``
  (default 0.1, in the capture's units; None = any) from the recording; every
  other leaf is judged by ``compare`` as recorded. The tool is called with the
  bound arguments set to ``current source + offset`` (the capture is taken with
  the recorded arguments). What was substituted is in
  :attr:`Engine.substitutions` (the last call's) and counted in
  ``stats.steps_rebound``; the return value is unchanged.
* The walk keeps a shift per capture function and leaf, as the node keeps one per
  sensor element: a bound source leaf keeps the shift seen at its pre-check, a
  post-check leaf that equalled a bound argument at recording is expected moved
  by that argument's shift, and a leaf the step moved at recording ends its
  shift. Later checks by the same capture function are given the recorded
  capture moved by the shift (the arm that went to the moved cube is where the
  next step expects it). ``ahead`` range checks of the node are not done: a
  source leaf that an earlier step's capture also reads is compared there as
  recorded.
* Not done: filing a rebound recording into the branch it explains (the second
  recording is a sibling; from then on the step replays).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import copy
from dataclasses import dataclass, fields
import functools
import inspect
import json
import logging
import math
import os
import threading
import time
from typing import Any, TypeVar

import numpy as np

from .bindings import Bound, DEFAULT_MAX_SHIFT, parse_path, Plan, resolve, Substitution
from .checks import Check, user_similarity
from .errors import StoreError
from .learning import follow, Learner
from .metrics import EngineStats, Metrics
from .params import CallSpec, infer, MissingParamError
from .records import Node, Snapshot, Step, StepStatus, ToolKind
from .resume import accepts_resume, FailureKind, Resume
from .store import MemoryStore, open_store, Recording, Store
from .tools import Tool, ToolRegistry
from .walk import Miss, StepEvent, Verdict, walk, WalkResult

__all__ = ['capture_leaves', 'Engine', 'EngineStats', 'Resume', 'Substitution']

_log = logging.getLogger(__name__)

F = TypeVar('F', bound=Callable[..., Any])
_FAILED = object()
_UNSET = object()


class _Run:
    """State of one engine call."""

    def __init__(self, *, task: str, params: dict[str, Any] | None) -> None:
        self.task = task
        self.params = params
        self.recording: Recording | None = None
        self.learnable = True
        self.in_tool = 0
        self.substitutions: list[Substitution] = []


def _task_key(tags: list[str] | tuple[str, ...] | None) -> str:
    return json.dumps(list(tags or []))


class Engine:
    """
    Record an agent's tool calls per task and replay them while checks pass.

    :param store: Where to keep what is learned: a :class:`~muscle_mem_ros.store.Store`,
        a path to an SQLite file (persistent), or None / ':memory:' for memory
        (the default).
    :param allow_pickle: Let a persistent store pickle captures and arguments that
        are not JSON data or NumPy arrays, and unpickle them when reading (a
        pickle runs code when loaded: only for a file you trust). Off by
        default; a Store instance must have been opened with it.
    :param infer_bindings: Rebind arguments derived from a pre-check capture plus a
        constant offset, inferred from two recordings (module docstring).
    :param binding_max_shift: Largest move of a bound capture leaf from its recorded
        value that still replays (in the capture's units); None = any.
    :param binding_tolerance: How close differences must be to count as constant.
    :raises ValueError: ``binding_max_shift`` negative or not a number, or
        ``binding_tolerance`` not positive.
    """

    def __init__(
        self, *, store: Store | str | os.PathLike[str] | None = None, allow_pickle: bool = False,
        infer_bindings: bool = True, binding_max_shift: float | None = DEFAULT_MAX_SHIFT,
        binding_tolerance: float = 1e-6,
    ) -> None:
        if binding_max_shift is not None and not (
                isinstance(binding_max_shift, (int, float)) and binding_max_shift >= 0
                and not isinstance(binding_max_shift, bool)):
            raise ValueError(f'binding_max_shift must be a number >= 0 or None, got '
                             f'{binding_max_shift!r}')
        if isinstance(binding_tolerance, bool) or not isinstance(
                binding_tolerance, (int, float)) or not binding_tolerance > 0 or \
                not math.isfinite(binding_tolerance):
            raise ValueError(f'binding_tolerance must be a finite number > 0, got '
                             f'{binding_tolerance!r}')
        self._infer_bindings = bool(infer_bindings)
        self._max_shift = None if binding_max_shift is None else float(binding_max_shift)
        self._tolerance = float(binding_tolerance)
        self._learners: dict[str, Learner] = {}
        self._substitutions: tuple[Substitution, ...] = ()
        if isinstance(store, Store):
            if allow_pickle and not store.allow_pickle:
                raise ValueError('allow_pickle=True needs a store opened with allow_pickle=True')
            self._store = store
        else:
            self._store = open_store(store, allow_pickle=allow_pickle)
        self._registry = ToolRegistry()
        self._agent: Callable[..., Any] | None = None
        self._resumable = False
        self._context: Any = None
        self._finalized = False
        self._call_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._counts = {f.name: 0 for f in fields(EngineStats)}
        self._run: _Run | None = None
        self._owner: threading.Thread | None = None
        self._refs: dict[bytes, CallSpec] = {}
        self.metrics = Metrics()

    @property
    def store(self) -> Store:
        """Return the store this engine learns into."""
        return self._store

    @property
    def finalized(self) -> bool:
        """Return True once :meth:`finalize` succeeded."""
        return self._finalized

    @property
    def substitutions(self) -> tuple[Substitution, ...]:
        """
        Return what the last call's replay recomputed, one record per bound argument.

        Each :class:`~muscle_mem_ros.bindings.Substitution` names the step, tool,
        field (``args[0]``), source (``capture:cube``), and the recorded and sent values.
        """
        return self._substitutions

    @property
    def stats(self) -> EngineStats:
        """Return a snapshot of the counters."""
        with self._stats_lock:
            return EngineStats(**self._counts)

    def _count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            self._counts[name] += n

    def set_agent(self, agent: Callable[..., Any]) -> Engine:
        """
        Set the agent called when the cache cannot finish a task.

        The agent is called with the engine call's arguments (without ``tags``
        and ``params``). Opt-in resume: if the agent has a parameter named
        ``resume`` that can be passed by keyword, or an attribute
        ``supports_resume = True`` (then it must accept ``resume=``), it is
        called with ``resume=Resume(step, reason, replayed)`` after a partial
        replay, and ``resume=None`` when nothing was replayed. Other agents are
        simply called again and redo the task from the current state.
        """
        if self._finalized:
            raise ValueError('Engine is finalized and cannot be modified')
        self._agent = agent
        self._resumable = accepts_resume(agent)
        return self

    def set_context(self, method_instance: Any) -> Engine:
        """Set the object injected as ``self`` when replaying method tools."""
        if self._finalized:
            raise ValueError('Engine is finalized and cannot be modified')
        self._context = method_instance
        return self

    def finalize(self) -> Engine:
        """Check that the engine has tools, an agent and (for methods) a context."""
        if len(self._registry) == 0:
            raise ValueError('Engine must have at least one tool. Use engine.function() or '
                             'engine.method() to register tools')
        if self._agent is None:
            raise ValueError('Engine must have an agent to fall back to. Use '
                             'engine.set_agent(your_agent)')
        if self._context is None and self._registry.has_methods():
            raise ValueError('Engine expects to use method-based tools, but no runtime value was '
                             "provided for 'self'. Use "
                             'engine.set_context(your_dependency_instance)')
        self._finalized = True
        return self

    def function(self, pre_check: Check[Any] | Callable[..., Any] | None = None,
                 post_check: Check[Any] | None = None) -> Any:
        """
        Decorate a function tool; ``@engine.function`` works with or without parentheses.

        :param pre_check: Check captured before each call; replay requires it to pass.
        :param post_check: Check captured after each call; a failing one after a
            replayed step hands control to the agent.
        """
        if self._finalized:
            raise ValueError('Engine is finalized and cannot register new functions')
        return self._decorate(pre_check, post_check, is_method=False)

    def method(self, pre_check: Check[Any] | Callable[..., Any] | None = None,
               post_check: Check[Any] | None = None) -> Any:
        """Decorate a method tool; ``self`` is not stored, the context replaces it on replay."""
        if self._finalized:
            raise ValueError('Engine is finalized and cannot register new methods')
        return self._decorate(pre_check, post_check, is_method=True)

    def tool(self, pre_check: Check[Any] | Callable[..., Any] | None = None,
             post_check: Check[Any] | None = None) -> Any:
        """Decorate a tool, the launch-era name: a method if its first parameter is ``self``."""
        if self._finalized:
            raise ValueError('Engine is finalized and cannot register new functions')

        def decorate(func: F) -> F:
            names = list(inspect.signature(func).parameters)
            is_method = bool(names) and names[0] == 'self'
            wrapped: F = self._decorate(pre_check, post_check, is_method=is_method)(func)
            return wrapped

        if callable(pre_check) and not isinstance(pre_check, Check):
            func, pre_check = pre_check, None
            return decorate(func)
        return decorate

    def _decorate(self, pre_check: Any, post_check: Any, *, is_method: bool) -> Any:
        if callable(pre_check) and not isinstance(pre_check, Check):
            return self._wrap(pre_check, None, post_check, is_method=is_method)

        def decorator(func: F) -> F:
            return self._wrap(func, pre_check, post_check, is_method=is_method)

        return decorator

    def _wrap(self, func: F, pre_check: Any, post_check: Any, *, is_method: bool) -> F:
        tool = self._registry.register(func, is_method=is_method, pre_check=pre_check,
                                       post_check=post_check)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            run = self._run
            if run is None or run.recording is None or run.in_tool:
                return func(*args, **kwargs)
            return self._record_call(run, tool, args, kwargs)

        return wrapper  # type: ignore[return-value]

    def _capture(self, check: Check[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            with self.metrics.measure('capture'):
                return check.capture(*args, **kwargs)
        except Exception:
            self._count('check_errors')
            _log.exception('check capture %r raised', check.capture)
            return _FAILED

    def _record_call(self, run: _Run, tool: Tool, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
        pre = self._capture(tool.pre_check, args, kwargs) if tool.pre_check else None
        start = time.monotonic()
        run.in_tool += 1
        try:
            result = tool.func(*args, **kwargs)
        finally:
            run.in_tool -= 1
        duration = time.monotonic() - start
        post = self._capture(tool.post_check, args, kwargs) if tool.post_check else None
        if pre is _FAILED or post is _FAILED:
            run.learnable = False
            return result
        try:
            spec = infer(args[1:] if tool.is_method else args, kwargs, run.params)
            step = Step(tool=tool.name, kind=ToolKind.FUNCTION, type_name=tool.type_name,
                        payload=self._payload(spec), payload_json=spec.describe(),
                        pre=Snapshot(user=pre) if tool.pre_check else None,
                        post=Snapshot(user=post) if tool.post_check else None,
                        duration=duration)
            assert run.recording is not None
            run.recording.append(step)
            self._count('steps_recorded')
        except Exception:  # noqa: BLE001 - unpicklable arguments, store failures
            self._count('record_errors')
            run.learnable = False
            _log.exception('cannot record a call of %s; this run will not be learned', tool.name)
        return result

    def _payload(self, spec: CallSpec) -> bytes:
        try:
            return spec.encode(allow_pickle=self._store.allow_pickle)
        except Exception:  # noqa: BLE001 - arguments that cannot be stored
            if not isinstance(self._store, MemoryStore):
                raise
            ref = b'ref:%d' % len(self._refs)
            self._refs[ref] = spec
            return ref

    def _spec(self, payload: bytes) -> CallSpec:
        ref = self._refs.get(payload)
        if ref is not None:
            return ref
        return CallSpec.decode(payload, allow_pickle=self._store.allow_pickle)

    def __call__(self, *args: Any, tags: list[str] | None = None,
                 params: dict[str, Any] | None = None, **kwargs: Any) -> bool:
        """
        Run a task: replay what was learned while checks pass, else call the agent.

        :param args: Passed to the agent unchanged.
        :param tags: Cache bucket; runs with different tags never share trajectories.
        :param params: Task parameters; recorded arguments equal to one replay with
            this run's value.
        :param kwargs: Passed to the agent unchanged.
        :return: True only if the whole task was replayed from the cache.
        """
        if not self._finalized:
            self.finalize()
        run = _Run(task=_task_key(tags), params=dict(params) if params else None)
        if self._run is not None and self._owner is threading.current_thread():
            raise RuntimeError('engine calls do not nest: this thread is already running a task')
        self._call_lock.acquire()
        self._owner = threading.current_thread()
        self._run = run
        self._count('calls')
        self._substitutions = ()
        try:
            return self._walk(run, args, kwargs)
        finally:
            self._substitutions = tuple(run.substitutions)
            self._run = None
            self._owner = None
            self._call_lock.release()

    def _walk(self, run: _Run, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        side = _EngineSide(self, run)
        result = walk(store=self._store, task=run.task, variant='', judge=side, executor=side,
                      reporter=side, locate_trajectories=False, measure=self.metrics.measure)
        if result.complete:
            return self._hit(run, result)
        return self._handoff(run, args, kwargs, result.resume)

    def _plans_for(self, task: str) -> Mapping[int, Plan]:
        """
        Return the bindings of a task's learned steps (node id -> plan with bindings).

        The task's learner reads only trajectories it has not seen
        (:func:`.learning.follow`); a later step's capture is its own, so no plan
        checks sources ahead.
        """
        if not self._infer_bindings:
            return {}
        tolerance = self._tolerance
        learner = self._learners[task] = follow(
            self._learners.get(task), self._store, task=task, variant='', params=lambda t: {},
            new=lambda: Learner(infer=True, max_shift=self._max_shift,
                                tolerance=lambda key: tolerance, elements=capture_leaves,
                                ahead=False))
        return learner.plans

    def _current(self, check: Check[Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 memo: dict[Any, Any], memo_key: Any = None) -> Any:
        """Capture now, memoized per decision (``_FAILED`` when the capture raised)."""
        if memo_key is not None and memo_key in memo:
            return memo[memo_key]
        current = self._capture(check, args, kwargs)
        if memo_key is not None:
            memo[memo_key] = current
        return current

    def _similarity(self, check: Check[Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                    recorded: Any, memo: dict[Any, Any], memo_key: Any = None,
                    current: Any = _UNSET) -> float:
        """Capture now (memoized per decision) and compare; errors count and fail safe."""
        if current is _UNSET:
            current = self._current(check, args, kwargs, memo, memo_key)
        if current is _FAILED:
            return 0.0
        try:
            with self.metrics.measure('compare'):
                return user_similarity(check.compare(current, recorded))
        except Exception:
            self._count('check_errors')
            _log.exception('check compare %r raised; candidate skipped', check.compare)
            return 0.0

    def _hit(self, run: _Run, result: WalkResult) -> bool:
        if result.trajectory_id:
            self._store.note_replay(trajectory_id=result.trajectory_id)
        self._store.note_outcome(task=run.task, hit=True)
        self._count('hits')
        _log.info('task %s: cache hit, %d steps replayed', run.task, result.steps_replayed)
        return True

    def _handoff(self, run: _Run, args: tuple[Any, ...], kwargs: dict[str, Any],
                 stopped: Resume) -> bool:
        index = stopped.step
        reason = stopped.reason
        self._count('misses')
        if stopped.replayed:
            self._count('handoffs')
        _log.info('task %s: handing off to the agent at step %d: %s', run.task, index, reason)
        try:
            params_json = json.dumps(run.params or {}, sort_keys=True, default=repr)
            run.recording = self._store.begin(
                task=run.task, variant='', params_json=params_json,
                parent=stopped.last_node)
        except StoreError:
            self._count('record_errors')
            _log.exception('cannot start a recording; the agent runs unrecorded')
        resume = stopped if index else None
        try:
            with self.metrics.measure('agent'):
                if self._resumable:
                    self._agent(*args, resume=resume, **kwargs)  # type: ignore[misc]
                else:
                    self._agent(*args, **kwargs)  # type: ignore[misc]
        except BaseException:
            self._finish(run, learn=False)
            raise
        self._finish(run, learn=run.learnable)
        self._store.note_outcome(task=run.task, hit=False)
        return False

    def _finish(self, run: _Run, *, learn: bool) -> None:
        recording, run.recording = run.recording, None
        if recording is None:
            return
        try:
            if learn and (recording.steps or recording.parent is not None):
                info = recording.commit()
                _log.info('task %s: learned trajectory %d (%d steps)', run.task, info.id,
                          len(info.node_ids))
            else:
                recording.discard()
        except StoreError:
            self._count('record_errors')
            _log.exception('cannot store what the agent did for task %s', run.task)


class _EngineSide:
    """
    The engine's side of one walk: judge with user checks, execute Python tools.

    Implements the :mod:`.walk` protocols (``Judge``, ``Executor``, ``Reporter``).
    """

    def __init__(self, engine: Engine, run: _Run) -> None:
        self._engine = engine
        self._run = run
        self._calls: dict[int, tuple[Tool, tuple[Any, ...], dict[str, Any]]] = {}
        self._bound: dict[int, Bound] = {}
        self._plans: Mapping[int, Plan] | None = None
        self._shift: dict[tuple[Any, str], float] = {}

    def _moved(self, capture: Any, recorded: Any,
               replaced: Mapping[str, float] | None = None) -> Any:
        """
        Return a recorded capture moved by the walk's shift, ``replaced`` leaves set outright.

        :param capture: The check's capture function (the shift is kept per function).
        :param recorded: The recorded capture.
        :param replaced: Source leaves already range-checked: set to their current values.
        :return: What ``compare`` is given as the candidate.
        :raises KeyError: a leaf path cannot be followed (also IndexError, TypeError).
        """
        changes: dict[tuple[str | int, ...], Any] = {}
        if self._shift:
            for key, value in capture_leaves(Snapshot(user=recorded)).items():
                delta = self._shift.get((capture, key))
                if delta is not None:
                    changes[_capture_path(key)] = value + delta
        for key, value in (replaced or {}).items():
            changes[_capture_path(key)] = value
        return _with_leaves(recorded, changes) if changes else recorded

    def _advance(self, tool: Tool, node: Node, plan: Plan | None, bound: Bound | None) -> None:
        """
        Update the walk's shift after a step ran (the rule of :func:`.bindings.advance`).

        A post leaf the step moved at recording (pre and post captures by the same
        function differ) is where the recording left it; a source leaf keeps the shift
        seen at the pre-check; a post leaf that followed a bound argument moves by that
        argument's shift. With different pre and post capture functions every post leaf
        not following an argument is taken as the recording left it.
        """
        pre_fn = tool.pre_check.capture if tool.pre_check is not None else None
        post_fn = tool.post_check.capture if tool.post_check is not None else None
        pre = capture_leaves(node.step.pre)
        post = capture_leaves(node.step.post)
        followed = dict(plan.follows) if plan is not None and bound is not None else {}
        if post_fn is not None:
            before = pre if post_fn is pre_fn else {}
            for key, value in post.items():
                if key not in followed and (key not in before or
                                            abs(value - before[key]) > self._engine._tolerance):
                    self._shift.pop((post_fn, key), None)
        if bound is None:
            return
        for key, value in bound.sources.items():
            if key in pre:
                self._shift[(pre_fn, key)] = value - pre[key]
        for key, path in followed.items():
            if path in bound.shifts and post_fn is not None:
                self._shift[(post_fn, key)] = bound.shifts[path]

    def _plan(self, node: Node) -> Plan | None:
        """Return ``node``'s bindings (the task's plans are learned once per walk)."""
        if self._plans is None:
            try:
                self._plans = self._engine._plans_for(self._run.task)
            except Exception:  # noqa: BLE001 - a store that cannot be read: literal replay
                _log.exception('cannot learn the bindings of task %s', self._run.task)
                self._plans = {}
        return self._plans.get(node.id)

    def prepare(self, reporter: Any) -> None:
        """Nothing to wait for: user checks capture on demand."""

    def pick(self, candidates: Sequence[Node], step: int) -> Verdict:
        """Return the candidates whose pre-check passes, with distance = -similarity."""
        engine = self._engine
        passing: list[tuple[Node, float]] = []
        memo: dict[Any, Any] = {}
        refused: list[str] = []
        self._bound = {}
        for node in candidates:
            recorded = node.step
            tool = engine._registry.get(recorded.tool, recorded.type_name)
            if tool is None or recorded.kind is not ToolKind.FUNCTION or \
                    recorded.status is not StepStatus.SUCCEEDED:
                continue
            try:
                call_args, call_kwargs = engine._spec(recorded.payload).resolve(self._run.params)
            except MissingParamError:
                continue
            except Exception:  # noqa: BLE001 - a payload this code cannot read
                _log.exception('cannot decode the arguments of node %d', node.id)
                continue
            if tool.is_method:
                call_args = (engine._context, *call_args)
            if tool.pre_check is None:
                if recorded.pre is not None:
                    continue
                similarity = 1.0
            else:
                if recorded.pre is None:
                    continue
                plan = self._plan(node)
                if plan is not None:
                    judged = self._judge_bound(node, plan, tool, call_args, call_kwargs, step,
                                               memo, refused)
                    if judged is None:
                        continue
                    similarity, call_args, call_kwargs = judged
                else:
                    try:
                        expected = self._moved(tool.pre_check.capture, recorded.pre.user)
                    except (KeyError, IndexError, TypeError, ValueError):
                        continue
                    similarity = engine._similarity(tool.pre_check, call_args, call_kwargs,
                                                    expected, memo,
                                                    (tool.name, recorded.payload))
                if similarity <= 0.0:
                    continue
            self._calls[node.id] = (tool, call_args, call_kwargs)
            passing.append((node, -similarity))
        if passing:
            return Verdict(passing)
        if candidates:
            why = f': {refused[0]}' if refused else ''
            return Verdict((), Miss(FailureKind.PRE_CHECK,
                                    f'no recorded step passed its pre-check at step {step}{why}'))
        return Verdict((), Miss(FailureKind.NO_CANDIDATE, 'no cached trajectory' if step == 0
                                else f'nothing learned after step {step - 1}'))

    def _judge_bound(self, node: Node, plan: Plan, tool: Tool, call_args: tuple[Any, ...],
                     call_kwargs: dict[str, Any], step: int, memo: dict[Any, Any],
                     refused: list[str],
                     ) -> tuple[float, tuple[Any, ...], dict[str, Any]] | None:
        """
        Judge a candidate under its bindings.

        :return: (similarity, arguments, keyword arguments) to call the tool with, or
            None when the capture failed or the bindings cannot explain the world
            (the reason is appended to ``refused``).
        """
        engine = self._engine
        recorded = node.step
        assert tool.pre_check is not None and recorded.pre is not None
        current = engine._current(tool.pre_check, call_args, call_kwargs, memo,
                                  (tool.name, recorded.payload))
        if current is _FAILED:
            return None
        key = ('leaves', tool.name, recorded.payload)
        if key not in memo:  # the capture's leaves, read once per capture
            memo[key] = capture_leaves(Snapshot(user=current))
        leaves = getattr(self._plans, 'leaves', lambda node_id: None)
        bound = resolve(plan, step, node, {}, Snapshot(user=current), elements=capture_leaves,
                        learned=leaves(node.id), current=memo[key])
        if bound.problem:
            _log.info('step %d: node %d not replayed: %s', step, node.id, bound.problem)
            refused.append(bound.problem)
            return None
        is_method = tool.is_method
        try:
            expected = self._moved(tool.pre_check.capture, recorded.pre.user, bound.sources)
            args = call_args[1:] if is_method else call_args
            call = _with_leaves({'args': list(args), 'kwargs': dict(call_kwargs)},
                                {tuple(parse_path(f)): v for f, v in bound.values.items()})
        except (KeyError, IndexError, TypeError, ValueError) as err:
            _log.warning('step %d: node %d: cannot apply its bindings (%r); not replayed',
                         step, node.id, err)
            refused.append(f'cannot apply the bindings of node {node.id}: {err!r}')
            return None
        similarity = engine._similarity(tool.pre_check, call_args, call_kwargs, expected, memo,
                                        current=current)
        if similarity <= 0.0:
            return None
        self._bound[node.id] = bound
        new_args = tuple(call['args'])
        return similarity, ((call_args[0], *new_args) if is_method else new_args), call['kwargs']

    def execute(self, node: Node, step: int, cancel: Any) -> _Ran:
        """Call the tool with the recorded (or rebound) arguments; a raise is a failed step."""
        engine = self._engine
        tool, call_args, call_kwargs = self._calls[node.id]
        bound = self._bound.get(node.id)
        if bound is not None and bound.substitutions:
            self._run.substitutions.extend(bound.substitutions)
            engine._count('steps_rebound')
            _log.info('step %d (%s) rebound: %s', step, tool.name,
                      ', '.join(s.describe() for s in bound.substitutions))
        self._run.in_tool += 1
        try:
            tool.func(*call_args, **call_kwargs)
        except Exception as err:
            engine._count('tool_errors')
            _log.exception('replayed step %d (%s) raised; handing off', step, tool.name)
            return _Ran(StepStatus.FAILED, time.monotonic(), f'raised {err!r}')
        finally:
            self._run.in_tool -= 1
        engine._count('steps_replayed')
        if bound is not None or self._shift:
            self._advance(tool, node, self._plan(node), bound)
        return _Ran(StepStatus.SUCCEEDED, time.monotonic())

    def post_check(self, node: Node, step: int, ended: float) -> Miss | None:
        """Capture the post-check now and compare it with the recorded one."""
        tool, call_args, call_kwargs = self._calls[node.id]
        if tool.post_check is None or node.step.post is None:
            return None
        try:
            expected = self._moved(tool.post_check.capture, node.step.post.user)
        except (KeyError, IndexError, TypeError, ValueError):
            _log.exception('cannot move the recorded post-check capture of node %d', node.id)
            return Miss(FailureKind.POST_CHECK, f'post-check failed after step {step}')
        if self._engine._similarity(tool.post_check, call_args, call_kwargs, expected, {}) > 0.0:
            return None
        return Miss(FailureKind.POST_CHECK, f'post-check failed after step {step}')

    def event(self, *, kind: StepEvent, step: int, trajectory_id: int = 0, detail: str = '',
              failure: Any = None) -> None:
        """Log what the node would publish as an event."""
        _log.debug('task %s: %s: %s', self._run.task, kind.value, detail)

    def progress(self, *, step: int, total: int, detail: str) -> None:
        """Nothing to report: the engine has no feedback channel."""


@dataclass(frozen=True)
class _Ran:
    """How a replayed Python call ended (the walk's ``Outcome``)."""

    status: StepStatus
    ended: float
    detail: str = ''


# -- Captures and arguments as leaves (bindings) -------------------------------------------------


def capture_leaves(snapshot: Snapshot | None) -> dict[str, float]:
    """
    Return the numeric leaves of a snapshot's user capture as binding sources.

    ``{'capture:cube': 0.3, 'capture:pos[0]': 0.1, ...}``; a capture that is a number
    itself is ``capture``. Dicts with string keys, lists, tuples and NumPy arrays are
    descended; booleans, non-finite numbers and other objects are not sources.

    :param snapshot: A recorded or current snapshot, or None.
    :return: Source -> value.
    """
    out: dict[str, float] = {}
    if snapshot is not None and snapshot.user is not None:
        _collect(snapshot.user, '', out)
    return {(f'capture:{path}' if path else 'capture'): value for path, value in out.items()}


def _collect(value: Any, prefix: str, out: dict[str, float]) -> None:
    if type(value).__module__ == 'numpy' and hasattr(value, 'tolist'):
        value = value.tolist()
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and key and not any(c in key for c in '.[]'):
                _collect(item, f'{prefix}.{key}' if prefix else key, out)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _collect(item, f'{prefix}[{i}]', out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value):
            out[prefix] = float(value)


def _capture_path(source: str) -> tuple[str | int, ...]:
    """Return the path inside a capture of a source from :func:`capture_leaves`."""
    return tuple(parse_path(source[len('capture:'):])) if source != 'capture' else ()


def _with_leaves(value: Any, values: Mapping[tuple[str | int, ...], Any]) -> Any:
    """
    Return a copy of ``value`` with the leaves at ``values``' paths replaced.

    Only the containers on a path are copied (dicts, lists, tuples, NumPy arrays);
    the recorded value is never changed.

    :raises KeyError: a path does not lead to a leaf (also IndexError, TypeError).
    """
    for path, leaf in values.items():
        value = _replace(value, path, leaf)
    return value


def _replace(value: Any, path: tuple[str | int, ...], leaf: Any) -> Any:
    if not path:
        return leaf
    head, rest = path[0], path[1:]
    if isinstance(value, np.ndarray):
        if not all(isinstance(i, int) for i in path) or len(path) != value.ndim:
            raise TypeError(f'path {list(path)} does not lead to an element of an array')
        array = value.copy()
        array[tuple(int(i) for i in path)] = leaf
        return array
    if isinstance(value, Mapping):
        if not isinstance(head, str) or head not in value:
            raise KeyError(head)
        mapping = copy.copy(value) if isinstance(value, dict) else dict(value)
        mapping[head] = _replace(value[head], rest, leaf)
        return mapping
    if isinstance(value, (list, tuple)) and isinstance(head, int):
        items = list(value)
        items[head] = _replace(items[head], rest, leaf)
        if isinstance(value, list):
            return items
        return type(value)(*items) if hasattr(value, '_fields') else type(value)(items)
    raise TypeError(f'cannot descend into {type(value).__name__} at {head!r}')
