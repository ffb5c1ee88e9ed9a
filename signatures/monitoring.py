"""Mutual monitoring: the leader finds the weakest reasoning, challenges it and judges the reply."""

from __future__ import annotations

from typing import Literal

import dspy

from teammed.schema import Choice
from teammed.signatures.case import CaseSignature


class WeakestReasoning(CaseSignature):
    """As team leader, read this turn and pick the one clinician whose reasoning is weakest:
    a factual error, an unsupported leap, or an ignored key finding."""

    turn_messages: str = dspy.InputField(desc="What each clinician said this turn, by id.")
    agents: list[str] = dspy.InputField(desc="The ids to choose from.")
    agent: Choice("agents") = dspy.OutputField()  # type: ignore[valid-type]
    reason: str = dspy.OutputField(desc="One sentence.")


class RaiseConcern(CaseSignature):
    """As team leader, raise one specific, answerable concern about this clinician's reasoning
    and say how much it matters for the patient."""

    agent_message: str = dspy.InputField(desc="The reasoning being challenged and the option it favours.")
    concern: str = dspy.OutputField(desc="One or two sentences, phrased as a question.")
    severity: Literal["high", "medium", "low"] = dspy.OutputField(default="medium")


class RespondToConcern(CaseSignature):
    """Your team leader challenged your reasoning. As the clinician in `role`, answer the concern
    directly (defend your view with evidence, or correct it) and state the option you now favour."""

    role: str = dspy.InputField()
    own_message: str = dspy.InputField(desc="What you said this turn.")
    concern: str = dspy.InputField()
    response: str = dspy.OutputField(desc="Under 50 words.")
    revised_choice: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]


class EvaluateResponse(CaseSignature):
    """As team leader, judge the reply to your concern: `strong` if it resolves it with sound
    evidence, `weak` if it misses it or rests on an error, `disputed` if clinicians could still
    reasonably disagree."""

    concern: str = dspy.InputField()
    response: str = dspy.InputField()
    verdict: Literal["strong", "weak", "disputed"] = dspy.OutputField(default="disputed")
    reason: str = dspy.OutputField(desc="One sentence.")
