"""Calibration of the team's stated confidence against its correctness.

Confidence is a label ("High", "Medium", "Low"); to compare it with accuracy each label is
mapped to a probability, by default High=0.9, Medium=0.6, Low=0.3 (`DEFAULT_CONFIDENCE_MAP`).
Rows whose confidence is null or not in the map, and unlabeled rows, are left out of every
calibration metric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from teammed.evals._facts import RowLike, facts_of
from teammed.evals._rows import mean

__all__ = ["DEFAULT_CONFIDENCE_MAP", "accuracy_by_confidence", "ece", "brier"]

DEFAULT_CONFIDENCE_MAP: Mapping[str, float] = {"High": 0.9, "Medium": 0.6, "Low": 0.3}


def _scored(rows: Iterable[RowLike], confidence_map: Mapping[str, float]) -> list[tuple[str, float, bool]]:
    return [(str(row.confidence), float(confidence_map[row.confidence]), bool(row.correct) and not row.failed)
            for row in facts_of(rows) if row.labeled and row.confidence in confidence_map]


def accuracy_by_confidence(
    rows: Iterable[RowLike], *, confidence_map: Mapping[str, float] = DEFAULT_CONFIDENCE_MAP
) -> dict[str, dict[str, float]]:
    """Per confidence level present: ``{"n": count, "accuracy": share correct}``, in map order."""
    scored = _scored(rows, confidence_map)
    hits = {level: [correct for lvl, _, correct in scored if lvl == level] for level in confidence_map}
    return {level: {"n": len(h), "accuracy": sum(h) / len(h)} for level, h in hits.items() if h}


def ece(
    rows: Iterable[RowLike], *, confidence_map: Mapping[str, float] = DEFAULT_CONFIDENCE_MAP
) -> float | None:
    """Expected calibration error with one bin per confidence level.

    ``sum_b (n_b / N) * |accuracy_b - p_b|`` where ``p_b`` is the level's mapped probability.
    """
    by_level = accuracy_by_confidence(rows, confidence_map=confidence_map)
    total = sum(stats["n"] for stats in by_level.values())
    if not total:
        return None
    return sum(s["n"] / total * abs(s["accuracy"] - confidence_map[lvl]) for lvl, s in by_level.items())


def brier(
    rows: Iterable[RowLike], *, confidence_map: Mapping[str, float] = DEFAULT_CONFIDENCE_MAP
) -> float | None:
    """Mean squared gap between the mapped confidence and correctness (1/0)."""
    return mean((p - float(correct)) ** 2 for _, p, correct in _scored(rows, confidence_map))
