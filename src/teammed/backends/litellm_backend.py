"""`LiteLLMBackend`: any litellm model string (or a litellm Router), with retries, dialects, a cache and usage.

Calls go through ``litellm.completion`` (``Router.completion`` for a deployments file), except to an
OpenAI-compatible server (``openai/<alias>`` with ``api_base``), sent by `teammed.backends.openai_http`
(``transport="litellm"`` keeps litellm). `teammed.backends.faults.classify` decides what a failure means;
`close()` releases every caller at once; docs/architecture.md. API keys are read from the environment.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

from teammed import interrupts, usage
from teammed._litellm import litellm as _litellm
from teammed.backends.base import CallOptions, MeteredLM, call_options
from teammed.backends.cache import ResponseCache, cache_key
from teammed.backends.dialects import next_dialect, provider_profile, response_format_for
from teammed.backends.faults import Fault, classify, fatal_error
from teammed.backends.openai_http import ChatResponse, OpenAICompatibleClient, RequestDeadlineExceeded
from teammed.backends.retry import RetryPolicy
from teammed.errors import BackendError, FatalBackendError, TransientBackendError
from teammed.interrupts import run_interruptible
from teammed.prompt_cache import mark_shared_prefix
from teammed.redact import redact, register_secret, register_url_credentials
from teammed.schema import DIALECTS, read_json

__all__ = ["LiteLLMBackend", "BackendClosedError", "expected_key_env", "KEYLESS"]

logger = logging.getLogger(__name__)

KEYLESS = "sk-no-key-required"  # what a keyless OpenAI-compatible server is sent (the client insists on one)

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


class BackendClosedError(BackendError):
    """The run is stopping (Ctrl-C, SIGTERM): the call was abandoned, not failed."""


class _FormatRejected(Exception):
    def __init__(self, fault: Fault):
        super().__init__(fault.message)
        self.fault = fault


def expected_key_env(model: str) -> str | None:
    """The environment variable litellm reads the key of ``model``'s provider from."""
    return _KEY_ENV.get(model.split("/", 1)[0]) if "/" in model else "OPENAI_API_KEY"


# how long a streak of failed calls lasts (or the request timeout) before a backend gives up: not a blip
GIVE_UP_AFTER_S, LITELLM_GRACE_S = 30.0, 10.0  # and what litellm's own work may add to --timeout
# no answer this long and a call failed after every attempt: given up on whatever the command (one call at the
# default deadline and retries takes about 8 minutes, so every command stops within about 10 of a last answer)
SILENT_S = 300.0


def _redacted_base(api_base: Any) -> str | None:
    return redact(str(api_base).rstrip("/")) if api_base else None


def _router_deployment_ids(router: Any, model_name: str | None = None) -> dict[str, tuple[str, str | None]]:
    """A litellm Router's deployments (of ``model_name``, or all) by id: (model string, redacted api_base)."""
    try:
        entries = router.get_model_list(model_name=model_name) or []
    except Exception:  # an older or stub router: the answering deployment is read from each response
        return {}
    out = {}
    for entry in entries:
        params = entry.get("litellm_params") or {}
        ident = (entry.get("model_info") or {}).get("id")
        if ident and params.get("model"):
            out[str(ident)] = (str(params["model"]), _redacted_base(params.get("api_base")))
    return out


class LiteLLMBackend(MeteredLM):
    """A DSPy LM for any litellm model; ``api_base`` points it at an OpenAI-compatible server."""

    takes_schema = True  # the adapter hands over the schema; the dialect is decided here

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key_env: str | None = None,
        structured_output: str | None = None,
        retry: RetryPolicy | None = None,
        timeout_s: float = 120.0,
        cache: ResponseCache | None = None,
        max_parallel_requests: int | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        backend_id: str | None = None,
        router: Any = None,
        profile: str | None = None,
        transport: str = "auto",
        **kwargs: Any,
    ):
        if structured_output not in (None, "auto", *DIALECTS):
            raise ValueError(f"unknown structured-output dialect {structured_output!r}; use auto or one of "
                             f"{', '.join(DIALECTS)}")
        super().__init__(model=model, temperature=temperature, max_tokens=max_tokens, cache=cache is not None,
                         num_retries=0, **kwargs)
        self.api_base = api_base
        self.api_key_env = api_key_env
        register_url_credentials(api_base)  # a password inside the URL is masked in every encoding
        for secret in (self.kwargs.get("api_key"), os.environ.get(api_key_env or expected_key_env(model) or "")):
            register_secret(secret, min_length=8)  # an API key; dummy keys of a few letters are not secrets
        # What the cache keys answers by: the server's address, or a stable name for servers
        # whose address changes between runs (the local model's port is picked at start-up).
        self.backend_id = backend_id or api_base
        self.profile = profile or provider_profile(model, api_base=api_base)
        self.structured_output = (structured_output if structured_output not in (None, "auto")
                                  else "json_schema_strict" if self.profile == "openai" else "json_schema")
        self.retry = retry or RetryPolicy()
        self.timeout_s = timeout_s
        self.response_cache = cache
        self.router = router
        self._router_ids = _router_deployment_ids(router) if router is not None else {}
        # the deployments behind this model_name: what run.json lists as its members
        self.router_members = sorted(set(_router_deployment_ids(router, model).values()),
                                     key=lambda m: (m[0], m[1] or "")) if router is not None else []
        self.max_parallel_requests = max_parallel_requests
        self._slots = threading.BoundedSemaphore(max_parallel_requests) if max_parallel_requests else None
        self._rng = random.Random()
        self._closed = threading.Event()
        self._dialect_lock = threading.Lock()
        self.degradations: list[tuple[str, str]] = []
        self._price_fallback = True
        if transport not in ("auto", "litellm"):
            raise ValueError(f"unknown transport {transport!r}; use auto or litellm")
        self._direct: OpenAICompatibleClient | None = None
        if transport == "auto" and router is None and api_base and model.startswith("openai/"):
            # an OpenAI-compatible server: the same request without litellm's per-call machinery
            self._direct = OpenAICompatibleClient(api_base, api_key=None, timeout_s=timeout_s)
        self._answered = False  # a refused connection after the first answer is a restart, not a wrong URL
        self._failed_in_a_row = 0  # calls that failed after every attempt since the last answer
        self._streak_began: float | None = None  # when the first of them failed
        self._silent_since = time.monotonic()  # the last answer (or the opening): how long the server is silent
        self._gave_up: str | None = None  # why the backend gave up on the server (every later call fails at once)

    @property
    def transport(self) -> str:
        """``direct`` (teammed's OpenAI-compatible client) or ``litellm``."""
        return "direct" if self._direct is not None else "litellm"

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Refuse further calls and release every caller waiting on a request or a retry (shutdown)."""
        self._closed.set()
        if self._direct is not None:
            self._direct.close()  # the requests in flight on their callers' threads end at once

    def where(self) -> str:
        return f" at {redact(self.api_base)}" if self.api_base else ""

    def check_credentials(self) -> None:
        """Before the first call: the key this deployment needs is in the environment (or none is needed)."""
        if self.router is not None or self.kwargs.get("api_key"):
            return
        if self.api_key_env:
            value = os.environ.get(self.api_key_env)
            if not value:
                raise FatalBackendError(f"{self.model}{self.where()} needs an API key.", kind="authentication",
                                        fix=f"Set {self.api_key_env} in the environment.")
            self.kwargs["api_key"] = value
            return
        env = expected_key_env(self.model)
        if self.api_base:  # an OpenAI-compatible server: keyless unless the variable is set
            self.kwargs["api_key"] = (os.environ.get(env) if env else None) or KEYLESS
            return
        litellm = _litellm()
        try:
            missing = list(litellm.validate_environment(model=self.model).get("missing_keys") or [])
        except Exception:  # a provider litellm cannot check: let the first call tell
            missing = []
        if self.model.partition("/")[0] in ("ollama", "ollama_chat"):
            missing = [m for m in missing if m != "OLLAMA_API_BASE"]  # litellm's default: localhost:11434
        if missing:
            raise FatalBackendError(f"{self.model} needs credentials that are not set.", kind="authentication",
                                    fix=f"Set {' and '.join(missing)} in the environment "
                                        f"(or use --api-base for a keyless OpenAI-compatible server).")

    # ------------------------------------------------------------------ calls
    def _api_key(self) -> str | None:
        """The key sent with each request: given, else from ``api_key_env`` or the provider's variable."""
        key = self.kwargs.get("api_key")
        if key:
            return str(key)
        env = self.api_key_env or expected_key_env(self.model)
        return os.environ.get(env) if env else None

    def _prepare(self, messages, params, schema, plain, options):  # type: ignore[no-untyped-def]
        """The request for the current dialect, its cache key, and a cached answer if there is one."""
        dialect = self.structured_output
        if plain is not None and dialect in ("json_object", "none"):
            messages = plain()  # the schema is no longer enforced: the prompt must spell out the fields
        if self.profile == "anthropic":  # caches only up to a marked breakpoint: the end of the shared case
            messages = mark_shared_prefix(messages)
        request = dict(params)
        if schema is not None:
            fmt = response_format_for(dialect, schema, profile=self.profile)
            if fmt is not None:
                request["response_format"] = fmt
        key = hit = None
        if self.response_cache is not None and options.use_cache:
            keyed = {k: v for k, v in request.items() if k != "api_key"}
            key = cache_key(model=self.model, api_base=self.backend_id, messages=messages, params=keyed,
                            rollout_id=options.rollout_id)
            found = self.response_cache.get(key)
            if found is not None:
                cached = (ChatResponse.model_validate(found["response"]) if self._direct is not None
                          else _litellm().ModelResponse(**found["response"]))
                who = found.get("answered_by")
                hit = (cached, {"cache_hit": True, "cost_usd": found.get("cost_usd", 0.0),
                                "answered_by": tuple(who) if isinstance(who, list) and len(who) == 2
                                else self.answered_by(cached)})
        return dialect, messages, request, key, hit

    def answered_by(self, response: Any) -> tuple[str, str | None]:
        """(model string, redacted api_base) of the deployment that answered ``response``: with a Router,
        the deployment litellm picked (its ``_hidden_params`` ``model_id``/``api_base``), else this one
        (the embedded model by its file's name: its port changes every run)."""
        if self.router is not None:
            hidden = getattr(response, "_hidden_params", None) or {}
            found = self._router_ids.get(str(hidden.get("model_id")))
            if found is not None:
                return found
            model, base = hidden.get("litellm_model_name"), hidden.get("api_base")
            return (str(model), _redacted_base(base)) if model else (self.model, None)
        if str(self.backend_id or "").startswith("local:"):
            return f"local:{Path(str(self.backend_id)[6:]).stem}", None
        return self.model, _redacted_base(self.api_base)

    def _finish(self, response: Any, retries: int, key: str | None, *, json_expected: bool):  # type: ignore[no-untyped-def]
        cost = self._cost(response)
        who = self.answered_by(response)
        if key is not None and self.response_cache is not None:
            text = (response.choices[0].message.content if response.choices else "") or ""
            if text.strip() and (not json_expected or isinstance(read_json(text)[0], dict)):
                self.response_cache.put(key, {"response": response.model_dump(),
                                              "usage": dict(response.usage or {}), "cost_usd": cost,
                                              "answered_by": list(who)})
        return response, {"retries": retries, "cost_usd": cost, "answered_by": who}

    def complete(self, messages, **params):  # type: ignore[no-untyped-def]
        params.pop("num_retries", None)  # teammed's own keys out of the call's parameters
        schema, plain = params.pop("teammed_schema", None), params.pop("teammed_plain_messages", None)
        options = call_options.get() or CallOptions()
        while True:
            dialect, messages, request, key, hit = self._prepare(messages, params, schema, plain, options)
            if dialect in ("json_object", "none"):
                plain = None
            if hit is not None:
                return hit
            try:
                response, retries = self._call_with_retries(messages, request)
            except _FormatRejected as rejected:
                self._degrade(dialect, rejected.fault)
                continue
            return self._finish(response, retries, key, json_expected=schema is not None)

    def _degrade(self, dialect: str, fault: Fault) -> None:
        with self._dialect_lock:
            if self.structured_output != dialect:  # another thread already moved on
                usage.record_format_degradation()
                return
            weaker = next_dialect(dialect)
            if weaker is None:
                raise FatalBackendError(f"{self.model}{self.where()} rejected even a plain request: "
                                        f"{fault.message[:300]}", kind="bad_request",
                                        fix="Check the server's log for what it expects.")
            self.structured_output = weaker
            self.degradations.append((dialect, weaker))
        usage.record_format_degradation()
        logger.warning("%s%s does not take response_format %s (HTTP %s); using %s for the rest of the run "
                       "(set --structured-output %s to skip this)", self.model, self.where(), dialect,
                       fault.status, weaker, weaker)

    def _cost(self, response: Any) -> float:
        if self.api_base and self.router is None:
            return 0.0  # a self-hosted server: litellm's price list does not apply
        # litellm already priced the response; computing it again cost ~10% of a call's CPU
        cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        if cost is None and self._price_fallback:
            try:
                cost = _litellm().completion_cost(completion_response=response)
            except Exception:  # unknown price: cost stays 0 and the summary says "unknown"
                cost = 0.0
            self._price_fallback = bool(cost)  # a model litellm cannot price is not retried per call
        return float(cost or 0.0)

    def _failed(self, exc: Exception, attempt: int) -> float:
        """How long to wait before the next attempt; raises when there is none (fatal, format, last)."""
        fault = classify(exc)
        if fault.action == "degrade":
            raise _FormatRejected(fault) from exc
        if fault.action == "fatal" and not (fault.kind == "connection" and self._answered):
            raise fatal_error(fault, head=f"{self.model}{self.where()}", api_base=self.api_base,
                              key_env=self.api_key_env or expected_key_env(self.model)) from None
        if attempt + 1 >= self.retry.attempts:
            said = (f"{self.model}{self.where()} still failing after {self.retry.attempts} attempts: "
                    f"{type(exc).__name__}: {fault.message[:300]}")
            with self._dialect_lock:
                self._failed_in_a_row += 1
                now = time.monotonic()
                began = self._streak_began = self._streak_began or now
                # a streak, not a blip: K calls in a row, and no answer for at least one request's deadline
                # (calls failing together in a burst of concurrent requests do not make a dead server)
                silent = now - self._silent_since
                if (self.retry.give_up_after and self._failed_in_a_row >= self.retry.give_up_after
                        and now - began >= min(self.timeout_s, GIVE_UP_AFTER_S)):
                    self._gave_up = (f"{self._failed_in_a_row} calls in a row failed after every attempt over "
                                     f"{now - began:.0f} s without an answer (the last: {said})")
                elif silent >= SILENT_S:
                    self._gave_up = f"no answer for {silent:.0f} s, and a call failed after every attempt ({said})"
            if self._gave_up is not None:
                raise self._given_up() from None
            raise TransientBackendError(said) from None
        wait = self.retry.delay(attempt, retry_after=fault.retry_after, rng=self._rng)
        logger.warning("%s%s: %s (attempt %d/%d); retrying in %.1fs", self.model, self.where(),
                       fault.message[:200], attempt + 1, self.retry.attempts, wait)
        return wait

    def _given_up(self) -> FatalBackendError:
        return FatalBackendError(f"{self.model}{self.where()}: giving up on the server: {self._gave_up}",
                                 kind="unavailable",
                                 fix="Check that the server runs and answers within --timeout (its log, a proxy "
                                     "in HTTP_PROXY/HTTPS_PROXY), or raise --timeout/--retry-attempts; then run the "
                                     "command again (it resumes).")

    def _answer_came(self) -> None:
        self._answered = True
        if self._failed_in_a_row:
            with self._dialect_lock:
                self._failed_in_a_row, self._streak_began = 0, None
        self._silent_since = time.monotonic()

    def _call_with_retries(self, messages: list[dict[str, Any]], params: dict[str, Any]):
        if self._gave_up is not None:
            raise self._given_up()
        for attempt in range(self.retry.attempts):
            self._check_open()
            try:
                response = self._send_bounded(messages, params)
            except BackendClosedError:
                raise
            except Exception as exc:  # classified: transient ones retry, the rest fail fast
                if self._closed.wait(self._failed(exc, attempt)):
                    self._check_open()
                continue
            self._answer_came()
            return response, attempt
        raise AssertionError("unreachable")

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise BackendClosedError(f"{self.model}: the backend was closed (the run is stopping)")

    def _send_bounded(self, messages: list[dict[str, Any]], params: dict[str, Any]):
        if self._slots is None:
            return self._send_interruptible(messages, params)
        while not self._slots.acquire(timeout=interrupts.SLICE_S):  # a closing backend frees its waiters
            self._check_open()
        try:
            self._check_open()  # a slot that came as the backend closed sends nothing
            return self._send_interruptible(messages, params)
        finally:
            self._slots.release()

    def _send_interruptible(self, messages: list[dict[str, Any]], params: dict[str, Any]):
        """Send; give up at once when the backend closes, and at the deadline (`RequestDeadlineExceeded`). The
        direct client sends on this thread; the main thread and litellm on a worker the caller can leave."""
        deadline = time.monotonic() + self.timeout_s
        if self._direct is not None and not interrupts.on_main_thread():
            # a connect or TLS handshake runs on a thread we can leave
            connect = functools.partial(run_interruptible, check=self._check_open)
            try:
                return self._send(messages, params, deadline, connect_with=connect)
            except Exception:
                self._check_open()  # cut off by close(): the run is stopping, the request did not fail
                raise

        began: list[float] = []  # litellm's request: timed from when a worker starts it, with its own CPU's grace

        def send() -> Any:
            began.append(time.monotonic())
            return self._send(messages, params, deadline)

        def in_time() -> None:
            self._check_open()
            if began and time.monotonic() > began[0] + self.timeout_s + LITELLM_GRACE_S:
                raise RequestDeadlineExceeded.after(self.timeout_s)

        return run_interruptible(send, check=in_time)

    def _send(self, messages: list[dict[str, Any]], params: dict[str, Any], deadline: float | None = None,
              connect_with: Any = None):
        if self._direct is not None:
            return self._direct.complete(model=self.model, messages=messages, connect_with=connect_with,
                                         deadline=deadline, **{**params, "api_key": self._api_key()})
        if self.router is not None:
            return self.router.completion(model=self.model, messages=messages, timeout=self.timeout_s,
                                          num_retries=0, **params)
        return _litellm().completion(model=self.model, messages=messages, api_base=self.api_base,
                                  timeout=self.timeout_s, num_retries=0, max_retries=0, **params)

    def dump_state(self) -> dict[str, Any]:
        return {"model": self.model, "api_base": redact(self.api_base) if self.api_base else None,
                "structured_output": self.structured_output, "transport": self.transport}
