"""Issue 32, items 4-6: honest small-sample tests in `reproduce`, and winners within noise.

A cell's SE is never below the binomial SE of its questions (one seed, or seeds that agree,
never make a cell exact); the seeds' SE is read with a t on k-1 degrees of freedom, the
published one on 2; the table's heading names the test; a tuned row whose held-out proof did
not run says so.
"""

from __future__ import annotations

import math

import pytest

from teammed.evals.stats import (
    binomial_se,
    cell_estimate,
    mcnemar,
    t_ppf,
    t_sf,
    versus_runner_up,
    welch_t_test,
)
from teammed.optimizers.reproduce import ReproduceSettings, _markdown, _table
from teammed.optimizers.tune_queue import cell_key


@pytest.mark.parametrize("t,df,two_sided", [
    (12.706, 1, 0.05), (4.303, 2, 0.05), (3.182, 3, 0.05), (2.776, 4, 0.05), (2.228, 10, 0.05),
    (9.925, 2, 0.01), (1.886, 2, 0.2), (1.960, math.inf, 0.05),
])
def test_t_distribution_matches_the_textbook_critical_values(t, df, two_sided) -> None:
    assert 2 * t_sf(t, df) == pytest.approx(two_sided, abs=2e-4)
    assert t_ppf(1 - two_sided / 2, df) == pytest.approx(t, abs=2e-3)
    assert t_sf(-t, df) == pytest.approx(1 - t_sf(t, df))


def test_the_binomial_se_is_never_zero() -> None:
    assert binomial_se(2, 2) > 0.15 and binomial_se(0, 2) == pytest.approx(binomial_se(2, 2))
    # far from the ends it is close to sqrt(p(1-p)/n)
    assert binomial_se(75, 150) == pytest.approx(math.sqrt(0.25 / 150), rel=0.05)


def test_one_seed_or_agreeing_seeds_take_the_binomial_se() -> None:
    one = cell_estimate([0.5], [2])
    assert (one.source, one.df, one.k, one.n) == ("binomial", math.inf, 1, 2) and one.se > 0.2
    agree = cell_estimate([0.6, 0.6, 0.6], [50, 50, 50])
    assert agree.source == "binomial" and agree.se == pytest.approx(binomial_se(90, 150))
    spread = cell_estimate([0.4, 0.6, 0.8], [50, 50, 50])
    assert (spread.source, spread.df) == ("seeds", 2.0) and spread.se == pytest.approx(0.2 / math.sqrt(3))


def test_welch_takes_satterthwaite_degrees_of_freedom() -> None:
    p, df = welch_t_test(10.0, 3.0, 2, 3.0, 2)
    assert df == pytest.approx(4.0) and p == pytest.approx(2 * t_sf(10 / math.sqrt(18), 4))
    p_inf, df_inf = welch_t_test(10.0, 3.0, math.inf, 3.0, 2)  # the binomial side has no small-df term
    assert df_inf == pytest.approx(2 * 2.0 * 2) and p_inf < 1
    assert welch_t_test(1.0, 0.0, 2, 0.0, 2) is None


def _grid(row: str, code: str, per_seed: dict[int, list[bool]], *, shared: bool = False
          ) -> tuple[list[dict], dict[str, dict]]:
    """One cell per seed; each seed draws its own questions unless ``shared`` (all draw the same)."""
    cells, done = [], {}
    for seed, correct in per_seed.items():
        cell = {"kind": "table1", "dataset": code, "row": row, "seed": seed, "special": None}
        cells.append(cell)
        done[cell_key(cell)] = {"ids": [f"q{i}" if shared else f"{seed}-q{i}" for i in range(len(correct))],
                                "correct": correct,
                                "failed": [False] * len(correct), "value": sum(correct) / len(correct),
                                "calls": len(correct), "tokens": 0, "cost_usd": 0.0}
    return cells, done


def test_one_seed_on_two_questions_gets_no_confident_p() -> None:
    """The issue's case: Zero-Shot PQA 50.0 on two questions against the published 69.3 ± 7.0."""
    cells, done = _grid("Zero-Shot", "PQA", {111: [True, False]})
    settings = ReproduceSettings(model="m", seeds=(111,), n=2, rows=("Zero-Shot",))
    (row,) = _table(cells, done, settings)
    assert row["published_consistent"] and row["measured_se_source"] == "binomial"
    assert row["measured_se"] > 20  # two questions: about ±21 points, not ±0
    assert row["p_vs_published"] is None  # was 0.006 with an SE of 0; two questions test nothing
    assert "too few questions (2)" in row["test_refused"]
    text = _markdown([row], {}, settings)
    assert "Welch t-test" in text and "± 20.7 b |" in text and "Not tested against the paper" in text


def test_one_seed_of_fifty_questions_is_tested_with_its_binomial_se() -> None:
    cells, done = _grid("Zero-Shot", "PQA", {111: [True] * 30 + [False] * 20})
    settings = ReproduceSettings(model="m", seeds=(111,), n=50, rows=("Zero-Shot",))
    (row,) = _table(cells, done, settings)
    se = 100 * binomial_se(30, 50)
    assert row["measured_se_source"] == "binomial" and row["measured_se"] == pytest.approx(se, abs=0.01)
    p, _ = welch_t_test(60.0 - 69.3, se, math.inf, 7.0, 2)
    assert row["test_refused"] is None and row["p_vs_published"] == pytest.approx(p, rel=1e-3) and p > 0.2


def test_seeds_that_drew_the_same_questions_count_them_once() -> None:
    per_seed = {s: [True] * k + [False] * (50 - k) for s, k in ((111, 40), (222, 45), (333, 48))}
    settings = ReproduceSettings(model="m", rows=("Zero-Shot",))
    (row,) = _table(*_grid("Zero-Shot", "PQA", per_seed, shared=True), settings)
    assert row["n_distinct"] == 50 and row["measured_se_source"] == "binomial"  # 50 questions, not 150
    assert row["measured_se"] == pytest.approx(100 * binomial_se(44, 50), abs=0.01)
    (disjoint,) = _table(*_grid("Zero-Shot", "PQA", per_seed), settings)
    assert disjoint["n_distinct"] == 150 and disjoint["measured_se_source"] == "seeds"


def test_three_seeds_use_a_t_not_the_normal_law() -> None:
    cells, done = _grid("Zero-Shot", "PQA", {s: [True] * k + [False] * (50 - k)
                                             for s, k in ((111, 40), (222, 45), (333, 48))})
    settings = ReproduceSettings(model="m", rows=("Zero-Shot",))
    (row,) = _table(cells, done, settings)
    accs = [80.0, 90.0, 96.0]
    se = math.sqrt(sum((a - sum(accs) / 3) ** 2 for a in accs) / 2) / math.sqrt(3)
    assert row["measured_se_source"] == "seeds" and row["measured_se"] == pytest.approx(se, abs=0.01)
    p, df = welch_t_test(row["difference"], se, 2, 7.0, 2)
    assert row["p_vs_published"] == pytest.approx(p, rel=1e-3) and 2 <= row["df_vs_published"] <= 4
    normal = math.erfc(abs(row["difference"]) / math.hypot(se, 7.0) / math.sqrt(2))
    assert row["p_vs_published"] > normal  # the t's heavier tails: a larger p than the z-test gave


def test_the_tuned_row_says_its_proof_did_not_run() -> None:
    cells, done = _grid("TeamMed (tuned)", "MQA", {111: [True, False, True]})
    settings = ReproduceSettings(model="m", seeds=(111,), n=3, rows=("TeamMed (tuned)",))
    (row,) = _table(cells, done, settings, {"MQA": {"proven": False, "dataset_sha256": "abc"}})
    assert row["proof"] == "not run" and row["dataset_sha256"] == "abc"
    text = _markdown([row], {}, settings)
    assert "TeamMed (tuned) (held-out proof not run)" in text and "unproven" in text
    (proven,) = _table(cells, done, settings, {"MQA": {"proven": True, "dataset_sha256": "abc"}})
    assert proven["proof"] == "run" and "not run" not in _markdown([proven], {}, settings)


def test_a_winner_ahead_by_two_questions_of_ten_is_within_noise() -> None:
    ids = [f"q{i}" for i in range(10)]
    winner = dict.fromkeys(ids, False) | {"q0": True, "q1": True, "q2": True, "q3": True}
    runner = dict.fromkeys(ids, False) | {"q0": True, "q1": True}
    versus = versus_runner_up(winner, runner)
    assert (versus["b"], versus["c"], versus["n_pairs"]) == (2, 0, 10)
    assert versus["p_mcnemar"] == mcnemar(2, 0) == 0.5 and versus["within_noise"]
    far = versus_runner_up(dict.fromkeys(ids, True), dict.fromkeys(ids, False))
    assert far["p_mcnemar"] < 0.01 and not far["within_noise"]
    assert versus_runner_up(winner, {})["within_noise"]  # no shared question: nothing shows the lead


def test_search_says_when_its_winner_is_within_noise(tmp_path, capsys) -> None:
    import json

    from teammed.cli import main

    out = tmp_path / "s"
    assert main(["search", "--dataset", "demo", "--split", "all", "--n", "6", "--trials", "3", "--sampler", "brute",
                 "--model", "simulated:3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    (special,) = [json.loads(p.read_text()) for p in out.glob("*.json")]
    versus = special["runner_up"]
    assert versus["n_pairs"] == 6 and versus["test"] == "exact McNemar on paired questions"
    assert versus["p_mcnemar"] == mcnemar(versus["b"], versus["c"])
    assert versus["within_noise"] == (versus["p_mcnemar"] >= 0.05)
    word = "within noise" if versus["within_noise"] else "beyond noise"
    assert "Runner-up:" in printed and word in printed
    (report,) = out.glob("*_study/search_report.md")
    assert "Runner-up:" in report.read_text() and word in report.read_text()


def test_tune_says_when_its_winner_is_within_noise(tmp_path, capsys) -> None:
    import json

    from teammed.cli import main

    out = tmp_path / "t"
    assert main(["tune", "--dataset", "demo", "--budget", "calls=1e6", "--model", "scripted", "--optimizer", "none",
                 "--n-eval", "2", "--batch-size", "2", "--pool-size", "2", "--stage1-batches", "1",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "tune_report.json").read_text())
    versus = report["runner_up"]
    assert versus is not None and versus["runner_up"] != report["winner"] and versus["n_pairs"] > 0
    assert versus["within_noise"] == (versus["p_mcnemar"] >= 0.05)
    assert "Runner-up:" in printed and "Runner-up:" in (out / "tune_report.md").read_text()
