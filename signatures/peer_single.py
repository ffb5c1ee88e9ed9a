"""Single-agent baselines: answer at once, or reason step by step first."""

from __future__ import annotations

import dspy

from teammed.schema import Choice
from teammed.signatures.assessment import Confidence


class DirectAnswer(dspy.Signature):
    """Answer the medical multiple-choice question: give the letter of the one best option and
    say how confident you are."""

    question: str = dspy.InputField()
    options: dict[str, str] = dspy.InputField(desc="Answer options keyed by letter.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")


class ReasonedAnswer(dspy.Signature):
    """Work through the medical multiple-choice question step by step: pick out the key
    findings, say what they point to and why the competing options fall short. Then give the
    letter of the one best option and say how confident you are."""

    question: str = dspy.InputField()
    options: dict[str, str] = dspy.InputField(desc="Answer options keyed by letter.")
    reasoning: str = dspy.OutputField(desc="Step by step, under 150 words.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")
