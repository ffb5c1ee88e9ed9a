"""Turn ``--model`` strings into backends: ``local``, ``local:PATH.gguf`` or any litellm model."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from teammed.backends.base import MeteredLM
from teammed.backends.cache import ResponseCache
from teammed.backends.litellm_backend import LiteLLMBackend
from teammed.backends.local import LocalServer
from teammed.backends.retry import RetryPolicy
from teammed.backends.scripted import ScriptedLM

__all__ = ["Deployment", "open_deployments", "describe"]

LOCAL_MODEL = "openai/local"


@dataclass(frozen=True)
class Deployment:
    """One backend a run can send questions to, with its own concurrency limit."""

    spec: str
    lm: MeteredLM
    concurrency: int


def describe(spec: str) -> str:
    """The model's name as results record it (never a key, never a temporary port)."""
    if spec == "local":
        return "local:SmolLM2-135M-Instruct.Q4_1"
    if spec.startswith("local:"):
        return f"local:{Path(spec[6:]).stem}"
    return spec


def _on_sigterm(signum, frame):  # type: ignore[no-untyped-def]
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def open_deployments(
    specs: list[str],
    *,
    api_base: str | None = None,
    concurrency: int = 4,
    retry: RetryPolicy | None = None,
    cache: ResponseCache | None = None,
    timeout_s: float = 120.0,
    max_tokens: int = 512,
) -> Iterator[list[Deployment]]:
    """Start what needs starting (local servers), yield the deployments, stop everything after.

    ``scripted`` (or ``scripted:SECONDS`` per call) is a dry-run backend answering schema
    defaults: it exercises the whole pipeline with no model at all.

    A local server handles one request at a time, so its deployment's concurrency is 1.
    SIGTERM is turned into SystemExit so the servers are stopped on ``kill`` too.
    """
    previous = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: the caller owns signal handling
        previous = None
    with contextlib.ExitStack() as stack:
        try:
            deployments = []
            for spec in specs or ["local"]:
                if spec == "simulated" or spec.startswith("simulated:"):  # tests and benchmarks only
                    from teammed.backends.simulated import SimulatedTeamLM

                    deployments.append(Deployment(spec, SimulatedTeamLM({}, seed=int(spec[10:] or 0)), concurrency))
                elif spec == "scripted" or spec.startswith("scripted:"):
                    delay = float(spec.partition(":")[2] or 0)
                    deployments.append(Deployment(spec, ScriptedLM(delay_s=delay), concurrency))
                elif spec == "local" or spec.startswith("local:"):
                    server = stack.enter_context(LocalServer(spec.partition(":")[2] or None))
                    lm = LiteLLMBackend(LOCAL_MODEL, api_base=server.api_base, structured_output="json_object_schema",
                                        retry=retry, cache=cache, timeout_s=timeout_s, max_concurrency=1,
                                        max_tokens=max_tokens, api_key="sk-local-no-key",
                                        backend_id=f"local:{server.model_path}")
                    stack.callback(lm.close)  # runs before the server stops: waiting retries give up
                    deployments.append(Deployment(spec, lm, 1))
                else:
                    lm = LiteLLMBackend(spec, api_base=api_base, retry=retry, cache=cache, timeout_s=timeout_s,
                                        max_concurrency=concurrency, max_tokens=max_tokens)
                    stack.callback(lm.close)
                    deployments.append(Deployment(spec, lm, concurrency))
            yield deployments
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
