"""teammed's one executor (`Workers`), and waiting on it without going deaf to Ctrl-C and SIGTERM.

Python runs signal handlers on the main thread only, and a main thread asleep in a wait without
a timeout is not woken by a signal the kernel gave another thread. So the threads teammed starts
block SIGINT/SIGTERM (`block_stop_signals`), and the main thread waits in slices of `SLICE_S`
(`result`, `wait_all`, `submitted_as_completed`). Why threads: docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextvars
import os
import queue
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ParamSpec, TypeVar

__all__ = ["SLICE_S", "STOP_SIGNALS", "Workers", "workers", "on_main_thread", "block_stop_signals",
           "result", "wait_all", "submitted_as_completed", "run_interruptible", "in_worker",
           "check_cancelled"]

T = TypeVar("T")
P = ParamSpec("P")

SLICE_S = 0.2
"""How long the main thread sleeps at most before looking for a pending signal."""

STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


def on_main_thread() -> bool:
    """Whether the caller is the thread that runs signal handlers."""
    return threading.current_thread() is threading.main_thread()


def block_stop_signals() -> None:
    """Keep SIGINT/SIGTERM off the calling thread (they then go to the main thread).

    For threads that never start a process: a child inherits the blocked mask.
    """
    if not on_main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def result(future: cf.Future[T]) -> T:
    """``future.result()``; on the main thread, waiting in slices so pending signals are handled."""
    wait_all([future])
    return future.result()


def wait_all(futures: Iterable[cf.Future[Any]]) -> None:
    """Return once every future is done (on the main thread, in slices)."""
    pending = set(futures)
    timeout = SLICE_S if on_main_thread() else None
    while pending:
        _, pending = cf.wait(pending, timeout=timeout)


def submitted_as_completed(submit: Callable[[T], cf.Future[Any]], items: Iterable[T], *, window: int,
                           more: Callable[[], bool] = lambda: True) -> Iterator[cf.Future[Any]]:
    """Each future of ``submit(item)`` as it finishes (cancelled ones included), submitting lazily and
    in O(1) per completion (each finished future puts itself on a queue): at most ``window``
    futures are submitted and not yet handed to the consumer, so results that finish faster than
    the consumer takes them (a fast backend, a slow disk) wait in the pool's queue as *items*,
    never as finished results piling up in memory. ``more()`` false stops submitting (a run that
    is stopping). On the main thread it waits in slices.
    """
    finished: queue.SimpleQueue[cf.Future[Any]] = queue.SimpleQueue()
    source = iter(items)
    in_flight = 0

    def top_up() -> None:
        nonlocal in_flight
        while in_flight < window and more():
            item = next(source, _END)
            if item is _END:
                return
            submit(item).add_done_callback(finished.put)  # at once if it already ended
            in_flight += 1

    top_up()
    timeout = SLICE_S if on_main_thread() else None
    while in_flight:
        try:
            future = finished.get(timeout=timeout)
        except queue.Empty:
            continue  # a slice went by: pending signals ran their handlers
        in_flight -= 1
        box = [future]
        del future
        yield box.pop()  # not kept in a local while the consumer holds it
        top_up()


_END: Any = object()


class _Job:
    __slots__ = ("fn", "context", "future")

    def __init__(self, fn: Callable[[], Any], context: contextvars.Context, future: cf.Future[Any]) -> None:
        self.fn, self.context, self.future = fn, context, future


class Workers:
    """Long-lived daemon threads shared by the whole process; ``submit(fn, ...)`` returns a future.

    Questions, a deliberation's parallel calls, interruptible requests and scoring all run here.
    The pool grows when no thread is idle (a call never waits for a thread; nested calls cannot
    deadlock), so it follows the peak of work in flight. Each call runs in a copy of the
    submitter's `contextvars` context.
    """

    def __init__(self, name: str = "teammed-worker") -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self.threads = 0

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> cf.Future[T]:
        future: cf.Future[T] = cf.Future()
        job = _Job(lambda: fn(*args, **kwargs), contextvars.copy_context(), future)
        with self._lock:
            spawn = self._idle == 0
            if spawn:
                self.threads += 1
            else:
                self._idle -= 1  # this job is that idle thread's
        if spawn:
            threading.Thread(target=self._work, name=self._name, daemon=True).start()
        self._jobs.put(job)
        return future

    def _work(self) -> None:
        block_stop_signals()
        while True:
            job = self._jobs.get()
            if not job.future.set_running_or_notify_cancel():
                with self._lock:
                    self._idle += 1
                continue
            try:
                value = job.context.run(job.fn)
            except BaseException as exc:  # handed to the waiting caller
                with self._lock:  # idle before the caller hears of it: its next call reuses this thread
                    self._idle += 1
                job.future.set_exception(exc)
            else:
                with self._lock:
                    self._idle += 1
                job.future.set_result(value)
                del value  # an idle thread holds no finished call's result (a question's whole row)
            del job


_WORKERS = Workers()


def workers() -> Workers:
    """The process's shared `Workers` (a forked child gets a fresh one: it has none of the threads)."""
    return _WORKERS


def _after_fork_in_child() -> None:
    global _WORKERS
    _WORKERS = Workers()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def run_interruptible(fn: Callable[[], T], *, check: Callable[[], None], poll_s: float = 0.1) -> T:
    """``fn()`` on a worker, waited for by a caller that looks every ``poll_s`` (at most `SLICE_S` on
    the main thread): ``check()`` may raise to give up, and the request is then abandoned on its
    daemon thread (a hung server's request, once the backend closes or its deadline passes)."""
    future = workers().submit(fn)
    poll = min(poll_s, SLICE_S) if on_main_thread() else poll_s
    while True:
        try:
            return future.result(timeout=poll)
        except cf.TimeoutError:
            if not future.done():  # an outcome that came as the deadline passed is the outcome (a 401 is a 401)
                check()


# The coroutine entry points (a system's ``acall``, an LM's ``acall``) run the same synchronous code
# on a worker thread. A thread cannot be stopped from outside, so a cancelled ``acall`` sets its
# work's event, and the work stops at its next LM call (`check_cancelled`).
_CANCELLED: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("teammed_acall_cancelled",
                                                                                    default=None)


async def in_worker(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Await ``fn(*args, **kwargs)`` run on one of the process's workers in a copy of this context.
    Cancelling the wait makes the work raise `asyncio.CancelledError` at its next LM call; the
    request in flight, if any, ends on its thread."""
    cancelled = threading.Event()

    def work() -> T:
        _CANCELLED.set(cancelled)
        return fn(*args, **kwargs)

    try:
        return await asyncio.wrap_future(workers().submit(work))
    except asyncio.CancelledError:
        cancelled.set()
        raise


def check_cancelled() -> None:
    """Raise `asyncio.CancelledError` if the ``acall`` this work runs for was cancelled."""
    cancelled = _CANCELLED.get()
    if cancelled is not None and cancelled.is_set():
        raise asyncio.CancelledError("the acall this work ran for was cancelled")
