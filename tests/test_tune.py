"""`tune`, its work queue, racing, memo and the simulated team."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from teammed import usage
from teammed.backends.scripted import ScriptedLM
from teammed.backends.simulated import (
    DEFAULT_TABLE,
    PlantedTable,
    SimulatedTeamLM,
    answer_key,
    infer_components,
    simulated_questions,
)
from teammed.config import config_from_components
from teammed.errors import ConfigError, DataError
from teammed.optimizers._scoring import score_questions
from teammed.optimizers._space import subset_label, valid_subsets
from teammed.optimizers.tune import (
    TuneSettings,
    _label,
    check_disjoint,
    first_rate,
    make_plan,
    neighbours,
    screen_rounds,
    tune,
)
from teammed.optimizers.tune_memo import MemoLM
from teammed.optimizers.tune_queue import Budget, BudgetSpent, WorkQueue, parse_budget
from teammed.optimizers.tune_race import one_sided_sign_p, race
from teammed.programs.teamwork import TeamworkProgram
from tests.helpers import wordy_team

ROOT = Path(__file__).resolve().parents[1]
PLANTED = subset_label(DEFAULT_TABLE.best(valid_subsets(min_turns=2)))


def _world(seed: int, n_tune: int = 100, n_eval: int = 20):
    tq = simulated_questions(n_tune, seed=seed, prefix="t")
    eq = simulated_questions(n_eval, seed=seed, prefix="e")
    return tq, eq, SimulatedTeamLM(answer_key(tq + eq), seed=seed)


# ---------------------------------------------------------------- simulated team
def test_simulated_team_infers_every_valid_configuration_from_its_prompts():
    tq, _, lm = _world(0, n_tune=2)
    for subset in valid_subsets(min_turns=2):
        lm.seen.clear()
        score_questions(TeamworkProgram(config_from_components(list(subset))), tq[:1], lm)
        assert set(lm.seen) == {subset_label(subset)}, subset


def test_simulated_team_accuracy_follows_the_planted_table_and_is_request_pure():
    tq, _, lm = _world(3, n_tune=60)
    best = list(DEFAULT_TABLE.best(valid_subsets(min_turns=2)))
    for comps in ([], ["trust"], best):
        rows = score_questions(TeamworkProgram(config_from_components(comps)), tq, lm)
        expected = [lm.correct(q.full_text(), comps) for q in tq]
        assert [r.correct for r in rows] == expected  # the team's answer is the planted coin, nothing else
    again = SimulatedTeamLM(answer_key(tq), seed=3)
    rows2 = score_questions(TeamworkProgram(config_from_components(best)), tq, again)
    assert [r.correct for r in rows2] == [lm.correct(q.full_text(), best) for q in tq]


def test_planted_table_has_a_harmful_component_and_an_interaction():
    t = PlantedTable()
    assert t.accuracy(["trust"]) < t.accuracy([])
    assert t.accuracy(["team_orientation"]) == t.accuracy([])
    assert t.accuracy(["leadership", "team_orientation"]) > t.accuracy(["leadership"]) + 0.05
    assert infer_components({"team_context": "Reliability now: a", "history": "", "role": "x"}) == ("trust",)


def test_tune_code_never_reads_the_planted_table():
    for path in (ROOT / "optimizers").glob("tune*.py"):
        text = path.read_text()
        assert "simulated" not in text.lower() and "PlantedTable" not in text, path


# ---------------------------------------------------------------- racing, budget, memo
def test_one_sided_sign_test():
    assert one_sided_sign_p(0, 5) == pytest.approx(1 / 32)
    assert one_sided_sign_p(5, 0) == 1.0
    assert one_sided_sign_p(0, 0) == 1.0
    assert one_sided_sign_p(2, 2) == pytest.approx(11 / 16)


def test_racing_drops_equal_configurations_at_most_alpha_per_race_and_worse_ones_quickly():
    """By simulation: 8 equal configurations raced 10 rounds (every look counted) and an incumbent picked
    after the data; the fixed-n sign test this replaced dropped about a third of them."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "racing_error.py"
    spec = importlib.util.spec_from_file_location("racing_error", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    scenario = module.scenario

    common = {"races": 150, "rounds": 10, "batch": 10, "alpha": 0.05, "seed": 5}
    equal = scenario({f"c{i}": 0.6 for i in range(8)}, **common)
    assert equal["share_dropped_per_race"] <= 0.05
    assert equal["share_dropped_per_race_fixed_n"] > 0.2  # the old rule: the simulation can tell them apart
    worse = scenario({"worse": 0.45, **{f"c{i}": 0.7 for i in range(5)}}, **common)
    assert worse["dropped_by_config"]["worse"] >= 0.9
    assert max(v for c, v in worse["dropped_by_config"].items() if c != "worse") <= 0.05


def test_the_pool_is_screened_on_the_first_third_of_the_rounds():
    assert [screen_rounds(n, 2) for n in (2, 3, 6, 8, 15, 30)] == [2, 2, 2, 3, 5, 10]
    assert screen_rounds(15, 7) == 7 and screen_rounds(4, 7) == 4  # never fewer than min_rounds, never more than all


def test_race_drops_a_configuration_significantly_worse_on_shared_questions():
    ids = [f"q{i}" for i in range(20)]
    rounds = [ids[:10], ids[10:]]
    scores = {"good": {q: True for q in ids}, "bad": {q: i % 4 == 0 for i, q in enumerate(ids)},
              "close": {q: i != 3 for i, q in enumerate(ids)}}
    state = race(["good", "bad", "close"], rounds, scores, {}, alpha=0.05, min_rounds=1)
    assert "bad" not in state.alive and "good" in state.alive and "close" in state.alive
    assert state.history[0]["dropped"] == "bad" and state.history[0]["incumbent"] == "good"
    partial = race(["good", "bad"], rounds, {"good": scores["good"], "bad": {}}, {}, alpha=0.05)
    assert partial.rounds == 0 and partial.alive == ["good", "bad"]  # unfinished round: nothing decided


def test_parse_budget_and_careless_values():
    assert parse_budget("calls=2000") == Budget(calls=2000)
    assert parse_budget("tokens=2e6,usd=5") == Budget(tokens=2e6, usd=5.0)
    for bad in ("", "calls", "calls=-1", "dollars=5", "usd=abc"):
        with pytest.raises(ConfigError):
            parse_budget(bad)
    assert Budget(calls=10).spent({"calls": 10}) == "calls=10 of 10"
    assert Budget(usd=1.0).spent({"cost_usd": 0.5}) is None


def test_memo_counts_every_call_as_billable_and_reports_reuse_separately():
    inner = ScriptedLM()
    memo = MemoLM(inner)
    with usage.track() as one:
        memo(messages=[{"role": "user", "content": "same"}])
    with usage.track() as used:
        first = memo(messages=[{"role": "user", "content": "same"}])
        second = memo(messages=[{"role": "user", "content": "same"}])
        memo(messages=[{"role": "user", "content": "same"}])
    assert len(inner.calls) == 1  # computed once
    assert used.calls == 3 and used.cache_hits == 0
    assert used.prompt_tokens == 3 * one.prompt_tokens > 0  # billed as if uncached
    assert first == second
    assert memo.stats() == {"requests": 4, "hits": 3}


# ---------------------------------------------------------------- work queue
def _study(tmp_path: Path, name: str = "q") -> optuna.Study:
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(tmp_path / "q.log")))
    return optuna.create_study(storage=storage, study_name=name, load_if_exists=True)


def test_queue_runs_each_cell_once_and_resumes_without_rerunning(tmp_path):
    ran = []
    cells = [{"kind": "x", "i": i} for i in range(5)]

    def execute(cell):
        ran.append(cell["i"])
        return {"value": cell["i"], "calls": 1}

    done = WorkQueue(_study(tmp_path)).run(cells, execute)
    assert sorted(ran) == list(range(5)) and len(done) == 5
    WorkQueue(_study(tmp_path)).run(cells, execute)
    assert len(ran) == 5  # resumed: nothing ran twice
    with pytest.raises(BudgetSpent, match="larger --budget"):
        WorkQueue(_study(tmp_path), budget=Budget(calls=5)).run([*cells, {"kind": "x", "i": 9}], execute)


def test_queue_reruns_the_cell_of_a_killed_worker(tmp_path):
    study = _study(tmp_path)
    cell = {"kind": "x", "i": 1}
    key = json.dumps(cell, sort_keys=True, separators=(",", ":"))
    study.enqueue_trial({}, user_attrs={"cell_key": key, "cell": cell})
    trial = study.ask()  # a worker took it, then died (pid that cannot exist)
    trial.set_user_attr("worker", f"{socket.gethostname()}:99999999")
    trial.set_user_attr("started", 0.0)
    done = WorkQueue(study, poll_s=0.01).run([cell], lambda c: {"value": 1.0})
    assert done[key]["value"] == 1.0
    assert study.get_trials(states=(TrialState.FAIL,))[0].number == trial.number


_QUEUE_WORKER = """
import sys, os, time
sys.path.insert(0, {root!r})
import optuna
from teammed.optimizers.tune_queue import WorkQueue
optuna.logging.set_verbosity(optuna.logging.WARNING)
storage = {storage}
study = optuna.create_study(storage=storage, study_name={name!r}, load_if_exists=True)
def execute(cell):
    time.sleep(0.05)
    return {{"value": cell["i"], "worker": os.getpid()}}
WorkQueue(study, poll_s=0.05).run([{{"kind": "x", "i": i}} for i in range(16)], execute)
"""


def _two_workers(tmp_path: Path, storage: str, name: str) -> list[optuna.trial.FrozenTrial]:
    script = _QUEUE_WORKER.format(root=str(ROOT / "src"), storage=storage, name=name)
    procs = [subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    return []


def test_two_processes_share_one_journal_queue(tmp_path):
    storage = (f"optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend("
               f"{str(tmp_path / 'shared.log')!r}))")
    _two_workers(tmp_path, storage, "shared")
    study = optuna.load_study(study_name="shared", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "shared.log"))))
    done = study.get_trials(states=(TrialState.COMPLETE,))
    keys = [t.user_attrs["cell_key"] for t in done if "result" in t.user_attrs]
    assert len(set(keys)) == 16 and len(keys) == 16  # every cell done exactly once
    assert len({t.user_attrs["result"]["worker"] for t in done}) == 2  # both processes worked


@pytest.mark.postgres
def test_two_processes_share_one_postgres_queue(tmp_path):
    url = os.environ.get("TEAMMED_PG_URL")
    if not url:
        pytest.skip("set TEAMMED_PG_URL to a PostgreSQL database to run this test")
    from teammed.optimizers._storage import open_storage

    name = f"teammed-queue-{uuid.uuid4().hex[:10]}"
    storage = f"__import__('teammed.optimizers._storage', fromlist=['x']).open_storage({url!r}, None)[0]"
    _two_workers(tmp_path, storage, name)
    backend = open_storage(url, tmp_path)[0]
    try:
        done = optuna.load_study(study_name=name, storage=backend).get_trials(states=(TrialState.COMPLETE,))
        assert len({t.user_attrs["cell_key"] for t in done}) == 16
        assert len({t.user_attrs["result"]["worker"] for t in done}) == 2
    finally:
        optuna.delete_study(study_name=name, storage=backend)


# ---------------------------------------------------------------- the pipeline
def test_tune_finds_the_planted_best_and_proves_it_on_held_out_questions(tmp_path):
    tq, eq, _ = _world(0, n_tune=80, n_eval=20)
    lm = SimulatedTeamLM(answer_key(tq + eq), seed=0, table=PlantedTable(noise=0.01))
    out = tune(tune_questions=tq, eval_questions=eq, lm=lm,
               settings=TuneSettings(dataset="sim", model="sim", optimizer="none"),
               budget=None, storage=None, study_name="s", out_dir=tmp_path)
    r = out.report
    assert out.status == "done" and r["winner"] == PLANTED
    assert r["influence"]["trust"] < 0 < r["influence"]["team_orientation"]
    # stage 2: the pool is screened on the first third of the rounds, then the climb races pairs on every round
    races = r["racing"]["races"]
    assert races[0]["entrants"] == r["pool"] and races[0]["rounds"] <= screen_rounds(8, 2) == 3
    assert len(races) > 1 and all(len(x["entrants"]) == 2 for x in races[1:])
    assert races[-1]["entrants"][0] == races[-1]["winner"] == PLANTED  # the winner held its last race
    dropped = {h["dropped"] for x in races for h in x["history"]}
    seen = {row["config"]: row["n"] for row in r["tried"]}
    settings = TuneSettings(dataset="sim", model="sim", optimizer="none")
    for n in neighbours(r["winner_config"], settings):  # it held against every neighbour, each settled
        assert _label(n) in dropped or seen.get(_label(n)) == len(tq), _label(n)
    assert not set(r["tuning"]["question_ids"]) & set(r["held_out_ids"])
    special = json.loads(out.special_set_path.read_text())
    assert special["tuning"] == r["tuning"] and special["held_out"]["n"] == 20
    from teammed.optimizers import load_special_set

    assert load_special_set(out.special_set_path).components == tuple(DEFAULT_TABLE.best(valid_subsets()))
    assert r["spent"]["calls"] == r["spent"]["tuning_calls"] + r["spent"]["proof_calls"]
    assert 0 < r["spent"]["reuse_rate"] < 1
    assert r["held_out"]["winner"]["accuracy"] > r["held_out"]["base"]["accuracy"]
    assert (tmp_path / "tune_report.md").read_text().count("| base |") >= 1


def test_tune_refuses_overlapping_questions():
    tq, eq, _ = _world(0, n_tune=30, n_eval=5)
    with pytest.raises(DataError, match="both tuning and held-out"):
        check_disjoint(tq, [*eq, tq[0]])


def test_budget_stops_cleanly_and_a_resume_matches_an_uninterrupted_run(tmp_path):
    settings = TuneSettings(dataset="sim", model="sim", optimizer="none", pool_size=3, batch_size=5, stage1_batches=2)
    tq, eq, lm = _world(1, n_tune=30, n_eval=5)
    whole = tune(tune_questions=tq, eval_questions=eq, lm=lm, settings=settings, budget=None, storage=":memory:",
                 study_name="w", out_dir=tmp_path / "whole")
    store = f"sqlite:///{tmp_path / 'parts.db'}"
    # a team far wordier than the tokens= plan's estimate: the hard limit stops the run where it is reached
    rate = first_rate(settings, Budget(tokens=1), tq, max_tokens=64, prices=None)
    limit = make_plan(settings, None, n_tune=len(tq), n_eval=len(eq)).minimum * rate.tokens
    stopped = tune(tune_questions=tq, eval_questions=eq, lm=wordy_team(50, answer_key(tq + eq), seed=1),
                   settings=settings, budget=Budget(tokens=limit), storage=store, study_name="p",
                   out_dir=tmp_path / "parts", max_tokens=64)
    assert stopped.status == "budget" and stopped.special_set_path is None and "budget reached" in stopped.message
    state = json.loads((tmp_path / "parts" / "tune_state.json").read_text())
    assert state["status"] == "budget" and state["spent"]["tokens"] >= limit
    fresh = SimulatedTeamLM(answer_key(tq + eq), seed=1)
    resumed = tune(tune_questions=tq, eval_questions=eq, lm=fresh, settings=settings, budget=Budget(calls=10**7),
                   storage=store, study_name="p", out_dir=tmp_path / "parts")
    assert resumed.status == "done" and resumed.report["winner"] == whole.report["winner"]
    assert fresh.n_calls < whole.report["spent"]["calls"]  # the resume did not redo the finished cells
    assert resumed.report["spent"]["calls"] == whole.report["spent"]["calls"]  # same figures, run order aside
    with pytest.raises(ConfigError, match="repeat them to resume"):
        tune(tune_questions=tq, eval_questions=eq, lm=fresh,
             settings=TuneSettings(dataset="sim", model="sim", optimizer="none"),
             budget=None, storage=store, study_name="p", out_dir=tmp_path / "parts")


def test_tune_with_a_prompt_optimizer_compiles_stage1_and_the_winner(tmp_path):
    tq, eq, lm = _world(2, n_tune=24, n_eval=6)
    out = tune(tune_questions=tq, eval_questions=eq, lm=lm,
               settings=TuneSettings(dataset="sim", model="sim", optimizer="labeled", batch_size=6,
                                     stage1_batches=1, pool_size=3, compile_train=4),
               budget=None, storage=":memory:", study_name="c", out_dir=tmp_path)
    assert out.status == "done"
    prompts = {row["prompts"] for row in out.report["tried"]}
    assert prompts == {"stage1"}
    from teammed.programs.load import load_program

    program, _ = load_program(out.report["program"], system="teamwork")
    assert max(len(p.demos) for _, p in program.named_predictors()) > 0  # the compiled winner carries its demos
    # like with like: the winner's components are also proven with the uncompiled prompts every other arm has
    held = out.report["held_out"]
    assert set(held) == {"winner", "winner_uncompiled", "base", "all", "single"}
    assert set(out.report["held_out_components_only"]) == {"base", "all", "single"}
    assert out.report["held_out_comparison"]["winner_uncompiled"]["n_pairs"] == held["winner"]["n"]
    assert "the components alone" in (tmp_path / "tune_report.md").read_text()


def test_the_cli_and_tune_settings_share_one_set_of_defaults():
    import dataclasses

    from teammed.cli import build_parser, spec_of
    from teammed.experiments.tune import SETTING_FIELDS as SETTING_FLAGS
    from teammed.experiments.tune import _settings

    args = build_parser().parse_args(["tune", "--dataset", "demo", "--budget", "calls=10"])
    defaults = {f.name: f.default for f in dataclasses.fields(TuneSettings)}
    assert all(getattr(args, name) is None for name in SETTING_FLAGS)  # nothing of its own: TuneSettings' values
    settings = _settings(spec_of(args), "demo", "m")
    assert {name: getattr(settings, name) for name in SETTING_FLAGS} == {name: defaults[name] for name in SETTING_FLAGS}
    text = build_parser()._subparsers._group_actions[0].choices["tune"].format_help()
    for name in ("optimizer", "seed", "batch_size", "stage1_batches", "pool_size", "alpha"):
        assert f"(default: {defaults[name]})" in " ".join(text.split()), name  # the help states the same values


def test_cli_tune_and_run_the_special_set(tmp_path, capsys):
    from teammed.cli import main

    data = tmp_path / "sim.jsonl"
    qs = simulated_questions(70, seed=5, prefix="cli")
    data.write_text("".join(json.dumps({"id": q.id, "question": q.question, "options": q.options,
                                        "answer_idx": q.answer_idx}) + "\n" for q in qs))
    out = tmp_path / "out"
    assert main(["tune", "--dataset", str(data), "--budget", "calls=1e6", "--model", "simulated:5", "--optimizer",
                 "none", "--n-eval", "6", "--out", str(out), "--no-cache", "--pool-size", "2", "--batch-size", "5",
                 "--stage1-batches", "1"]) == 0
    special = json.loads((out / "sim.json").read_text())
    from teammed.data.splits import part_of

    assert all(part_of(i) == "tune" for i in special["tuning"]["question_ids"])
    assert all(part_of(i) == "eval" for i in special["held_out"]["ids"])
    with pytest.raises(SystemExit) as stopped:  # refused while parsing: nothing is created
        main(["tune", "--dataset", str(data), "--budget", "calls=-3", "--model", "simulated"])
    assert stopped.value.code == 2 and "calls=N" in capsys.readouterr().err


def test_run_on_tunes_outputs_evaluates_no_tuning_question(tmp_path, capsys, caplog):
    """tune -> run --config/--program over the whole file: the questions tuned on are left out and recorded."""
    from teammed.cli import main

    data = tmp_path / "sampled_50.jsonl"
    qs = simulated_questions(60, seed=7, prefix="leak")
    data.write_text("".join(json.dumps({"id": q.id, "question": q.question, "options": q.options,
                                        "answer_idx": q.answer_idx}) + "\n" for q in qs))
    out = tmp_path / "tuned"
    assert main(["tune", "--dataset", str(data), "--budget", "calls=1e6", "--model", "simulated:7", "--optimizer",
                 "none", "--n-eval", "6", "--out", str(out), "--no-cache", "--pool-size", "2", "--batch-size", "5",
                 "--stage1-batches", "1"]) == 0
    special_path = out / "sampled_50.json"
    special = json.loads(special_path.read_text())
    tuned = set(special["tuning"]["question_ids"])
    assert tuned and special["tuning"]["dataset_sha256"]
    for flag, path in (("--config", special_path), ("--program", Path(special["program"]))):
        run_dir = tmp_path / f"run{flag}"
        capsys.readouterr()
        caplog.clear()
        assert main(["run", "--dataset", str(data), "--split", "all", "--n", "60", flag, str(path),
                     "--model", "scripted", "--no-cache", "--out", str(run_dir)]) == 0
        ids = {json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines()}
        assert ids and not ids & tuned, flag
        assert f"left out {len(tuned)} of 60" in caplog.text  # a warning of the library's log
        overlap = json.loads((run_dir / "run.json").read_text())["overlap"]
        assert overlap["overlapping"] == len(tuned) and not overlap["allowed"]


@pytest.mark.parametrize("status", [401, 500])
def test_tune_never_scores_failures_as_zero(tmp_path, monkeypatch, capsys, status):
    """Every question failing (a bad key, a dead server) stops tune: exit 1, no Special Set."""
    from teammed.cli import main
    from tests.fake_openai import FakeOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    out = tmp_path / "tuned"
    with FakeOpenAI(lambda n, b: (status, {}, {"error": {"message": "no", "type": "x"}})) as server:
        code = main(["tune", "--dataset", "demo", "--budget", "calls=1e5", "--optimizer", "none", "--batch-size", "2",
                     "--n-eval", "2", "--model", "openai/fake", "--api-base", server.api_base, "--no-cache",
                     "--retry-attempts", "2", "--retry-base", "0.01", "--retry-cap", "0.02", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "no Special Set was written" in err and "Traceback" not in err
    assert not (out / "demo.json").exists() and not (out / "demo.program.json").exists()


def test_the_memo_passes_the_schema_to_the_backend_that_takes_it():
    """Under tune's memo the backend still decides the dialect: a llama.cpp server got the full
    schema with its maxLength and died on the grammar before this."""
    import dspy

    from teammed.adapter import SchemaAdapter
    from teammed.backends.litellm_backend import LiteLLMBackend
    from teammed.optimizers.tune_memo import MemoLM
    from teammed.signatures import InitialAssessment
    from tests.fake_openai import FakeOpenAI, completion

    answer = json.dumps({"ranking": ["B", "A"], "justification": "x", "facts": ["a", "b"], "confidence": "High"})
    with FakeOpenAI(lambda n, b: (200, {}, completion(answer))) as server:
        inner = LiteLLMBackend("openai/local", api_base=server.api_base, api_key="k",
                               structured_output="json_object_schema", profile="llamacpp")
        memo = MemoLM(inner)
        assert memo.takes_schema and memo.structured_output == "json_object_schema"
        with dspy.context(lm=memo, adapter=SchemaAdapter()):
            dspy.Predict(InitialAssessment)(question="q?", options={"A": "a", "B": "b"}, role="r", shared_context="")
        sent = server.requests[0]["response_format"]
    assert sent["type"] == "json_object" and "maxLength" not in json.dumps(sent)
