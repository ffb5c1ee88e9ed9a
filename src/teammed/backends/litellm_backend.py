"""`LiteLLMBackend`: any litellm model string, with retries, a backend-keyed cache and usage.

Every call goes through ``litellm.completion``. Transient failures (429, 5xx, timeouts,
dropped connections) are retried by `RetryPolicy`, honouring ``Retry-After``; errors that
cannot succeed (bad key, bad request, unknown model) fail at once with a message naming
the model and the environment variable it expected. API keys are read by litellm from
the environment and are never stored, logged or written to results.
"""

from __future__ import annotations

import logging
import random
import threading
from typing import Any

import litellm

from teammed.backends.base import MeteredLM
from teammed.backends.cache import ResponseCache, cache_key
from teammed.backends.retry import FATAL_STATUS, TRANSIENT_STATUS, RetryPolicy
from teammed.errors import BackendError

__all__ = ["LiteLLMBackend", "expected_key_env", "structured_output_for"]

logger = logging.getLogger(__name__)

_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "azure": "AZURE_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}


def expected_key_env(model: str) -> str | None:
    """The environment variable litellm reads the key of ``model``'s provider from."""
    return _KEY_ENV.get(model.split("/", 1)[0]) if "/" in model else "OPENAI_API_KEY"


def structured_output_for(model: str) -> str:
    """The default schema dialect of a provider: OpenAI-style json_schema for the known ones."""
    provider = model.split("/", 1)[0]
    if provider in ("openai", "azure", "ollama", "ollama_chat", "hosted_vllm", "vllm", "gemini", "openrouter"):
        return "json_schema"
    return "none"


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return int(status) if isinstance(status, int) else None


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _is_transient(exc: BaseException) -> bool:
    status = _status(exc)
    if status is not None:
        return status in TRANSIENT_STATUS
    transient_types = (litellm.Timeout, litellm.APIConnectionError, litellm.RateLimitError,
                       litellm.ServiceUnavailableError, litellm.InternalServerError, ConnectionError, TimeoutError)
    return isinstance(exc, transient_types)


class LiteLLMBackend(MeteredLM):
    """A DSPy LM for any litellm model; ``api_base`` points it at an OpenAI-compatible server."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        structured_output: str | None = None,
        retry: RetryPolicy | None = None,
        timeout_s: float = 120.0,
        cache: ResponseCache | None = None,
        max_concurrency: int | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        backend_id: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(model=model, temperature=temperature, max_tokens=max_tokens, cache=cache is not None,
                         num_retries=0, **kwargs)
        self.api_base = api_base
        # What the cache keys answers by: the server's address, or a stable name for servers
        # whose address changes between runs (the local model's port is picked at start-up).
        self.backend_id = backend_id or api_base
        self.structured_output = structured_output or structured_output_for(model)
        self.retry = retry or RetryPolicy()
        self.timeout_s = timeout_s
        self.response_cache = cache
        self._slots = threading.BoundedSemaphore(max_concurrency) if max_concurrency else None
        self._rng = random.Random()
        self._closed = threading.Event()
        self._price_fallback = True

    def close(self) -> None:
        """Refuse further calls and wake any call waiting to retry (used on shutdown)."""
        self._closed.set()

    def complete(self, messages, **params):  # type: ignore[no-untyped-def]
        params.pop("num_retries", None)
        key = None
        if self.response_cache is not None:
            keyed = {k: v for k, v in params.items() if k != "api_key"}
            key = cache_key(model=self.model, api_base=self.backend_id, messages=messages, params=keyed)
            hit = self.response_cache.get(key)
            if hit is not None:
                return litellm.ModelResponse(**hit), {"cache_hit": True}
        response, retries = self._call_with_retries(messages, params)
        # litellm already priced the response; computing it again cost ~10% of a call's CPU
        cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        if cost is None and self._price_fallback:
            try:
                cost = litellm.completion_cost(completion_response=response)
            except Exception:  # unknown price: cost stays 0 and the summary says "unknown"
                cost = 0.0
            self._price_fallback = bool(cost)  # a model litellm cannot price is not retried per call
        cost = float(cost or 0.0)
        if key is not None and self.response_cache is not None:
            self.response_cache.put(key, response.model_dump())
        return response, {"retries": retries, "cost_usd": cost}

    def _call_with_retries(self, messages: list[dict[str, Any]], params: dict[str, Any]):
        for attempt in range(self.retry.attempts):
            if self._closed.is_set():
                raise BackendError(f"{self.model}: the backend was closed (the run is stopping)")
            try:
                if self._slots is None:
                    return self._send(messages, params), attempt
                with self._slots:
                    return self._send(messages, params), attempt
            except Exception as exc:  # classified below: transient ones retry, the rest fail fast
                if not _is_transient(exc):
                    raise self._fatal(exc) from exc
                if attempt + 1 >= self.retry.attempts:
                    raise BackendError(
                        f"{self.model} still failing after {self.retry.attempts} attempts: {type(exc).__name__}: "
                        f"{_short(exc)}"
                    ) from exc
                wait = self.retry.delay(attempt, retry_after=_retry_after(exc), rng=self._rng)
                logger.warning("%s: %s (attempt %d/%d); retrying in %.1fs", self.model, _short(exc), attempt + 1,
                               self.retry.attempts, wait)
                self._closed.wait(wait)
        raise AssertionError("unreachable")

    def _send(self, messages: list[dict[str, Any]], params: dict[str, Any]):
        return litellm.completion(model=self.model, messages=messages, api_base=self.api_base,
                                  timeout=self.timeout_s, num_retries=0, **params)

    def _fatal(self, exc: BaseException) -> BackendError:
        status = _status(exc)
        env = expected_key_env(self.model)
        where = f" at {self.api_base}" if self.api_base else ""
        if status in (401, 403) or isinstance(exc, litellm.AuthenticationError):
            return BackendError(f"{self.model}{where} refused the credentials (HTTP {status}); set {env} "
                                f"in the environment to a valid key")
        if status == 404 or isinstance(exc, litellm.NotFoundError):
            return BackendError(f"{self.model}{where} is not a model this backend knows (HTTP 404); check the "
                                f"model string, and --api-base for OpenAI-compatible servers")
        if status in FATAL_STATUS or isinstance(exc, litellm.BadRequestError):
            return BackendError(f"{self.model}{where} rejected the request (HTTP {status}): {_short(exc)}")
        if "api_key" in str(exc).lower() or "api key" in str(exc).lower():
            return BackendError(f"{self.model}: no API key found; set {env} in the environment")
        return BackendError(f"{self.model}{where} failed: {type(exc).__name__}: {_short(exc)}")

    def dump_state(self) -> dict[str, Any]:
        return {"model": self.model, "api_base": self.api_base, "structured_output": self.structured_output}


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."
