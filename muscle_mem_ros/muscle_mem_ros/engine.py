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
  A replayed tool that raises, or a failed post-check, hands off to the agent
  the same way (the original raised).
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

from collections.abc import Callable
from dataclasses import fields
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
from .resume import accepts_resume, Resume
from .store import MemoryStore, open_store, Recording, Store
from .tools import Tool, ToolRegistry

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
        store = self._store
        parent: Node | None = None
        replayed: list[Node] = []
        while True:
            with self.metrics.measure('lookup'):
                kids = store.children(task=run.task, variant='',
                                      parent=None if parent is None else parent.id)
            choice = self._choose(kids, run)
            index = len(replayed)
            if choice is None:
                if parent is not None and parent.terminal:
                    return self._hit(run, parent, replayed)
                reason = (f'no recorded step passed its pre-check at step {index}' if kids
                          else 'no cached trajectory' if parent is None
                          else f'nothing learned after step {index - 1}')
                return self._handoff(run, args, kwargs, parent, replayed, reason)
            node, tool, call_args, call_kwargs = choice
            try:
                with self.metrics.measure('replay'):
                    run.in_tool += 1
                    try:
                        tool.func(*call_args, **call_kwargs)
                    finally:
                        run.in_tool -= 1
            except Exception as err:
                self._count('tool_errors')
                _log.exception('replayed step %d (%s) raised; handing off', index, tool.name)
                return self._handoff(run, args, kwargs, parent, replayed,
                                     f'step {index} ({tool.name}) raised {err!r}')
            self._count('steps_replayed')
            replayed.append(node)
            parent = node
            if tool.post_check is not None and node.step.post is not None:
                if self._similarity(tool.post_check, call_args, call_kwargs,
                                    node.step.post.user, {}) <= 0.0:
                    return self._handoff(run, args, kwargs, parent, replayed,
                                         f'post-check failed after step {index}')

    def _choose(self, kids: list[Node], run: _Run) -> tuple[Node, Tool, tuple[Any, ...],
                                                            dict[str, Any]] | None:
        best: tuple[Node, Tool, tuple[Any, ...], dict[str, Any]] | None = None
        best_key: tuple[float, int, float, int] | None = None
        memo: dict[Any, Any] = {}
        for node in kids:
            step = node.step
            tool = self._registry.get(step.tool, step.type_name)
            if tool is None or step.kind is not ToolKind.FUNCTION or \
                    step.status is not StepStatus.SUCCEEDED:
                continue
            try:
                call_args, call_kwargs = self._spec(step.payload).resolve(run.params)
            except MissingParamError:
                continue
            except Exception:  # noqa: BLE001 - a payload this code cannot read
                _log.exception('cannot decode the arguments of node %d', node.id)
                continue
            if tool.is_method:
                call_args = (self._context, *call_args)
            if tool.pre_check is None:
                if step.pre is not None:
                    continue
                similarity = 1.0
            else:
                if step.pre is None:
                    continue
                similarity = self._similarity(tool.pre_check, call_args, call_kwargs,
                                              step.pre.user, memo, (tool.name, step.payload))
                if similarity <= 0.0:
                    continue
            key = (-similarity, -node.success_count, -node.last_used, node.id)
            if best_key is None or key < best_key:
                best_key, best = key, (node, tool, call_args, call_kwargs)
        return best

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

    def _hit(self, run: _Run, leaf: Node, replayed: list[Node]) -> bool:
        traj = self._store.trajectory_ending_at(leaf.id)
        if traj is not None:
            self._store.note_replay(trajectory_id=traj.id)
        self._store.note_outcome(task=run.task, hit=True)
        self._count('hits')
        _log.info('task %s: cache hit, %d steps replayed', run.task, len(replayed))
        return True

    def _handoff(self, run: _Run, args: tuple[Any, ...], kwargs: dict[str, Any],
                 parent: Node | None, replayed: list[Node], reason: str) -> bool:
        index = len(replayed)
        self._count('misses')
        if replayed:
            self._count('handoffs')
        _log.info('task %s: handing off to the agent at step %d: %s', run.task, index, reason)
        try:
            params_json = json.dumps(run.params or {}, sort_keys=True, default=repr)
            run.recording = self._store.begin(
                task=run.task, variant='', params_json=params_json,
                parent=None if parent is None else parent.id)
        except StoreError:
            self._count('record_errors')
            _log.exception('cannot start a recording; the agent runs unrecorded')
        resume = Resume(index, reason, tuple(n.step.tool for n in replayed)) if index else None
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
