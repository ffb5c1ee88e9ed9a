"""Per-question accounting of language-model calls.

A `Usage` is opened around one question (``with track() as usage:``); every LM call made
inside it, on any thread that inherited the context, is added to it. Backends record
calls, tokens, latency, cost, cache hits and retries; the adapter records parse repairs.

Tokens and cost are counted twice: ``prompt_tokens``/``completion_tokens``/``cost_usd`` are
what the backend would bill for the call (the same whether or not the answer came from the
cache, whose entries keep the original usage), ``spent_*`` what this run actually paid
(0 on a cache hit). Tables, Pareto fronts and search objectives use the billable fields.

``cached_prompt_tokens`` is the part of the billable prompt tokens the *provider* served from
its prompt cache (OpenAI's ``usage.prompt_tokens_details.cached_tokens``, Anthropic's
``cache_read_input_tokens``, vLLM's and llama.cpp's prefix caches): billable, like the tokens
it is part of, so a replay from teammed's own response cache reports the same figure.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

logger = logging.getLogger(__name__)

__all__ = ["Usage", "track", "current", "record_call", "record_parse", "record_ranking_repair",
           "record_format_degradation", "record_fallback", "CallListener", "listen", "notify_call_started",
           "calling_signature"]

# The behaviour being called, the label every call is recorded under (``calls_by_signature``).
# Set by `teammed.programs.Behaviour` and by `teammed.adapter.SchemaAdapter`, read by the
# backends (`teammed.backends.base.MeteredLM`) and `teammed.lm_usage`, so names survive
# optimizers that rebuild signatures (``with_instructions`` renames them).
calling_signature: contextvars.ContextVar[str] = contextvars.ContextVar("teammed_signature", default="?")


@dataclass
class Usage:
    """Counters for one question (or one run, when summed)."""

    calls: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    spent_prompt_tokens: int = 0
    spent_completion_tokens: int = 0
    spent_cost_usd: float = 0.0
    cache_hits: int = 0
    retries: int = 0
    parse_failures: int = 0
    repaired: int = 0
    ranking_repairs: int = 0
    format_degradations: int = 0
    fallbacks: int = 0
    fallbacks_by_behaviour: dict[str, int] = field(default_factory=dict)
    calls_by_signature: dict[str, int] = field(default_factory=dict)
    # (model, redacted api_base) of the deployment that answered -> its calls (backends that report one)
    answered_by: dict[tuple[str, str | None], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def as_dict(self) -> dict[str, object]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
        data["calls_by_signature"] = dict(self.calls_by_signature)
        data["fallbacks_by_behaviour"] = dict(self.fallbacks_by_behaviour)
        data["answered_by"] = [{"model": model, "api_base": base, "calls": n}
                               for (model, base), n in sorted(self.answered_by.items(),
                                                              key=lambda kv: (kv[0][0], kv[0][1] or ""))]
        data["latency_s"] = round(self.latency_s, 4)
        data["cost_usd"] = round(self.cost_usd, 8)
        data["spent_cost_usd"] = round(self.spent_cost_usd, 8)
        return data


_current: contextvars.ContextVar[Usage | None] = contextvars.ContextVar("teammed_usage", default=None)


def current() -> Usage | None:
    """The usage being recorded in this context, if any."""
    return _current.get()


@contextlib.contextmanager
def track() -> Iterator[Usage]:
    """Record every LM call made in this context (and threads that copy it) into a fresh `Usage`."""
    usage = Usage()
    token = _current.set(usage)
    try:
        yield usage
    finally:
        _current.reset(token)


class CallListener(Protocol):
    """Told of every metered LM call as it starts and ends (the CLI's progress display).

    Listening costs two list checks per call; DSPy callbacks, by contrast, inspect the call
    arguments of every module and LM call (about 13% of a call's framework CPU).
    """

    def call_started(self, signature: str) -> None: ...

    def call_finished(self, signature: str, *, tokens: int, latency_s: float, prompt_tokens: int,
                      completion_tokens: int, cost_usd: float, cache_hit: bool) -> None: ...


_listeners: tuple[CallListener, ...] = ()
_listeners_lock = threading.Lock()


@contextlib.contextmanager
def listen(listener: CallListener) -> Iterator[CallListener]:
    """Tell ``listener`` of every metered LM call inside this block, on any thread of the process
    (one CLI command runs one progress display). A listener that raises is logged, never lets a
    call fail."""
    global _listeners
    with _listeners_lock:
        _listeners = (*_listeners, listener)
    try:
        yield listener
    finally:
        with _listeners_lock:  # remove this block's entry only (the same listener may be nested)
            at = max(i for i, x in enumerate(_listeners) if x is listener)
            _listeners = _listeners[:at] + _listeners[at + 1:]


def _tell(method: str, *args: object, **kwargs: object) -> None:
    for listener in _listeners:
        try:
            getattr(listener, method)(*args, **kwargs)
        except Exception:  # a display that cannot write must not fail or unbook an LM call
            logger.warning("usage listener %r failed on %s", listener, method, exc_info=True)


def notify_call_started(signature: str) -> None:
    """A metered LM call for ``signature`` is about to be sent."""
    if _listeners:
        _tell("call_started", signature)


def record_call(
    *,
    signature: str,
    prompt_tokens: int,
    completion_tokens: int,
    latency_s: float,
    cost_usd: float = 0.0,
    cache_hit: bool = False,
    retries: int = 0,
    cached_prompt_tokens: int = 0,
    answered_by: tuple[str, str | None] | None = None,
) -> None:
    """Add one LM call to the current usage.

    ``prompt_tokens``, ``completion_tokens`` and ``cost_usd`` are the call's billable figures
    (a cache hit passes the original call's); they count as spent only when not a cache hit.
    ``cached_prompt_tokens``: how many of ``prompt_tokens`` the provider reported as read from
    its prompt cache (the original call's on a hit of teammed's response cache).
    ``answered_by``: (model string, redacted api_base) of the deployment that answered, when known.
    """
    if _current.get() is not None:  # the arguments are read only while a question is tracked
        spent = {} if cache_hit else {"spent_prompt_tokens": prompt_tokens,
                                      "spent_completion_tokens": completion_tokens, "spent_cost_usd": cost_usd}
        _add(calls=1, latency_s=latency_s, retries=retries, prompt_tokens=prompt_tokens,
             cached_prompt_tokens=cached_prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost_usd,
             cache_hits=int(cache_hit), **spent, calls_by_signature={signature: 1},
             answered_by={answered_by: 1} if answered_by is not None else {})
    if _listeners:
        _tell("call_finished", signature, tokens=prompt_tokens + completion_tokens, latency_s=latency_s,
              prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost_usd,
              cache_hit=cache_hit)


def _add(**counts: Any) -> None:
    """Add ``counts`` to the current usage's counters (a dict adds key by key); nothing outside `track`."""
    usage = _current.get()
    if usage is None:
        return
    with usage._lock:
        for name, n in counts.items():
            if isinstance(n, dict):
                tally = getattr(usage, name)
                for key, k in n.items():
                    tally[key] = tally.get(key, 0) + k
            else:
                setattr(usage, name, getattr(usage, name) + n)


def record_parse(*, repaired: bool = False, failed: bool = False) -> None:
    """Note that an LM output needed repair, or could not be parsed and fell back to defaults."""
    _add(repaired=int(repaired), parse_failures=int(failed))


def record_fallback(behaviour: str, n: int = 1) -> None:
    """Note ``n`` outputs of ``behaviour`` the program could not use at all (a vote naming no option,
    an unreadable route): dropped, or replaced by a documented non-answer default."""
    if n > 0:
        _add(fallbacks=int(n), fallbacks_by_behaviour={behaviour: int(n)})


def record_ranking_repair(n: int = 1) -> None:
    """Note ``n`` ranking repairs (duplicates, missing letters, letters outside the options)."""
    if n > 0:
        _add(ranking_repairs=int(n))


def record_format_degradation() -> None:
    """Note that a backend refused a ``response_format`` and the call was sent in a weaker dialect."""
    _add(format_degradations=1)
