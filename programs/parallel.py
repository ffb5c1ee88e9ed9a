"""Run calls in parallel on the process's long-lived workers, in the caller's context (DSPy settings, usage).

Under a system's ``acall`` (`teammed.async_bridge.run_sync`) the same functions run the calls as
tasks of the caller's event loop instead: no thread is used, and each LM call goes out on the
backend's async client.

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

import dspy

from teammed import interrupts
from teammed.async_bridge import await_only, bridged, run_sync

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
    if bridged():
        return await_only(_gathered(fn, items, max_workers))
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


async def _gathered(fn: Callable[[T], R], items: Sequence[T], max_workers: int | None) -> list[R]:
    """`parallel_map` on the event loop: every item runs (at most ``max_workers`` at once), then the
    first error in input order is raised, as on the workers."""
    gate = asyncio.Semaphore(max_workers) if max_workers and max_workers < len(items) else None

    async def one(item: T) -> R:
        if gate is None:
            return await run_sync(fn, item)
        async with gate:
            return await run_sync(fn, item)

    done = await asyncio.gather(*(one(item) for item in items), return_exceptions=True)
    for result in done:
        if isinstance(result, BaseException):
            raise result
    return done  # type: ignore[return-value]


class AsyncForward:
    """``aforward`` for a system whose ``forward`` is synchronous: ``await system.acall(...)`` runs
    ``forward`` on the caller's event loop (`teammed.async_bridge.run_sync`). Its LM calls await the
    backend's async client, its side-by-side calls are tasks of the loop, and concurrent ``acall``s
    wait on the server together, without a thread."""

    forward: Callable[..., Any]

    async def aforward(self, *args: Any, **kwargs: Any) -> Any:
        # not ``self.forward``: DSPy warns on any access to ``forward`` but from ``__call__``
        forward = object.__getattribute__(self, "forward")
        return await run_sync(forward, *args, **kwargs)


class Background:
    """Calls started now and collected later, each in a copy of the caller's context.

    ``with Background() as bg: f = bg.start(fn, x=1); ...; bg.result(f)``. Leaving the block
    waits for every call started in it, also when the block raised (a failed deliberation makes
    the same calls in every mode); Ctrl-C, SystemExit and a cancelled ``acall`` cancel them.
    Collect with `result` (not ``f.result()``): on the main thread it waits in slices, so Ctrl-C
    and SIGTERM are handled while a call hangs. The calls run on the process's long-lived
    workers; a deliberation starts no threads of its own.
    """

    def __init__(self) -> None:
        self._started: list[Future[Any]] = []
        self._tasks: dict[Future[Any], asyncio.Task[Any]] = {}  # under `run_sync`: the loop's task of each call

    def start(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        if in_turn():  # run now; its error is raised where it is collected, as from a worker
            future: Future[R] = Future()
            try:
                future.set_result(fn(*args, **kwargs))
            except Exception as exc:  # noqa: BLE001 - handed to the collector
                future.set_exception(exc)
            return future
        if bridged():  # a task of the caller's event loop, started when this code next waits
            future = Future()
            task = asyncio.get_running_loop().create_task(run_sync(fn, *args, **kwargs),
                                                          context=contextvars.copy_context())
            task.add_done_callback(lambda t: _settle(future, t))
            self._tasks[future] = task
            return future
        future = interrupts.workers().submit(fn, *args, **kwargs)
        self._started.append(future)
        return future

    def result(self, future: Future[R]) -> R:
        """``future.result()``, attentive to signals on the main thread (awaited on the event loop
        under `run_sync`)."""
        task = self._tasks.get(future)
        if task is not None:
            return await_only(task)  # type: ignore[no-any-return]
        return interrupts.result(future)

    def __enter__(self) -> Background:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        # A deliberation that failed still waits for the calls it started: they run, and are counted,
        # the same in every mode (on the workers, in turn, on the event loop). Ctrl-C, SystemExit or
        # a cancelled acall (not an `Exception`) stops them instead.
        stopping = exc is not None and not isinstance(exc, Exception)
        if stopping:
            for future in self._started:
                future.cancel()  # not started yet: never will
        interrupts.wait_all(self._started)
        self._started.clear()
        if self._tasks:
            tasks, self._tasks = list(self._tasks.values()), {}
            if stopping:
                for task in tasks:
                    task.cancel()
            try:
                await_only(asyncio.wait(tasks))
            except BaseException:  # the acall was cancelled while it waited for them
                for task in tasks:
                    task.cancel()
                raise


def _settle(future: Future[Any], task: asyncio.Task[Any]) -> None:
    """Mirror a finished task into the `Future` `Background.start` returned."""
    if task.cancelled():
        future.cancel()
    elif task.exception() is not None:
        future.set_exception(task.exception())
    else:
        future.set_result(task.result())
