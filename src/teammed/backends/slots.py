"""`RequestSlots`: a deployment's request slots, taken first come first served.

A thread releasing a slot hands it to the oldest waiting thread (a plain semaphore lets a newly
arriving thread take it ahead of one that has waited). A waiting thread sleeps on its own event,
waking every slice so its caller can check whether the run is stopping, without losing its place.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

__all__ = ["RequestSlots"]


class _Waiter:
    """A waiting thread: set ``handed`` (under the lock), then its event."""

    __slots__ = ("event", "handed")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.handed = False


class RequestSlots:
    """At most ``limit`` requests at once: ``acquire`` then ``release``."""

    def __init__(self, limit: int, *, slice_s: float = 0.2):
        if limit < 1:
            raise ValueError(f"request slots must be at least 1, got {limit}")
        self.limit = limit
        self._slice_s = slice_s
        self._free = limit
        self._lock = threading.Lock()
        self._queue: collections.deque[_Waiter] = collections.deque()

    def acquire(self, timeout: float | None = None, *, check: Callable[[], None] | None = None) -> bool:
        """Take a slot, waiting at most ``timeout`` seconds (None: until one comes); False if none
        came. ``check()`` runs every slice while waiting and may raise to give up."""
        with self._lock:
            if self._free > 0:  # a free slot means no one waits for it (`release`)
                self._free -= 1
                return True
            if timeout is not None and timeout <= 0:
                return False
            waiter = _Waiter()
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

    def _withdraw(self, waiter: _Waiter) -> bool:
        """Leave the queue; True if the slot was handed over meanwhile (the caller holds it)."""
        with self._lock:
            try:
                self._queue.remove(waiter)
            except ValueError:
                return waiter.handed
            return False

    def release(self) -> None:
        """Hand the slot to the oldest waiter, else free it."""
        with self._lock:
            if not self._queue:
                self._free += 1
                return
            waiter = self._queue.popleft()
            waiter.handed = True
        waiter.event.set()
