"""The leader's powers: distil facts, write the report, grade round 2, mediate, break ties."""

from __future__ import annotations

import dspy

from teammed.config import TeamworkConfig
from teammed.programs.behaviour import Behaviour
from teammed.signatures import AssessmentQuality, ConsensusFacts, FormalReport, Mediation, TieResolution

__all__ = ["Leader"]


class Leader(dspy.Module):
    """Only the powers the configuration uses are built (and so optimized)."""

    def __init__(self, config: TeamworkConfig):
        super().__init__()
        self.facts = Behaviour(ConsensusFacts) if config.shared_mental_model else None
        self.report = Behaviour(FormalReport) if config.team_orientation else None
        self.grade = Behaviour(AssessmentQuality) if config.trust else None
        self.mediate = Behaviour(Mediation)
        self.resolve_tie = Behaviour(TieResolution)

    def extract_facts(self, question: str, assessments: str) -> list[str]:
        assert self.facts is not None
        return [f for f in (self.facts(question=question, assessments=assessments).facts or []) if f.strip()]

    def write_report(self, question: str, options: dict[str, str], assessments: str, shared: str) -> str:
        assert self.report is not None
        return self.report(question=question, options=options, assessments=assessments, shared_context=shared).report

    def grade_assessments(self, question: str, assessments: str, agents: list[str]) -> dict[str, float]:
        """Quality per agent in [0, 1]; agents the leader skipped are absent."""
        assert self.grade is not None
        grades = self.grade(question=question, assessments=assessments, agents=agents).grades or []
        return {agent: min(1.0, max(0.0, float(g))) for agent, g in zip(agents, grades, strict=False)}

    def forward(self, **kwargs):  # type: ignore[no-untyped-def]
        raise TypeError("Leader is a set of powers; call its methods")
