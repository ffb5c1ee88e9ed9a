"""`Behaviour`: one teamwork behaviour as a named, separately optimizable predictor."""

from __future__ import annotations

from typing import Any

import dspy

from teammed.adapter import calling_signature

__all__ = ["Behaviour"]


class Behaviour(dspy.Module):
    """Wraps one `dspy.Predict` and tags its LM calls with the behaviour's name.

    The name is the signature's class name at construction; it stays stable when an
    optimizer rewrites the instructions, so accounting and schemas keep their labels.
    """

    def __init__(self, signature: type[dspy.Signature]):
        super().__init__()
        self.name = signature.__name__
        self.predict = dspy.Predict(signature)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        token = calling_signature.set(self.name)
        try:
            return self.predict(**inputs)
        finally:
            calling_signature.reset(token)
