"""The leader's powers: distil facts, write the report, grade round 2, mediate, break ties, correct."""

from __future__ import annotations

import dspy

from teammed.config import TeamworkConfig
from teammed.deliberation import LeaderOverride, TieBreak
from teammed.programs.behaviour import Behaviour
from teammed.programs.ranking import read_choice
from teammed.signatures import (
    AssessmentQuality,
    ConsensusFacts,
    CorrectionAuthority,
    FormalReport,
    Mediation,
    TieResolution,
)

__all__ = ["Leader"]


class Leader(dspy.Module):
    """Only the powers the configuration uses are built (and so optimized).

    Every power reads the case (question with its context, and the options) before the
    team's work: the leader is a clinician on the case, not a judge of summaries."""

    def __init__(self, config: TeamworkConfig):
        super().__init__()
        self.facts = Behaviour(ConsensusFacts) if config.shared_mental_model else None
        self.report = Behaviour(FormalReport) if config.team_orientation else None
        self.grade = Behaviour(AssessmentQuality) if config.trust else None
        self.mediate = Behaviour(Mediation)
        self.resolve_tie = Behaviour(TieResolution)
        self.correct = Behaviour(CorrectionAuthority) if config.corrects else None

    def extract_facts(self, assessments: str, *, question: str, options: dict[str, str]) -> list[str]:
        assert self.facts is not None
        out = self.facts(question=question, options=options, assessments=assessments)
        return [f for f in (out.facts or []) if str(f).strip()]

    def write_report(self, assessments: str, shared: str, *, question: str, options: dict[str, str]) -> str:
        assert self.report is not None
        return self.report(question=question, options=options, assessments=assessments,
                           shared_context=shared).report or ""

    def mediate_turn(self, messages: str, shared: str, *, question: str, options: dict[str, str]) -> str:
        """The leader's synthesis of one discussion turn."""
        return self.mediate(question=question, options=options, turn_messages=messages,
                            shared_context=shared).synthesis or ""

    def grade_assessments(self, assessments: str, agents: list[str], *, question: str,
                          options: dict[str, str]) -> dict[str, float]:
        """Quality per agent in [0, 1]; agents the leader skipped are absent."""
        assert self.grade is not None
        grades = self.grade(question=question, options=options, assessments=assessments, agents=agents).grades or []
        return {agent: min(1.0, max(0.0, float(g))) for agent, g in zip(agents, grades, strict=False)}

    def break_tie(self, *, question: str, options: dict[str, str], tied: list[str], rankings: str,
                  shared: str, rule_answer: str) -> TieBreak:
        """The leader's pick among ``tied``; a pick outside the tie leaves the rule's answer, recorded as such."""
        out = self.resolve_tie(question=question, options=options, tied_options={k: options[k] for k in tied},
                               rankings=rankings, shared_context=shared)
        pick = read_choice(out.answer, options, allowed=tied, default=rule_answer)
        if not pick.fell_back:
            return TieBreak(tied=tied, resolved_by="leader", answer=pick.first, reason=out.reason or "",
                            leader_pick=pick.first)
        said = str(out.answer or "")
        return TieBreak(tied=tied, resolved_by="rule", answer=rule_answer, leader_pick=said,
                        reason=f"the leader's pick {said!r} was not one of the tied options {tied}, so the rule "
                               "decided: first-place votes, then round-2 Borda, then letter")

    def review(self, *, question: str, options: dict[str, str], team_answer: str, rankings: str,
               shared: str) -> LeaderOverride:
        """Correction authority: uphold ``team_answer`` or override it, naming the flaw."""
        assert self.correct is not None
        out = self.correct(question=question, options=options, team_answer=team_answer, rankings=rankings,
                           shared_context=shared)
        flaw = (out.flaw or "").strip()
        if out.decision != "override":
            return LeaderOverride(original=team_answer, answer=team_answer, flaw="", overridden=False)
        pick = read_choice(out.answer, options, default=team_answer)
        overridden = not pick.fell_back and pick.first != team_answer and bool(flaw)
        return LeaderOverride(original=team_answer, answer=pick.first if overridden else team_answer, flaw=flaw,
                              overridden=overridden, invalid_pick=pick.fell_back)

    def forward(self, **kwargs):  # type: ignore[no-untyped-def]
        raise TypeError("Leader is a set of powers; call its methods")
