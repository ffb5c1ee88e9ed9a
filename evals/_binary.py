"""Binary (Yes/No) tasks: confusion counts, precision/recall/specificity/F1 and macro averages.

A row is binary when it names ``binary_positive`` (the letter of the positive class) and has
a gold answer. Predicting any other letter, or nothing, counts as predicting negative.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from teammed.evals._facts import RowFacts, RowLike, facts_of, row_facts
from teammed.evals._rows import mean, ratio, typed

__all__ = ["binary_confusion", "binary_scores", "binary_metrics"]

_SCORES = ("precision", "recall", "specificity", "f1")


def _binary(rows: Iterable[RowLike]) -> list[RowFacts]:
    return [row for row in facts_of(rows) if row.binary_positive and row.gold is not None]


def _group(row: RowLike, by: str) -> str:
    """The row's value of a field (``dataset``, ``label``, ``split`` ...) or of a kept extra
    (``problem``), as text. Facts carry the fields the metrics read and the scalar extras; a row
    carries them all."""
    if isinstance(row, RowFacts):
        value = getattr(row, by) if by in RowFacts.__dataclass_fields__ else row.extra.get(by)
    else:
        value = getattr(row, by, None)
    return str(value)


def binary_confusion(rows: Iterable[RowLike]) -> dict[str, int]:
    """TP/FP/TN/FN over the binary rows."""
    counts = {"TP": 0, "FP": 0, "TN": 0, "FN": 0}
    for row in _binary(rows):
        positive = row.binary_positive
        predicted = row.prediction == positive and not row.failed
        actual = row.gold == positive
        counts[("T" if predicted == actual else "F") + ("P" if predicted else "N")] += 1
    return counts


def binary_scores(counts: Mapping[str, int]) -> dict[str, float | None]:
    """Precision, recall (sensitivity), specificity and F1; None where the denominator is 0."""
    tp, fp, tn, fn = (counts[k] for k in ("TP", "FP", "TN", "FN"))
    return {
        "precision": ratio(tp, tp + fp),
        "recall": ratio(tp, tp + fn),
        "specificity": ratio(tn, tn + fp),
        "f1": ratio(2 * tp, 2 * tp + fp + fn),
    }


def binary_metrics(rows: Iterable[RowLike], *, by: str = "dataset") -> dict[str, Any] | None:
    """Pooled counts and scores, the same per ``by`` group (data set or problem), and the macro
    average of the per-group scores (the unweighted mean over groups, as in Lee et al.)."""
    keyed = [(_group(row, by), facts) for row in (r if isinstance(r, RowFacts) else typed(r) for r in rows)
             if (facts := row_facts(row)).binary_positive and facts.gold is not None]
    binary = [facts for _, facts in keyed]
    if not binary:
        return None
    grouped: dict[str, list[RowFacts]] = {}
    for key, facts in keyed:
        grouped.setdefault(key, []).append(facts)
    per_group = {}
    for name, members in sorted(grouped.items()):
        counts = binary_confusion(members)
        per_group[name] = {**counts, **binary_scores(counts), "n": len(members)}
    overall = binary_confusion(binary)
    return {
        "overall": {**overall, **binary_scores(overall), "n": len(binary)},
        "by_group": per_group,
        "macro": {k: mean(v for g in per_group.values() if (v := g[k]) is not None) for k in _SCORES},
    }
