"""Phase 2: every clinician assesses the question alone, in parallel."""

from __future__ import annotations

import dspy

from teammed.programs.behaviour import Behaviour
from teammed.programs.parallel import parallel_map
from teammed.programs.ranking import repair_ranking
from teammed.programs.team import Agent, Assessment
from teammed.signatures import InitialAssessment

__all__ = ["IndependentAssessment", "format_assessments"]


def format_assessments(assessments: list[Assessment], agents: list[Agent]) -> str:
    """Round-2 results as text for the leader and the discussion (weights never shown)."""
    roles = {a.id: a.role for a in agents}
    blocks = []
    for a in assessments:
        facts = "; ".join(a.facts) if a.facts else "none given"
        blocks.append(
            f"{a.agent} ({roles.get(a.agent, '?')}): ranking {' > '.join(a.ranking)}, confidence {a.confidence}. "
            f"Why: {a.justification} Facts: {facts}"
        )
    return "\n".join(blocks)


class IndependentAssessment(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.assess = Behaviour(InitialAssessment)

    def forward(self, question: str, options: dict[str, str], agents: list[Agent], shared_context: str,
                role_briefs: bool) -> list[Assessment]:
        letters = list(options)

        def one(agent: Agent) -> Assessment:
            role = agent.brief() if role_briefs else agent.role
            out = self.assess(question=question, options=options, role=role, shared_context=shared_context)
            ranking, repaired = repair_ranking(out.ranking, letters)
            return Assessment(agent.id, ranking, out.justification or "", list(out.facts or [])[:5],
                              out.confidence or "Low", repaired)

        return parallel_map(one, agents)
