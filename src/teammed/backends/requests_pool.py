"""Daemon threads that carry LM requests, so a waiting caller can give up on a hung server.

A caller hands its request to one of these threads and waits for the answer in short slices,
checking whether its backend was closed (Ctrl-C, SIGTERM, a fatal error elsewhere); if it was,
the caller leaves at once and the request is abandoned on its daemon thread, which never keeps
the process alive. Threads are reused: starting a fresh thread per request cost a thread
creation plus a start handshake on the GIL, which under many questions in flight showed up as
latency on every call of the critical path. The pool grows to the peak number of requests in
flight and keeps its threads (idle ones sleep on a queue).
"""

from __future__ import annotations

import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from teammed import interrupts

__all__ = ["RequestThreads", "Waiters", "run_interruptible"]


class _Job:
    __slots__ = ("fn", "context", "done", "wake", "value", "error")

    def __init__(self, fn: Callable[[], Any], context: contextvars.Context) -> None:
        self.fn = fn
        self.context = context
        self.done = threading.Event()  # the request ended (value or error)
        self.wake = threading.Event()  # the caller should look: the request ended, or it was released
        self.value: Any = None
        self.error: BaseException | None = None


class RequestThreads:
    """A grow-on-demand pool of daemon threads; ``submit(fn)`` returns a job to wait on."""

    def __init__(self, name: str = "teammed-request") -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self.threads = 0

    def submit(self, fn: Callable[[], Any]) -> _Job:
        job = _Job(fn, contextvars.copy_context())
        with self._lock:
            spawn = self._idle == 0
            if spawn:
                self.threads += 1
            else:
                self._idle -= 1  # this job is that idle thread's
        if spawn:
            threading.Thread(target=self._work, name=self._name, daemon=True).start()
        self._jobs.put(job)
        return job

    def _work(self) -> None:
        interrupts.block_stop_signals()
        while True:
            job = self._jobs.get()
            try:
                job.value = job.context.run(job.fn)
            except BaseException as exc:  # handed to the waiting caller
                job.error = exc
            finally:
                with self._lock:  # idle before the caller hears of it: its next request reuses this thread
                    self._idle += 1
                job.done.set()
                job.wake.set()
            del job


class Waiters:
    """The callers waiting on one backend's requests; `release_all` wakes them at once (on close), so
    they need not wake up every few milliseconds to look (at 64 questions in flight that polling was
    over a thousand wake-ups a second, each taking the GIL)."""

    def __init__(self) -> None:
        self._jobs: set[_Job] = set()
        self._lock = threading.Lock()
        self._released = False

    def add(self, job: _Job) -> None:
        with self._lock:
            self._jobs.add(job)
            if self._released:
                job.wake.set()

    def discard(self, job: _Job) -> None:
        with self._lock:
            self._jobs.discard(job)

    def release_all(self) -> None:
        with self._lock:
            self._released = True
            for job in self._jobs:
                job.wake.set()


_POOL = RequestThreads()


def _after_fork_in_child() -> None:  # the child has none of the parent's threads, only their count
    global _POOL
    _POOL = RequestThreads()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def run_interruptible(fn: Callable[[], Any], *, check: Callable[[], None], waiters: Waiters | None = None,
                      poll_s: float | None = None) -> Any:
    """``fn()`` on a pooled daemon thread in a copy of this context.

    ``check()`` may raise to give up (the request is then abandoned, never awaited). It runs
    whenever the caller wakes: when the request ends, when ``waiters.release_all()`` is called,
    and every ``poll_s`` (default 0.1 s without ``waiters``, else 1 s as a backstop; on the main
    thread at most `teammed.interrupts.SLICE_S`, so a pending Ctrl-C/SIGTERM is handled).
    """
    job = _POOL.submit(fn)
    if waiters is not None:
        waiters.add(job)
    poll = poll_s or (1.0 if waiters is not None else 0.1)
    if interrupts.on_main_thread():
        poll = min(poll, interrupts.SLICE_S)
    try:
        while not job.done.is_set():
            job.wake.wait(poll)
            job.wake.clear()  # before looking: a release that comes later wakes the next wait
            check()
    finally:
        if waiters is not None:
            waiters.discard(job)
    if job.error is not None:
        raise job.error
    return job.value
