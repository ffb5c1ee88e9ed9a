"""`AdaptiveComplexity`: triage the question, then staff it as it deserves (MDAgents-style).

A complexity check routes each question:

* ``basic`` – one primary-care agent answers, with ``k`` worked examples as demos;
* ``intermediate`` – a panel of ``n_specialists`` gives opinions; for up to ``max_rounds``
  rounds a moderator summarises and checks consensus, and without it the members reply to
  each other; the moderator then decides;
* ``advanced`` – ``n_teams`` teams of ``team_size`` work in order, each writing a report
  that later teams read; a clinician in charge decides from the reports.

LM calls per question, with N = n_specialists, R = max_rounds, T = n_teams, M = team_size:
basic 2; intermediate 3 + c(N + 1) when the moderator finds consensus at review c ≤ R,
else 3 + N + R(N + 1); advanced 3 + T(M + 1).

No invented answers, at every decision point:

* an unreadable complexity (not one of `ROUTES`) routes to ``intermediate``: a route, not
  an answer, so this documented default is allowed; it is counted as a fallback of
  ``ComplexityCheck`` and the record says ``route_fell_back``;
* a specialist's opinion or reply naming no option is dropped (None in ``final``), never
  read as an option nor as its earlier choice;
* the moderator's consensus stops the discussion only when it says ``yes`` *and* more than
  half of the panel (dropped votes keep their seats) validly favours one option; an
  unreadable verdict reads as "no consensus" (counted);
* a decision (moderator, team lead, clinician in charge) naming no option is dropped: the
  plurality of the valid votes it weighed decides instead (a team report with none favours
  nothing); with no valid vote at all the question fails with `NoAnswerError`;
* the basic route's single answer naming no option fails the question.

A recruitment that names no specialty is staffed with generic experts, counted as a fallback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dspy
from pydantic import Field

from teammed.errors import NoAnswerError
from teammed.programs.behaviour import Behaviour
from teammed.programs.parallel import parallel_map
from teammed.programs.peers._shared import (
    PeerSystem,
    Settings,
    Statement,
    answer_letter,
    as_confidence,
    as_demos,
    format_statements,
    note_fallback,
    question_text,
    read_letter,
    select_examples,
    staff,
)
from teammed.programs.peers._votes import Vote, majority_holds, plurality
from teammed.programs.team import Agent, Transcript
from teammed.signatures.peer_mdagents import (
    CareTeamsRecruitment,
    ComplexityCheck,
    IntegratedDecision,
    ModeratorDecision,
    ModeratorReview,
    PanelReply,
    PrimaryCareAnswer,
    SpecialistOpinion,
    TeamRecruitment,
    TeamReport,
)

__all__ = ["AdaptiveComplexity", "ROUTES"]

ROUTES = ("basic", "intermediate", "advanced")
_PRIMARY_CARE = "Primary Care Physician"


class AdaptiveSettings(Settings):
    k: int = Field(default=3, ge=0, le=32)
    seed: int = 0
    n_specialists: int = Field(default=5, ge=1, le=10)
    max_rounds: int = Field(default=2, ge=1, le=10)
    n_teams: int = Field(default=3, ge=1, le=6)
    team_size: int = Field(default=3, ge=1, le=6)


class _Case:
    def __init__(self, question: str, options: dict[str, str]):
        self.question, self.options, self.letters = question, options, list(options)
        self.transcript = Transcript()
        self.record: dict[str, Any] = {}


class AdaptiveComplexity(PeerSystem):
    """Complexity-routed deliberation; ``examples`` are the primary-care agent's demo pool."""

    system_name = "mdagents"

    def __init__(
        self,
        *,
        examples: Sequence[Any] | None = None,
        k: int = 3,
        seed: int = 0,
        n_specialists: int = 5,
        max_rounds: int = 2,
        n_teams: int = 3,
        team_size: int = 3,
    ) -> None:
        super().__init__()
        self.config = AdaptiveSettings.build(
            "AdaptiveComplexity",
            k=k,
            seed=seed,
            n_specialists=n_specialists,
            max_rounds=max_rounds,
            n_teams=n_teams,
            team_size=team_size,
        )
        self.complexity = Behaviour(ComplexityCheck)
        self.primary_care = Behaviour(PrimaryCareAnswer)
        self.primary_care.predict.demos = as_demos(select_examples(list(examples or []), k, seed))
        self.recruit_panel = Behaviour(TeamRecruitment)
        self.opinion = Behaviour(SpecialistOpinion)
        self.review = Behaviour(ModeratorReview)
        self.reply = Behaviour(PanelReply)
        self.decide = Behaviour(ModeratorDecision)
        self.recruit_teams = Behaviour(CareTeamsRecruitment)
        self.team_report = Behaviour(TeamReport)
        self.integrate = Behaviour(IntegratedDecision)

    def forward(self, question: str, options: dict[str, str], context: str | None = None) -> dspy.Prediction:
        s = _Case(question_text(question, context), dict(options))
        triage = self.complexity(question=s.question, options=s.options)
        fell_back = triage.complexity not in ROUTES
        if fell_back:  # a route, never an answer: the documented default, counted
            note_fallback(self.complexity.name)
        route = "intermediate" if fell_back else triage.complexity
        s.record.update(route=route, route_fell_back=fell_back, complexity_reason=str(triage.reason or ""))
        s.transcript.add("triage", "complexity", str(triage.reason or ""), route=route)
        if route == "basic":
            return self._primary_care(s)
        if route == "intermediate":
            return self._panel(s)
        return self._teams(s)

    # ------------------------------------------------------------------ basic
    def _primary_care(self, s: _Case) -> dspy.Prediction:
        out = self.primary_care(question=s.question, options=s.options)
        answer = answer_letter(out.answer, s.options, system="mdagents basic route", behaviour=self.primary_care.name)
        s.transcript.add(
            "basic", "answer", str(out.reasoning or ""), agent="agent_1", role=_PRIMARY_CARE, choice=answer
        )
        s.record.update(
            experts=[_PRIMARY_CARE], agents=[{"id": "agent_1", "role": _PRIMARY_CARE}], method="single_agent"
        )
        return _done(s, answer, str(out.reasoning or ""), as_confidence(out.confidence))

    # ------------------------------------------------------------------ intermediate
    def _panel(self, s: _Case) -> dspy.Prediction:
        n = self.config.n_specialists
        members = self.recruit_panel(question=s.question, options=s.options, n_members=n).members
        if not _names_a_role(members):
            note_fallback(self.recruit_panel.name)
        panel = staff(members, n)
        _log_team(s, "intermediate", panel)
        opinions = self._opinions(s, panel, "")
        summary, consensus, rounds = "", False, 0
        for turn in range(1, self.config.max_rounds + 1):
            rounds = turn
            review = self.review(question=s.question, options=s.options, opinions=format_statements(opinions))
            if review.consensus not in ("yes", "no"):  # unreadable: no consensus (keep discussing), counted
                note_fallback(self.review.name)
            votes = [o.choice for o in opinions]
            # the moderator's "yes" holds only when a valid majority of the whole panel backs one option
            consensus = review.consensus == "yes" and majority_holds(plurality(votes, s.letters)[0], votes)
            summary = str(review.summary or "")
            s.transcript.add(
                "intermediate",
                "review",
                summary,
                agent="moderator",
                role="Moderator",
                turn=turn,
                consensus=consensus,
            )
            if consensus:
                break
            opinions = self._replies(s, panel, opinions, summary, turn)
        out = self.decide(
            question=s.question, options=s.options, summary=summary, opinions=format_statements(opinions)
        )
        answer = _decided(
            read_letter(out.answer, s.options, behaviour=self.decide.name),
            [o.choice for o in opinions],
            s.letters,
            "mdagents intermediate route: neither the moderator nor any panel member",
        )
        s.record.update(
            experts=[a.role for a in panel],
            agents=_plain(panel),
            rounds=rounds,
            consensus=consensus,
            final=[{"agent": o.agent, "first": o.choice} for o in opinions],
            method="moderator",
        )
        return _done(s, answer, str(out.rationale or summary), as_confidence(out.confidence))

    def _opinions(self, s: _Case, agents: list[Agent], earlier: str) -> list[Statement]:
        def one(agent: Agent) -> Statement:
            out = self.opinion(
                question=s.question, options=s.options, role=agent.brief(), earlier_reports=earlier
            )
            return Statement(
                agent.id,
                agent.role,
                0,
                str(out.reasoning or ""),
                read_letter(out.answer, s.options, behaviour=self.opinion.name),
                as_confidence(out.confidence),
            )

        opinions = parallel_map(one, agents)
        for o in opinions:
            s.transcript.add(
                "opinion", "opinion", o.text, agent=o.agent, role=o.role, turn=0, choice=o.choice
            )
        return opinions

    def _replies(
        self, s: _Case, panel: list[Agent], opinions: list[Statement], summary: str, turn: int
    ) -> list[Statement]:
        shown = format_statements(opinions)

        def one(i: int) -> Statement:
            out = self.reply(
                question=s.question,
                options=s.options,
                role=panel[i].brief(),
                moderator_summary=summary,
                opinions=shown,
            )
            choice = read_letter(out.answer, s.options, behaviour=self.reply.name)
            return Statement(panel[i].id, panel[i].role, turn, str(out.message or ""), choice)

        replies = parallel_map(one, list(range(len(panel))))
        for r in replies:
            s.transcript.add(
                "intermediate", "reply", r.text, agent=r.agent, role=r.role, turn=turn, choice=r.choice
            )
        return replies

    # ------------------------------------------------------------------ advanced
    def _teams(self, s: _Case) -> dspy.Prediction:
        c = self.config
        plan = self.recruit_teams(
            question=s.question, options=s.options, n_teams=c.n_teams, team_size=c.team_size
        )
        if not any(_names_a_role(getattr(t, "members", None)) for t in plan.teams or []):
            note_fallback(self.recruit_teams.name)
        teams = _staff_teams(plan.teams, c.n_teams, c.team_size)
        reports: list[str] = []
        summary: list[dict[str, Any]] = []
        for name, members in teams:
            _log_team(s, "advanced", members, team=name)
            earlier = "\n\n".join(reports)
            opinions = self._opinions(s, members, earlier)
            out = self.team_report(
                question=s.question,
                options=s.options,
                team=name,
                opinions=format_statements(opinions),
                earlier_reports=earlier,
            )
            choice = read_letter(out.answer, s.options, behaviour=self.team_report.name)
            if choice is None:  # the lead named no option: the team's valid opinions speak (or nothing)
                choice = plurality([o.choice for o in opinions], s.letters)[0]
            favours = f"favours {choice}" if choice is not None else "favours no valid option"
            reports.append(f"{name} ({favours}): {out.report or ''}")
            summary.append({"name": name, "roles": [a.role for a in members], "answer": choice})
            s.transcript.add(
                "advanced",
                "team_report",
                str(out.report or ""),
                agent=members[0].id,
                role=members[0].role,
                team=name,
                choice=choice,
            )
        out = self.integrate(question=s.question, options=s.options, reports="\n\n".join(reports))
        answer = _decided(
            read_letter(out.answer, s.options, behaviour=self.integrate.name),
            [t["answer"] for t in summary],
            s.letters,
            "mdagents advanced route: neither the clinician in charge nor any team",
        )
        agents = [a for _, members in teams for a in members]
        s.record.update(
            experts=[a.role for a in agents],
            agents=[{**p, "team": name} for name, members in teams for p in _plain(members)],
            teams=summary,
            method="final_decision",
        )
        return _done(s, answer, str(out.rationale or ""), as_confidence(out.confidence))


def _staff_teams(raw: Any, n_teams: int, size: int) -> list[tuple[str, list[Agent]]]:
    """Exactly ``n_teams`` teams of ``size``, every role used once across all teams."""
    raw = list(raw or [])
    teams: list[tuple[str, list[Agent]]] = []
    everyone: list[Agent] = []
    for i in range(n_teams):
        plan = raw[i] if i < len(raw) else None
        name = " ".join(str(getattr(plan, "name", "") or "").split()) or f"Team {i + 1}"
        members = staff(
            getattr(plan, "members", None) or [], size, present=everyone, first_id=len(everyone) + 1
        )
        everyone += members
        teams.append((name, members))
    return teams


def _decided(pick: str | None, votes: Sequence[Vote], letters: Sequence[str], who: str) -> str:
    """The decision maker's ``pick``; when it named no option, the plurality of the valid ``votes``
    it weighed; with none of either, `NoAnswerError` (``who`` names them in the message)."""
    if pick is not None:
        return pick
    voted = plurality(votes, letters)[0]
    if voted is None:
        raise NoAnswerError(f"{who} named an option ({len(votes)} votes dropped), so there is no answer; "
                            "check that the model returns the requested JSON")
    return voted


def _names_a_role(specialists: Any) -> bool:
    """Whether an LM's recruitment names at least one specialty (else generic experts are staffed)."""
    return any(str(getattr(p, "role", "") or "").strip() for p in specialists or [])


def _plain(agents: list[Agent]) -> list[dict[str, str]]:
    return [{"id": a.id, "role": a.role, "expertise": a.expertise} for a in agents]


def _log_team(s: _Case, phase: str, agents: list[Agent], **data: Any) -> None:
    for a in agents:
        s.transcript.add(phase, "recruited", a.brief(), agent=a.id, role=a.role, **data)


def _done(s: _Case, answer: str, rationale: str, confidence: str) -> dspy.Prediction:
    s.transcript.add("decision", "answer", rationale, answer=answer)
    rationale = rationale or f"Answer {answer} ({s.options[answer]})."
    return dspy.Prediction(
        answer=answer,
        rationale=rationale,
        confidence=confidence,
        record=s.record,
        transcript=s.transcript.events,
    )
