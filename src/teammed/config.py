"""`TeamworkConfig`: the frozen, validated description of one teamwork deliberation.

It is what the CLI builds, what Optuna samples, what a run records and what a compiled
program is checked against.
"""

from __future__ import annotations

import difflib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator, model_validator

from teammed.components import ALIASES, COMPONENTS, PRESET_COMPONENTS, TABLE
from teammed.errors import ConfigError

__all__ = ["TeamworkConfig", "PRESETS", "COMPONENTS", "ALIASES", "preset", "config_from_components"]

# The component flags, one per row of the table (teammed.components), before the shape fields.
_Flags: type[BaseModel] = create_model(
    "_Flags", __config__=ConfigDict(frozen=True, extra="forbid"),
    **{c.name: (bool, Field(default=False, description=c.summary)) for c in TABLE})  # type: ignore[call-overload]


class TeamworkConfig(_Flags):  # type: ignore[misc,valid-type]
    """Which teamwork components are on, and the shape of the deliberation.

    One boolean field per component of `teammed.components.TABLE`. Rules (checked on construction):
      * a component's requirements are on (mutual monitoring requires leadership: the leader raises
        and judges challenges), and ``n_turns`` is at least its minimum (mutual monitoring and
        closed-loop communication act between discussion turns, so they need two);
      * ``early_consensus`` is a share of agents in (0.5, 1.0], or None for off;
      * ``leader_correction`` (the leader's authority to override the aggregated answer when
        the reasoning behind it is flawed, spec §3.2) requires leadership; left unset it is
        on exactly when leadership is on.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_agents: Literal["auto", 2, 3, 4] = "auto"
    n_turns: int = Field(default=2, ge=1, le=5)
    early_consensus: float | None = None
    # None: follows leadership (the default). Only a deviation is stored (False with leadership),
    # so merging a dumped config with ``leadership=True`` keeps the default on.
    leader_correction: bool | None = None

    @field_validator("n_agents", mode="before")
    @classmethod
    def _team_size(cls, value: object) -> object:
        """2, 3 or 4 clinicians, or 'auto': anything else is refused, never turned into some team size."""
        if value == "auto" or (type(value) in (int, float) and value in (2, 3, 4)):
            return int(value) if type(value) is float else value  # type: ignore[arg-type]
        raise ValueError("the team size is 2, 3 or 4 clinicians (the specification's range), or 'auto' to let "
                         "the recruiter decide")

    @model_validator(mode="before")
    @classmethod
    def _store_only_a_deviation(cls, values: object) -> object:
        if isinstance(values, dict) and values.get("leader_correction") is not None:
            if bool(values["leader_correction"]) == bool(values.get("leadership", False)):
                return {**values, "leader_correction": None}
        return values

    @model_validator(mode="after")
    def _check_rules(self) -> TeamworkConfig:
        for c in TABLE:
            if not getattr(self, c.name):
                continue
            for needed in c.requires:
                if not getattr(self, needed):
                    raise ValueError(f"{c.name} requires {needed} ({c.requires_why}; got {needed}=False); "
                                     f"enable {needed} or disable {c.name}")
            if self.n_turns < c.min_turns:
                why = f" ({c.turns_why})" if c.turns_why else ""
                raise ValueError(f"{c.name} requires n_turns >= {c.min_turns}{why} (got n_turns={self.n_turns}); "
                                 f"raise n_turns or disable {c.name}")
        if self.leader_correction is not None and not self.leadership:
            raise ValueError(
                "leader_correction requires leadership (got leadership=False); "
                "enable leadership or set leader_correction=False"
            )
        if self.early_consensus is not None and not 0.5 < self.early_consensus <= 1.0:
            raise ValueError(
                f"early_consensus is the share of agents whose first choices must agree, in (0.5, 1.0] "
                f"(got {self.early_consensus}); use 1.0 for unanimity, 0.8, or leave it off"
            )
        return self

    @classmethod
    def build(cls, **values: object) -> TeamworkConfig:
        """Construct, turning pydantic's validation error into a `ConfigError` with the rule's text."""
        try:
            return cls(**values)  # type: ignore[arg-type]
        except ValidationError as exc:
            raise ConfigError("; ".join(_field_message(err) for err in exc.errors())) from None

    @property
    def corrects(self) -> bool:
        """Whether the leader reviews (and may override) the aggregated answer."""
        return self.leadership and self.leader_correction is not False

    @property
    def components(self) -> tuple[str, ...]:
        """The names of the components that are on, in canonical order."""
        return tuple(name for name in COMPONENTS if getattr(self, name))

    def label(self) -> str:
        """A short name: the preset with the same components (team size and turns aside), else the components."""
        for name, cfg in PRESETS.items():
            if cfg.components == self.components:
                return name
        return "+".join(self.components)


def _field_message(err: object) -> str:
    """``n_turns: Input should be greater than or equal to 1 (got 0)``; rule errors keep their own text."""
    e = dict(err)  # type: ignore[call-overload]
    msg = str(e["msg"]).removeprefix("Value error, ")
    field = ".".join(str(x) for x in e.get("loc", ()))
    return f"{field}: {msg} (got {e.get('input')!r})" if field else msg


PRESETS: dict[str, TeamworkConfig] = {name: TeamworkConfig.model_validate(dict.fromkeys(components, True))
                                      for name, components in PRESET_COMPONENTS.items()}


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"{hint} Available: {', '.join(choices)}."


def preset(name: str, **overrides: object) -> TeamworkConfig:
    """A named preset, optionally with fields overridden (``n_turns=3``)."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}.{_suggest(name, list(PRESETS))}")
    values = PRESETS[name].model_dump()
    values.update({k: v for k, v in overrides.items() if v is not None})
    return TeamworkConfig.build(**values)


def config_from_components(names: list[str] | str, **overrides: object) -> TeamworkConfig:
    """A config with exactly the named components on (short names allowed: smm, l, to, t, mm, cl)."""
    if isinstance(names, str):
        names = [n for n in names.split(",") if n.strip()]
    values: dict[str, object] = {}
    for raw in names:
        key = raw.strip().lower().replace("-", "_")
        if key in ("", "base", "none"):
            continue
        if key not in ALIASES:
            raise ConfigError(f"unknown component {raw!r}.{_suggest(key, sorted(set(ALIASES)))}")
        values[ALIASES[key]] = True
    values.update({k: v for k, v in overrides.items() if v is not None})
    return TeamworkConfig.build(**values)
