"""Requests carried on `teammed.interrupts` workers, so a waiting caller can give up on a hung server.

A caller hands its request to one of the process's long-lived worker threads and waits for the
answer, checking whether its backend was closed (Ctrl-C, SIGTERM, a fatal error elsewhere); if it
was, the caller leaves at once and the request is abandoned on its daemon thread, which never
keeps the process alive. The workers are reused (`teammed.interrupts.Workers`): a fresh thread
per request cost a thread start on the GIL for every call of the critical path.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Callable
from typing import Any

from teammed import interrupts

__all__ = ["Waiters", "run_interruptible"]


class _Waiting:
    __slots__ = ("future", "wake")

    def __init__(self, future: cf.Future[Any]) -> None:
        self.future = future
        self.wake = wake = threading.Event()  # the caller should look: the request ended, or it was released
        # the callback holds the event, not self: self -> future -> callback -> self would be a cycle
        # (with the request's result in it) that only the garbage collector frees
        future.add_done_callback(lambda _: wake.set())


class Waiters:
    """The callers waiting on one backend's requests; `release_all` wakes them at once (on close), so
    they need not wake up every few milliseconds to look (at 64 questions in flight that polling was
    over a thousand wake-ups a second, each taking the GIL)."""

    def __init__(self) -> None:
        self._waiting: set[_Waiting] = set()
        self._lock = threading.Lock()
        self._released = False

    def add(self, waiting: _Waiting) -> None:
        with self._lock:
            self._waiting.add(waiting)
            if self._released:
                waiting.wake.set()

    def discard(self, waiting: _Waiting) -> None:
        with self._lock:
            self._waiting.discard(waiting)

    def release_all(self) -> None:
        with self._lock:
            self._released = True
            for waiting in self._waiting:
                waiting.wake.set()


def run_interruptible(fn: Callable[[], Any], *, check: Callable[[], None], waiters: Waiters | None = None,
                      poll_s: float | None = None) -> Any:
    """``fn()`` on a worker thread in a copy of this context.

    ``check()`` may raise to give up (the request is then abandoned, never awaited). It runs
    whenever the caller wakes: when the request ends, when ``waiters.release_all()`` is called,
    and every ``poll_s`` (default 0.1 s without ``waiters``, else 1 s as a backstop; on the main
    thread at most `teammed.interrupts.SLICE_S`, so a pending Ctrl-C/SIGTERM is handled).
    """
    waiting = _Waiting(interrupts.workers().submit(fn))
    if waiters is not None:
        waiters.add(waiting)
    poll = poll_s or (1.0 if waiters is not None else 0.1)
    if interrupts.on_main_thread():
        poll = min(poll, interrupts.SLICE_S)
    try:
        while not waiting.future.done():
            waiting.wake.wait(poll)
            waiting.wake.clear()  # before looking: a release that comes later wakes the next wait
            check()
    finally:
        if waiters is not None:
            waiters.discard(waiting)
    return waiting.future.result()
