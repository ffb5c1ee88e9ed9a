"""A calls= budget is planned before the first call: at or above the minimum a tune ends with a Special Set."""

from __future__ import annotations

import json

import pytest

from teammed.backends.simulated import SimulatedTeamLM, answer_key, simulated_questions
from teammed.errors import ConfigError
from teammed.optimizers.tune import TuneSettings, make_plan, tune
from teammed.optimizers.tune_queue import Budget

SETTINGS = TuneSettings(dataset="sim", model="sim", optimizer="none", batch_size=5, stage1_batches=3, pool_size=6)


def _world(n_tune=60, n_eval=20, seed=3):
    tq = simulated_questions(n_tune, seed=seed, prefix="t")
    eq = simulated_questions(n_eval, seed=seed, prefix="e")
    return tq, eq, SimulatedTeamLM(answer_key(tq + eq), seed=seed)


def test_the_plan_shrinks_stages_before_dropping_the_proof_and_refuses_below_the_minimum():
    free = make_plan(SETTINGS, None, n_tune=60, n_eval=20)
    minimum, proof = free.minimum, free.proof_calls
    plans = [make_plan(SETTINGS, Budget(calls=c), n_tune=60, n_eval=20)
             for c in (minimum, minimum + proof - 1, minimum + proof, 100_000)]
    assert [p.proof for p in plans] == [False, False, True, True]
    assert (plans[0].stage1_batches, plans[0].pool_size) == (1, 2)  # the minimum: smallest stages
    assert (plans[2].stage1_batches, plans[2].pool_size) == (1, 2)  # the proof first, then bigger stages
    assert (plans[3].stage1_batches, plans[3].pool_size, plans[3].minimum) == (3, 6, minimum)  # room: as configured
    assert all(p.reserve <= (p.budget_calls or 0) for p in plans)
    with pytest.raises(ConfigError, match=rf"below the {minimum:,} calls the smallest tune"):
        make_plan(SETTINGS, Budget(calls=minimum - 1), n_tune=60, n_eval=20)
    with pytest.raises(ConfigError, match="no call bound to plan with"):
        make_plan(TuneSettings(dataset="s", model="m", optimizer="mipro"), Budget(calls=10**6), n_tune=60, n_eval=20)
    assert make_plan(SETTINGS, Budget(tokens=10), n_tune=60, n_eval=20).budget_calls is None  # only calls= planned


def test_a_budget_below_the_minimum_is_refused_before_any_call(tmp_path):
    tq, eq, lm = _world()
    minimum = make_plan(SETTINGS, None, n_tune=len(tq), n_eval=len(eq)).minimum
    with pytest.raises(ConfigError, match="below the"):
        tune(tune_questions=tq, eval_questions=eq, lm=lm, settings=SETTINGS, budget=Budget(calls=minimum - 1),
             storage=None, study_name="low", out_dir=tmp_path / "low")
    assert lm.n_calls == 0 and not (tmp_path / "low").exists()


@pytest.mark.parametrize("extra, proof", [(0, False), (None, True)])
def test_any_budget_from_the_minimum_up_ends_with_a_special_set_within_it(tmp_path, extra, proof):
    tq, eq, lm = _world()
    plan = make_plan(SETTINGS, None, n_tune=len(tq), n_eval=len(eq))
    calls = plan.minimum + (extra if extra is not None else plan.proof_calls)
    out = tune(tune_questions=tq, eval_questions=eq, lm=lm, settings=SETTINGS, budget=Budget(calls=calls),
               storage=None, study_name="b", out_dir=tmp_path)
    assert out.status == "done" and out.special_set_path is not None and out.special_set_path.exists()
    assert out.report["spent"]["calls"] <= calls and lm.n_calls <= calls  # within the budget, billable and real
    assert out.report["plan"]["proof"] is proof
    special = json.loads(out.special_set_path.read_text())
    stages = out.report["stages_completed"]
    if proof:
        assert stages[-1] == "4" and special["held_out"]["n"] == len(eq)
    else:
        assert stages[-1].startswith("4 not run") and special["held_out"] == {
            "ids": [], "proof": "not run: the budget did not cover it"}
        assert out.report["held_out"] is None
    assert special["stages_completed"] == stages


def test_bootstrap_compiles_fit_in_the_plan(tmp_path):
    tq, eq, lm = _world(n_tune=30, n_eval=5)
    settings = TuneSettings(dataset="sim", model="sim", optimizer="bootstrap", batch_size=5, stage1_batches=1,
                            pool_size=2, compile_train=3)
    plan = make_plan(settings, None, n_tune=len(tq), n_eval=len(eq))
    calls = plan.minimum + plan.proof_calls
    out = tune(tune_questions=tq, eval_questions=eq, lm=lm, settings=settings, budget=Budget(calls=calls),
               storage=None, study_name="bs", out_dir=tmp_path)
    assert out.status == "done" and out.report["spent"]["calls"] <= calls
    assert out.report["stages_completed"][2] == "3"


def test_cli_tune_refuses_a_small_budget_before_opening_a_backend_and_prints_its_plan(tmp_path, capsys):
    from teammed.cli import main

    data = tmp_path / "q.jsonl"
    qs = simulated_questions(200, seed=1, prefix="c")
    data.write_text("".join(json.dumps({"id": q.id, "question": q.question, "options": q.options,
                                        "answer_idx": q.answer_idx}) + "\n" for q in qs))
    flags = ["tune", "--dataset", str(data), "--n-eval", "20", "--optimizer", "none", "--batch-size", "5",
             "--model", "simulated", "--out", str(tmp_path / "t")]
    assert main([*flags, "--budget", "calls=50"]) == 2
    err = capsys.readouterr().err
    assert "below the" in err and "calls the smallest tune" in err
    assert not (tmp_path / "t").exists()
    settings = TuneSettings(dataset="q", model="m", optimizer="none", batch_size=5)
    minimum = make_plan(settings, None, n_tune=60, n_eval=20).minimum  # 30% of 200 questions tune
    assert main([*flags, "--budget", f"calls={minimum}"]) == 0
    captured = capsys.readouterr()
    assert f"plan for calls={minimum:,}" in captured.err and "held-out proof NOT run" in captured.out
    assert "stages: 1; 2" in captured.out and "4 not run" in captured.out
    assert "it/s" not in captured.err and "%|" not in captured.err  # teammed's lines only, no tqdm bars
    assert list((tmp_path / "t").glob("*.json"))


def test_tune_with_bootstrap_prints_teammeds_lines_only(tmp_path, capsys):
    """DSPy's optimizers print "Bootstrapped ..." and draw tqdm bars; Optuna logs study creation: none of it
    reaches tune's output."""
    from teammed.cli import main

    assert main(["tune", "--dataset", "demo", "--budget", "calls=1e6", "--optimizer", "bootstrap", "--batch-size",
                 "2", "--pool-size", "2", "--stage1-batches", "1", "--n-eval", "3", "--model", "simulated:1",
                 "--no-cache", "--out", str(tmp_path / "t")]) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "Bootstrapped" not in text and "it/s" not in text and "A new study created" not in text
    assert "plan for calls=" in captured.err and "stages: 1; 2; 3; 4" in captured.out
