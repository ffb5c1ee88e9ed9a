"""`AdaptiveComplexity`: triage the question, then staff it as it deserves (MDAgents-style).

A complexity check routes each question:

* ``basic`` – one primary-care agent answers, with ``k`` worked examples as demos;
* ``intermediate`` – a panel of ``n_specialists`` discusses, in one of two variants:

  - ``paper`` (the default: MDAgents' own code, ``process_intermediate_query``) – each member
    answers after the ``k`` worked examples; then for up to ``max_rounds`` rounds of up to
    ``n_turns`` turns, in every turn each member says whether it wants to talk and, if so, to
    which members (ids of the panel), with one message for each; members of one turn speak
    at once, each having read the messages of the round it sent or received. A turn in which
    no member wants to talk ends the whole discussion at once, as in MDAgents' code (that
    round's answers are not asked). After each full round every member gives its answer for
    the round; a moderator makes the final decision by majority vote of the latest answers;
  - ``light`` (the lighter design this system had first) – members give opinions without
    worked examples; for up to ``max_rounds`` rounds a moderator summarises and checks
    consensus, and without it the members reply to each other; the moderator then decides;

* ``advanced`` – ``n_teams`` teams of ``team_size`` work in order, each writing a report
  that later teams read; a clinician in charge decides from the reports (both variants).

Defaults, by variant (any of them can be set explicitly): ``paper`` k=5, max_rounds=5,
n_turns=5; ``light`` k=3, max_rounds=2 (no turns). Both: n_specialists=5, n_teams=3,
team_size=3. The record says which ``variant`` ran.

Worked examples are shown on every data set, as in MedAgentsBench's copy of MDAgents' code; given
a ``dataset`` name, only on `WORKED_EXAMPLE_DATASETS`, as in MDAgents' own code.

Where ``paper`` departs from MDAgents' code (mitmedialab/MDAgents, ``utils.py``) and MedAgentsBench's copy
of it, and why, is the table of docs/fidelity.md (its ``mdagents`` rows, checked by tests/test_fidelity.py).

LM calls per question, with N = n_specialists, R = max_rounds, T = n_teams, M = team_size:
basic 2; advanced 3 + T(M + 1); intermediate, ``paper``: 3 + N + N·u + N·r, where u is the
number of turns run (silent one included) and r the number of rounds completed, so from
3 + 2N (the first turn silent) to 3 + N + R·N·(n_turns + 1) (nobody ever silent);
intermediate, ``light``: 3 + c(N + 1) when the moderator finds consensus at review c ≤ R,
else 3 + N + R(N + 1).

No invented answers, at every decision point:

* an unreadable complexity (not one of `ROUTES`) routes to ``intermediate``: a route, not
  an answer, so this documented default is allowed; it is counted as a fallback of
  ``ComplexityCheck`` and the record says ``route_fell_back``;
* a specialist's opinion, reply or round answer naming no option is dropped (None in
  ``final``), never read as an option nor as its earlier choice;
* ``paper``: an unreadable wish to talk reads as "no" (counted, a fallback of ``PanelTurn``);
  a recipient that is not another member of the panel (an unknown id, the speaker itself,
  a repeat) is dropped and counted the same way; no message carries a vote;
* ``light``: the moderator's consensus stops the discussion only when it says ``yes`` *and*
  more than half of the panel (dropped votes keep their seats) validly favours one option;
  an unreadable verdict reads as "no consensus" (counted);
* a decision (moderator, team lead, clinician in charge) naming no option is dropped: the
  plurality of the valid votes it weighed decides instead (a team report with none favours
  nothing); with no valid vote at all the question fails with `NoAnswerError`;
* the basic route's single answer naming no option fails the question.

A recruitment that names no specialty is staffed with generic experts, counted as a fallback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import dspy
from pydantic import Field, model_validator

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
    log_statements,
    names_a_role,
    note_fallback,
    prediction,
    question_text,
    read_letter,
    recruited,
    said,
    select_examples,
    staff,
)
from teammed.programs.peers._votes import Vote, majority_holds, plurality, plurality_or_fail
from teammed.programs.team import Agent, Transcript
from teammed.signatures.peer_mdagents import (
    CareTeamsRecruitment,
    ComplexityCheck,
    IntegratedDecision,
    MajorityDecision,
    ModeratorDecision,
    ModeratorReview,
    PanelOpinion,
    PanelReply,
    PanelRoundAnswer,
    PanelTurn,
    PrimaryCareAnswer,
    SpecialistOpinion,
    TeamRecruitment,
    TeamReport,
)

__all__ = ["AdaptiveComplexity", "ROUTES", "VARIANTS", "DEFAULT_VARIANT", "VARIANT_SUMMARY",
           "WORKED_EXAMPLE_DATASETS"]

ROUTES = ("basic", "intermediate", "advanced")
_PANEL = "mdagents intermediate route: neither the moderator nor any panel member"
_PRIMARY_CARE = "Primary Care Physician"
# The data sets MDAgents' own code shows worked examples on (``if args.dataset == 'medqa'``, either option count)
WORKED_EXAMPLE_DATASETS = ("medqa", "medqa_5options")


# Each variant's defaults for the settings it changes; see the module docstring.
VARIANTS: dict[str, dict[str, int | None]] = {
    "paper": {"k": 5, "max_rounds": 5, "n_turns": 5},  # MDAgents' code: 5 examples, 5 rounds x 5 turns
    "light": {"k": 3, "max_rounds": 2, "n_turns": None},  # no turns: moderator reviews and replies
}
Variant = Literal["paper", "light"]
DEFAULT_VARIANT: Variant = "paper"
# One line per variant, for tables that say which one ran (`teammed reproduce`'s Table 1).
VARIANT_SUMMARY = {
    "paper": f"the defaults of MDAgents' own code: {VARIANTS['paper']['k']} worked examples; up to "
             f"{VARIANTS['paper']['max_rounds']} rounds x {VARIANTS['paper']['n_turns']} turns in which each expert "
             "chooses whom to talk to; a moderator decides by majority vote",
    "light": f"the lighter design: {VARIANTS['light']['k']} worked examples (basic route only); up to "
             f"{VARIANTS['light']['max_rounds']} rounds of moderator review and replies to everyone; the moderator "
             "decides",
}


class AdaptiveSettings(Settings):
    variant: Variant = DEFAULT_VARIANT
    k: int = Field(default=5, ge=0, le=32)
    seed: int = 0
    n_specialists: int = Field(default=5, ge=1, le=10)
    max_rounds: int = Field(default=5, ge=1, le=10)
    n_turns: int | None = Field(default=5, ge=1, le=10)
    n_teams: int = Field(default=3, ge=1, le=6)
    team_size: int = Field(default=3, ge=1, le=6)
    dataset: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _variant_defaults(cls, values: Any) -> Any:
        """A setting left out (or None) takes its variant's default."""
        if not isinstance(values, dict):
            return values
        defaults = VARIANTS.get(values.get("variant") or DEFAULT_VARIANT)
        if defaults is None:  # an unknown variant: the field's own validation names it
            return values
        return {**values, **{key: value for key, value in defaults.items() if values.get(key) is None}}

    @model_validator(mode="after")
    def _turns_are_the_papers(self) -> AdaptiveSettings:
        if self.variant == "light" and self.n_turns is not None:
            raise ValueError("n_turns sets the turns of the paper variant's rounds; the light variant has no turns: "
                             "drop n_turns or use variant='paper'")
        return self


@dataclass(frozen=True)
class _Message:
    """One message of the paper variant's discussion: who told whom what, in which round and turn."""

    round: int
    turn: int
    sender: Agent
    to: Agent
    text: str


class _Case:
    def __init__(self, question: str, options: dict[str, str]):
        self.question, self.options, self.letters = question, options, list(options)
        self.transcript = Transcript()
        self.record: dict[str, Any] = {}


class AdaptiveComplexity(PeerSystem):
    """Complexity-routed deliberation; ``examples`` are the worked examples' pool; a setting left as None
    takes its ``variant``'s default (see the module docstring)."""

    system_name = "mdagents"

    def __init__(
        self,
        *,
        examples: Sequence[Any] | None = None,
        variant: str = DEFAULT_VARIANT,
        k: int | None = None,
        seed: int = 0,
        n_specialists: int = 5,
        max_rounds: int | None = None,
        n_turns: int | None = None,
        n_teams: int = 3,
        team_size: int = 3,
        dataset: str | None = None,
    ) -> None:
        super().__init__()
        self.config = AdaptiveSettings.build(
            "AdaptiveComplexity",
            variant=variant,
            k=k,
            seed=seed,
            n_specialists=n_specialists,
            max_rounds=max_rounds,
            n_turns=n_turns,
            n_teams=n_teams,
            team_size=team_size,
            dataset=dataset,
        )
        d = self.config.dataset
        shown = d is None or d.strip().lower().replace("-", "_") in WORKED_EXAMPLE_DATASETS
        pool = list(examples or []) if shown else []
        demos = as_demos(select_examples(pool, self.config.k, seed))
        self.complexity = Behaviour(ComplexityCheck)
        self.primary_care = Behaviour(PrimaryCareAnswer)
        self.primary_care.predict.demos = demos
        self.recruit_panel = Behaviour(TeamRecruitment)
        self.opinion = Behaviour(SpecialistOpinion)
        if self.config.variant == "paper":  # only the behaviours a variant calls are predictors
            self.panel_opinion = Behaviour(PanelOpinion)
            self.panel_opinion.predict.demos = [d.copy() for d in demos]
            self.turn = Behaviour(PanelTurn)
            self.round_answer = Behaviour(PanelRoundAnswer)
            self.majority = Behaviour(MajorityDecision)
        else:
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
        s.record.update(route=route, route_fell_back=fell_back, complexity_reason=str(triage.reason or ""),
                        variant=self.config.variant)
        s.transcript.add("triage", "complexity", str(triage.reason or ""), route=route)
        if route == "basic":
            return self._primary_care(s)
        if route == "intermediate":
            return self._discussion(s) if self.config.variant == "paper" else self._panel(s)
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
    def _recruit_panel(self, s: _Case) -> list[Agent]:
        n = self.config.n_specialists
        members = self.recruit_panel(question=s.question, options=s.options, n_members=n).members
        panel = recruited(members, n, behaviour=self.recruit_panel.name)
        _log_team(s, "intermediate", panel)
        return panel

    def _discussion(self, s: _Case) -> dspy.Prediction:
        """The ``paper`` variant: rounds of turns in which members choose whom to talk to."""
        c = self.config
        assert c.n_turns is not None  # the paper variant always has turns (AdaptiveSettings)
        panel = self._recruit_panel(s)
        latest = self._opinions(s, panel, None)
        votes = {"opinions": [o.choice for o in latest]}
        rounds = 0
        for r in range(1, c.max_rounds + 1):
            said: list[_Message] = []
            silent = False
            for t in range(1, c.n_turns + 1):
                if not self._turn(s, panel, latest, said, r, t):
                    silent = True
                    break
            if silent:  # as in MDAgents' code: a silent turn ends the discussion, the round's answers unasked
                s.transcript.add("intermediate", "silence", "No member wanted to talk: the discussion ends.",
                                 turn=t, round=r)
                break
            latest = self._round_answers(s, panel, latest, said, r)
            votes[f"round {r}"] = [o.choice for o in latest]
            rounds = r
        out = self.majority(question=s.question, options=s.options, answers=format_statements(latest))
        return _decide(s, out, self.majority, [o.choice for o in latest], _PANEL, experts=[a.role for a in panel],
                       agents=_plain(panel), rounds=rounds, votes_by_turn=votes, method="moderator_majority",
                       final=[{"agent": o.agent, "first": o.choice} for o in latest])

    def _turn(
        self, s: _Case, panel: list[Agent], latest: list[Statement], said: list[_Message], r: int, t: int
    ) -> int:
        """One turn: every member at once says whether it talks, and to whom; returns how many did.

        The messages delivered are added to ``said`` after the turn."""
        shown = format_statements(latest)

        def one(agent: Agent) -> Any:
            return self.turn(
                question=s.question,
                options=s.options,
                role=agent.brief(),
                teammates="\n".join(f"{a.id}: {a.role}" for a in panel if a is not agent),
                answers=shown,
                discussion=_thread(said, agent),
            )

        outs = parallel_map(one, panel)
        talked = 0
        for agent, out in zip(panel, outs, strict=True):
            if out.speak not in ("yes", "no"):  # unreadable: read as "no", counted
                note_fallback(self.turn.name)
            if out.speak != "yes":
                s.transcript.add("intermediate", "silent", "", agent=agent.id, role=agent.role, turn=t, round=r)
                continue
            talked += 1
            for to, text in _recipients(out.messages, agent, panel, behaviour=self.turn.name):
                said.append(_Message(r, t, agent, to, text))
                s.transcript.add("intermediate", "message", text, agent=agent.id, role=agent.role, turn=t, round=r,
                                 to=to.id)
        return talked

    def _round_answers(
        self, s: _Case, panel: list[Agent], latest: list[Statement], messages: list[_Message], r: int
    ) -> list[Statement]:
        shown = format_statements(latest)

        def one(agent: Agent) -> Statement:
            out = self.round_answer(
                question=s.question, options=s.options, role=agent.brief(), answers=shown,
                discussion=_thread(messages, agent),
            )
            return said(agent, r, out, s.options, self.round_answer.name)

        answers = parallel_map(one, panel)
        log_statements(s.transcript, "intermediate", "round_answer", answers)
        return answers

    def _panel(self, s: _Case) -> dspy.Prediction:
        """The ``light`` variant: moderator reviews, replies while there is no consensus."""
        panel = self._recruit_panel(s)
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
        return _decide(s, out, self.decide, [o.choice for o in opinions], _PANEL, rationale=summary,
                       experts=[a.role for a in panel], agents=_plain(panel), rounds=rounds, consensus=consensus,
                       final=[{"agent": o.agent, "first": o.choice} for o in opinions], method="moderator")

    def _opinions(self, s: _Case, agents: list[Agent], earlier: str | None) -> list[Statement]:
        """Each agent's opinion: the paper variant's panel after the worked examples (``earlier`` None), else
        `SpecialistOpinion` having read ``earlier`` teams' reports."""
        def one(agent: Agent) -> Statement:
            if earlier is None:
                out = self.panel_opinion(question=s.question, options=s.options, role=agent.brief())
                return said(agent, 0, out, s.options, self.panel_opinion.name)
            out = self.opinion(question=s.question, options=s.options, role=agent.brief(), earlier_reports=earlier)
            return said(agent, 0, out, s.options, self.opinion.name)

        opinions = parallel_map(one, agents)
        log_statements(s.transcript, "opinion", "opinion", opinions)
        return opinions

    def _replies(
        self, s: _Case, panel: list[Agent], opinions: list[Statement], summary: str, turn: int
    ) -> list[Statement]:
        shown = format_statements(opinions)

        def one(agent: Agent) -> Statement:
            out = self.reply(
                question=s.question,
                options=s.options,
                role=agent.brief(),
                moderator_summary=summary,
                opinions=shown,
            )
            return said(agent, turn, out, s.options, self.reply.name, text="message", confidence="Low")

        replies = parallel_map(one, panel)
        log_statements(s.transcript, "intermediate", "reply", replies)
        return replies

    # ------------------------------------------------------------------ advanced
    def _teams(self, s: _Case) -> dspy.Prediction:
        c = self.config
        plan = self.recruit_teams(
            question=s.question, options=s.options, n_teams=c.n_teams, team_size=c.team_size
        )
        if not any(names_a_role(getattr(t, "members", None)) for t in plan.teams or []):
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
        return _decide(s, out, self.integrate, [t["answer"] for t in summary],
                       "mdagents advanced route: neither the clinician in charge nor any team",
                       experts=[a.role for _, members in teams for a in members],
                       agents=[{**p, "team": name} for name, members in teams for p in _plain(members)],
                       teams=summary, method="final_decision")


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


def _member_key(text: str) -> str:
    return "_".join(text.replace("-", " ").split()).casefold()


def _recipients(messages: Any, sender: Agent, panel: list[Agent], *, behaviour: str) -> list[tuple[Agent, str]]:
    """The messages whose recipient is another member of ``panel``, named by id (``agent_2``,
    ``Agent 2`` or ``2``) or by role; any other recipient (unknown, the sender itself, a repeat)
    is dropped and counted as a fallback of ``behaviour``."""
    by_key = {_member_key(a.id): a for a in panel}
    by_key.update({_member_key(a.role): a for a in panel if _member_key(a.role) not in by_key})
    kept: list[tuple[Agent, str]] = []
    for message in messages or []:
        raw = message.get("to") if isinstance(message, dict) else getattr(message, "to", None)
        text = message.get("text") if isinstance(message, dict) else getattr(message, "text", None)
        key = _member_key(str(raw or ""))
        to = by_key.get(f"agent_{key}" if key.isdigit() else key)
        if to is None or to is sender or any(to is seen for seen, _ in kept):
            note_fallback(behaviour)
            continue
        kept.append((to, str(text or "")))
    return kept


def _thread(said: Sequence[_Message], agent: Agent) -> str:
    """The messages of the round ``agent`` sent or received, oldest first."""

    def who(a: Agent) -> str:
        return "you" if a is agent else f"{a.id} ({a.role})"

    return "\n".join(
        f"[turn {m.turn}] {who(m.sender)} -> {who(m.to)}: {m.text}" for m in said if agent in (m.sender, m.to)
    )


def _plain(agents: list[Agent]) -> list[dict[str, str]]:
    return [{"id": a.id, "role": a.role, "expertise": a.expertise} for a in agents]


def _log_team(s: _Case, phase: str, agents: list[Agent], **data: Any) -> None:
    for a in agents:
        s.transcript.add(phase, "recruited", a.brief(), agent=a.id, role=a.role, **data)


def _decide(s: _Case, out: Any, decider: Behaviour, votes: Sequence[Vote], who: str, *, rationale: str = "",
            **record: Any) -> dspy.Prediction:
    """A route's decision: the decider's pick; when it named no option, the plurality of the valid ``votes`` it
    weighed; with none of either, `NoAnswerError` (``who`` names them). Its record is filled with ``record``."""
    answer = read_letter(out.answer, s.options, behaviour=decider.name)
    if answer is None:
        answer = plurality_or_fail(votes, s.letters, who)[0]
    s.record.update(record)
    return _done(s, answer, str(out.rationale or rationale), as_confidence(out.confidence))


def _done(s: _Case, answer: str, rationale: str, confidence: str) -> dspy.Prediction:
    s.transcript.add("decision", "answer", rationale, answer=answer)
    rationale = rationale or f"Answer {answer} ({s.options[answer]})."
    return prediction(answer, rationale, confidence, s.record, s.transcript)
