"""`TeamworkProgram`: the four-phase deliberation of a clinical team, for any `TeamworkConfig`.

Phase 1 recruits the team, phase 2 collects independent assessments in parallel, phase 3
runs round-robin discussion turns (leader mediation each turn; closed-loop checks and
mutual monitoring between turns), phase 4 aggregates the final rankings by Borda count.
"""

from __future__ import annotations

from typing import Any

import dspy

from teammed.config import TeamworkConfig
from teammed.errors import ConfigError
from teammed.programs.aggregation import borda_scores, rule_tie_break, winners
from teammed.programs.assessment import IndependentAssessment, format_assessments
from teammed.programs.behaviour import Behaviour
from teammed.programs.closed_loop import ClosedLoop
from teammed.programs.discussion import Discussion, format_history
from teammed.programs.leadership import Leader
from teammed.programs.monitoring import MutualMonitoring
from teammed.programs.options import validated_options
from teammed.programs.persist import SavesConfig
from teammed.programs.ranking import first_choice_agreement
from teammed.programs.recruitment import Recruitment
from teammed.programs.smm import SharedMentalModel, intersect_facts
from teammed.programs.team import Agent, Assessment, Challenge, Transcript, Turn, as_plain
from teammed.programs.trust import apply_quality, automated_quality, initial_trust, verdict_update

__all__ = ["TeamworkProgram"]


class _State:
    """Everything one deliberation accumulates; lives only inside `forward`."""

    def __init__(self, question: str, options: dict[str, str]):
        self.question = question
        self.options = options
        self.letters = list(options)
        self.agents: list[Agent] = []
        self.smm = SharedMentalModel()
        self.trust: dict[str, float] = {}
        self.trust_history: list[dict[str, Any]] = []
        self.report = ""
        self.r2: list[Assessment] = []
        self.turns: list[Turn] = []
        self.notes: list[str] = []
        self.mediations: list[str] = []
        self.challenges: list[Challenge] = []
        self.loops: list[dict] = []
        self.final: dict[str, Turn] = {}
        self.early_consensus = False
        self.transcript = Transcript()

    @property
    def role_of(self) -> dict[str, str]:
        return {a.id: a.role for a in self.agents}

    def snapshot_trust(self, stage: str) -> None:
        self.trust_history.append({"stage": stage, "scores": dict(self.trust)})


class TeamworkProgram(SavesConfig, dspy.Module):
    """The deliberation program; only the behaviours the config uses are built."""

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
        s = _State(text, validated_options(options))
        self._recruit(s)
        self._assess(s, image)
        if self._consensus_reached(s):
            s.early_consensus = True
            s.final = {a.agent: Turn(a.agent, 0, a.justification, a.first, a.ranking, a.confidence) for a in s.r2}
            s.transcript.add("R3", "early_consensus", "Round-2 first choices agree; discussion skipped.")
        else:
            for turn in range(1, self.config.n_turns + 1):
                self._discuss(s, turn)
        return self._aggregate(s)

    # ------------------------------------------------------------------ phase 1
    def _recruit(self, s: _State) -> None:
        out = self.recruitment(question=s.question, options=s.options)
        s.agents = out.agents
        s.smm.question_analysis = out.analysis
        s.trust = initial_trust([a.id for a in s.agents])
        s.snapshot_trust("initial")
        if out.count_reason:
            s.transcript.add("R1", "agent_count", out.count_reason, n_agents=len(s.agents))
        if out.analysis:
            s.transcript.add("R1", "question_analysis", out.analysis)
        for a in s.agents:
            s.transcript.add("R1", "recruited", a.brief(), agent=a.id, role=a.role, weight=a.weight)

    # ------------------------------------------------------------------ phase 2
    def _assess(self, s: _State, image: str | None) -> None:
        c = self.config
        s.r2 = self.assessment(question=s.question, options=s.options, agents=s.agents,
                               shared_context=s.smm.context(), role_briefs=c.team_orientation, image=image)
        for a in s.r2:
            s.transcript.add("R2", "assessment", a.justification, agent=a.agent, role=s.role_of[a.agent],
                             ranking=a.ranking, confidence=a.confidence, facts=a.facts)
        summary = format_assessments(s.r2, s.agents)
        if c.shared_mental_model:
            if self.leader is not None:
                s.smm.verified_facts = self.leader.extract_facts(s.question, summary)
            else:
                s.smm.verified_facts = intersect_facts([a.facts for a in s.r2])
            s.transcript.add("R2", "verified_facts", "\n".join(s.smm.verified_facts))
        if self.leader is not None and c.team_orientation:
            s.report = self.leader.write_report(s.question, s.options, summary, s.smm.context())
            s.transcript.add("R2", "formal_report", s.report, agent="leader", role="Leader")
        if c.trust:
            if self.leader is not None:
                quality = self.leader.grade_assessments(s.question, summary, [a.id for a in s.agents])
            else:
                quality = {a.agent: automated_quality(ranking_repaired=a.repaired, n_facts=len(a.facts),
                                                      justification=a.justification, confidence=a.confidence)
                           for a in s.r2}
            s.trust = apply_quality(s.trust, quality)
            s.snapshot_trust("post_r2")
            s.transcript.add("R2", "trust_update", _format_trust(s.trust), quality=quality)

    def _consensus_reached(self, s: _State) -> bool:
        threshold = self.config.early_consensus
        if threshold is None:
            return False
        _, share = first_choice_agreement([a.first for a in s.r2])
        return share >= threshold

    # ------------------------------------------------------------------ phase 3
    def _team_context(self, s: _State) -> str:
        c = self.config
        parts = ["Independent assessments (round 2):\n" + format_assessments(s.r2, s.agents)]
        if c.shared_mental_model and s.smm.context():
            parts.append("Shared knowledge:\n" + s.smm.context())
        if c.trust:
            parts.append("Reliability so far (higher is more reliable): " + _format_trust(s.trust))
        if s.report:
            parts.append("Leader's case report:\n" + s.report)
        if s.mediations:
            parts.append("Leader's latest mediation:\n" + s.mediations[-1])
        return "\n\n".join(parts)

    def _discuss(self, s: _State, turn: int) -> None:
        c = self.config
        final = turn == c.n_turns
        context = self._team_context(s)
        spoken: list[Turn] = []
        for agent in s.agents:  # round-robin: each speaker sees everything said before it
            role = agent.brief() if c.team_orientation else agent.role
            said = self.discussion.speak(agent=agent, turn=turn, final=final, question=s.question,
                                         options=s.options, role=role, team_context=context,
                                         history=format_history(s.turns + spoken, s.agents, s.notes))
            spoken.append(said)
            s.transcript.add("R3", "final_ranking" if final else "discussion", said.message, agent=agent.id,
                             role=agent.role, turn=turn, choice=said.choice, ranking=said.ranking,
                             confidence=said.confidence)
        s.turns.extend(spoken)
        if final:
            s.final = {t.agent: t for t in spoken}
        if self.leader is not None:
            mediation = self.leader.mediate(question=s.question, options=s.options,
                                            turn_messages=format_history(spoken, s.agents, []),
                                            shared_context=s.smm.context()).synthesis or ""
            s.mediations.append(mediation)
            s.transcript.add("R3", "mediation", mediation, agent="leader", role="Leader", turn=turn)
        if final:
            return
        if self.closed_loop is not None:
            loops = self.closed_loop(turns=spoken, agents=s.agents, role_of=s.role_of)
            s.loops.extend(loops)
            for loop in loops:
                s.transcript.add("CL", "closed_loop", loop["restatement"], agent=loop["receiver"], turn=turn,
                                 **{k: loop[k] for k in ("sender", "confirmed", "correction")})
                if loop["correction"]:
                    s.notes.append(f"[turn {turn}] {loop['sender']} clarified: {loop['correction']}")
        if self.monitoring is not None:
            self._challenge(s, turn, spoken)

    def _challenge(self, s: _State, turn: int, spoken: list[Turn]) -> None:
        assert self.monitoring is not None
        ch = self.monitoring(turn=turn, question=s.question, options=s.options, turns=spoken, agents=s.agents,
                             role_of=s.role_of)
        if self.config.trust:
            ch.trust_before = s.trust[ch.agent]
            s.trust[ch.agent] = verdict_update(s.trust[ch.agent], ch.verdict)
            ch.trust_after = s.trust[ch.agent]
            s.snapshot_trust(f"mm_turn_{turn}")
        if self.config.shared_mental_model:
            s.smm.debated_points.append({"turn": turn, "agent": ch.agent, "concern": ch.concern,
                                         "response": ch.response, "outcome": ch.verdict})
        s.challenges.append(ch)
        s.notes.append(f"[turn {turn}] leader challenged {ch.agent}: {ch.concern} Reply: {ch.response} "
                       f"(judged {ch.verdict}; now favours {ch.choice_after})")
        s.transcript.add("MM", "challenge", ch.concern, agent=ch.agent, role=s.role_of[ch.agent], turn=turn,
                         severity=ch.severity, response=ch.response, verdict=ch.verdict,
                         choice_before=ch.choice_before, choice_after=ch.choice_after,
                         trust_before=ch.trust_before, trust_after=ch.trust_after)

    # ------------------------------------------------------------------ phase 4
    def _aggregate(self, s: _State) -> dspy.Prediction:
        c = self.config
        rankings = {agent: t.ranking or [t.choice] for agent, t in s.final.items()}
        if c.trust:
            method, weights = "trust_borda", dict(s.trust)
        elif c.team_orientation:
            method, weights = "hierarchical_borda", {a.id: a.weight for a in s.agents}
        else:
            method, weights = "borda", None
        scores = borda_scores(rankings, s.letters, weights)
        top = winners(scores)
        answer, tie = top[0], None
        if len(top) > 1:
            if self.leader is not None:
                out = self.leader.resolve_tie(
                    question=s.question, tied_options={k: s.options[k] for k in top},
                    rankings=format_history(list(s.final.values()), s.agents, []),
                    shared_context=_leader_context(s, c.trust),
                )
                answer = out.answer if out.answer in top else rule_tie_break(top, rankings, _r2_rankings(s), s.letters)
                tie = {"tied": top, "resolved_by": "leader", "answer": answer, "reason": out.reason or ""}
            else:
                answer = rule_tie_break(top, rankings, _r2_rankings(s), s.letters)
                tie = {"tied": top, "resolved_by": "rule", "answer": answer,
                       "reason": "first-place votes, then round-2 Borda, then letter"}
            s.transcript.add("AGG", "tie_break", tie["reason"], agent="leader" if self.leader else None, **tie)
        s.transcript.add("AGG", "vote", f"{method}: " + ", ".join(f"{k}={v:.2f}" for k, v in scores.items()),
                         answer=answer)
        confidence = _team_confidence([t.confidence for t in s.final.values() if t.choice == answer])
        rationale = _rationale(s, answer, scores, method)
        record = self._record(s, scores, method, tie)
        return dspy.Prediction(answer=answer, rationale=rationale, confidence=confidence, record=record,
                               transcript=s.transcript.events)

    def _record(self, s: _State, scores: dict[str, float], method: str, tie: dict | None) -> dict[str, Any]:
        votes = {a.agent: [a.first] for a in s.r2}
        for t in s.turns:
            votes[t.agent].append(t.choice)
        repairs = sum(a.repaired for a in s.r2) + sum(t.repaired for t in s.turns)
        return {
            "agents": [as_plain(a) for a in s.agents],
            "r2": [{**as_plain(a), "first": a.first} for a in s.r2],
            "final": [{"agent": t.agent, "ranking": t.ranking, "first": t.choice, "confidence": t.confidence,
                       "rationale": t.message} for t in s.final.values()],
            "votes_by_turn": votes,
            "challenges": as_plain(s.challenges),
            "closed_loop": s.loops,
            "mediations": s.mediations,
            "report": s.report,
            "smm": s.smm.as_dict(),
            "trust_history": s.trust_history,
            "trust": dict(s.trust) if self.config.trust else None,
            "scores": {k: round(v, 6) for k, v in scores.items()},
            "aggregation": method,
            "tie": tie,
            "early_consensus": s.early_consensus,
            "ranking_repairs": repairs,
        }

    def behaviours(self) -> list[str]:
        """The names of the behaviours this configuration runs (each one named predictor)."""
        return sorted({m.name for _, m in self.named_sub_modules() if isinstance(m, Behaviour)})


def _leader_context(s: _State, with_trust: bool) -> str:
    return "\n".join(filter(None, [s.smm.context(), _format_trust(s.trust) if with_trust else ""]))


def _r2_rankings(s: _State) -> dict[str, list[str]]:
    return {a.agent: a.ranking for a in s.r2}


def _format_trust(trust: dict[str, float]) -> str:
    return ", ".join(f"{agent}={score:.2f}" for agent, score in trust.items())


def _team_confidence(levels: list[str | None]) -> str:
    """The most common confidence among the agents who ranked the answer first (Low if none)."""
    known = [lvl for lvl in levels if lvl in ("High", "Medium", "Low")]
    if not known:
        return "Low"
    return max(("High", "Medium", "Low"), key=lambda lvl: (known.count(lvl), -("High", "Medium", "Low").index(lvl)))


def _rationale(s: _State, answer: str, scores: dict[str, float], method: str) -> str:
    backers = [t for t in s.final.values() if t.choice == answer]
    lines = [f"Answer {answer} ({s.options[answer]}) by {method.replace('_', ' ')}: "
             + ", ".join(f"{k} {v:.2f}" for k, v in sorted(scores.items(), key=lambda kv: -kv[1]))]
    lines += [f"- {t.agent} ({s.role_of.get(t.agent, '?')}): {t.message}" for t in backers if t.message]
    if s.smm.verified_facts:
        lines.append("Verified facts: " + "; ".join(s.smm.verified_facts))
    if s.mediations:
        lines.append("Leader's synthesis: " + s.mediations[-1])
    return "\n".join(lines)
