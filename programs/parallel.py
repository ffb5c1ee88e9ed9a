"""Run calls in parallel threads that inherit the caller's context (DSPy settings, usage)."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

from teammed import interrupts

__all__ = ["parallel_map", "Background"]

T = TypeVar("T")
R = TypeVar("R")


def parallel_map(fn: Callable[[T], R], items: Sequence[T], *, max_workers: int | None = None) -> list[R]:
    """``[fn(x) for x in items]``, in parallel threads, results in input order.

    Each thread runs in a copy of the caller's `contextvars` context, so ``dspy.context``
    overrides and the current `Usage` follow the work. The first exception is re-raised.
    """
    if len(items) <= 1:
        return [fn(item) for item in items]
    with interrupts.Pool(max_workers or len(items)) as pool:  # Ctrl-C/SIGTERM stay with the main thread
        futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in items]
        interrupts.wait_all(futures)
        return [future.result() for future in futures]


class Background:
    """Calls started now and collected later, each in a copy of the caller's context.

    ``with Background() as bg: f = bg.start(fn, x=1); ...; bg.result(f)``. Leaving the block
    waits for every call started in it. Collect with `result` (not ``f.result()``): on the main
    thread it waits in slices, so Ctrl-C and SIGTERM are handled while a call hangs.
    """

    def __init__(self, *, max_workers: int = 16) -> None:
        self._pool = interrupts.Pool(max_workers)

    def start(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        return self._pool.submit(contextvars.copy_context().run, fn, *args, **kwargs)

    @staticmethod
    def result(future: Future[R]) -> R:
        """``future.result()``, attentive to signals on the main thread."""
        return interrupts.result(future)

    def __enter__(self) -> Background:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._pool.shutdown(wait=True, cancel_futures=exc is not None)
