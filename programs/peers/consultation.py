"""`ConsultationTeam`: a manager-led specialist consultation that debates to consensus.

Modelled on the SOAP-notes consultation MAS (Lee, Wang & Yang). For each team the manager
names ``n_specialists`` specialties, then the expertise each brings (two calls). Round 1:
the specialists analyse the case alone, in parallel. Rounds 2..``max_rounds``: each reads
the others' reasoning from the previous round and answers again. After every round the
team has consensus when the top choice's share reaches ``consensus_threshold``. A team
that fails is replaced (at most ``max_reassignments`` times); the new team starts from the
manager's summary of the old team's arguments. If no team agrees, the manager aggregates.

Rounds count as in the paper: round 1 is the independent analysis, so ``max_rounds=3``
allows two debate rounds.

No invented answers: a specialist's choice that names no option is dropped (None in
``votes_by_turn``, a fallback of its behaviour), never read as an option nor as the
specialist's previous choice. Agreement is each option's share of the *whole team*
(dropped choices keep their seats), so the default 0.8 needs 4 of 5 valid votes for one
option and a lone valid vote is never a consensus. A devil's advocate is named only when
the previous round has a valid majority to argue against. In the fallback a manager's pick
that names no option is dropped too: the plurality of the teams' valid last-round votes
decides (method ``final_vote``; with ``anchor_first_votes`` the anchored leaders do), and
with no valid vote anywhere the question fails with `NoAnswerError`. A team whose
specialties cannot be read is staffed with generic experts, counted as a fallback.

Context management: before each debate round the team's history is estimated at chars/4
tokens; while that passes ``summarize_at × context_window`` its longest not yet compressed
message is compressed by an LM call.

Sampling: every call runs at the run's temperature; ``temperature`` and ``summary_temperature`` override it
for the reasoning calls and the compression (the paper's, `PAPER_TEMPERATURE` and `PAPER_SUMMARY_TEMPERATURE`,
and why they are not the default: docs/fidelity.md).

Anti-groupthink (``dissent``):

* ``"devil_advocate"`` – in every debate round one specialist who held the previous round's
  majority choice (rotating by round) first builds the strongest case against it, then
  gives the choice it actually holds; the case is shown to the team, the choice is its vote.
* ``"anchor_first_votes"`` – agreement is scored as ½·share of the team's independent
  round-1 votes + ½·share of the current votes, so a team that drifted to an answer with
  little independent support does not reach consensus. In the fallback the answer is the
  option with the highest such score over all teams (round-1 votes against last-round
  votes); the manager's pick breaks a tie among the leaders, else the earliest letter.

LM calls per question, N = n_specialists, d_t debate rounds of team t, A reassignments,
S compressions: ``Σ_t (2 + N·(1 + d_t)) + A + S``, plus 1 when the manager aggregates.
Consensus in round 1 costs ``2 + N`` (7 by default); the most is
``(1 + A)(2 + N·max_rounds) + A + 1 + S`` (54 + S by default).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import dspy
from pydantic import Field

from teammed.programs.behaviour import Behaviour
from teammed.programs.parallel import parallel_map
from teammed.programs.peers._history import HistoryKeeper, Message, history_text
from teammed.programs.peers._shared import (
    PeerSystem,
    Settings,
    _role_key,
    as_confidence,
    note_fallback,
    prediction,
    question_text,
    read_letter,
    staff,
)
from teammed.programs.peers._votes import (
    TOLERANCE,
    anchored_scores,
    confidence_from_share,
    dropped,
    leaders,
    plurality,
    plurality_or_fail,
    shares,
)
from teammed.programs.team import Agent, Transcript
from teammed.signatures.peer_consultation import (
    ConsultExpertise,
    ConsultSpecialties,
    DevilsAdvocate,
    ManagerAggregate,
    SpecialistAnalysis,
    SpecialistDebate,
    TeamHandoff,
)
from teammed.signatures.recruitment import Specialist

__all__ = ["ConsultationTeam", "Dissent", "PAPER_TEMPERATURE", "PAPER_SUMMARY_TEMPERATURE"]

Dissent = Literal["none", "devil_advocate", "anchor_first_votes"]
# The paper's sampling (Lee, Wang & Yang, section 3.4): reasoning calls, and the context summaries.
PAPER_TEMPERATURE = 0.5
PAPER_SUMMARY_TEMPERATURE = 0.1


class ConsultationSettings(Settings):
    n_specialists: int = Field(default=5, ge=1, le=10)
    max_rounds: int = Field(default=3, ge=1, le=10)
    consensus_threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    max_reassignments: int = Field(default=2, ge=0, le=5)
    context_window: int = Field(default=8192, ge=1)
    summarize_at: float = Field(default=0.7, gt=0.0, le=1.0)
    dissent: Dissent = "none"
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)  # None: the run's temperature
    summary_temperature: float | None = Field(default=None, ge=0.0, le=2.0)


@dataclasses.dataclass
class _Team:
    number: int
    agents: list[Agent]
    messages: list[Message] = dataclasses.field(default_factory=list)
    votes: list[dict[str, str | None]] = dataclasses.field(default_factory=list)  # {agent: choice} per round
    last: dict[str, Message] = dataclasses.field(default_factory=dict)
    share: float = 0.0


class _Case:
    def __init__(self, question: str, options: dict[str, str]):
        self.question, self.options, self.letters = question, options, list(options)
        self.teams: list[_Team] = []
        self.handoffs: list[str] = []
        self.votes: dict[str, list[str | None]] = {}
        self.token_checks: list[dict[str, int]] = []
        self.summaries: list[dict[str, int]] = []
        self.advocates: list[dict[str, Any]] = []
        self.transcript = Transcript()

    @property
    def agents(self) -> list[Agent]:
        return [a for t in self.teams for a in t.agents]


class ConsultationTeam(PeerSystem):
    """Manager, specialist team, debate to a consensus threshold, reassignment, fallback."""

    system_name = "consultation"

    def __init__(
        self,
        *,
        n_specialists: int = 5,
        max_rounds: int = 3,
        consensus_threshold: float = 0.8,
        max_reassignments: int = 2,
        context_window: int = 8192,
        summarize_at: float = 0.7,
        dissent: Dissent = "none",
        temperature: float | None = None,
        summary_temperature: float | None = None,
    ) -> None:
        super().__init__()
        self.config = ConsultationSettings.build(
            "ConsultationTeam",
            n_specialists=n_specialists,
            max_rounds=max_rounds,
            consensus_threshold=consensus_threshold,
            max_reassignments=max_reassignments,
            context_window=context_window,
            summarize_at=summarize_at,
            dissent=dissent,
            temperature=temperature,
            summary_temperature=summary_temperature,
        )
        t = self.config.temperature
        self.specialties = Behaviour(ConsultSpecialties, temperature=t)
        self.expertise = Behaviour(ConsultExpertise, temperature=t)
        self.analyse = Behaviour(SpecialistAnalysis, temperature=t)
        self.debate = Behaviour(SpecialistDebate, temperature=t)
        self.advocate = Behaviour(DevilsAdvocate, temperature=t) if dissent == "devil_advocate" else None
        self.memory = HistoryKeeper(context_window=context_window, summarize_at=summarize_at,
                                    temperature=self.config.summary_temperature)
        self.handoff = Behaviour(TeamHandoff, temperature=t)
        self.aggregate = Behaviour(ManagerAggregate, temperature=t)

    def forward(self, question: str, options: dict[str, str], context: str | None = None) -> dspy.Prediction:
        s = _Case(question_text(question, context), dict(options))
        for number in range(1, self.config.max_reassignments + 2):
            if s.teams:
                self._hand_off(s, s.teams[-1])
            team = self._assemble(s, number)
            winner = self._deliberate(s, team)
            if winner is not None:
                return self._agreed(s, team, winner)
        return self._fallback(s)

    # ------------------------------------------------------------------ team
    def _assemble(self, s: _Case, number: int) -> _Team:
        n = self.config.n_specialists
        previous = [a.role for a in s.teams[-1].agents] if s.teams else []
        named = (
            self.specialties(
                question=s.question, options=s.options, n_specialists=n, previous_specialties=previous
            ).specialties
            or []
        )
        if not any(str(r or "").strip() for r in named):
            note_fallback(self.specialties.name)  # no specialty readable: generic experts take the seats
        seats = staff([Specialist(role=str(r), expertise="") for r in named], n, first_id=len(s.agents) + 1)
        focus = self.expertise(question=s.question, specialties=[a.role for a in seats]).expertise or []
        found = {_role_key(str(getattr(f, "role", ""))): str(getattr(f, "expertise", "") or "") for f in focus}
        agents = [
            dataclasses.replace(a, expertise=found.get(a.role.casefold()) or a.expertise) for a in seats
        ]
        team = _Team(number, agents)
        if s.handoffs:
            team.messages.append(Message(0, "manager (previous team's arguments)", s.handoffs[-1]))
        s.teams.append(team)
        for a in agents:
            s.votes[a.id] = []
            s.transcript.add("team", "recruited", a.brief(), agent=a.id, role=a.role, team=number)
        return team

    def _deliberate(self, s: _Case, team: _Team) -> str | None:
        handoff = s.handoffs[-1] if s.handoffs else ""

        def analyse(agent: Agent) -> tuple[str, str | None]:
            out = self.analyse(
                question=s.question, options=s.options, role=agent.brief(), previous_team=handoff
            )
            return str(out.reasoning or ""), read_letter(out.choice, s.options, behaviour=self.analyse.name)

        self._hear(s, team, 1, parallel_map(analyse, team.agents))
        winner = self._consensus(s, team, 1)
        for turn in range(2, self.config.max_rounds + 1):
            if winner is not None:
                break
            self._fit_history(s, team, turn)
            self._hear(s, team, turn, self._debate_round(s, team, turn))
            winner = self._consensus(s, team, turn)
        return winner

    def _debate_round(self, s: _Case, team: _Team, turn: int) -> list[tuple[str, str | None]]:
        majority = plurality(list(team.votes[-1].values()), s.letters)[0]
        advocate = None  # none without a valid majority to argue against
        if self.advocate is not None and majority is not None:  # a holder of the majority, rotating by round
            holders = [a for a in team.agents if team.votes[-1][a.id] == majority] or team.agents
            advocate = holders[(turn - 2) % len(holders)]
        earlier = history_text([m for m in team.messages if m.round < turn - 1])

        def speak(agent: Agent) -> tuple[str, str | None]:
            own = team.last[agent.id]
            peers = history_text([team.last[o.id] for o in team.agents if o.id != agent.id])
            common = dict(
                question=s.question,
                options=s.options,
                role=agent.brief(),
                own_previous=own.line(),
                peers=peers,
                history=earlier,
            )
            if advocate is not None and agent.id == advocate.id:
                assert self.advocate is not None and majority is not None
                out = self.advocate(majority=f"{majority}: {s.options[majority]}", **common)
                choice = read_letter(out.choice, s.options, behaviour=self.advocate.name)
                return str(out.counter_case or ""), choice
            out = self.debate(**common)
            return str(out.reasoning or ""), read_letter(out.choice, s.options, behaviour=self.debate.name)

        said = parallel_map(speak, team.agents)
        if advocate is not None:
            s.advocates.append(
                {"team": team.number, "round": turn, "agent": advocate.id, "against": majority}
            )
        return said

    def _hear(self, s: _Case, team: _Team, turn: int, said: list[tuple[str, str | None]]) -> None:
        advocate = next(
            (d["agent"] for d in s.advocates if d["team"] == team.number and d["round"] == turn), None
        )
        votes: dict[str, str | None] = {}
        for agent, (text, choice) in zip(team.agents, said, strict=True):
            label = f"{agent.role}, devil's advocate" if agent.id == advocate else agent.role
            author = f"{agent.id} ({label})"
            message = Message(turn, author, text, choice)
            team.messages.append(message)
            team.last[agent.id] = message
            votes[agent.id] = choice
            s.votes[agent.id].append(choice)
            kind = "analysis" if turn == 1 else ("devil_advocate" if agent.id == advocate else "debate")
            s.transcript.add(
                "debate",
                kind,
                text,
                agent=agent.id,
                role=agent.role,
                turn=turn,
                choice=choice,
                team=team.number,
            )
        team.votes.append(votes)

    def _consensus(self, s: _Case, team: _Team, turn: int) -> str | None:
        """The option whose share of the whole team (valid votes only; see the module docstring)
        reaches the threshold, else None."""
        current = list(team.votes[-1].values())
        if self.config.dissent == "anchor_first_votes":
            scores = anchored_scores(list(team.votes[0].values()), current, s.letters)
        else:
            scores = shares(current, s.letters)
        top = leaders(scores, s.letters)
        best = top[0] if top else None
        team.share = scores[best] if best is not None else 0.0
        reached = best is not None and team.share >= self.config.consensus_threshold - TOLERANCE
        lost = f" ({dropped(current)} of {len(current)} dropped)" if dropped(current) else ""
        s.transcript.add(
            "consensus",
            "consensus_check",
            (f"{best} at {team.share:.0%}" if best is not None else "no valid vote") + lost,
            turn=turn,
            team=team.number,
            reached=reached,
            answer=best,
        )
        return best if reached else None

    # ------------------------------------------------------------------ context
    def _fit_history(self, s: _Case, team: _Team, turn: int) -> None:
        tokens, steps = self.memory(question=s.question, messages=team.messages)
        s.token_checks.append({"team": team.number, "round": turn, "tokens": tokens})
        for step in steps:
            summary = step.pop("summary")
            s.summaries.append({"team": team.number, "round": turn, **step})
            s.transcript.add("context", "summarised", summary, turn=turn, team=team.number, **step)

    def _hand_off(self, s: _Case, team: _Team) -> None:
        out = self.handoff(question=s.question, options=s.options, debate=history_text(team.messages))
        s.handoffs.append(str(out.summary or ""))
        s.transcript.add(
            "reassign", "handoff", s.handoffs[-1], agent="manager", role="Manager", team=team.number
        )

    # ------------------------------------------------------------------ decision
    def _agreed(self, s: _Case, team: _Team, winner: str) -> dspy.Prediction:
        backers = [team.last[a.id] for a in team.agents if team.votes[-1][a.id] == winner]
        head = (
            f"Answer {winner} ({s.options[winner]}) by consensus of team {team.number} in round "
            f"{len(team.votes)} ({team.share:.0%} agreement)."
        )
        rationale = "\n".join([head] + [f"- {m.author}: {m.text}" for m in backers if m.text])
        return self._finish(s, winner, rationale, confidence_from_share(team.share), "consensus", None)

    def _fallback(self, s: _Case) -> dspy.Prediction:
        last = s.teams[-1]
        debates = [f"Team {t.number}: {h}" for t, h in zip(s.teams, s.handoffs, strict=False)]
        debates.append(f"Team {last.number}:\n{history_text(last.messages)}")
        votes = "\n".join(
            f"Team {t.number}, round {i + 1}: " + _tally(list(v.values()), s.letters)
            for t in s.teams
            for i, v in enumerate(t.votes)
        )
        out = self.aggregate(
            question=s.question, options=s.options, debates="\n\n".join(debates), votes=votes
        )
        first = [c for t in s.teams for c in t.votes[0].values()]
        final = [c for t in s.teams for c in t.votes[-1].values()]
        pick = read_letter(out.answer, s.options, behaviour=self.aggregate.name)
        manager = {"answer": pick, "rationale": str(out.rationale or "")}
        answer, method, confidence = _manager_or_votes(pick, as_confidence(out.confidence), first, final, s.letters,
                                                       anchored=self.config.dissent == "anchor_first_votes")
        rationale = _fallback_rationale(answer, pick, method, manager["rationale"], s.options)
        return self._finish(s, answer, rationale, confidence, method, manager)

    def _finish(
        self,
        s: _Case,
        answer: str,
        rationale: str,
        confidence: str,
        method: str,
        manager: dict[str, str | None] | None,
    ) -> dspy.Prediction:
        s.transcript.add("decision", method, rationale, answer=answer)
        first, last = s.teams[0], s.teams[-1]
        record = {
            "route": None,
            "experts": [a.role for a in s.agents],
            "agents": [
                {"id": a.id, "role": a.role, "expertise": a.expertise, "team": t.number}
                for t in s.teams
                for a in t.agents
            ],
            "rounds": sum(len(t.votes) for t in s.teams),
            "rounds_by_team": [len(t.votes) for t in s.teams],
            "reassignments": len(s.teams) - 1,
            "consensus": method == "consensus",
            "consensus_share": last.share if method == "consensus" else None,
            "votes_by_turn": s.votes,
            "r2": [{"agent": a, "first": c} for a, c in first.votes[0].items()],
            "final": [{"agent": a, "first": c} for a, c in last.votes[-1].items()],
            "dropped": sum(dropped(v) for v in s.votes.values()),
            "method": method,
            "dissent": self.config.dissent,
            "devil_advocates": s.advocates,
            "history_tokens": s.token_checks,
            "summaries": s.summaries,
            "manager": manager,
        }
        return prediction(answer, rationale, confidence, record, s.transcript)


def _tally(votes: list[str | None], letters: list[str]) -> str:
    counts = [f"{letter}×{sum(v == letter for v in votes)}" for letter in letters if letter in votes]
    if dropped(votes):
        counts.append(f"no valid option×{dropped(votes)}")
    return ", ".join(counts)


def _manager_or_votes(pick: str | None, confidence: str, first: Sequence[str | None], final: Sequence[str | None],
                      letters: Sequence[str], *, anchored: bool) -> tuple[str, str, str]:
    """The answer, how it was reached and its confidence: the anchored vote's leaders (the manager's pick
    among them), else the manager's pick, else the plurality of the last votes."""
    scores = anchored_scores(first, final, letters) if anchored else {}
    top = leaders(scores, letters) if scores else []
    if top:  # anchored leaders exist only with valid votes
        answer = pick if pick is not None and pick in top else top[0]
        return answer, "anchored_vote", confidence if pick is not None else confidence_from_share(scores[answer])
    if pick is not None:
        return pick, "manager", confidence
    voted, share = plurality_or_fail(final, letters, "consultation: neither the manager nor any specialist's last "
                                     "vote (the manager's pick dropped too)")
    return voted, "final_vote", confidence_from_share(share)


def _fallback_rationale(answer: str, pick: str | None, method: str, manager: str | None,
                        options: Mapping[str, str]) -> str:
    """The manager's rationale (or a line naming the method), and why the answer is not the manager's pick."""
    rationale = manager if pick is not None else ""
    rationale = rationale or f"Answer {answer} ({options[answer]}) by the {method.replace('_', ' ')}."
    if answer != pick:
        preferred = f"the manager preferred {pick}" if pick is not None else "the manager named no valid option"
        how = ("the anchored vote over independent and final votes" if method == "anchored_vote"
               else "the plurality of the teams' valid last-round votes")
        rationale = f"Answer {answer} ({options[answer]}) by {how}; {preferred}. {rationale}"
    return rationale
