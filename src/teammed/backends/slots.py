"""`RequestSlots`: a deployment's request slots, shared by threads and coroutines.

Threads wait on a condition (in slices, so a closed backend is noticed); coroutines wait on a
future of their own event loop, and the caller releasing a slot hands it straight to the oldest
waiting coroutine (`loop.call_soon_threadsafe`), so a coroutine never polls. Polling cost a
wake-up every few milliseconds per waiting call: with 256 questions in flight, 768 calls waited
on 256 slots and the polling took most of the CPU.
"""

from __future__ import annotations

import asyncio
import collections
import threading

__all__ = ["RequestSlots"]


class RequestSlots:
    """At most ``limit`` requests at once. ``acquire``/``release`` for threads, ``await aacquire()``
    for coroutines; `fail_waiters` ends every wait (the backend closed)."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"request slots must be at least 1, got {limit}")
        self.limit = limit
        self._free = limit
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._coroutines: collections.deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = \
            collections.deque()
        self._failure: BaseException | None = None

    # ------------------------------------------------------------------ threads
    def acquire(self, timeout: float) -> bool:
        """Take a slot, waiting at most ``timeout`` seconds; False if none came free."""
        with self._lock:
            if self._free == 0:
                self._freed.wait(timeout)
            if self._free == 0:
                return False
            self._free -= 1
            return True

    # ------------------------------------------------------------------ coroutines
    async def aacquire(self) -> None:
        """Take a slot, waiting on this event loop without a thread and without polling."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._free > 0 and not self._coroutines:
                self._free -= 1
                return
            handed: asyncio.Future[None] = loop.create_future()
            self._coroutines.append((loop, handed))
        try:
            await handed
        except BaseException:
            with self._lock:
                try:
                    self._coroutines.remove((loop, handed))
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
        with self._lock:
            while self._coroutines:
                loop, handed = self._coroutines.popleft()
                if handed.done() or loop.is_closed():
                    continue
                try:
                    loop.call_soon_threadsafe(self._hand, handed)
                except RuntimeError:  # the loop closed meanwhile
                    continue
                return
            self._free += 1
            self._freed.notify()

    def fail_waiters(self, error: BaseException) -> None:
        """Every coroutine waiting (and any that comes later) gets ``error``; threads notice on their own."""
        with self._lock:
            self._failure = error
            waiting, self._coroutines = list(self._coroutines), collections.deque()
            self._freed.notify_all()
        for loop, handed in waiting:
            if not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(_fail, handed, error)
                except RuntimeError:
                    pass


def _fail(handed: asyncio.Future[None], error: BaseException) -> None:
    if not handed.done():
        handed.set_exception(error)
