"""Compiled programs on disk: one JSON file holding the state and what it was compiled for.

A saved program records its system, its `TeamworkConfig` and its behaviours next to the
DSPy state (demos and instructions), so loading it into a different configuration fails
with a message naming both instead of silently running mismatched prompts.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import dspy

from teammed.config import TeamworkConfig
from teammed.errors import ConfigError, ProgramMismatchError

__all__ = ["FORMAT", "save_program", "load_program", "describe_config"]

FORMAT = "teammed-program/1"


def describe_config(config: TeamworkConfig) -> str:
    """``[leadership, trust] (n_agents=auto, n_turns=2, early_consensus=off)``."""
    components = ", ".join(config.components) or "no components"
    consensus = config.early_consensus if config.early_consensus is not None else "off"
    return (f"[{components}] (n_agents={config.n_agents}, n_turns={config.n_turns}, "
            f"early_consensus={consensus})")


def _behaviours(program: dspy.Module) -> list[str]:
    return sorted(name for name, _ in program.named_predictors())


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def save_program(
    program: dspy.Module,
    path: Path | str,
    *,
    system: str,
    config: TeamworkConfig | None,
    meta: dict[str, Any],
) -> Path:
    """Write ``program`` as one JSON file (atomically); ``meta`` holds optimizer, data set and scores."""
    path = Path(path)
    document = {
        "format": FORMAT,
        "system": system,
        "config": config.model_dump(mode="json") if config is not None else None,
        "behaviours": _behaviours(program),
        "state": program.dump_state(),
        "meta": {
            "dspy_version": _version("dspy"),
            "teammed_version": _version("teammed"),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            **meta,
        },
    }
    text = json.dumps(document, indent=2, default=str)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)
    return path


def _read(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"no compiled program at {path}; compile one first or check the path") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not a compiled program (invalid JSON: {exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        found = document.get("format") if isinstance(document, dict) else type(document).__name__
        raise ConfigError(f"{path} is not a compiled program of format {FORMAT!r} (found {found!r}); "
                          f"save it with teammed.optimizers.save_program")
    return document


def load_program(
    path: Path | str,
    *,
    system: str = "teamwork",
    config: TeamworkConfig | None = None,
    build: Callable[[], dspy.Module] | None = None,
) -> tuple[dspy.Module, dict[str, Any]]:
    """A fresh program for the saved configuration with the saved state loaded, and the saved meta.

    ``config`` is what the caller asked for; when given it must equal the compiled one.
    Teamwork programs are rebuilt from the saved config; other systems need ``build``.
    """
    path = Path(path)
    document = _read(path)
    saved_system = document["system"]
    if saved_system != system:
        raise ProgramMismatchError(f"{path} was compiled for system {saved_system!r}, but {system!r} was "
                                   f"requested; run it with --system {saved_system} or compile a program "
                                   f"for {system}")
    saved_config = TeamworkConfig.build(**document["config"]) if document.get("config") is not None else None
    if config is not None and config != saved_config:
        compiled_for = describe_config(saved_config) if saved_config is not None else "no teamwork config"
        raise ProgramMismatchError(
            f"{path} was compiled for {compiled_for}, but {describe_config(config)} was requested; omit the "
            f"config flags (components, --n-agents, --n-turns, --early-consensus) to run the compiled "
            f"configuration, or recompile the program for the requested one"
        )
    if system == "teamwork":
        if saved_config is None:
            raise ProgramMismatchError(f"{path} is a teamwork program saved without its config; recompile it")
        from teammed.programs.teamwork import TeamworkProgram

        program: dspy.Module = TeamworkProgram(saved_config)
    elif build is not None:
        program = build()
    else:
        raise ConfigError(f"loading a {system!r} program needs build=, a function returning a fresh "
                          f"{system} module")
    built = _behaviours(program)
    if built != document["behaviours"]:
        missing = sorted(set(document["behaviours"]) - set(built))
        extra = sorted(set(built) - set(document["behaviours"]))
        raise ProgramMismatchError(f"{path} holds behaviours the rebuilt program does not match "
                                   f"(missing {missing or 'none'}, unexpected {extra or 'none'}); "
                                   f"recompile the program")
    program.load_state(document["state"])
    return program, dict(document["meta"])
