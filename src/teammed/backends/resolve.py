"""Turn ``--model`` strings (or a ``--deployments`` file) into backends, and stop them promptly.

``local``, ``local:PATH.gguf``, ``scripted[:SECONDS]`` or any litellm model string; a
deployments file in litellm Router ``model_list`` form becomes one deployment per
``model_name`` whose calls litellm's Router spreads over the entries (routing, cooldowns,
fallbacks, rpm/tpm limits).

Ctrl-C and SIGTERM close every backend first (callers waiting on a request or a retry are
released at once), then raise in the main thread; a second signal exits immediately.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teammed import interrupts
from teammed.backends.base import MeteredLM
from teammed.backends.cache import ResponseCache
from teammed.backends.dialects import provider_profile
from teammed.backends.litellm_backend import LiteLLMBackend
from teammed.backends.local import REQUEST_DEFAULTS as LOCAL_REQUEST_DEFAULTS
from teammed.backends.local import LocalServer
from teammed.backends.retry import RetryPolicy
from teammed.backends.scripted import ScriptedLM
from teammed.errors import ConfigError, FatalBackendError
from teammed.redact import redact, register_secret, register_url_credentials

__all__ = ["Deployment", "BackendOptions", "open_deployments", "open_lm", "describe", "load_deployments_file",
           "shutdown_on_signals", "check_routable"]

LOCAL_MODEL = "openai/local"
DEFAULT_MAX_PARALLEL = 4
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Deployment:
    """One backend a run can send questions to, with its own concurrency limit."""

    spec: str
    lm: MeteredLM
    concurrency: int


DEFAULT_TIMEOUT_S = 120.0
LOCAL_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class BackendOptions:
    """How every backend of a command is reached: retries, timeout, cache, dialect, parallel requests."""

    api_base: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    cache: ResponseCache | None = None
    timeout_s: float | None = None  # None: DEFAULT_TIMEOUT_S, or LOCAL_TIMEOUT_S for the embedded model
    max_tokens: int = 512
    temperature: float = 0.0  # --temperature: every call of every backend of the command
    structured_output: str | None = None
    max_parallel_requests: int | None = None  # --max-parallel-requests: wins over what a server says
    default_parallel_requests: int | None = None  # neither flag nor server: the CLI's 4 x --concurrency
    transport: str = "auto"  # "litellm": no direct client even for OpenAI-compatible servers

    def timeout_for(self, *, local: bool = False) -> float:
        """Seconds per request: ``--timeout`` when given, else a default that fits the backend (the embedded
        model can take minutes per answer on a busy CPU; why a short one hurts: `teammed.backends.local_probe`)."""
        if self.timeout_s is not None:
            return self.timeout_s
        return LOCAL_TIMEOUT_S if local else DEFAULT_TIMEOUT_S


def describe(spec: str) -> str:
    """The model's name as results record it (never a key, never a temporary port)."""
    if spec == "local":
        return "local:SmolLM2-135M-Instruct.Q4_1"
    if spec.startswith("local:"):
        return f"local:{Path(spec[6:]).stem}"
    return redact(spec)


# ---------------------------------------------------------------- signals
_open_lms: list[Any] = []
_open_lock = threading.Lock()
_stopping = threading.Event()


def _track(lm: Any, stack: contextlib.ExitStack) -> None:
    """Close ``lm`` on Ctrl-C/SIGTERM while it is open, and when ``stack`` unwinds."""
    with _open_lock:
        _open_lms.append(lm)
    stack.callback(_untrack, lm)
    stack.callback(lm.close)


def _untrack(lm: Any) -> None:
    with _open_lock:
        if lm in _open_lms:
            _open_lms.remove(lm)


def _close_all() -> None:
    with _open_lock:
        lms = list(_open_lms)
    for lm in lms:  # each one `_track` took, a backend with close()
        lm.close()


def stopping() -> bool:
    """Whether Ctrl-C/SIGTERM has been received by `shutdown_on_signals`."""
    return _stopping.is_set()


def _on_signal(signum, frame):  # type: ignore[no-untyped-def]
    if _stopping.is_set():  # a second Ctrl-C/SIGTERM: leave now, quietly
        sys.stderr.write("teammed: stopped\n")
        sys.stderr.flush()
        os._exit(128 + signum)
    _stopping.set()
    _close_all()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def shutdown_on_signals() -> Iterator[None]:
    """While inside: SIGINT/SIGTERM close every open backend, then interrupt the main thread."""
    if not interrupts.on_main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, _on_signal)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# ---------------------------------------------------------------- deployments file
def load_deployments_file(path: Path | str) -> list[dict[str, Any]]:
    """Entries of a litellm Router ``model_list`` (YAML or JSON; a bare list or ``{"model_list": [...]}``), each
    checked; the fields (``api_key_env`` names a key's variable, a literal ``api_key`` is refused): docs/backends.md."""
    path = Path(path)
    return [_deployment(path, i, entry) for i, entry in enumerate(_model_list(path))]


def _model_list(path: Path) -> list[Any]:
    """The deployments file's ``model_list`` entries, unchecked (the file's own fields are)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the deployments file {path}: {exc.strerror}; check --deployments") from None
    try:
        import yaml

        data = yaml.safe_load(text)
    except Exception as exc:  # YAML is a superset of JSON
        raise ConfigError(f"{path} is not valid YAML/JSON ({exc}); write a litellm model_list") from None
    if isinstance(data, dict):
        _known_fields(path, data, _FILE_KEYS, "the file")
    entries = data.get("model_list") if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path} has no model_list entries; write `model_list: [{{model_name: ..., "
                          f"litellm_params: {{model: ..., api_base: ...}}}}]`")
    return entries


def _deployment(path: Path, i: int, entry: Any) -> dict[str, Any]:
    """Entry ``i`` of the model_list checked, its key named by its environment variable."""
    if not isinstance(entry, dict) or not isinstance(entry.get("litellm_params"), dict) \
            or not entry["litellm_params"].get("model"):
        raise ConfigError(f"{path}: model_list entry {i} needs litellm_params.model")
    _known_fields(path, entry, _ENTRY_KEYS, f"model_list entry {i}")
    _known_fields(path, entry["litellm_params"], _PARAM_KEYS, f"model_list entry {i} litellm_params")
    params = dict(entry["litellm_params"])
    if "api_key" in params and not str(params["api_key"]).startswith("os.environ/"):
        raise ConfigError(f"{path}: entry {i} holds a literal api_key; name its environment variable with "
                          f"api_key_env instead (secrets stay out of files)")
    env = params.pop("api_key_env", None)
    if env:
        if not os.environ.get(env):
            raise ConfigError(f"{path}: entry {i} ({params['model']}) needs {env}; set {env} in the "
                              f"environment")
        params["api_key"] = f"os.environ/{env}"
        register_secret(os.environ.get(env), min_length=8)
    register_url_credentials(params.get("api_base"))
    if not env and params.get("api_base") and "api_key" not in params:
        params["api_key"] = "sk-no-key-required"
    dialect = params.pop("structured_output", None) or entry.get("structured_output")
    return {"model_name": str(entry.get("model_name") or params["model"]), "litellm_params": params,
            "structured_output": dialect,
            "max_parallel_requests": params.get("max_parallel_requests") or entry.get("max_parallel_requests")}


_ROUTER_KEYS = ("routing_strategy", "fallbacks", "context_window_fallbacks", "cooldown_time", "allowed_fails")
# The fields a deployments file may hold; any other is refused by name (a typo must not be ignored).
_FILE_KEYS = ("model_list", "router_settings")
_ENTRY_KEYS = ("model_name", "litellm_params", "structured_output", "max_parallel_requests")
_PARAM_KEYS = ("model", "api_base", "api_key", "api_key_env", "api_version", "rpm", "tpm", "max_parallel_requests",
               "structured_output", "timeout", "organization", "region_name", "weight", "order",
               # litellm's completion parameters: each reaches the server as litellm sends it (a server's own,
               # such as vLLM's top_k, go in extra_body)
               "temperature", "top_p", "n", "stop", "max_tokens", "max_completion_tokens", "presence_penalty",
               "frequency_penalty", "logit_bias", "user", "seed", "logprobs", "top_logprobs", "reasoning_effort",
               "extra_body", "extra_headers", "service_tier", "parallel_tool_calls", "thinking", "top_k",
               "stream_timeout", "input_cost_per_token", "output_cost_per_token", "base_model",
               "custom_llm_provider")


def _known_fields(path: Path | str, section: dict[str, Any], known: Sequence[str], where: str) -> None:
    """Refuse a field teammed does not read, naming it, the closest known one and the accepted ones."""
    import difflib

    for name in section:
        if name not in known:
            close = difflib.get_close_matches(str(name), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{path}: {where} has an unknown field {name!r}{hint}; remove it or use one of "
                              f"{', '.join(known)}")


def _router_settings(path: Path | str) -> dict[str, Any]:
    """The file's ``router_settings`` that teammed passes on (routing strategy, fallbacks, cooldowns)."""
    import yaml

    data = yaml.safe_load(Path(path).read_text())
    settings = data.get("router_settings") if isinstance(data, dict) else None
    if not settings:
        return {}
    if not isinstance(settings, dict) or set(settings) - set(_ROUTER_KEYS):
        unknown = sorted(set(settings) - set(_ROUTER_KEYS)) if isinstance(settings, dict) else settings
        raise ConfigError(f"{path}: router_settings takes only {', '.join(_ROUTER_KEYS)} (got {unknown})")
    return dict(settings)


def _router_deployments(path: Path | str, options: BackendOptions) -> list[tuple[str, LiteLLMBackend]]:
    from teammed._litellm import litellm

    entries = load_deployments_file(path)
    for i, e in enumerate(entries):
        params = e["litellm_params"]
        check_routable(params["model"], api_base=params.get("api_base"),
                       custom_llm_provider=params.get("custom_llm_provider"),
                       where=f"{path}: model_list entry {i} model")
    model_list = [{"model_name": e["model_name"], "litellm_params": e["litellm_params"]} for e in entries]
    settings = {"allowed_fails": 2, "cooldown_time": max(1.0, options.retry.base_s), **_router_settings(path)}
    router = litellm().Router(model_list=model_list, num_retries=0, timeout=options.timeout_for(), **settings)
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        groups.setdefault(e["model_name"], []).append(e)
    made = []
    for name, members in groups.items():
        dialects = {m["structured_output"] for m in members if m["structured_output"]}
        if len(dialects) > 1:
            raise ConfigError(f"{path}: the entries of {name!r} ask for different structured_output "
                              f"({', '.join(sorted(dialects))}); give them one, or different model_names")
        limits = [m["max_parallel_requests"] for m in members]
        total = sum(int(x) for x in limits) if all(limits) else (options.max_parallel_requests
                                                                   or options.default_parallel_requests
                                                                   or DEFAULT_MAX_PARALLEL * len(members))
        first = members[0]["litellm_params"]
        keyed = all(m["litellm_params"].get("api_base") for m in members)
        defaults = BackendOptions()
        lm = LiteLLMBackend(name, router=router, structured_output=next(iter(dialects), options.structured_output),
                            retry=options.retry, cache=options.cache, timeout_s=options.timeout_for(),
                            max_parallel_requests=total,
                            max_tokens=int(_group_setting(path, name, members, "max_tokens", options.max_tokens,
                                                          defaults.max_tokens, "--max-tokens")),
                            temperature=float(_group_setting(path, name, members, "temperature",
                                                             options.temperature, defaults.temperature,
                                                             "--temperature")),
                            backend_id="router:" + ",".join(sorted(f"{m['litellm_params']['model']}@"
                                                                   f"{m['litellm_params'].get('api_base') or ''}"
                                                                   for m in members)),
                            profile=provider_profile(first["model"], api_base=first.get("api_base") if keyed else None))
        made.append((f"{name} ({len(members)} deployments)", lm))
    return made


def _group_setting(path: Path | str, name: str, members: list[dict[str, Any]], key: str, flag: float,
                   default: float, flag_name: str) -> float:
    """A sampling setting of a deployments group: the members' own ``litellm_params[key]`` when they
    set it (a flag left at its default never overrides it; a different value given on the command
    line is refused), else the flag's. Members that disagree are refused: one group, one setting."""
    values = {m["litellm_params"][key] for m in members if m["litellm_params"].get(key) is not None}
    if len(values) > 1:
        raise ConfigError(f"{path}: the entries of {name!r} set different {key} ({', '.join(map(str, sorted(values)))})"
                          f"; give them one, or different model_names")
    if not values:
        return flag
    (value,) = values
    if flag != default and flag != value:
        raise ConfigError(f"{path}: {name!r} sets {key}: {value} but {flag_name} {flag} was given; drop one of "
                          f"them")
    return float(value)


# ---------------------------------------------------------------- routable model strings
def check_routable(model: str, *, api_base: str | None = None, custom_llm_provider: str | None = None,
                   where: str = "--model") -> None:
    """Refuse, before any call, a model string litellm cannot route, naming the nearest known names (what
    is accepted and refused: docs/backends.md). Accepted: whatever ``litellm.get_llm_provider`` resolves,
    which is exactly what a call does first (the model behind a known provider prefix is the provider's
    to judge; an ``api_base`` it recognises counts). Offline: litellm's model map is local
    (``LITELLM_LOCAL_MODEL_COST_MAP=True``)."""
    if model.partition(":")[0] in ("local", "scripted", "simulated"):  # teammed's own backends
        return
    prefix, slash, rest = model.partition("/")
    if slash and prefix == "openai" and rest:  # an OpenAI-compatible server or OpenAI itself: no litellm needed
        return
    from teammed._litellm import litellm as _litellm

    litellm = _litellm()
    if _resolves(litellm, model, custom_llm_provider=custom_llm_provider, api_base=api_base):
        return
    guesses = _routing_guesses(litellm, model, api_base=api_base)
    hint = f"did you mean {', '.join(guesses[:4])}? Give" if guesses else "give"
    what = (f"the provider {prefix!r} is not one litellm knows" if slash and rest
            else "it has no provider prefix and is not a model litellm knows")
    raise ConfigError(f"{where} {model!r}: litellm cannot route this model string ({what}); {hint} a known "
                      f"model (e.g. gpt-4o-mini), provider/model (e.g. anthropic/claude-3-5-haiku-latest, "
                      f"ollama/llama3), or openai/<alias> with --api-base for an OpenAI-compatible server")


def _routing_guesses(litellm: Any, model: str, *, api_base: str | None) -> list[str]:
    """The model strings ``model`` may have meant: a server's own alias, the nearest providers with the
    model kept, and the nearest names litellm knows (with their provider where they need one)."""
    import difflib

    prefix, slash, rest = model.partition("/")
    providers = [str(getattr(p, "value", p)) for p in litellm.provider_list]
    known = sorted((set(litellm.model_list) | set(litellm.model_cost)) - {"sample_spec"})
    guesses: list[str] = [f"openai/{model}"] if api_base and not slash else []  # a server's own alias
    if slash and rest:  # an unknown provider prefix: the nearest providers, the model kept
        guesses += [f"{p}/{rest}" for p in difflib.get_close_matches(prefix, providers, n=3)]
    for name in difflib.get_close_matches(model, known, n=3):
        provider = (litellm.model_cost.get(name) or {}).get("litellm_provider")
        if "/" not in name and provider and not _resolves(litellm, name):
            name = f"{provider}/{name}"
        if name not in guesses:
            guesses.append(name)
    return guesses


def _resolves(litellm: Any, model: str, **where: Any) -> bool:
    try:
        litellm.get_llm_provider(model, **where)
    except Exception:  # litellm.BadRequestError: "LLM Provider NOT provided"
        return False
    return True


# ---------------------------------------------------------------- opening
def open_lm(spec: str, options: BackendOptions, *, stack: contextlib.ExitStack, concurrency: int = 4,
            max_tokens: int | None = None) -> tuple[MeteredLM, int]:
    """One LM for ``spec`` with ``options``, closed when ``stack`` unwinds; returns (lm, questions in flight)."""
    max_tokens = max_tokens or options.max_tokens
    if spec == "scripted" or spec.startswith("scripted:"):
        return ScriptedLM(delay_s=float(spec.partition(":")[2] or 0), keep_calls=False), concurrency
    if spec == "simulated" or spec.startswith("simulated:"):  # tests and benchmarks only, never a default
        from teammed.backends.simulated import SimulatedTeamLM

        return SimulatedTeamLM({}, seed=int(spec.partition(":")[2] or 0)), concurrency
    if spec == "local" or spec.startswith("local:"):
        server = stack.enter_context(LocalServer(spec.partition(":")[2] or None))
        lm = LiteLLMBackend(LOCAL_MODEL, api_base=server.api_base,
                            structured_output=options.structured_output or "json_object_schema",
                            retry=options.retry, cache=options.cache, timeout_s=options.timeout_for(local=True),
                            max_parallel_requests=1, max_tokens=max_tokens, api_key="sk-local-no-key",
                            temperature=options.temperature,
                            transport=options.transport,
                            backend_id=f"local:{server.model_path}", profile="llamacpp",
                            **copy.deepcopy(LOCAL_REQUEST_DEFAULTS))
        _track(lm, stack)  # closed before the server stops: waiting retries give up
        return lm, 1
    check_routable(spec, api_base=options.api_base)
    parallel, timeout_s = _sized_for_server(options)
    lm = LiteLLMBackend(spec, api_base=options.api_base, structured_output=options.structured_output,
                        retry=options.retry, cache=options.cache, timeout_s=timeout_s,
                        max_parallel_requests=parallel,
                        max_tokens=max_tokens, temperature=options.temperature, transport=options.transport)
    try:
        lm.check_credentials()
    except FatalBackendError as exc:  # refused before any call: careless input (exit 2), not a server's refusal
        exc.before_any_call = True  # type: ignore[attr-defined]
        raise
    _track(lm, stack)
    return lm, concurrency


def _sized_for_server(options: BackendOptions) -> tuple[int, float]:
    """Requests in flight and the timeout for an ``--api-base`` server: what the flags say, else a llama.cpp
    server's slot count and the local timeout (`teammed.backends.local_probe`), else the remote defaults."""
    parallel, timeout_s = options.max_parallel_requests, options.timeout_s
    if options.api_base and (parallel is None or timeout_s is None):
        from teammed.backends.local_probe import llamacpp_slots

        slots = llamacpp_slots(options.api_base)
        if slots is not None:
            parallel = parallel or slots
            timeout_s = timeout_s if timeout_s is not None else LOCAL_TIMEOUT_S
            logger.info("%s is a llama.cpp server with %d slot(s): %d request(s) in flight, %.0f s timeout",
                        redact(options.api_base), slots, parallel, timeout_s)
    return (parallel or options.default_parallel_requests or DEFAULT_MAX_PARALLEL,
            timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S)


@contextlib.contextmanager
def open_deployments(specs: Sequence[str] | None, *, concurrency: int = 4, deployments_file: Path | str | None = None,
                     options: BackendOptions | None = None) -> Iterator[list[Deployment]]:
    """Start what needs starting (local servers), yield the deployments, stop everything after.

    ``concurrency`` is questions in flight per deployment; ``options.max_parallel_requests`` bounds
    requests in flight per deployment (default 4; the embedded server takes 1), whatever the
    number of questions. Credentials are checked before anything is sent.
    """
    options = options or BackendOptions()
    with shutdown_on_signals(), contextlib.ExitStack() as stack:
        deployments = []
        if deployments_file:
            if specs:
                raise ConfigError("give either --model or --deployments, not both")
            for name, lm in _router_deployments(deployments_file, options):
                _track(lm, stack)
                deployments.append(Deployment(name, lm, concurrency))
        else:
            for spec in specs or ["local"]:
                lm, questions = open_lm(spec, options, stack=stack, concurrency=concurrency)
                deployments.append(Deployment(redact(spec), lm, questions))
        yield deployments
