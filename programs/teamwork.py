"""`TeamworkProgram`: the four-phase deliberation of a clinical team, for any `TeamworkConfig`.

Phase 1 recruits the team, phase 2 collects independent assessments in parallel, phase 3
runs round-robin discussion turns (leader mediation each turn; closed-loop checks and
mutual monitoring between turns), phase 4 aggregates the final rankings by Borda count,
breaks a tie, and lets the leader correct a flawed decision. Each phase returns a typed
value (`teammed.deliberation`); the prediction's ``record`` is the `Deliberation`.

Calls that do not depend on each other overlap: the leader's facts, report and grades
after round 2; each closed-loop exchange as soon as its message is spoken; mediation,
closed loop and mutual monitoring after a turn; the last mediation beside the decision.
The round-robin speakers stay sequential, as the spec requires.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import NoReturn

import dspy

from teammed import usage
from teammed.config import TeamworkConfig
from teammed.deliberation import (
    Challenge,
    DebatedPoint,
    Decision,
    Deliberation,
    DiscussionLog,
    FinalVote,
    LoopExchange,
    RoundTwo,
    Team,
    TieBreak,
    TrustSnapshot,
    Turn,
)
from teammed.errors import ConfigError, NoAnswerError
from teammed.programs.aggregation import borda_scores, rule_tie_break, winners
from teammed.programs.assessment import IndependentAssessment, format_assessments, format_facts
from teammed.programs.closed_loop import ClosedLoop, receiver_of
from teammed.programs.context import History, first_context, format_trust, later_context
from teammed.programs.discussion import Discussion
from teammed.programs.leadership import Leader
from teammed.programs.monitoring import MutualMonitoring
from teammed.programs.options import validated_options
from teammed.programs.parallel import AsyncForward, Background
from teammed.programs.persist import SavesConfig
from teammed.programs.ranking import first_choice_agreement
from teammed.programs.recruitment import Recruitment
from teammed.programs.smm import SharedMentalModel, intersect_facts
from teammed.programs.transcript import rationale_of, transcript_of
from teammed.programs.trust import apply_quality, automated_quality, initial_trust, verdict_update

__all__ = ["TeamworkProgram"]


class TeamworkProgram(SavesConfig, AsyncForward, dspy.Module):
    """The deliberation program; only the behaviours the config uses are built."""

    system_name = "teamwork"

    def __init__(self, config: TeamworkConfig | None = None, *, vision: bool = False):
        super().__init__()
        self.config = config or TeamworkConfig()
        c = self.config
        self.recruitment = Recruitment(c)
        self.assessment = IndependentAssessment(vision=vision)
        self.leader = Leader(c) if c.leadership else None
        self.discussion = Discussion()
        self.monitoring = MutualMonitoring() if c.mutual_monitoring else None
        self.closed_loop = ClosedLoop() if c.closed_loop else None

    # ------------------------------------------------------------------ forward
    def forward(self, question: str, options: dict[str, str], context: str | None = None,
                image: str | None = None) -> dspy.Prediction:
        if image and self.assessment.assess_image is None:  # before any call is spent
            raise ConfigError("this question has an image; build the program with TeamworkProgram(config, "
                              "vision=True) and run it on a vision model")
        text = f"Context:\n{context}\n\nQuestion:\n{question}" if context else question
        options = validated_options(options)
        with Background() as bg:
            team = self._recruit(text, options)
            r2, trust = self._assess(bg, text, options, team, image)
            if self._consensus_reached(r2):
                talk, pending = _early_consensus(r2, _trust_start(team, trust, on=self.config.trust)), None
            else:
                talk, trust, pending = self._discuss(bg, text, options, team, r2, trust)
            decision = self._decide(text, options, team, r2, talk, trust)
            if pending is not None:  # the last turn's mediation ran beside the decision
                talk = talk.model_copy(update={"mediations": [*talk.mediations, bg.result(pending)]})
        record = Deliberation.assemble(team=team, r2=r2, talk=talk, decision=decision,
                                       trust=trust if self.config.trust else None)
        usage.record_ranking_repair(record.ranking_repairs + record.invalid_letters)
        return dspy.Prediction(answer=record.answer, rationale=rationale_of(record, team=team, options=options),
                               confidence=decision.confidence, record=record,
                               transcript=transcript_of(record, team=team, r2=r2))

    # ------------------------------------------------------------------ phase 1
    def _recruit(self, question: str, options: dict[str, str]) -> Team:
        out = self.recruitment(question=question, options=options)
        return Team(agents=out.agents, question_analysis=out.analysis or "", count_reason=out.count_reason or "",
                    count_fell_back=out.count_fell_back)

    # ------------------------------------------------------------------ phase 2
    def _assess(self, bg: Background, question: str, options: dict[str, str], team: Team,
                image: str | None) -> tuple[RoundTwo, dict[str, float]]:
        c = self.config
        smm = SharedMentalModel(question_analysis=team.question_analysis)
        assessments = self.assessment(question=question, options=options, agents=team.agents,
                                      shared_context=smm.context(), role_briefs=c.team_orientation, image=image)
        summary = format_assessments(assessments, team.agents, options=options)
        leader = self.leader
        # The leader's facts, report and grades read the case and round 2 only: they run side by side. The spec's
        # "1 combined call" is up to three here, each its own predictor (docs/fidelity.md).
        facts_f = report_f = grades_f = None
        if leader is not None and c.shared_mental_model:
            facts_f = bg.start(leader.extract_facts, format_facts(assessments), question=question, options=options)
        if leader is not None and c.team_orientation:
            # the report reads the justifications; the facts are distilled beside it (SMM)
            report_f = bg.start(leader.write_report, format_assessments(assessments, team.agents, facts=False,
                                                                        options=options), smm.context(),
                                question=question, options=options)
        if leader is not None and c.trust:
            grades_f = bg.start(leader.grade_assessments, summary, team.ids, question=question, options=options)
        facts: list[str] = []
        if c.shared_mental_model:
            facts = bg.result(facts_f) if facts_f is not None else intersect_facts([a.facts for a in assessments])
        report = bg.result(report_f) if report_f is not None else ""
        trust = initial_trust(team.ids)
        quality = None
        if c.trust:
            if grades_f is not None:
                quality = bg.result(grades_f)
            else:
                quality = {a.agent: automated_quality(ranking_repaired=a.repaired, n_facts=len(a.facts),
                                                      justification=a.justification, confidence=a.confidence)
                           for a in assessments}
            trust = apply_quality(trust, quality)
        return RoundTwo(assessments=assessments, verified_facts=facts, report=report, quality=quality), trust

    def _consensus_reached(self, r2: RoundTwo) -> bool:
        """Early consensus counts only rankings the agents actually gave (a fallback agrees with no one)."""
        threshold = self.config.early_consensus
        if threshold is None:
            return False
        valid = [a.first for a in r2.assessments if not a.fell_back]
        top, _ = first_choice_agreement(valid)
        share = sum(f == top for f in valid) / len(r2.assessments) if r2.assessments else 0.0
        return bool(valid) and share >= threshold

    # ------------------------------------------------------------------ phase 3
    def _discuss(self, bg: Background, question: str, options: dict[str, str], team: Team, r2: RoundTwo,
                 trust: dict[str, float]) -> tuple[DiscussionLog, dict[str, float], Future[str] | None]:
        c = self.config
        trust = dict(trust)
        history = _trust_start(team, trust, on=c.trust)
        smm = SharedMentalModel(question_analysis=team.question_analysis, verified_facts=list(r2.verified_facts))

        def context(me: str) -> str:
            if said.spoken(me):
                return later_context(mediation=mediations[-1] if mediations else "",
                                     trust=format_trust(trust) if c.trust else "")
            # round-2 views of whoever has not spoken yet: a teammate's later words are in the history
            unspoken = [a for a in r2.assessments if a.agent == me or not said.spoken(a.agent)]
            return first_context(assessments=format_assessments(unspoken, team.agents, facts=False),
                                 shared=smm.context() if c.shared_mental_model else "",
                                 trust=format_trust(trust) if c.trust else "", report=r2.report)

        said = History()
        last_choice = {a.agent: a.first for a in r2.assessments}
        turns: list[Turn] = []
        mediations: list[str] = []
        loops: list[LoopExchange] = []
        challenges: list[Challenge] = []
        pending: Future[str] | None = None
        for turn in range(1, c.n_turns + 1):
            final = turn == c.n_turns
            spoken, loop_fs = self._speak(bg, turn, final=final, question=question, options=options, team=team,
                                          said=said, last_choice=last_choice, context=context)
            turns.extend(spoken)
            mediation_f = None
            if self.leader is not None:
                messages = "\n".join(f"{t.agent} favours {t.choice} ({options[t.choice]}): {t.message}" for t in spoken)
                mediation_f = bg.start(self.leader.mediate_turn, messages, smm.context(), question=question,
                                       options=options)
            if final:
                pending = mediation_f
                break
            challenge_f = None
            if self.monitoring is not None:
                challenge_f = bg.start(self.monitoring, turn=turn, question=question, options=options, turns=spoken,
                                       agents=team.agents, role_of=team.role_of)
            for loop in (bg.result(f) for f in loop_fs):
                loops.append(loop)
                if loop.correction:
                    said.note(f"[t{turn}] {loop.sender} clarified: {loop.correction}")
            if mediation_f is not None:
                mediations.append(bg.result(mediation_f))
            if challenge_f is not None:
                challenges.append(_settle_challenge(bg.result(challenge_f), turn, c, trust=trust, history=history,
                                                    smm=smm, said=said, last_choice=last_choice))
        final_turns = [t for t in turns if t.turn == c.n_turns]
        log = DiscussionLog(
            turns=turns, mediations=mediations, loops=loops, challenges=challenges,
            debated_points=[DebatedPoint(**p) for p in smm.debated_points], trust_history=history,
            final=[FinalVote(agent=t.agent, ranking=t.ranking or [t.choice], first=t.choice, confidence=t.confidence,
                             rationale=t.message, fell_back=t.fell_back) for t in final_turns])
        return log, trust, pending

    def _speak(self, bg: Background, turn: int, *, final: bool, question: str, options: dict[str, str], team: Team,
               said: History, last_choice: dict[str, str],
               context: Callable[[str], str]) -> tuple[list[Turn], list[Future[LoopExchange]]]:
        """One round-robin turn: each speaker sees everything said before it; what each said is
        acknowledged (closed loop) while the next one speaks."""
        c = self.config
        spoken: list[Turn] = []
        loop_fs: list[Future[LoopExchange]] = []
        for agent in team.agents:
            team_context = context(agent.id)
            out = self.discussion.speak(agent=agent, turn=turn, final=final, question=question, options=options,
                                        role=agent.brief() if c.team_orientation else agent.role,
                                        team_context=team_context, history=said.since(agent.id),
                                        default_choice=last_choice[agent.id])
            spoken.append(out)
            said.said(out)
            last_choice[agent.id] = out.choice
            if self.closed_loop is not None and not final:  # acknowledged while the next one speaks
                loop_fs.append(bg.start(self.closed_loop, said=out, receiver=receiver_of(agent.id, team.ids),
                                        role_of=team.role_of, question=question, options=options))
        return spoken, loop_fs

    # ------------------------------------------------------------------ phase 4
    def _decide(self, question: str, options: dict[str, str], team: Team, r2: RoundTwo, talk: DiscussionLog,
                trust: dict[str, float]) -> Decision:
        c = self.config
        letters = list(options)
        counted = {v.agent: v.ranking for v in talk.final if not v.fell_back}
        abstained = [v.agent for v in talk.final if v.fell_back]
        if not counted:
            _no_answer(team, r2, talk, abstained)
        method, weights = _weighting(c, team, trust)
        scores = borda_scores(counted, letters, weights)
        top = winners(scores)
        answer, tie = top[0], None
        shared = _leader_context(team, r2, talk, None)
        votes = "\n".join(f"{v.agent} ({team.role_of.get(v.agent, '?')}): {'>'.join(v.ranking)}. {v.rationale}"
                          for v in talk.final if not v.fell_back)
        if len(top) > 1:
            tie = self._break_tie(question, options, team, r2, talk, trust, top=top, counted=counted, votes=votes)
            answer = tie.answer
        aggregated, override = answer, None
        if self.leader is not None and self.leader.correct is not None:
            override = self.leader.review(question=question, options=options, team_answer=aggregated,
                                          rankings=votes, shared=shared)
            answer = override.answer
        backers = [v.confidence for v in talk.final if v.first == answer and not v.fell_back]
        return Decision(answer=answer, aggregated=aggregated, method=method, scores=scores, tie=tie,
                        leader_override=override, abstained=abstained, confidence=_team_confidence(backers))

    def _break_tie(self, question: str, options: dict[str, str], team: Team, r2: RoundTwo, talk: DiscussionLog,
                   trust: dict[str, float], *, top: list[str], counted: dict[str, list[str]], votes: str) -> TieBreak:
        """The leader's pick among the tied letters, or the rule's without a leader."""
        initial = {a.agent: a.ranking for a in r2.assessments if not a.fell_back}
        rule = rule_tie_break(top, counted, initial, list(options))
        if self.leader is not None:
            return self.leader.break_tie(question=question, options=options, tied=top, rankings=votes,
                                         rule_answer=rule,
                                         shared=_leader_context(team, r2, talk, trust if self.config.trust else None))
        return TieBreak(tied=top, resolved_by="rule", answer=rule,
                        reason="first-place votes, then round-2 Borda, then letter")


def _trust_start(team: Team, trust: dict[str, float], *, on: bool) -> list[TrustSnapshot]:
    """The trust history before discussion: the initial scores, then (trust on) the post-round-2 update."""
    history = [TrustSnapshot(stage="initial", scores=initial_trust(team.ids))]
    if on:
        history.append(TrustSnapshot(stage="post_r2", scores=dict(trust)))
    return history


def _settle_challenge(ch: Challenge, turn: int, c: TeamworkConfig, *, trust: dict[str, float],
                      history: list[TrustSnapshot], smm: SharedMentalModel, said: History,
                      last_choice: dict[str, str]) -> Challenge:
    """A challenge's verdict applied: the challenged agent's trust (trust on), the debated point (shared
    mental model on), its choice now, and a note in the history."""
    if c.trust:
        before = trust[ch.agent]
        trust[ch.agent] = verdict_update(before, ch.verdict)
        ch = ch.model_copy(update={"trust_before": before, "trust_after": trust[ch.agent]})
        history.append(TrustSnapshot(stage=f"mm_turn_{turn}", scores=dict(trust)))
    if c.shared_mental_model:
        smm.debated_points.append({"turn": turn, "agent": ch.agent, "concern": ch.concern,
                                   "response": ch.response, "outcome": ch.verdict})
    last_choice[ch.agent] = ch.choice_after
    said.note(f"[t{turn}] leader challenged {ch.agent}: {ch.concern} (reply judged {ch.verdict}; "
              f"{ch.agent} now favours {ch.choice_after})", reply=(ch.agent, ch.response))
    return ch


def _no_answer(team: Team, r2: RoundTwo, talk: DiscussionLog, abstained: list[str]) -> NoReturn:
    """No agent's final ranking counts: the repairs are counted and the team has no answer."""
    usage.record_ranking_repair(sum(a.repaired + a.invalid_letters for a in r2.assessments)
                                + sum(t.repaired + t.invalid_letters for t in talk.turns))
    raise NoAnswerError(
        f"no agent produced a parseable final ranking ({len(abstained)} of {len(team.agents)} fell back to "
        "a default); the team has no answer. Check that the model returns the requested JSON "
        "(the row's parse_failures count the unparseable replies)")


def _weighting(c: TeamworkConfig, team: Team, trust: dict[str, float]) -> tuple[str, dict[str, float] | None]:
    """The Borda variant and its weights: trust, then the team's hierarchy, else equal. As in the spec's
    phase 4, team orientation weighs by the agents' weights: hierarchical with leadership, equal (1/N,
    generic experts) without it."""
    if c.trust:
        return "trust_borda", dict(trust)
    if c.team_orientation:
        return "hierarchical_borda", {a.id: a.weight for a in team.agents}
    return "borda", None


def _early_consensus(r2: RoundTwo, history: list[TrustSnapshot]) -> DiscussionLog:
    """Round-2 first choices agree: the assessments are the final votes and no one discusses."""
    return DiscussionLog(
        early_consensus=True,
        trust_history=history,
        final=[FinalVote(agent=a.agent, ranking=a.ranking, first=a.first, confidence=a.confidence,
                         rationale=a.justification, fell_back=a.fell_back) for a in r2.assessments])


def _leader_context(team: Team, r2: RoundTwo, talk: DiscussionLog, trust: dict[str, float] | None) -> str:
    smm = SharedMentalModel(question_analysis=team.question_analysis, verified_facts=list(r2.verified_facts),
                            debated_points=[p.model_dump() for p in talk.debated_points])
    return "\n".join(filter(None, [smm.context(), f"Reliability: {format_trust(trust)}" if trust else ""]))


def _team_confidence(levels: list[str | None]) -> str:
    """The most common confidence among the agents who ranked the answer first (Low if none)."""
    known = [lvl for lvl in levels if lvl in ("High", "Medium", "Low")]
    if not known:
        return "Low"
    return max(("High", "Medium", "Low"), key=lambda lvl: (known.count(lvl), -("High", "Medium", "Low").index(lvl)))
