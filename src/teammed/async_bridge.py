"""Synchronous code run as a coroutine: how a system's ``acall`` deliberates on the caller's event loop.

A system's ``forward`` is ordinary synchronous code: it calls behaviours, and runs the calls that
do not depend on each other side by side (`teammed.programs.parallel`). Under ``await
system.acall(...)`` the same code runs in a greenlet on the event loop's thread (`run_sync`);
wherever it would wait (an LM call, the calls started beside it) it calls `await_only`, which
suspends the greenlet, awaits on the loop, and resumes the greenlet with the result. So every LM
call of the deliberation goes out on the backend's async client, the calls that ran side by side
on worker threads run as tasks of the loop, and no thread is used: eight concurrent ``acall``s
wait on the server together. It is the technique of SQLAlchemy's asyncio extension.

Context variables (``dspy.context``, the current `teammed.usage.Usage`, the question's image)
follow the work as they do onto worker threads: a greenlet starts in a copy of the context it was
spawned from, and what it awaits runs in a copy of the greenlet's context at that moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import greenlet

__all__ = ["bridged", "run_sync", "await_only"]

R = TypeVar("R")


class _Bridged(greenlet.greenlet):
    """A greenlet running synchronous code for `run_sync` (its parent awaits for it)."""


def bridged() -> bool:
    """Whether this code runs under `run_sync`, where `await_only` may wait on the event loop."""
    return isinstance(greenlet.getcurrent(), _Bridged)


async def run_sync(fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
    """``fn(*args, **kwargs)`` on this event loop, in a copy of the current context; each
    `await_only` inside it is awaited here. Exceptions (and a cancellation of the awaiting task)
    pass through ``fn`` as they would through a coroutine."""
    child = _Bridged(fn, greenlet.getcurrent())
    child.gr_context = contextvars.copy_context()
    request = child.switch(*args, **kwargs)
    while not child.dead:
        awaitable, context = request
        try:
            if inspect.iscoroutine(awaitable):
                value = await asyncio.get_running_loop().create_task(awaitable, context=context)
            else:
                value = await awaitable
        except GeneratorExit:  # this coroutine is being closed (its loop ended): end fn too
            with contextlib.suppress(Exception):
                _end(child)
            raise
        except BaseException as exc:  # noqa: BLE001 - raised inside fn, where it would have come from
            request = child.throw(type(exc), exc, exc.__traceback__)
        else:
            request = child.switch(value)
    return request  # type: ignore[no-any-return]


def _end(child: greenlet.greenlet) -> None:
    """Unwind a suspended ``fn`` (its ``finally`` blocks run); whatever it awaits on the way out
    gets `greenlet.GreenletExit` at once, since nothing will await it any more."""
    for _ in range(1000):
        if child.dead:
            return
        request = child.throw(greenlet.GreenletExit)
        if not child.dead and inspect.iscoroutine(request[0]):
            request[0].close()


def await_only(awaitable: Awaitable[R]) -> R:
    """Wait for ``awaitable`` from synchronous code running under `run_sync`; returns its result or
    raises its exception. A coroutine runs in a copy of the current context."""
    if not bridged():
        if inspect.iscoroutine(awaitable):
            awaitable.close()  # never awaited: no "coroutine was never awaited" warning
        raise RuntimeError("await_only() outside run_sync(): nothing is there to await")
    # no local names the current greenlet: a suspended greenlet holding itself is never collected
    return greenlet.getcurrent().parent.switch((awaitable, contextvars.copy_context()))  # type: ignore[union-attr,no-any-return]
