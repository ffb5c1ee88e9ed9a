"""Issue 9: results a researcher can trust (run identity, honest failures, tuning kept off the
evaluation questions, cache-independent cost, typed versioned rows). Each test failed before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dspy
import pytest

from teammed.cli import main
from teammed.errors import FatalBackendError, NoAnswerError
from teammed.records import SCHEMA_VERSION, RunIdentity, load_row
from teammed.runner import RunFailed, RunSettings, RunStopped, run_questions
from teammed.types import Question

from .fake_openai import FakeOpenAI, completion

SCRIPTED = ["--model", "scripted", "--n-agents", "2"]


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _questions(n: int, *, unlabeled: set[int] = frozenset()) -> list[Question]:
    return [Question(id=f"q{i:03d}", question=f"Question {i}?", options={"A": "a", "B": "b", "C": "c"},
                     answer_idx=None if i in unlabeled else "ABC"[i % 3]) for i in range(n)]


def _write_data(path: Path, questions: list[Question]) -> Path:
    path.write_text("".join(json.dumps(q.model_dump(exclude_none=True)) + "\n" for q in questions))
    return path


def _identity(questions: list[Question], **extra: Any) -> RunIdentity:
    values = {"system": "fake", "label": "fake", "model": "none", "dataset": "t", "dataset_sha256": "0" * 64,
              "split": "test", "question_ids": [q.id for q in questions], **extra}
    return RunIdentity(**values)


class _Program(dspy.Module):
    """Answers by a rule of the question text; raises what ``fail(text)`` returns."""

    def __init__(self, fail=lambda text: None, answer: str = "A"):
        super().__init__()
        self.fail, self.answer, self.seen = fail, answer, []

    def forward(self, question: str, options: dict, context: str | None = None) -> dspy.Prediction:
        self.seen.append(question)
        error = self.fail(question)
        if error is not None:
            raise error
        return dspy.Prediction(answer=self.answer, rationale="r", confidence="High", record={}, transcript=[])


def _run(tmp_path: Path, questions: list[Question], program: dspy.Module, **settings: Any) -> dict:
    from teammed.backends.resolve import Deployment
    from teammed.backends.scripted import ScriptedLM

    return run_questions(questions, program_factory=lambda: program,
                         deployments=[Deployment("scripted", ScriptedLM(), 1)],
                         settings=RunSettings(out_dir=tmp_path / "run", identity=_identity(questions), **settings))


# ---------------------------------------------------------------- 1. run identity
def test_resume_with_another_preset_is_refused_and_appends_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    base = ["run", "--dataset", "demo", "--n", "3", *SCRIPTED, "--out", str(out)]
    assert main([*base, "--preset", "base"]) == 0
    before = (out / "results.jsonl").read_bytes(), (out / "run.json").read_bytes()
    capsys.readouterr()
    assert main([*base, "--preset", "all", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--resume refused" in err and "label" in err and '"base"' in err and '"all"' in err
    assert ((out / "results.jsonl").read_bytes(), (out / "run.json").read_bytes()) == before


def test_resume_with_another_file_of_the_same_name_is_refused(tmp_path, capsys):
    one, two = tmp_path / "a", tmp_path / "b"
    one.mkdir(), two.mkdir()
    data_a = _write_data(one / "sampled_50.jsonl", _questions(6))
    data_b = _write_data(two / "sampled_50.jsonl", _questions(6, unlabeled={0}))
    out = tmp_path / "run"
    args = ["run", "--split", "test", "--system", "zero_shot", "--model", "scripted", "--out", str(out)]
    assert main([*args, "--dataset", str(data_a)]) == 0
    n_before = len(_rows(out))
    capsys.readouterr()
    assert main([*args, "--dataset", str(data_b), "--resume"]) == 2
    assert "dataset_sha256" in capsys.readouterr().err
    assert len(_rows(out)) == n_before


def test_resume_against_another_api_base_is_refused_naming_the_server(tmp_path, capsys):
    out = tmp_path / "run"
    base = ["run", "--dataset", "demo", "--n", "2", *SCRIPTED, "--out", str(out)]
    assert main([*base, "--api-base", "http://bob:topsecret@127.0.0.1:9/v1"]) == 0
    identity = json.loads((out / "run.json").read_text())["identity"]
    assert identity["api_base"] == "http://bob:***@127.0.0.1:9/v1"  # the server, its password masked
    before = (out / "results.jsonl").read_bytes(), (out / "run.json").read_bytes()
    capsys.readouterr()
    assert main([*base, "--api-base", "http://127.0.0.1:10/v1", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--resume refused" in err and "api_base" in err and "127.0.0.1:10" in err and "topsecret" not in err
    assert main([*base, "--resume"]) == 2  # no server now, one then: another run too
    assert ((out / "results.jsonl").read_bytes(), (out / "run.json").read_bytes()) == before
    assert main([*base, "--api-base", "http://bob:topsecret@127.0.0.1:9/v1/", "--resume"]) == 0  # the same server


def test_a_run_recorded_before_the_server_was_part_of_its_identity_still_resumes(tmp_path):
    out = tmp_path / "run"
    base = ["run", "--dataset", "demo", "--n", "2", *SCRIPTED, "--out", str(out)]
    assert main(base) == 0
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["identity"].pop("api_base") is None
    (out / "run.json").write_text(json.dumps(manifest))  # as an older teammed wrote it
    assert main([*base, "--resume"]) == 0
    assert main([*base, "--api-base", "http://127.0.0.1:9/v1", "--resume"]) == 2


def test_torn_last_line_then_resume_gives_each_question_once(tmp_path):
    out = tmp_path / "run"
    args = ["run", "--dataset", "demo", "--n", "6", *SCRIPTED, "--out", str(out)]
    assert main(args) == 0
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    # a crash mid-write: the last row is half written, the two before it were never written
    (out / "results.jsonl").write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    assert main([*args, "--resume"]) == 0
    ids = [r["id"] for r in _rows(out)]
    assert sorted(ids) == sorted({json.loads(line)["id"] for line in lines}) and len(ids) == 6
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == len(ids) == 6 and summary["complete"] is True


def test_a_second_concurrent_run_into_the_same_directory_is_refused_at_once(tmp_path, capsys):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "teammed.cli", "run", "--dataset", "demo", "--n", "10", "--n-agents", "2",
               "--model", "scripted:0.15", "--concurrency", "1", "--out", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not (out / "results.jsonl").exists():
            time.sleep(0.05)
        started = time.monotonic()
        code = main(["run", "--dataset", "demo", "--n", "10", *SCRIPTED, "--out", str(out), "--resume"])
        assert code == 2 and time.monotonic() - started < 10
        err = capsys.readouterr().err
        assert f"pid {process.pid}" in err and "is being written by" in err
    finally:
        process.wait(timeout=120)
    ids = [r["id"] for r in _rows(out)]
    assert len(ids) == len(set(ids)) == 10


def test_retry_failed_reruns_failed_rows_in_place(tmp_path):
    questions = _questions(6)
    flaky = _Program(fail=lambda text: NoAnswerError("every final ranking fell back") if text.endswith(("1?", "4?"))
                     else None)
    summary = _run(tmp_path, questions, flaky)
    assert summary["n_failed"] == 2
    fixed = _Program()
    summary = _run(tmp_path, questions, fixed, resume=True, retry_failed=True)
    rows = _rows(tmp_path / "run")
    assert sorted(r["id"] for r in rows) == [q.id for q in questions]
    assert summary["n_failed"] == 0 and summary["retried_failed"] == 2 and len(fixed.seen) == 2


def test_summary_and_manifest_are_replaced_atomically(tmp_path, monkeypatch):
    import teammed.runner as runner

    written = []
    real = runner.write_atomic
    monkeypatch.setattr(runner, "write_atomic", lambda path, text: written.append(Path(path).name) or real(path, text))
    _run(tmp_path, _questions(2), _Program())
    assert written == ["run.json", "summary.json"]
    assert not list((tmp_path / "run").glob("*.tmp"))


# ---------------------------------------------------------------- 2. honest failures
def test_no_answer_error_fails_the_row_never_a_silent_option(tmp_path):
    questions = _questions(5)
    with pytest.raises(RunFailed, match="every one of the 5 questions failed"):  # it measured nothing
        _run(tmp_path, questions, _Program(fail=lambda text: NoAnswerError("no parseable final answer")),
             max_consecutive_failures=0)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())  # written before the refusal
    rows = _rows(tmp_path / "run")
    assert summary["n_failed"] == summary["n"] == 5 and summary["accuracy"] == 0.0
    for row in rows:
        assert row["failed"] and row["prediction"] is None and row["correct"] is False
        assert row["error"].startswith("NoAnswerError: no parseable final answer")
        assert row["error_type"] == "NoAnswerError"


def test_fatal_backend_errors_stop_the_run_after_k_in_a_row(tmp_path):
    questions = _questions(20)
    program = _Program(fail=lambda text: FatalBackendError("401 from the server", kind="authentication",
                                                           fix="set OPENAI_API_KEY to a valid key."))
    with pytest.raises(RunStopped) as stopped:
        _run(tmp_path, questions, program, max_consecutive_failures=3)
    assert "OPENAI_API_KEY" in str(stopped.value) and "3 consecutive" in str(stopped.value)
    rows = _rows(tmp_path / "run")
    assert len(rows) == 3 and len(program.seen) == 3  # the rest were not attempted
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["complete"] is False and summary["n"] == 3 and "authentication" in summary["stopped"]


def test_mixed_failures_do_not_stop_the_run(tmp_path):
    questions = _questions(8)

    def fail(text: str):
        if text.endswith(("2?", "5?")):
            return None
        return FatalBackendError("boom", kind="connection", fix="start the server.")

    summary = _run(tmp_path, questions, _Program(fail=fail), max_consecutive_failures=3)
    assert summary["n"] == 8 and summary["n_failed"] == 6 and summary["complete"]


def test_unlabeled_questions_are_answered_but_not_scored(tmp_path):
    questions = _questions(6, unlabeled={0, 1})
    summary = _run(tmp_path, questions, _Program(answer="A"))
    rows = {r["id"]: r for r in _rows(tmp_path / "run")}
    assert rows["q000"]["correct"] is None and rows["q000"]["labeled"] is False
    assert summary["n_unlabeled"] == 2 and summary["n_labeled"] == 4
    labeled_correct = sum(q.answer_idx == "A" for q in questions if q.answer_idx)
    assert summary["accuracy"] == round(labeled_correct / 4, 4)
    from teammed.evals import summarize

    metrics = summarize(list(rows.values()))
    assert metrics["n_unlabeled"] == 2 and metrics["accuracy"] == labeled_correct / 4
    assert metrics["calibration"]["by_confidence"]["High"]["n"] == 4


def test_a_constant_predictor_is_flagged(tmp_path):
    summary = _run(tmp_path, _questions(12), _Program(answer="B"))
    assert summary["answer_spread"] == {"n_answered": 12, "top": "B", "share": 1.0, "constant": True}
    assert summary["majority_baseline"]["letter"] in "ABC"


def _garbage(n: int, body: dict) -> tuple[int, dict, dict]:
    return 200, {}, completion("I think the answer is probably something")


def _unauthorized(n: int, body: dict) -> tuple[int, dict, dict]:
    return 401, {}, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                               "code": "invalid_api_key"}}


def _fake_args(server: FakeOpenAI, *extra: str) -> list[str]:
    return ["--model", "openai/fake", "--api-base", server.api_base, "--no-cache", "--retry-attempts", "2",
            "--retry-base", "0.01", "--retry-cap", "0.02", "--timeout", "5", *extra]


def _server_error(n: int, body: dict) -> tuple[int, dict, dict]:
    return 500, {}, {"error": {"message": "internal error", "type": "server_error"}}


def test_search_writes_no_special_set_when_every_trial_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    out = tmp_path / "special_sets"
    with FakeOpenAI(_server_error) as server:  # transient errors until retries run out: trials FAIL, not 0%
        code = main(["search", "--dataset", "demo", "--n", "3", "--trials", "2", "--sampler", "brute",
                     "--out", str(out), *_fake_args(server)])
    assert code == 1
    assert not list(out.glob("*.json"))
    err = capsys.readouterr().err
    assert "no Special Set was written" in err and "2 failed" in err
    import optuna

    (db,) = out.glob("*_study/study.db")
    storage = f"sqlite:///{db}"
    study = optuna.load_study(study_name=optuna.get_all_study_names(storage)[0], storage=storage)
    assert [t.state.name for t in study.trials] == ["FAIL", "FAIL"]


def test_search_against_a_401_server_writes_no_special_set(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    out = tmp_path / "special_sets"
    with FakeOpenAI(_unauthorized) as server:
        code = main(["search", "--dataset", "demo", "--n", "3", "--trials", "2", "--sampler", "brute",
                     "--out", str(out), *_fake_args(server)])
    assert code == 1 and not list(out.glob("*.json"))
    assert "no Special Set was written" in capsys.readouterr().err


def test_compile_saves_nothing_when_its_evaluation_failed(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    program = tmp_path / "prog.json"
    with FakeOpenAI(_unauthorized) as server:
        code = main(["compile", "--dataset", "demo", "--optimizer", "labeled", "--train", "2", "--val", "1",
                     "--test", "2", "--system", "zero_shot", "--out", str(program), *_fake_args(server)])
    assert code == 1 and not program.exists()




def test_a_401_server_stops_the_run_quickly_with_a_non_zero_exit(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    data = _write_data(tmp_path / "q.jsonl", _questions(30))
    started = time.monotonic()
    with FakeOpenAI(_unauthorized) as server:
        code = main(["run", "--dataset", str(data), "--split", "test", "--system", "zero_shot", "--concurrency",
                     "1", "--out", str(tmp_path / "run"), *_fake_args(server)])
    assert code == 1 and time.monotonic() - started < 60
    assert "stopped after 5 consecutive" in capsys.readouterr().err
    assert len(_rows(tmp_path / "run")) == 5


# ---------------------------------------------------------------- 3. tuning never sees evaluation questions
def test_search_then_run_config_evaluate_zero_tuning_questions(tmp_path, capsys, caplog):
    out = tmp_path / "special_sets"
    assert main(["search", "--dataset", "demo", "--n", "4", "--trials", "1", "--sampler", "brute",
                 *SCRIPTED[:2], "--out", str(out)]) == 0
    (path,) = out.glob("demo-*.json")
    tuned = set(json.loads(path.read_text())["tuning"]["question_ids"])
    assert len(tuned) == 4
    assert main(["run", "--dataset", "demo", "--config", str(path), *SCRIPTED, "--out", str(tmp_path / "r1")]) == 0
    assert not tuned & {r["id"] for r in _rows(tmp_path / "r1")}  # the default split is disjoint
    capsys.readouterr()
    # over the whole split the overlap is left out, said and recorded
    assert main(["run", "--dataset", "demo", "--split", "test", "--config", str(path), *SCRIPTED,
                 "--out", str(tmp_path / "r2")]) == 0
    assert "left out 4 of 20 questions" in caplog.text  # a warning of the library's log (stderr from the CLI)
    assert not tuned & {r["id"] for r in _rows(tmp_path / "r2")} and len(_rows(tmp_path / "r2")) == 16
    manifest = json.loads((tmp_path / "r2" / "run.json").read_text())
    assert manifest["overlap"]["overlapping"] == 4 and sorted(manifest["overlap"]["excluded_ids"]) == sorted(tuned)
    assert main(["run", "--dataset", "demo", "--split", "test", "--config", str(path), "--allow-overlap", *SCRIPTED,
                 "--out", str(tmp_path / "r3")]) == 0
    assert len(_rows(tmp_path / "r3")) == 20
    assert json.loads((tmp_path / "r3" / "run.json").read_text())["overlap"]["allowed"] is True


def test_compile_records_its_tuning_questions_and_run_leaves_them_out(tmp_path):
    program = tmp_path / "prog.json"
    assert main(["compile", "--dataset", "demo", "--optimizer", "labeled", "--train", "3", "--val", "1", "--test",
                 "2", "--preset", "leadership", *SCRIPTED, "--out", str(program)]) == 0
    document = json.loads(program.read_text())
    meta = (document.get("teammed") or document)["meta"]  # program format 2 keeps it in the envelope
    tuned = set(meta["tuned_on"]["question_ids"])
    assert len(tuned) == 4
    assert main(["run", "--dataset", "demo", "--split", "test", "--program", str(program), *SCRIPTED[:2],
                 "--out", str(tmp_path / "run")]) == 0
    assert not tuned & {r["id"] for r in _rows(tmp_path / "run")}


def test_default_splits_of_tuning_and_evaluation_are_disjoint():
    from teammed.data import load_dataset
    from teammed.data.splits import apply_plan, plan_split

    questions = load_dataset("demo")
    tune = apply_plan(questions, plan_split("demo", purpose="tune"))
    evaluate = apply_plan(questions, plan_split("demo", purpose="eval"))
    assert tune and evaluate and not {q.id for q in tune} & {q.id for q in evaluate}
    assert len(tune) + len(evaluate) == len(questions)
    assert plan_split("medqa", purpose="tune").source_split == "train"
    assert plan_split("medqa", purpose="eval").source_split is None  # the default (test) split, whole


def test_same_file_name_never_shares_a_study_or_a_report_column(tmp_path):
    one, two = tmp_path / "a", tmp_path / "b"
    one.mkdir(), two.mkdir()
    data_a = _write_data(one / "sampled_50.jsonl", _questions(12))
    data_b = _write_data(two / "sampled_50.jsonl", [q.model_copy(update={"question": q.question + "!"})
                                                    for q in _questions(12)])
    out = tmp_path / "special_sets"
    for data in (data_a, data_b):
        assert main(["search", "--dataset", str(data), "--n", "2", "--trials", "1", "--sampler", "brute",
                     "--model", "scripted", "--out", str(out)]) == 0
    assert len(list(out.glob("sampled_50-*.json"))) == 2
    for name, data in (("ra", data_a), ("rb", data_b)):
        assert main(["run", "--dataset", str(data), "--system", "zero_shot", "--model", "scripted",
                     "--out", str(tmp_path / "runs" / name)]) == 0
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "report")]) == 0
    datasets = json.loads((tmp_path / "report" / "summary.json").read_text())["datasets"]
    assert len(datasets) == 2 and all(d.startswith("sampled_50@") for d in datasets)


# ---------------------------------------------------------------- 4. cost independent of the cache
def _schema_answer(n: int, body: dict) -> tuple[int, dict, dict]:
    from teammed.backends.scripted import schema_example

    fmt = body.get("response_format") or {}
    schema = fmt.get("json_schema", {}).get("schema") or fmt.get("schema") or {"properties": {}}
    return 200, {}, completion(json.dumps(schema_example(schema)), prompt_tokens=100, completion_tokens=10)




def test_a_run_served_from_cache_reports_the_same_tokens_per_question(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = _write_data(tmp_path / "q.jsonl", _questions(4))
    with FakeOpenAI(_schema_answer) as server:
        flags = ["--model", "openai/fake", "--api-base", server.api_base, "--cache-dir", str(tmp_path / "cache"),
                 "--dataset", str(data), "--split", "test", "--system", "zero_shot"]
        assert main(["run", *flags, "--out", str(tmp_path / "first")]) == 0
        calls = len(server.requests)
        assert main(["run", *flags, "--out", str(tmp_path / "second")]) == 0
        assert len(server.requests) == calls  # served from the cache
    first, second = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("first", "second"))
    assert second["cache_hits"] == second["calls"] > 0
    for key in ("prompt_tokens_per_question", "completion_tokens_per_question"):
        assert first[key] == second[key] > 0
    rows = _rows(tmp_path / "second")
    assert all(r["prompt_tokens"] > 0 and r["spent_prompt_tokens"] == 0 for r in rows)


# ---------------------------------------------------------------- 5. typed, versioned rows
def test_rows_are_typed_and_versioned(tmp_path):
    _run(tmp_path, _questions(2), _Program())
    for row in _rows(tmp_path / "run"):
        assert row["schema_version"] == SCHEMA_VERSION
        assert load_row(row).id == row["id"]


def test_runner_does_not_import_evals():
    code = "import sys, teammed.runner; print(any(m.startswith('teammed.evals') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_report_reads_rows_written_before_schema_versions_and_refuses_newer(tmp_path, capsys):
    old = tmp_path / "old"
    old.mkdir()
    legacy = [{"id": "q1", "dataset": "d", "seed": 1, "system": "teamwork", "label": "base", "gold": "A",
               "prediction": "A", "correct": True, "failed": False, "error": None, "confidence": "High",
               "options": {"A": "a", "B": "b"}, "calls": 3, "prompt_tokens": 10, "completion_tokens": 2},
              {"id": "q2", "dataset": "d", "seed": 1, "system": "teamwork", "label": "base", "gold": None,
               "prediction": "B", "correct": False, "failed": False, "error": None, "confidence": "High",
               "options": {"A": "a", "B": "b"}, "calls": 3}]
    (old / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in legacy))
    assert main(["report", str(old), "--out", str(tmp_path / "rep")]) == 0
    group = json.loads((tmp_path / "rep" / "summary.json").read_text())["groups"][0]
    assert group["accuracy"]["mean"] == 1.0 and group["metrics"]["n_unlabeled"] == 1  # unlabeled is not wrong
    newer = tmp_path / "newer"
    newer.mkdir()
    (newer / "results.jsonl").write_text(json.dumps({**legacy[0], "schema_version": SCHEMA_VERSION + 1}) + "\n")
    assert main(["report", str(newer), "--out", str(tmp_path / "rep2")]) == 2
    assert "upgrade teammed" in capsys.readouterr().err


def test_report_never_writes_into_a_run_and_marks_partial_runs(tmp_path, capsys):
    questions = _questions(12)
    program = _Program(fail=lambda text: FatalBackendError("down", kind="connection", fix="start it."))
    with pytest.raises(RunStopped):
        _run(tmp_path, questions, program, max_consecutive_failures=2)
    run = tmp_path / "run"
    before = sorted(p.name for p in run.iterdir())
    assert main(["report", str(run), "--out", str(run / "report")]) == 2
    assert "never writes into a run" in capsys.readouterr().err
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    assert sorted(p.name for p in run.iterdir()) == before
    group = json.loads((tmp_path / "report" / "summary.json").read_text())["groups"][0]
    assert group["partial"] and "†" in (tmp_path / "report" / "report.md").read_text()


def test_credentials_in_the_command_line_never_reach_the_run_directory(tmp_path, monkeypatch):
    out = tmp_path / "run"
    argv = ["teammed", "run", "--api-base", "http://bob:topsecret@127.0.0.1:9/v1"]
    monkeypatch.setattr(sys, "argv", argv)
    assert main(["run", "--dataset", "demo", "--n", "2", *SCRIPTED, "--api-base", argv[-1], "--out", str(out)]) == 0
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            if path.name in (".lock", "run.json"):
                assert "bob:***@" in text
            assert "topsecret" not in text, path




def test_a_garbage_server_fails_every_question(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeOpenAI(_garbage) as server:
        code = main(["run", "--dataset", "demo", "--n", "4", "--n-agents", "2", "--out", str(tmp_path / "run"),
                     *_fake_args(server)])
    assert code == 1  # every question failed: the run measured nothing, and says so in its status
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_failed"] == summary["n"] == 4
    assert all(r["error_type"] == "NoAnswerError" and r["prediction"] is None for r in _rows(tmp_path / "run"))


def test_a_file_whose_eval_part_is_empty_is_refused_naming_split_all(tmp_path, capsys):
    from teammed.data.splits import part_of

    qid = next(f"t{i}" for i in range(1000) if part_of(f"t{i}") == "tune")
    data = _write_data(tmp_path / "one.jsonl", [Question(id=qid, question="Q?", options={"A": "a", "B": "b"},
                                                         answer_idx="A")])
    args = ["run", "--dataset", str(data), "--system", "zero_shot", "--model", "scripted"]
    assert main([*args, "--out", str(tmp_path / "r1")]) == 2
    assert "--split all" in capsys.readouterr().err
    assert main([*args, "--split", "all", "--out", str(tmp_path / "r2")]) == 0
    assert [r["id"] for r in _rows(tmp_path / "r2")] == [qid]


def test_no_leader_correction_switches_the_override_call_off(tmp_path):
    """`--no-leader-correction` removes the leader's review call: one call fewer per question."""
    calls = {}
    for name, extra in (("on", []), ("off", ["--no-leader-correction"])):
        out = tmp_path / name
        assert main(["run", "--dataset", "demo", "--n", "2", "--model", "scripted", "--preset", "leadership",
                     "--n-agents", "2", "--out", str(out), *extra]) == 0
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        calls[name] = {r["calls"] for r in rows}
        recorded = json.loads((out / "run.json").read_text())["identity"]["config"]["leader_correction"]
        assert recorded is (None if name == "on" else False)  # part of the identity: never merged with "on"
    assert calls["on"] == {c + 1 for c in calls["off"]}


def test_report_never_averages_runs_of_different_identities(tmp_path):
    """Seeds of one identity merge into one row; runs of one label that differ in team size (or
    model, program, split, ...) are distinct rows whose labels name the difference."""
    from teammed.evals.report import build_report

    def run(name: str, *extra: str) -> Path:
        out = tmp_path / name
        assert main(["run", "--dataset", "demo", "--n", "3", "--preset", "base", *SCRIPTED, *extra,
                     "--out", str(out)]) == 0
        return out

    dirs = [run("a111", "--seed", "111", "--n-agents", "2"), run("a222", "--seed", "222", "--n-agents", "2"),
            run("b111", "--seed", "111", "--n-agents", "3")]
    build_report(dirs, out_dir=tmp_path / "report", baseline=None)
    numbers = json.loads((tmp_path / "report" / "summary.json").read_text())
    groups = {g["config"]: g for g in numbers["groups"]}
    assert set(groups) == {"base [n_agents=2]", "base [n_agents=3]"}, set(groups)
    assert len(groups["base [n_agents=2]"]["runs"]) == 2 and len(groups["base [n_agents=3]"]["runs"]) == 1


@pytest.mark.parametrize("handler", [_unauthorized, _server_error], ids=["401", "500"])
def test_a_failing_search_prints_no_traceback(tmp_path, handler):
    """Optuna prints the traceback of any exception leaving an objective; failed trials must not."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-wrong", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with FakeOpenAI(handler) as server:
        done = subprocess.run([sys.executable, "-m", "teammed.cli", "search", "--dataset", "demo", "--n", "2",
                               "--trials", "2", "--sampler", "brute", "--out", str(tmp_path / "s"),
                               *_fake_args(server)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "no Special Set was written" in done.stderr


def test_resume_of_a_directory_holding_no_run_says_it_starts_afresh(tmp_path, caplog):
    from teammed.cli import main

    out = tmp_path / "never-ran"
    assert main(["run", "--dataset", "demo", "--n", "2", "--model", "scripted", "--out", str(out), "--resume"]) == 0
    assert "nothing to resume" in caplog.text
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_a_refused_resume_prints_only_the_refusal(tmp_path, capsys):
    from teammed.cli import main

    out = tmp_path / "r"
    assert main(["run", "--dataset", "demo", "--n", "2", "--model", "scripted", "--out", str(out)]) == 0
    assert "| 2 questions |" in capsys.readouterr().err  # the header, once the run starts
    assert main(["run", "--dataset", "demo", "--n", "2", "--model", "scripted", "--out", str(out), "--preset", "all",
                 "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--resume refused" in err[0]
