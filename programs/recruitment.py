"""Phase 1: size the team, analyse the question, and recruit its members."""

from __future__ import annotations

import dspy

from teammed.config import TeamworkConfig
from teammed.programs.aggregation import hierarchical_weights
from teammed.programs.behaviour import Behaviour
from teammed.programs.parallel import Background
from teammed.programs.team import Agent
from teammed.signatures import AgentCount, QuestionTricks, SpecialtyRecruitment

__all__ = ["Recruitment", "generic_agents", "DEFAULT_TEAM_SIZE", "TEAM_SIZES"]

TEAM_SIZES = (2, 3, 4)
# n_agents="auto" whose count reply names no size (unparseable, or outside 2-4): the team of a typical
# clinical vignette, counted as a fallback of AgentCount (never the schema's first value, 2)
DEFAULT_TEAM_SIZE = 3


def generic_agents(n: int) -> list[Agent]:
    """Generic experts with equal weights: the team unless team orientation and leadership are both on."""
    return [Agent(f"agent_{i + 1}", f"Medical Expert {i + 1}", "general clinical reasoning", 1 / n) for i in range(n)]


def _specialist_agents(specialists: list, n: int) -> list[Agent]:
    """Exactly ``n`` distinct specialists, most relevant first, weighted by the hierarchy."""
    roles: list[tuple[str, str]] = []
    for spec in specialists or []:
        role = (getattr(spec, "role", "") or "").strip()
        if role and role.lower() not in {r.lower() for r, _ in roles}:
            roles.append((role, (getattr(spec, "expertise", "") or "").strip()))
    for i in range(len(roles), n):
        roles.append((f"Medical Expert {i + 1}", "general clinical reasoning"))
    weights = hierarchical_weights(n)
    return [Agent(f"agent_{i + 1}", role, expertise, weights[i]) for i, (role, expertise) in enumerate(roles[:n])]


class Recruitment(dspy.Module):
    """Agent count (when ``n_agents='auto'``), trick analysis (SMM) and specialty recruitment (TO with L).

    As in the specification's phase 1, specialist roles and hierarchical weights need team
    orientation *and* leadership (the recruiter is the leader); team orientation alone keeps the
    generic experts with equal weights and only adds their role briefs.
    """

    def __init__(self, config: TeamworkConfig):
        super().__init__()
        self.config = config
        self.count = Behaviour(AgentCount) if config.n_agents == "auto" else None
        self.tricks = Behaviour(QuestionTricks) if config.shared_mental_model else None
        self.specialties = (Behaviour(SpecialtyRecruitment)
                            if config.team_orientation and config.leadership else None)

    def forward(self, question: str, options: dict[str, str]) -> dspy.Prediction:
        n: int | str = self.config.n_agents
        count_reason, count_fell_back = "", False
        with Background() as bg:  # the team size and the trick analysis do not depend on each other
            tricks = bg.start(self.tricks, question=question, options=options) if self.tricks is not None else None
            if self.count is not None:
                counted = self.count(question=question, options=options)
                count_fell_back = counted.n_agents not in TEAM_SIZES
                n = DEFAULT_TEAM_SIZE if count_fell_back else counted.n_agents
                count_reason = counted.reason or ""
            analysis = (bg.result(tricks).analysis or "") if tricks is not None else ""
        assert isinstance(n, int)
        if self.specialties is not None:
            recruited = self.specialties(question=question, options=options, n_agents=n,
                                         question_analysis=analysis)
            agents = _specialist_agents(recruited.specialists, n)
        else:
            agents = generic_agents(n)
        return dspy.Prediction(agents=agents, analysis=analysis, count_reason=count_reason,
                               count_fell_back=count_fell_back)
