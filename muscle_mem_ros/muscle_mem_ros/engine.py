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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
import functools
import inspect
import json
import logging
import os
import threading
import time
from typing import Any, TypeVar

from .checks import Check, user_similarity
from .errors import StoreError
from .metrics import EngineStats, Metrics
from .params import CallSpec, infer, MissingParamError
from .records import Node, Snapshot, Step, StepStatus, ToolKind
from .resume import accepts_resume, FailureKind, Resume
from .store import MemoryStore, open_store, Recording, Store
from .tools import Tool, ToolRegistry
from .walk import Miss, StepEvent, Verdict, walk, WalkResult

__all__ = ['Engine', 'EngineStats', 'Resume']

_log = logging.getLogger(__name__)

F = TypeVar('F', bound=Callable[..., Any])
_FAILED = object()


class _Run:
    """State of one engine call."""

    def __init__(self, *, task: str, params: dict[str, Any] | None) -> None:
        self.task = task
        self.params = params
        self.recording: Recording | None = None
        self.learnable = True
        self.in_tool = 0


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
    """

    def __init__(
        self, *, store: Store | str | os.PathLike[str] | None = None, allow_pickle: bool = False,
    ) -> None:
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
            return self._decorate(pre_check, post_check, is_method=is_method)(func)

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
        try:
            return self._walk(run, args, kwargs)
        finally:
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

    def _similarity(self, check: Check[Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                    recorded: Any, memo: dict[Any, Any], memo_key: Any = None) -> float:
        """Capture now (memoized per decision) and compare; errors count and fail safe."""
        if memo_key is not None and memo_key in memo:
            current = memo[memo_key]
        else:
            current = self._capture(check, args, kwargs)
            if memo_key is not None:
                memo[memo_key] = current
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

    def prepare(self, reporter: Any) -> None:
        """Nothing to wait for: user checks capture on demand."""

    def pick(self, candidates: Sequence[Node], step: int) -> Verdict:
        """Return the candidates whose pre-check passes, with distance = -similarity."""
        engine = self._engine
        passing: list[tuple[Node, float]] = []
        memo: dict[Any, Any] = {}
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
                similarity = engine._similarity(tool.pre_check, call_args, call_kwargs,
                                                recorded.pre.user, memo,
                                                (tool.name, recorded.payload))
                if similarity <= 0.0:
                    continue
            self._calls[node.id] = (tool, call_args, call_kwargs)
            passing.append((node, -similarity))
        if passing:
            return Verdict(passing)
        if candidates:
            return Verdict((), Miss(FailureKind.PRE_CHECK,
                                    f'no recorded step passed its pre-check at step {step}'))
        return Verdict((), Miss(FailureKind.NO_CANDIDATE, 'no cached trajectory' if step == 0
                                else f'nothing learned after step {step - 1}'))

    def execute(self, node: Node, step: int, cancel: Any) -> _Ran:
        """Call the tool with the recorded arguments; a raise is a failed step."""
        engine = self._engine
        tool, call_args, call_kwargs = self._calls[node.id]
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
        return _Ran(StepStatus.SUCCEEDED, time.monotonic())

    def post_check(self, node: Node, step: int, ended: float) -> Miss | None:
        """Capture the post-check now and compare it with the recorded one."""
        tool, call_args, call_kwargs = self._calls[node.id]
        if tool.post_check is None or node.step.post is None:
            return None
        if self._engine._similarity(tool.post_check, call_args, call_kwargs,
                                    node.step.post.user, {}) > 0.0:
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
