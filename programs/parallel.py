"""Run calls in parallel threads that inherit the caller's context (DSPy settings, usage)."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["parallel_map"]

T = TypeVar("T")
R = TypeVar("R")


def parallel_map(fn: Callable[[T], R], items: Sequence[T], *, max_workers: int | None = None) -> list[R]:
    """``[fn(x) for x in items]``, in parallel threads, results in input order.

    Each thread runs in a copy of the caller's `contextvars` context, so ``dspy.context``
    overrides and the current `Usage` follow the work. The first exception is re-raised.
    """
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=max_workers or len(items)) as pool:
        futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in items]
        return [future.result() for future in futures]
