"""Readers over typed result rows: the `ResultRow`, its `Deliberation` or `PeerRecord`, its transcript.

Every metric, table and page reads rows through these; none probes a stored dict. A stored row
(a ``results.jsonl`` line, or the dict form the runner once passed) becomes a `ResultRow` once, at
the public edge, with `typed` (which upgrades rows written before schema versions).

A row's record is already typed (`teammed.results.Record`, discriminated by ``system``): a teamwork
row's `Deliberation`, or a peer system's model, whose shared keys (team, first choices, votes by turn,
route, experts, rounds) its base `PeerRecord` declares; None for a failed row or a system without a
model. Rows of older schema versions are typed once, when read (`teammed.results.load_row`).

Usage counters a row never recorded (a row from another tool) are absent from the means, not zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias

from teammed.deliberation import Assessment, FinalVote
from teammed.results import Deliberation, PeerRecord, PeerVote, ResultRow, load_row

__all__ = [
    "stage_name",
    "AnyRow",
    "typed",
    "deliberation",
    "peer_record",
    "team_record",
    "first_choice",
    "first_choices",
    "votes_by_turn",
    "agent_roles",
    "row_roles",
    "number",
    "mean",
    "ratio",
]


AnyRow: TypeAlias = ResultRow | Mapping[str, Any]
"""A typed row, or its stored (dict) form: what the public edges (`summarize`, the paired tests) accept."""


def typed(row: AnyRow) -> ResultRow:
    """A row as the typed `ResultRow` (a stored dict is validated and upgraded by `load_row`)."""
    return row if isinstance(row, ResultRow) else load_row(dict(row))


def deliberation(row: ResultRow) -> Deliberation | None:
    """The record of a teamwork row; None for a failed row or another system's record."""
    return row.record if isinstance(row.record, Deliberation) else None


def peer_record(row: ResultRow) -> PeerRecord | None:
    """A peer system's record (read for the keys peer systems share); None otherwise."""
    return row.record if isinstance(row.record, PeerRecord) else None


def team_record(row: ResultRow) -> Deliberation | PeerRecord | None:
    """The row's `Deliberation`, else its peer system's record, else None."""
    return row.record if isinstance(row.record, Deliberation | PeerRecord) else None


def first_choice(vote: Assessment | FinalVote | PeerVote) -> str | None:
    """A vote's first choice: its ``first``, else the head of its ranking (None when it has neither)."""
    if isinstance(vote, PeerVote):
        return vote.choice
    first = vote.first if isinstance(vote, FinalVote) else None  # an Assessment's `first` is its ranking's head
    return first or (vote.ranking[0] if vote.ranking else None)


def first_choices(row: ResultRow, stage: Literal["r2", "final"]) -> list[str]:
    """Each agent's first choice, where recorded: its independent one (``r2``, round 2) or its ``final`` one."""
    found = team_record(row)
    votes: list[Assessment] | list[FinalVote] | list[PeerVote] = getattr(found, stage) if found is not None else []
    return [choice for vote in votes if (choice := first_choice(vote))]


def votes_by_turn(row: ResultRow) -> Mapping[str, list[str | None]] | None:
    """Agent -> its choice after round 2 and after each discussion turn; None when not recorded."""
    found = team_record(row)
    if found is None:
        return None
    if isinstance(found, PeerRecord):
        return found.votes_by_turn
    return {agent: list(votes) for agent, votes in found.votes_by_turn.items()}


def agent_roles(row: ResultRow) -> dict[str, str]:
    """Agent id -> role, from the record's agents (the authoritative team list)."""
    found = team_record(row)
    if found is None:
        return {}
    return {str(agent.id): str(agent.role or "unknown") for agent in found.agents if agent.id}


def row_roles(row: ResultRow) -> list[str]:
    """The roles a row's team recruited: the row's ``roles``, else the record's agents."""
    roles = [str(r) for r in row.roles if r]
    return roles or list(agent_roles(row).values())


def number(value: Any) -> float | None:
    """A finite int/float (bools excluded), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value else None  # NaN is not data


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def stage_name(stage: str) -> str:
    """A trust snapshot's stage as a reader says it: ``post_r2`` -> "after round 2", ``mm_turn_1`` ->
    "after challenge 1", ``initial`` -> "at the start"."""
    if stage.startswith("mm_turn_"):
        return f"after challenge {stage.removeprefix('mm_turn_')}"
    return {"initial": "at the start", "post_r2": "after round 2"}.get(stage, stage.replace("_", " "))
