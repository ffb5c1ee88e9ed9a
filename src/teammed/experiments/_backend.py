"""A `BackendSpec` made concrete: the deployments a command calls, and teacher/reflection models beside them.

The same options (api base, retries, timeout, temperature, structured output, parallel requests,
the cache) reach the main model(s), a deployments file and a teacher or reflection model; all of
them stop on the same shutdown.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from teammed.backends.resolve import BackendOptions
    from teammed.experiments.specs import BackendSpec

__all__ = ["backend_options", "open_backends", "extra_lm", "model_specs", "server_of", "called_with"]


def called_with(spec: BackendSpec) -> dict[str, Any]:
    """The api base, temperature and max_tokens the calls really carry, as a run records them: a caller's
    own `dspy.BaseLM` is called as it is, so its own settings (None where it sets none), else the spec's."""
    if spec.lm is not None:
        own = getattr(spec.lm, "kwargs", None) or {}
        return {"api_base": own.get("api_base"), "temperature": own.get("temperature"),
                "max_tokens": own.get("max_tokens")}
    return {"api_base": spec.api_base, "temperature": spec.temperature, "max_tokens": spec.max_tokens}


def backend_options(spec: BackendSpec, *, command: str) -> BackendOptions:
    """The options every backend of ``spec`` is opened with. ``run`` and ``ask`` stop by their own rule,
    on questions (max_consecutive_failures); the commands whose loops go on past a failed question (DSPy's
    bootstrap, search trials, tune cells) by the backend's (`RetryPolicy.give_up_after`)."""
    from teammed.backends.cache import ResponseCache
    from teammed.backends.resolve import BackendOptions
    from teammed.backends.retry import RetryPolicy
    from teammed.inputs import check_writable_dir

    retry = RetryPolicy(attempts=spec.retry_attempts, base_s=spec.retry_base, cap_s=spec.retry_cap,
                        give_up_after=0 if command in ("run", "ask") else 5)
    if spec.cache and spec.cache_dir is not None:
        check_writable_dir(spec.cache_dir, flag="--cache-dir")
    cache = ResponseCache(spec.cache_dir) if spec.cache else None
    dialect = spec.structured_output
    return BackendOptions(api_base=spec.api_base, retry=retry, cache=cache, timeout_s=spec.timeout,
                          max_tokens=spec.max_tokens, temperature=spec.temperature,
                          structured_output=None if dialect == "auto" else dialect,
                          # the setting alone: without it an api_base llama.cpp server is sized by its slots
                          max_parallel_requests=spec.max_parallel_requests,
                          default_parallel_requests=4 * spec.concurrency, transport=spec.transport)


def server_of(spec: BackendSpec) -> str:
    """Where a command's answers come from besides the model's name, credentials masked: the api base
    (or the deployments file's content hash), the transport and the structured-output dialect. A study,
    a Special Set and a table record it, so answers of one server never stand for another's."""
    import hashlib

    from teammed.redact import redact

    if spec.deployments is not None:
        where = f"deployments sha256:{hashlib.sha256(spec.deployments.read_bytes()).hexdigest()[:16]}"
    else:
        where = redact(spec.api_base) if spec.api_base else "the provider's default endpoint"
    return f"{where} (transport {spec.transport}, structured output {spec.structured_output})"


def open_backends(spec: BackendSpec, *, command: str) -> Any:
    """``with open_backends(spec, command=...) as deployments:`` for the models or the deployments file."""
    from teammed.backends.resolve import Deployment, open_deployments

    if spec.lm is not None:  # an LM the caller holds: called as it is, never closed here
        return contextlib.nullcontext([Deployment(str(getattr(spec.lm, "model", "lm")), spec.lm, spec.concurrency)])
    return open_deployments(list(spec.models), concurrency=spec.concurrency, deployments_file=spec.deployments,
                            options=backend_options(spec, command=command))


def extra_lm(spec: BackendSpec, model: str, *, flag: str, command: str, stack: contextlib.ExitStack,
             max_tokens: int | None = None) -> Any:
    """A teacher or reflection model with the same options and shutdown as the main ones."""
    from teammed.backends.resolve import check_routable, open_lm

    check_routable(model, api_base=spec.api_base, where=flag)
    lm, _ = open_lm(model, backend_options(spec, command=command), stack=stack, max_tokens=max_tokens)
    return lm


def model_specs(spec: BackendSpec) -> list[tuple[str, str | None, dict[str, Any]]]:
    """(model, api_base, litellm_params) of every backend ``spec`` names."""
    if spec.deployments:
        from teammed.backends.resolve import load_deployments_file

        return [(e["litellm_params"]["model"], None, e["litellm_params"])
                for e in load_deployments_file(spec.deployments)]
    return [(model, spec.api_base, {}) for model in spec.models]
