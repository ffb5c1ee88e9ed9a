"""Round 2: each clinician's independent assessment."""

from __future__ import annotations

from typing import Literal

import dspy

from teammed.schema import Choice
from teammed.signatures.case import CaseSignature

Confidence = Literal["High", "Medium", "Low"]


class InitialAssessment(CaseSignature):
    """Work the question alone, as the clinician in `role`: rank every option from most to least
    likely correct, justify your top choice, list the medical facts your reasoning rests on,
    and say how confident you are."""

    role: str = dspy.InputField(desc="Who you are on this team and what you focus on.")
    shared_context: str = dspy.InputField(desc="What the whole team already knows; may be empty.")
    ranking: list[Choice("options")] = dspy.OutputField(desc="All option letters, best first.")  # type: ignore[valid-type]
    justification: str = dspy.OutputField(desc="At most two sentences.")
    facts: list[str] = dspy.OutputField(desc="Two to five key medical facts.", min_length=2, max_length=5)
    confidence: Confidence = dspy.OutputField(default="Low")


class ImageAssessment(InitialAssessment):
    """Work the question alone, as the clinician described in `role`, looking closely at the
    image it refers to. Rank every option from most to least likely correct, justify your top
    choice in at most two sentences citing what you see, list the two to five findings or
    facts your reasoning rests on, and say how confident you are."""

    image: dspy.Image = dspy.InputField(desc="The image the question refers to.")
