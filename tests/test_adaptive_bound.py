"""The adaptive choice keeps its promise at small n: an exact loss bound, a correction for the grid, and the
single agent as a candidate (issue 44, item 3)."""

from __future__ import annotations

import math
import random

import pytest
import scipy.stats

from teammed.optimizers.adaptive import (
    ALWAYS,
    Outcome,
    candidates,
    choose,
    clopper_pearson,
    front,
    loss_bound,
    policy_threshold,
    reference,
)


def test_the_clopper_pearson_bounds_have_their_closed_forms_at_the_ends() -> None:
    # 0 of n: the upper bound solves (1 - p)^n = alpha; n of n: the lower bound solves p^n = alpha
    assert clopper_pearson(0, 100, 0.10)[1] == pytest.approx(1 - 0.10 ** (1 / 100), abs=1e-12)  # 2.28 points
    assert clopper_pearson(100, 100, 0.05)[0] == pytest.approx(0.05 ** (1 / 100), abs=1e-12)
    assert clopper_pearson(0, 100, 0.10)[0] == 0.0 and clopper_pearson(100, 100, 0.10)[1] == 1.0


@pytest.mark.parametrize(("x", "n"), [(1, 10), (5, 50), (17, 40), (49, 50)])
def test_the_bounds_are_where_the_binomial_tail_is_alpha(x: int, n: int) -> None:
    low, high = clopper_pearson(x, n, 0.05)
    assert scipy.stats.binom.cdf(x, n, high) == pytest.approx(0.05, abs=1e-9)  # P(X <= x | high) = alpha
    assert 1 - scipy.stats.binom.cdf(x - 1, n, low) == pytest.approx(0.05, abs=1e-9)  # P(X >= x | low) = alpha
    assert low < x / n < high


def test_the_bounds_cover_at_least_their_level() -> None:
    """Exact coverage: for any true share, the chance the upper bound falls below it is at most alpha."""
    n, alpha = 30, 0.10
    for p in (0.01, 0.05, 0.2, 0.5):
        miss = sum(math.comb(n, x) * p**x * (1 - p) ** (n - x) for x in range(n + 1)
                   if clopper_pearson(x, n, alpha)[1] < p)
        assert miss <= alpha + 1e-12


def _outcomes(pattern: list[tuple[bool, bool, float]], *, single_tokens: int = 100, team_tokens: int = 3000
              ) -> list[Outcome]:
    return [Outcome(id=str(i), signal=signal, single_correct=single, single_tokens=single_tokens,
                    team_correct={"team": team}, team_tokens={"team": team_tokens})
            for i, (single, team, signal) in enumerate(pattern)]


def test_no_discordant_pair_does_not_bound_the_loss_by_zero() -> None:
    """The old Wald bound was 0 here whatever n; the exact bound is positive and shrinks with n."""
    for n, expected in ((100, 1 - 0.05 ** (1 / 100)), (400, 1 - 0.05 ** (1 / 400))):
        outcomes = _outcomes([(True, True, 1.0)] * n)
        found = front(outcomes)
        bound = loss_bound(outcomes, found.single, found.best_static, alpha=0.10)
        assert bound == pytest.approx(expected, abs=1e-9)  # 2.9 points at 100, 0.75 at 400
    outcomes = _outcomes([(True, True, 1.0)] * 100)
    assert choose(outcomes, front(outcomes)).static  # 100 agreeing questions cannot show a 1-point promise


def test_the_correction_widens_each_bound_by_the_number_of_candidates() -> None:
    rng = random.Random(3)
    pattern = [(u < 0.7, u < 0.8, rng.random()) for u in (rng.random() for _ in range(300))]
    outcomes = _outcomes(pattern)
    found = front(outcomes)
    pool = candidates(found)
    assert len(pool) > 10 and pool[0] == found.single and all(p.tokens < found.best_static.tokens for p in pool)
    assert all(p.escalation_rate > 0 for p in pool[1:])  # a point that escalates nothing is the single agent
    chosen = choose(outcomes, found, tolerance=0.05)
    each = 0.10 / len(pool)
    passing = [p for p in pool if loss_bound(outcomes, p, found.best_static, alpha=each) <= 0.05]
    assert chosen == (passing[0] if passing else found.best_static)


def test_a_single_agent_more_accurate_than_the_team_is_kept_alone() -> None:
    pattern = [(i % 4 != 0, i % 2 == 0, 1.0 if i % 3 else 0.0) for i in range(200)]  # single 75%, team 50%
    outcomes = _outcomes(pattern)
    found = front(outcomes)
    assert reference(found) == found.single and candidates(found) == []
    chosen = choose(outcomes, found)
    assert chosen.target is None and chosen.label() == "single agent" and policy_threshold(chosen) == 0.0


def test_a_better_team_with_an_informative_signal_is_escalated_to_at_enough_questions() -> None:
    rng = random.Random(5)
    units = [rng.random() for _ in range(1200)]
    outcomes = _outcomes([(u < 0.7, u < 0.8, 1.0 if u < 0.7 else 0.0) for u in units])
    found = front(outcomes)
    chosen = choose(outcomes, found)
    assert not chosen.static and chosen.target == "team" and 0 < policy_threshold(chosen) < ALWAYS
    assert chosen.tokens < 0.4 * found.best_static.tokens
