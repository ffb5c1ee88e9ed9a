"""`load_program`: a program rebuilt from its saved file (``teammed run --program``).

The file is the one `teammed.programs.persist` writes (or a plain ``dspy.Module.save`` state
file, the system and config then coming from the caller). Rebuilding needs every system, the
teamwork program and the peer systems, so this module sits above them; saving and checking,
which every program does itself, sit below them in `teammed.programs.persist`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import dspy

from teammed.config import TeamworkConfig
from teammed.errors import ConfigError, ProgramMismatchError
from teammed.programs.peers import build_system
from teammed.programs.persist import (
    OVERRIDABLE,
    _behaviours,
    _envelope,
    _overridden,
    _state,
    check_state,
    describe_config,
    read_program,
)
from teammed.programs.teamwork import TeamworkProgram
from teammed.systems import registry

__all__ = ["load_program"]

_FLAG = {"n_agents": "--n-agents", "n_turns": "--n-turns", "early_consensus": "--early-consensus"}


def _mismatch_from_overrides(path: Path, saved: TeamworkConfig, effective: TeamworkConfig,
                             overrides: Mapping[str, Any], exc: ProgramMismatchError) -> ProgramMismatchError:
    changed = [k for k in OVERRIDABLE if overrides.get(k) is not None and getattr(saved, k) != getattr(effective, k)]
    flags = ", ".join(f"{_FLAG[k]} {getattr(effective, k)}" for k in changed)
    return ProgramMismatchError(
        f"{path} was compiled for {describe_config(saved)}; {flags} changes which behaviours run, so its compiled "
        f"prompts do not fit ({exc}); drop {', '.join(_FLAG[k] for k in changed)} or recompile with it")


def load_program(
    path: Path | str,
    *,
    system: str | None = None,
    config: TeamworkConfig | None = None,
    overrides: Mapping[str, Any] | None = None,
    build: Callable[[], dspy.Module] | None = None,
    vision: bool = False,
) -> tuple[dspy.Module, dict[str, Any]]:
    """A fresh program with the saved state loaded, and the saved ``meta``.

    ``system`` defaults to the saved one (``teamwork`` for a plain DSPy state file). Teamwork
    programs are rebuilt from the saved config with ``overrides`` (n_agents, n_turns,
    early_consensus) applied; ``config``, when given, must equal that result. Peer systems are
    rebuilt by name from their saved settings; any other system needs ``build``. With
    ``vision`` the teamwork program also gets its image behaviour (uncompiled if the file has none).
    """
    path = Path(path)
    document = read_program(path)
    envelope = _envelope(document)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    saved_system = envelope.get("system")
    if saved_system and system and saved_system != system:
        raise ProgramMismatchError(f"{path} was compiled for system {saved_system!r}, but {system!r} was "
                                   f"requested; run it with --system {saved_system} or compile a program "
                                   f"for {system}")
    system = system or saved_system or "teamwork"
    optional: frozenset[str] = frozenset()
    if system == "teamwork":
        program, optional = _teamwork(path, document, envelope, config=config, overrides=overrides, vision=vision)
    else:
        program = _other_system(path, document, envelope, system, overrides=overrides, build=build)
    _load_state(path, program, document, optional)
    return program, dict(envelope.get("meta") or {})


def _teamwork(path: Path, document: Mapping[str, Any], envelope: Mapping[str, Any], *,
              config: TeamworkConfig | None, overrides: Mapping[str, Any],
              vision: bool) -> tuple[dspy.Module, frozenset[str]]:
    """The teamwork program of the saved config with ``overrides``, checked against the file, and the
    behaviours it may lack (the image one, with ``vision``)."""
    raw = envelope.get("config")
    saved_cfg = TeamworkConfig.build(**raw) if isinstance(raw, dict) else None
    base = saved_cfg or config or TeamworkConfig()
    effective = _overridden(base, overrides)
    if config is not None and config != effective:
        compiled_for = describe_config(saved_cfg) if saved_cfg is not None else "no recorded config"
        raise ProgramMismatchError(
            f"{path} was compiled for {compiled_for}, but {describe_config(config)} was requested; omit the "
            f"config flags (components, --n-agents, --n-turns, --early-consensus) to run the compiled "
            f"configuration, or recompile the program for the requested one")
    program: dspy.Module = TeamworkProgram(effective, vision=vision)
    optional: frozenset[str] = frozenset()
    if vision:
        optional = frozenset(n for n in _behaviours(program) if n not in _behaviours(TeamworkProgram(effective)))
    try:
        check_state(program, document, source=str(path), optional=optional)
    except ProgramMismatchError as exc:
        if saved_cfg is not None and effective != saved_cfg and overrides:
            raise _mismatch_from_overrides(path, saved_cfg, effective, overrides, exc) from None
        raise
    return program, optional


def _other_system(path: Path, document: Mapping[str, Any], envelope: Mapping[str, Any], system: str, *,
                  overrides: Mapping[str, Any], build: Callable[[], dspy.Module] | None) -> dspy.Module:
    """A peer system rebuilt by name from its saved settings (or by ``build``), checked against the file."""
    if overrides:
        raise ConfigError(f"{', '.join(_FLAG.get(k, k) for k in overrides)} applies to the teamwork program "
                          f"only; drop it to run the saved {system} program")
    if build is not None:
        program = build()
    else:
        if system not in registry():
            raise ConfigError(f"loading a {system!r} program needs build=, a function returning a fresh "
                              f"{system} module")
        program = build_system(system, **(envelope.get("settings") or {}))
    check_state(program, document, source=str(path))
    return program


def _load_state(path: Path, program: dspy.Module, document: Mapping[str, Any], optional: frozenset[str]) -> None:
    """The saved state into ``program``, the ``optional`` behaviours the file lacks kept as built."""
    state = _state(document)
    if optional:
        own = program.dump_state()
        state.update({name: own[name] for name in optional if name not in state})
    try:
        program.load_state(state)
    except ProgramMismatchError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{path}: the saved state cannot be loaded ({type(exc).__name__}: {exc}); recompile the "
                          f"program or save it again with program.save()") from None
