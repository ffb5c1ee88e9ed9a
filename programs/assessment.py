"""Phase 2: every clinician assesses the question alone, in parallel."""

from __future__ import annotations

import dspy

from teammed.deliberation import Assessment
from teammed.programs.behaviour import Behaviour, as_image
from teammed.programs.parallel import parallel_map
from teammed.programs.ranking import read_ranking
from teammed.programs.team import Agent
from teammed.signatures import ImageAssessment, InitialAssessment

__all__ = ["IndependentAssessment", "format_assessments", "format_facts"]


def format_assessments(assessments: list[Assessment], agents: list[Agent], *, facts: bool = True,
                       options: dict[str, str] | None = None) -> str:
    """Round-2 results as text for the leader and the discussion (weights never shown).

    A ranking that fell back (no valid letter from the model) is shown as no ranking.
    """
    roles = {a.id: a.role for a in agents}
    blocks = []
    for a in assessments:
        ranking = "no valid ranking" if a.fell_back else f"ranking {'>'.join(a.ranking)}"
        if options and not a.fell_back:
            ranking += f" (top: {options[a.first]})"
        line = f"{a.agent} ({roles.get(a.agent, '?')}): {ranking}, {a.confidence}. {a.justification}"
        if facts and a.facts:
            line += " Facts: " + "; ".join(a.facts)
        blocks.append(line.strip())
    return "\n".join(blocks)


def format_facts(assessments: list[Assessment]) -> str:
    """Each clinician's round-2 facts: what the leader distils the verified facts from."""
    return "\n".join(f"{a.agent}: " + "; ".join(a.facts) for a in assessments if a.facts)


class IndependentAssessment(dspy.Module):
    """Each clinician's own assessment; with ``vision`` they also see the question's image."""

    def __init__(self, *, vision: bool = False) -> None:
        super().__init__()
        self.assess = Behaviour(InitialAssessment)
        self.assess_image = Behaviour(ImageAssessment) if vision else None

    def forward(self, question: str, options: dict[str, str], agents: list[Agent], shared_context: str,
                role_briefs: bool, image: str | None = None) -> list[Assessment]:
        if image and self.assess_image is None:
            raise ValueError("this question has an image; build the program with vision=True to show it to agents")

        def one(agent: Agent) -> Assessment:
            role = agent.brief() if role_briefs else agent.role
            common = dict(question=question, options=options, role=role, shared_context=shared_context)
            if image and self.assess_image is not None:
                out = self.assess_image(**common, image=as_image(image))
            else:
                out = self.assess(**common)
            read = read_ranking(out.ranking, options)
            return Assessment(agent=agent.id, ranking=read.ranking, justification=out.justification or "",
                              facts=[str(f) for f in (out.facts or [])][:5], confidence=out.confidence or "Low",
                              repaired=read.repaired, fell_back=read.fell_back, invalid_letters=read.invalid_letters)

        return parallel_map(one, agents)
