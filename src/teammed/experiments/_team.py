"""A `TeamSpec` made concrete: the teamwork configuration(s) it names and how to build its system."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from teammed.errors import TeammedError

if TYPE_CHECKING:
    import dspy

    from teammed.config import TeamworkConfig
    from teammed.experiments.specs import TeamSpec
    from teammed.types import Question

__all__ = ["check_system", "team_config", "grid_configs", "program_factory", "overrides"]

# spec field -> the flag a person typed (messages name flags: the CLI is how most people get here)
_TEAMWORK_FIELDS = ("preset", "presets", "components", "config", "n_agents", "n_turns", "early_consensus",
                    "leader_correction")


def takes_config(system: str) -> bool:
    """Whether ``system`` runs a teamwork configuration (teamwork itself, and adaptive's team)."""
    return system in ("teamwork", "adaptive")


def check_system(team: TeamSpec) -> None:
    """Teamwork settings do nothing for a peer system: refuse them instead of silently ignoring them."""
    if team.escalate_below is not None and team.system != "adaptive":
        raise TeammedError(f"--escalate-below sets when the adaptive system calls its team, not {team.system}; "
                           "drop it or use --system adaptive")
    if takes_config(team.system):
        return
    given = [f"--{name.replace('_', '-')}" for name in _TEAMWORK_FIELDS if getattr(team, name) is not None]
    if given:
        several = len(given) > 1
        raise TeammedError(f"{' and '.join(given) if len(given) == 2 else ', '.join(given)} "
                           f"{'configure' if several else 'configures'} the teamwork system, not {team.system}; "
                           f"drop {'them' if several else 'it'} or use --system teamwork")


def overrides(team: TeamSpec) -> dict[str, Any]:
    """The team-shape settings given (applied to a saved program, or refused)."""
    values = {"n_agents": team.n_agents, "n_turns": team.n_turns, "early_consensus": team.early_consensus}
    return {k: v for k, v in values.items() if v is not None}


def team_config(team: TeamSpec, preset_name: str | None = None) -> TeamworkConfig:
    """The teamwork configuration of ``team`` (``preset_name``: one preset of its grid)."""
    from teammed.config import config_from_components, preset
    from teammed.inputs import config_values, load_config_file

    shape: dict[str, Any] = {"n_agents": team.n_agents, "n_turns": team.n_turns,
                             "early_consensus": team.early_consensus, "leader_correction": team.leader_correction}
    if team.components is not None and not team.components.replace(",", "").strip():
        raise TeammedError(f"--components {team.components!r} names no component; list some (e.g. smm,leadership) "
                           f"or use --preset base for none")
    chosen = [x for x in (preset_name or team.preset, team.components, team.config, team.teamwork, team.module)
              if x is not None and x != ""]
    if len(chosen) > 1:
        raise TeammedError("give only one of --preset/--presets, --components and --config (from Python: or a "
                           "TeamworkConfig, or a program)")
    if team.module is not None:
        return team.module.config
    if team.teamwork is not None:
        return team.teamwork.model_copy(update={k: v for k, v in shape.items() if v is not None})
    if team.components:
        return config_from_components(team.components, **shape)
    if team.config:
        values = load_config_file(team.config).model_dump()
        values.update({k: v for k, v in shape.items() if v is not None})
        return config_values(values, where=f"--config {team.config} with the command-line overrides")
    return preset(preset_name or team.preset or "base", **shape)


def program_factory(team: TeamSpec, config: TeamworkConfig | None, *, pool: Sequence[Question] | None = None,
                    seed: int = 0, vision: bool = False) -> Callable[[], dspy.Module]:
    """How to build the system; ``pool`` holds the questions few-shot examples may be drawn from."""
    system = team.system
    if team.module is not None:  # a program the caller holds, called as it is
        return lambda: team.module
    if team.program:
        from teammed.programs.load import load_program

        explicit = config if (team.preset or team.components or team.config) else None
        program, _ = load_program(team.program, system=system, config=explicit, overrides=overrides(team),
                                  vision=vision)
        return lambda: program
    if system == "teamwork":
        from teammed.programs.teamwork import TeamworkProgram

        return lambda: TeamworkProgram(config, vision=vision)
    if system == "adaptive":
        from teammed.programs.peers.adaptive import AdaptiveTeam

        threshold = 1.0 if team.escalate_below is None else team.escalate_below
        return lambda: AdaptiveTeam(config, threshold=threshold)
    from teammed.programs.peers import build_system, build_with_examples

    if pool:
        return lambda: build_with_examples(system, pool, seed=seed)
    return lambda: build_system(system)


def grid_configs(team: TeamSpec) -> list[tuple[str, TeamworkConfig | None]]:
    """Every (label, config) of the grid, built and checked before anything is written."""
    check_system(team)
    if team.preset and team.presets:
        raise TeammedError("give --preset NAME for one configuration or --presets a,b for a grid, not both")
    explicit = bool(team.preset or team.presets or team.components or team.config)
    configs = []
    for name in team.presets or [None]:
        config = team_config(team, name) if takes_config(team.system) else None
        if team.program:
            from teammed.programs.persist import saved_config

            if not explicit:
                config = saved_config(team.program, overrides=overrides(team))
            program_factory(team, config)  # loads the program: a mismatch is refused now
        label = name or (config.label() if config else team.system)
        configs.append((f"adaptive-{label}" if team.system == "adaptive" else label, config))
    return configs
