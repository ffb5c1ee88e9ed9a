"""Statistics across seeds and between paired systems: mean ± SE, exact McNemar, paired bootstrap.

Pairs are questions matched by ``(seed, id)``: the same question under the same seed,
answered by a configuration and by the baseline.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from teammed.evals._rows import AnyRow, is_correct, is_labeled, typed_rows

__all__ = [
    "MeanSE",
    "mean_se",
    "mcnemar",
    "match_pairs",
    "discordant",
    "paired_bootstrap",
    "paired_comparison",
]

logger = logging.getLogger(__name__)


class MeanSE(NamedTuple):
    """Mean over ``k`` runs and its standard error (None when ``k == 1``)."""

    mean: float
    se: float | None
    k: int


def mean_se(values: Iterable[float]) -> MeanSE:
    """Mean ± standard error: SE = sample std (ddof=1) / sqrt(k)."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_se needs at least one value (got none); pass one value per run")
    k = len(values)
    se = statistics.stdev(values) / math.sqrt(k) if k > 1 else None
    return MeanSE(statistics.fmean(values), se, k)


def mcnemar(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: a binomial(b + c, 1/2) test on the discordant pairs.

    ``b`` counts pairs only the configuration got right, ``c`` pairs only the baseline got right.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative (got b={b}, c={c})")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


def _by_key(rows: Iterable[AnyRow]) -> dict[tuple[str, str], bool]:
    return {(str(row.seed), row.id): is_correct(row) for row in typed_rows(rows) if is_labeled(row)}


def match_pairs(rows: Iterable[AnyRow], baseline_rows: Iterable[AnyRow]) -> list[tuple[bool, bool]]:
    """(config correct, baseline correct) for each ``(seed, id)`` both answered, in key order.
    Rows are `ResultRow` values or their stored (dict) form."""
    ours, theirs = _by_key(rows), _by_key(baseline_rows)
    shared = sorted(ours.keys() & theirs.keys())
    if len(shared) < max(len(ours), len(theirs)):
        logger.debug("paired %d of %d/%d questions by (seed, id)", len(shared), len(ours), len(theirs))
    return [(ours[key], theirs[key]) for key in shared]


def discordant(pairs: Sequence[tuple[bool, bool]]) -> tuple[int, int]:
    """``(b, c)``: pairs only the configuration got right, pairs only the baseline got right."""
    b = sum(ours and not theirs for ours, theirs in pairs)
    c = sum(theirs and not ours for ours, theirs in pairs)
    return b, c


def paired_bootstrap(
    rows: Iterable[AnyRow],
    baseline_rows: Iterable[AnyRow],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any] | None:
    """Percentile bootstrap CI of the accuracy difference (config − baseline) over matched pairs.

    Resamples the ``(seed, id)`` pairs with replacement ``n_resamples`` times with a
    seeded generator. None when no question is paired.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1) (got {confidence}); use e.g. 0.95")
    pairs = match_pairs(rows, baseline_rows)
    if not pairs:
        return None
    delta = np.array([float(a) - float(b) for a, b in pairs])
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(delta), size=(n_resamples, len(delta)))
    diffs = delta[draws].mean(axis=1)
    alpha = 1 - confidence
    low, high = np.quantile(diffs, [alpha / 2, 1 - alpha / 2])
    return {
        "diff": float(delta.mean()),
        "ci_low": float(low),
        "ci_high": float(high),
        "confidence": confidence,
        "n_pairs": len(pairs),
        "n_resamples": n_resamples,
    }


def paired_comparison(
    rows: Iterable[AnyRow], baseline_rows: Iterable[AnyRow], *, n_resamples: int = 2000, seed: int = 0
) -> dict[str, Any] | None:
    """Accuracy difference, McNemar's b, c and p, and the bootstrap CI, over matched pairs."""
    rows, baseline_rows = list(rows), list(baseline_rows)
    pairs = match_pairs(rows, baseline_rows)
    if not pairs:
        return None
    b, c = discordant(pairs)
    boot = paired_bootstrap(rows, baseline_rows, n_resamples=n_resamples, seed=seed) or {}
    return {**boot, "b": b, "c": c, "p_mcnemar": mcnemar(b, c)}
