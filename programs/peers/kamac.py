"""`KnowledgeDrivenTeam`: a team that grows when it notices missing expertise (KAMAC-style).

1. Initial consultation: recruit ``initial_experts`` specialists; each assesses alone.
2. Rounds r = 1..``max_rounds``: every agent answers the others' latest views (exchange); a
   consensus check reads the exchange and stops the loop on ``yes``. Otherwise a
   knowledge-gap check asks whether the team lacks a specialty; new specialists (at most
   ``max_recruits`` a round, never a role already on the team, compared case-insensitively)
   assess with the discussion so far; then every agent, old and new, updates its answer.
   The cap defaults to `MAX_RECRUITS_PER_ROUND` (the paper has none: docs/fidelity.md).
3. A moderator decides from each agent's latest comment and the last consensus check.

LM calls per question, with E = initial_experts, N_r the team size when round r starts and
g_r the specialists recruited in round r::

    2 + E + Σ_r (N_r + 1) + Σ_(r without consensus) (1 + N_r + 2·g_r)

(recruitment, assessments, exchanges and checks, then gap check, recruits' assessments and
everyone's update, and the moderator). Without recruitment, consensus at check c costs
``2 + E + (2c - 1)(E + 1)`` and no consensus ``2 + E + 2R(E + 1)``: 5 and 15 by default.

No invented answers, at every decision point:

* an agent's answer naming no option is dropped (None in ``votes_by_turn``), never read as
  an option, as its earlier answer or as the team's leaning;
* the consensus check ends the discussion only when it says ``yes``, its leaning names an
  option, and more than half of the whole team (dropped answers keep their seats) validly
  holds that option; an unreadable verdict reads as "no consensus" (counted as a fallback),
  an unreadable leaning is dropped (none);
* an unreadable knowledge-gap verdict recruits no one (counted as a fallback); an initial
  recruitment naming no specialty is staffed with generic experts (counted);
* the moderator's verdict naming no option is dropped: the consensus option decides when
  there was consensus, else the plurality of the team's valid latest answers; with no valid
  answer at all the question fails with `NoAnswerError`.
"""

from __future__ import annotations

from typing import Any

import dspy
from pydantic import Field

from teammed.programs.behaviour import Behaviour
from teammed.programs.parallel import parallel_map
from teammed.programs.peers._shared import (
    PeerSystem,
    Settings,
    Statement,
    as_confidence,
    distinct_roles,
    format_statements,
    log_statements,
    note_fallback,
    prediction,
    question_text,
    read_letter,
    recruited,
    said,
    staff,
)
from teammed.programs.peers._votes import dropped, majority_holds, plurality_or_fail
from teammed.programs.team import Agent, Transcript
from teammed.signatures.peer_kamac import (
    AnswerUpdate,
    ConsensusCheck,
    ExpertAssessment,
    ExpertRecruitment,
    KnowledgeGap,
    ModeratorVerdict,
    ViewExchange,
)

__all__ = ["KnowledgeDrivenTeam", "MAX_RECRUITS_PER_ROUND"]

MAX_RECRUITS_PER_ROUND = 2


class KnowledgeSettings(Settings):
    initial_experts: int = Field(default=1, ge=1, le=10)
    max_rounds: int = Field(default=3, ge=1, le=10)
    max_recruits: int | None = Field(default=MAX_RECRUITS_PER_ROUND, ge=0, le=10)  # None: no cap (the paper)


class _Team:
    """Everything one question's discussion accumulates."""

    def __init__(self, question: str, options: dict[str, str]):
        self.question, self.options, self.letters = question, options, list(options)
        self.agents: list[Agent] = []
        self.joined: dict[str, int] = {}
        self.said: list[Statement] = []
        self.latest: dict[str, Statement] = {}
        self.votes: dict[str, list[str | None]] = {}
        self.recruited: list[list[str]] = []
        self.consensus = False
        self.leaning: str | None = None
        self.note = ""
        self.transcript = Transcript()

    def join(self, agents: list[Agent], turn: int) -> None:
        self.agents += agents
        for a in agents:
            self.joined[a.id] = turn
            self.votes[a.id] = []
            self.transcript.add("recruit", "recruited", a.brief(), agent=a.id, role=a.role, turn=turn)

    def hear(self, statements: list[Statement], phase: str) -> None:
        for st in statements:
            self.said.append(st)
            self.latest[st.agent] = st
            self.votes[st.agent].append(st.choice)
        log_statements(self.transcript, phase, phase, statements)

    def latest_of(self, agents: list[Agent]) -> list[Statement]:
        return [self.latest[a.id] for a in agents if a.id in self.latest]


class KnowledgeDrivenTeam(PeerSystem):
    """Start with few experts; discuss; recruit the missing specialty; let a moderator decide.

    ``max_recruits=None`` recruits as many as the gap check names, as in the paper."""

    system_name = "kamac"

    def __init__(self, *, initial_experts: int = 1, max_rounds: int = 3,
                 max_recruits: int | None = MAX_RECRUITS_PER_ROUND) -> None:
        super().__init__()
        self.config = KnowledgeSettings.build(
            "KnowledgeDrivenTeam",
            initial_experts=initial_experts,
            max_rounds=max_rounds,
            max_recruits=max_recruits,
        )
        self.recruit = Behaviour(ExpertRecruitment)
        self.assess = Behaviour(ExpertAssessment)
        self.exchange = Behaviour(ViewExchange)
        self.check = Behaviour(ConsensusCheck)
        self.gap = Behaviour(KnowledgeGap)
        self.update = Behaviour(AnswerUpdate)
        self.moderate = Behaviour(ModeratorVerdict)

    def forward(self, question: str, options: dict[str, str], context: str | None = None) -> dspy.Prediction:
        t = _Team(question_text(question, context), dict(options))
        self._consult(t)
        for turn in range(1, self.config.max_rounds + 1):
            self._exchange(t, turn)
            if self._agreed(t, turn):
                t.recruited.append([])
                break
            t.recruited.append([a.role for a in self._fill_gap(t, turn)])
            self._update(t, turn)
        return self._decide(t)

    # ------------------------------------------------------------------ stages
    def _consult(self, t: _Team) -> None:
        n = self.config.initial_experts
        experts = self.recruit(question=t.question, options=t.options, n_experts=n).experts
        t.join(recruited(experts, n, behaviour=self.recruit.name), 0)
        t.hear(self._assessments(t, t.agents, 0, ""), "assessment")

    def _assessments(self, t: _Team, agents: list[Agent], turn: int, discussion: str) -> list[Statement]:
        def one(agent: Agent) -> Statement:
            out = self.assess(
                question=t.question, options=t.options, role=agent.brief(), discussion=discussion
            )
            return said(agent, turn, out, t.options, self.assess.name, text="assessment")

        return parallel_map(one, agents)

    def _exchange(self, t: _Team, turn: int) -> None:
        def one(agent: Agent) -> Statement:
            own = t.latest[agent.id]
            others = format_statements(t.latest_of([a for a in t.agents if a.id != agent.id]))
            out = self.exchange(
                question=t.question,
                options=t.options,
                role=agent.brief(),
                own_view=format_statements([own]),
                team_views=others,
            )
            return said(agent, turn, out, t.options, self.exchange.name, text="comment", confidence=own.confidence)

        t.hear(parallel_map(one, t.agents), "exchange")

    def _agreed(self, t: _Team, turn: int) -> bool:
        out = self.check(
            question=t.question, options=t.options, comments=format_statements(t.latest_of(t.agents))
        )
        if out.consensus not in ("yes", "no"):  # unreadable: no consensus (keep discussing), counted
            note_fallback(self.check.name)
        t.leaning = read_letter(out.answer, t.options, behaviour=self.check.name)
        votes = [st.choice for st in t.latest_of(t.agents)]
        # the check's "yes" holds only for an option a valid majority of the whole team holds
        t.consensus = out.consensus == "yes" and majority_holds(t.leaning, votes)
        verdict = "yes" if t.consensus else "no"
        leans = f"team leans to {t.leaning}" if t.leaning is not None else "no valid leaning"
        t.note = f"consensus: {verdict}; {leans}. {out.reason or ''}".strip()
        t.transcript.add(
            "consensus", "consensus_check", t.note, turn=turn, consensus=t.consensus, answer=t.leaning
        )
        return t.consensus

    def _fill_gap(self, t: _Team, turn: int) -> list[Agent]:
        present = [a.role for a in t.agents]
        out = self.gap(
            question=t.question, options=t.options, team=present, discussion=format_statements(t.said)
        )
        if out.gap not in ("yes", "no"):  # unreadable: recruit no one, counted
            note_fallback(self.gap.name)
        proposed = list(out.specialties or []) if out.gap == "yes" else []
        roles = distinct_roles(
            (getattr(p, "role", "") for p in proposed), present, limit=self.config.max_recruits
        )
        t.transcript.add(
            "gap",
            "knowledge_gap",
            str(out.reason or ""),
            turn=turn,
            gap=out.gap == "yes",
            proposed=[str(getattr(p, "role", "")) for p in proposed],
            recruited=roles,
        )
        if not roles:
            return []
        recruits = staff(proposed, len(roles), present=t.agents, first_id=len(t.agents) + 1)
        t.join(recruits, turn)
        t.hear(self._assessments(t, recruits, turn, format_statements(t.said)), "assessment")
        return recruits

    def _update(self, t: _Team, turn: int) -> None:
        discussion = format_statements(t.said)

        def one(agent: Agent) -> Statement:
            own = t.latest[agent.id]
            out = self.update(
                question=t.question,
                options=t.options,
                role=agent.brief(),
                own_view=format_statements([own]),
                discussion=discussion,
            )
            return said(agent, turn, out, t.options, self.update.name, text="comment")

        t.hear(parallel_map(one, t.agents), "update")

    def _decide(self, t: _Team) -> dspy.Prediction:
        latest = t.latest_of(t.agents)
        out = self.moderate(
            question=t.question,
            options=t.options,
            latest_comments=format_statements(latest),
            consensus_note=t.note,
        )
        verdict = read_letter(out.answer, t.options, behaviour=self.moderate.name)
        votes = [st.choice for st in latest]
        if verdict is not None:
            answer, method = verdict, "moderator"
        elif t.consensus and t.leaning is not None:
            answer, method = t.leaning, "consensus"
        else:
            answer = plurality_or_fail(votes, t.letters, "kamac: neither the moderator nor any specialist's latest "
                                       "answer")[0]
            method = "latest_vote"
        rationale = (str(out.rationale or "") if verdict is not None else "") or (
            f"Answer {answer} ({t.options[answer]}) by the {method.replace('_', ' ')}."
            + ("" if verdict is not None else " The moderator named no valid option.")
        )
        t.transcript.add("decision", "answer", rationale, agent="moderator", role="Moderator", answer=answer)
        confidence = as_confidence(out.confidence) if verdict is not None else "Low"
        return prediction(answer, rationale, confidence, self._record(t, method), t.transcript)

    def _record(self, t: _Team, method: str) -> dict[str, Any]:
        return {
            "route": None,
            "experts": [a.role for a in t.agents],
            "agents": [
                {"id": a.id, "role": a.role, "expertise": a.expertise, "joined_round": t.joined[a.id]}
                for a in t.agents
            ],
            "rounds": len(t.recruited),
            "recruited_per_round": t.recruited,
            "consensus": t.consensus,
            "consensus_answer": t.leaning if t.consensus else None,
            "votes_by_turn": t.votes,
            "r2": [{"agent": st.agent, "first": st.choice} for st in t.said if st.round == 0],
            "final": [
                {"agent": st.agent, "first": st.choice, "confidence": st.confidence}
                for st in t.latest_of(t.agents)
            ],
            "dropped": sum(dropped(v) for v in t.votes.values()),
            "method": method,
        }
