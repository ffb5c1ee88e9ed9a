"""Run calls in parallel on the process's long-lived workers, in the caller's context (DSPy settings, usage).

Inside `calls_in_turn()` the same functions run each call on the caller's thread, in order: the
calls, their inputs and their results are the same, only their timing differs. The runner
uses it when at least as many questions are in flight as there are request slots: every slot
is then kept busy by other questions, and fanning a question's calls out adds thread hand-offs
and waits on the slots (at 256 questions in flight, 3 agents each, 768 requests queued on 256
slots) without adding throughput.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

from teammed import interrupts

__all__ = ["parallel_map", "Background", "ForwardOnWorkers", "calls_in_turn", "in_turn"]

T = TypeVar("T")
R = TypeVar("R")

_IN_TURN: contextvars.ContextVar[bool] = contextvars.ContextVar("teammed_calls_in_turn", default=False)


@contextlib.contextmanager
def calls_in_turn(enabled: bool = True) -> Iterator[None]:
    """Within the block (and the work it hands on), `parallel_map` and `Background` run on the caller's thread."""
    token = _IN_TURN.set(enabled)
    try:
        yield
    finally:
        _IN_TURN.reset(token)


def in_turn() -> bool:
    """Whether calls run one after another on the caller's thread here (`calls_in_turn`)."""
    return _IN_TURN.get()


def parallel_map(fn: Callable[[T], R], items: Sequence[T], *, max_workers: int | None = None) -> list[R]:
    """``[fn(x) for x in items]``, in parallel (at most ``max_workers`` at once), results in input order.

    Each call runs on a `teammed.interrupts.Workers` thread in a copy of the caller's
    `contextvars` context, so ``dspy.context`` overrides and the current `Usage` follow the work;
    no thread is started per call. The first exception is re-raised once every call has ended.
    """
    if len(items) <= 1:
        return [fn(item) for item in items]
    if _IN_TURN.get():  # every item runs, as on the workers; then the first error is raised
        done: list[Any] = []
        first: Exception | None = None
        for item in items:
            try:
                done.append(fn(item))
            except Exception as exc:  # noqa: BLE001 - raised once every item has run
                first = first or exc
                done.append(None)
        if first is not None:
            raise first
        return done
    pool = interrupts.workers()
    lanes = min(len(items), max_workers or len(items))
    if lanes >= len(items):
        futures = [pool.submit(fn, item) for item in items]
        interrupts.wait_all(futures)  # on the main thread, in slices: Ctrl-C/SIGTERM are heard
        return [future.result() for future in futures]
    results: list[Any] = [None] * len(items)
    indices = iter(range(len(items)))
    lock = threading.Lock()

    def lane() -> None:  # each lane takes the next item until none is left
        while True:
            with lock:
                i = next(indices, None)
            if i is None:
                return
            results[i] = fn(items[i])

    lanes_done = [pool.submit(lane) for _ in range(lanes)]
    interrupts.wait_all(lanes_done)
    for future in lanes_done:
        future.result()
    return results


class ForwardOnWorkers:
    """``aforward`` for a system whose ``forward`` is synchronous: ``await system.acall(...)`` runs
    ``forward`` on one of the shared worker threads (in the caller's context), so concurrent
    ``acall``s of whole systems overlap instead of queueing on the event loop. Inside, the
    system's own calls run in parallel as under ``__call__``; a single behaviour's
    ``dspy.Predict.acall`` awaits the backend's async client directly."""

    forward: Callable[..., Any]

    async def aforward(self, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.wrap_future(interrupts.workers().submit(self.forward, *args, **kwargs))


class Background:
    """Calls started now and collected later, each in a copy of the caller's context.

    ``with Background() as bg: f = bg.start(fn, x=1); ...; bg.result(f)``. Leaving the block
    waits for every call started in it. Collect with `result` (not ``f.result()``): on the main
    thread it waits in slices, so Ctrl-C and SIGTERM are handled while a call hangs. The calls run
    on the process's long-lived workers; a deliberation starts no threads of its own.
    """

    def __init__(self) -> None:
        self._started: list[Future[Any]] = []

    def start(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        if _IN_TURN.get():  # run now; its error is raised where it is collected, as from a worker
            future: Future[R] = Future()
            try:
                future.set_result(fn(*args, **kwargs))
            except Exception as exc:  # noqa: BLE001 - handed to the collector
                future.set_exception(exc)
            return future
        future = interrupts.workers().submit(fn, *args, **kwargs)
        self._started.append(future)
        return future

    @staticmethod
    def result(future: Future[R]) -> R:
        """``future.result()``, attentive to signals on the main thread."""
        return interrupts.result(future)

    def __enter__(self) -> Background:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None:
            for future in self._started:
                future.cancel()  # not started yet: never will
        interrupts.wait_all(self._started)
        self._started.clear()
