"""Closed-loop communication: the receiver acknowledges, the sender verifies."""

from __future__ import annotations

import dspy

from teammed.signatures.case import CaseSignature


class Acknowledge(CaseSignature):
    """As the clinician in `role`, acknowledge a colleague's message: restate its key clinical
    claim in your own words and say whether you agree."""

    role: str = dspy.InputField()
    sender: str = dspy.InputField(desc="Who sent the message.")
    message: str = dspy.InputField()
    restatement: str = dspy.OutputField(desc="One sentence.")
    agrees: bool = dspy.OutputField()


class VerifyUnderstanding(CaseSignature):
    """A colleague restated your message. Check the restatement: confirm it if it keeps your
    meaning, otherwise give the correction in one sentence."""

    original_message: str = dspy.InputField()
    restatement: str = dspy.InputField()
    confirmed: bool = dspy.OutputField()
    correction: str = dspy.OutputField(desc="Empty when confirmed.")
