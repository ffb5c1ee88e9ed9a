"""Checks of what a user supplies, shared by the CLI and the experiment layer: JSON files, a
teamwork configuration, question ids, writable directories. Each failure is a `ConfigError` or
`TeammedError` whose one line names the value and the fix."""

from __future__ import annotations

import contextlib
import difflib
import importlib.util
import json
import string
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teammed import systems
from teammed.errors import ConfigError, TeammedError

if TYPE_CHECKING:  # pydantic and the config model load when a check needs them, not for --help
    from pydantic import ValidationError

    from teammed.config import TeamworkConfig

__all__ = ["read_json_object", "config_values", "validation_message", "load_config_file", "check_unique_ids",
           "check_writable_dir", "did_you_mean", "parse_options", "shard", "preset_name", "system_name",
           "model_string", "api_base", "storage_url"]


def did_you_mean(name: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return (f"; did you mean {close[0]!r}?" if close else ";") + f" available: {', '.join(choices)}"


def read_json_object(path: Path, *, what: str, fix: str) -> dict[str, Any]:
    """The JSON object in ``path``; anything else is a `ConfigError` naming the path and ``fix``."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist; {fix}") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path} is a directory, not a JSON file; {fix}") from None
    except PermissionError:
        raise ConfigError(f"{what} {path} cannot be read (permission denied); {fix}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path} is not text (binary content); {fix}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} {path} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                          f"{fix}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {path} holds a JSON {type(data).__name__}, not an object; {fix}")
    return data


_CONFIG_FIX = ('give a TeamworkConfig JSON such as {"leadership": true, "trust": true} '
               "or a special_sets/<dataset>.json file")


def config_values(values: Any, *, where: str) -> TeamworkConfig:
    """A `TeamworkConfig` from a JSON object; an error names the field, the value and the fix."""
    from pydantic import ValidationError

    from teammed.config import TeamworkConfig

    if not isinstance(values, dict):
        raise ConfigError(f"{where} must be a JSON object of TeamworkConfig fields (got a JSON "
                          f"{type(values).__name__}); {_CONFIG_FIX}")
    known = set(TeamworkConfig.model_fields)
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{where} has unknown field {unknown[0]!r}{did_you_mean(unknown[0], sorted(known))}")
    try:
        return TeamworkConfig(**values)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {validation_message(exc)}") from None

def validation_message(exc: ValidationError) -> str:
    """pydantic's errors as ``field: message (got value)``, joined on one line."""
    parts = []
    for err in exc.errors():
        field = ".".join(str(x) for x in err.get("loc", ()))
        msg = err["msg"].removeprefix("Value error, ")
        got = f" (got {err['input']!r})" if field and "input" in err and not isinstance(err["input"], dict) else ""
        parts.append(f"{field}: {msg}{got}" if field else msg)
    return " ".join("; ".join(parts).split())

def load_config_file(path: Path) -> TeamworkConfig:
    """``--config``: a plain TeamworkConfig JSON, a special-set file, or ``{"config": {...}}``."""
    data = read_json_object(path, what="--config", fix=_CONFIG_FIX)
    if "config" in data:  # a special set (or another document that wraps its config)
        return config_values(data["config"], where=f"--config {path}, field 'config',")
    return config_values(data, where=f"--config {path}")

def check_unique_ids(ids: Sequence[str], *, dataset: str) -> None:
    """Results are keyed by question id: two questions with one id would overwrite each other."""
    seen: set[str] = set()
    for qid in ids:
        if qid in seen:
            raise TeammedError(f"{dataset} has two questions with id {qid!r}; give every question a unique "
                               f"id (an 'id' column) so results and --resume can tell them apart")
        seen.add(qid)


def check_writable_dir(path: Path, *, flag: str = "--out") -> None:
    """``path`` can be created or written: checked before anything is written (nothing half-done)."""
    import os

    probe = Path(path).absolute()
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise ConfigError(f"{flag} {path} is under {probe}, which is a file, not a directory; choose another {flag}")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path} cannot be written ({probe} is read-only or not ours); "
                          f"choose a writable {flag} directory")
    with contextlib.suppress(AttributeError, OSError):  # os.access ignores read-only mounts for root: ask the FS
        if os.statvfs(probe).f_flag & os.ST_RDONLY:
            raise ConfigError(f"{flag} {path} is on a read-only file system; choose a writable {flag} directory")


def parse_options(items: Sequence[str] | None) -> dict[str, str]:
    """``--option A=text`` (repeated) -> {'A': 'text', ...}: two or more, lettered A, B, C, ... in order."""
    options: dict[str, str] = {}
    for item in items or []:
        letter, sep, text = item.partition("=")
        letter = letter.strip().upper()
        if not sep or not text.strip() or len(letter) != 1 or letter not in string.ascii_uppercase:
            raise ConfigError(f"--option takes LETTER=TEXT, e.g. --option A=\"Aspirin\" (got {item!r})")
        if letter in options:
            raise ConfigError(f"option {letter} is given twice; give each letter once")
        options[letter] = text.strip()
    if len(options) < 2:
        raise ConfigError(f"a question needs at least two answer options (got {len(options)}); "
                          f"add them with --option A=... --option B=...")
    expected = list(string.ascii_uppercase[: len(options)])
    if sorted(options) != expected:
        raise ConfigError(f"options must be lettered {', '.join(expected)} (got {', '.join(sorted(options))}); "
                          f"re-letter them from A")
    return {letter: options[letter] for letter in expected}


# ---------------------------------------------------------------- values (the CLI's flags and the specs' fields)


def shard(raw: str | tuple[int, int]) -> tuple[int, int]:
    """``I/N`` (or ``(I, N)``): the I-th (1-based) of N parts, 1 <= I <= N."""
    if isinstance(raw, str):
        index, sep, count = raw.strip().partition("/")
        if not sep or not index.strip().isdigit() or not count.strip().isdigit():
            raise ConfigError(f"{raw!r} is not I/N (e.g. 1/4: the first of four shards)")
        raw = (int(index), int(count))
    i, n = raw
    if not 1 <= i <= n:
        raise ConfigError(f"shard {i}/{n} does not exist: I counts from 1 to N (Slurm: --array=1-{max(n, 1)}, "
                          f"then --shard $SLURM_ARRAY_TASK_ID/{max(n, 1)})")
    return i, n


def preset_name(raw: str) -> str:
    """A preset's name (hyphens and capitals allowed: ``All`` and ``team-orientation`` are fine)."""
    from teammed.components import PRESET_COMPONENTS

    name = raw.strip().replace("-", "_").lower()
    if name not in PRESET_COMPONENTS:
        raise ConfigError(f"unknown preset {name!r}{did_you_mean(name, list(PRESET_COMPONENTS))}")
    return name


def system_name(raw: str) -> str:
    """A system name; ``zero-shot`` and ``Zero_Shot`` both mean ``zero_shot``."""
    name = raw.strip().lower().replace("-", "_")
    known = systems.names()  # the registry: checking a name imports no DSPy
    if name not in known:
        raise ConfigError(f"unknown system {raw!r}{did_you_mean(name, known)}")
    return name


def model_string(raw: str) -> str:
    """A model: ``local``, ``local:PATH.gguf``, ``scripted[:SECONDS]`` or a litellm model string."""
    spec = raw.strip()
    if not spec:
        raise ConfigError("is empty; give a litellm model (e.g. openai/gpt-4o-mini) or `local`")
    kind, sep, rest = spec.partition(":")
    if kind == "scripted" and sep:
        try:
            delay = float(rest)
        except ValueError:
            delay = -1.0
        if not 0 <= delay < float("inf"):
            raise ConfigError(f"{raw!r}: scripted:SECONDS takes seconds per call, e.g. scripted:0.5 (or plain "
                              f"`scripted`)")
    if kind == "local" and sep:
        path = Path(rest).expanduser()
        if not path.is_file():
            raise ConfigError(f"{raw!r}: no GGUF file at {path}; give local:PATH.gguf of a model file, or plain "
                              f"`local` for the bundled model")
    return spec


def api_base(raw: str) -> str:
    """An http(s) URL of an OpenAI-compatible server."""
    from teammed.redact import redact

    url = raw.strip()
    if not url.startswith(("http://", "https://")) or len(url) <= len("https://"):
        raise ConfigError(f"{redact(repr(raw))} is not an http(s) URL; give the server's base URL, e.g. "
                          f"http://127.0.0.1:8000/v1")
    return url


def storage_url(raw: str) -> str:
    """An Optuna storage: ``journal:PATH`` or a ``.log``/``.journal`` journal file, ``sqlite:///file.db``,
    or a database URL (`teammed.optimizers._storage.STORAGE_FORMS`)."""
    from teammed.redact import redact

    value, shown = raw.strip(), redact(repr(raw))
    rest = value.removeprefix("journal:")
    if value.startswith("journal:") and rest.startswith("//") and not rest.startswith("///"):
        raise ConfigError(f"{shown} is ambiguous (it would name {rest[1:]!r} at the file system's root); give "
                          f"journal:{rest[2:]} for a path relative to here, or journal:/abs/path.log")
    if value.startswith("journal:") and rest.strip("/ "):
        return value
    if "://" not in value:
        if value.endswith((".log", ".journal")):
            return value
        raise ConfigError(f"{shown} is neither a journal file nor a database URL; give journal:/abs/path/study.log "
                          f"(or a path ending .log), sqlite:////abs/path/study.db, or "
                          f"postgresql://user:password@host/db")
    try:
        from sqlalchemy.engine import make_url

        url = make_url(value)
    except Exception:  # sqlalchemy's ArgumentError and friends
        raise ConfigError(f"{shown} is not a database URL; give sqlite:///study.db or postgresql://user@host/db"
                          ) from None
    backend = url.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise ConfigError(f"{shown}: {backend} is not supported; give a journal file (journal:/abs/path/study.log), "
                          f"sqlite:////abs/path/study.db or postgresql://user:password@host/db")
    if backend == "sqlite" and url.host:
        raise ConfigError(f"{shown} names a host ({url.host!r}), not a file: give sqlite:///{url.host} for a file "
                          f"here or sqlite:////abs/path/study.db")
    if backend == "postgresql" and not any(importlib.util.find_spec(m) for m in ("psycopg", "psycopg2")):
        raise ConfigError(f"{shown} needs a PostgreSQL driver; install the postgres extra: pip install -e "
                          f"'.[postgres]'")
    if backend == "sqlite" and url.database not in (None, "", ":memory:"):
        try:
            check_writable_dir(Path(url.database).parent, flag="--storage")
        except ConfigError as exc:
            raise ConfigError(str(exc).removeprefix("--storage ")) from None
    return value
