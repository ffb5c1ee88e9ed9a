"""Many tests and small samples: Holm's adjustment, minimum detectable differences, possible published cells."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from teammed.evals.stats import holm, mcnemar, mde_paired, published_consistency


def test_holm_matches_the_textbook_example_and_keeps_order_and_gaps():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> running max 0.06
    assert holm([0.01, 0.04, 0.03, None, 0.005]) == pytest.approx([0.03, 0.06, 0.06, None, 0.02])
    assert holm([]) == [] and holm([None]) == [None]
    assert holm([0.6, 0.7]) == [1.0, 1.0]  # capped at 1
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5])


def test_holm_controls_the_family_wise_error_where_raw_p_values_do_not():
    rng = random.Random(3)
    raw_any = holm_any = 0
    runs = 400
    for _ in range(runs):
        p = [rng.random() for _ in range(20)]  # 20 true nulls
        raw_any += min(p) <= 0.05
        holm_any += min(v for v in holm(p) if v is not None) <= 0.05
    assert raw_any / runs > 0.5  # 1 - 0.95^20 = 0.64 of tables show a "significant" null
    assert holm_any / runs <= 0.08


def test_mde_is_the_normal_formula_and_shrinks_with_n():
    assert mde_paired(30, 7 / 30) == pytest.approx(2.801585 * math.sqrt((7 / 30) / 30), abs=1e-6)
    assert mde_paired(150, 0.2) < mde_paired(30, 0.2)
    assert mde_paired(10, 0.0) == mde_paired(10, 0.1)  # no discordance seen counts as 1/n
    assert mde_paired(0, 0.5) is None


def test_mde_paired_is_the_difference_found_80_percent_of_the_time():
    """Simulated paired questions with the stated discordance and difference: McNemar rejects ~80%."""
    n, share = 150, 0.3
    delta = mde_paired(n, share)
    rng = random.Random(11)
    hits = 0
    trials = 600
    p_b, p_c = (share + delta) / 2, (share - delta) / 2
    for _ in range(trials):
        b = c = 0
        for _ in range(n):
            u = rng.random()
            b += u < p_b
            c += p_b <= u < p_b + p_c
        hits += mcnemar(b, c) <= 0.05
    assert 0.7 <= hits / trials <= 0.9


def test_a_possible_cell_is_recognised_from_its_own_counts():
    counts = (41, 44, 46)  # correct of 50 per seed
    accs = [2 * c for c in counts]
    mean, se = statistics.fmean(accs), statistics.stdev(accs) / math.sqrt(3)
    check = published_consistency(round(mean, 1), round(se, 1), n=50, k=3)
    assert check.consistent and check.mean_possible and check.se_possible
    assert not published_consistency(71.7, 1.1, n=50, k=3).mean_possible  # 71.7 x 1.5 = 107.55
    with pytest.raises(ValueError, match="k >= 2"):
        published_consistency(50.0, 1.0, n=50, k=1)


def test_wilson_interval_matches_known_values_and_stays_in_bounds():
    from teammed.evals.stats import wilson_interval

    low, high = wilson_interval(25, 30)
    assert (round(low, 4), round(high, 4)) == (0.6644, 0.9266)  # the textbook Wilson score interval
    assert wilson_interval(0, 10)[0] == 0.0 and 0.27 < wilson_interval(0, 10)[1] < 0.28
    assert wilson_interval(10, 10)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_interval(3, 0)
