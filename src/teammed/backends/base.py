"""`MeteredLM`: the base of every teammed LM; it records each call in the current `teammed.usage.Usage`.

It implements DSPy's public call interface (``lm(prompt)`` / ``lm(messages=...)``), not the
deprecated ``BaseLM.forward`` hook. ``cache=False`` bypasses the cache for one call; ``rollout_id``
is part of the cache key but is never sent to the server.
"""

from __future__ import annotations

import contextvars
import datetime
import time
import uuid
from dataclasses import dataclass
from typing import Any

import dspy
from dspy.utils.callback import with_callbacks

from teammed import interrupts, usage
from teammed.usage import calling_signature

__all__ = ["MeteredLM", "CallOptions", "call_options", "cached_prompt_tokens"]


def _field(node: Any, name: str) -> Any:
    return node.get(name) if isinstance(node, dict) else getattr(node, name, None)


def cached_prompt_tokens(tokens: Any) -> int:
    """How many of a response's prompt tokens the provider read from its prompt cache: OpenAI's
    ``prompt_tokens_details.cached_tokens`` (also vLLM's, llama.cpp's and litellm's for every provider),
    else Anthropic's ``cache_read_input_tokens``; 0 when the response says nothing. Never more than
    the prompt tokens. ``tokens`` is a response's ``usage`` (an object or a dict)."""
    if tokens is None:
        return 0
    cached = _field(_field(tokens, "prompt_tokens_details"), "cached_tokens")  # None without details
    if cached is None:
        cached = _field(tokens, "cache_read_input_tokens")
    try:
        cached = int(cached or 0)
    except (TypeError, ValueError):  # a server's odd value: nothing known to be cached
        return 0
    prompt = _field(tokens, "prompt_tokens")
    return max(0, min(cached, int(prompt))) if isinstance(prompt, int) and prompt >= 0 else max(0, cached)


@dataclass(frozen=True)
class CallOptions:
    """DSPy's per-call execution options, seen by `MeteredLM.complete` implementations that care."""

    use_cache: bool = True
    rollout_id: Any = None


call_options: contextvars.ContextVar[CallOptions | None] = contextvars.ContextVar("teammed_call_options",
                                                                                  default=None)


class MeteredLM(dspy.BaseLM):
    """Subclasses implement `complete(messages, **kwargs) -> (ModelResponse, info)`.

    ``info`` may carry ``cache_hit``, ``retries`` and ``cost_usd``. Every call is counted
    in the current `teammed.usage.Usage`, cached or not, with its latency and tokens.
    """

    structured_output: str = "json_schema"

    def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        raise NotImplementedError

    def _request(self, prompt: str | None, messages: list[dict[str, Any]] | None,
                 kwargs: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any], CallOptions]:
        messages = messages if messages is not None else [{"role": "user", "content": prompt or ""}]
        request = {**self.kwargs, **kwargs}
        options = CallOptions(use_cache=bool(request.pop("cache", self.cache)),
                              rollout_id=request.pop("rollout_id", None))
        return messages, {k: v for k, v in request.items() if v is not None}, options

    def _record(self, response: Any, info: dict[str, Any], *, signature: Any, elapsed: float, prompt: str | None,
                messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> list[Any]:
        tokens = getattr(response, "usage", None)
        usage.record_call(
            signature=signature,
            prompt_tokens=int(getattr(tokens, "prompt_tokens", 0) or 0),
            cached_prompt_tokens=cached_prompt_tokens(tokens),
            completion_tokens=int(getattr(tokens, "completion_tokens", 0) or 0),
            latency_s=elapsed,
            cost_usd=float(info.get("cost_usd") or 0.0),
            cache_hit=bool(info.get("cache_hit")),
            retries=int(info.get("retries") or 0),
            answered_by=info.get("answered_by"),
        )
        tracker = dspy.settings.usage_tracker
        if tracker is not None and not info.get("cache_hit") and tokens is not None:
            tracker.add_usage(self.model, dict(tokens))  # DSPy's own accounting (dspy.track_usage)
        outputs = [(choice.message.content or "") if choice.message is not None else "" for choice in response.choices]
        if not dspy.settings.disable_history:
            self.update_history({
                "prompt": prompt, "messages": messages, "kwargs": {k: v for k, v in kwargs.items()
                                                                 if not k.startswith("api_")},
                "response": response, "outputs": outputs, "usage": dict(tokens or {}),
                "cost": info.get("cost_usd"), "timestamp": datetime.datetime.now().isoformat(),
                "uuid": str(uuid.uuid4()), "model": self.model, "response_model": getattr(response, "model", None),
                "model_type": self.model_type,
            })
        return outputs

    @with_callbacks
    def __call__(self, prompt: str | None = None, messages: list[dict[str, Any]] | None = None,
                 **kwargs: Any) -> list[Any]:
        return self._call(prompt, messages, **kwargs)

    @with_callbacks
    async def acall(self, prompt: str | None = None, messages: list[dict[str, Any]] | None = None,
                    **kwargs: Any) -> list[Any]:
        """`__call__` on one of the process's worker threads (`teammed.interrupts.in_worker`):
        concurrent ``acall``s wait on the server together."""
        return await interrupts.in_worker(self._call, prompt, messages, **kwargs)

    def _call(self, prompt: str | None, messages: list[dict[str, Any]] | None, **kwargs: Any) -> list[Any]:
        interrupts.check_cancelled()
        messages, request, options = self._request(prompt, messages, kwargs)
        signature = calling_signature.get()
        usage.notify_call_started(signature)
        started = time.perf_counter()
        token = call_options.set(options)
        try:
            response, info = self.complete(messages, **request)
        finally:
            call_options.reset(token)
        return self._record(response, info, signature=signature, elapsed=time.perf_counter() - started,
                            prompt=prompt, messages=messages, kwargs=kwargs)
