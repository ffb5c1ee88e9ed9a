"""Voting baselines over ``n`` independent generic experts.

`MajorityVote`: the plurality of the independent answers wins (a strict majority is the
special case above 50%); a tie goes to the earliest letter in option order. ``n`` calls.

`ConsensusVote`: while the experts disagree, each sees the others' answers and revises, for
at most ``max_rounds`` rounds; unanimity ends it early, otherwise the majority rule above
decides. ``n·(1 + rounds run)`` calls, between ``n`` and ``n·(1 + max_rounds)``.

A ballot naming no option is dropped (recorded as None in ``votes_by_turn``, counted as a
fallback of its behaviour): it is no vote for any option, and it keeps its seat in the
denominator, so the recorded ``share`` is the winner's share of the whole panel. Unanimity
means every expert validly named the same option (a dropped ballot agrees with no one, so
the panel revises once more). The decision counts the final round's valid ballots; with
none, `NoAnswerError`.
"""

from __future__ import annotations

import dspy
from pydantic import Field

from teammed.programs.behaviour import Behaviour
from teammed.programs.parallel import parallel_map
from teammed.programs.peers._shared import (
    PeerSystem,
    Settings,
    Statement,
    format_statements,
    prediction,
    question_text,
    said,
)
from teammed.programs.peers._votes import confidence_from_share, dropped, plurality_or_fail, shares, unanimous
from teammed.programs.recruitment import generic_agents
from teammed.programs.team import Agent, Transcript
from teammed.signatures.peer_voting import IndependentVote, RevisedVote

__all__ = ["MajorityVote", "ConsensusVote"]


class VotingSettings(Settings):
    n_experts: int = Field(default=5, ge=1, le=15)
    max_rounds: int = Field(default=2, ge=0, le=10)


class _Panel:
    """The experts, their ballots per round, and the transcript of one question."""

    def __init__(self, question: str, options: dict[str, str], n: int):
        self.question, self.options, self.letters = question, options, list(options)
        self.experts: list[Agent] = generic_agents(n)
        self.rounds: list[list[Statement]] = []
        self.transcript = Transcript()

    def add(self, ballots: list[Statement]) -> None:
        self.rounds.append(ballots)
        for b in ballots:
            self.transcript.add(
                "vote",
                "ballot" if b.round == 0 else "revision",
                b.text,
                agent=b.agent,
                role=b.role,
                turn=b.round,
                choice=b.choice,
                confidence=b.confidence,
            )

    @property
    def votes(self) -> list[str | None]:
        """The last round's ballots, one per expert; None for a ballot that named no option."""
        return [b.choice for b in self.rounds[-1]]

    def unanimous(self) -> bool:
        return unanimous(self.votes)


def _cast(vote: Behaviour, p: _Panel) -> list[Statement]:
    def one(agent: Agent) -> Statement:
        out = vote(question=p.question, options=p.options, expert=agent.role)
        return said(agent, 0, out, p.options, vote.name)

    return parallel_map(one, p.experts)


def _decide(p: _Panel, method: str) -> dspy.Prediction:
    answer, share = plurality_or_fail(p.votes, p.letters, f"{method}: no expert's final vote")
    counts = ", ".join(f"{k} {v:.0%}" for k, v in shares(p.votes, p.letters).items() if v)
    if dropped(p.votes):
        counts += f", {dropped(p.votes)} dropped"
    p.transcript.add("vote", "decision", f"{method}: {counts}", answer=answer)
    backers = [b for b in p.rounds[-1] if b.choice == answer and b.text]
    rationale = "\n".join(
        [f"Answer {answer} ({p.options[answer]}) by {method} ({counts}; ties go to the earliest letter)."]
        + [f"- {b.agent}: {b.text}" for b in backers]
    )
    votes = {a.id: [r[i].choice for r in p.rounds] for i, a in enumerate(p.experts)}
    record = {
        "route": None,
        "experts": [a.role for a in p.experts],
        "agents": [{"id": a.id, "role": a.role} for a in p.experts],
        "votes_by_turn": votes,
        "r2": [{"agent": b.agent, "first": b.choice} for b in p.rounds[0]],
        "final": [{"agent": b.agent, "first": b.choice, "confidence": b.confidence} for b in p.rounds[-1]],
        "rounds": len(p.rounds) - 1,
        "consensus": p.unanimous(),
        "share": share,
        "dropped": dropped(p.votes),
        "method": method,
    }
    return prediction(answer, rationale, confidence_from_share(share), record, p.transcript)


class MajorityVote(PeerSystem):
    """``n_experts`` independent answers; the plurality wins, ties to the earliest letter."""

    system_name = "majority_vote"

    def __init__(self, *, n_experts: int = 5) -> None:
        super().__init__()
        self.config = VotingSettings.build("MajorityVote", n_experts=n_experts, max_rounds=0)
        self.vote = Behaviour(IndependentVote)

    def forward(self, question: str, options: dict[str, str], context: str | None = None) -> dspy.Prediction:
        p = _Panel(question_text(question, context), dict(options), self.config.n_experts)
        p.add(_cast(self.vote, p))
        return _decide(p, "majority")


class ConsensusVote(PeerSystem):
    """Independent answers, then up to ``max_rounds`` of revision until unanimous; else majority."""

    system_name = "consensus"

    def __init__(self, *, n_experts: int = 5, max_rounds: int = 2) -> None:
        super().__init__()
        self.config = VotingSettings.build("ConsensusVote", n_experts=n_experts, max_rounds=max_rounds)
        self.vote = Behaviour(IndependentVote)
        self.revise = Behaviour(RevisedVote)

    def forward(self, question: str, options: dict[str, str], context: str | None = None) -> dspy.Prediction:
        p = _Panel(question_text(question, context), dict(options), self.config.n_experts)
        p.add(_cast(self.vote, p))
        while not p.unanimous() and len(p.rounds) <= self.config.max_rounds:
            p.add(self._revise(p, len(p.rounds)))
        return _decide(p, "consensus" if p.unanimous() else "majority")

    def _revise(self, p: _Panel, turn: int) -> list[Statement]:
        last = p.rounds[-1]

        def one(i: int) -> Statement:
            agent = p.experts[i]
            out = self.revise(
                question=p.question,
                options=p.options,
                expert=agent.role,
                own_answer=format_statements([last[i]]),
                peer_answers=format_statements(b for j, b in enumerate(last) if j != i),
            )
            return said(agent, turn, out, p.options, self.revise.name)

        return parallel_map(one, list(range(len(p.experts))))
