"""Single-agent baselines: answer at once, or reason step by step first."""

from __future__ import annotations

import dspy

from teammed.schema import Choice
from teammed.signatures.assessment import Confidence
from teammed.signatures.case import CaseSignature


class DirectAnswer(CaseSignature):
    """Answer the medical multiple-choice question: give the letter of the one best option and
    say how confident you are."""

    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")


class ReasonedAnswer(CaseSignature):
    """Work through the medical multiple-choice question step by step: pick out the key
    findings, say what they point to and why the competing options fall short. Then give the
    letter of the one best option and say how confident you are."""

    reasoning: str = dspy.OutputField(desc="Step by step, under 150 words.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")
