"""`MeteredLM`: the base of every teammed LM; it records each call in the current `Usage`."""

from __future__ import annotations

import time
from typing import Any

import dspy
from litellm import ModelResponse

from teammed import usage
from teammed.adapter import calling_signature

__all__ = ["MeteredLM"]


class MeteredLM(dspy.BaseLM):
    """Subclasses implement `complete(messages, **kwargs) -> (ModelResponse, info)`.

    ``info`` may carry ``cache_hit``, ``retries`` and ``cost_usd``. Every call is counted
    in the current `teammed.usage.Usage`, cached or not, with its latency and tokens.
    """

    structured_output: str = "json_schema"

    def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> tuple[ModelResponse, dict[str, Any]]:
        raise NotImplementedError

    def forward(self, prompt: str | None = None, messages: list[dict[str, Any]] | None = None, **kwargs: Any):
        messages = messages if messages is not None else [{"role": "user", "content": prompt or ""}]
        request = {**self.kwargs, **kwargs}
        request = {k: v for k, v in request.items() if v is not None and k not in ("cache", "rollout_id")}
        started = time.perf_counter()
        response, info = self.complete(messages, **request)
        elapsed = time.perf_counter() - started
        tokens = getattr(response, "usage", None)
        usage.record_call(
            signature=calling_signature.get(),
            prompt_tokens=int(getattr(tokens, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(tokens, "completion_tokens", 0) or 0),
            latency_s=elapsed,
            cost_usd=float(info.get("cost_usd") or 0.0),
            cache_hit=bool(info.get("cache_hit")),
            retries=int(info.get("retries") or 0),
        )
        if info.get("cache_hit"):
            response.cache_hit = True  # type: ignore[attr-defined]
        return response

    async def aforward(self, prompt=None, messages=None, **kwargs):  # type: ignore[no-untyped-def]
        return self.forward(prompt=prompt, messages=messages, **kwargs)
