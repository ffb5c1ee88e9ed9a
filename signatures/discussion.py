"""Round 3: the round-robin discussion and the final ranking."""

from __future__ import annotations

import dspy

from teammed.schema import Choice
from teammed.signatures.assessment import Confidence
from teammed.signatures.case import CaseSignature


class DiscussionTurn(CaseSignature):
    """Your turn in the team discussion, as the clinician in `role`: agree where the evidence
    supports your colleagues, challenge what it does not, add what your specialty sees, and
    state the option you now favour."""

    role: str = dspy.InputField(desc="Who you are on this team and what you focus on.")
    team_context: str = dspy.InputField(
        desc="Round-2 summary, shared knowledge, report on your first turn; then what changed.")
    history: str = dspy.InputField(desc="What was said since you last spoke (your last message marked).")
    message: str = dspy.OutputField(desc="Under 40 words.")
    current_choice: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]


class FinalRanking(CaseSignature):
    """Your final ranking after the discussion, as the clinician in `role`: every option from
    most to least likely correct, your confidence, and the one reason that decided it."""

    role: str = dspy.InputField(desc="Who you are on this team and what you focus on.")
    team_context: str = dspy.InputField(
        desc="Round-2 summary, shared knowledge, report on your first turn; then what changed.")
    history: str = dspy.InputField(desc="What was said since you last spoke (your last message marked).")
    ranking: list[Choice("options")] = dspy.OutputField(desc="All option letters, best first.")  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")
    rationale: str = dspy.OutputField(desc="One sentence.")
