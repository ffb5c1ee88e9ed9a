"""Run calls in parallel on the process's workers (`teammed.interrupts.Workers`), in the caller's context.

A deliberation's independent calls run on workers beside it; a system's ``acall`` runs the same
``forward`` on a worker (`AsyncForward`). Inside `calls_in_turn()` (or under the DSPy setting
`IN_TURN_SETTING`, which ``compile`` sets) each call runs on the caller's thread, in order, so a
compiled program's traces come in the same order on every run.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

import dspy

from teammed import interrupts

__all__ = ["parallel_map", "Background", "AsyncForward", "calls_in_turn", "in_turn", "IN_TURN_SETTING"]

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


# The same switch as a DSPy setting: DSPy's own worker threads (an optimizer's evaluation) carry its
# settings but not other context variables. `teammed.optimizers.compile` sets it, so that a question's
# calls (and the trace an optimizer builds demos from) come in the same order on every run.
IN_TURN_SETTING = "teammed_calls_in_turn"


def in_turn() -> bool:
    """Whether calls run one after another on the caller's thread here (`calls_in_turn`, or the DSPy
    setting ``teammed_calls_in_turn`` of a ``dspy.context``)."""
    return _IN_TURN.get() or bool(dspy.settings.get(IN_TURN_SETTING, False))


def parallel_map(fn: Callable[[T], R], items: Sequence[T], *, max_workers: int | None = None) -> list[R]:
    """``[fn(x) for x in items]``, in parallel (at most ``max_workers`` at once), results in input order.

    Each call runs on a `teammed.interrupts.Workers` thread in a copy of the caller's
    `contextvars` context, so ``dspy.context`` overrides and the current `Usage` follow the work;
    no thread is started per call. The first exception is re-raised once every call has ended.
    """
    if len(items) <= 1:
        return [fn(item) for item in items]
    if in_turn():  # every item runs, as on the workers; then the first error is raised
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


class AsyncForward:
    """``aforward`` for a system whose ``forward`` is synchronous: ``await system.acall(...)`` runs
    ``forward`` on one of the process's workers (`teammed.interrupts.in_worker`), so concurrent
    ``acall``s wait on the server together. A cancelled ``acall`` makes no further LM call."""

    forward: Callable[..., Any]

    async def aforward(self, *args: Any, **kwargs: Any) -> Any:
        # not ``self.forward``: DSPy warns on any access to ``forward`` but from ``__call__``
        forward = object.__getattribute__(self, "forward")
        return await interrupts.in_worker(forward, *args, **kwargs)


class Background:
    """Calls started now and collected later, each in a copy of the caller's context.

    ``with Background() as bg: f = bg.start(fn, x=1); ...; bg.result(f)``. Leaving the block
    waits for every call started in it, also when the block raised (a failed deliberation makes
    the same calls on the workers and in turn); Ctrl-C, SystemExit and a cancelled ``acall`` cancel
    those not yet started.
    Collect with `result` (not ``f.result()``): on the main thread it waits in slices, so Ctrl-C
    and SIGTERM are handled while a call hangs. The calls run on the process's long-lived
    workers; a deliberation starts no threads of its own.
    """

    def __init__(self) -> None:
        self._started: list[Future[Any]] = []

    def start(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        if in_turn():  # run now; its error is raised where it is collected, as from a worker
            future: Future[R] = Future()
            try:
                future.set_result(fn(*args, **kwargs))
            except Exception as exc:  # noqa: BLE001 - handed to the collector
                future.set_exception(exc)
            return future
        future = interrupts.workers().submit(fn, *args, **kwargs)
        self._started.append(future)
        return future

    def result(self, future: Future[R]) -> R:
        """``future.result()``, attentive to signals on the main thread."""
        return interrupts.result(future)

    def __enter__(self) -> Background:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        # A deliberation that failed still waits for the calls it started: they run, and are counted,
        # the same on the workers and in turn. Ctrl-C, SystemExit or
        # a cancelled acall (not an `Exception`) stops them instead.
        stopping = exc is not None and not isinstance(exc, Exception)
        if stopping:
            for future in self._started:
                future.cancel()  # not started yet: never will
        interrupts.wait_all(self._started)
        self._started.clear()
