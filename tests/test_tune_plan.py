"""A calls= budget is planned before the first call: at or above the minimum a tune ends with a Special Set."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from teammed.backends.simulated import SimulatedTeamLM, answer_key, simulated_questions
from teammed.errors import ConfigError
from teammed.optimizers.tune import TuneSettings, first_rate, make_plan, tune
from teammed.optimizers.tune_plan import BelowMinimum
from teammed.optimizers.tune_queue import Budget
from tests.helpers import wordy_team

SETTINGS = TuneSettings(dataset="sim", model="sim", optimizer="none", batch_size=5, stage1_batches=3, pool_size=6)


def _world(n_tune=60, n_eval=20, seed=3):
    tq = simulated_questions(n_tune, seed=seed, prefix="t")
    eq = simulated_questions(n_eval, seed=seed, prefix="e")
    return tq, eq, SimulatedTeamLM(answer_key(tq + eq), seed=seed)


def _question_file(tmp_path: Path, n: int) -> Path:
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": q.id, "question": q.question, "options": q.options,
                                        "answer_idx": q.answer_idx}) + "\n"
                            for q in simulated_questions(n, seed=1, prefix="c")))
    return data


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
    mipro = TuneSettings(dataset="s", model="m", optimizer="mipro")  # no call bound: tokens= only stops it
    unplanned = make_plan(mipro, Budget(tokens=10), n_tune=60, n_eval=20)
    assert unplanned.budget_calls is None and "tokens=10 is not planned for this optimizer" in unplanned.text()


# ---------------------------------------------------------------- tokens= and usd=
def _rate(settings=SETTINGS, budget=None, *, questions=None, max_tokens=64, prices=None):
    return first_rate(settings, budget or Budget(tokens=1), questions or _world()[0], max_tokens=max_tokens,
                      prices=prices, model="simulated")  # the simulated team's, as the tune rates it


def test_the_estimated_rate_is_the_dry_run_s_tokens_a_call_and_demos_repeat_prompts_and_answers():
    """The rate a tokens=/usd= budget is planned at is `--dry-run`'s estimate per call (the model's tokenizer,
    the measured answer lengths), not a bytes-and-max_tokens bound (14x high on real MedQA questions)."""
    from teammed.config import COMPONENTS, TeamworkConfig, config_from_components
    from teammed.data import load_dataset
    from teammed.estimate import estimate_program
    from teammed.programs.teamwork import TeamworkProgram

    questions = load_dataset("demo")
    longest = sorted(questions, key=lambda q: -len(q.question))[:2]
    config = config_from_components(list(COMPONENTS), n_turns=2, n_agents="auto").model_dump(mode="json")
    per_call = []
    for q in longest:
        found = estimate_program(lambda: TeamworkProgram(TeamworkConfig.build(**config)), [q], model="gpt-4o-mini",
                                 max_tokens=300)
        per_call.append((found.prompt_tokens / found.calls, found.completion_tokens / found.calls))
    settings = TuneSettings(dataset="d", model="m", optimizer="none")
    rate = first_rate(settings, Budget(tokens=1), questions, max_tokens=300, prices=None, model="gpt-4o-mini")
    assert rate.source == "estimated" and "tokenizer" in rate.detail
    assert rate.tokens == pytest.approx(max(p + a for p, a in per_call), abs=1)
    assert rate.tokens < 2000  # a MedQA-free demo question: hundreds of tokens a call, not thousands
    with_demos = first_rate(TuneSettings(dataset="d", model="m", optimizer="bootstrap"), Budget(usd=1.0), questions,
                            max_tokens=300, prices=(2e-6, 8e-6), model="gpt-4o-mini")
    worst = max(per_call, key=lambda c: c[0] + c[1])
    assert with_demos.tokens == pytest.approx(3 * worst[0] + 3 * worst[1], abs=2)  # 2 demos: (2+1) prompts, 2+1 answers
    assert "2 demo(s)" in with_demos.detail
    assert with_demos.usd == pytest.approx((3 * worst[0] + 2 * worst[1]) * 2e-6 + worst[1] * 8e-6, rel=0.01)


def test_a_tokens_budget_is_planned_in_calls_at_the_rate_and_refused_below_its_minimum():
    rate = _rate()
    free = make_plan(SETTINGS, None, n_tune=60, n_eval=20)
    need = free.minimum * rate.tokens
    with pytest.raises(BelowMinimum, match=rf"need tokens={need:,.0f}") as refused:
        make_plan(SETTINGS, Budget(tokens=need - rate.tokens), n_tune=60, n_eval=20, rate=rate)
    assert "estimated" in str(refused.value) and "max_tokens=64" in str(refused.value)
    plan = make_plan(SETTINGS, Budget(tokens=need), n_tune=60, n_eval=20, rate=rate)
    assert plan.budget_calls == free.minimum and not plan.proof and "tokens a call (estimated)" in plan.text()
    both = make_plan(SETTINGS, Budget(calls=free.minimum + free.proof_calls, tokens=10**9), n_tune=60, n_eval=20,
                     rate=rate)
    assert both.budget_calls == free.minimum + free.proof_calls and both.proof  # the tighter limit plans
    assert not both.fits({"calls": 1}, both.budget_calls)  # every limit is checked with the reserve
    tight = make_plan(SETTINGS, Budget(tokens=need), n_tune=60, n_eval=20, rate=rate)
    assert tight.fits({"tokens": 0}, 1) and not tight.fits({"tokens": need}, 1)
    with pytest.raises(ConfigError, match="prices per token"):
        first_rate(SETTINGS, Budget(usd=5), _world()[0], max_tokens=64, prices=None)
    with pytest.raises(ConfigError, match="max-tokens"):
        first_rate(SETTINGS, Budget(tokens=5), _world()[0], max_tokens=None, prices=None)
    with pytest.raises(ConfigError, match="planned at a rate"):
        make_plan(SETTINGS, Budget(tokens=10), n_tune=60, n_eval=20)


def test_a_tokens_budget_at_its_minimum_ends_with_a_special_set_replanned_at_the_measured_rate(tmp_path):
    tq, eq, lm = _world()
    rate = _rate(questions=tq)
    tokens = make_plan(SETTINGS, None, n_tune=len(tq), n_eval=len(eq)).minimum * rate.tokens
    out = tune(tune_questions=tq, eval_questions=eq, lm=lm, settings=SETTINGS, budget=Budget(tokens=tokens),
               storage=None, study_name="tok", out_dir=tmp_path, max_tokens=64)
    assert out.status == "done" and out.special_set_path is not None and out.special_set_path.exists()
    assert out.report["spent"]["tokens"] <= tokens
    first, replanned = out.report["plans"]
    assert "(estimated)" in first and "(measured)" in replanned
    measured = out.report["plan"]["rate"]
    assert measured["source"] == "measured" and measured["tokens"] < rate.tokens  # the estimate over-counts
    # measured cheaper than estimated: the rest was planned bigger than the estimate allowed
    assert out.report["plan"]["budget_calls"] > make_plan(SETTINGS, None, n_tune=len(tq), n_eval=len(eq)).minimum


def test_a_rate_measured_above_the_estimate_stops_after_the_first_batch_naming_the_budget_to_resume(tmp_path):
    tq, eq, _ = _world()
    lm = wordy_team(6, answer_key(tq + eq), seed=3)
    rate = _rate(questions=tq)
    tokens = make_plan(SETTINGS, None, n_tune=len(tq), n_eval=len(eq)).minimum * rate.tokens
    out = tune(tune_questions=tq, eval_questions=eq, lm=lm, settings=SETTINGS, budget=Budget(tokens=tokens),
               storage=None, study_name="verbose", out_dir=tmp_path, max_tokens=64)
    assert out.status == "budget" and out.stage == "1-behaviours" and out.special_set_path is None
    assert "measured" in out.message and "need tokens=" in out.message and "resume" in out.message
    assert out.report["spent"]["tokens"] <= tokens  # stopped after the first batch, within the budget
    first = out.report["plans"]
    assert len(first) == 1 and "(estimated)" in first[0]  # no plan at the measured rate could fit


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

    flags = ["tune", "--dataset", str(_question_file(tmp_path, 200)), "--n-eval", "20", "--optimizer", "none",
             "--batch-size", "5",
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


def test_cli_tune_plans_a_tokens_budget_before_opening_a_backend(tmp_path, capsys):
    from teammed.cli import main

    flags = ["tune", "--dataset", str(_question_file(tmp_path, 120)), "--n-eval", "10", "--optimizer", "none",
             "--batch-size", "5",
             "--model", "simulated", "--max-tokens", "64", "--out", str(tmp_path / "t")]
    assert main([*flags, "--budget", "tokens=20000"]) == 2
    err = capsys.readouterr().err
    assert "below the smallest tune" in err and "need tokens=" in err and "max_tokens=64" in err
    assert not (tmp_path / "t").exists()
    assert main([*flags, "--budget", "tokens=3e6"]) == 0
    captured = capsys.readouterr()
    assert "plan for tokens=3,000,000 = " in captured.err and "tokens a call (estimated)" in captured.err
    assert "special set:" in captured.out and "re-planned after stage 1's first batch: plan for" in captured.out
    assert "tokens a call (measured)" in captured.out
    report = json.loads((tmp_path / "t" / "tune_report.json").read_text())
    assert report["plan"]["rate"]["source"] == "measured" and report["spent"]["tokens"] <= 3e6


def test_a_tokens_plan_resumed_after_a_crash_is_the_plan_of_an_uninterrupted_run(tmp_path):
    """The re-plan reads only the cells it measured, so a resume (with more cells finished) plans the same."""
    tq, eq, lm = _world()
    tokens = make_plan(SETTINGS, None, n_tune=len(tq), n_eval=len(eq)).minimum * _rate(questions=tq).tokens
    whole = tune(tune_questions=tq, eval_questions=eq, lm=lm, settings=SETTINGS, budget=Budget(tokens=tokens),
                 storage=":memory:", study_name="w", out_dir=tmp_path / "whole", max_tokens=64)

    class Crashing(SimulatedTeamLM):
        def complete(self, messages, **kwargs):  # type: ignore[no-untyped-def]
            if self.n_calls >= whole.report["spent"]["calls"] * 0.4:  # real calls: the memo answers the rest
                raise KeyboardInterrupt  # the process dies in stage 2
            return super().complete(messages, **kwargs)

    store = f"sqlite:///{tmp_path / 'parts.db'}"
    with pytest.raises(KeyboardInterrupt):
        tune(tune_questions=tq, eval_questions=eq, lm=Crashing(answer_key(tq + eq), seed=3), settings=SETTINGS,
             budget=Budget(tokens=tokens), storage=store, study_name="p", out_dir=tmp_path / "parts", max_tokens=64)
    resumed = tune(tune_questions=tq, eval_questions=eq, lm=SimulatedTeamLM(answer_key(tq + eq), seed=3),
                   settings=SETTINGS, budget=Budget(tokens=tokens), storage=store, study_name="p",
                   out_dir=tmp_path / "parts", max_tokens=64)
    assert resumed.status == "done" and resumed.report["plans"] == whole.report["plans"]
    assert resumed.report["winner"] == whole.report["winner"]
    assert resumed.report["spent"]["tokens"] == whole.report["spent"]["tokens"] <= tokens


def test_held_out_questions_longer_than_the_tuning_ones_are_in_the_rate(tmp_path):
    """Stage 1 measures on tuning questions; the proof asks the held-out ones. Padded held-out questions and a
    team billing near the estimate: the plan covers the proof within the budget instead of overspending."""
    settings = TuneSettings(dataset="sim", model="sim", optimizer="labeled", batch_size=5, stage1_batches=2,
                            pool_size=3, compile_train=3)
    tq = simulated_questions(30, seed=3, prefix="t")
    eq = [q.model_copy(update={"question": q.question + " History: " + "the patient reports fatigue. " * 120})
          for q in simulated_questions(5, seed=4, prefix="e")]
    tuning_only = first_rate(settings, Budget(tokens=1), tq, max_tokens=64, prices=None, model="simulated")
    rate = first_rate(settings, Budget(tokens=1), tq, max_tokens=64, prices=None, eval_questions=eq,
                      model="simulated")
    assert rate.longest > 1.5 and rate.tokens > 1.5 * tuning_only.tokens
    free = make_plan(settings, None, n_tune=len(tq), n_eval=len(eq))
    tokens = (free.minimum + free.proof_calls) * rate.tokens
    out = tune(tune_questions=tq, eval_questions=eq, lm=wordy_team(3, answer_key(tq + eq), seed=3),
               settings=settings, budget=Budget(tokens=tokens), storage=None, study_name="long",
               out_dir=tmp_path, max_tokens=64)
    assert out.status == "done" and out.special_set_path is not None
    assert out.report["spent"]["tokens"] <= tokens
    assert out.report["plan"]["rate"]["longest"] == rate.longest  # the measured rate was scaled for the proof


def test_resuming_with_the_budget_a_stop_names_keeps_stage_ones_compiles(tmp_path):
    """A team far wordier than estimated stops after stage 1's first batch, naming the budget it needs; rerun with
    it, the tune finishes without compiling stage 1 again (its compiles keep their training questions)."""
    import optuna

    settings = TuneSettings(dataset="sim", model="sim", optimizer="bootstrap", batch_size=5, stage1_batches=2,
                            pool_size=3, compile_train=3)
    tq, eq = simulated_questions(30, seed=3, prefix="t"), simulated_questions(5, seed=4, prefix="e")
    rate = first_rate(settings, Budget(tokens=1), tq, max_tokens=64, prices=None, eval_questions=eq,
                      model="simulated")
    tokens = make_plan(settings, None, n_tune=len(tq), n_eval=len(eq)).minimum * rate.tokens
    store = f"sqlite:///{tmp_path / 's.db'}"

    def run(budget: float):
        return tune(tune_questions=tq, eval_questions=eq, lm=wordy_team(10, answer_key(tq + eq), seed=3),
                    settings=settings, budget=Budget(tokens=budget), storage=store, study_name="p", out_dir=tmp_path,
                    max_tokens=64)

    def compiles() -> list[tuple[str, int]]:
        study = optuna.load_study(study_name="p", storage=store)
        return sorted((t.user_attrs["cell"]["name"], t.user_attrs["cell"]["train"]) for t in study.get_trials()
                      if t.user_attrs.get("cell", {}).get("kind") == "compile")

    stopped = run(tokens)
    assert stopped.status == "budget" and stopped.stage == "1-behaviours" and "measured" in stopped.message
    need = float(re.search(r"need tokens=([\d,]+)", stopped.message).group(1).replace(",", ""))
    before = compiles()
    resumed = run(need)
    assert resumed.status == "done" and resumed.report["spent"]["tokens"] <= need
    stage1 = [c for c in compiles() if c[0] != "winner"]
    assert stage1 == before and len({train for _, train in stage1}) == 1  # not one stage-1 compile ran again


def test_usd_needs_are_rounded_up_and_a_backend_billing_nothing_keeps_the_estimated_price():
    from teammed.optimizers.tune_rate import CallRate, measured_rate

    rate = CallRate(2215, 0.0012345678, "estimated")
    free = make_plan(SETTINGS, None, n_tune=60, n_eval=20)
    with pytest.raises(BelowMinimum) as refused:
        make_plan(SETTINGS, Budget(usd=0.5), n_tune=60, n_eval=20, rate=rate)
    need = float(re.search(r"need usd=([\d.e-]+)", str(refused.value)).group(1))
    assert need >= free.minimum * rate.usd
    assert make_plan(SETTINGS, Budget(usd=need), n_tune=60, n_eval=20, rate=rate).budget_calls >= free.minimum
    unbilled = measured_rate([{"calls": 10, "tokens": 5000, "cost_usd": 0.0}], fallback=rate)
    assert unbilled.usd == rate.usd and "$0 billed" in unbilled.detail and unbilled.tokens == 500
    billed = measured_rate([{"calls": 10, "tokens": 5000, "cost_usd": 0.002}], fallback=rate)
    assert billed.usd == pytest.approx(0.0002)


def test_cli_tune_exits_non_zero_when_it_stops_without_a_special_set(tmp_path, capsys, monkeypatch):
    from teammed.cli import main
    from teammed.optimizers import tune as tune_module
    from teammed.optimizers.tune import TuneOutcome

    def stopped(**kwargs):  # type: ignore[no-untyped-def]
        return TuneOutcome("budget", "2-components", {"spent": {"calls": 7}}, None, tmp_path / "r.json",
                           "budget reached (tokens=9 of 9) with 3 cells left")

    monkeypatch.setattr(tune_module, "tune", stopped)
    flags = ["tune", "--dataset", str(_question_file(tmp_path, 60)), "--n-eval", "10", "--optimizer", "mipro",
             "--model", "simulated", "--budget", "tokens=1e9", "--out", str(tmp_path / "t")]
    assert main(flags) == 1
    err = capsys.readouterr().err
    assert "tune stopped in stage 2-components" in err and "no Special Set was written" in err
