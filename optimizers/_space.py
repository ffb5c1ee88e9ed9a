"""The space of teamwork configurations a search samples from: only valid ones, ever.

Two encodings of the same valid space, both derived from the component table (`teammed.components`). The
tree (TPE, brute force) suggests a component only when what it requires is on and the turns reach its
minimum; the flat one (grid) has one categorical ``components`` parameter whose choices are exactly the
valid subsets, because a grid cannot be conditional.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import optuna

from teammed.components import COMPONENTS, TABLE, valid
from teammed.config import TeamworkConfig, config_from_components

__all__ = ["SearchSpace", "valid_subsets", "subset_label"]

# the suggestion order: independent components first (the order TPE's streams were drawn in)
_ORDER = sorted(TABLE, key=lambda c: bool(c.requires))


def subset_label(components: tuple[str, ...] | list[str]) -> str:
    return "+".join(components) or "base"


def valid_subsets(*, min_turns: int = 2) -> list[tuple[str, ...]]:
    """Every component subset the rules allow, in canonical order (48 of the papers' six components with
    two or more turns)."""
    flags = itertools.product((False, True), repeat=len(COMPONENTS))
    return [on for on in (tuple(itertools.compress(COMPONENTS, f)) for f in flags) if valid(on, min_turns)]


@dataclass(frozen=True)
class SearchSpace:
    """Components always; ``n_turns``, ``n_agents`` and ``early_consensus`` when their choices are given."""

    base: TeamworkConfig
    turns: tuple[int, ...] | None = None
    agents: tuple[Any, ...] | None = None
    early_consensus: tuple[float | None, ...] | None = None
    flat: bool = False

    @property
    def min_turns(self) -> int:
        return min(self.turns) if self.turns else self.base.n_turns

    def _extras(self) -> dict[str, tuple[Any, ...]]:
        extras = {"n_turns": self.turns, "n_agents": self.agents, "early_consensus": self.early_consensus}
        return {name: choices for name, choices in extras.items() if choices}

    def describe(self) -> dict[str, Any]:
        """JSON description, stored on the study so a resumed search can check it searches the same space."""
        return {"components": list(COMPONENTS), **{k: list(v) for k, v in self._extras().items()},
                "fixed": {k: v for k, v in self.base.model_dump(mode="json").items() if k not in COMPONENTS}}

    def size(self) -> int:
        """How many distinct valid configurations the space holds."""
        subsets = len(valid_subsets(min_turns=self.min_turns))
        return subsets * math.prod(len(v) for v in self._extras().values())

    def grid(self) -> dict[str, list[Any]]:
        """The flat encoding, for `optuna.samplers.GridSampler`: every point is a valid configuration."""
        labels = [subset_label(s) for s in valid_subsets(min_turns=self.min_turns)]
        return {"components": labels, **{k: list(v) for k, v in self._extras().items()}}

    def suggest(self, trial: optuna.Trial) -> TeamworkConfig:
        """Sample one valid configuration; invalid combinations are never suggested."""
        values: dict[str, Any] = {name: trial.suggest_categorical(name, list(choices))
                                  for name, choices in self._extras().items()}
        turns = values.get("n_turns", self.base.n_turns)
        if self.flat:
            label = trial.suggest_categorical("components", self.grid()["components"])
            names = [] if label == "base" else label.split("+")
        else:
            on: set[str] = set()
            for c in _ORDER:
                if turns >= c.min_turns and set(c.requires) <= on and trial.suggest_categorical(c.name, [False, True]):
                    on.add(c.name)
            names = [name for name in COMPONENTS if name in on]
        fixed = {k: v for k, v in self.base.model_dump().items() if k not in COMPONENTS}
        return config_from_components(names, **{**fixed, **values})
