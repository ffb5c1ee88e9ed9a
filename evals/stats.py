"""Statistics across seeds and between paired systems: mean ± SE, exact McNemar, paired bootstrap.

Pairs follow one rule, `pair_once`: a question counts once. Two sides are paired on the
questions both answered, each question at the first seed (in natural order) at which both
answered it; its answers at other seeds are counted as ``repeats`` and left out, because McNemar's
test and the bootstrap need independent pairs and three seeds drawing one question are one
question, not three.
"""

from __future__ import annotations

import logging
import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from teammed.evals._facts import RowFacts, facts_of
from teammed.evals._rows import AnyRow

__all__ = [
    "MeanSE",
    "mean_se",
    "mcnemar",
    "Key",
    "Pairing",
    "pair_once",
    "by_question",
    "outcomes_of",
    "natural_key",
    "match_pairs",
    "discordant",
    "bootstrap_pairs",
    "paired_bootstrap",
    "paired_comparison",
    "holm",
    "mde_paired",
    "PublishedCheck",
    "published_consistency",
    "wilson_interval",
    "binomial_se",
    "CellEstimate",
    "cell_estimate",
    "t_sf",
    "t_ppf",
    "welch_t_test",
    "mde_t",
    "versus_runner_up",
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


Key = tuple[str, str]  # (seed, question id); a source without seeds uses "" as its seed


class Pairing(NamedTuple):
    """Two sides paired by `pair_once`: one ``(ours, theirs)`` per question, in ``keys`` order."""

    keys: list[Key]  # the (seed, id) each pair was taken at
    pairs: list[tuple[bool, bool]]
    repeats: int  # answers both gave to a question already paired at an earlier seed (left out)
    unpaired: int  # questions (distinct ids) only one side answered

    @property
    def n(self) -> int:
        return len(self.pairs)


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that puts ``"9"`` before ``"10"`` and ``"q2"`` before ``"q10"``."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)


def pair_once(ours: Mapping[Key, bool], theirs: Mapping[Key, bool]) -> Pairing:
    """THE pairing rule of teammed: each question once, at the first seed both sides answered it.

    ``ours``/``theirs`` map ``(seed, id)`` to whether that answer was right. Every paired test the
    project makes (report's significance table, ``report --compare``, ``reproduce``'s tests, the
    runner-up tests of ``search`` and ``tune``, published methods beside runs) goes through here.
    """
    both = sorted(ours.keys() & theirs.keys(), key=lambda k: (natural_key(k[0]), natural_key(k[1])))
    first: dict[str, Key] = {}
    for key in both:
        first.setdefault(key[1], key)
    keys = sorted(first.values(), key=lambda k: natural_key(k[1]))
    ids_ours, ids_theirs = {k[1] for k in ours}, {k[1] for k in theirs}
    return Pairing(keys=keys, pairs=[(ours[k], theirs[k]) for k in keys], repeats=len(both) - len(keys),
                   unpaired=len(ids_ours ^ ids_theirs))


def by_question(outcomes: Mapping[str, bool], seed: str = "") -> dict[Key, bool]:
    """Outcomes keyed by question id alone (one sample, no seeds) as `pair_once` takes them."""
    return {(seed, qid): bool(right) for qid, right in outcomes.items()}


def outcomes_of(rows: Iterable[AnyRow | RowFacts]) -> dict[Key, bool]:
    """``(seed, id) -> right`` of the labelled rows; a failed question counts as wrong."""
    return {(str(row.seed), row.id): bool(row.correct) and not row.failed for row in facts_of(rows) if row.labeled}


def match_pairs(
    rows: Iterable[AnyRow | RowFacts], baseline_rows: Iterable[AnyRow | RowFacts]
) -> Pairing:
    """`pair_once` of two sets of rows (`ResultRow` values, their stored form or their `RowFacts`)."""
    pairing = pair_once(outcomes_of(rows), outcomes_of(baseline_rows))
    if pairing.repeats or pairing.unpaired:
        logger.debug("paired %d questions (%d repeats at other seeds, %d answered by one side)",
                     pairing.n, pairing.repeats, pairing.unpaired)
    return pairing


def discordant(pairs: Sequence[tuple[bool, bool]]) -> tuple[int, int]:
    """``(b, c)``: pairs only the configuration got right, pairs only the baseline got right."""
    b = sum(ours and not theirs for ours, theirs in pairs)
    c = sum(theirs and not ours for ours, theirs in pairs)
    return b, c


def bootstrap_pairs(
    pairs: Sequence[tuple[bool, bool]], *, n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95
) -> dict[str, Any] | None:
    """Percentile bootstrap CI of the accuracy difference (ours − theirs) over ``pairs`` (one per
    question), resampled with replacement ``n_resamples`` times by a seeded generator. None without pairs."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1) (got {confidence}); use e.g. 0.95")
    if not pairs:
        return None
    delta = np.array([float(a) - float(b) for a, b in pairs])
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(delta), size=(n_resamples, len(delta)))
    diffs = delta[draws].mean(axis=1)
    alpha = 1 - confidence
    low, high = np.quantile(diffs, [alpha / 2, 1 - alpha / 2])
    return {"diff": float(delta.mean()), "ci_low": float(low), "ci_high": float(high), "confidence": confidence,
            "n_pairs": len(pairs), "n_resamples": n_resamples}


def paired_bootstrap(
    rows: Iterable[AnyRow | RowFacts],
    baseline_rows: Iterable[AnyRow | RowFacts],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any] | None:
    """`bootstrap_pairs` over the questions of two sets of rows, each question once (`pair_once`)."""
    return bootstrap_pairs(match_pairs(rows, baseline_rows).pairs, n_resamples=n_resamples, seed=seed,
                           confidence=confidence)


def paired_comparison(
    rows: Iterable[AnyRow | RowFacts],
    baseline_rows: Iterable[AnyRow | RowFacts],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any] | None:
    """Accuracy difference, McNemar's b, c and p, the bootstrap CI and the MDE of two sets of rows, each
    question once (`match_pairs`). None when they share no question."""
    pairing = match_pairs(rows, baseline_rows)
    pairs = pairing.pairs
    if not pairs:
        return None
    b, c = discordant(pairs)
    alpha, power = 0.05, 0.8
    return {
        **(bootstrap_pairs(pairs, n_resamples=n_resamples, seed=seed) or {}),
        "b": b,
        "c": c,
        "p_mcnemar": mcnemar(b, c),
        "repeats": pairing.repeats,
        "unpaired": pairing.unpaired,
        "mde": mde_paired(len(pairs), (b + c) / len(pairs), alpha=alpha, power=power),
        "mde_alpha": alpha,
        "mde_power": power,
    }


def wilson_interval(correct: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``correct / n`` (shares, 0-1); sound at 0 and n."""
    if n <= 0 or not 0 <= correct <= n:
        raise ValueError(f"need 0 <= correct <= n and n > 0 (got correct={correct}, n={n})")
    z = statistics.NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    return (0.0 if correct == 0 else low), (1.0 if correct == n else high)  # exact at the ends, no rounding dust


# ---------------------------------------------------------------- many tests, small samples
def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (family-wise error), in the input's order; None stays None.
    Reject where the adjusted p <= alpha."""
    present = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    for p, _ in present:
        if not 0.0 <= p <= 1.0 or math.isnan(p):
            raise ValueError(f"p-values must be in [0, 1] (got {p})")
    m = len(present)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, index) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted


def binomial_se(correct: int, n: int, *, confidence: float = 0.95) -> float:
    """The Agresti-Coull standard error of a proportion ``correct / n`` (a share, 0-1).

    p~ = (correct + z^2/2) / (n + z^2), SE = sqrt(p~ (1 - p~) / (n + z^2)): never 0, so 2 of 2
    questions right is not an accuracy known exactly (sqrt(p(1-p)/n) would say 0).
    """
    if n <= 0 or not 0 <= correct <= n:
        raise ValueError(f"need 0 <= correct <= n and n > 0 (got correct={correct}, n={n})")
    z2 = statistics.NormalDist().inv_cdf(1 - (1 - confidence) / 2) ** 2
    p = (correct + z2 / 2) / (n + z2)
    return math.sqrt(p * (1 - p) / (n + z2))


class CellEstimate(NamedTuple):
    """A cell's accuracy (a share) and the standard error its tests use.

    ``se`` is the larger of the seeds' SE (sample SD / sqrt(k), ``df = k - 1``) and the binomial SE
    of the cell's ``n`` distinct questions (`binomial_se`, ``df`` infinite): one seed, or seeds that
    agree, never make a cell look exact, and three seeds that drew the same 14 questions are 14
    questions, not 42. ``source`` says which one it is ("seeds" or "binomial").
    """

    mean: float
    se: float
    df: float
    source: str
    k: int
    n: int  # distinct questions


def cell_estimate(accuracies: Sequence[float], sizes: Sequence[int], *, distinct: int | None = None) -> CellEstimate:
    """`CellEstimate` of ``accuracies`` (one share per seed) measured on ``sizes`` questions each, of which
    ``distinct`` are different questions (default: all of them, seeds that drew disjoint samples)."""
    if not accuracies or len(accuracies) != len(sizes) or min(sizes) <= 0:
        raise ValueError(f"need one accuracy per seed and a positive size each (got {len(accuracies)} "
                         f"accuracies, sizes {list(sizes)})")
    n = sum(sizes) if distinct is None else distinct
    if not max(sizes) <= n <= sum(sizes):
        raise ValueError(f"distinct questions must lie between the largest seed's size and their sum "
                         f"(got {distinct} for sizes {list(sizes)})")
    mean, seeds, k = mean_se(accuracies)
    correct = min(n, max(0, round(mean * n)))
    floor = binomial_se(correct, n)
    if seeds is not None and seeds >= floor:
        return CellEstimate(mean, seeds, float(k - 1), "seeds", k, n)
    return CellEstimate(mean, floor, math.inf, "binomial", k, n)


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (``math.inf``: the normal law)."""
    if not df > 0:
        raise ValueError(f"degrees of freedom must be positive (got {df})")
    import scipy.stats  # here, not at import: 0.8 s that only small-sample tests need

    return float(scipy.stats.t.sf(t, df)) if not math.isinf(df) else 1.0 - statistics.NormalDist().cdf(t)


def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom."""
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1) (got {q})")
    import scipy.stats

    return float(scipy.stats.t.ppf(q, df)) if not math.isinf(df) else statistics.NormalDist().inv_cdf(q)


def welch_t_test(diff: float, se_a: float, df_a: float, se_b: float, df_b: float) -> tuple[float, float] | None:
    """Two-sided p of a difference of two independent means with SEs ``se_a``/``se_b`` on ``df_a``/``df_b``
    degrees of freedom: Welch's t with Satterthwaite's df, ``(p, df)``. None when both SEs are 0."""
    var_a, var_b = se_a * se_a, se_b * se_b
    if var_a + var_b <= 0:
        return None
    parts = (var_a * var_a / df_a if not math.isinf(df_a) else 0.0) + (var_b * var_b / df_b if not math.isinf(df_b)
                                                                           else 0.0)
    df = (var_a + var_b) ** 2 / parts if parts > 0 else math.inf
    t = abs(diff) / math.sqrt(var_a + var_b)
    return min(1.0, 2 * t_sf(t, df)), df


def mde_t(se: float, df: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true difference a two-sided t-test at ``alpha`` on ``df`` degrees of freedom detects
    with ``power``, given the difference's SE: (t_{1-alpha/2} + t_power) * se."""
    if se < 0:
        raise ValueError(f"se must be non-negative (got {se})")
    return (t_ppf(1 - alpha / 2, df) + t_ppf(power, df)) * se


def versus_runner_up(winner: dict[str, bool], runner_up: dict[str, bool], *, alpha: float = 0.05) -> dict[str, Any]:
    """Whether a winner's lead over the runner-up is within noise: the exact McNemar test on the questions
    both answered (``winner``/``runner_up`` map a question id to correct), paired by `pair_once`.
    ``within_noise`` when p >= ``alpha``, or when no question is shared (nothing shows the lead is real)."""
    pairing = pair_once(by_question(winner), by_question(runner_up))
    b, c = discordant(pairing.pairs)
    p = mcnemar(b, c) if pairing.n else None
    return {"n_pairs": pairing.n, "b": b, "c": c, "p_mcnemar": p, "alpha": alpha,
            "within_noise": p is None or p >= alpha, "test": "exact McNemar on paired questions"}


def mde_paired(n_pairs: int, discordant_share: float, *, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Smallest accuracy difference (a share, 0-1) a paired test on ``n_pairs`` questions detects with
    ``power`` at two-sided ``alpha``, when ``discordant_share`` of the pairs disagree.

    Normal approximation of McNemar's test: the difference b/n - c/n has SE sqrt(d/n) with d the
    discordant share, so the MDE is (z_{1-alpha/2} + z_power) * sqrt(d/n). A share of 0 is taken as
    1/n (no disagreement seen is not evidence that none exists). None without pairs.
    """
    if n_pairs <= 0:
        return None
    if not 0.0 <= discordant_share <= 1.0:
        raise ValueError(f"discordant_share must be in [0, 1] (got {discordant_share})")
    share = max(discordant_share, 1.0 / n_pairs)
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must be in (0, 1) (got alpha={alpha}, power={power})")
    normal = statistics.NormalDist()
    return min(1.0, (normal.inv_cdf(1 - alpha / 2) + normal.inv_cdf(power)) * math.sqrt(share / n_pairs))


class PublishedCheck(NamedTuple):
    """Whether a published mean ± SE (percent, rounded to ``decimals``) can come from ``k`` runs of ``n``
    questions each: the mean must be a multiple of 100/(k n) and some k accuracies with that mean must
    give the SE (``se_possible``) or, read as a standard deviation, the SD (``sd_possible``)."""

    mean_possible: bool
    se_possible: bool
    sd_possible: bool

    @property
    def consistent(self) -> bool:
        """Mean and SE both possible: only such a cell may be tested against."""
        return self.mean_possible and self.se_possible


def published_consistency(mean: float, se: float, *, n: int, k: int, decimals: int = 1) -> PublishedCheck:
    """Check a published cell against its protocol (``k`` seeds x ``n`` questions); see `PublishedCheck`."""
    if n <= 0 or k <= 1:
        raise ValueError(f"need n >= 1 questions and k >= 2 runs (got n={n}, k={k})")
    tolerance = 0.5 * 10**-decimals + 1e-9
    total = round(mean * k * n / 100)  # correct answers over all runs
    mean_possible = 0 <= total <= k * n and abs(100 * total / (k * n) - mean) <= tolerance
    if not mean_possible:
        return PublishedCheck(False, False, False)
    se_ok = sd_ok = False
    for counts in _compositions(total, k, n):
        accs = [100 * c / n for c in counts]
        sd = statistics.stdev(accs)
        se_ok = se_ok or abs(sd / math.sqrt(k) - se) <= tolerance
        sd_ok = sd_ok or abs(sd - se) <= tolerance
        if se_ok and sd_ok:
            break
    return PublishedCheck(True, se_ok, sd_ok)


def _compositions(total: int, k: int, cap: int, low: int = 0) -> Iterable[tuple[int, ...]]:
    """Non-decreasing k-tuples in [low, cap] summing to ``total`` (the runs' correct counts, unordered)."""
    if k == 1:
        if low <= total <= cap:
            yield (total,)
        return
    for first in range(low, min(cap, total // k) + 1):
        for rest in _compositions(total - first, k - 1, cap, first):
            yield (first, *rest)
