"""Phase 1 behaviours: how big a team, which specialists, and what the question hides."""

from __future__ import annotations

from typing import Literal

import dspy
from pydantic import BaseModel, Field

from teammed.signatures.case import CaseSignature


class Specialist(BaseModel):
    role: str = Field(description="A medical specialty, e.g. 'Cardiologist'.")
    expertise: str = Field(description="What this specialist will look at in this case, in a few words.")


class AgentCount(CaseSignature):
    """Decide how many clinicians this question deserves: 2 for a narrow single-domain fact,
    3 for a typical clinical vignette, 4 when several organ systems or disciplines are involved."""

    # default None: an unusable reply parses to None (not the Literal's first value), and the
    # program uses its documented default size, counted as a fallback
    n_agents: Literal[2, 3, 4] = dspy.OutputField(default=None)
    reason: str = dspy.OutputField(desc="One sentence.")


class SpecialtyRecruitment(CaseSignature):
    """You are assembling a consult team. Choose exactly `n_agents` distinct medical specialties
    whose judgement matters most for this question, most relevant first."""

    n_agents: int = dspy.InputField(desc="How many specialists to recruit.")
    question_analysis: str = dspy.InputField(desc="Known pitfalls of the question; may be empty.")
    specialists: list[Specialist] = dspy.OutputField(desc="Most relevant first.")


class QuestionTricks(CaseSignature):
    """Read the question like an exam writer. In one sentence, name what could trip a
    careful clinician up: a negation (EXCEPT, NOT), a time course, a 'most likely' versus
    'next best step' distinction, a distractor finding. Do not answer the question."""

    analysis: str = dspy.OutputField(desc="One sentence.")
