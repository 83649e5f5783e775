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
Clean exit on SIGINT and SIGTERM, however often the signal comes.

rclpy's own signal handlers shut the context down from inside the signal, and
Python's SIGINT handler then raises ``KeyboardInterrupt`` in the main thread
wherever it happens to be. ``ros2 launch`` (and ``timeout -s INT``, and scripts
that signal a process group) send a second SIGINT while the node tears down:
that one interrupts ``destroy_node`` or ``try_shutdown`` and the process dies
with -2, and threads that still publish find their context gone.

Here instead rclpy is initialized without signal handlers
(:func:`init_without_signal_handlers`), :class:`ShutdownSignals` turns the
first SIGINT or SIGTERM into a shutdown request and ignores every later one,
the executor spins in a thread of its own, and the main thread waits for the
request (:func:`spin_until_shutdown`). Teardown then runs in order, in the
main thread, with nothing left that a signal could interrupt: stop the node's
work and threads, stop the executor, destroy the node, shut the context down.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
import os
import signal
import sys
import threading
import traceback
from types import FrameType

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

__all__ = ['ShutdownSignals', 'init_without_signal_handlers', 'Spinner', 'spin_until_shutdown',
           'spun_node']

_JOIN_WAIT = 5.0
"""Seconds to wait for the executor's thread to end once it stopped dispatching."""
_SPIN_SLICE = 0.1
"""Seconds one ``spin_once`` waits for work; the spinning thread sees a stop within it."""


class ShutdownSignals:
    """
    Turn the first SIGINT or SIGTERM into a shutdown request; ignore the rest.

    The handler only notes the signal and ignores the signals from then on:
    the interpreter's wake-up file descriptor (``signal.set_wakeup_fd``) wakes
    :meth:`wait`, so no lock is taken inside a signal handler and nothing is
    ever raised in the main thread.

    :param signals: The signals that request shutdown.
    """

    def __init__(self, signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> None:
        self._signals = tuple(signals)
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self.received: int | None = None

    def install(self) -> None:
        """Install the handlers (call it from the main thread, before ``rclpy.init``)."""
        signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for signum in self._signals:
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
        self.ignore_further()

    def ignore_further(self) -> None:
        """
        Ignore the signals from now on, up to the end of the process.

        Python restores the default action of the signals it handles when the
        interpreter finalizes, and a signal that arrives then (the second
        SIGINT of ``ros2 launch``) would kill the process with -2 after a clean
        shutdown. Ignored signals stay ignored. Main thread only.
        """
        for signum in self._signals:
            signal.signal(signum, signal.SIG_IGN)

    @property
    def requested(self) -> bool:
        """Return True once a shutdown signal arrived."""
        return self.received is not None

    def wake(self) -> None:
        """Wake :meth:`wait` from any thread (for example: the executor stopped by itself)."""
        try:
            os.write(self._write, b'\0')
        except BlockingIOError:  # the pipe is full: a wake-up is pending anyway
            pass

    def wait(self) -> None:
        """Block until a signal arrives or :meth:`wake` is called (at once if one already did)."""
        if self.requested:
            return
        os.read(self._read, 512)


def init_without_signal_handlers(args: Sequence[str] | None) -> None:
    """
    Initialize rclpy's default context without its signal handlers.

    :param args: Command-line arguments (``--ros-args ...``), or None for none.
    """
    rclpy.init(args=list(args) if args is not None else None,
               signal_handler_options=SignalHandlerOptions.NO)


class Spinner:
    """
    Spin an executor in a thread of its own, and stop it without racing rclpy.

    rclpy 9.1.2 (the Kilted wheels) races in ``Executor.shutdown`` while another thread
    spins: it destroys its guard condition before it waits for its worker threads, so a
    callback still finishing in a worker triggers a destroyed guard ("The following
    exception was never retrieved: cannot use Destroyable because destruction was
    requested"), and a spinning thread that builds its next wait set just then leaves the
    guard out and waits for ever. So :meth:`stop` goes in three steps: stop dispatching
    (the thread ends after its current ``spin_once``), let the workers finish what they
    hold (:func:`_drain_workers`), then shut the executor down with nothing running.

    :param executor: The executor, with its nodes added (more may be added later).
    :param on_exit: Called in the spinning thread when it ends, with the error that
        ended it (None when stopped or when the context was shut down). Without it, an
        error that ends the thread is printed to stderr.
    """

    def __init__(self, executor: Executor, *,
                 on_exit: Callable[[BaseException | None], None] | None = None) -> None:
        self.executor = executor
        self._on_exit = on_exit
        self._dispatching = threading.Event()
        self._dispatching.set()
        self._thread = threading.Thread(target=self._spin, name='executor', daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        error: BaseException | None = None
        try:
            while self._dispatching.is_set() and self.executor.context.ok():
                self.executor.spin_once(timeout_sec=_SPIN_SLICE)
        except ExternalShutdownException:  # the context was shut down by someone else
            pass
        except BaseException as err:  # given to on_exit
            error = err
        finally:
            if self._on_exit is not None:
                self._on_exit(error)
            elif error is not None:  # said, not lost with the thread: nothing answers now
                print(f'the executor thread ended: {error!r}', file=sys.stderr)
                traceback.print_exception(error, file=sys.stderr)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop spinning, wait for running callbacks (bounded), then shut the executor down."""
        self._dispatching.clear()
        self.executor.wake()
        self._thread.join(_JOIN_WAIT)
        _drain_workers(self.executor, timeout)
        self.executor.shutdown(timeout_sec=timeout)


def spin_until_shutdown(
    executor: Executor, signals: ShutdownSignals, *, stop: Callable[[], None] | None = None,
    shutdown_wait: float = 5.0,
) -> BaseException | None:
    """
    Spin ``executor`` in a thread until a signal asks for shutdown, then stop it.

    Returns when the executor's thread has ended (or ``shutdown_wait`` plus a
    few seconds passed). The node itself is left for the caller to destroy.
    The executor stops as :meth:`Spinner.stop` says.

    :param executor: The executor, with its nodes added.
    :param signals: The installed shutdown signals.
    :param stop: Called after the signal and before the executor stops: end the
        node's running work and threads, so that no callback is left waiting.
    :param shutdown_wait: Seconds to wait for running callbacks.
    :return: The error that ended spinning while no shutdown was requested, else None.
    """
    errors: list[BaseException] = []

    def ended(error: BaseException | None) -> None:
        if error is not None and not signals.requested:
            errors.append(error)
        signals.wake()

    spinner = Spinner(executor, on_exit=ended)
    signals.wait()
    if stop is not None:
        stop()
    spinner.stop(shutdown_wait)
    return errors[0] if errors else None


def _drain_workers(executor: Executor, timeout: float) -> None:
    """
    Wait (bounded) until a multi-threaded executor's workers finished every callback they hold.

    Nothing dispatches any more, so shutting the worker pool down (it waits for the work it
    was given) leaves nothing running. rclpy keeps that pool private (``_executor`` of
    ``MultiThreadedExecutor`` in 9.1.2); an executor without one has no workers to wait for.
    """
    pool = getattr(executor, '_executor', None)
    if not isinstance(pool, ThreadPoolExecutor):
        return
    drained = threading.Thread(target=pool.shutdown, kwargs={'wait': True}, daemon=True)
    drained.start()
    drained.join(timeout)


@contextmanager
def spun_node(name: str) -> Iterator[Node]:
    """
    Yield a node of ``name`` in a context of its own, spun by a :class:`Spinner` (a CLI's).

    On the way out the spinner stops and the context is shut down, whatever happened.
    """
    context = rclpy.Context()
    rclpy.init(context=context)
    spinner = None
    try:
        node = rclpy.create_node(name, context=context, start_parameter_services=False)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        spinner = Spinner(executor)
        yield node
    finally:
        if spinner is not None:
            spinner.stop()
        rclpy.try_shutdown(context=context)
