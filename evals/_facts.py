"""What the metrics read of one row, taken once: `RowFacts`, and `Summarizer`, which keeps only those.

A finished row carries its question, transcript and the team's whole record (tens of kilobytes
once typed); `summarize` needs a few letters and numbers of it. `row_facts` reads them through the
typed readers of `teammed.evals._rows` (the row's `Deliberation` or `PeerRecord`), so a run or a
report can drop each row as soon as it has been read and keep its facts: memory grows by a few
hundred bytes per question, not by the row. Every metric computes from facts; the public metric
functions accept rows or facts alike (`facts_of`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from teammed.evals._rows import (
    AnyRow,
    agent_roles,
    deliberation,
    first_choices,
    number,
    peer_record,
    row_roles,
    typed,
    votes_by_turn,
)
from teammed.results import ResultRow

__all__ = ["RowFacts", "TeamFacts", "PeerFacts", "row_facts", "facts_of", "RowLike"]

# numeric fields whose mean is taken over the rows that recorded them (`efficiency`)
RECORDED = ("calls", "prompt_tokens", "cached_prompt_tokens", "completion_tokens", "latency_s", "cost_usd",
            "cache_hits", "spent_prompt_tokens", "spent_completion_tokens", "spent_cost_usd", "parse_failures",
            "repaired", "n_agents")


def _text(value: object) -> str | None:
    """Short labels repeat across thousands of rows: one shared string each."""
    return sys.intern(value) if isinstance(value, str) else None


def _texts(values: Iterable[object]) -> tuple[str, ...]:
    return tuple(sys.intern(str(v)) for v in values)


@dataclass(frozen=True, slots=True)
class TeamFacts:
    """What the teamwork metrics read of a `Deliberation`."""

    smm_facts: int
    trust_history: tuple[tuple[str, tuple[float, ...]], ...]  # (stage, the agents' finite scores)
    challenges: tuple[tuple[str | None, str | None, str | None], ...]  # (verdict, choice before, choice after)
    tie: str | None  # who resolved the tie; None when there was no tie or the record names nobody
    tied: bool
    early_consensus: bool
    ranking_repairs: int


@dataclass(frozen=True, slots=True)
class PeerFacts:
    """What `peer_structure` reads of a peer system's record."""

    route: str | None
    n_experts: int | None
    rounds: float | None
    reassignments: float | None
    stage: str | None = None  # adaptive: the stage whose answer stands (single, team)


@dataclass(frozen=True, slots=True)
class RowFacts:
    """The part of a `ResultRow` the metrics read; attribute names follow the row's."""

    id: str
    dataset: str | None
    seed: int | None
    system: str | None
    answered_models: str | None  # `ResultRow.answered_models`
    labeled: bool
    gold: str | None
    prediction: str | None
    correct: bool | None
    failed: bool
    confidence: str | None
    binary_positive: str | None
    recorded: Mapping[str, float]  # the `RECORDED` fields this row wrote, finite values only
    roles: tuple[str, ...]  # the roles its team recruited (`row_roles`)
    r2: tuple[str, ...]  # the agents' independent first choices
    final: tuple[str, ...]  # their final first choices
    trust: Mapping[str, float]  # agent -> final trust
    votes: Mapping[str, tuple[str | None, ...]] | None  # votes by turn; None when not recorded
    team: Mapping[str, str]  # agent -> role for the voters (`decisiveness`)
    team_facts: TeamFacts | None
    peer: PeerFacts | None
    extra: Mapping[str, Any]  # the row's kept scalar extras (a grouping field such as ``problem``)
    n_options: int = 0  # how many options the question had (chance is 1 / n_options)


RowLike: TypeAlias = ResultRow | RowFacts
"""What the metric functions accept: typed rows or their facts."""


def _scores(mapping: Any) -> dict[str, float]:
    """Agent -> score over the finite numbers of a trust mapping (a row's ``trust`` is untyped)."""
    if not isinstance(mapping, Mapping):
        return {}
    return {sys.intern(str(k)): v for k, raw in mapping.items() if (v := number(raw)) is not None}


def _final_trust(row: ResultRow) -> dict[str, float]:
    """The row's ``trust``, else the last stage of its `Deliberation`'s trust history."""
    scores = _scores(row.trust)
    if scores:
        return scores
    found = deliberation(row)
    return _scores(found.trust_history[-1].scores) if found is not None and found.trust_history else {}


def _team(row: ResultRow, votes: Mapping[str, object] | None) -> dict[str, str]:
    """Agent id -> role: the record's agents, else the row's roles zipped with the voters in order."""
    if votes is None:
        return {}
    roles = agent_roles(row)
    if roles:
        return {sys.intern(k): sys.intern(v) for k, v in roles.items()}
    listed = row_roles(row)
    return dict(zip(_texts(votes), _texts(listed), strict=True)) if len(listed) == len(votes) else {}


def _team_facts(row: ResultRow) -> TeamFacts | None:
    found = deliberation(row)
    if found is None:
        return None
    return TeamFacts(
        smm_facts=len(found.smm.verified_facts),
        trust_history=tuple((sys.intern(stage.stage), tuple(_scores(stage.scores).values()))
                            for stage in found.trust_history),
        challenges=tuple((_text(c.verdict), _text(c.choice_before), _text(c.choice_after)) for c in found.challenges),
        tie=None if found.tie is None else _text(found.tie.resolved_by),
        tied=found.tie is not None,
        early_consensus=bool(found.early_consensus),
        ranking_repairs=int(found.ranking_repairs),
    )


def _peer_facts(row: ResultRow) -> PeerFacts | None:
    found = peer_record(row)
    if found is None:
        return None
    return PeerFacts(route=_text(found.route) if found.route else None,
                     n_experts=len(found.experts) if found.experts is not None else None,
                     rounds=number(found.rounds), reassignments=number(found.reassignments),
                     stage=getattr(found, "stage", None))


def row_facts(row: AnyRow | RowFacts) -> RowFacts:
    """The facts of a row (typed or stored); facts pass through unchanged."""
    if isinstance(row, RowFacts):
        return row
    row = typed(row)
    votes = votes_by_turn(row)
    kept_votes = None if votes is None else {sys.intern(str(a)): tuple(map(_text, v)) for a, v in votes.items()}
    recorded = {field: v for field in RECORDED
                if field in row.model_fields_set and (v := number(getattr(row, field))) is not None}
    extra = {k: v for k, v in (row.model_extra or {}).items() if isinstance(v, str | int | float | bool) or v is None}
    return RowFacts(
        id=row.id, dataset=_text(row.dataset), seed=row.seed, system=_text(row.system),
        answered_models=_text(row.answered_models), labeled=row.labeled, gold=_text(row.gold),
        prediction=_text(row.prediction), correct=row.correct, failed=row.failed,
        confidence=_text(row.confidence), binary_positive=_text(row.binary_positive), recorded=recorded,
        roles=_texts(row_roles(row)), r2=_texts(first_choices(row, "r2")), final=_texts(first_choices(row, "final")),
        trust=_final_trust(row), votes=kept_votes, team=_team(row, votes), team_facts=_team_facts(row),
        peer=_peer_facts(row), extra=extra, n_options=len(row.options or {}),
    )


def facts_of(rows: Iterable[AnyRow | RowFacts]) -> list[RowFacts]:
    """`row_facts` over rows: what every metric function calls once, at its entry."""
    return [row_facts(row) for row in rows]
