"""What the team leader does: distil facts, write the case report, judge work, mediate, break ties, correct."""

from __future__ import annotations

from typing import Annotated, Literal

import dspy

from teammed.schema import Choice, SameLengthAs
from teammed.signatures.case import CaseSignature


class ConsensusFacts(CaseSignature):
    """As team leader, keep only the medical facts that several clinicians rely on or that are
    uncontroversial. Drop opinions and answer choices."""

    assessments: str = dspy.InputField(desc="The facts each clinician's independent assessment rests on.")
    facts: list[str] = dspy.OutputField(desc="Up to four verified facts.", max_length=4)


class FormalReport(CaseSignature):
    """As team leader, write a short structured case report for the team: the key findings, the
    leading hypotheses with the evidence for and against each, and the open questions."""

    assessments: str = dspy.InputField(desc="Each clinician's ranking and justification.")
    shared_context: str = dspy.InputField(desc="What the whole team already knows; may be empty.")
    report: str = dspy.OutputField(desc="Under 60 words.")


class AssessmentQuality(CaseSignature):
    """As team leader, grade each independent assessment for the soundness of its reasoning:
    correct facts, complete consideration of the options, and confidence that matches the
    strength of the evidence. Grade the reasoning, not whether you agree with the answer."""

    assessments: str = dspy.InputField(desc="Each clinician's ranking, justification and facts.")
    agents: list[str] = dspy.InputField(desc="The ids of the clinicians to grade.")
    # Plain floats: decoders do not enforce numeric bounds, so out-of-range grades are clamped in code.
    grades: Annotated[list[float], SameLengthAs("agents")] = dspy.OutputField(
        desc="One grade per clinician, in the order of `agents`: 0 = unreliable reasoning, 1 = excellent."
    )


class Mediation(CaseSignature):
    """As team leader, mediate this turn: where the team agrees, the disagreement that matters
    most, any reasoning error you see. Do not impose your own answer."""

    turn_messages: str = dspy.InputField(desc="What each clinician said this turn.")
    shared_context: str = dspy.InputField(desc="What the whole team already knows; may be empty.")
    synthesis: str = dspy.OutputField(desc="Under 50 words.")


class TieResolution(CaseSignature):
    """The team's vote is tied. As team leader, choose one of the tied options, weighing the
    final rankings, how reliable each clinician has been, and the verified facts."""

    tied_options: dict[str, str] = dspy.InputField(desc="Only the tied options, keyed by letter.")
    rankings: str = dspy.InputField(desc="Each clinician's final ranking and rationale.")
    shared_context: str = dspy.InputField(desc="Verified facts, debated points, reliability notes.")
    answer: Choice("tied_options") = dspy.OutputField()  # type: ignore[valid-type]
    reason: str = dspy.OutputField(desc="One or two sentences.")


class CorrectionAuthority(CaseSignature):
    """As team leader with correction authority, check the reasoning behind the team's answer.
    If it rests on a clear error (a wrong fact, a misread finding, an ignored key detail),
    `override`: state the flaw and give the option the evidence supports. Otherwise `uphold`:
    override for a clear error, never for a different opinion."""

    team_answer: str = dspy.InputField(desc="The option the team's vote chose.")
    rankings: str = dspy.InputField(desc="Each clinician's final ranking and reason.")
    shared_context: str = dspy.InputField(desc="Question analysis, verified facts, debated points.")
    decision: Literal["uphold", "override"] = dspy.OutputField(default="uphold")
    flaw: str = dspy.OutputField(desc="One sentence; empty when the reasoning holds.")
    answer: Choice("options") = dspy.OutputField()  # type: ignore[valid-type]
