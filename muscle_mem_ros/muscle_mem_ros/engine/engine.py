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
  similarity (``compare`` may return a float up to 1.0; ``True`` counts as
  1.0), then most successes, then most recent. The original took insertion
  order. Candidates are tried in that order of successes and recency
  (:class:`~muscle_mem_ros.replay.ranking.RankOrder`), and the first whose compare
  says True (or 1.0) is taken without running the checks of the rest: a call
  costs the checks it needs, not one per learned run.
* Resume: an agent that declares it (see :meth:`Engine.set_agent`) is told
  where the replay stopped and why, so it can continue instead of restarting.
* A check whose ``capture`` or ``compare`` raises fails safe: that candidate
  is not replayed, the error is logged and counted in :attr:`Engine.stats`.
  A replayed tool that raises hands off to the agent the same way (the
  original raised). After a failed post-check the steps learned after that one
  are tried first (a recovery the agent taught replays), and only when none
  passes its pre-check does the agent take over. The walk and its rules are
  :mod:`muscle_mem_ros.replay.walk`, shared with the ROS node.
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

Bindings (issue 10; the rules are :mod:`muscle_mem_ros.bindings.rules`, shared with the
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

from collections.abc import Callable
from dataclasses import fields
import functools
import inspect
import json
import logging
import math
import os
import threading
import time
from typing import Any, TypeVar

from .arguments import CallSpec, infer
from .captures import capture_leaves
from .metrics import EngineStats, Metrics
from .tools import Tool, ToolRegistry
from .walking import Calls, EngineWalk, FAILED, Run
from ..bindings.learning import follow, Learner, no_plans, Plans
from ..bindings.rules import DEFAULT_MAX_SHIFT, Substitution
from ..checks.tolerance import Check, user_similarity
from ..errors import StoreError
from ..records import Node, Snapshot, Step, ToolKind
from ..replay.ranking import RankOrder
from ..replay.walk import walk, WalkResult
from ..resume import accepts_resume, Resume
from ..store import MemoryStore, open_store, Store

__all__ = ['Engine']

_log = logging.getLogger(__name__)

F = TypeVar('F', bound=Callable[..., Any])
_UNSET = object()


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
        self._order = RankOrder()
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
        self._run: Run | None = None
        self._owner: threading.Thread | None = None
        self._refs: dict[bytes, CallSpec] = {}
        self._specs: dict[int, CallSpec] = {}
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

        Each :class:`~muscle_mem_ros.bindings.rules.Substitution` names the step, tool,
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
            return FAILED

    def _record_call(self, run: Run, tool: Tool, args: tuple[Any, ...],
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
        if pre is FAILED or post is FAILED:
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

    def _spec_of(self, node: Node) -> CallSpec:
        """Return a learned step's decoded arguments (decoded once per step, then kept)."""
        spec = self._specs.get(node.id)
        if spec is None:
            spec = self._specs[node.id] = self._spec(node.step.payload)
        return spec

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
        run = Run(task=_task_key(tags), params=dict(params) if params else None)
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

    def _walk(self, run: Run, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        calls = Calls(tools=self._registry, tolerance=self._tolerance, context=self._context,
                      arguments=self._spec_of, capture=self._capture,
                      similarity=self._similarity, count=self._count)
        side = EngineWalk(calls, run, self._plans_of(run.task), self._order)
        result = walk(store=self._store, task=run.task, variant='', judge=side, executor=side,
                      reporter=side, measure=self.metrics.measure)
        if result.complete:
            return self._hit(run, result)
        return self._handoff(run, args, kwargs, result.resume)

    def _plans_of(self, task: str) -> Plans:
        """
        Return the bindings of a task's learned steps (a store that cannot be read: none).

        The task's learner reads only trajectories it has not seen
        (:func:`..bindings.learning.follow`); a later step's capture is its own, so no plan
        checks sources ahead.
        """
        if not self._infer_bindings:
            return no_plans()
        tolerance = self._tolerance
        try:
            learner = self._learners[task] = follow(
                self._learners.get(task), self._store, task=task, variant='',
                params=lambda t: {}, new=lambda: Learner(
                    infer=True, max_shift=self._max_shift, tolerance=lambda key: tolerance,
                    elements=capture_leaves, ahead=False))
        except Exception:  # noqa: BLE001 - a store that cannot be read: literal replay
            _log.exception('cannot learn the bindings of task %s', task)
            return no_plans()
        return learner.plans

    def _similarity(self, check: Check[Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                    recorded: Any, current: Any = _UNSET) -> float:
        """Compare ``current`` (default: capture now) with ``recorded``; errors fail safe."""
        if current is _UNSET:
            current = self._capture(check, args, kwargs)
        if current is FAILED:
            return 0.0
        try:
            with self.metrics.measure('compare'):
                return user_similarity(check.compare(current, recorded))
        except Exception:
            self._count('check_errors')
            _log.exception('check compare %r raised; candidate skipped', check.compare)
            return 0.0

    def _hit(self, run: Run, result: WalkResult) -> bool:
        if result.trajectory_id:
            self._store.note_replay(trajectory_id=result.trajectory_id)
        self._store.note_outcome(task=run.task, hit=True)
        self._count('hits')
        _log.info('task %s: cache hit, %d steps replayed', run.task, result.steps_replayed)
        return True

    def _handoff(self, run: Run, args: tuple[Any, ...], kwargs: dict[str, Any],
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

    def _finish(self, run: Run, *, learn: bool) -> None:
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
