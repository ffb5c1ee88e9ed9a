"""Metrics the optimizers score programs with: plain accuracy, and GEPA's textual feedback (both pure
functions of the gold example and the prediction)."""

from __future__ import annotations

from typing import Any

import dspy

from teammed.optimizers._diagnosis import diagnose, scope_of
from teammed.results import read_record

__all__ = ["accuracy_metric", "deliberation_feedback"]


def accuracy_metric(example: dspy.Example, pred: Any, trace: Any = None) -> float:
    """1.0 when the program's answer is the gold letter, else 0.0."""
    answer = getattr(pred, "answer", None)
    return float(answer is not None and answer == example.answer)


def deliberation_feedback(
    gold: dspy.Example,
    pred: Any,
    trace: Any = None,
    pred_name: str | None = None,
    pred_trace: Any = None,
) -> dspy.Prediction:
    """GEPA's feedback metric: the accuracy score and a diagnosis of the deliberation, about the predictor
    ``pred_name``'s part only when given (``leader.resolve_tie.predict`` hears only about the tie)."""
    answer = getattr(pred, "answer", None)
    record = read_record(getattr(pred, "record", None))  # a Deliberation, a peer system's record, or None
    feedback = diagnose(record, answer=answer, gold=gold.answer, scope=scope_of(pred_name))
    return dspy.Prediction(score=accuracy_metric(gold, pred), feedback=feedback)
