"""The inputs every case-reading behaviour starts with: the question and its lettered options."""

from __future__ import annotations

import dspy


class CaseSignature(dspy.Signature):
    """A behaviour that reads the case: its own fields follow ``question`` and ``options``."""

    question: str = dspy.InputField()
    options: dict[str, str] = dspy.InputField(desc="Answer options keyed by letter.")
