"""`RequestSlots`: a deployment's request slots, shared by threads and coroutines.

The callers waiting for a slot form one queue, first come first served, threads and coroutines
alike: a caller releasing a slot hands it to the oldest waiter. A thread sleeps on its own event
(waking every slice to let its caller check whether the run is stopping, without losing its
place); a coroutine awaits a future of its event loop, set through `loop.call_soon_threadsafe`.
Nothing polls: a coroutine that slept 5 ms at a time cost, with 256 questions in flight (768
calls waiting on 256 slots), most of the process's CPU.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Callable

__all__ = ["RequestSlots"]


class _Thread:
    """A waiting thread: set ``handed`` (under the lock), then its event."""

    __slots__ = ("event", "handed")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.handed = False


_Coroutine = tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"]


class RequestSlots:
    """At most ``limit`` requests at once: ``acquire``/``release`` for threads, ``await aacquire()``
    for coroutines; `fail_waiters` ends every coroutine's wait (the backend closed)."""

    def __init__(self, limit: int, *, slice_s: float = 0.2):
        if limit < 1:
            raise ValueError(f"request slots must be at least 1, got {limit}")
        self.limit = limit
        self._slice_s = slice_s
        self._free = limit
        self._lock = threading.Lock()
        self._queue: collections.deque[_Thread | _Coroutine] = collections.deque()
        self._failure: BaseException | None = None

    # ------------------------------------------------------------------ threads
    def acquire(self, timeout: float | None = None, *, check: Callable[[], None] | None = None) -> bool:
        """Take a slot, waiting at most ``timeout`` seconds (None: until one comes); False if none
        came. ``check()`` runs every slice while waiting and may raise to give up."""
        with self._lock:
            if self._free > 0:  # a free slot means no waiter could take it (`release`)
                self._free -= 1
                return True
            if timeout is not None and timeout <= 0:
                return False
            waiter = _Thread()
            self._queue.append(waiter)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                left = self._slice_s if deadline is None else min(self._slice_s, deadline - time.monotonic())
                if waiter.event.wait(max(0.0, left)):
                    return True
                if check is not None:
                    check()
                if deadline is not None and time.monotonic() >= deadline:
                    return self._withdraw(waiter)
        except BaseException:
            if self._withdraw(waiter):
                self.release()  # it came as the caller gave up: pass it on
            raise

    def _withdraw(self, waiter: _Thread) -> bool:
        """Leave the queue; True if the slot was handed over meanwhile (the caller holds it)."""
        with self._lock:
            try:
                self._queue.remove(waiter)
            except ValueError:
                return waiter.handed
            return False

    # ------------------------------------------------------------------ coroutines
    async def aacquire(self) -> None:
        """Take a slot, waiting on this event loop without a thread and without polling."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._free > 0:
                self._free -= 1
                return
            handed: asyncio.Future[None] = loop.create_future()
            self._queue.append((loop, handed))
        try:
            await handed
        except BaseException:
            with self._lock:
                try:
                    self._queue.remove((loop, handed))
                    waiting = True
                except ValueError:
                    waiting = False
            if not waiting and handed.done() and not handed.cancelled() and handed.exception() is None:
                self.release()  # the slot arrived as the wait was cancelled: pass it on
            raise

    def _hand(self, handed: asyncio.Future[None]) -> None:
        """On the waiting coroutine's loop: give it the slot, or pass it on if it stopped waiting."""
        if handed.done():
            self.release()
        else:
            handed.set_result(None)

    # ------------------------------------------------------------------ both
    def release(self) -> None:
        """Hand the slot to the oldest waiter that can take it, else free it."""
        with self._lock:
            waiter = self._next_waiter()
            if waiter is None:
                self._free += 1
                return
            if isinstance(waiter, _Thread):
                waiter.handed = True
                waiter.event.set()
                return
        loop, handed = waiter
        try:
            if loop is _running_loop():
                loop.call_soon(self._hand, handed)
            else:
                loop.call_soon_threadsafe(self._hand, handed)
        except RuntimeError:  # its loop closed this instant: the next waiter
            self.release()

    def _next_waiter(self) -> _Thread | _Coroutine | None:
        """Take the oldest waiter that can be handed a slot (called with the lock held). Coroutines
        of a closed loop, or that stopped waiting, are dropped; those of a loop that is not running
        (stopped, to be run again) keep their place and are passed over."""
        queue = self._queue
        while queue:  # the common case: the oldest waiter takes it
            head = queue[0]
            if isinstance(head, _Thread):
                return queue.popleft()
            loop, handed = head
            if handed.done() or loop.is_closed():
                queue.popleft()
                continue
            if loop.is_running():
                return queue.popleft()
            break
        for i, waiter in enumerate(queue):
            if isinstance(waiter, _Thread) or (waiter[0].is_running() and not waiter[1].done()):
                del queue[i]
                return waiter
        return None

    def fail_waiters(self, error: BaseException) -> None:
        """Every coroutine waiting (and any that comes later) gets ``error``; threads learn it from
        their ``check``."""
        with self._lock:
            self._failure = error
            waiting = [w for w in self._queue if not isinstance(w, _Thread)]
            self._queue = collections.deque(w for w in self._queue if isinstance(w, _Thread))
        for loop, handed in waiting:
            if not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(_fail, handed, error)
                except RuntimeError:
                    pass


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _fail(handed: asyncio.Future[None], error: BaseException) -> None:
    if not handed.done():
        handed.set_exception(error)
