"""The typed record of one deliberation, built phase by phase.

Phase 1 gives a `Team`, phase 2 the `RoundTwo` assessments (with the leader's facts,
report and grades), phase 3 a `DiscussionLog` (turns, mediations, closed-loop exchanges,
challenges), phase 4 a `Decision` (scores, tie-break, the leader's review). `Deliberation`
assembles them; ``model_dump(mode="json")`` keeps the keys and meanings of the record
dict earlier versions wrote (agents, r2, final, votes_by_turn, challenges, closed_loop,
mediations, report, smm, trust_history, trust, scores, aggregation, tie, early_consensus,
ranking_repairs), plus additive keys (version, answer, invalid_letters, fallbacks,
fallbacks_by_behaviour, abstained, leader_override, turns).

A *fallback* is an LM output the program could not use at all (no valid option letter in
a ranking or choice, an agent id that is not on the team) and replaced by a default; a
*repair* is an output it could use after fixing it (a partial or duplicated ranking, a
decorated letter, letters outside the options dropped).

The record is part of what a run writes (a teamwork row's ``record``), so it lives in the core
with the rest of the results schema (`teammed.records` types a row with it, and never imports
the programs); the programs that build it import it from here. `Agent`,
a member of the team, is part of the record too (`teammed.programs.team` re-exports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

__all__ = [
    "RECORD_VERSION",
    "Agent",
    "Assessment",
    "Turn",
    "FinalVote",
    "Challenge",
    "LoopExchange",
    "DebatedPoint",
    "SmmRecord",
    "TrustSnapshot",
    "TieBreak",
    "LeaderOverride",
    "Team",
    "RoundTwo",
    "DiscussionLog",
    "Decision",
    "Deliberation",
    "tally_fallbacks",
]

RECORD_VERSION = 2


@dataclass(frozen=True)
class Agent:
    """One member of the team: id, role, expertise and vote weight."""

    id: str
    role: str
    expertise: str
    weight: float

    def brief(self) -> str:
        """How the agent is introduced to itself (weights stay hidden from agents)."""
        return f"{self.role}; focus: {self.expertise}" if self.expertise else self.role


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Assessment(_Frozen):
    """One clinician's independent round-2 assessment."""

    model_config = ConfigDict(frozen=True, extra="ignore")  # a stored record carries the computed `first`

    agent: str
    ranking: list[str]
    justification: str
    facts: list[str]
    confidence: str
    repaired: bool = False
    fell_back: bool = False
    invalid_letters: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def first(self) -> str:
        return self.ranking[0]


class Turn(_Frozen):
    """What one clinician said in one discussion turn (the final turn carries a ranking)."""

    agent: str
    turn: int
    message: str
    choice: str
    ranking: list[str] | None = None
    confidence: str | None = None
    repaired: bool = False
    fell_back: bool = False
    invalid_letters: int = 0


class FinalVote(_Frozen):
    """One clinician's final ranking as the vote counts it."""

    agent: str
    ranking: list[str]
    first: str
    confidence: str | None
    rationale: str
    fell_back: bool = False


class Challenge(_Frozen):
    """One mutual-monitoring exchange: the leader's concern, the reply and the verdict."""

    turn: int
    agent: str
    reason: str
    concern: str
    severity: str
    response: str
    verdict: str
    verdict_reason: str
    choice_before: str
    choice_after: str
    trust_before: float | None = None
    trust_after: float | None = None
    target_fell_back: bool = False
    choice_fell_back: bool = False


class LoopExchange(_Frozen):
    """One closed-loop check: the receiver restates a message, the sender confirms or corrects."""

    turn: int
    sender: str
    receiver: str
    restatement: str
    agrees: bool
    confirmed: bool
    correction: str


class DebatedPoint(_Frozen):
    turn: int
    agent: str
    concern: str
    response: str
    outcome: str


class SmmRecord(_Frozen):
    question_analysis: str = ""
    verified_facts: list[str] = Field(default_factory=list)
    debated_points: list[DebatedPoint] = Field(default_factory=list)


class TrustSnapshot(_Frozen):
    stage: str
    scores: dict[str, float]


class TieBreak(_Frozen):
    """How a tie of the final Borda scores was broken.

    ``resolved_by`` is ``"leader"`` only when the leader's pick was one of the tied options;
    otherwise the rule decided and ``leader_pick`` keeps what the leader said.
    """

    tied: list[str]
    resolved_by: Literal["leader", "rule"]
    answer: str
    reason: str
    leader_pick: str | None = None


class LeaderOverride(_Frozen):
    """The leader's review of the aggregated answer (spec §3.2, correction authority)."""

    original: str
    answer: str
    flaw: str
    overridden: bool
    invalid_pick: bool = False


class Team(_Frozen):
    """Phase 1: who is on the team and what the question hides."""

    agents: list[Agent]
    question_analysis: str = ""
    count_reason: str = ""
    count_fell_back: bool = False  # n_agents="auto" and the count reply named no size: the default size stands

    @property
    def ids(self) -> list[str]:
        return [a.id for a in self.agents]

    @property
    def role_of(self) -> dict[str, str]:
        return {a.id: a.role for a in self.agents}


class RoundTwo(_Frozen):
    """Phase 2: the independent assessments and what the team made of them."""

    assessments: list[Assessment]
    verified_facts: list[str] = Field(default_factory=list)
    report: str = ""
    quality: dict[str, float] | None = None


class DiscussionLog(_Frozen):
    """Phase 3: every turn, mediation, closed-loop exchange and challenge, and the trust they left."""

    turns: list[Turn] = Field(default_factory=list)
    mediations: list[str] = Field(default_factory=list)
    loops: list[LoopExchange] = Field(default_factory=list)
    challenges: list[Challenge] = Field(default_factory=list)
    debated_points: list[DebatedPoint] = Field(default_factory=list)
    trust_history: list[TrustSnapshot] = Field(default_factory=list)
    final: list[FinalVote] = Field(default_factory=list)
    early_consensus: bool = False


class Decision(_Frozen):
    """Phase 4: the aggregation, its tie-break and the leader's review."""

    answer: str
    aggregated: str
    method: str
    scores: dict[str, float]
    tie: TieBreak | None = None
    leader_override: LeaderOverride | None = None
    abstained: list[str] = Field(default_factory=list)
    confidence: str = "Low"


class Deliberation(_Frozen):
    """Everything one deliberation decided, typed; `model_dump(mode="json")` is the stored record.

    ``system`` tags it in a result row's record union (`teammed.results.Record`)."""

    system: Literal["teamwork"] = "teamwork"
    version: int = RECORD_VERSION
    answer: str
    agents: list[Agent]
    r2: list[Assessment]
    final: list[FinalVote]
    turns: list[Turn] = Field(default_factory=list)
    votes_by_turn: dict[str, list[str]]
    challenges: list[Challenge]
    closed_loop: list[LoopExchange]
    mediations: list[str]
    report: str
    smm: SmmRecord
    trust_history: list[TrustSnapshot]
    trust: dict[str, float] | None
    scores: dict[str, float]
    aggregation: str
    tie: TieBreak | None
    early_consensus: bool
    leader_override: LeaderOverride | None = None
    abstained: list[str] = Field(default_factory=list)
    ranking_repairs: int = 0
    invalid_letters: int = 0
    fallbacks: int = 0
    fallbacks_by_behaviour: dict[str, int] = Field(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        self.__pydantic_fields_set__.add("system")  # the union's tag is always written, even by exclude_unset

    @classmethod
    def assemble(cls, *, team: Team, r2: RoundTwo, talk: DiscussionLog, decision: Decision,
                 trust: dict[str, float] | None) -> Deliberation:
        """The record of the four phases, with its vote history and repair/fallback counts."""
        votes = {a.agent: [a.first] for a in r2.assessments}
        for t in talk.turns:
            votes.setdefault(t.agent, []).append(t.choice)
        fallbacks = tally_fallbacks(r2=r2, talk=talk, decision=decision, team=team)
        return cls(
            answer=decision.answer,
            agents=team.agents,
            r2=r2.assessments,
            final=talk.final,
            turns=talk.turns,
            votes_by_turn=votes,
            challenges=talk.challenges,
            closed_loop=talk.loops,
            mediations=talk.mediations,
            report=r2.report,
            smm=SmmRecord(question_analysis=team.question_analysis, verified_facts=r2.verified_facts,
                          debated_points=talk.debated_points),
            trust_history=talk.trust_history,
            trust=trust,
            scores={k: round(v, 6) for k, v in decision.scores.items()},
            aggregation=decision.method,
            tie=decision.tie,
            early_consensus=talk.early_consensus,
            leader_override=decision.leader_override,
            abstained=decision.abstained,
            ranking_repairs=sum(a.repaired for a in r2.assessments) + sum(t.repaired for t in talk.turns),
            invalid_letters=sum(a.invalid_letters for a in r2.assessments)
            + sum(t.invalid_letters for t in talk.turns),
            fallbacks=sum(fallbacks.values()),
            fallbacks_by_behaviour={k: v for k, v in fallbacks.items() if v},
        )


def tally_fallbacks(*, r2: RoundTwo, talk: DiscussionLog, decision: Decision,
                    team: Team | None = None) -> dict[str, int]:
    """How many outputs of each behaviour the program could not use and replaced by a default."""
    return {
        "AgentCount": int(team is not None and team.count_fell_back),
        "InitialAssessment": sum(a.fell_back for a in r2.assessments),
        "DiscussionTurn": sum(t.fell_back for t in talk.turns if t.ranking is None),
        "FinalRanking": sum(t.fell_back for t in talk.turns if t.ranking is not None),
        "WeakestReasoning": sum(c.target_fell_back for c in talk.challenges),
        "RespondToConcern": sum(c.choice_fell_back for c in talk.challenges),
        "TieResolution": int(decision.tie is not None and decision.tie.leader_pick is not None
                             and decision.tie.resolved_by == "rule"),
        "CorrectionAuthority": int(decision.leader_override is not None and decision.leader_override.invalid_pick),
    }
