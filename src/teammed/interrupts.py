"""Waiting on threads without going deaf to Ctrl-C and SIGTERM.

Python runs signal handlers on the main thread only, between bytecodes. The kernel delivers a
signal sent to the process to *any* thread that does not block it; when that is a worker, the
C-level handler merely marks the signal pending for the main thread. A main thread asleep in a
wait without a timeout (``Future.result()``, ``as_completed``, ``Thread.join``) is not woken by
that, so the handler, which closes the backends, never runs: a run waiting on a hung server
ignored SIGTERM until the server answered.

Two defences, both cheap:

- threads teammed starts for questions and requests block SIGINT/SIGTERM
  (`block_stop_signals`; `Pool` starts its threads so), so the kernel picks the main thread;
- where the main thread waits on them it waits in slices of `SLICE_S` (`result`, `wait_all`,
  `as_completed`, `Pool.shutdown`), so a signal that landed on some other thread (a library's)
  is handled within a slice. Other threads wait without slicing: they never run handlers.
"""

from __future__ import annotations

import concurrent.futures as cf
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ParamSpec, TypeVar

__all__ = ["SLICE_S", "STOP_SIGNALS", "Pool", "on_main_thread", "block_stop_signals", "result", "wait_all",
           "as_completed"]

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


def as_completed(futures: Iterable[cf.Future[T]]) -> Iterator[cf.Future[T]]:
    """Each future as it finishes (cancelled ones included), like `concurrent.futures.as_completed`;
    on the main thread it waits in slices so pending signals are handled."""
    pending = set(futures)
    del futures  # a finished future (and its result) is held no longer than its consumer holds it
    timeout = SLICE_S if on_main_thread() else None
    while pending:
        done, pending = cf.wait(pending, timeout=timeout, return_when=cf.FIRST_COMPLETED)
        while done:
            yield done.pop()


class Pool(cf.ThreadPoolExecutor):
    """A thread pool whose threads leave SIGINT/SIGTERM to the main thread, and whose
    ``shutdown(wait=True)`` (the end of a ``with`` block) waits for the submitted calls in slices
    rather than joining threads with no timeout."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "teammed") -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix,
                         initializer=block_stop_signals)
        self._unfinished: set[cf.Future[Any]] = set()  # a call leaves it when it ends: no result is kept
        self._unfinished_lock = threading.Lock()

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> cf.Future[T]:
        future = super().submit(fn, *args, **kwargs)
        with self._unfinished_lock:
            self._unfinished.add(future)
        future.add_done_callback(self._finished)  # at once if it already ended
        return future

    def _finished(self, future: cf.Future[Any]) -> None:
        with self._unfinished_lock:
            self._unfinished.discard(future)

    def _calls(self) -> list[cf.Future[Any]]:
        with self._unfinished_lock:
            return list(self._unfinished)

    def cancel_queued(self) -> None:
        """Cancel the calls that have not started (those running finish)."""
        for future in self._calls():
            future.cancel()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=cancel_futures)
        if wait:  # the threads end on their own once their last call has
            wait_all(self._calls())
