"""The teamwork components, declared once.

Each component is one frozen `Component` record: its name and short names, what it requires,
the turns it needs, the presets it belongs to, its term in one question's call count, the papers
that include it and how a request shows it acted. The configuration's fields and rules, the
aliases and presets, the search space, tune's moves, the call count and the simulated team are
all derived from `TABLE`. The deliberation (`programs/teamwork.py`) keeps its phases
explicit: a component's hook there is the one place that runs it. Plain data (no pydantic), so
building the command line's help does not import the configuration model.

Adding a component (docs/add-a-component.md): its signature, its module, one record here, its
hook in a phase.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Component", "CallShape", "TABLE", "COMPONENTS", "ALIASES", "PRESET_COMPONENTS", "GROUP_PRESETS",
           "satisfied", "completed", "valid"]


@dataclass(frozen=True)
class CallShape:
    """What one question's call count depends on besides the components: team size, turns, whether
    leadership is on, whether the discussion ran (early consensus skips it), a tie, the leader's review."""

    n: int
    turns: int
    lead: bool
    discussed: bool = True
    tie: bool = False
    corrects: bool = False

    @property
    def between(self) -> int:
        """The gaps between discussion turns (none when the discussion was skipped)."""
        return self.turns - 1 if self.discussed else 0


@dataclass(frozen=True)
class Component:
    """One teamwork component (see the module docstring)."""

    name: str
    aliases: tuple[str, ...]
    summary: str
    calls: Callable[[CallShape], int]  # its term in one question's LM calls (programs/accounting.py)
    presets: tuple[str, ...]  # its own single-component preset first, then the group presets it is in
    requires: tuple[str, ...] = ()
    requires_why: str = ""
    min_turns: int = 1
    turns_why: str = ""  # why it needs min_turns, for the refusal
    papers: tuple[str, ...] = ("000", "001", "002")  # the seeds that include it
    # (input field, text): what a final-ranking request carries once it acted (the simulated team reads it)
    evidence: tuple[tuple[str, str], ...] = ()


TABLE: tuple[Component, ...] = (
    Component(
        "shared_mental_model", ("smm",), "a question analysis and the leader's shared facts for every member",
        calls=lambda s: 1 + int(s.lead),
        presets=("smm", "c6", "all", "all5"),
        evidence=(("team_context", "Shared knowledge:"), ("history", "(shared knowledge considered)"))),
    Component(
        "leadership", ("l",), "a leader who mediates each turn, breaks ties and may correct the decision",
        calls=lambda s: s.turns * int(s.discussed) + int(s.tie) + int(s.corrects),
        presets=("leadership", "team_orientation", "mutual_monitoring", "c6", "c7", "all", "all5"),
        evidence=(("team_context", "Leader's latest mediation"),)),
    Component(
        "team_orientation", ("to", "orientation"), "specialties assigned by the leader and a formal report",
        calls=lambda s: 2 * int(s.lead),
        presets=("team_orientation", "c6", "all", "all5"), evidence=(("role", "; focus:"),)),
    Component(
        "trust", ("t",), "each member's reliability, graded after round 2 and updated by challenges",
        calls=lambda s: int(s.lead),
        presets=("trust", "mutual_monitoring", "c7", "all", "all5"), evidence=(("team_context", "Reliability"),)),
    Component(
        "mutual_monitoring", ("mm", "monitoring"), "the leader challenges a weak claim between turns",
        calls=lambda s: 4 * s.between,
        presets=("mutual_monitoring", "c7", "all", "all5"), requires=("leadership",),
        requires_why="the leader raises and judges challenges", min_turns=2,
        turns_why="it acts between discussion turns",
        evidence=(("history", "leader challenged"),)),
    Component(
        "closed_loop", ("cl",), "each message restated by its receiver and confirmed by its sender",
        calls=lambda s: 2 * s.n * s.between,
        presets=("closed_loop", "all"), min_turns=2, turns_why="it acts between discussion turns",
        papers=("000",), evidence=(("history", " clarified: "),)),
)

# The presets of several components, in the order they are listed (001's Table 1 columns, then all).
GROUP_PRESETS = {
    "c6": "001's C6: shared mental model, leadership and team orientation",
    "c7": "001's C7: leadership, trust and mutual monitoring",
    "all": "the papers' six components (a component of one's own joins it when its record lists all)",
    "all5": "001's Table 1 All Compon.: its five components (closed loop is 000's sixth)",
}

COMPONENTS: tuple[str, ...] = tuple(c.name for c in TABLE)
BY_NAME: dict[str, Component] = {c.name: c for c in TABLE}
ALIASES: dict[str, str] = {alias: c.name for c in TABLE for alias in (c.name, *c.aliases)}
PRESET_COMPONENTS: dict[str, tuple[str, ...]] = {
    "base": (),
    **{c.presets[0]: tuple(x.name for x in TABLE if c.presets[0] in x.presets) for c in TABLE},
    **{g: tuple(x.name for x in TABLE if g in x.presets) for g in GROUP_PRESETS},
}


def satisfied(on: set[str] | frozenset[str] | list[str]) -> tuple[str, ...]:
    """``on`` without every component whose requirements are not all on, in canonical order (switching
    leadership off takes mutual monitoring with it)."""
    names = set(on)
    while dropped := {n for n in names if not set(BY_NAME[n].requires) <= names}:
        names -= dropped
    return tuple(n for n in COMPONENTS if n in names)


def completed(on: set[str] | frozenset[str] | list[str]) -> tuple[str, ...]:
    """``on`` with what its components require, in canonical order (switching monitoring on brings leadership)."""
    names = set(on)
    for c in reversed(TABLE):
        if c.name in names:
            names.update(c.requires)
    return tuple(n for n in COMPONENTS if n in names)


def valid(on: set[str] | frozenset[str] | tuple[str, ...], turns: int) -> bool:
    """Whether the components ``on`` satisfy every requirement and turn minimum at ``turns`` turns."""
    return all(set(BY_NAME[n].requires) <= set(on) and turns >= BY_NAME[n].min_turns for n in on)


def _check(table: tuple[Component, ...]) -> None:
    """The table is consistent: unique names and aliases, requirements declared earlier, own presets unique."""
    seen: set[str] = set()
    for c in table:
        own = {c.name, *c.aliases, c.presets[0] if c.presets else ""}  # "" (no preset of its own) always clashes
        clash = own & (seen | set(GROUP_PRESETS) | {"base", "none", ""})
        if clash:
            raise ValueError(f"component {c.name!r}: {sorted(clash)} is already a name, alias or preset")
        if missing := [r for r in c.requires if r not in {x.name for x in table[: table.index(c)]}]:
            raise ValueError(f"component {c.name!r} requires {missing}, which must be declared before it")
        seen |= {c.name, *c.aliases, c.presets[0]}


_check(TABLE)

