"""Voting baselines: independent expert ballots, and ballots revised after seeing the others."""

from __future__ import annotations

import dspy

from teammed.schema import Choice
from teammed.signatures.assessment import Confidence
from teammed.signatures.case import CaseSignature


class IndependentVote(CaseSignature):
    """You are one of several medical experts answering the same question without conferring.
    Reason briefly, then give the letter of the option you judge best and how sure you are."""

    expert: str = dspy.InputField(desc="Which expert of the panel you are.")
    reasoning: str = dspy.OutputField(desc="Under 80 words.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")


class RevisedVote(CaseSignature):
    """The panel has not agreed yet. Read the other experts' answers and reasons next to your
    own. Keep your answer if the evidence still favours it; change it if a colleague's
    argument is stronger. Give your answer now and how sure you are."""

    expert: str = dspy.InputField(desc="Which expert of the panel you are.")
    own_answer: str = dspy.InputField(desc="Your previous answer and reason.")
    peer_answers: str = dspy.InputField(desc="The other experts' previous answers and reasons.")
    reasoning: str = dspy.OutputField(desc="Under 80 words.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
    confidence: Confidence = dspy.OutputField(default="Low")
