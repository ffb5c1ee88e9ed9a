"""Usage accounting for LMs that are not teammed's own (`MeteredLM`): e.g. a plain ``dspy.LM``.

teammed's backends record every call themselves. Any other DSPy LM is called inside a DSPy
usage tracker that reads the tokens DSPy reports for the response (``response.usage``);
DSPy skips the tracker for a cached response, which is how a cache hit is told apart. A
tracker the caller already installed (``dspy.track_usage()``) still receives every entry.
Under teammed's `SchemaAdapter` the adapter records each call (`call_lm`); under any other
adapter a DSPy callback around the behaviour records each LM call (`counted_calls`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback

from teammed import usage

__all__ = ["acall_lm", "call_lm", "counted_calls"]


class _Collector:
    """A DSPy ``usage_tracker``: sums this call's tokens and forwards to the caller's tracker."""

    def __init__(self, previous: Any):
        self.previous = previous
        self.entries = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._lock = threading.Lock()

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        with self._lock:
            self.entries += 1
            self.prompt_tokens += int(usage_entry.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage_entry.get("completion_tokens") or 0)
        if self.previous is not None:
            self.previous.add_usage(lm, usage_entry)


def _is_metered(lm: Any) -> bool:
    from teammed.backends.base import MeteredLM

    return isinstance(lm, MeteredLM)


def _cost(lm: Any, before: int) -> float:
    """The cost litellm computed for the call, read from the LM's history when it is kept."""
    history = getattr(lm, "history", None) or []
    return float(history[-1].get("cost") or 0.0) if len(history) > before else 0.0


@contextlib.contextmanager
def _recorded(lm: Any, signature: str) -> Iterator[None]:
    """Record the call made inside the block in the current `Usage`, from the tokens DSPy's usage
    tracker sees (nothing is recorded when the call raises)."""
    collector = _Collector(dspy.settings.usage_tracker)
    before = len(getattr(lm, "history", None) or [])
    usage.notify_call_started(signature)
    started = time.perf_counter()
    with dspy.context(usage_tracker=collector):
        yield
    usage.record_call(
        signature=signature,
        prompt_tokens=collector.prompt_tokens,
        completion_tokens=collector.completion_tokens,
        latency_s=time.perf_counter() - started,
        cost_usd=_cost(lm, before) if collector.entries else 0.0,
        cache_hit=collector.entries == 0,
    )


def call_lm(lm: Any, *, signature: str, messages: list[dict[str, Any]], request: dict[str, Any]) -> Any:
    """``lm(messages=..., **request)``, recorded in the current `Usage` when ``lm`` does not record itself."""
    if usage.current() is None or _is_metered(lm):
        return lm(messages=messages, **request)
    with _recorded(lm, signature):
        return lm(messages=messages, **request)


async def acall_lm(lm: Any, *, signature: str, messages: list[dict[str, Any]], request: dict[str, Any]) -> Any:
    """`call_lm` for coroutines: ``await lm.acall(...)``, recorded the same way."""
    if usage.current() is None or _is_metered(lm):
        return await lm.acall(messages=messages, **request)
    with _recorded(lm, signature):
        return await lm.acall(messages=messages, **request)


class _CallCounter(BaseCallback):
    """A DSPy callback recording every LM call of one behaviour, with the tokens DSPy's tracker saw."""

    def __init__(self, signature: str, collector: _Collector):
        super().__init__()
        self.signature = signature
        self.collector = collector
        self._started: dict[str, tuple[float, int, int, int]] = {}

    def _snapshot(self) -> tuple[int, int, int]:
        c = self.collector
        return c.entries, c.prompt_tokens, c.completion_tokens

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        usage.notify_call_started(self.signature)
        self._started[call_id] = (time.perf_counter(), *self._snapshot())

    def on_lm_end(self, call_id: str, outputs: Any, exception: Exception | None = None) -> None:
        started = self._started.pop(call_id, None)
        if started is None or exception is not None:
            return
        began, entries, prompt, completion = started
        now_entries, now_prompt, now_completion = self._snapshot()
        usage.record_call(signature=self.signature, prompt_tokens=now_prompt - prompt,
                          completion_tokens=now_completion - completion, latency_s=time.perf_counter() - began,
                          cache_hit=now_entries == entries)


def counted_calls(lm: Any, signature: str) -> Any:
    """A ``dspy.context`` that records ``lm``'s calls in the current `Usage` (for adapters other than teammed's).

    Returns None when nothing needs recording: no usage is being tracked or ``lm`` records itself.
    Not for calls under teammed's `SchemaAdapter`, which records each call itself (`call_lm`):
    `teammed.programs.Behaviour` opens this context only under another adapter.
    """
    if usage.current() is None or lm is None or _is_metered(lm):
        return None
    collector = _Collector(dspy.settings.usage_tracker)
    counter = _CallCounter(signature, collector)
    return dspy.context(usage_tracker=collector, callbacks=[*(dspy.settings.callbacks or []), counter])
