"""Round 3: the round-robin discussion and the final ranking."""

from __future__ import annotations

import dspy

from teammed.schema import Choice
from teammed.signatures.assessment import Confidence


class DiscussionTurn(dspy.Signature):
    """Take your turn in the team discussion as the clinician in `role`. Respond to what your
    colleagues said: agree where the evidence supports them, challenge what it does not, and
    add what only your specialty sees. State which option you currently favour."""

    question: str = dspy.InputField()
    options: dict[str, str] = dspy.InputField(desc="Answer options keyed by letter.")
    role: str = dspy.InputField(desc="Who you are on this team and what you focus on.")
    team_context: str = dspy.InputField(desc="Round-2 summary, shared knowledge, reports, leader notes.")
    history: str = dspy.InputField(desc="The discussion so far; may be empty.")
    message: str = dspy.OutputField(desc="Under 100 words.")
    current_choice: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]


class FinalRanking(dspy.Signature):
    """Give your final ranking after the discussion, as the clinician in `role`. Rank every
    option from most to least likely correct, say how confident you are, and give the one
    reason that decided it."""

    question: str = dspy.InputField()
    options: dict[str, str] = dspy.InputField(desc="Answer options keyed by letter.")
    role: str = dspy.InputField(desc="Who you are on this team and what you focus on.")
    team_context: str = dspy.InputField(desc="Round-2 summary, shared knowledge, reports, leader notes.")
    history: str = dspy.InputField(desc="The discussion so far; may be empty.")
    ranking: list[Choice("options")] = dspy.OutputField(desc="All option letters, best first.")  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")
    rationale: str = dspy.OutputField(desc="One or two sentences.")
