"""Typed result rows and deliberation records for tests: real `Deliberation` values, not dict sketches."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from teammed.deliberation import (
    Assessment,
    Challenge,
    Deliberation,
    FinalVote,
    LeaderOverride,
    SmmRecord,
    TieBreak,
    TrustSnapshot,
)
from teammed.programs.team import Agent
from teammed.records import ResultRow, load_row


def a_challenge(agent: str, before: str, after: str, *, verdict: str = "weak", turn: int = 1,
                trust: tuple[float, float] | None = None) -> Challenge:
    return Challenge(turn=turn, agent=agent, reason="", concern="why?", severity="high", response="because",
                     verdict=verdict, verdict_reason="", choice_before=before, choice_after=after,
                     trust_before=trust[0] if trust else None, trust_after=trust[1] if trust else None)


def a_deliberation(
    *,
    r2: Sequence[str] = ("A", "A"),
    final: Sequence[str] | None = None,
    roles: Sequence[str] | None = None,
    votes: Mapping[str, list[str]] | None = None,
    challenges: Sequence[Challenge] = (),
    tie: TieBreak | None = None,
    override: LeaderOverride | None = None,
    early: bool = False,
    trust: dict[str, float] | None = None,
    trust_history: Sequence[tuple[str, dict[str, float]]] = (),
    facts: Sequence[str] = (),
    scores: dict[str, float] | None = None,
    answer: str | None = None,
    ranking_repairs: int = 0,
) -> Deliberation:
    """A deliberation of ``len(r2)`` agents (``agent_1``...) whose R2 and final first choices are given."""
    final = list(final if final is not None else r2)
    ids = [f"agent_{i + 1}" for i in range(len(r2))]
    roles = list(roles) if roles is not None else [f"Expert {i + 1}" for i in range(len(r2))]
    answer = answer or (final[0] if final else "A")
    return Deliberation(
        answer=answer,
        agents=[Agent(id=i, role=r, expertise="", weight=round(1 / len(ids), 4)) for i, r in zip(ids, roles,
                                                                                             strict=True)],
        r2=[Assessment(agent=i, ranking=[c], justification="j", facts=[], confidence="High")
            for i, c in zip(ids, r2, strict=True)],
        final=[FinalVote(agent=i, ranking=[c], first=c, confidence="Medium", rationale="r")
               for i, c in zip(ids, final, strict=False)],
        votes_by_turn=dict(votes) if votes is not None else {i: [a, b] for i, a, b in zip(ids, r2, final,
                                                                                         strict=False)},
        challenges=list(challenges),
        closed_loop=[],
        mediations=[],
        report="",
        smm=SmmRecord(verified_facts=list(facts)),
        trust_history=[TrustSnapshot(stage=s, scores=v) for s, v in trust_history],
        trust=trust,
        scores=scores if scores is not None else {answer: 1.0},
        aggregation="borda",
        tie=tie,
        early_consensus=early,
        leader_override=override,
        ranking_repairs=ranking_repairs,
    )


_ids = itertools.count()


def a_row(record: Deliberation | Mapping[str, Any] | None = None, **fields: Any) -> ResultRow:
    """A typed row (an id is made up unless given) carrying ``record`` in its stored form."""
    data: dict[str, Any] = {"id": f"q{next(_ids)}", **fields}
    if isinstance(record, Deliberation):
        data["record"] = record.model_dump(mode="json")
    elif record is not None:
        data["record"] = dict(record)
    return load_row(data)
