"""Programs on disk: DSPy's own saved state, plus what it was compiled for.

One JSON file is both things at once:

* exactly what ``dspy.Module.save("p.json")`` writes — one entry per predictor (demos,
  instructions) and DSPy's ``metadata`` — so ``program.load("p.json")`` reads it;
* a ``"teammed"`` entry that DSPy ignores: the system, its `TeamworkConfig` (teamwork) or
  constructor settings (peer systems), the behaviours, and a free ``meta`` dict (optimizer,
  data set, scores, and any extra record such as tuning question ids).

This module writes and checks the format and gives every program `SavesConfig`:
``program.save("p.json")`` writes the file (`save_program`), ``program.load(path)`` is DSPy's
with a check first (`check_state`): a file compiled for other components or other behaviours
raises `ProgramMismatchError` naming both instead of a bare ``KeyError``. It knows no
program class: each names its system (`SavesConfig.system_name`). Rebuilding a program from
a file, which needs them all, is `teammed.programs.load.load_program` (``teammed run
--program``); team-shape overrides (agents, turns, early consensus) are applied there when
the compiled behaviours still match, refused otherwise.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

import dspy

from teammed.config import TeamworkConfig
from teammed.errors import ConfigError, ProgramMismatchError
from teammed.records import file_digest, write_atomic

__all__ = [
    "FORMAT",
    "ENVELOPE",
    "OVERRIDABLE",
    "SavesConfig",
    "save_program",
    "read_program",
    "saved_config",
    "program_identity",
    "describe_config",
    "check_state",
    "system_of",
]

FORMAT = "teammed-program/2"
_OLD_FORMAT = "teammed-program/1"
ENVELOPE = "teammed"
_NOT_PREDICTORS = {"metadata", ENVELOPE}
# Config fields a saved teamwork program may be run with differently: the team's shape, not its prompts.
OVERRIDABLE = ("n_agents", "n_turns", "early_consensus")


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


def system_of(program: dspy.Module) -> str | None:
    """The registered name of ``program``'s system (``teamwork``, ``cot``, ...): its class's
    `SavesConfig.system_name` (a subclass is the system it extends); None for other modules."""
    return program.system_name if isinstance(program, SavesConfig) else None


def _settings_of(program: dspy.Module) -> dict[str, Any]:
    """A peer system's constructor arguments that rebuild it (its validated ``config``)."""
    settings = getattr(program, "config", None)
    if settings is None or isinstance(settings, TeamworkConfig) or not hasattr(settings, "model_dump"):
        return {}
    init = vars(type(program)).get("__init__")
    accepted = set(inspect.signature(init).parameters) if init else set()
    return {k: v for k, v in settings.model_dump(mode="json").items() if k in accepted}


def save_program(
    program: dspy.Module,
    path: Path | str,
    *,
    system: str | None = None,
    config: TeamworkConfig | None = None,
    meta: dict[str, Any] | None = None,
) -> Path:
    """Write ``program`` as one JSON file (atomically); ``meta`` holds optimizer, data set, scores, ...

    ``system`` and ``config`` default to the program's own (``TeamworkProgram.config``).
    """
    from dspy.utils.saving import get_dependency_versions

    path = Path(path)
    system = system or system_of(program)
    if system is None:
        raise ConfigError(f"cannot tell which system {type(program).__name__} is; pass system= "
                          f"(teamwork or a peer system name)")
    if config is None and system == "teamwork":
        config = getattr(program, "config", None)
    document: dict[str, Any] = dict(program.dump_state())
    document["metadata"] = {"dependency_versions": get_dependency_versions()}
    document[ENVELOPE] = {
        "format": FORMAT,
        "system": system,
        "config": config.model_dump(mode="json") if config is not None else None,
        "settings": _settings_of(program),
        "behaviours": _behaviours(program),
        "meta": {
            "dspy_version": _version("dspy"),
            "teammed_version": _version("teammed"),
            # no timestamp: the same compile writes the same bytes (the file's mtime says when)
            **(meta or {}),
        },
    }
    return write_atomic(path, json.dumps(document, indent=2, default=str))


def _predictor_states(document: Mapping[str, Any]) -> list[Any]:
    """The saved state of each predictor: the document itself for a single saved dspy.Predict."""
    return [document] if "demos" in document and "signature" in document else list(_state(document).values())


def _looks_like_state(document: Mapping[str, Any]) -> bool:
    entries = _predictor_states(document)
    return bool(entries) and all(isinstance(v, dict) and ("demos" in v or "signature" in v) for v in entries)


def _upgrade(document: dict[str, Any]) -> dict[str, Any]:
    """A ``teammed-program/1`` file (state nested under ``state``) in today's layout."""
    state = dict(document.get("state") or {})
    state["metadata"] = {"dependency_versions": {}}
    state[ENVELOPE] = {"format": FORMAT, "system": document.get("system"), "config": document.get("config"),
                       "settings": {}, "behaviours": document.get("behaviours"), "meta": document.get("meta") or {}}
    return state


def read_program(path: Path | str) -> dict[str, Any]:
    """The saved document at ``path``, or `ConfigError` saying what the file is instead."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; --program takes the JSON file written by `teammed compile` "
                          f"or program.save('program.json') (DSPy's save_program=True pickles are not read)")
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"no compiled program at {path}; compile one first or check the path") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not a compiled program (not JSON: {exc}); give the JSON file written by "
                          f"`teammed compile` or program.save()") from None
    if isinstance(document, dict) and document.get("format") == _OLD_FORMAT:
        document = _upgrade(document)
    if not isinstance(document, dict) or not (isinstance(document.get(ENVELOPE), dict) or _looks_like_state(document)):
        found = type(document).__name__ if not isinstance(document, dict) else f"keys {sorted(document)[:5]}"
        raise ConfigError(f"{path} is not a saved program (found {found}); give the JSON file written by "
                          f"`teammed compile`, teammed's program.save() or dspy's Module.save()")
    envelope = document.get(ENVELOPE)
    if envelope is not None:
        _check_envelope(path, envelope)
    _check_predictors(path, document)
    return document


def _check_predictors(path: Path, document: Mapping[str, Any]) -> None:
    for entry in _predictor_states(document):
        if not isinstance(entry, dict) or not isinstance(entry.get("demos", []), list) or not isinstance(
                entry.get("signature", {}), dict):
            raise ConfigError(f"{path}: a predictor's saved state is damaged (demos must be a list, signature an "
                              f"object); recompile the program or save it again with program.save()")


def _check_envelope(path: Path, envelope: Any) -> None:
    expected = {"system": str, "config": dict, "settings": dict, "behaviours": list, "meta": dict}
    problems = ([f"{key} should be a {kind.__name__}" for key, kind in expected.items()
                 if envelope.get(key) is not None and not isinstance(envelope[key], kind)]
                if isinstance(envelope, dict) else ["it should be an object"])
    if problems:
        raise ConfigError(f"{path}: the {ENVELOPE!r} entry is damaged ({'; '.join(problems)}); recompile the "
                          f"program or save it again with program.save()")
    if envelope.get("format") not in (None, FORMAT):
        raise ConfigError(f"{path} has program format {envelope.get('format')!r}; this teammed reads {FORMAT!r}; "
                          f"recompile it")


def _envelope(document: Mapping[str, Any]) -> dict[str, Any]:
    envelope = document.get(ENVELOPE)
    return envelope if isinstance(envelope, dict) else {}


def _state(document: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in _NOT_PREDICTORS}


def _overridden(config: TeamworkConfig, overrides: Mapping[str, Any]) -> TeamworkConfig:
    unknown = sorted(set(overrides) - set(OVERRIDABLE))
    if unknown:
        raise ConfigError(f"a saved program's {', '.join(unknown)} cannot be changed at load time (only "
                          f"{', '.join(OVERRIDABLE)}); recompile the program for the configuration you want")
    values = config.model_dump()
    values.update({k: v for k, v in overrides.items() if v is not None})
    return TeamworkConfig.build(**values)


def saved_config(path: Path | str, *, overrides: Mapping[str, Any] | None = None) -> TeamworkConfig | None:
    """The teamwork config a saved program runs with (``overrides`` applied), None for other systems."""
    envelope = _envelope(read_program(path))
    if envelope.get("config") is None:
        return None
    return _overridden(TeamworkConfig.build(**envelope["config"]), overrides or {})


def program_identity(path: Path | str | None) -> dict[str, Any]:
    """A saved program's part of a run identity (`teammed.records.RunIdentity`): its path as given,
    content hash and config as compiled (no overrides); empty without a program."""
    if not path:
        return {}
    saved = saved_config(path)  # one clear error for a damaged file
    return {"program": str(path), "program_sha256": file_digest(path),
            "program_config": saved.model_dump(mode="json") if saved is not None else None}


def check_state(program: dspy.Module, document: Mapping[str, Any], *, source: str = "the saved state",
                optional: frozenset[str] = frozenset()) -> None:
    """Raise `ProgramMismatchError` unless ``document`` fits ``program``: same predictors, same components."""
    envelope = _envelope(document)
    saved = envelope.get("config")
    own = getattr(program, "config", None)
    if isinstance(saved, dict) and isinstance(own, TeamworkConfig):
        saved_cfg = TeamworkConfig.build(**saved)
        if saved_cfg.components != own.components:
            raise ProgramMismatchError(
                f"{source} was compiled for {describe_config(saved_cfg)}, but this program is "
                f"{describe_config(own)}; build the program with the saved config (teammed.programs."
                f"load_program reads it) or recompile for this one")
    system = envelope.get("system")
    own_system = system_of(program)
    if system and own_system and system != own_system:
        raise ProgramMismatchError(f"{source} was compiled for system {system!r}, but this program is "
                                   f"{own_system!r}; load it into a {system} program")
    built = set(_behaviours(program))
    if built == {"self"}:  # a bare predictor: its state is the file itself
        if "demos" not in document:
            raise ProgramMismatchError(f"{source} holds a multi-predictor program, not one predictor; load it into "
                                       f"the program it was saved from")
        return
    present = set(_state(document))
    missing = sorted(built - present - optional)
    extra = sorted(present - built)
    if missing or extra:
        raise ProgramMismatchError(
            f"{source} does not fit this {type(program).__name__}: the program has behaviours the file lacks "
            f"({', '.join(missing) or 'none'}) and the file has behaviours the program lacks "
            f"({', '.join(extra) or 'none'}); load it into the configuration it was compiled for, or recompile")


_write = save_program  # `SavesConfig.save` takes DSPy's ``save_program`` flag, which hides the name


class SavesConfig:
    """Mixin for a `dspy.Module` (put it first in the bases): ``save``/``load`` in the format above."""

    # The name the program is saved and rebuilt under: ``teamwork``, or its key in
    # `teammed.systems.registry()`. None: `save_program` needs ``system=``.
    system_name: ClassVar[str | None] = None

    def save(self, path: Any, save_program: bool = False, modules_to_serialize: Any = None, *,
             meta: dict[str, Any] | None = None) -> Any:
        if save_program or Path(path).suffix != ".json":
            return super().save(path, save_program=save_program,  # type: ignore[misc]
                                modules_to_serialize=modules_to_serialize)
        _write(self, path, meta=meta)
        return None

    def behaviours(self) -> list[str]:
        """The names of the behaviours this program can call (each one named predictor)."""
        from teammed.programs.behaviour import Behaviour

        return sorted({m.name for _, m in self.named_sub_modules() if isinstance(m, Behaviour)})  # type: ignore[attr-defined]

    def load_state(self, state: Any, *, allow_unsafe_lm_state: bool = False) -> Any:
        check_state(self, state)  # type: ignore[arg-type]
        return super().load_state(state, allow_unsafe_lm_state=allow_unsafe_lm_state)  # type: ignore[misc]
