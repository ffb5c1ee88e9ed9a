"""Single-agent baselines: zero-shot, few-shot (seeded demos) and chain of thought.

Each makes exactly one LM call per question. An answer naming no option is never read as
one: the question fails with `NoAnswerError` (and the row counts the fallback).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dspy
from pydantic import Field

from teammed.programs.behaviour import Behaviour
from teammed.programs.peers._shared import (
    PeerSystem,
    Settings,
    answer_letter,
    as_confidence,
    as_demos,
    prediction,
    question_text,
    select_examples,
)
from teammed.programs.team import Transcript
from teammed.signatures.peer_single import DirectAnswer, ReasonedAnswer

__all__ = ["ZeroShot", "FewShot", "SingleAgentCoT"]


def _single(system: Any, phase: str, question: str, options: dict[str, str], context: str | None, *,
             reasoned: bool = False) -> dspy.Prediction:
    """``system``'s one call of its ``answer`` behaviour; when ``reasoned``, its reasoning is the rationale."""
    options = dict(options)
    out = system.answer(question=question_text(question, context), options=options)
    reasoning = str(out.reasoning or "") if reasoned else ""
    answer = answer_letter(out.answer, options, system=phase, behaviour=system.answer.name)
    confidence = as_confidence(out.confidence)
    transcript = Transcript()
    transcript.add(
        phase,
        "answer",
        reasoning,
        agent="agent_1",
        role="Medical Expert",
        choice=answer,
        confidence=confidence,
    )
    rationale = reasoning or f"Answer {answer} ({options[answer]})."
    return prediction(answer, rationale, confidence, {"route": None}, transcript)


class ZeroShot(PeerSystem):
    """One model answers the question directly."""

    system_name = "zero_shot"

    def __init__(self) -> None:
        super().__init__()
        self.answer = Behaviour(DirectAnswer)

    def forward(self, question: str, options: dict[str, str], context: str | None = None) -> dspy.Prediction:
        return _single(self, "zero_shot", question, options, context)


class FewShotSettings(Settings):
    k: int = Field(default=3, ge=0, le=32)
    seed: int = 0


class FewShot(PeerSystem):
    """Zero-shot with ``k`` worked examples drawn from ``trainset`` by ``seed``, as DSPy demos.

    ``trainset`` items are ``{question, options, answer}`` mappings (``context`` optional) or
    `teammed.Question`s. The draw is fixed at construction, so the same seed gives the same
    demos; optimizers may replace them later like any predictor's demos.
    """

    system_name = "few_shot"

    def __init__(self, *, trainset: Sequence[Any] = (), k: int = 3, seed: int = 0) -> None:
        super().__init__()
        self.config = FewShotSettings.build("FewShot", k=k, seed=seed)
        self.answer = Behaviour(DirectAnswer)
        self.answer.predict.demos = as_demos(select_examples(list(trainset), k, seed))

    def forward(self, question: str, options: dict[str, str], context: str | None = None) -> dspy.Prediction:
        return _single(self, "few_shot", question, options, context)


class SingleAgentCoT(PeerSystem):
    """One model reasons step by step, then answers; the reasoning is the rationale (system ``cot``).

    Formerly ``ChainOfThought``, renamed so as not to shadow `dspy.ChainOfThought` (a module, not a
    whole answering system); the old name is a deprecated alias for one release.
    """

    system_name = "cot"

    def __init__(self) -> None:
        super().__init__()
        self.answer = Behaviour(ReasonedAnswer)

    def forward(self, question: str, options: dict[str, str], context: str | None = None) -> dspy.Prediction:
        return _single(self, "cot", question, options, context, reasoned=True)


# Deprecated names (one release): old name -> new name.
DEPRECATED = {"ChainOfThought": "SingleAgentCoT"}


def deprecated_alias(module: str, name: str) -> Any:
    """The object a deprecated name stands for, with a DeprecationWarning naming the new one."""
    import warnings

    new = DEPRECATED[name]
    warnings.warn(f"{module}.{name} is deprecated and will be removed in the next release; use "
                  f"{module}.{new} (it is not dspy.{name})", DeprecationWarning, stacklevel=3)
    return globals()[new]


def __getattr__(name: str) -> Any:
    if name in DEPRECATED:
        return deprecated_alias(__name__, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
